-- The job runner and its schedules. The jobs themselves live one per file: 410 merge,
-- 420 prune/purge/archive, 430 thresholds (other concerns add theirs in 450-499).
-- Lifecycle jobs: duplicate merge, pruning, purge, archival, threshold tuning. Each is a
-- function that does one bounded batch in the caller's (short) transaction and can be
-- called by hand; `CALL pgmem.run_job(job, params)` repeats batches, committing between
-- them, until there is nothing left. Every run is a row in pgmem.job_runs; two runs of the
-- same job and tenant never overlap (advisory lock: the second is recorded as skipped).
-- Nothing is destroyed except by purge(): merged, pruned and archived memories keep their
-- rows, and every change is in pgmem.history.
--
-- Scope: a job works on the current tenant (pgmem.tenant) or, with no tenant set, on all
-- tenants; the latter needs pgmem_admin (pg_cron runs jobs that way).

create or replace function pgmem._job_scope(p_tenant text) returns text
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
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

create or replace function pgmem._job_lock_key(p_job text, p_tenant text) returns bigint
  language sql immutable
  return hashtextextended('pgmem-job:' || p_job || ':' || coalesce(p_tenant, '*'), 0);

create or replace function pgmem._job_begin(p_job text, p_tenant text, p_params jsonb) returns bigint
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare id bigint;
begin
  -- a whole run (run_job) holds the session lock; a single batch takes the transaction lock
  if not pg_try_advisory_xact_lock(pgmem._job_lock_key(p_job, p_tenant)) then
    insert into pgmem.job_runs (tenant, job, params, status, finished_at, error)
    values (p_tenant, p_job, p_params, 'skipped', clock_timestamp(), 'skipped: already running');
    return null;
  end if;
  -- jobs that change memories wait for each other (one at a time per database): merge and
  -- prune lock rows in different orders and would otherwise deadlock
  if p_job in ('merge', 'prune', 'archive', 'purge') then
    perform pg_advisory_xact_lock(hashtextextended('pgmem-maintenance', 0));
  end if;
  insert into pgmem.job_runs (tenant, job, params) values (p_tenant, p_job, p_params) returning job_runs.id into id;
  return id;
end $$;

create or replace function pgmem._job_end(p_run bigint, p_examined bigint, p_changed bigint, p_details jsonb default '{}')
returns void
  language sql volatile
  set search_path = pgmem, public, pg_temp
as $$
  update pgmem.job_runs set finished_at = clock_timestamp(), status = 'ok', examined = p_examined,
         changed = p_changed, details = details || coalesce(p_details, '{}')
   where id = p_run
$$;

-- A job's position (a keyset cursor, or a run's as_of and cut-off) in pgmem.job_state.
create or replace function pgmem._job_state_save(p_tenant text, p_job text, p_at timestamptz, p_id bigint)
returns void
  language sql volatile
  set search_path = pgmem, public, pg_temp
as $$
  insert into pgmem.job_state (tenant, job, cursor_at, cursor_id) values (p_tenant, p_job, p_at, p_id)
  on conflict (tenant, job) do update set cursor_at = excluded.cursor_at, cursor_id = excluded.cursor_id, updated_at = now()
$$;
comment on function pgmem._job_state_save(text, text, timestamptz, bigint) is
  'Saves (upserts) a job''s position in pgmem.job_state: cursor_at, cursor_id for (tenant, job).';

-- Where an unfinished run stopped. Some jobs keep their position in pgmem.job_state only
-- for the length of a run (a run = the calls of run_job, or calls repeated by hand while
-- job_runs.details->'more' is true): merge with full_scan ('merge_full', 'merge_full_text')
-- and prune ('prune:<mode>', and 'prune:bottom:<scope>' for aggressive mode). The job deletes
-- them when its run is complete, and run_job before its first batch, so that every run_job
-- starts from the beginning even after an earlier run stopped half-way (max_batches, an
-- error). The incremental merge cursors ('merge', 'merge_text') outlive runs: never reset.
-- Dry runs neither read nor write these rows, so resetting for one would only lose a run
-- under way.
create or replace function pgmem._job_state_reset(p_job text, p_tenant text, p_params jsonb default '{}')
returns void
  language sql volatile
  set search_path = pgmem, public, pg_temp
as $$
  delete from pgmem.job_state s
   where coalesce((p_params->>'dry_run')::boolean, false) is false
     and case p_job
           when 'merge' then coalesce((p_params->>'full_scan')::boolean, false)
                             and s.tenant = coalesce(p_tenant, '*') and s.job in ('merge_full', 'merge_full_text')
           -- (prune's default mode is normal)
           when 'prune' then (s.tenant = coalesce(p_tenant, '*') and s.job = 'prune:' || coalesce(p_params->>'mode', 'normal'))
                          or (coalesce(p_params->>'mode', 'normal') = 'aggressive' and s.job = 'prune:bottom:' || coalesce(p_tenant, '*'))
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
  v_key bigint;
  v_err text;
  v_more boolean;
  v_last bigint;
  i integer := 0;
  v_args text := '';
  k text;
  v jsonb;
  v_prev_tenant text := current_setting('pgmem.tenant', true);
  v_prev_path text := current_setting('search_path');
begin
  -- a procedure that commits cannot pin search_path with SET: it sets it for its run instead
  perform set_config('search_path', 'pgmem, public, pg_temp', false);
  -- {"tenant": "*"}: every tenant (what pg_cron runs), whatever the session's default tenant
  if params->>'tenant' = '*' then
    perform set_config('pgmem.tenant', '', false);
    params := params - 'tenant';
    v_tenant := null;
  end if;
  v_fn := case job when 'merge' then 'merge_duplicates' when 'prune' then 'prune' when 'archive' then 'archive_stale'
                   when 'tune' then 'tune_thresholds' when 'purge' then 'purge' end;
  if v_fn is null then
    perform pgmem._bad_input(format('unknown job "%s": jobs are merge, prune, archive, tune, purge', job));
  end if;
  if params is null or jsonb_typeof(params) <> 'object' then
    perform pgmem._bad_input('params must be a JSON object of the job function''s arguments');
  end if;
  -- named arguments from the params object: names as identifiers, values as literals
  for k, v in select * from jsonb_each(params) loop
    if not exists (select 1 from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
                    where n.nspname = 'pgmem' and p.proname = v_fn and k = any(p.proargnames)) then
      perform pgmem._bad_input(format('job %s has no parameter "%s"', job, k));
    end if;
    v_args := v_args || format(', %I => %L', k, v #>> '{}');
  end loop;
  v_key := pgmem._job_lock_key(job || ':run', v_tenant);
  if not pg_try_advisory_lock(v_key) then
    insert into pgmem.job_runs (tenant, job, params, status, finished_at, error)
    values (v_tenant, job, params, 'skipped', clock_timestamp(), 'skipped: already running');
    commit;
    perform set_config('search_path', v_prev_path, false);
    return;
  end if;
  loop
    i := i + 1;
    v_err := null;
    begin
      if i = 1 then  -- a run starts from the beginning, wherever an earlier unfinished run stopped
        perform pgmem._job_state_reset(job, v_tenant, params);
      end if;
      execute format('select count(*) from pgmem.%I(%s)', v_fn, substr(v_args, 3));
      select r.id, coalesce((r.details->>'more')::boolean, false) into v_last, v_more
        from pgmem.job_runs r where r.job = run_job.job and r.status = 'ok' and r.tenant is not distinct from v_tenant
       order by r.id desc limit 1;
    exception when others then
      get stacked diagnostics v_err = message_text;
    end;
    if v_err is not null then
      insert into pgmem.job_runs (tenant, job, params, status, finished_at, error)
      values (v_tenant, job, params, 'failed', clock_timestamp(), v_err);
      commit;
      perform pg_advisory_unlock(v_key);
      perform set_config('pgmem.tenant', coalesce(v_prev_tenant, ''), false);
      perform set_config('search_path', v_prev_path, false);
      raise warning 'pgmem job % failed: %', job, v_err;
      return;
    end if;
    commit;
    exit when not coalesce(v_more, false) or i >= max_batches or (params->>'dry_run')::boolean is true;
  end loop;
  perform pg_advisory_unlock(v_key);
  perform set_config('pgmem.tenant', coalesce(v_prev_tenant, ''), false);
  perform set_config('search_path', v_prev_path, false);
end $$;
comment on procedure pgmem.run_job(text, jsonb, integer) is
  'Runs a job (merge, prune, archive, tune, purge) to completion in batches, committing between them (short transactions); params are the job function''s named arguments. This is what pg_cron calls.';

create or replace view pgmem.job_status as
select distinct on (r.job, r.tenant)
       r.job, r.tenant, r.id as last_run_id, r.status as last_status, r.started_at as last_started_at,
       r.finished_at as last_finished_at, extract(epoch from (r.finished_at - r.started_at)) as last_duration_s,
       r.examined as last_examined, r.changed as last_changed, r.error as last_error,
       (select count(*) from pgmem.job_runs f where f.job = r.job and f.tenant is not distinct from r.tenant
           and f.status = 'failed' and f.started_at > now() - interval '7 days') as failures_7d,
       (select count(*) from pgmem.job_runs f where f.job = r.job and f.tenant is not distinct from r.tenant
           and f.started_at > now() - interval '7 days') as runs_7d
  from pgmem.job_runs r
 where r.status <> 'skipped' and (r.tenant = pgmem.current_tenant() or pgmem._is_admin())
 order by r.job, r.tenant, r.id desc;
comment on view pgmem.job_status is 'The latest run of each job (per tenant; NULL = all tenants): status, duration, counts, error, and failures in the last 7 days.';

-- cron.database_name is readable by superusers (and pg_read_all_settings) only
create or replace function pgmem._cron_database() returns text
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
as $$
begin
  return current_setting('cron.database_name', true);
exception when insufficient_privilege then
  return 'unknown to this role';
end $$;

create or replace function pgmem.job_schedule_commands(
  merge text default '0 * * * *', prune text default '15 3 * * *', archive text default '30 3 * * *',
  tune text default '45 3 * * *', purge text default null, database text default null)
returns table (job_name text, schedule text, command text, database_name text)
  language sql stable
  set search_path = pgmem, public, pg_temp
as $$
  select format('pgmem-%s-%s', j.job, coalesce(database, current_database())), j.sched,
         format('CALL pgmem.run_job(%L, ''{"tenant": "*"}'')', j.job), coalesce(database, current_database())
    from (values ('merge', merge), ('prune', prune), ('archive', archive), ('tune', tune), ('purge', purge)) j(job, sched)
   where j.sched is not null
$$;
comment on function pgmem.job_schedule_commands(text, text, text, text, text, text) is
  'The pg_cron entries pgmem installs (name, schedule, command, database): run them with cron.schedule_in_database() in the database pg_cron lives in when that is another one.';

create or replace function pgmem.schedule_jobs(
  merge text default '0 * * * *', prune text default '15 3 * * *', archive text default '30 3 * * *',
  tune text default '45 3 * * *', purge text default null)
returns table (job_name text, schedule text, command text, jobid bigint)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare r record;
begin
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
  'Installs pg_cron schedules for pgmem''s jobs in this database (defaults: merge hourly, prune, archive and tune nightly; purge off). Pass NULL to leave one out. Needs pg_cron in this database.';

create or replace function pgmem.unschedule_jobs() returns integer
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
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
