-- Compaction and statistics: the last of Shadow's cleanup operations (shadow-memory-system.md,
-- 7. MemoryLifecycleManager, "Compact memory store indices", "Update system statistics"), with
-- what PostgreSQL offers:
--   ANALYZE   the planner's statistics of a table: pgmem.compact() runs it, as the owner, on
--             every pgmem table with at least min_changed_fraction of its rows changed since its
--             last analyze (archival, deletion and the folds change many rows in a night);
--   VACUUM    frees the space of dead row versions in tables and indexes (an archived or deleted
--             memory leaves its old version, and its HNSW entry in memory_vectors). VACUUM cannot
--             run inside a function or a procedure, so it is its own pg_cron entry
--             (pgmem.vacuum_command(): one VACUUM (ANALYZE, SKIP_LOCKED) statement over pgmem's
--             tables, nightly after compact, as the owner; 400_jobs.sql) and `pgmem jobs vacuum`;
--             compact() reports the tables whose dead rows exceed vacuum_fraction (autovacuum's
--             own scale factor, 0.2) and when each was last vacuumed;
--   REINDEX CONCURRENTLY  rebuilds an index without blocking writes. Safe where an index is
--             invalid (a CREATE INDEX CONCURRENTLY that failed half-way leaves one, which every
--             write still maintains and no read uses): compact() reports those, and
--             `pgmem jobs vacuum --reindex` rebuilds them. A valid index is not rebuilt by
--             default: rebuilding the HNSW graph of a million vectors takes minutes of both
--             cores, and VACUUM keeps it usable.
-- Autovacuum keeps running as it does; the job makes the night's changes count at once, and
-- records what it saw in job_runs (the job-run views show it).

create or replace function pgmem.compact(dry_run boolean default false, min_changed_fraction float8 default 0.1,
                                         vacuum_fraction float8 default 0.2)
returns table (relation text, live_rows bigint, dead_rows bigint, changed_since_analyze bigint, size_bytes bigint,
               last_vacuum timestamptz, last_analyze timestamptz, action text, applied boolean)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_run bigint;
  r record;
  v_n bigint := 0;
  v_analyzed text[] := '{}'::text[];
  v_vacuum text[] := '{}'::text[];
  v_reindex text[] := '{}'::text[];
begin
  if not pgmem._is_admin() then
    raise exception 'compact needs the pgmem_admin role: it analyzes every tenant''s tables' using errcode = '42501';
  end if;
  perform pgmem._check_unit(min_changed_fraction, 'min_changed_fraction'), pgmem._check_unit(vacuum_fraction, 'vacuum_fraction');
  v_run := pgmem._job_begin('compact', null, jsonb_build_object('dry_run', dry_run, 'min_changed_fraction', min_changed_fraction,
                                                               'vacuum_fraction', vacuum_fraction));
  if v_run is null then return; end if;
  for r in
    select format('%I.%I', n.nspname, c.relname) as rel, c.relname, greatest(s.n_live_tup, 0) as live, greatest(s.n_dead_tup, 0) as dead,
           greatest(s.n_mod_since_analyze, 0) as changed, pg_total_relation_size(c.oid) as size,
           greatest(s.last_vacuum, s.last_autovacuum) as vacuumed, greatest(s.last_analyze, s.last_autoanalyze) as analyzed
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      join pg_stat_all_tables s on s.relid = c.oid
     where n.nspname = 'pgmem' and c.relkind in ('r', 'p') and c.relpersistence <> 't'
     order by c.relname
  loop
    v_n := v_n + 1;
    relation := r.rel; live_rows := r.live; dead_rows := r.dead; changed_since_analyze := r.changed; size_bytes := r.size;
    last_vacuum := r.vacuumed; last_analyze := r.analyzed;
    if r.changed > 0 and (r.analyzed is null or r.changed >= min_changed_fraction * greatest(r.live, 1)) then
      action := 'analyze'; applied := not dry_run;
      if not dry_run then
        execute format('analyze %I.%I', 'pgmem', r.relname);
        v_analyzed := v_analyzed || r.relname::text;
      end if;
      return next;
    end if;
    if r.dead > 50 and r.dead >= vacuum_fraction * greatest(r.live, 1) then
      action := 'vacuum'; applied := false;  -- (not in a function: the vacuum schedule runs it)
      v_vacuum := v_vacuum || r.relname::text;
      return next;
    end if;
  end loop;
  -- invalid indexes (a failed CREATE INDEX CONCURRENTLY): REINDEX CONCURRENTLY rebuilds them safely
  for r in select format('%I.%I', n.nspname, (select x.relname from pg_class x where x.oid = i.indexrelid)) as idx, t.relname as tbl, pg_relation_size(i.indexrelid) as size
             from pg_index i join pg_class t on t.oid = i.indrelid join pg_namespace n on n.oid = t.relnamespace
            where n.nspname = 'pgmem' and not i.indisvalid order by 1 loop
    relation := r.idx; live_rows := null; dead_rows := null; changed_since_analyze := null; size_bytes := r.size;
    last_vacuum := null; last_analyze := null; action := 'reindex concurrently'; applied := false;
    v_reindex := v_reindex || r.idx;
    return next;
  end loop;
  perform pgmem._job_end(v_run, v_n, cardinality(v_analyzed),
    jsonb_build_object('analyzed', to_jsonb(v_analyzed), 'vacuum_due', to_jsonb(v_vacuum), 'reindex_due', to_jsonb(v_reindex),
                       'last_vacuum', (select jsonb_object_agg(s.relname, greatest(s.last_vacuum, s.last_autovacuum))
                                         from pg_stat_all_tables s where s.schemaname = 'pgmem'
                                          and greatest(s.last_vacuum, s.last_autovacuum) is not null)));
end $$;
comment on function pgmem.compact(boolean, float8, float8) is
  'Shadow cleanup (the compact job, as the owner): ANALYZE of every pgmem table with at least min_changed_fraction of its rows changed since its last analyze; reports the tables with dead rows over vacuum_fraction (VACUUM runs in its own pg_cron entry, pgmem.vacuum_command()) and the invalid indexes to REINDEX CONCURRENTLY. One row per action; job_runs.details lists them with each table''s last vacuum.';
