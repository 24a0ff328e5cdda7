-- Vectors for nearest-neighbour search (STORAGE.md, the lead's decision of 2026-11-24).
--
-- pgmem.memories.embedding is the source of truth for every computation. Nearest-neighbour
-- SEARCH goes through pgmem.memory_vectors, which holds exactly the active, embedded memories
-- that have been indexed, under the HNSW index; a memory that gets an embedding (at insert or
-- later) while active waits in pgmem.vector_queue until the `index` job (440_index.sql) moves
-- it into memory_vectors. Why: an HNSW insertion costs ~2.2 ms of CPU at 1,000,000 vectors
-- (measured, bench/README.md), more than everything else a write does, and a memories row
-- never gets a HOT update, so with the index on memories every update of an active memory
-- (a touch, a state change, a late embedding, a merge) re-inserted its unchanged vector.
-- The triggers of 040 keep both tables in step with memories, in the writing transaction:
-- a memory leaving `active`, or whose embedding or user changes, leaves memory_vectors and
-- the queue; one coming back, or with a new embedding, is queued.
--
-- Every nearest-neighbour lookup outside the read path uses pgmem._neighbours: the HNSW top-N
-- of memory_vectors UNION the exact distance over the tenant's queued (not yet indexed) rows.

create or replace function pgmem._neighbours(p_tenant text, p_embedding public.vector, p_n integer,
                                             p_user_scope text default null)
returns table (id bigint, distance float8)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
  set hnsw.iterative_scan = strict_order
as $$
begin
  if p_embedding is null or p_n < 1 then
    return;
  end if;
  if p_user_scope is null then
    return query
    select x.id, x.distance from (
      (select v.memory_id as id, v.embedding operator(public.<=>) p_embedding as distance
         from pgmem.memory_vectors v
        where v.tenant = p_tenant
        order by v.embedding operator(public.<=>) p_embedding limit p_n)
      union all
      (select m.id, m.embedding operator(public.<=>) p_embedding
         from pgmem.vector_queue q join pgmem.memories m on m.id = q.memory_id
        where q.tenant = p_tenant and m.tenant = p_tenant and m.state = 'active' and m.embedding is not null
        order by 2 limit p_n)) x
     order by x.distance, x.id limit p_n;
  else
    return query
    select x.id, x.distance from (
      (select v.memory_id as id, v.embedding operator(public.<=>) p_embedding as distance
         from pgmem.memory_vectors v
        where v.tenant = p_tenant and v.user_scope = p_user_scope
        order by v.embedding operator(public.<=>) p_embedding limit p_n)
      union all
      (select m.id, m.embedding operator(public.<=>) p_embedding
         from pgmem.vector_queue q join pgmem.memories m on m.id = q.memory_id
        where q.tenant = p_tenant and m.tenant = p_tenant and m.state = 'active' and m.embedding is not null
          and coalesce(m.user_id, '') = p_user_scope
        order by 2 limit p_n)) x
     order by x.distance, x.id limit p_n;
  end if;
end $$;
comment on function pgmem._neighbours(text, vector, integer, text) is
  'The p_n active memories of a tenant (and user scope: user_id, '''' for none) nearest to an embedding by cosine distance: HNSW over pgmem.memory_vectors plus the exact distance of the memories still queued for indexing. hnsw.ef_search is the caller''s.';
