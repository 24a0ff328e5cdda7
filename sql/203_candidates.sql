-- The read path, part 4: which memories a call may see, and the candidate set every ranking
-- scores (sql/200_query.sql lists the parts).

-- The memories a call may see, besides their state: the caller's tenant, created by as_of, and
-- the filters of the query record (a filter that is not given is NULL and passes everything).
create or replace function pgmem._eligible(m pgmem.memories, q pgmem.query) returns boolean
  language sql immutable parallel safe
  return m.tenant = q.tenant and m.created_at <= q.as_of
     and (q.ids is null or m.id = any(q.ids))
     and (q.user_ids is null or m.user_id = any(q.user_ids))
     and (q.agent_ids is null or m.agent_id = any(q.agent_ids))
     and (q.session_ids is null or m.session_id = any(q.session_ids))
     and (q.whos is null or m.who = any(q.whos))
     and (q.categories is null or m.category = any(q.categories))
     and (q.tiers is null or m.tier = any(q.tiers))
     and (q.locations is null or m.location = any(q.locations))
     and (q.created_after is null or m.created_at >= q.created_after)
     and (q.created_before is null or m.created_at < q.created_before)
     and (q.metadata is null or m.metadata @> q.metadata)
     and (q.motor is null or m.motor @> q.motor) and (q.sensory is null or m.sensory @> q.sensory);
comment on function pgmem._eligible(pgmem.memories, pgmem.query) is
  'Whether a memory is visible to a query (tenant, as_of, filters), its state aside.';

-- The candidate set of search, activate and recall: memory ids from the indexes, never from a
-- scan of all memories (DESIGN.md, Read path).
--   1. HNSW: the n nearest active memories by cosine distance (iterative scan, so that filters
--      do not starve it), over pgmem.memory_vectors (the vectors under the HNSW index, STORAGE
--      decision; sql/125_vectors.sql), joined to memories for the filters; and the exact
--      distance of the active memories still queued for indexing (pgmem.vector_queue).
--   2. recent (search): the recent_n nearest among the memories created since recent_since,
--      i.e. younger than `recent_window` half-lives of the recency signal. At 1,000,000 memories
--      the exact top 10 were memories of semantic rank 12 to 929 with recency .62-.99 (recent
--      ones that are close enough): the global HNSW top 100 or 200 misses them, the recent
--      memories' own top 100 holds them (overlap@10 with search_exact .98 with it, .59 without;
--      bench/README.md L12).
--   3. lexical: the n best matches of the probe query (sql/201_lexical.sql) in the GIN index;
--      search orders them by their partial fused score (pgmem._jam_prior), activate and recall
--      by ts_rank.
--   4. the memories named by the ids filter, and memories in other states than active on
--      request (archived, deleted, merged: their n nearest and n best lexical matches, without
--      the HNSW index, which need not cover them).
--   5. search_exact: every eligible memory (the exhaustive reference).
--   6. search with a neighbour weight: the neighbours of 1-4 along pgmem.links of the kinds
--      q.neighbour_links (temporal: the previous and next memory of the session), so that the
--      neighbour signal can read their scores and a turn answered by its neighbour is found
--      ("Yes, in Lisbon" after "Where is the conference?"; issue 12, item 6).
-- `m.state = 'active'` is written out in the index branches so that a partial index on the
-- active memories serves them. Each branch is switched off by a condition on the query record
-- alone, which the executor tests once (a one-time filter), not per row.
create or replace function pgmem._candidates(q pgmem.query) returns setof bigint
  language sql stable parallel safe
begin atomic
  with c as (
  (select v.memory_id as id from pgmem.memory_vectors v join pgmem.memories m on m.id = v.memory_id
    where q.embedding is not null and not q.exact and 'active' = any(q.states)
      and v.tenant = q.tenant and m.state = 'active' and pgmem._eligible(m, q)
    order by v.embedding operator(public.<=>) q.embedding
    limit q.n)
  union
  (select v.memory_id as id from pgmem.memory_vectors v join pgmem.memories m on m.id = v.memory_id
    where q.embedding is not null and not q.exact and 'active' = any(q.states) and q.recent_n > 0
      and v.tenant = q.tenant and m.state = 'active' and m.created_at >= q.recent_since and pgmem._eligible(m, q)
    order by v.embedding operator(public.<=>) q.embedding
    limit q.recent_n)
  union
  -- the active, embedded memories the `index` job has not moved into memory_vectors yet: their
  -- exact distance (the queue is short; STORAGE.md)
  -- (the queue's ids as an array: the memories are read by primary key whatever the planner
  -- thinks of the queue's size, never by a scan of memories)
  (select m.id from pgmem.memories m
    where q.embedding is not null and not q.exact and 'active' = any(q.states)
      and m.id = any(array(select vq.memory_id from pgmem.vector_queue vq where vq.tenant = q.tenant))
      and m.state = 'active' and m.embedding is not null and pgmem._eligible(m, q)
    order by m.embedding operator(public.<=>) q.embedding
    limit q.n)
  union
  (select m.id from pgmem.memories m
    where q.probe is not null and not q.exact and 'active' = any(q.states)
      and m.state = 'active' and m.tsv @@ q.probe and pgmem._eligible(m, q)
    order by case when q.ranking = 'search' then pgmem._jam_prior(m, q) else ts_rank(m.tsv, q.probe, 1) end desc, m.id
    limit q.n)
  union
  (select m.id from pgmem.memories m
    where q.ids is not null and not q.exact and m.id = any(q.ids) and m.state = any(q.states) and pgmem._eligible(m, q))
  union
  (select m.id from pgmem.memories m
    where q.embedding is not null and not q.exact and q.states <> array['active']
      and m.state = any(q.states) and m.state <> 'active' and m.embedding is not null and pgmem._eligible(m, q)
    order by m.embedding operator(public.<=>) q.embedding
    limit q.n)
  union
  (select m.id from pgmem.memories m
    where q.probe is not null and not q.exact and q.states <> array['active']
      and m.state = any(q.states) and m.state <> 'active' and m.tsv @@ q.probe and pgmem._eligible(m, q)
    order by ts_rank(m.tsv, q.probe, 1) desc, m.id
    limit q.n)
  union
  (select m.id from pgmem.memories m
    where q.exact and m.state = any(q.states) and pgmem._eligible(m, q)))
  ,
  nb as (
    select l.dst_id as id from pgmem.links l
     where q.w_neighbour > 0 and not q.exact and l.src_id in (select c.id from c)
       and l.kind = any(q.neighbour_links) and l.tenant = q.tenant
    union
    select l.src_id from pgmem.links l
     where q.w_neighbour > 0 and not q.exact and l.dst_id in (select c.id from c)
       and l.kind = any(q.neighbour_links) and l.tenant = q.tenant)
  select c.id from c
  union
  select m.id from pgmem.memories m
   where m.id = any(array(select nb.id from nb)) and m.state = any(q.states) and pgmem._eligible(m, q);
end;
comment on function pgmem._candidates(pgmem.query) is
  'The ids a ranking scores: the HNSW top-n, the HNSW top-n of the recent memories (search), the lexical top-n of the probe query, the ids filter and memories in other states on request; every eligible memory for search_exact.';
