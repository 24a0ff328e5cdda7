-- The work queue (fragment-reconstructive-memory.md, Engine Goal Queue):
--   QUERY = 0 (answer queries), ENCODE = 1 (store new experiences), REFLECT = 2 (background
--   processing), MAINTENANCE = 3 (cleanup, consolidation), IDLE = 4 (nothing to do).
-- pgmem.work() takes ready items highest priority first (lowest number), then oldest first;
-- concurrent runners take different items (FOR UPDATE SKIP LOCKED). Each item runs for its
-- tenant, in a subtransaction: a failing item is retried later (back-off 2^attempts seconds,
-- at most 5 attempts) and does not stop the others. Every call is a run in pgmem.job_runs
-- (job 'work', the items in details); pg_cron calls it every minute through run_job.
--
-- Tasks (pgmem.work_tasks()): one row each, name -> priority and handler. A handler is
-- `pgmem._work_<task>(memory_ids bigint[], params jsonb) returns jsonb` and returns
-- {"examined": n, "changed": n}, plus "continue": {params} when the task goes on in a new item
-- (a paged pass). To add a task: a handler and a row in work_tasks().

create or replace function pgmem.work_priority(name text) returns smallint
  language sql immutable parallel safe
  return case when octet_length(name) > 256 then pgmem._over_limit('name', octet_length(name), 256, null::smallint, 'bytes')
              else case upper(name) when 'QUERY' then 0 when 'ENCODE' then 1 when 'REFLECT' then 2
                          when 'MAINTENANCE' then 3 when 'IDLE' then 4 end end;
comment on function pgmem.work_priority(text) is
  'The priority of a kind of work (Fragment engine goal queue): QUERY 0, ENCODE 1, REFLECT 2, MAINTENANCE 3, IDLE 4 (lower runs first); NULL for another name.';

create or replace function pgmem.work_tasks()
returns table (task text, priority smallint, priority_name text, handler text, admin_only boolean, description text)
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select t.task, pgmem.work_priority(t.pname), t.pname, '_work_' || t.task, t.admin_only, t.description
    from (values
      ('touch', 'QUERY', false, 'record that memories were used by a query (pgmem.touch: accesses, co_access bindings); params: kind, query_id'),
      ('bind', 'ENCODE', false, 'write the bindings of new or newly embedded memories (refresh_bindings); memory_ids'),
      ('reflect', 'REFLECT', false, 'consolidate: rebind the memories embedded since the last reflection and re-score their salience (pgmem.reflect); params: batch, full_scan'),
      ('salience', 'REFLECT', false, 're-score the salience of every active memory (goal relevance changed), a page per item; params: after_id, batch'),
      ('merge', 'MAINTENANCE', true, 'one batch of pgmem.merge_duplicates for the tenant; params: its arguments'),
      ('prune', 'MAINTENANCE', true, 'one batch of pgmem.prune for the tenant; params: its arguments'),
      ('archive', 'MAINTENANCE', true, 'one batch of pgmem.archive_stale for the tenant; params: its arguments'),
      ('idle', 'IDLE', false, 'refresh the bindings of every memory of the tenant, a page per item; params: after_id, batch')
    ) t(task, pname, admin_only, description)
$$;
comment on function pgmem.work_tasks() is
  'The tasks the work queue knows: name, priority (QUERY 0 .. IDLE 4), handler function, whether only an admin may queue it, what it does.';

insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'work_max_attempts', '5', 'work(): a failing item is retried (back-off 2^attempts s) at most this many times, then dropped (recorded in job_runs)'),
  ('*', 'work_bind_coalesce', '5000', 'work(): a bind item takes the ids of other waiting bind items of its tenant, up to this many')
on conflict (tenant, key) do nothing;

-- The parameters a work item of each task may carry (the rest is refused: issue 27, M2). The
-- maintenance tasks (admins only) take their job function's arguments, checked by _work_job.
create or replace function pgmem._work_params(p_task text) returns text[]
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return case p_task
    when 'touch' then array['kind', 'query_id']
    when 'bind' then array[]::text[]
    when 'reflect' then array['batch', 'full_scan']
    when 'salience' then array['after_id', 'batch', 'reason']
    when 'idle' then array['after_id', 'batch']
  end;
comment on function pgmem._work_params(text) is
  'The parameters a work item of a task may carry (NULL for the maintenance tasks: their job function''s arguments).';

insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'work_lock_timeout_ms', '200', 'work(): how long an item waits for a row another transaction holds (a tenant''s SELECT ... FOR UPDATE) before it is skipped until the next run (job_runs.details: skipped_locked)'),
  ('*', 'work_tenant_seconds', '10', 'work(): a tenant whose items took this many seconds in a run goes after every other tenant with ready items (fair share: one tenant''s flood cannot hold the queue)'),
  ('*', 'work_max_delay_days', '30', 'enqueue(): the latest not_before an item may have, in days from now')
on conflict (tenant, key) do nothing;

-- Every row of the queue passes here, whoever inserts it (pgmem.enqueue, pgmem's own triggers,
-- or a plain INSERT of the application, which holds the privilege): an unknown task, a
-- maintenance task queued by a login that is not pgmem_admin, a priority above the task's, a
-- parameter the task does not take, an oversized or a far-future item are refused with the
-- message enqueue gives (issue 27, M2: a plain INSERT queued prune {"mode": "aggressive"},
-- merge {"threshold": 0.1} and an unknown task, which work() then ran as the owner).
create or replace function pgmem._work_queue_check() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  t record;
  v_admin boolean := pgmem._is_admin();
  v_bad text;
  v_max_days float8 := pgmem._setting_num('work_max_delay_days', 30);
begin
  select * into t from pgmem.work_tasks() w where w.task = new.task;
  if t.task is null then
    perform pgmem._bad_input(format('unknown task "%s": tasks are %s', coalesce(new.task, 'NULL'),
                                    (select string_agg(w.task, ', ' order by w.priority, w.task) from pgmem.work_tasks() w)));
  end if;
  if t.admin_only and not v_admin then
    raise exception 'queuing the maintenance task "%" needs the pgmem_admin role', new.task using errcode = '42501';
  end if;
  new.priority := coalesce(new.priority, t.priority);
  if new.priority < 0 or new.priority > 4 then
    perform pgmem._bad_input(format('priority must be between 0 and 4, got %s', new.priority));
  end if;
  if new.priority < t.priority and not v_admin then
    perform pgmem._bad_input(format('a %s item has priority %s (%s) or lower (a larger number), got %s',
                                    new.task, t.priority, t.priority_name, new.priority),
      'only pgmem_admin may queue an item ahead of its kind of work');
  end if;
  if new.params is null or jsonb_typeof(new.params) <> 'object' then
    perform pgmem._bad_input('params must be a JSON object');
  end if;
  if octet_length(new.params::text) > 16384 then
    perform pgmem._bad_input(format('params is %s bytes, more than 16384', octet_length(new.params::text)));
  end if;
  if pgmem._work_params(new.task) is not null then
    select k into v_bad from jsonb_object_keys(new.params) k where k <> all(pgmem._work_params(new.task)) order by k limit 1;
    if v_bad is not null then
      perform pgmem._bad_input(format('a %s item takes no parameter "%s"', new.task, v_bad),
        format('its parameters: %s', coalesce(nullif(array_to_string(pgmem._work_params(new.task), ', '), ''), 'none')));
    end if;
    if new.params ? 'batch' and (jsonb_typeof(new.params->'batch') <> 'number'
                                 or (new.params->>'batch')::numeric not between 1 and 10000) then
      perform pgmem._bad_input(format('batch must be a number between 1 and 10000, got %s', new.params->'batch'));
    end if;
  end if;
  if cardinality(new.memory_ids) > 10000 then
    perform pgmem._bad_input(format('a work item holds at most 10000 memory ids, got %s', cardinality(new.memory_ids)));
  end if;
  new.not_before := coalesce(new.not_before, now());
  if not isfinite(new.not_before) or new.not_before > now() + make_interval(secs => v_max_days * 86400) then
    perform pgmem._bad_input(format('not_before %s is more than work_max_delay_days (%s) from now', new.not_before, v_max_days),
      'queue it later, or raise work_max_delay_days in pgmem.settings');
  end if;
  -- what the queue itself keeps
  new.attempts := 0;
  new.last_error := null;
  new.enqueued_at := clock_timestamp();
  return new;
end $$;
comment on function pgmem._work_queue_check() is
  'Trigger: every work item inserted is checked as enqueue checks it (known task, admins only for maintenance, priority not above the task''s, known parameters, sizes, not_before within work_max_delay_days).';

create or replace trigger work_queue_check before insert on pgmem.work_queue
  for each row execute function pgmem._work_queue_check();

-- Queues an item for the current tenant; priority defaults to the task's. The rules are the
-- trigger's (_work_queue_check), so that a plain INSERT meets the same ones.
create or replace function pgmem.enqueue(task text, memory_ids bigint[] default '{}', params jsonb default '{}',
                                         priority integer default null, not_before timestamptz default null)
returns bigint
  language plpgsql volatile  -- the caller's rights: _is_admin() and RLS see the caller
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_id bigint;
begin
  perform pgmem._check_args('enqueue', jsonb_build_object('task', task, 'memory_ids', memory_ids, 'params', params));  -- sizes first (issue 27)
  -- (issue 27, L3: a bad touch kind was queued, and failed in work() later)
  if task = 'touch' and ((params ? 'kind' and coalesce(params->>'kind', '') !~ '^[a-z][a-z0-9_]{0,31}$')
                         or (params ? 'query_id' and coalesce(params->>'query_id', '') !~ '^[0-9a-fA-F-]{32,36}$')) then
    perform pgmem._bad_input(format('params of a touch: kind must be a short lower-case name and query_id a uuid, got %s', params),
      'e.g. {"kind": "search", "query_id": "6f1c..."}');
  end if;
  if priority is not null then
    perform pgmem._check_between(priority, 'priority', 0, 4);
  end if;
  insert into pgmem.work_queue (tenant, priority, task, memory_ids, params, not_before)
  values (v_tenant, priority, task, coalesce(memory_ids, '{}'), params, not_before)
  returning id into v_id;
  return v_id;
end $$;
comment on function pgmem.enqueue(text, bigint[], jsonb, integer, timestamptz) is
  'Queues a work item for the current tenant (task from pgmem.work_tasks(); priority defaults to the task''s: QUERY 0 .. IDLE 4); pgmem.work() runs it. Maintenance tasks need pgmem_admin. Returns the item id.';

-- ENCODE: every statement that stores memories with an embedding, or embeds memories (the
-- worker, complete_embedding), queues their ids for the bindings: one item per tenant and
-- 1,000 ids, whatever the write path (remember, remember_many, INSERT, COPY). Statement
-- triggers over the transition tables, which PostgreSQL shares with the other statement
-- triggers of memories (history, embedding queue): no per-row cost.
-- One 'bind' item per tenant and 1,000 ids of the given memories.
create or replace function pgmem._enqueue_bind(p_tenants text[], p_ids bigint[]) returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  insert into pgmem.work_queue (tenant, priority, task, memory_ids)
  select b.tenant, 1, 'bind', array_agg(b.id order by b.id)
    from (select u.tenant, u.id, (row_number() over (partition by u.tenant order by u.id) - 1) / 1000 as chunk
            from unnest(p_tenants, p_ids) u(tenant, id)) b
   group by b.tenant, b.chunk
   order by b.tenant, b.chunk
$$;

create or replace function pgmem._memories_encode_insert() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  perform pgmem._enqueue_bind(array_agg(n.tenant), array_agg(n.id))
     from new_rows n where n.embedding is not null and n.state = 'active' having count(*) > 0;
  return null;
end $$;

create or replace function pgmem._memories_encode_update() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  -- through EXECUTE: planned for this UPDATE's row counts. A statement cached in PL/pgSQL keeps
  -- the plan of the first (one-row) UPDATE, a fast-start nested loop over old_rows x new_rows
  -- that goes quadratic on a job's 10,000-row batch (writejobs measured 17 s for 4,000 rows in
  -- the same pattern in sql/040).
  execute $q$
    select pgmem._enqueue_bind(array_agg(n.tenant), array_agg(n.id))
      from old_rows o join new_rows n on n.id = o.id
     where o.embedding is null and n.embedding is not null and n.state = 'active' having count(*) > 0 $q$;
  return null;
end $$;

create or replace trigger memories_encode_insert
  after insert on pgmem.memories referencing new table as new_rows
  for each statement execute function pgmem._memories_encode_insert();

create or replace trigger memories_encode_update
  after update on pgmem.memories referencing old table as old_rows new table as new_rows
  for each statement execute function pgmem._memories_encode_update();

-- Goals changed: one REFLECT item re-scores salience (unless one is already waiting).
create or replace function pgmem._enqueue_salience(p_tenant text, p_reason text) returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  insert into pgmem.work_queue (tenant, priority, task, params)
  select p_tenant, 2, 'salience', jsonb_build_object('after_id', 0, 'reason', p_reason)
   where not exists (select 1 from pgmem.work_queue q
                      where q.tenant = p_tenant and q.task = 'salience' and q.attempts = 0 and (q.params->>'after_id')::bigint = 0)
$$;

-- ------------------------------------------------------------------ handlers
create or replace function pgmem._work_touch(p_ids bigint[], p_params jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare n integer;
begin
  n := pgmem.touch(p_ids, coalesce(p_params->>'kind', 'touch'), (p_params->>'query_id')::uuid);
  return jsonb_build_object('examined', cardinality(p_ids), 'changed', n);
end $$;

create or replace function pgmem._work_bind(p_ids bigint[], p_params jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_written jsonb;
begin
  select jsonb_object_agg(b.kind, b.written) into v_written
    from pgmem._refresh_bindings(v_tenant, p_ids, array['temporal', 'semantic', 'causal', 'concept', 'supersedes']) b;
  return jsonb_build_object('examined', cardinality(p_ids),
                            'changed', (select coalesce(sum(value::text::bigint), 0) from jsonb_each(v_written)),
                            'bindings', v_written);
end $$;

create or replace function pgmem._work_reflect(p_ids bigint[], p_params jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare r record;
begin
  select * into r from pgmem.reflect(batch => coalesce((p_params->>'batch')::int, 1000),
                                     full_scan => coalesce((p_params->>'full_scan')::boolean, false));
  return jsonb_build_object('examined', coalesce(r.examined, 0), 'changed', coalesce(r.bindings, 0) + coalesce(r.salience_changed, 0))
         || case when r.more then jsonb_build_object('continue', p_params) else '{}'::jsonb end;
end $$;

create or replace function pgmem._work_salience(p_ids bigint[], p_params jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare r record;
begin
  select * into r from pgmem._rescore_salience(pgmem._require_tenant(), null, coalesce((p_params->>'after_id')::bigint, 0),
                                               coalesce((p_params->>'batch')::int, 1000), p_params->>'reason');
  return jsonb_build_object('examined', r.examined, 'changed', r.changed)
         || case when r.last_id is not null then jsonb_build_object('continue', p_params || jsonb_build_object('after_id', r.last_id))
                 else '{}'::jsonb end;
end $$;

-- a maintenance job for the item's tenant, one batch, with the item's params as named arguments
create or replace function pgmem._work_job(p_fn text, p_params jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_args text := format('tenant => %L', pgmem._require_tenant());
  k text;
  v jsonb;
  n bigint;
begin
  for k, v in select * from jsonb_each(p_params) loop
    if k = 'tenant' or not exists (select 1 from pg_catalog.pg_proc p join pg_catalog.pg_namespace ns on ns.oid = p.pronamespace
                                     where ns.nspname = 'pgmem' and p.proname = p_fn and k = any(p.proargnames)) then
      perform pgmem._bad_input(format('%s has no parameter "%s" a work item may set', p_fn, k));
    end if;
    v_args := v_args || format(', %I => %L', k, v #>> '{}');
  end loop;
  execute format('select count(*) from pgmem.%I(%s)', p_fn, v_args) into n;
  return jsonb_build_object('examined', n, 'changed', n);
end $$;

create or replace function pgmem._work_merge(p_ids bigint[], p_params jsonb) returns jsonb
  language sql volatile set search_path = pgmem, pg_catalog, pg_temp
  return pgmem._work_job('merge_duplicates', p_params);
create or replace function pgmem._work_prune(p_ids bigint[], p_params jsonb) returns jsonb
  language sql volatile set search_path = pgmem, pg_catalog, pg_temp
  return pgmem._work_job('prune', p_params);
create or replace function pgmem._work_archive(p_ids bigint[], p_params jsonb) returns jsonb
  language sql volatile set search_path = pgmem, pg_catalog, pg_temp
  return pgmem._work_job('archive_stale', p_params);

-- IDLE: a page of the tenant's active memories (by id) gets its bindings refreshed
create or replace function pgmem._work_idle(p_ids bigint[], p_params jsonb) returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_after bigint := coalesce((p_params->>'after_id')::bigint, 0);
  v_batch int := least(greatest(coalesce((p_params->>'batch')::int, 500), 1), 10000);
  v_ids bigint[];
  v_changed bigint;
begin
  v_ids := array(select m.id from pgmem.memories m
                  where m.tenant = v_tenant and m.state = 'active' and m.id > v_after order by m.id limit v_batch);
  select coalesce(sum(b.written), 0) into v_changed
    from pgmem._refresh_bindings(v_tenant, v_ids, array['temporal', 'semantic', 'causal', 'concept', 'supersedes']) b;
  return jsonb_build_object('examined', cardinality(v_ids), 'changed', v_changed)
         || case when cardinality(v_ids) = v_batch
                 then jsonb_build_object('continue', p_params || jsonb_build_object('after_id', v_ids[v_batch]))
                 else '{}'::jsonb end;
end $$;

-- ------------------------------------------------------------------ the runner
create or replace function pgmem.work(max_items integer default 100, tenant text default null,
                                      max_seconds float8 default 50)
returns table (item_id bigint, task text, priority smallint, tenant_id text, status text, examined bigint,
               changed bigint, ms float8, error text)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_prev text := current_setting('pgmem.tenant', true);
  v_run bigint;
  v_start timestamptz := clock_timestamp();
  v_t0 timestamptz;
  v_max_attempts int := pgmem._setting_num('work_max_attempts', 5)::int;
  v_coalesce int := pgmem._setting_num('work_bind_coalesce', 5000)::int;
  it pgmem.work_queue;
  v_ids bigint[];
  v_also bigint[];
  v_res jsonb;
  v_err text;
  v_items jsonb := '[]'::jsonb;
  v_done bigint := 0;
  v_n bigint := 0;
  v_more boolean;
  v_cand bigint;
  v_used jsonb := '{}'::jsonb;  -- tenant -> ms its items took in this run
  v_share_ms float8 := greatest(0, pgmem._setting_num('work_tenant_seconds', 10)) * 1000;
  -- issue 35, M1: a row one tenant holds must not stall every tenant's work (as merge and prune)
  v_lock_ms text := greatest(1, pgmem._setting_num('work_lock_timeout_ms', 200))::bigint::text;
  v_prev_lock text := current_setting('lock_timeout');
  v_locked boolean;
  v_skipped bigint := 0;
begin
  perform pgmem._check_args('work', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  perform pgmem._check_between(max_items, 'max_items', 1, 100000);
  if max_seconds is null or max_seconds <= 0 then
    perform pgmem._bad_input(format('max_seconds must be > 0, got %s', coalesce(max_seconds::text, 'NULL')));
  end if;
  v_run := pgmem._job_begin('work', v_tenant, jsonb_build_object('max_items', max_items, 'max_seconds', max_seconds));
  if v_run is null then
    return;
  end if;
  loop
    exit when v_n >= max_items or extract(epoch from clock_timestamp() - v_start) >= max_seconds;
    -- the highest priority first (QUERY 0 .. IDLE 4), then the tenant that has had the least of
    -- this run, then the oldest; a tenant past work_tenant_seconds goes after every other one
    -- (issue 27, M2: 200 items of one tenant held the runner for 21.7 s while another's waited).
    -- Among the first 1000 ready items (by priority and age), the first one no other runner holds.
    for v_cand in
      select c.id from (select q.id, q.tenant, q.priority from pgmem.work_queue q
                         where (v_tenant is null or q.tenant = v_tenant) and q.not_before <= now()
                         order by q.priority, q.id limit 1000) c
       order by coalesce((v_used->>c.tenant)::float8, 0) >= v_share_ms, c.priority,
                coalesce((v_used->>c.tenant)::float8, 0), c.id
    loop
      select * into it from pgmem.work_queue q where q.id = v_cand and q.not_before <= now() for update skip locked;
      exit when it.id is not null;
    end loop;
    exit when it.id is null;
    v_n := v_n + 1;
    v_t0 := clock_timestamp();
    v_ids := it.memory_ids;
    v_also := '{}';
    if it.task = 'bind' then  -- other waiting bind items of the tenant go along (one set-based pass)
      v_also := array(select x.id from (
                        select q.id, sum(cardinality(q.memory_ids)) over (order by q.id) as total
                          from (select q.id, q.memory_ids from pgmem.work_queue q
                                 where q.tenant = it.tenant and q.task = 'bind' and q.id <> it.id and q.not_before <= now()
                                   and q.attempts = 0
                                 order by q.id limit 100 for update skip locked) q) x
                       where x.total + cardinality(it.memory_ids) <= v_coalesce);
      v_ids := array(select distinct i from (select unnest(it.memory_ids) union all
                                             select unnest(q.memory_ids) from pgmem.work_queue q where q.id = any(v_also)) x(i)
                      order by 1);
    end if;
    perform set_config('pgmem.tenant', it.tenant, true);
    v_err := null;
    v_locked := false;
    perform set_config('lock_timeout', v_lock_ms, true);
    begin
      execute format('select pgmem.%I($1, $2)', (select w.handler from pgmem.work_tasks() w where w.task = it.task))
        into v_res using v_ids, it.params;
      if v_res ? 'continue' then  -- a paged task goes on in a new item
        insert into pgmem.work_queue (tenant, priority, task, params)
        values (it.tenant, case when pgmem._is_admin() then it.priority
                                else greatest(it.priority, (select w.priority from pgmem.work_tasks() w where w.task = it.task)) end,
                it.task, v_res->'continue');
      end if;
      delete from pgmem.work_queue q where q.id = it.id or q.id = any(v_also);
    exception
      when lock_not_available then  -- another transaction holds a row: the item waits for the next run
        v_locked := true;
      when others then
        get stacked diagnostics v_err = message_text;
    end;
    perform set_config('lock_timeout', v_prev_lock, true);
    if v_locked then
      v_skipped := v_skipped + 1;
      update pgmem.work_queue q set not_before = now() + interval '5 seconds',
             last_error = format('skipped: a row it changes was held by another transaction for over %s ms (work_lock_timeout_ms)', v_lock_ms)
       where q.id = it.id;
    elsif v_err is not null then
      if it.attempts + 1 >= v_max_attempts then
        delete from pgmem.work_queue q where q.id = it.id;
      else
        update pgmem.work_queue q set attempts = q.attempts + 1, last_error = v_err,
               not_before = now() + make_interval(secs => power(2, q.attempts + 1))
         where q.id = it.id;
      end if;
    else
      v_done := v_done + 1;
    end if;
    perform set_config('pgmem.tenant', coalesce(v_prev, ''), true);
    v_used := v_used || jsonb_build_object(it.tenant, coalesce((v_used->>it.tenant)::float8, 0)
                                                      + extract(epoch from clock_timestamp() - v_t0) * 1000);
    item_id := it.id; task := it.task; priority := it.priority; tenant_id := it.tenant;
    status := case when v_locked then 'skipped_locked' when v_err is null then 'ok'
                   when it.attempts + 1 >= v_max_attempts then 'dropped' else 'retry' end;
    examined := coalesce((v_res->>'examined')::bigint, 0); changed := coalesce((v_res->>'changed')::bigint, 0);
    ms := extract(epoch from clock_timestamp() - v_t0) * 1000; error := v_err;
    v_items := v_items || jsonb_build_object('item', it.id, 'task', it.task, 'priority', it.priority, 'tenant', it.tenant,
      'status', status, 'examined', examined, 'changed', changed, 'ms', round(ms::numeric, 1), 'error', v_err,
      'merged_items', to_jsonb(v_also));
    return next;
    it := null;
    v_res := null;
  end loop;
  v_more := exists (select 1 from pgmem.work_queue q where (v_tenant is null or q.tenant = v_tenant) and q.not_before <= now());
  perform pgmem._job_end(v_run, v_n, v_done, jsonb_build_object('items', v_items, 'more', v_more, 'skipped_locked', v_skipped,
    'tenant_ms', (select coalesce(jsonb_object_agg(k, round(v::text::numeric, 1)), '{}') from jsonb_each(v_used) e(k, v))));
end $$;
comment on function pgmem.work(integer, text, float8) is
  'Runs ready work items, highest priority first (QUERY 0, ENCODE 1, REFLECT 2, MAINTENANCE 3, IDLE 4), then oldest first, for the current tenant (no tenant: every tenant, pgmem_admin), until max_items or max_seconds; each in its own subtransaction (a failure is retried with back-off). Records the run in job_runs (job ''work'').';
