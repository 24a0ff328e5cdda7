-- Pruning, purge and archival: the lifecycle jobs that change a memory's state (prune,
-- archive) or destroy soft-deleted rows (purge, the only one).

-- ------------------------------------------------------------------ prune
-- engram.md, Pruning Modes: gentle = expired; normal = expired or decayed importance < 0.01;
-- aggressive = also the bottom 10% by decayed importance: sorted ascending, the first
-- floor(n × 10%), per tenant (ties by id). Soft delete (restorable).
-- A run (run_job, or calls repeated by hand while job_runs.details->'more' is true) walks the
-- active memories once, in keyset pages by id, and judges each memory on its own, at one
-- as_of for the whole run: a call costs its page, not a ranking of every memory. Only
-- aggressive mode ranks, once, when its run starts: per tenant it keeps the memory at rank
-- floor(n × 10%) (the cut-off); a memory is in the bottom fraction iff (decayed importance,
-- id) <= the cut-off's, so a run prunes the same memories in one call or in many.
-- job_state while a run is under way (pgmem._job_state_reset deletes it when the run ends):
--   (scope, 'prune:<mode>')           cursor_at = the run's as_of, cursor_id = the last id walked
--   (tenant, 'prune:bottom:<scope>')  cursor_at = the run's as_of, cursor_id = the cut-off memory
-- (scope = the tenant, or '*' for all). A dry run starts afresh and changes no job_state.
create or replace function pgmem.prune(
  mode text default 'normal',
  dry_run boolean default false,
  batch integer default 10000,
  tenant text default null,
  min_importance float8 default 0.01,
  bottom_fraction float8 default 0.10,
  as_of timestamptz default null)
returns table (memory_id bigint, reason text, decayed_importance float8, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_scope text := coalesce(v_tenant, '*');
  v_run bigint;
  v_as_of timestamptz;
  v_state_at timestamptz;   -- the run under way: its as_of ...
  v_after bigint := 0;      -- ... and the last id it walked
  v_found bigint;
  v_last bigint;
  v_full boolean;
  v_examined bigint;
  v_changed bigint := 0;
  v_why text;
begin
  perform pgmem._check_args('prune', jsonb_build_object('mode', mode, 'tenant', tenant));  -- sizes first (issue 27)
  if mode is null or mode not in ('gentle', 'normal', 'aggressive') then
    perform pgmem._bad_input(format('unknown prune mode "%s": modes are gentle, normal, aggressive', mode));
  end if;
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  perform pgmem._check_unit(min_importance, 'min_importance'), pgmem._check_unit(bottom_fraction, 'bottom_fraction');
  v_run := pgmem._job_begin('prune', v_tenant, jsonb_build_object('mode', mode, 'dry_run', dry_run, 'batch', batch));
  if v_run is null then return; end if;

  create temp table if not exists _pgmem_prune_cut (tenant text, di float8, id bigint) on commit drop;
  truncate _pgmem_prune_cut;
  create temp table if not exists _pgmem_prune_page (id bigint, di float8, why text) on commit drop;
  truncate _pgmem_prune_page;

  -- go on with the run under way (same mode; as_of not given or the same), or start one
  if not dry_run then
    select s.cursor_at, s.cursor_id into v_state_at, v_after from pgmem.job_state s
     where s.tenant = v_scope and s.job = 'prune:' || mode;
  end if;
  if v_state_at is not null and (as_of is null or as_of = v_state_at) then
    v_as_of := v_state_at;
    if mode = 'aggressive' then
      -- the cut-offs chosen when the run started (decayed importance at the run's as_of)
      insert into _pgmem_prune_cut
      select s.tenant, pgmem.decayed_importance(c.importance, c.created_at, c.access_count, v_as_of), c.id
        from pgmem.job_state s join pgmem.memories c on c.id = s.cursor_id
       where s.job = 'prune:bottom:' || v_scope;
    end if;
  else
    v_as_of := coalesce(as_of, now());
    v_after := 0;
    if not dry_run then
      perform pgmem._job_state_reset('prune', v_tenant, jsonb_build_object('mode', mode));
    end if;
    if mode = 'aggressive' then
      -- engram.md, Pruning Modes (aggressive): sort by decayed importance, prune the first
      -- floor(n × 10%), per tenant; the cut-off is the memory at that rank (none when 0)
      insert into _pgmem_prune_cut
      select q.tenant, q.di, q.id
        from (select s.*, row_number() over (partition by s.tenant order by s.di, s.id) as rn,
                     count(*) over (partition by s.tenant) as n
                from (select m.tenant, m.id,
                             pgmem.decayed_importance(m.importance, m.created_at, m.access_count, v_as_of) as di
                        from pgmem.memories m
                       where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant)) s) q
       where q.rn = floor(q.n * bottom_fraction);
      if not dry_run then
        perform pgmem._job_state_save(c.tenant, 'prune:bottom:' || v_scope, v_as_of, c.id) from _pgmem_prune_cut c;
      end if;
    end if;
  end if;

  -- this call's page: the next `batch` memories to prune after the cursor, by id, each judged
  -- on its own (no ranking)
  insert into _pgmem_prune_page
  select q.id, q.di, q.why
    from (select m.id, d.di,
                 case when m.expires_at is not null and m.expires_at < v_as_of then 'expired'
                      when mode in ('normal', 'aggressive') and d.di < min_importance then 'decayed'
                      when mode = 'aggressive'
                       and (d.di, m.id) <= (select c.di, c.id from _pgmem_prune_cut c where c.tenant = m.tenant) then 'bottom'
                 end as why
            from pgmem.memories m
           cross join lateral (select pgmem.decayed_importance(m.importance, m.created_at, m.access_count, v_as_of) as di) d
           where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant) and m.id > v_after) q
   where q.why is not null
   order by q.id
   limit batch;
  select count(*), max(p.id) into v_found, v_last from _pgmem_prune_page p;
  v_full := coalesce(v_found > 0 and v_found >= batch, false);  -- there may be more after this page
  -- examined: the active memories this call walked past
  select count(*) into v_examined from pgmem.memories m
   where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant) and m.id > v_after
     and (not v_full or m.id <= v_last);

  -- set-based: the page's memories that are still active and that no other transaction holds
  -- (one held now is left for the next run) are soft-deleted by one UPDATE per reason; their
  -- history is one statement each (040). (The decayed importance of each is in history as
  -- what it is computed from: the before snapshot and the run's as_of.)
  create temp table if not exists _pgmem_pruned (id bigint) on commit drop;
  truncate _pgmem_pruned;
  if not dry_run then
    for v_why in select distinct p.why from _pgmem_prune_page p order by 1 loop
      perform pgmem._set_op('delete', jsonb_build_object('job', 'prune', 'mode', mode, 'reason', v_why,
                                                        'as_of', v_as_of, 'job_run_id', v_run));
      with held as (
        select m.id from pgmem.memories m join _pgmem_prune_page p on p.id = m.id
         where p.why = v_why and m.state = 'active'
         order by m.id for update of m skip locked),
      upd as (update pgmem.memories m set state = 'deleted' from held h where m.id = h.id returning m.id)
      insert into _pgmem_pruned select upd.id from upd;
    end loop;
    perform pgmem._set_op(null);
    select count(*) into v_changed from _pgmem_pruned;
  end if;
  return query
  select p.id, p.why, p.di, not dry_run from _pgmem_prune_page p
   where dry_run or exists (select 1 from _pgmem_pruned x where x.id = p.id)
   order by p.di, p.id;

  if not dry_run and v_full then
    perform pgmem._job_state_save(v_scope, 'prune:' || mode, v_as_of, v_last);
  elsif not dry_run then
    perform pgmem._job_state_reset('prune', v_tenant, jsonb_build_object('mode', mode));  -- the run is complete
  end if;
  perform pgmem._job_end(v_run, v_examined, v_changed, jsonb_build_object('more', v_full and not dry_run));
end $$;
comment on function pgmem.prune(text, boolean, integer, text, float8, float8, timestamptz) is
  'Engram pruning: gentle = expired; normal = expired or decayed importance < 0.01; aggressive = also the bottom floor(n × 10%) by decayed importance, per tenant, ranked once per run. One call prunes at most batch memories, walking them by id from where the previous call of the run stopped (details->''more'' in job_runs; run_job repeats the calls). Soft delete (state deleted, restorable); dry_run lists what the first call of a new run would prune.';

-- The only path that destroys memories: rows soft-deleted longer than older_than.
create or replace function pgmem.purge(older_than interval default '30 days', dry_run boolean default false,
                                       batch integer default 10000, tenant text default null)
returns table (memory_id bigint, deleted_at timestamptz, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  v_changed bigint := 0;
begin
  perform pgmem._check_args('purge', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  if older_than is null or older_than < interval '0' then
    perform pgmem._bad_input('older_than must be a non-negative interval, e.g. ''30 days''');
  end if;
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  v_run := pgmem._job_begin('purge', v_tenant, jsonb_build_object('older_than', older_than::text, 'dry_run', dry_run));
  if v_run is null then return; end if;
  -- this batch: the memories deleted long enough ago that no other transaction holds (one held
  -- now, e.g. being restored, is left alone); then one UPDATE (pointers of memories merged into
  -- them) and one DELETE, whose history (op purge, the last state) is one statement (040)
  perform 'PRAGMA:TABLE: _pgmem_purge (id bigint, deleted_at timestamptz)';  -- for plpgsql_check
  create temp table if not exists _pgmem_purge (id bigint, deleted_at timestamptz) on commit drop;
  truncate _pgmem_purge;
  insert into _pgmem_purge
  select m.id, m.state_changed_at from pgmem.memories m
   where m.state = 'deleted' and coalesce(m.state_changed_at, m.updated_at) < now() - older_than
     and (v_tenant is null or m.tenant = v_tenant)
   order by m.id limit batch
     for update of m skip locked;
  if not dry_run then
    update pgmem.memories m set merged_into = null from _pgmem_purge p where m.merged_into = p.id;
    perform pgmem._set_op('purge', jsonb_build_object('job_run_id', v_run, 'older_than', older_than::text));
    with gone as (delete from pgmem.memories m using _pgmem_purge p where m.id = p.id returning m.id)
    delete from _pgmem_purge p where not exists (select 1 from gone g where g.id = p.id);
    perform pgmem._set_op(null);
    select count(*) into v_changed from _pgmem_purge;
  end if;
  return query select p.id, p.deleted_at, not dry_run from _pgmem_purge p order by p.id;
  perform pgmem._job_end(v_run, (select count(*) from _pgmem_purge), v_changed, jsonb_build_object('more', v_changed >= batch));
end $$;
comment on function pgmem.purge(interval, boolean, integer, text) is
  'Deletes for good the memories soft-deleted longer ago than older_than (their last state is kept in history as op purge). The only function that destroys memories.';

-- ------------------------------------------------------------------ archive
-- shadow-memory-system.md, MemoryLifecycleManager: active memories move to archived when
-- their age exceeds the retention period or their activation score drops below the archival
-- threshold. pgmem requires both age and disuse, so that a memory in use is never archived
-- just for being old: a memory is archived when it is older than the retention and, within
-- the retention window, it was not accessed (last_accessed_at) and, with
-- activation_threshold > 0, never activated with a score at or above it (pgmem.activation_log,
-- what activate() records). Archived memories are left out of search by default
-- (filters => '{"state": ["active", "archived"]}' includes them) and come back with
-- pgmem.restore().
-- A run walks the old active memories once, by (created_at, id), at one as_of: each call goes
-- on from where the previous one stopped (job_state 'archive', for the length of the run).
create or replace function pgmem.archive_stale(
  retention interval default '90 days',
  activation_threshold float8 default 0,
  dry_run boolean default false,
  batch integer default 10000,
  tenant text default null,
  as_of timestamptz default null)
returns table (memory_id bigint, age_days float8, last_accessed_at timestamptz, best_recent_score float8, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_scope text := coalesce(v_tenant, '*');
  v_run bigint;
  v_as_of timestamptz := coalesce(as_of, now());
  v_cursor record;
  v_found bigint;
  v_full boolean;
  v_examined bigint;
  v_changed bigint := 0;
  v_last record;
begin
  perform pgmem._check_args('archive_stale', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  if retention is null or retention < interval '0' then
    perform pgmem._bad_input('retention must be a non-negative interval, e.g. ''90 days''');
  end if;
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  perform pgmem._check_unit(activation_threshold, 'activation_threshold');
  perform pgmem._check_time(as_of, 'as_of', true);
  v_run := pgmem._job_begin('archive', v_tenant, jsonb_build_object('retention', retention::text,
            'activation_threshold', activation_threshold, 'dry_run', dry_run));
  if v_run is null then return; end if;
  -- go on with the run under way (same as_of, or none given), or start one
  select s.cursor_at, s.cursor_id, (s_at.v)::timestamptz as run_as_of into v_cursor
    from pgmem.job_state s cross join lateral (select s2.cursor_at as v from pgmem.job_state s2
                                                where s2.tenant = s.tenant and s2.job = 'archive:as_of') s_at
   where not dry_run and s.tenant = v_scope and s.job = 'archive';
  if v_cursor.run_as_of is not null and (as_of is null or as_of = v_cursor.run_as_of) then
    v_as_of := v_cursor.run_as_of;
  else
    select null::timestamptz as cursor_at, null::bigint as cursor_id, null::timestamptz as run_as_of into v_cursor;
  end if;

  perform 'PRAGMA:TABLE: _pgmem_archive (id bigint, created_at timestamptz, age float8, la timestamptz, best float8)';  -- for plpgsql_check
  create temp table if not exists _pgmem_archive (id bigint, created_at timestamptz, age float8, la timestamptz,
                                                  best float8) on commit drop;
  truncate _pgmem_archive;
  insert into _pgmem_archive
  select m.id, m.created_at, pgmem.age_days(m.created_at, v_as_of), m.last_accessed_at, a.best
    from pgmem.memories m
    left join lateral (select max(l.score)::float8 as best from pgmem.activation_log l
                        where l.memory_id = m.id and l.tenant = m.tenant and l.logged_at > v_as_of - retention) a on true
   where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant) and m.created_at < v_as_of - retention
     and (v_cursor.cursor_at is null or (m.created_at, m.id) > (v_cursor.cursor_at, v_cursor.cursor_id))
     and (m.last_accessed_at is null or m.last_accessed_at < v_as_of - retention)
     and (activation_threshold = 0 or coalesce(a.best, 0) < activation_threshold)
   order by m.created_at, m.id
   limit batch;
  select count(*) into v_found from _pgmem_archive;
  select x.created_at, x.id into v_last from _pgmem_archive x order by x.created_at desc, x.id desc limit 1;
  v_full := v_found >= batch;
  -- examined: the old active memories this call walked past
  select count(*) into v_examined from pgmem.memories m
   where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant) and m.created_at < v_as_of - retention
     and (v_cursor.cursor_at is null or (m.created_at, m.id) > (v_cursor.cursor_at, v_cursor.cursor_id))
     and (not v_full or (m.created_at, m.id) <= (v_last.created_at, v_last.id));

  -- set-based: the ones still active that no other transaction holds, in one UPDATE (history:
  -- one statement, 040)
  if not dry_run then
    perform pgmem._set_op('archive', jsonb_build_object('job', 'archive', 'retention', retention::text,
      'activation_threshold', activation_threshold, 'as_of', v_as_of, 'job_run_id', v_run));
    with held as (select m.id from pgmem.memories m join _pgmem_archive x on x.id = m.id
                   where m.state = 'active' order by m.id for update of m skip locked),
    upd as (update pgmem.memories m set state = 'archived' from held h where m.id = h.id returning m.id)
    delete from _pgmem_archive x where not exists (select 1 from upd where upd.id = x.id);
    perform pgmem._set_op(null);
    select count(*) into v_changed from _pgmem_archive;
    if v_full then
      perform pgmem._job_state_save(v_scope, 'archive', v_last.created_at, v_last.id),
              pgmem._job_state_save(v_scope, 'archive:as_of', v_as_of, null);
    else  -- the run is complete
      delete from pgmem.job_state s where s.tenant = v_scope and s.job in ('archive', 'archive:as_of');
    end if;
  end if;
  return query select x.id, x.age, x.la, x.best, not dry_run from _pgmem_archive x order by x.created_at, x.id;
  perform pgmem._job_end(v_run, v_examined, v_changed, jsonb_build_object('more', v_full and not dry_run));
end $$;
comment on function pgmem.archive_stale(interval, float8, boolean, integer, text, timestamptz) is
  'Shadow lifecycle: archives active memories older than retention that were not used within it: not accessed, and (activation_threshold > 0) never activated with a score >= activation_threshold (pgmem.activation_log). One call archives at most batch memories, walking them by age from where the previous call of the run stopped. Restorable; excluded from default search.';

