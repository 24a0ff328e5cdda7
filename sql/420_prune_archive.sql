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
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_scope text := coalesce(v_tenant, '*');
  v_clock boolean := as_of is null;  -- decayed: each tenant's own clock and the grace (issue 36), else at as_of
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

  -- each tenant's clock at the run's as_of, and its grace (issue 36; pgmem._tenant_clock): without
  -- as_of the decayed trigger reads the decayed importance at the tenant's clock, its age counted
  -- in this store (from the later of created_at and when it was stored, as archive's age trigger),
  -- and spares a memory in its grace (stored less than lifecycle_grace before that clock). Expiry
  -- is the wall clock's (an expires_at is a date), and aggressive's bottom fraction a ranking of
  -- the run's as_of.
  perform 'PRAGMA:TABLE: _pgmem_clock (tenant text, clock timestamptz, grace interval)';
  create temp table if not exists _pgmem_clock (tenant text primary key, clock timestamptz, grace interval) on commit drop;
  truncate _pgmem_clock;
  if v_clock then
    insert into _pgmem_clock
    select t.tenant, pgmem._tenant_clock(t.tenant, v_as_of),
           coalesce((pgmem._setting_of(t.tenant, 'lifecycle_grace') #>> '{}')::interval, interval '0')
      from (select v_tenant as tenant where v_tenant is not null
            union
            select distinct m.tenant from pgmem.memories m where v_tenant is null and m.state = 'active') t;
  end if;

  -- this call's page: the next `batch` memories to prune after the cursor, by id, each judged
  -- on its own (no ranking)
  insert into _pgmem_prune_page
  select q.id, case when q.why = 'decayed' then q.dc else q.di end, q.why
    from (select m.id, d.di, k.dc,
                 case when m.expires_at is not null and m.expires_at < v_as_of then 'expired'
                      when mode in ('normal', 'aggressive') and k.dc < min_importance and not k.in_grace then 'decayed'
                      when mode = 'aggressive'
                       and (d.di, m.id) <= (select c.di, c.id from _pgmem_prune_cut c where c.tenant = m.tenant) then 'bottom'
                 end as why
            from pgmem.memories m
           cross join lateral (select pgmem.decayed_importance(m.importance, m.created_at, m.access_count, v_as_of) as di) d
            left join _pgmem_clock ck on ck.tenant = m.tenant
           -- (at the tenant's clock, from the memory's birth in this store: an import is never
           -- deleted for its dates alone; what the month after it leaves unused, archive takes)
           cross join lateral pgmem._lifecycle_clock(m.id, m.created_at, coalesce(ck.clock, v_as_of), ck.grace) g
           cross join lateral (select pgmem.decayed_importance(m.importance, g.born, m.access_count, g.at) as dc,
                                      g.in_grace) k
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
      upd as (update pgmem.memories m set state = 'deleted', state_changed_at = now(), updated_at = now()
                from held h where m.id = h.id returning m.id)
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
  -- a memory of the page another transaction held (FOR UPDATE SKIP LOCKED: a tenant's row locks
  -- never stall the run) is reported, and pruned by a later run (issue 27, M1)
  perform pgmem._job_end(v_run, v_examined, v_changed, jsonb_build_object('more', v_full and not dry_run)
    || case when not dry_run and v_found > v_changed
            then jsonb_build_object('skipped_locked', v_found - v_changed) else '{}' end);
end $$;
comment on function pgmem.prune(text, boolean, integer, text, float8, float8, timestamptz) is
  'Engram pruning: gentle = expired; normal = expired or decayed importance < 0.01; aggressive = also the bottom floor(n × 10%) by decayed importance, per tenant, ranked once per run. One call prunes at most batch memories, walking them by id from where the previous call of the run stopped (details->''more'' in job_runs; run_job repeats the calls). Soft delete (state deleted, restorable); dry_run lists what the first call of a new run would prune. Without as_of (the nightly job) the decayed trigger reads each tenant''s own clock, counts age in the store and spares an import for lifecycle_grace of use (issue 36).';

-- The only path that destroys memories: rows soft-deleted longer than older_than.
create or replace function pgmem.purge(older_than interval default '30 days', dry_run boolean default false,
                                       batch integer default 10000, tenant text default null)
returns table (memory_id bigint, deleted_at timestamptz, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  v_changed bigint := 0;
  v_found bigint;
  v_skipped bigint := 0;
  v_id bigint;
  v_prev_lock_timeout text := current_setting('lock_timeout');
begin
  perform pgmem._check_args('purge', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  if older_than is null or older_than < interval '0' then
    perform pgmem._bad_input('older_than must be a non-negative interval, e.g. ''30 days''');
  end if;
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  v_run := pgmem._job_begin('purge', v_tenant, jsonb_build_object('older_than', older_than::text, 'dry_run', dry_run));
  if v_run is null then return; end if;
  -- this batch: the memories deleted long enough ago, less those another transaction holds (one
  -- held now, e.g. being restored, is left alone and reported); then one UPDATE (pointers of
  -- memories merged into them) and one DELETE, whose history (op purge, the last state) is one
  -- statement (040)
  perform 'PRAGMA:TABLE: _pgmem_purge (id bigint, deleted_at timestamptz)';  -- for plpgsql_check
  create temp table if not exists _pgmem_purge (id bigint, deleted_at timestamptz) on commit drop;
  truncate _pgmem_purge;
  insert into _pgmem_purge
  select m.id, m.state_changed_at from pgmem.memories m
   where m.state = 'deleted' and coalesce(m.state_changed_at, m.updated_at) < now() - older_than
     and (v_tenant is null or m.tenant = v_tenant)
   order by m.id limit batch;
  select count(*) into v_found from _pgmem_purge;
  with held as (select m.id from pgmem.memories m join _pgmem_purge p on p.id = m.id
                 where m.state = 'deleted' order by m.id for update of m skip locked)
  delete from _pgmem_purge p where not exists (select 1 from held h where h.id = p.id);
  get diagnostics v_skipped = row_count;
  if not dry_run then
    perform pgmem._set_op('purge', jsonb_build_object('job_run_id', v_run, 'older_than', older_than::text));
    -- the rows that point at them or hang off them (memories merged into them, links, accesses)
    -- may be held by a tenant's transaction too: waited for at most merge_lock_timeout_ms, then
    -- the memory is left for the next run (issue 27, M1)
    perform set_config('lock_timeout', greatest(1, pgmem._setting_num('merge_lock_timeout_ms', 200))::bigint::text, true);
    begin
      update pgmem.memories m set merged_into = null, updated_at = now() from _pgmem_purge p where m.merged_into = p.id;
      with gone as (delete from pgmem.memories m using _pgmem_purge p where m.id = p.id returning m.id)
      delete from _pgmem_purge p where not exists (select 1 from gone g where g.id = p.id);
    exception when lock_not_available then
      -- one at a time, each in its own subtransaction
      for v_id in select p.id from _pgmem_purge p order by p.id loop
        begin
          update pgmem.memories m set merged_into = null, updated_at = now() where m.merged_into = v_id;
          delete from pgmem.memories m where m.id = v_id;
        exception when lock_not_available then
          delete from _pgmem_purge p where p.id = v_id;
          v_skipped := v_skipped + 1;
        end;
      end loop;
    end;
    perform set_config('lock_timeout', v_prev_lock_timeout, true);
    perform pgmem._set_op(null);
    select count(*) into v_changed from _pgmem_purge;
  end if;
  return query select p.id, p.deleted_at, not dry_run from _pgmem_purge p order by p.id;
  perform pgmem._job_end(v_run, v_found, v_changed, jsonb_build_object('more', v_found >= batch)
    || case when v_skipped > 0 then jsonb_build_object('skipped_locked', v_skipped) else '{}' end);
end $$;
comment on function pgmem.purge(interval, boolean, integer, text) is
  'Deletes for good the memories soft-deleted longer ago than older_than (their last state is kept in history as op purge). The only function that destroys memories.';

-- ------------------------------------------------------------------ Shadow's lifecycle
-- shadow-memory-system.md, 7. MemoryLifecycleManager ("Archival Triggers", "Cleanup
-- Operations") and 8. Configuration (maxMemories 10000, cleanupInterval 24 h):
--   an active memory is archived when ANY of these holds (the design's "or"; before issue 24
--   pgmem asked for old age AND disuse):
--     age         its age exceeds the retention period (setting archive_retention, 90 days: the
--                 design's example);
--     activation  its activation falls below the archival threshold (archive_activation_threshold);
--     cap         its scope holds more than maxMemories active memories (max_memories, 10,000,
--                 per user or per tenant: max_memories_per): the least activated go first;
--     manual      the manual archival command, pgmem.archive(ids) (110_memory_ops.sql).
--   Cleanup: archived memories are deleted after their own retention (archive_delete_after, 90
--   days in the archive: pgmem.delete_archived), the store's indices compacted and its statistics
--   updated (pgmem.compact, and the vacuum schedule; 400_jobs.sql). The nightly jobs archive,
--   delete_archived, compact and vacuum apply all of it by default (cleanupInterval 24 h).
--
-- What a memory's "activation" is here (pgmem.memory_activation). Shadow's activation score rates
-- a memory against one context (activate()); a memory's standing in the store is read from what
-- pgmem records of it, each part in [0, 1]:
--   activation(m, t) = max( importance · D(age) · (1 + 0.1·log2(1 + uses))    Engram's decayed importance
--                           D(t − the latest use)                             its last use
--                           max over activate()'s log: score · D(t − logged_at) its best activation, aged )
--   D(Δ) = 2^(−Δ / 30 days): Shadow's temporalRelevance (the activate profile shadow's
--   temporal_half_life_days), applied from each event on.
-- Uses are what the access log records as used: a context packed the memory, or touch()
-- (sql/212_access_log.sql). Retrievals (a ranking returned it, nothing used it) are Shadow's
-- candidates, "tracked but not used", and keep nothing alive: else whatever search returns would
-- stay active because search returns it (the loop issue 24 closes for ranking, closed here too).
-- The activation log holds what activate(query_id => ...) showed (0002, 220_activate.sql).
-- Threshold 0.125 = D(90 days), the design's own decay at its retention period (Temporal Decay
-- Formula: "Age 90 days → decay = 0.125"): a memory used once stays active 90 days after that use,
-- as every memory stays 90 days after it is stored; an unused memory of importance i stays
-- 30·log2(i / 0.125) days (i = .5: 60; .25: 30).
-- archive_min_age (30 days, one half-life; pgmem's choice: the design says nothing of new
-- memories): the activation criterion spares younger memories, so that a memory stored with a
-- low importance is not archived the night after it is written. Imported history (memories
-- dated long before they are stored) is the tenant's clock's and lifecycle_grace's (below,
-- issue 36): measured by tests/test_lifecycle_import.py on make demo's conversation dated a year
-- back, the first night archives and prunes 0 of its 285 memories.
-- Archived memories are left out of every ranking by default (filters => '{"state": ["active",
-- "archived"]}' includes them) and come back with pgmem.restore(); every change is in history.
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'archive_retention', '"90 days"', 'Shadow lifecycle (archive job): active memories older than this are archived (JSON null: never by age)'),
  ('*', 'archive_activation_threshold', '0.125', 'Shadow lifecycle (archive job): memories whose activation (pgmem.memory_activation) is below this are archived (0: never by activation); 0.125 = 2^(-90/30), a use 90 days ago'),
  ('*', 'archive_min_age', '"30 days"', 'Shadow lifecycle (archive job): the activation criterion spares memories younger than this'),
  ('*', 'max_memories', '10000', 'Shadow maxMemories (archive job): most active memories per scope (max_memories_per); beyond it the least activated are archived (JSON null: no cap)'),
  ('*', 'max_memories_per', '"user"', 'the scope of max_memories: "user" (each user_id; memories without one form one scope) or "tenant"'),
  ('*', 'archive_delete_after', '"90 days"', 'Shadow lifecycle (delete_archived job): archived memories are deleted (state deleted, restorable, in history) after this long in the archive (JSON null: never)')
on conflict (tenant, key) do nothing;

-- A setting of a given tenant (its own value, else the installation default): the jobs that run
-- for every tenant read each tenant's.
create or replace function pgmem._setting_of(p_tenant text, p_key text) returns jsonb
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select s.value from pgmem.settings s where s.key = p_key and s.tenant in (p_tenant, '*')
   order by (s.tenant = '*') limit 1
$$;
comment on function pgmem._setting_of(text, text) is
  'A setting for a given tenant: its own value, else the installation default (the jobs that run for every tenant read each tenant''s).';

-- The lifecycle activation of one memory (see above), from its row's values and its logs.
create or replace function pgmem._lifecycle_activation(p_id bigint, p_importance float8, p_created_at timestamptz,
                                                       p_access_count integer, p_as_of timestamptz,
                                                       p_half_life_days float8 default 30)
returns float8
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select greatest(
    -- Engram's decayed importance (its access boost counts uses: 212_access_log.sql)
    pgmem.decayed_importance(coalesce(p_importance, 0), p_created_at, coalesce(p_access_count, 0), p_as_of, p_half_life_days),
    -- the latest use at or before as_of (pgmem.accesses: every kind but retrieval)
    (select case when max(a.accessed_at) is not null
                 then pgmem.exp_decay(pgmem.age_days(max(a.accessed_at), p_as_of), p_half_life_days) end
       from pgmem.accesses a where a.memory_id = p_id and a.kind <> 'retrieval' and a.accessed_at <= p_as_of),
    -- the best Shadow activation score activate() logged, aged since
    (select max(l.score * pgmem.exp_decay(pgmem.age_days(l.logged_at, p_as_of), p_half_life_days))
       from pgmem.activation_log l where l.memory_id = p_id and l.logged_at <= p_as_of),
    0.0)
$$;
comment on function pgmem._lifecycle_activation(bigint, float8, timestamptz, integer, timestamptz, float8) is
  'The lifecycle activation of a memory at as_of: max(decayed importance, 2^(-days since its latest use/30), max activate() score · 2^(-days since/30)). Internal to the archive job; pgmem.memory_activation explains it.';

-- The half-life of the activation's decay for a tenant: its activate profile shadow's
-- temporal_half_life_days (30).
create or replace function pgmem._lifecycle_half_life(p_tenant text) returns float8
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select coalesce((select (p.params->>'temporal_half_life_days')::float8 from pgmem.profiles p
                    where p.name = 'shadow' and p.tenant in (p_tenant, '*') order by (p.tenant = '*') limit 1), 30.0)
$$;

create or replace function pgmem.memory_activation(memory_id bigint, as_of timestamptz default null)
returns table (id bigint, activation float8, decayed_importance float8, last_use timestamptz, last_use_relevance float8,
               best_activation_score float8, best_activation_at timestamptz, best_activation_relevance float8,
               threshold float8, below_threshold boolean)
  language plpgsql stable security definer  -- (the logs of the caller's tenant's memory only; 900_security.sql)
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  -- (as_of not given: the tenant's own clock, what the nightly archive job reads; issue 36)
  v_as_of timestamptz := coalesce(as_of, pgmem._tenant_clock(v_tenant, now()));
  v_hl float8 := pgmem._lifecycle_half_life(v_tenant);
  m pgmem.memories;
begin
  perform pgmem._check_time(as_of, 'as_of', true);
  select * into m from pgmem.memories x where x.id = memory_activation.memory_id and x.tenant = v_tenant;
  if m.id is null then
    raise exception 'memory % does not exist for tenant "%"', memory_activation.memory_id, v_tenant
      using errcode = 'P0002', hint = 'check the id (pgmem.search or pgmem.history show ids)';
  end if;
  return query
  select m.id, pgmem._lifecycle_activation(m.id, m.importance, m.created_at, m.access_count, v_as_of, v_hl),
         pgmem.decayed_importance(coalesce(m.importance, 0), m.created_at, coalesce(m.access_count, 0), v_as_of, v_hl),
         u.at, case when u.at is not null then pgmem.exp_decay(pgmem.age_days(u.at, v_as_of), v_hl) end,
         l.score::float8, l.logged_at, l.aged,
         coalesce((pgmem._setting('archive_activation_threshold'))::text::float8, 0),
         pgmem._lifecycle_activation(m.id, m.importance, m.created_at, m.access_count, v_as_of, v_hl)
           < coalesce((pgmem._setting('archive_activation_threshold'))::text::float8, 0)
    from (select max(a.accessed_at) as at from pgmem.accesses a
           where a.memory_id = m.id and a.kind <> 'retrieval' and a.accessed_at <= v_as_of) u
    left join lateral (select x.score, x.logged_at, x.score * pgmem.exp_decay(pgmem.age_days(x.logged_at, v_as_of), v_hl) as aged
                         from pgmem.activation_log x where x.memory_id = m.id and x.logged_at <= v_as_of
                        order by 3 desc limit 1) l on true;
end $$;
comment on function pgmem.memory_activation(bigint, timestamptz) is
  'Shadow lifecycle: a memory''s activation at as_of (default: its tenant''s own clock, when its memory was last in use, as the nightly archive reads it), the largest of its decayed importance (Engram), 2^(-days since its latest use/30) and its best activate() score aged the same way, each part shown, with the tenant''s archival threshold (archive_activation_threshold) and whether it is below it.';

-- ------------------------------------------------------------------ the tenant's own clock (issue 36)
-- A user who imports dated history (make demo stores a conversation of September–October) must
-- not lose it from search on the first night: before issue 36 a dry run of the nightly archive
-- on make demo's database archived 265 of its 290 memories (186 for low activation, 79 for age),
-- and the nightly prune soft-deleted the year-old ones outright (decayed importance < 0.01).
-- shadow-memory-system.md, 7. MemoryLifecycleManager, gives the triggers (age, activation) but
-- not the clock they read; engram.md, Memory Decay, decays by "age" likewise. pgmem's reading,
-- what a user of either design would expect (issue 36):
--   * the clock of a tenant is when its memory was last in use: the latest of a memory written
--     (history add or restore), a retrieval or use (pgmem.accesses, pgmem.access_log), at or
--     before the run's as_of. A tenant nobody used for six months has lost nothing when it
--     comes back; a tenant in daily use has its clock at today (the wall clock, as before).
--   * every age and activation of the nightly jobs (archive's age and activation triggers and
--     the cap's ranking, prune's decayed importance) is read at that clock, not at the wall
--     clock of the night the job runs;
--   * an imported memory is not archived or pruned as decayed before it has had a chance to be
--     used. A memory dated more than lifecycle_grace (30 days, one half-life of the activation's
--     decay, archive_min_age's length) before it was stored (its first history row: an import's
--     memories are stored today, however old their dates) is in its grace until its tenant's clock
--     has run lifecycle_grace past the moment it was stored. So an import, or any batch older than
--     the horizon, waits a month of use; then the memories the month did not use fade as the
--     design says (their decayed importance is read from their own dates) and are archived, and
--     the ones it used stay (their last use). A memory written as it happens needs no grace
--     (archive_min_age spares the young, and a memory stored with importance .001 is pruned the
--     night it is written, as before).
--   * the age trigger counts a memory's age in this store: from the later of its date and the
--     moment it was stored (an imported year-old memory in use is not archived for its age the
--     night its grace ends, but 90 days after the import, as a memory written that day would be).
--   * prune's decayed trigger reads the same clock and counts age in this store too: an import is
--     never deleted for its dates alone (archive, restorable, is what fades it when unused).
-- Measured (tests/test_lifecycle_import.py): make demo's conversation dated a year back, 285
-- memories stored: the nightly prune and archive take 0 the first night (at the wall clock, the
-- old night, the archive took all 285, and prune would have deleted all 285); after a simulated
-- month in which 41 of them were used (the others only retrieved), the archive job archives the
-- 244 the month left unused (reason activation), keeps the 41, and prune deletes none.
-- The clock and the grace apply when the job is called without as_of (the nightly jobs,
-- pg_cron, run_job without it). as_of given is the what-if the functions always had: every
-- memory judged at that instant from its created_at, no grace (tests, "what would go if it
-- were that date").
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'lifecycle_grace', '"30 days"', 'Shadow lifecycle and Engram pruning (nightly archive and prune jobs): a memory dated more than this before it was stored (an import) is not archived, nor pruned as decayed, until its tenant''s clock (when its memory was last in use) has run this long since it was stored (issue 36)')
on conflict (tenant, key) do nothing;

create or replace function pgmem._tenant_clock(p_tenant text, p_as_of timestamptz) returns timestamptz
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select least(p_as_of, coalesce(greatest(
    (select h.at from pgmem.history h
      where h.tenant = p_tenant and h.at <= p_as_of and h.op in ('add', 'restore') order by h.at desc limit 1),
    (select a.accessed_at from pgmem.accesses a
      where a.tenant = p_tenant and a.accessed_at <= p_as_of order by a.accessed_at desc limit 1),
    (select x.at from pgmem.access_log x where x.tenant = p_tenant and x.at <= p_as_of order by x.id desc limit 1)),
    p_as_of))
$$;
comment on function pgmem._tenant_clock(text, timestamptz) is
  'A tenant''s own clock at as_of (issue 36): when its memory was last in use, the latest memory written (history add, restore), retrieval or use (accesses, access_log) at or before as_of; as_of when there is none. The nightly archive and prune read ages and activations at it.';

-- One memory's clock for the lifecycle: the tenant's clock (p_at), the memory's birth in this
-- store (the later of created_at and the moment it was stored: its first history row) and
-- whether it is in its grace: dated more than p_grace before it was stored (an import, a batch
-- older than the horizon) and stored less than p_grace before p_at. p_grace NULL (the what-if
-- at an explicit as_of): born = created_at, no grace, and no history read.
create or replace function pgmem._lifecycle_clock(p_id bigint, p_created_at timestamptz, p_at timestamptz, p_grace interval)
returns table (at timestamptz, born timestamptz, in_grace boolean)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select p_at, greatest(p_created_at, coalesce(st.stored, p_created_at)),
         coalesce(st.stored - p_created_at > p_grace and st.stored > p_at - p_grace, false)
    from (select case when p_grace is not null
                      then coalesce((select h.at from pgmem.history h where h.memory_id = p_id order by h.id limit 1), p_created_at)
                 end as stored) st
$$;
comment on function pgmem._lifecycle_clock(bigint, timestamptz, timestamptz, interval) is
  'The lifecycle''s view of one memory at its tenant''s clock (issue 36): the clock, its birth in this store (later of created_at and when it was stored, its first history row) and whether it is still in its grace (dated more than grace before it was stored, and stored less than grace before the clock; grace NULL: the what-if at an explicit as_of, born = created_at, never in grace).';

-- The archive job. A run (run_job, or calls repeated by hand while job_runs.details->'more' is
-- true) walks the active memories once, in keyset pages by id, at one as_of, and judges each
-- on its own: a call costs its page. The cap is decided once, when the run starts: per scope
-- over the cap, the memory at rank (active memories the other triggers leave − cap) by
-- (activation, created_at, id) ascending is the cut-off, and a memory at or below it is archived
-- (so a run archives the same memories in one call or in many).
-- job_state while a run is under way (_job_state_reset deletes it when the run ends):
--   (scope, 'archive')                                   cursor_at = the run's as_of, cursor_id = the last id walked
--   (tenant, 'archive:cap:<scope>:u:<user>' or ':t')     cursor_at = the run's as_of, cursor_id = the cut-off memory
-- (scope = the tenant, or '*' for all). A dry run starts afresh and changes no job_state.
-- Arguments left NULL take each tenant's settings (above); activation_threshold 0 and
-- max_memories 0 switch those triggers off.
drop function if exists pgmem.archive_stale(interval, float8, boolean, integer, text, timestamptz);
create or replace function pgmem.archive_stale(
  retention interval default null,
  activation_threshold float8 default null,
  dry_run boolean default false,
  batch integer default 10000,
  tenant text default null,
  as_of timestamptz default null,
  max_memories integer default null,
  min_age interval default null)
returns table (memory_id bigint, reason text, age_days float8, activation float8, last_accessed_at timestamptz, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_scope text := coalesce(v_tenant, '*');
  v_cap_job text := 'archive:cap:' || coalesce(v_tenant, '*') || ':';
  v_clock boolean := as_of is null;  -- each tenant's own clock and the grace (issue 36), else the what-if at as_of
  v_continue boolean;
  v_run bigint;
  v_as_of timestamptz;
  v_state_at timestamptz;
  v_after bigint := 0;
  v_found bigint;
  v_last bigint;
  v_full boolean;
  v_examined bigint;
  v_changed bigint := 0;
  v_why text;
begin
  perform pgmem._check_args('archive_stale', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  if retention < interval '0' then
    perform pgmem._bad_input('retention must be a non-negative interval, e.g. ''90 days''');
  end if;
  if min_age < interval '0' then
    perform pgmem._bad_input('min_age must be a non-negative interval, e.g. ''30 days''');
  end if;
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  perform pgmem._check_unit(activation_threshold, 'activation_threshold');
  if max_memories < 0 then
    perform pgmem._bad_input(format('max_memories must be at least 0 (0: no cap), got %s', max_memories));
  end if;
  perform pgmem._check_time(as_of, 'as_of', true);
  v_run := pgmem._job_begin('archive', v_tenant, jsonb_strip_nulls(jsonb_build_object(
             'retention', retention::text, 'activation_threshold', activation_threshold, 'max_memories', max_memories,
             'min_age', min_age::text, 'dry_run', dry_run, 'batch', batch)));
  if v_run is null then return; end if;

  -- each tenant's parameters: the arguments, else its settings; '*' = every tenant without
  -- settings of its own (a run for one tenant has that tenant's row only)
  perform 'PRAGMA:TABLE: _pgmem_lc (tenant text, retention interval, threshold float8, min_age interval, cap bigint, per_user boolean, half_life float8, grace interval)';
  create temp table if not exists _pgmem_lc (tenant text, retention interval, threshold float8, min_age interval,
                                             cap bigint, per_user boolean, half_life float8, grace interval) on commit drop;
  truncate _pgmem_lc;
  insert into _pgmem_lc
  select t.tenant,
         case when archive_stale.retention is not null then archive_stale.retention
              else (pgmem._setting_of(t.tenant, 'archive_retention') #>> '{}')::interval end,
         coalesce(archive_stale.activation_threshold, (pgmem._setting_of(t.tenant, 'archive_activation_threshold') #>> '{}')::float8, 0),
         coalesce(archive_stale.min_age, (pgmem._setting_of(t.tenant, 'archive_min_age') #>> '{}')::interval, interval '0'),
         case when archive_stale.max_memories is not null then nullif(archive_stale.max_memories, 0)
              else nullif((pgmem._setting_of(t.tenant, 'max_memories') #>> '{}')::bigint, 0) end,
         case coalesce(pgmem._setting_of(t.tenant, 'max_memories_per') #>> '{}', 'user')
              when 'user' then true when 'tenant' then false end,
         pgmem._lifecycle_half_life(t.tenant),
         case when v_clock then coalesce((pgmem._setting_of(t.tenant, 'lifecycle_grace') #>> '{}')::interval, interval '0') end
    from (select v_tenant as tenant where v_tenant is not null
          union
          select '*' where v_tenant is null
          union
          select s.tenant from pgmem.settings s
           where v_tenant is null and s.tenant <> '*'
             and s.key in ('archive_retention', 'archive_activation_threshold', 'archive_min_age', 'max_memories', 'max_memories_per',
                           'lifecycle_grace')
          union
          select p.tenant from pgmem.profiles p where v_tenant is null and p.tenant <> '*' and p.name = 'shadow') t;
  if exists (select 1 from _pgmem_lc c where c.per_user is null) then
    perform pgmem._bad_input('max_memories_per must be "user" or "tenant"');
  end if;
  analyze _pgmem_lc;

  -- the cap's cut-offs (memory id, and its activation at the run's as_of)
  perform 'PRAGMA:TABLE: _pgmem_cut (tenant text, uscope text, id bigint, act float8, created_at timestamptz)';
  create temp table if not exists _pgmem_cut (tenant text, uscope text, id bigint, act float8, created_at timestamptz) on commit drop;
  truncate _pgmem_cut;

  -- go on with the run under way (as_of not given, or the same), or start one
  if not dry_run then
    select s.cursor_at, s.cursor_id into v_state_at, v_after from pgmem.job_state s
     where s.tenant = v_scope and s.job = 'archive';
  end if;
  v_continue := v_state_at is not null and (as_of is null or as_of = v_state_at);
  v_as_of := case when v_continue then v_state_at else coalesce(as_of, now()) end;
  -- each tenant's clock at the run's as_of (issue 36; pgmem._tenant_clock): the same in every
  -- call of the run (it reads only what happened at or before as_of)
  perform 'PRAGMA:TABLE: _pgmem_clock (tenant text, clock timestamptz, grace interval)';
  create temp table if not exists _pgmem_clock (tenant text primary key, clock timestamptz, grace interval) on commit drop;
  truncate _pgmem_clock;
  if v_clock then
    insert into _pgmem_clock
    select t.tenant, pgmem._tenant_clock(t.tenant, v_as_of), null
      from (select v_tenant as tenant where v_tenant is not null
            union
            select distinct m.tenant from pgmem.memories m where v_tenant is null and m.state = 'active') t;
  end if;
  if v_continue then
    insert into _pgmem_cut
    select s.tenant, case when substr(s.job, length(v_cap_job) + 1) = 't' then null
                          else substr(s.job, length(v_cap_job) + 3) end,
           c.id, pgmem._lifecycle_activation(c.id, c.importance, c.created_at, c.access_count,
                                             coalesce(ck.clock, v_as_of), coalesce(t.half_life, d.half_life)),
           c.created_at
      from pgmem.job_state s join pgmem.memories c on c.id = s.cursor_id
      left join _pgmem_clock ck on ck.tenant = c.tenant
      left join _pgmem_lc t on t.tenant = s.tenant left join _pgmem_lc d on d.tenant = coalesce(v_tenant, '*')
     where left(s.job, length(v_cap_job)) = v_cap_job and (v_tenant is null or s.tenant = v_tenant);
  else
    v_after := 0;
    if not dry_run then
      perform pgmem._job_state_reset('archive', v_tenant, '{}');
    end if;
    -- the cap (Shadow's maxMemories): per scope with more active memories than its cap, the
    -- memories the age and activation triggers leave, least activated first; the cut-off is the
    -- one at rank (their count - cap)
    with mp as (
      select m.id, m.tenant, m.user_id, m.created_at, m.importance, m.access_count, p.*, k.at, k.born, k.in_grace,
             case when p.per_user then coalesce(m.user_id, '') end as uscope
        from pgmem.memories m
        left join _pgmem_lc t on t.tenant = m.tenant
        join _pgmem_lc d on d.tenant = coalesce(v_tenant, '*')
       cross join lateral (select case when t.tenant is null then d else t end as p0) pp
       cross join lateral (select (pp.p0).retention, (pp.p0).threshold, (pp.p0).min_age, (pp.p0).cap,
                                  (pp.p0).per_user, (pp.p0).half_life, (pp.p0).grace) p
        left join _pgmem_clock ck on ck.tenant = m.tenant
       cross join lateral pgmem._lifecycle_clock(m.id, m.created_at, coalesce(ck.clock, v_as_of), p.grace) k
       where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant) and p.cap is not null),
    sc as (  -- the scopes over their cap
      select mp.tenant, mp.uscope, max(mp.cap) as cap from mp group by 1, 2 having count(*) > max(mp.cap)),
    rem as (  -- their memories the other triggers leave, with their activation
      select mp.tenant, mp.uscope, mp.id, mp.created_at, sc.cap, a.act
        from mp join sc on sc.tenant = mp.tenant and sc.uscope is not distinct from mp.uscope
       cross join lateral (select pgmem._lifecycle_activation(mp.id, mp.importance, mp.created_at, mp.access_count,
                                                               mp.at, mp.half_life) as act) a
       where not mp.in_grace  -- (in its grace: not archived, and not counted)
         and not (mp.retention is not null and mp.born < mp.at - mp.retention)
         and not (mp.threshold > 0 and mp.created_at < mp.at - mp.min_age and a.act < mp.threshold))
    insert into _pgmem_cut
    select q.tenant, q.uscope, q.id, q.act, q.created_at
      from (select rem.*, row_number() over (partition by rem.tenant, rem.uscope order by rem.act, rem.created_at, rem.id) as rn,
                   count(*) over (partition by rem.tenant, rem.uscope) as n
              from rem) q
     where q.n > q.cap and q.rn = q.n - q.cap;
    if not dry_run then
      perform pgmem._job_state_save(c.tenant, v_cap_job || case when c.uscope is null then 't' else 'u:' || c.uscope end,
                                    v_as_of, c.id)
         from _pgmem_cut c;
    end if;
  end if;
  analyze _pgmem_cut;

  -- this call's page: the next `batch` memories to archive after the cursor, by id, each judged
  -- on its own
  perform 'PRAGMA:TABLE: _pgmem_archive (id bigint, created_at timestamptz, age float8, act float8, la timestamptz, why text)';
  create temp table if not exists _pgmem_archive (id bigint, created_at timestamptz, age float8, act float8,
                                                  la timestamptz, why text) on commit drop;
  truncate _pgmem_archive;
  insert into _pgmem_archive
  select q.id, q.created_at, pgmem.age_days(q.born, q.at), q.act, q.last_accessed_at, q.why
    from (select m.id, m.created_at, m.last_accessed_at, a.act, k.at, k.born,
                 case when k.in_grace then null
                      when p.retention is not null and k.born < k.at - p.retention then 'age'
                      when p.threshold > 0 and m.created_at < k.at - p.min_age and a.act < p.threshold then 'activation'
                      when cut.id is not null and (a.act, m.created_at, m.id) <= (cut.act, cut.created_at, cut.id) then 'cap'
                 end as why
            from pgmem.memories m
            left join _pgmem_lc t on t.tenant = m.tenant
            join _pgmem_lc d on d.tenant = coalesce(v_tenant, '*')
           cross join lateral (select case when t.tenant is null then d else t end as p0) pp
           cross join lateral (select (pp.p0).retention, (pp.p0).threshold, (pp.p0).min_age, (pp.p0).per_user,
                                      (pp.p0).half_life, (pp.p0).grace) p
            left join _pgmem_clock ck on ck.tenant = m.tenant
           cross join lateral pgmem._lifecycle_clock(m.id, m.created_at, coalesce(ck.clock, v_as_of), p.grace) k
            left join _pgmem_cut cut on cut.tenant = m.tenant
                  and cut.uscope is not distinct from (case when p.per_user then coalesce(m.user_id, '') end)
           -- the activation, only where a trigger reads it (a memory past the retention is archived whatever it is)
           cross join lateral (select case when not k.in_grace
                                            and not (p.retention is not null and k.born < k.at - p.retention)
                                            and ((p.threshold > 0 and m.created_at < k.at - p.min_age) or cut.id is not null)
                                           then pgmem._lifecycle_activation(m.id, m.importance, m.created_at, m.access_count,
                                                                            k.at, p.half_life) end as act) a
           where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant) and m.id > v_after) q
   where q.why is not null
   order by q.id
   limit batch;
  select count(*), max(x.id) into v_found, v_last from _pgmem_archive x;
  v_full := coalesce(v_found > 0 and v_found >= batch, false);  -- there may be more after this page
  -- examined: the active memories this call walked past
  select count(*) into v_examined from pgmem.memories m
   where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant) and m.id > v_after
     and (not v_full or m.id <= v_last);

  -- set-based: the page's memories still active that no other transaction holds (one held now
  -- is left for a later run), one UPDATE per reason; history: one statement each (040)
  perform 'PRAGMA:TABLE: _pgmem_archived (id bigint)';  -- for plpgsql_check
  create temp table if not exists _pgmem_archived (id bigint) on commit drop;
  truncate _pgmem_archived;
  if not dry_run then
    for v_why in select distinct x.why from _pgmem_archive x order by 1 loop
      perform pgmem._set_op('archive', jsonb_build_object('job', 'archive', 'reason', v_why, 'as_of', v_as_of,
                                                         'job_run_id', v_run)
        || jsonb_strip_nulls(jsonb_build_object('retention', retention::text, 'activation_threshold', activation_threshold,
                                                'max_memories', max_memories)));
      with held as (select m.id from pgmem.memories m join _pgmem_archive x on x.id = m.id
                     where x.why = v_why and m.state = 'active' order by m.id for update of m skip locked),
      upd as (update pgmem.memories m set state = 'archived', state_changed_at = now(), updated_at = now()
                from held h where m.id = h.id returning m.id)
      insert into _pgmem_archived select upd.id from upd;
    end loop;
    perform pgmem._set_op(null);
    select count(*) into v_changed from _pgmem_archived;
    if v_full then
      perform pgmem._job_state_save(v_scope, 'archive', v_as_of, v_last);
    else  -- the run is complete
      perform pgmem._job_state_reset('archive', v_tenant, '{}');
    end if;
  end if;
  return query
  select x.id, x.why, x.age, x.act, x.la, not dry_run from _pgmem_archive x
   where dry_run or exists (select 1 from _pgmem_archived y where y.id = x.id)
   order by x.created_at, x.id;
  -- (held by another transaction: skipped, reported, archived by a later run; issue 27, M1)
  perform pgmem._job_end(v_run, v_examined, v_changed, jsonb_build_object('more', v_full and not dry_run)
    || (select coalesce(jsonb_object_agg(r.why, r.n), '{}') from (select x.why, count(*) as n from _pgmem_archived y
                                                                    join _pgmem_archive x on x.id = y.id group by 1) r)
    || case when not dry_run and v_found > v_changed
            then jsonb_build_object('skipped_locked', v_found - v_changed) else '{}' end);
end $$;
comment on function pgmem.archive_stale(interval, float8, boolean, integer, text, timestamptz, integer, interval) is
  'Shadow lifecycle (the archive job): archives active memories older than retention (setting archive_retention, 90 days), or older than min_age (30 days) with an activation below activation_threshold (0.125; pgmem.memory_activation), or beyond max_memories (10,000 per user scope) in their scope, least activated first. Arguments left NULL take the tenant''s settings. One call archives at most batch memories, walking them by id from where the previous call of the run stopped. Each row names its reason (age, activation, cap); restorable with pgmem.restore; excluded from default search. Without as_of (the nightly job) ages and activations are read at each tenant''s own clock (pgmem._tenant_clock: when its memory was last in use), the age trigger counts age in the store, and an import is spared for lifecycle_grace of use (issue 36); with as_of, every memory is judged at that instant from its created_at.';

-- "Delete archived memories after retention period" (Shadow, Cleanup Operations): an archived
-- memory archived longer than archive_delete_after (90 days) is deleted. pgmem's delete is the
-- soft one (state deleted, as forget() and prune do): out of every read, in history with the
-- reason, restorable with pgmem.restore(); pgmem.purge (the only hard delete, not scheduled by
-- default) destroys it later, keeping its last state in history, from which pgmem.restore still
-- brings it back (110_memory_ops.sql). Walks the archived memories by id in batches.
create or replace function pgmem.delete_archived(older_than interval default null, dry_run boolean default false,
                                                 batch integer default 10000, tenant text default null)
returns table (memory_id bigint, archived_at timestamptz, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  v_found bigint;
  v_changed bigint := 0;
begin
  perform pgmem._check_args('delete_archived', jsonb_build_object('tenant', delete_archived.tenant));  -- sizes first (issue 27)
  if older_than < interval '0' then
    perform pgmem._bad_input('older_than must be a non-negative interval, e.g. ''90 days''');
  end if;
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  v_run := pgmem._job_begin('delete_archived', v_tenant, jsonb_strip_nulls(jsonb_build_object(
             'older_than', older_than::text, 'dry_run', dry_run, 'batch', batch)));
  if v_run is null then return; end if;
  perform 'PRAGMA:TABLE: _pgmem_expire (id bigint, archived_at timestamptz, after interval)';
  create temp table if not exists _pgmem_expire (id bigint, archived_at timestamptz, after interval) on commit drop;
  truncate _pgmem_expire;
  insert into _pgmem_expire
  select m.id, coalesce(m.state_changed_at, m.updated_at), w.after
    from pgmem.memories m
   cross join lateral (select coalesce(older_than, (pgmem._setting_of(m.tenant, 'archive_delete_after') #>> '{}')::interval) as after) w
   where m.state = 'archived' and (v_tenant is null or m.tenant = v_tenant)
     and w.after is not null and coalesce(m.state_changed_at, m.updated_at) < now() - w.after
   order by m.id limit batch;
  select count(*) into v_found from _pgmem_expire;
  if not dry_run then
    perform pgmem._set_op('delete', jsonb_build_object('job', 'delete_archived', 'reason', 'archived longer than archive_delete_after',
                                                      'job_run_id', v_run)
                                    || jsonb_strip_nulls(jsonb_build_object('older_than', older_than::text)));
    with held as (select m.id from pgmem.memories m join _pgmem_expire x on x.id = m.id
                   where m.state = 'archived' order by m.id for update of m skip locked),
    upd as (update pgmem.memories m set state = 'deleted', state_changed_at = now(), updated_at = now()
              from held h where m.id = h.id returning m.id)
    delete from _pgmem_expire x where not exists (select 1 from upd where upd.id = x.id);
    perform pgmem._set_op(null);
    select count(*) into v_changed from _pgmem_expire;
  end if;
  return query select x.id, x.archived_at, not dry_run from _pgmem_expire x order by x.id;
  perform pgmem._job_end(v_run, v_found, v_changed, jsonb_build_object('more', v_found >= batch and not dry_run)
    || case when not dry_run and v_found > v_changed then jsonb_build_object('skipped_locked', v_found - v_changed) else '{}' end);
end $$;
comment on function pgmem.delete_archived(interval, boolean, integer, text) is
  'Shadow lifecycle (the delete_archived job): deletes the memories archived longer than older_than (setting archive_delete_after, 90 days, per tenant): state deleted, in history, restorable with pgmem.restore (also after pgmem.purge, from history). At most batch per call.';
