-- The job runner and its schedules. The jobs themselves live one per file: 410 merge,
-- 420 prune/purge/archive, 430 thresholds (other concerns add theirs in 450-499).
--
-- Each job is a function that does one bounded batch in the caller's (short) transaction and
-- can be called by hand; `CALL pgmem.run_job(job, params)` repeats batches, committing
-- between them, until there is nothing left. Every batch is a row in pgmem.job_runs, which
-- run_job writes first, in a transaction of its own, so a batch killed with its backend
-- still leaves a row (status 'running' while its backend lives; job_status says
-- 'interrupted' once it is gone, and the next run_job of the job marks it failed).
-- Nothing is destroyed except by purge(): merged, pruned and archived memories keep their
-- rows, and every change is in pgmem.history.
--
-- Locks (pgmem.job_locks, a table the application roles have no privilege on: an advisory
-- lock key can be taken by any login and would starve the jobs, issue 14):
--   * one batch per (job, scope) at a time: a second one is recorded as skipped, naming the
--     backend that holds it;
--   * the jobs that change memories (changes_memories in pgmem._jobs()) take turns: a batch
--     waits at most job_lock_timeout_ms (pgmem.settings) for the one running, then is
--     recorded as skipped with the holder's pid and job (merge and prune would otherwise
--     lock rows in different orders and deadlock);
--   * a run of run_job keeps its backend in job_locks.holder_pid between its transactions:
--     a second run_job (or a batch called by hand) of the same job and scope is skipped
--     while that backend lives.
--
-- Scope: a job works on the current tenant (pgmem.tenant) or, with no tenant set, on all
-- tenants; the latter needs pgmem_admin (pg_cron runs jobs that way).

-- The registry of jobs, the one place run_job dispatches from. To add a job: write its
-- function (one batch per call, starting with pgmem._job_begin(job, tenant, params) and
-- ending with pgmem._job_end(run, examined, changed, '{"more": ...}')) in a file of its own
-- (450-499) and add its row here. changes_memories: it takes turns with merge, prune,
-- archive and purge; schedule: the default pg_cron schedule (NULL: not scheduled by default).
create or replace function pgmem._jobs()
returns table (job text, fn text, changes_memories boolean, schedule text, description text)
  language sql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select * from (values
    ('merge',   'merge_duplicates', true,  '0 * * * *',  'Engram duplicate merge (410_merge.sql)'),
    ('prune',   'prune',            true,  '15 3 * * *', 'Engram pruning: soft-deletes expired and decayed memories (420_prune_archive.sql)'),
    ('archive', 'archive_stale',    true,  '30 3 * * *', 'Shadow lifecycle: archives memories past the retention, below the archival activation, or beyond max_memories (420_prune_archive.sql)'),
    -- Shadow's cleanup (issue 24): archived memories deleted after their retention; statistics
    -- and compaction (VACUUM itself is the pg_cron entry pgmem-vacuum-<db>: job_schedule_commands)
    ('delete_archived', 'delete_archived', true, '35 3 * * *', 'Shadow lifecycle: deletes (soft, restorable) memories archived longer than archive_delete_after (420_prune_archive.sql)'),
    ('compact', 'compact',          false, '0 4 * * *',  'Shadow cleanup: ANALYZE of the tables the night changed; reports the VACUUM and REINDEX due (425_compact.sql)'),
    ('tune',    'tune_thresholds',  false, '45 3 * * *', 'Shadow adaptive thresholds from feedback (430_thresholds.sql)'),
    ('purge',   'purge',            true,  null,         'destroys memories soft-deleted long ago (420_prune_archive.sql)'),
    ('index',   'index_vectors',    false, '* * * * *',  'puts newly embedded memories under the HNSW index (440_index.sql)'),
    -- reconstructive (issue 16): the work queue, every minute; reflection, hourly
    ('work',    'work',             false, '* * * * *',  'runs ready work items, highest priority first (450_work_queue.sql)'),
    ('reflect', 'reflect',          false, '40 * * * *', 'fragment reflection: bindings and salience of newly embedded memories (460_reflect.sql)'),
    -- clusters (issue 17): concept and liquid clusters, hourly; it writes memories.cluster_id
    ('cluster', 'cluster',          true,  '20 * * * *', 'concept and liquid clusters (470_cluster.sql)'),
    -- read path (issue 12/14): the lexical statistics' appended changes, folded every minute
    ('lexicon', 'fold_lexicon',     false, '* * * * *',  'folds the appended lexical statistics (pgmem.lexicon_delta) into pgmem.lexicon (201_lexical.sql)'),
    -- living memory (issue 24): the retrievals and uses the read path appends, folded every minute
    ('access',  'fold_access_log',  false, '* * * * *',  'folds the appended retrievals and uses (pgmem.access_log) into pgmem.accesses and the memories'' use counts (212_access_log.sql)')
  ) j(job, fn, changes_memories, schedule, description)
$$;
comment on function pgmem._jobs() is
  'The registry of pgmem''s jobs: name, the function run_job calls for one batch, whether it changes memories (then it takes turns with the others), its default pg_cron schedule, and what it does.';

create or replace function pgmem._job_scope(p_tenant text) returns text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare t text := coalesce(p_tenant, pgmem.current_tenant());
begin
  if t is null and not pgmem._is_admin() then
    raise exception 'this job runs for all tenants when no tenant is set, which needs the pgmem_admin role'
      using errcode = '42501', hint = 'SET pgmem.tenant = ''...'' to run it for one tenant';
  end if;
  if t is not null and t <> coalesce(pgmem.current_tenant(), t) and not pgmem._is_admin() then
    raise exception 'running a job for tenant "%" from tenant "%" needs pgmem_admin', t, pgmem.current_tenant()
      using errcode = '42501';
  end if;
  return t;  -- NULL = every tenant
end $$;

-- Whether the backend pid (that started at p_since, when known) is still alive. Any role sees
-- the pids of pg_stat_activity; backend_start only for its own sessions (NULL otherwise).
create or replace function pgmem._backend_alive(p_pid integer, p_since timestamptz default null) returns boolean
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select p_pid is not null and exists (select 1 from pg_catalog.pg_stat_activity a
                                         where a.pid = p_pid and (p_since is null or a.backend_start is null or a.backend_start = p_since))
$$;

-- Who holds the lock row (scope, job) right now, for the message of a skipped batch. Row locks
-- do not name their backend, so: the backend whose transaction locked the row (its xmax, when
-- it was locked outside a subtransaction), else a batch of the job that run_job recorded as
-- running (committed first, with its pid), else a backend in a transaction whose last
-- statement calls a job (its query is visible to superusers and pg_read_all_stats).
create or replace function pgmem._job_lock_holder(p_scope text, p_job text) returns text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_pid integer;
  r record;
begin
  select l.pid into v_pid
    from pgmem.job_locks j join pg_catalog.pg_locks l
      on l.locktype = 'transactionid' and l.granted and l.mode = 'ExclusiveLock' and l.transactionid::text = j.xmax::text
   where j.tenant = p_scope and j.job = p_job and l.pid <> pg_backend_pid()
   limit 1;
  if v_pid is null then  -- a run_job holding the job between its transactions
    select j.holder_pid into v_pid from pgmem.job_locks j
     where j.tenant = p_scope and j.job = p_job and j.holder_pid <> pg_backend_pid()
       and pgmem._backend_alive(j.holder_pid, j.holder_since);
  end if;
  select x.id, x.job, x.tenant, x.started_at, x.pid into r from pgmem.job_runs x
   where x.status = 'running' and x.pid <> pg_backend_pid() and pgmem._backend_alive(x.pid)
     and (x.pid = v_pid or (v_pid is null and (x.job = p_job or (p_job = 'maintenance'
           and x.job in (select j.job from pgmem._jobs() j where j.changes_memories)))))
   order by x.id desc limit 1;
  if r.id is not null then
    return format('backend pid %s (job %s for %s, run %s, since %s)', r.pid, r.job, coalesce(r.tenant, 'all tenants'), r.id,
                  to_char(r.started_at, 'YYYY-MM-DD HH24:MI:SS TZ'));
  end if;
  select a.pid, a.query, a.xact_start into r from pg_catalog.pg_stat_activity a
   where a.pid <> pg_backend_pid() and a.xact_start is not null and a.datname = current_database()
     and (a.pid = v_pid or (v_pid is null and a.query ~ ('pgmem\.(' || (select string_agg(j.fn, '|') from pgmem._jobs() j) || '|run_job)\M')))
   order by a.xact_start limit 1;
  if r.pid is null and v_pid is null then
    return 'another backend';
  end if;
  return format('backend pid %s%s', coalesce(r.pid, v_pid),
                case when r.query is not null
                     then format(' (transaction since %s; last statement: %s)', to_char(r.xact_start, 'YYYY-MM-DD HH24:MI:SS TZ'),
                                 left(regexp_replace(r.query, '\s+', ' ', 'g'), 120)) else '' end);
end $$;

-- Makes sure the lock row (scope, job) exists; false when another transaction is creating it
-- right now (the first batch of the job for that scope, still running): waiting for it would
-- wait for that whole batch. Rows for every job's all-tenants scope and 'maintenance' are
-- created below, once.
create or replace function pgmem._job_lock_row(p_scope text, p_job text) returns boolean
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_prev text := current_setting('lock_timeout');
begin
  if exists (select 1 from pgmem.job_locks j where j.tenant = p_scope and j.job = p_job) then
    return true;
  end if;
  perform set_config('lock_timeout', '200', true);
  begin
    insert into pgmem.job_locks (tenant, job) values (p_scope, p_job) on conflict do nothing;
  exception when lock_not_available then
    perform set_config('lock_timeout', v_prev, true);
    return false;
  end;
  perform set_config('lock_timeout', v_prev, true);
  return true;
end $$;

insert into pgmem.job_locks (tenant, job)
select '*', j.job from pgmem._jobs() j union all select '*', 'maintenance'
on conflict do nothing;

-- The start of every job batch: its job_runs row (the one run_job wrote first, or a new one),
-- then the locks. Returns the run id, or NULL when the batch is skipped (the row says why).
create or replace function pgmem._job_begin(p_job text, p_tenant text, p_params jsonb) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_scope text := coalesce(p_tenant, '*');
  v_run bigint := nullif(current_setting('pgmem.job_run_id', true), '')::bigint;
  v_lock pgmem.job_locks;
  v_why text;
  v_timeout text;
  v_prev_timeout text := current_setting('lock_timeout');
begin
  if v_run is not null then  -- written by run_job before this batch, in its own transaction
    update pgmem.job_runs r set params = p_params, tenant = p_tenant
     where r.id = v_run and r.job = p_job and r.status = 'running' and r.pid = pg_backend_pid();
    if not found then v_run := null; end if;
  end if;
  if v_run is null then
    insert into pgmem.job_runs (tenant, job, params, pid) values (p_tenant, p_job, p_params, pg_backend_pid())
    returning job_runs.id into v_run;
  end if;

  -- one batch of a job and scope at a time; and not while a run_job of it lives in another backend
  if pgmem._job_lock_row(v_scope, p_job) then
    select * into v_lock from pgmem.job_locks j where j.tenant = v_scope and j.job = p_job for update skip locked;
  end if;
  if v_lock is null then
    v_why := format('skipped: a batch of %s for %s is running in %s', p_job, coalesce(p_tenant, 'all tenants'),
                    pgmem._job_lock_holder(v_scope, p_job));
  elsif v_lock.holder_pid is distinct from pg_backend_pid() and pgmem._backend_alive(v_lock.holder_pid, v_lock.holder_since) then
    v_why := format('skipped: run_job(%L) for %s is running in %s', p_job, coalesce(p_tenant, 'all tenants'),
                    pgmem._job_lock_holder(v_scope, p_job));
  elsif (select j.changes_memories from pgmem._jobs() j where j.job = p_job) then
    -- the jobs that change memories take turns, waiting at most job_lock_timeout_ms
    v_timeout := greatest(1, pgmem._setting_num('job_lock_timeout_ms', 30000))::bigint::text;
    perform set_config('lock_timeout', v_timeout, true);
    begin
      perform 1 from pgmem.job_locks j where j.tenant = '*' and j.job = 'maintenance' for update;
    exception when lock_not_available then
      v_why := format('skipped: waited %s ms (job_lock_timeout_ms) for another job that changes memories, held by %s',
                      v_timeout, pgmem._job_lock_holder('*', 'maintenance'));
    end;
    perform set_config('lock_timeout', v_prev_timeout, true);
  end if;
  if v_why is not null then
    update pgmem.job_runs r set status = 'skipped', finished_at = clock_timestamp(), error = v_why where r.id = v_run;
    raise notice 'pgmem: %', v_why;
    return null;
  end if;
  return v_run;
end $$;
comment on function pgmem._job_begin(text, text, jsonb) is
  'Starts a job batch: its job_runs row and its locks (pgmem.job_locks). NULL when it is skipped; the job_runs row then says who holds the lock.';

create or replace function pgmem._job_end(p_run bigint, p_examined bigint, p_changed bigint, p_details jsonb default '{}')
returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  update pgmem.job_runs set finished_at = clock_timestamp(), status = 'ok', examined = p_examined,
         changed = p_changed, details = details || coalesce(p_details, '{}')
   where id = p_run
$$;

-- A job's position (a keyset cursor, or a run's as_of and cut-off) in pgmem.job_state.
create or replace function pgmem._job_state_save(p_tenant text, p_job text, p_at timestamptz, p_id bigint)
returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  insert into pgmem.job_state (tenant, job, cursor_at, cursor_id) values (p_tenant, p_job, p_at, p_id)
  on conflict (tenant, job) do update set cursor_at = excluded.cursor_at, cursor_id = excluded.cursor_id, updated_at = now()
$$;
comment on function pgmem._job_state_save(text, text, timestamptz, bigint) is
  'Saves (upserts) a job''s position in pgmem.job_state: cursor_at, cursor_id for (tenant, job).';

-- Where an unfinished run stopped. Some jobs keep their position in pgmem.job_state only
-- for the length of a run (a run = the calls of run_job, or calls repeated by hand while
-- job_runs.details->'more' is true): merge with full_scan ('merge_full', 'merge_full_text')
-- prune ('prune:<mode>', and 'prune:bottom:<scope>' for aggressive mode) and archive ('archive',
-- and 'archive:cap:<scope>:...' for the cap's cut-offs). The job deletes
-- them when its run is complete, and run_job before its first batch, so that every run_job
-- starts from the beginning even after an earlier run stopped half-way (max_batches, an
-- error). The incremental merge cursors ('merge', 'merge_text', one pair per tenant) outlive
-- runs: never reset; a run for every tenant resets the budgets it counts ('merge:used').
-- Dry runs neither read nor write these rows, so resetting for one would only lose a run
-- under way.
create or replace function pgmem._job_state_reset(p_job text, p_tenant text, p_params jsonb default '{}')
returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  delete from pgmem.job_state s
   where coalesce((p_params->>'dry_run')::boolean, false) is false
     and case p_job
           when 'merge' then (coalesce((p_params->>'full_scan')::boolean, false)
                              and s.tenant = coalesce(p_tenant, '*') and s.job in ('merge_full', 'merge_full_text'))
                             -- a run for every tenant: each tenant's budget whole again (410_merge.sql)
                          or (p_tenant is null and not coalesce((p_params->>'full_scan')::boolean, false)
                              and s.job = 'merge:used')
           -- (prune's default mode is normal)
           when 'prune' then (s.tenant = coalesce(p_tenant, '*') and s.job = 'prune:' || coalesce(p_params->>'mode', 'normal'))
                          or (coalesce(p_params->>'mode', 'normal') = 'aggressive' and s.job = 'prune:bottom:' || coalesce(p_tenant, '*'))
           -- (archive: its cursor, and the cap's cut-offs of the run, 420_prune_archive.sql)
           when 'archive' then (s.tenant = coalesce(p_tenant, '*') and s.job in ('archive', 'archive:as_of'))
                            or left(s.job, length('archive:cap:' || coalesce(p_tenant, '*') || ':'))
                               = 'archive:cap:' || coalesce(p_tenant, '*') || ':'
           else false
         end
$$;

-- ------------------------------------------------------------------ runs and schedules
-- (no SET search_path here: a procedure with SET clauses cannot COMMIT; every name is qualified)
create or replace procedure pgmem.run_job(job text, params jsonb default '{}', max_batches integer default 1000)
  language plpgsql
as $$
declare
  v_fn text;
  v_tenant text := coalesce(params->>'tenant', pgmem.current_tenant());
  v_scope text;
  v_err text;
  v_more boolean;
  v_status text;
  v_run bigint;
  v_held text;
  v_locked boolean;
  i integer := 0;
  v_args text := '';
  k text;
  v jsonb;
  v_prev_tenant text := current_setting('pgmem.tenant', true);
  v_prev_path text := current_setting('search_path');
begin
  perform pgmem._check_args('run_job', jsonb_build_object('job', job, 'params', params));  -- sizes first (issue 27)
  if not pgmem._is_admin() then
    raise exception 'run_job needs the pgmem_admin role: jobs change or read every memory of a tenant'
      using errcode = '42501', hint = 'grant pgmem_admin to the login that runs jobs (pg_cron, `pgmem jobs run`)';
  end if;
  -- a procedure that commits cannot pin search_path with SET: it sets it for its run instead
  perform set_config('search_path', 'pgmem, pg_catalog, pg_temp', false);
  -- everything is checked before the session is changed in any way
  select j.fn into v_fn from pgmem._jobs() j where j.job = run_job.job;
  if v_fn is null then
    perform set_config('search_path', v_prev_path, false);
    perform pgmem._bad_input(format('unknown job "%s": jobs are %s', job,
                                    (select string_agg(j.job, ', ') from pgmem._jobs() j)));
  end if;
  if params is null or jsonb_typeof(params) <> 'object' then
    perform set_config('search_path', v_prev_path, false);
    perform pgmem._bad_input('params must be a JSON object of the job function''s arguments');
  end if;
  -- named arguments from the params object: names as identifiers, values as literals
  for k, v in select * from jsonb_each(params - 'tenant' || case when params->>'tenant' = '*' then '{}' else
                                         jsonb_strip_nulls(jsonb_build_object('tenant', params->'tenant')) end) loop
    if not exists (select 1 from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
                    where n.nspname = 'pgmem' and p.proname = v_fn and k = any(p.proargnames)) then
      perform set_config('search_path', v_prev_path, false);
      perform pgmem._bad_input(format('job %s has no parameter "%s"', job, k));
    end if;
    v_args := v_args || format(', %I => %L', k, v #>> '{}');
  end loop;
  -- {"tenant": "*"}: every tenant (what pg_cron runs), whatever the session's default tenant;
  -- the session's tenant is put back on every way out below
  if params->>'tenant' = '*' then
    perform set_config('pgmem.tenant', '', false);
    params := params - 'tenant';
    v_tenant := null;
  end if;
  v_scope := coalesce(v_tenant, '*');

  <<run>>
  begin
    -- batches of this job left 'running' by a backend that is gone were killed with it
    update pgmem.job_runs r set status = 'failed', finished_at = clock_timestamp(),
           error = 'interrupted: the backend running this batch ended before the batch did (killed, or the server restarted); its changes were rolled back'
     where r.job = run_job.job and r.status = 'running' and r.pid is not null and not pgmem._backend_alive(r.pid);
    -- hold the job for the run: a second run_job of it is skipped while this backend lives
    -- (two statements: a query sees the lock row only if it existed when the query started)
    v_locked := pgmem._job_lock_row(v_scope, job);
    if v_locked then
      v_locked := exists (select 1 from pgmem.job_locks l where l.tenant = v_scope and l.job = run_job.job for update skip locked);
    end if;
    if not v_locked then  -- a batch of the job is running in another transaction
      v_held := format('skipped: a batch of %s for %s is running in %s', job, coalesce(v_tenant, 'all tenants'),
                       pgmem._job_lock_holder(v_scope, job));
    else
      update pgmem.job_locks l set holder_pid = pg_backend_pid(), updated_at = now(),
             holder_since = (select a.backend_start from pg_catalog.pg_stat_activity a where a.pid = pg_backend_pid())
       where l.tenant = v_scope and l.job = run_job.job
         and (l.holder_pid is null or l.holder_pid = pg_backend_pid() or not pgmem._backend_alive(l.holder_pid, l.holder_since));
      if not found then
        v_held := format('skipped: run_job(%L) for %s is running in %s', job, coalesce(v_tenant, 'all tenants'),
                         pgmem._job_lock_holder(v_scope, job));
      end if;
    end if;
    if v_held is not null then
      insert into pgmem.job_runs (tenant, job, params, status, finished_at, error, pid)
      values (v_tenant, job, params, 'skipped', clock_timestamp(), v_held, pg_backend_pid());
      commit;
      raise notice 'pgmem: %', v_held;
      exit run;
    end if;
    commit;
    loop
      i := i + 1;
      v_err := null;
      -- the batch's row first, in its own transaction: a killed batch still leaves it
      insert into pgmem.job_runs (tenant, job, params, pid) values (v_tenant, job, params, pg_backend_pid())
      returning id into v_run;
      commit;
      perform set_config('pgmem.job_run_id', v_run::text, false);
      begin
        if i = 1 then  -- a run starts from the beginning, wherever an earlier unfinished run stopped
          perform pgmem._job_state_reset(job, v_tenant, params);
        end if;
        execute format('select count(*) from pgmem.%I(%s)', v_fn, substr(v_args, 3));
        select r.status, coalesce((r.details->>'more')::boolean, false) into v_status, v_more
          from pgmem.job_runs r where r.id = v_run;
      exception when others then
        get stacked diagnostics v_err = message_text;
      end;
      perform set_config('pgmem.job_run_id', '', false);
      if v_err is not null then
        update pgmem.job_runs r set status = 'failed', finished_at = clock_timestamp(), error = v_err where r.id = v_run;
        commit;
        raise warning 'pgmem job % failed: %', job, v_err;
        exit run;
      end if;
      if v_status = 'running' then  -- the function never started a batch (it returned early)
        update pgmem.job_runs r set status = 'ok', finished_at = clock_timestamp() where r.id = v_run;
      end if;
      commit;
      exit when v_status = 'skipped' or not coalesce(v_more, false) or i >= max_batches
                or (params->>'dry_run')::boolean is true;
    end loop;
  end run;
  update pgmem.job_locks l set holder_pid = null, holder_since = null, updated_at = now()
   where l.tenant = v_scope and l.job = run_job.job and l.holder_pid = pg_backend_pid();
  commit;
  perform set_config('pgmem.tenant', coalesce(v_prev_tenant, ''), false);
  perform set_config('search_path', v_prev_path, false);
end $$;
comment on procedure pgmem.run_job(text, jsonb, integer) is
  'Runs a job (merge, prune, archive, tune, purge; pgmem._jobs() lists them) to completion in batches, committing between them (short transactions); params are the job function''s named arguments ({"tenant": "*"}: all tenants). Each batch''s job_runs row is written first, in its own transaction. This is what pg_cron calls.';

create or replace view pgmem.job_status as
select distinct on (r.job, r.tenant)
       r.job, r.tenant, r.id as last_run_id,
       case when r.status = 'running' and not exists (select 1 from pg_catalog.pg_stat_activity a where a.pid = r.pid)
            then 'interrupted' else r.status end as last_status,
       r.started_at as last_started_at,
       r.finished_at as last_finished_at, extract(epoch from (r.finished_at - r.started_at)) as last_duration_s,
       r.examined as last_examined, r.changed as last_changed, r.error as last_error,
       (select count(*) from pgmem.job_runs f where f.job = r.job and f.tenant is not distinct from r.tenant
           and f.status = 'failed' and f.started_at > now() - interval '7 days') as failures_7d,
       (select count(*) from pgmem.job_runs f where f.job = r.job and f.tenant is not distinct from r.tenant
           and f.started_at > now() - interval '7 days') as runs_7d
  from pgmem.job_runs r
 where r.status <> 'skipped' and (r.tenant = pgmem.current_tenant() or pgmem._is_admin())
 order by r.job, r.tenant, r.id desc;
comment on view pgmem.job_status is 'The latest run of each job (per tenant; NULL = all tenants): status (interrupted: its backend ended while it ran), duration, counts, error, and failures in the last 7 days.';

-- cron.database_name is readable by superusers (and pg_read_all_settings) only
create or replace function pgmem._cron_database() returns text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  return current_setting('cron.database_name', true);
exception when insufficient_privilege then
  return 'unknown to this role';
end $$;

-- The VACUUM statement of the vacuum schedule (Shadow's compaction, issue 24; 425_compact.sql): one statement (pg_cron runs it outside a
-- transaction block, as VACUUM needs) over pgmem's tables, which the owner owns.
create or replace function pgmem.vacuum_command() returns text
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select 'VACUUM (ANALYZE, SKIP_LOCKED) ' || string_agg(format('%I.%I', n.nspname, c.relname), ', ' order by c.relname)
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
   where n.nspname = 'pgmem' and c.relkind = 'r' and c.relpersistence <> 't'
     and c.relowner = coalesce(to_regrole('pgmem_owner'), c.relowner)  -- (the engine's code, py_modules, is the superuser's)
$$;
comment on function pgmem.vacuum_command() is
  'The VACUUM (ANALYZE, SKIP_LOCKED) statement over pgmem''s tables that the vacuum schedule runs nightly (VACUUM cannot run inside a function: pg_cron runs it as its own statement; `pgmem jobs vacuum` runs it by hand).';

create or replace function pgmem.job_schedule_commands(
  merge text default '0 * * * *', prune text default '15 3 * * *', archive text default '30 3 * * *',
  tune text default '45 3 * * *', purge text default null, database text default null)
returns table (job_name text, schedule text, command text, database_name text)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select format('pgmem-%s-%s', j.job, coalesce(database, current_database())), j.sched,
         format('CALL pgmem.run_job(%L, ''{"tenant": "*"}'')', j.job), coalesce(database, current_database())
    from (select v.job, v.sched from (values ('merge', merge), ('prune', prune), ('archive', archive), ('tune', tune),
                                              ('purge', purge)) v(job, sched)
          union all  -- jobs added to the registry later run on their default schedule
          select r.job, r.schedule from pgmem._jobs() r
           where r.job not in ('merge', 'prune', 'archive', 'tune', 'purge')) j(job, sched)
   where j.sched is not null
     and pgmem._check_args('job_schedule_commands', jsonb_build_object('merge', merge, 'prune', prune, 'archive', archive,
                                                                       'tune', tune, 'purge', purge, 'database', database))
  union all
  -- Shadow's compaction (issue 24, 425_compact.sql): VACUUM cannot run inside a function or a
  -- procedure, so pg_cron runs the statement itself, nightly after the compact job
  select format('pgmem-vacuum-%s', coalesce(database, current_database())), '10 4 * * *', pgmem.vacuum_command(),
         coalesce(database, current_database())
   where pgmem._check_args('job_schedule_commands', jsonb_build_object('database', database))
$$;
comment on function pgmem.job_schedule_commands(text, text, text, text, text, text) is
  'The pg_cron entries pgmem installs (name, schedule, command, database): run them with cron.schedule_in_database() in the database pg_cron lives in when that is another one.';

create or replace function pgmem.schedule_jobs(
  merge text default '0 * * * *', prune text default '15 3 * * *', archive text default '30 3 * * *',
  tune text default '45 3 * * *', purge text default null)
returns table (job_name text, schedule text, command text, jobid bigint)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare r record;
begin
  perform pgmem._check_args('schedule_jobs', jsonb_build_object('merge', merge, 'prune', prune, 'archive', archive, 'tune', tune, 'purge', purge));  -- sizes first (issue 27)
  if to_regnamespace('cron') is null then
    raise exception 'pg_cron is not installed in database "%" (it lives in the database named by cron.database_name: "%")',
      current_database(), coalesce(pgmem._cron_database(), 'unset')
      using errcode = '55000',
            hint = 'in that database run the commands of: select * from pgmem.job_schedule_commands() with cron.schedule_in_database(job_name, schedule, command, database_name); `pgmem jobs schedule` does it for you';
  end if;
  for r in select * from pgmem.job_schedule_commands(merge, prune, archive, tune, purge) loop
    job_name := r.job_name; schedule := r.schedule; command := r.command;
    execute 'select cron.schedule_in_database($1, $2, $3, $4)' into jobid using r.job_name, r.schedule, r.command, r.database_name;
    return next;
  end loop;
end $$;
comment on function pgmem.schedule_jobs(text, text, text, text, text) is
  'Installs pg_cron schedules for pgmem''s jobs in this database (defaults: merge hourly, prune, archive, delete_archived, tune, compact and vacuum nightly; purge off; the others of pgmem._jobs() on theirs). Pass NULL to leave one out. Needs pg_cron in this database.';

create or replace function pgmem.unschedule_jobs() returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare n integer := 0; j bigint;
begin
  if to_regnamespace('cron') is null then
    raise exception 'pg_cron is not installed in database "%"', current_database() using errcode = '55000',
      hint = 'unschedule from the pg_cron database: select cron.unschedule(jobid) from cron.job where jobname like ''pgmem-%''';
  end if;
  for j in execute 'select jobid from cron.job where jobname like ''pgmem-%'' and database = current_database()' loop
    execute 'select cron.unschedule($1)' using j;
    n := n + 1;
  end loop;
  return n;
end $$;
comment on function pgmem.unschedule_jobs() is 'Removes every pg_cron schedule pgmem installed for this database; returns how many.';
