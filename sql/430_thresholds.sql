-- Relevance feedback and Shadow's adaptive thresholds (the tune job), and its thresholds by
-- relevance kind.

-- ------------------------------------------------------------------ thresholds by relevance kind
-- shadow-memory-system.md, 8. Configuration: `thresholds: { default: 0.3, semantic: 0.3,
-- contextual: 0.3, temporal: 0.3 }` beside the thresholds by context type (3., query .75 ...).
-- The design does not say how the two combine; pgmem asks for both (issue 24): a memory is
-- activated when its score reaches the context type's threshold AND the threshold of its own
-- relevance kind (activate's relevance_type: semantic, contextual, temporal; mixed takes default).
-- All four at .3, the defaults change nothing (the lowest context threshold, conversation, is .3);
-- raising one makes that kind of match prove more: e.g. temporal .9 keeps memories that are
-- mostly recent, not relevant, out of a conversation's context. A setting per tenant.
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'relevance_thresholds', '{"default": 0.3, "semantic": 0.3, "contextual": 0.3, "temporal": 0.3}',
   'activate(): Shadow''s thresholds by relevance kind; a memory is activated when its score reaches both its context type''s threshold and its relevance kind''s (mixed: default)')
on conflict (tenant, key) do nothing;

create or replace function pgmem._relevance_threshold(p_kinds jsonb, p_kind text) returns float8
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return coalesce((p_kinds->>p_kind)::float8, (p_kinds->>'default')::float8, 0);

create or replace function pgmem.relevance_threshold(relevance_type text default 'default') returns float8
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  perform pgmem._check_args('relevance_threshold', jsonb_build_object('relevance_type', relevance_threshold.relevance_type));  -- sizes first (issue 27)
  if relevance_type is null or relevance_type not in ('default', 'semantic', 'contextual', 'temporal', 'mixed') then
    perform pgmem._bad_input(format('unknown relevance_type "%s": the kinds are default, semantic, contextual, temporal, mixed',
                                    relevance_type));
  end if;
  -- (the expression of pgmem._relevance_threshold, which activate reads as the owner)
  return coalesce((pgmem._setting('relevance_thresholds')->>relevance_type)::float8,
                  (pgmem._setting('relevance_thresholds')->>'default')::float8, 0);
end $$;
comment on function pgmem.relevance_threshold(text) is
  'Shadow''s activation threshold of a relevance kind (default, semantic, contextual, temporal; mixed takes default) for the current tenant (setting relevance_thresholds, all .3). activate() asks for it as well as for the context type''s.';

-- ------------------------------------------------------------------ thresholds
create or replace function pgmem.feedback(memory_id bigint, query_id uuid, relevant boolean,
                                          context_type text default null, activated boolean default null)
returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  a record;
  id bigint;
begin
  perform pgmem._check_args('feedback', jsonb_build_object('context_type', context_type));  -- sizes first (issue 27)
  if relevant is null then perform pgmem._bad_input('relevant must be true or false'); end if;
  if not exists (select 1 from pgmem.memories m where m.id = feedback.memory_id and m.tenant = v_tenant) then
    raise exception 'memory % does not exist for tenant "%"', memory_id, v_tenant using errcode = 'P0002';
  end if;
  select l.context_type, l.activated, l.score into a from pgmem.activation_log l
   where l.query_id = feedback.query_id and l.memory_id = feedback.memory_id and l.tenant = v_tenant;
  if a.context_type is null and (context_type is null or activated is null) then
    perform pgmem._bad_input(format('no activation of memory %s was logged for query %s, so context_type and activated must be given',
                                    memory_id, coalesce(query_id::text, 'NULL')),
      'call pgmem.activate(..., query_id => ...) to log what was shown, or pass context_type and activated');
  end if;
  insert into pgmem.feedback (tenant, memory_id, query_id, relevant, context_type, activated, score)
  values (v_tenant, memory_id, query_id, relevant, coalesce(a.context_type, context_type),
          coalesce(a.activated, activated), a.score)
  returning feedback.id into id;
  return id;
end $$;
comment on function pgmem.feedback(bigint, uuid, boolean, text, boolean) is
  'Records whether a memory shown for a query (pgmem.activate(..., query_id)) was useful; tune_thresholds() learns from it.';

-- shadow-memory-system.md, ThresholdManager: per context type, false-positive rate > 0.2
-- raises the threshold by 0.1, else false-negative rate > 0.2 lowers it by 0.1, within [0,1].
--   false-positive rate = activated but irrelevant / activated
--   false-negative rate = relevant but not activated / relevant
-- Consistency: conversation and query are kept aligned (conversation never above query: a
-- query needs at least the confidence of chat). At least min_feedback rows are needed.
create or replace function pgmem.tune_thresholds(min_feedback integer default 10, step float8 default 0.1,
                                                 max_rate float8 default 0.2, tenant text default null)
returns table (tenant_id text, context_type text, old_value float8, new_value float8,
               false_positive_rate float8, false_negative_rate float8, feedback_count bigint)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  r record;
  v_old float8;
  v_new float8;
  v_changed bigint := 0;
  v_examined bigint := 0;
  v_prev text := current_setting('pgmem.tenant', true);
  q float8;
  c float8;
begin
  perform pgmem._check_args('tune_thresholds', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  v_run := pgmem._job_begin('tune', v_tenant, jsonb_build_object('min_feedback', min_feedback, 'step', step, 'max_rate', max_rate));
  if v_run is null then return; end if;
  for r in
    select f.tenant, f.context_type, count(*) as n,
           count(*) filter (where f.activated and not f.relevant)::float8 / nullif(count(*) filter (where f.activated), 0) as fpr,
           count(*) filter (where not f.activated and f.relevant)::float8 / nullif(count(*) filter (where f.relevant), 0) as fnr
      from pgmem.feedback f
     where f.tuned_at is null and (v_tenant is null or f.tenant = v_tenant)
     group by f.tenant, f.context_type
     having count(*) >= min_feedback
     order by 1, 2
  loop
    v_examined := v_examined + r.n;
    perform set_config('pgmem.tenant', r.tenant, true);
    v_old := pgmem.context_threshold(r.context_type);
    v_new := v_old;
    if coalesce(r.fpr, 0) > max_rate then v_new := least(1.0, v_old + step);
    elsif coalesce(r.fnr, 0) > max_rate then v_new := greatest(0.0, v_old - step);
    end if;
    update pgmem.feedback f set tuned_at = now()
     where f.tenant = r.tenant and f.context_type = r.context_type and f.tuned_at is null;
    if v_new <> v_old then
      insert into pgmem.thresholds as t (tenant, context_type, threshold) values (r.tenant, r.context_type, v_new)
      on conflict on constraint thresholds_pkey do update set threshold = excluded.threshold, updated_at = now();
      insert into pgmem.threshold_changes (tenant, context_type, old_value, new_value, false_positive_rate,
                                           false_negative_rate, feedback_count, reason, job_run_id)
      values (r.tenant, r.context_type, v_old, v_new, r.fpr, r.fnr, r.n,
              case when v_new > v_old then format('false-positive rate %s > %s', round(r.fpr::numeric, 3), max_rate)
                   else format('false-negative rate %s > %s', round(r.fnr::numeric, 3), max_rate) end, v_run);
      v_changed := v_changed + 1;
      tenant_id := r.tenant; context_type := r.context_type; old_value := v_old; new_value := v_new;
      false_positive_rate := r.fpr; false_negative_rate := r.fnr; feedback_count := r.n;
      return next;
      -- consistency: conversation <= query
      q := pgmem.context_threshold('query');
      c := pgmem.context_threshold('conversation');
      if c > q then
        insert into pgmem.thresholds as t (tenant, context_type, threshold)
        values (r.tenant, case when r.context_type = 'query' then 'conversation' else 'query' end,
                case when r.context_type = 'query' then q else c end)
        on conflict on constraint thresholds_pkey do update set threshold = excluded.threshold, updated_at = now();
        insert into pgmem.threshold_changes (tenant, context_type, old_value, new_value, feedback_count, reason, job_run_id)
        values (r.tenant, case when r.context_type = 'query' then 'conversation' else 'query' end,
                case when r.context_type = 'query' then c else q end, case when r.context_type = 'query' then q else c end,
                r.n, 'consistency: the conversation threshold may not exceed the query threshold', v_run);
        tenant_id := r.tenant; context_type := case when r.context_type = 'query' then 'conversation' else 'query' end;
        old_value := case when r.context_type = 'query' then c else q end;
        new_value := case when r.context_type = 'query' then q else c end;
        false_positive_rate := null; false_negative_rate := null;
        v_changed := v_changed + 1;
        return next;
      end if;
    end if;
  end loop;
  perform set_config('pgmem.tenant', coalesce(v_prev, ''), true);
  perform pgmem._job_end(v_run, v_examined, v_changed);
end $$;
comment on function pgmem.tune_thresholds(integer, float8, float8, text) is
  'Shadow adaptive thresholds: per tenant and context type with at least min_feedback new feedback rows, false-positive rate > 0.2 raises the threshold by 0.1, else false-negative rate > 0.2 lowers it; bounded to [0,1]; conversation kept <= query; every change in pgmem.threshold_changes.';

