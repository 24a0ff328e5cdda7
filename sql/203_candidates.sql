-- The read path, part 4: which memories a call may see, and the candidate set every ranking
-- scores (sql/200_query.sql lists the parts).

-- The memories a call may see, besides their state: the caller's tenant, created by as_of, and
-- the filters of the query record (a filter that is not given is NULL and passes everything).
create or replace function pgmem._eligible(m pgmem.memories, q pgmem.query) returns boolean
  language sql immutable parallel safe
  return m.tenant = q.tenant and m.created_at <= q.as_of
     -- (issue 32: excluded memories are no candidate, whatever else the call filters on)
     and (q.not_ids is null or not m.id = any(q.not_ids))
     and (q.not_categories is null or not m.category = any(q.not_categories))
     -- (q.filtered is false for a call without filters, pgmem._query: the tests below are skipped)
     and (q.filtered is false or (
         (q.ids is null or m.id = any(q.ids))
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
     and (q.metadata_path is null or m.metadata @@ q.metadata_path)
     and (q.motor is null or m.motor @> q.motor) and (q.sensory is null or m.sensory @> q.sensory)));
comment on function pgmem._eligible(pgmem.memories, pgmem.query) is
  'Whether a memory is visible to a query (tenant, as_of, filters), its state aside.';

-- The branches whose best plan depends on the call's values, planned for each call with them
-- (force_custom_plan; the other branches keep one plan per session, _candidate_ids below):
--   scan, scan_text   every eligible memory of a small tenant (or user); asked with words only,
--                     those that hold one of them. A generic plan, which cannot know the
--                     tenant's size, may read every memory of the table for it.
--   exact_knn         the n nearest memories of a mid-sized tenant (or user), exactly: its vectors
--                     through the b-tree on memory_vectors(tenant) and a sort (ordering by the
--                     distance + 0 keeps the HNSW index out). Filtering a shared HNSW graph down to
--                     a tenant of 1% of it visits ~100 times the n it wants (bench/README.md R7).
--   exact_recent      the same among its recent memories (pgmem.recent_vectors' b-tree).
--   filtered,         the HNSW branches of a call with filters (or an as_of in the past): the
--   filtered_recent   memories joined to the vectors the iterative HNSW scan yields, filtered
--                     there; whether to walk the graph or read the few memories a selective
--                     filter leaves depends on the filter's values (a generic plan read every
--                     memory of the tenant through a b-tree).
create or replace function pgmem._candidates_planned(q pgmem.query, p_branch text) returns bigint[]
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
  set plan_cache_mode = force_custom_plan
as $$
begin
  case p_branch
  when 'scan' then  -- (search_exact: every eligible memory; a small tenant: those the index path
                    -- could find, i.e. embedded or holding a word of the question)
    if q.user_scope is not null then
      return array(select m.id from pgmem.memories m
                    where m.tenant = q.tenant and m.user_id = q.user_scope and m.state = any(q.states) and pgmem._eligible(m, q)
                      and (q.exact or m.embedding is not null or ts_match_vq(m.tsv, q.tsq)));
    end if;
    return array(select m.id from pgmem.memories m
                  where m.tenant = q.tenant and m.state = any(q.states) and pgmem._eligible(m, q)
                    and (q.exact or m.embedding is not null or ts_match_vq(m.tsv, q.tsq)));
  when 'scan_text' then
    return array(select m.id from pgmem.memories m
                  where m.tenant = q.tenant and m.state = any(q.states) and ts_match_vq(m.tsv, q.tsq)
                    and pgmem._eligible(m, q));
  when 'exact_knn' then
    if q.filtered then
      return array(select v.memory_id from pgmem.memory_vectors v join pgmem.memories m on m.id = v.memory_id
                    where v.tenant = q.tenant and (q.user_scope is null or v.user_scope = q.user_scope)
                      and m.state = 'active' and pgmem._eligible(m, q)
                    order by (v.embedding operator(public.<=>) q.embedding) + 0 limit q.n);
    end if;
    return array(select v.memory_id from pgmem.memory_vectors v
                  where v.tenant = q.tenant and (q.user_scope is null or v.user_scope = q.user_scope)
                  order by (v.embedding operator(public.<=>) q.embedding) + 0 limit q.n);
  when 'exact_recent' then
    if q.filtered or q.recent_since < now() - make_interval(days => coalesce(pgmem._setting_num('recent_vectors_days'), 30)::int) then
      return array(select m.id from pgmem.memories m
                    where m.tenant = q.tenant and m.state = 'active' and m.created_at >= q.recent_since
                      and m.embedding is not null and pgmem._eligible(m, q)
                    order by (m.embedding operator(public.<=>) q.embedding) + 0 limit q.recent_n);
    end if;
    return array(select r.memory_id from pgmem.recent_vectors r
                  where r.tenant = q.tenant and r.created_at >= q.recent_since
                    and (q.user_scope is null or r.user_scope = q.user_scope)
                  order by (r.embedding operator(public.<=>) q.embedding) + 0 limit q.recent_n);
  when 'filtered_recent' then
    return array(select v.memory_id from pgmem.memory_vectors v join pgmem.memories m on m.id = v.memory_id
                  where v.tenant = q.tenant and m.state = 'active' and m.created_at >= q.recent_since
                    and pgmem._eligible(m, q)
                  order by v.embedding operator(public.<=>) q.embedding limit q.recent_n);
  when 'filtered' then
    return array(select v.memory_id from pgmem.memory_vectors v join pgmem.memories m on m.id = v.memory_id
                  where v.tenant = q.tenant and m.state = 'active' and pgmem._eligible(m, q)
                  order by v.embedding operator(public.<=>) q.embedding limit q.n);
  end case;
  return null;  -- (not reached: an unknown branch is CASE_NOT_FOUND above)
end $$;
comment on function pgmem._candidates_planned(pgmem.query, text) is
  'The candidate branches whose plan depends on the call''s values (planned for each call): every memory of a small tenant, the exact nearest memories of a mid-sized one, and the HNSW branches of a filtered call.';

-- The candidate set of search, activate and recall: memory ids from the indexes, never from a
-- scan of all memories (DESIGN.md, Read path, and "The read path's shape"). Each branch is its
-- own static statement, run only when it is on, with a plan cached for the session that does
-- not depend on which branches or filters a call uses; the ranking then scores the ids in one
-- statement. (Until issue 23 the branches were one statement planned for every call with its
-- query record, force_custom_plan: 11.6 ms of planning per search at 100,000 memories, and a
-- filtered iterative HNSW scan for the recent branch with a p95 of seconds; bench/README.md R3.)
--   0. scan: a tenant (or the filtered user) of at most exact_scan_rows memories, and
--      search_exact: every eligible memory. Faster than filtering the shared indexes for a
--      small tenant, and exact.
--   1. HNSW: the n nearest active memories by cosine distance over pgmem.memory_vectors (the
--      vectors under the HNSW index, sql/125_vectors.sql), filtered on the tenant (and the user
--      of a one-user filter) in the index scan; with other filters (or an as_of in the past),
--      joined to memories and filtered in the iterative scan, so that filters do not starve it.
--      And the exact distance of the active memories still queued for indexing (vector_queue).
--   2. recent (search): the recent_n nearest among the memories created since recent_since,
--      i.e. younger than `recent_window` half-lives of the recency signal, from
--      pgmem.recent_vectors (their own small HNSW index, kept by the index job,
--      sql/440_index.sql) while the window fits in it (recent_vectors_days), else a filtered
--      scan of the global index. At 1,000,000 memories the exact top 10 held memories of
--      semantic rank 12 to 929 with recency .62-.99 (recent ones that are close enough): the
--      global HNSW top 100 misses them, the recent memories' own top 100 holds them
--      (bench/README.md L12).
--   3. lexical: the n best matches of the probe query (sql/201_lexical.sql: the rarest lexemes
--      whose matches fit lexical_probe_rows) in the GIN index; search orders them by BM25 (or
--      its partial fused score, pgmem._jam_prior), activate and recall by ts_rank.
--   4. the memories named by the ids filter, and memories in other states than active on
--      request (archived, deleted, merged: their n nearest and n best lexical matches, without
--      the HNSW index, which need not cover them).
--   5. search with a neighbour weight: the neighbours of 1-4 along pgmem.links of the kinds
--      q.neighbour_links (temporal: the previous and next memory of the session), so that the
--      neighbour signal can read their scores and a turn answered by its neighbour is found
--      ("Yes, in Lisbon" after "Where is the conference?"; issue 12, item 6).
-- Every id is checked again by the ranking statement (tenant, state, _eligible).
create or replace function pgmem._candidate_ids(q pgmem.query) returns bigint[]
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
  -- each statement is planned once per session, with the record's fields as parameters: a
  -- custom plan per call cost 1-3 ms of planning (R4), and these statements' plans do not
  -- depend on the values (tests/test_search.py checks the paths they take)
  set plan_cache_mode = force_generic_plan
as $$
declare
  ids bigint[];
  c bigint[];
  v_active boolean := 'active' = any(q.states);
  -- filtered by one user and nothing else: memory_vectors and recent_vectors carry the user
  v_user_only boolean := q.user_scope is not null and q.user_ids = array[q.user_scope] and q.ids is null
    and q.agent_ids is null and q.session_ids is null and q.whos is null and q.categories is null and q.tiers is null
    and q.locations is null and q.created_after is null and q.created_before is null and q.metadata is null
    and q.motor is null and q.sensory is null and q.as_of >= now();
begin
  -- 0. every eligible memory: search_exact, and a small tenant (or filtered user) asked with an
  -- embedding (Shadow's getAllCandidateMemories: every memory, scored). Asked with words only,
  -- a small tenant's memories that hold one of them, as the lexical branch would find them
  -- (a text-only question ranks word matches, not every memory by its other signals); then the
  -- ids filter and the neighbours below.
  if q.exact then
    return pgmem._candidates_planned(q, 'scan');
  end if;
  ids := case when q.scan and q.embedding is not null then pgmem._candidates_planned(q, 'scan')
              when q.scan then pgmem._candidates_planned(q, 'scan_text')
              else '{}' end;

  if q.embedding is not null and v_active and not q.scan then
    -- 1. HNSW (a mid-sized tenant: its nearest, exactly)
    if q.exact_knn then
      ids := pgmem._candidates_planned(q, 'exact_knn');
    -- ("(v.tenant = q.tenant) is true": a condition no b-tree serves, so that the plan, made once
    -- for every tenant, walks the HNSW graph; with the tenant's b-tree on offer, a generic plan
    -- of a database of many tenants sorted the tenant's vectors instead, whatever its size)
    elsif not q.filtered then
      ids := array(select v.memory_id from pgmem.memory_vectors v where (v.tenant = q.tenant) is true
                    order by v.embedding operator(public.<=>) q.embedding limit q.n);
    elsif v_user_only then
      ids := array(select v.memory_id from pgmem.memory_vectors v
                    where (v.tenant = q.tenant) is true and v.user_scope = q.user_scope
                    order by v.embedding operator(public.<=>) q.embedding limit q.n);
    else
      ids := pgmem._candidates_planned(q, 'filtered');
    end if;
    -- the active, embedded memories the index job has not moved into memory_vectors yet: their
    -- exact distance (the queue is short; the queue's ids as an array, so that memories are
    -- read by primary key whatever the planner thinks of the queue's size)
    c := array(select vq.memory_id from pgmem.vector_queue vq where vq.tenant = q.tenant);
    if cardinality(c) > 0 then
      ids := ids || array(select m.id from pgmem.memories m
                           where m.id = any(c) and m.state = 'active' and m.embedding is not null and pgmem._eligible(m, q)
                           order by m.embedding operator(public.<=>) q.embedding limit q.n);
    end if;
    -- 2. recent
    if q.recent_n > 0 and q.exact_knn then
      ids := ids || pgmem._candidates_planned(q, 'exact_recent');
    elsif q.recent_n > 0 then
      if q.recent_since >= now() - make_interval(days => coalesce(pgmem._setting_num('recent_vectors_days'), 30)::int)
         and (not q.filtered or v_user_only) then
        ids := ids || array(select r.memory_id from pgmem.recent_vectors r
                             where (r.tenant = q.tenant) is true and r.created_at >= q.recent_since
                               and (q.user_scope is null or r.user_scope = q.user_scope)
                             order by r.embedding operator(public.<=>) q.embedding limit q.recent_n);
      else
        ids := ids || pgmem._candidates_planned(q, 'filtered_recent');
      end if;
    end if;
  end if;
  -- 3. lexical (not for a small tenant: scanned above): the probe's matches in the GIN index (at most lexical_probe_rows, estimated);
  -- when every word of the question is too common for a probe (the AND of all its lexemes is
  -- over that budget), the matches among the tenant's newest lexical_probe_rows memories
  -- instead (the memories_state_time index, newest first; ts_match_vq, not @@, so that the GIN
  -- index is not used for it): the ones recency and a time window lift (R5)
  if q.scan then
    null;
  elsif q.probe is not null and v_active then
    if q.ranking = 'search' then
      ids := ids || array(select m.id from pgmem.memories m
                           where m.tsv @@ q.probe and m.tenant = q.tenant and m.state = 'active' and pgmem._eligible(m, q)
                           order by pgmem._jam_prior(m, q) desc, m.id limit q.n);
    else
      ids := ids || array(select m.id from pgmem.memories m
                           where m.tsv @@ q.probe and m.tenant = q.tenant and m.state = 'active' and pgmem._eligible(m, q)
                           order by ts_rank(m.tsv, q.probe, 1) desc, m.id limit q.n);
    end if;
  elsif q.tsq is not null and q.embedding is not null and v_active then
    if q.ranking = 'search' then
      ids := ids || array(select (x.m).id from (select m from pgmem.memories m
                                                  where m.tenant = q.tenant and m.state = 'active'
                                                  order by m.created_at desc limit q.probe_rows) x(m)
                           where ts_match_vq((x.m).tsv, q.tsq) and pgmem._eligible(x.m, q)
                           order by pgmem._jam_prior(x.m, q) desc, (x.m).id limit q.n);
    else
      ids := ids || array(select (x.m).id from (select m from pgmem.memories m
                                                  where m.tenant = q.tenant and m.state = 'active'
                                                  order by m.created_at desc limit q.probe_rows) x(m)
                           where ts_match_vq((x.m).tsv, q.tsq) and pgmem._eligible(x.m, q)
                           order by ts_rank((x.m).tsv, q.tsq, 1) desc, (x.m).id limit q.n);
    end if;
  end if;
  -- 4. the ids filter; memories in other states on request
  if q.ids is not null then
    ids := ids || q.ids;
  end if;
  if q.states <> array['active'] and not q.scan then
    if q.embedding is not null then
      ids := ids || array(select m.id from pgmem.memories m
                           where m.tenant = q.tenant and m.state = any(q.states) and m.state <> 'active'
                             and m.embedding is not null and pgmem._eligible(m, q)
                           order by m.embedding operator(public.<=>) q.embedding limit q.n);
    end if;
    if q.probe is not null then
      ids := ids || array(select m.id from pgmem.memories m
                           where m.tsv @@ q.probe and m.tenant = q.tenant and m.state = any(q.states) and m.state <> 'active'
                             and pgmem._eligible(m, q)
                           order by ts_rank(m.tsv, q.probe, 1) desc, m.id limit q.n);
    end if;
  end if;
  -- 5. neighbours along the links of q.neighbour_links, either direction
  if q.w_neighbour > 0 and cardinality(ids) > 0 then
    ids := ids || array(select l.dst_id from pgmem.links l
                         where l.src_id = any(ids) and l.kind = any(q.neighbour_links) and l.tenant = q.tenant
                        union
                        select l.src_id from pgmem.links l
                         where l.dst_id = any(ids) and l.kind = any(q.neighbour_links) and l.tenant = q.tenant);
  end if;
  return ids;
end $$;
comment on function pgmem._candidate_ids(pgmem.query) is
  'The ids a ranking scores: every eligible memory of a small tenant (and for search_exact), else the HNSW top-n, the recent memories'' HNSW top-n (search), the lexical top-n of the probe query, the ids filter, memories in other states on request, and the neighbours of all these.';
