-- Reflection (fragment-reconstructive-memory.md, Engine Goal Queue: REFLECT = 2, "background
-- processing"): consolidation of what was encoded. reflect() takes the memories embedded since
-- its last run (a keyset cursor on (embedded_at, id) in pgmem.job_state, like merge; only rows
-- older than the oldest open transaction, so a late commit cannot fall behind the cursor),
-- rebuilds their bindings (refresh_bindings: temporal, semantic, causal, concept,
-- supersedes) and re-scores their salience with the current goals. full_scan => true walks
-- every active memory instead (its own cursor, for one run). It is the safety net of the
-- ENCODE items the write paths queue, and what pg_cron runs hourly (run_job('reflect')).
--
-- Salience (fragment-reconstructive-memory.md, Salience Formula):
--   0.35 × emotional intensity + 0.30 × novelty + 0.25 × goal relevance + 0.10 × depth
-- re-scored from the memory's own fields: emotion from valence/arousal, novelty as the
-- surprise gate measured it at write (gate.novelty), goal relevance = max cosine to the active
-- goals now (pgmem.goal_relevance), depth = share of 5W1H filled. Unknown components are left
-- out and the weights renormalised, as at write (pgmem.salience). A memory whose salience
-- moves by less than 1e-6 is not rewritten; a change is in pgmem.history (op update, reason).

-- One page of a tenant's active memories re-scored: the given ids, or those after p_after_id.
-- Returns the last id of a full page (NULL at the end).
create or replace function pgmem._rescore_salience(p_tenant text, p_ids bigint[], p_after_id bigint, p_batch integer,
                                                   p_reason text default null)
returns table (examined bigint, changed bigint, last_id bigint)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_weights jsonb := pgmem._setting('salience_weights');
  v_page bigint[];
begin
  v_page := case when p_ids is not null
                 then array(select m.id from pgmem.memories m where m.id = any(p_ids) and m.tenant = p_tenant and m.state = 'active' order by m.id)
                 else array(select m.id from pgmem.memories m where m.tenant = p_tenant and m.state = 'active' and m.id > p_after_id
                             order by m.id limit p_batch) end;
  examined := cardinality(v_page);
  perform pgmem._set_op('update', jsonb_build_object('reason', coalesce(p_reason, 'salience re-scored'), 'by', 'rescore_salience'));
  with s as (
    select m.id, pgmem.salience(
             case when m.valence is null and m.arousal is null then null else pgmem.emotional_intensity(m.valence, m.arousal) end,
             coalesce((m.gate->>'novelty')::float8, (m.gate->>'semantic_novelty')::float8, (m.gate->>'keyword_novelty')::float8),
             g.relevance,
             pgmem.processing_depth(m.who, m.what, m.happened_at, m.location, m.why, m.how),
             v_weights) as salience
      from pgmem.memories m
      left join lateral (
        select max(pgmem.cosine_sim(m.embedding, x.embedding)) as relevance from pgmem.identity_goals x
         where x.tenant = p_tenant and x.agent_id in ('', coalesce(m.agent_id, '')) and x.state = 'active'
           and x.embedding is not null) g on true
     where m.id = any(v_page) and m.tenant = p_tenant)
  update pgmem.memories m set salience = s.salience
    from s
   where m.id = s.id and m.tenant = p_tenant
     and (m.salience is null or abs(m.salience - s.salience) > 1e-6);
  get diagnostics changed = row_count;
  perform pgmem._set_op(null);
  last_id := case when p_ids is null and examined = p_batch then v_page[examined] end;
  return next;
end $$;

create or replace function pgmem.rescore_salience(ids bigint[] default null, after_id bigint default 0, batch integer default 1000)
returns table (examined bigint, changed bigint, last_id bigint)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := pgmem._require_tenant();
begin
  perform pgmem._check_args('rescore_salience', jsonb_build_object('ids', ids));  -- sizes first (issue 27)
  perform pgmem._check_between(batch, 'batch', 1, 100000);
  if ids is not null and cardinality(ids) > 100000 then
    perform pgmem._bad_input(format('rescore_salience takes at most 100000 ids, got %s', cardinality(ids)));
  end if;
  return query select * from pgmem._rescore_salience(v_tenant, ids, coalesce(after_id, 0), batch, 'salience re-scored by request');
end $$;
comment on function pgmem.rescore_salience(bigint[], bigint, integer) is
  'Re-scores the Fragment salience of memories of the current tenant with the current goals (0.35 emotion + 0.30 novelty + 0.25 goal relevance + 0.10 depth): the given ids, or one page of `batch` active memories after after_id (last_id: where the next page starts; NULL at the end). Changes are in history.';

create or replace function pgmem.reflect(tenant text default null, batch integer default 1000, full_scan boolean default false)
returns table (tenant_id text, examined bigint, bindings bigint, salience_changed bigint, more boolean)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_prev text := current_setting('pgmem.tenant', true);
  v_job text := case when full_scan then 'reflect_full' else 'reflect' end;
  v_run bigint;
  v_cursor record;
  v_horizon timestamptz;
  v_last record;
  v_total bigint := 0;
  v_changed bigint := 0;
  v_more boolean;
  r record;
  t text;
  v_ids bigint[];
  v_written bigint;
begin
  perform pgmem._check_args('reflect', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  perform pgmem._check_between(batch, 'batch', 1, 100000);
  v_run := pgmem._job_begin('reflect', v_tenant, jsonb_build_object('batch', batch, 'full_scan', full_scan));
  if v_run is null then
    return;
  end if;
  select s.cursor_at, s.cursor_id into v_cursor from pgmem.job_state s
   where s.tenant = coalesce(v_tenant, '*') and s.job = v_job;
  -- only rows older than the oldest transaction still open (see merge_duplicates)
  select least(now(), min(a.xact_start)) into v_horizon from pg_stat_activity a
   where a.datname = current_database() and a.pid <> pg_backend_pid() and a.xact_start is not null;
  v_horizon := coalesce(v_horizon, now());

  -- declares the temporary table to plpgsql_check (a no-op at run time)
  perform 'PRAGMA:TABLE: _pgmem_reflect (tenant text, id bigint, at timestamptz)';
  create temp table if not exists _pgmem_reflect (tenant text, id bigint, at timestamptz) on commit drop;
  truncate _pgmem_reflect;
  insert into _pgmem_reflect
  select m.tenant, m.id, m.embedded_at from pgmem.memories m
   where m.embedding is not null and m.state = 'active' and (v_tenant is null or m.tenant = v_tenant)
     and (v_cursor.cursor_at is null or (m.embedded_at, m.id) > (v_cursor.cursor_at, v_cursor.cursor_id))
     and m.embedded_at < v_horizon
   order by m.embedded_at, m.id limit batch;
  select count(*) into v_total from _pgmem_reflect;
  v_more := v_total = batch;

  for t in select distinct x.tenant from _pgmem_reflect x order by 1 loop
    perform set_config('pgmem.tenant', t, true);  -- the tenant's own settings
    v_ids := array(select x.id from _pgmem_reflect x where x.tenant = t order by x.id);
    select coalesce(sum(b.written), 0) into v_written
      from pgmem._refresh_bindings(t, v_ids, array['temporal', 'semantic', 'causal', 'concept', 'supersedes']) b;
    select * into r from pgmem._rescore_salience(t, v_ids, 0, cardinality(v_ids), 'salience re-scored by reflect');
    tenant_id := t; examined := cardinality(v_ids); bindings := v_written; salience_changed := r.changed; more := v_more;
    v_changed := v_changed + v_written + r.changed;
    return next;
  end loop;
  perform set_config('pgmem.tenant', coalesce(v_prev, ''), true);

  select x.at, x.id into v_last from _pgmem_reflect x order by x.at desc, x.id desc limit 1;
  if v_last.id is not null then
    perform pgmem._job_state_save(coalesce(v_tenant, '*'), v_job, v_last.at, v_last.id);
  end if;
  if full_scan and not v_more then  -- a full pass is over: the next one starts from the beginning
    delete from pgmem.job_state s where s.tenant = coalesce(v_tenant, '*') and s.job = v_job;
  end if;
  perform pgmem._job_end(v_run, v_total, v_changed, jsonb_build_object('more', v_more));
end $$;
comment on function pgmem.reflect(text, integer, boolean) is
  'Fragment reflection (REFLECT): for a batch of memories embedded since the last reflection (full_scan: all active memories), rebuilds their bindings and re-scores their salience with the current goals. For the current tenant, or every tenant with none set (pgmem_admin). One row per tenant; more = another batch is waiting. Recorded in job_runs (job ''reflect'').';
