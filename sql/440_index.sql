-- The index job: moves memories from pgmem.vector_queue into pgmem.memory_vectors, the table
-- under the HNSW index (125_vectors.sql, STORAGE.md). The HNSW insertion (~2.2 ms of CPU per
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
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  v_taken bigint;
begin
  perform pgmem._check_between(batch, 'batch', 1, 100000);
  v_run := pgmem._job_begin('index', v_tenant, jsonb_build_object('batch', batch));
  if v_run is null then return; end if;
  with q as (
    select x.memory_id from pgmem.vector_queue x
     where v_tenant is null or x.tenant = v_tenant
     order by x.queued_at, x.memory_id
     limit batch
     for update skip locked),
  moved as (
    insert into pgmem.memory_vectors as v (memory_id, tenant, user_scope, embedding)
    select m.id, m.tenant, coalesce(m.user_id, ''), m.embedding
      from q join pgmem.memories m on m.id = q.memory_id
     where m.state = 'active' and m.embedding is not null
     order by m.id
    on conflict (memory_id) do update set tenant = excluded.tenant, user_scope = excluded.user_scope,
                                          embedding = excluded.embedding
    returning v.memory_id),
  gone as (delete from pgmem.vector_queue x using q where x.memory_id = q.memory_id returning x.memory_id)
  select (select count(*) from moved), (select count(*) from gone) - (select count(*) from moved), (select count(*) from gone)
    into indexed, dropped, v_taken;
  select count(*) into queued from pgmem.vector_queue x where v_tenant is null or x.tenant = v_tenant;
  perform pgmem._job_end(v_run, v_taken, indexed, jsonb_build_object('more', v_taken >= batch, 'queued', queued));
  return next;
end $$;
comment on function pgmem.index_vectors(integer, text) is
  'The index job: moves up to batch queued memories (pgmem.vector_queue) under the HNSW index (pgmem.memory_vectors); returns how many were indexed, dropped (no longer active or embedded) and are still queued. run_job(''index'') repeats it until the queue is empty.';
