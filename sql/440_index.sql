-- The index job: moves memories from pgmem.vector_queue into pgmem.memory_vectors, the table
-- under the HNSW index (125_vectors.sql, STORAGE.md), and the recent ones into
-- pgmem.recent_vectors, the recent memories' own small HNSW index (search's recent candidate
-- branch, sql/203_candidates.sql; revision 0012), from which it drops those no longer recent. The HNSW insertion (~2.2 ms of CPU per
-- vector at 1,000,000) is paid here, in batches, instead of in every write. pg_cron runs it
-- every minute; the embedding worker and run_job('index') drain it too. Until a memory is
-- moved, pgmem._neighbours (and the read path) compare it exactly.
--
-- The batch locks the queue rows it takes (FOR UPDATE SKIP LOCKED: two batches share the
-- work); a write that changes one of those memories meanwhile waits for the batch in 040's
-- trigger and then removes what the batch moved, so memory_vectors never keeps a vector that
-- is no longer the memory's, or of a memory no longer active.
create or replace function pgmem.index_vectors(batch integer default 1000, tenant text default null)
returns table (indexed bigint, dropped bigint, queued bigint)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  v_taken bigint;
  v_skipped bigint;
  v_since timestamptz := now() - make_interval(days => coalesce(pgmem._setting_num('recent_vectors_days'), 30)::int);
begin
  perform pgmem._check_args('index_vectors', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  perform pgmem._check_between(batch, 'batch', 1, 100000);
  v_run := pgmem._job_begin('index', v_tenant, jsonb_build_object('batch', batch));
  if v_run is null then return; end if;
  with q0 as (
    select x.memory_id from pgmem.vector_queue x
     where v_tenant is null or x.tenant = v_tenant
     order by x.queued_at, x.memory_id
     limit batch
     for update skip locked),
  -- issue 35, M1: a memory another transaction holds FOR UPDATE (a tenant's own SELECT ... FOR
  -- UPDATE) would stall the batch on memory_vectors' foreign key: it stays queued for the next
  -- run instead, as merge and prune skip such rows (counted in details.skipped_locked)
  q as (
    select m.id as memory_id from pgmem.memories m
     where m.id in (select q0.memory_id from q0)
     for key share of m skip locked),
  moved as (
    insert into pgmem.memory_vectors as v (memory_id, tenant, user_scope, embedding)
    select m.id, m.tenant, coalesce(m.user_id, ''), m.embedding
      from q join pgmem.memories m on m.id = q.memory_id
     where m.state = 'active' and m.embedding is not null
     order by m.id
    on conflict (memory_id) do update set tenant = excluded.tenant, user_scope = excluded.user_scope,
                                          embedding = excluded.embedding
    returning v.memory_id),
  -- the recent ones also under the recent memories' own index (search's recent branch; the row
  -- references the memory_vectors row written above, checked at the end of the statement)
  recent as (
    insert into pgmem.recent_vectors as r (memory_id, tenant, user_scope, created_at, embedding)
    select m.id, m.tenant, coalesce(m.user_id, ''), m.created_at, m.embedding
      from q join pgmem.memories m on m.id = q.memory_id
     where m.state = 'active' and m.embedding is not null and m.created_at >= v_since
     order by m.id
    on conflict (memory_id) do update set tenant = excluded.tenant, user_scope = excluded.user_scope,
                                          created_at = excluded.created_at, embedding = excluded.embedding
    returning r.memory_id),
  gone as (delete from pgmem.vector_queue x using q where x.memory_id = q.memory_id returning x.memory_id)
  select (select count(*) from moved), (select count(*) from gone) - (select count(*) from moved), (select count(*) from gone),
         (select count(*) from q0) - (select count(*) from q)
    into indexed, dropped, v_taken, v_skipped;
  -- the memories that are no longer recent leave the recent index
  delete from pgmem.recent_vectors r where r.created_at < v_since and (v_tenant is null or r.tenant = v_tenant);
  select count(*) into queued from pgmem.vector_queue x where v_tenant is null or x.tenant = v_tenant;
  perform pgmem._job_end(v_run, v_taken, indexed, jsonb_build_object('more', v_taken >= batch, 'queued', queued, 'skipped_locked', v_skipped));
  return next;
end $$;
comment on function pgmem.index_vectors(integer, text) is
  'The index job: moves up to batch queued memories (pgmem.vector_queue) under the HNSW index (pgmem.memory_vectors), the recent ones (created in the last recent_vectors_days) under the recent index too (pgmem.recent_vectors), and drops the memories no longer recent from it; returns how many were indexed, dropped (no longer active or embedded) and are still queued. A memory another transaction holds FOR UPDATE stays queued for the next run (details.skipped_locked). run_job(''index'') repeats it until the queue is empty.';

-- Refills the recent memories' index (pgmem.recent_vectors) of the current tenant ('*': of every
-- tenant) from memory_vectors: after a bulk load that filled memory_vectors directly (bench.py's
-- loader), or to repair it. The index job keeps it current otherwise. Returns the rows written.
create or replace function pgmem.rebuild_recent_vectors() returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_since timestamptz := now() - make_interval(days => coalesce(pgmem._setting_num('recent_vectors_days'), 30)::int);
  n bigint;
begin
  delete from pgmem.recent_vectors r where v_tenant = '*' or r.tenant = v_tenant;
  insert into pgmem.recent_vectors (memory_id, tenant, user_scope, created_at, embedding)
  select v.memory_id, v.tenant, v.user_scope, m.created_at, v.embedding
    from pgmem.memory_vectors v join pgmem.memories m on m.id = v.memory_id
   where m.created_at >= v_since and (v_tenant = '*' or v.tenant = v_tenant);
  get diagnostics n = row_count;
  return n;
end $$;
comment on function pgmem.rebuild_recent_vectors() is
  'Refills the current tenant''s recent-memory index (pgmem.recent_vectors; tenant * = every tenant''s) from pgmem.memory_vectors: the memories created in the last recent_vectors_days. The index job keeps it current; this is for bulk loads that filled memory_vectors directly. Returns the rows written.';
