-- Engram ranking (engram.md, Retrieval & Ranking):
--   score = w_rel·relevance + w_imp·decayed_importance + w_rec·recency + w_acc·access_frequency
--   relevance           cosine similarity (clipped to [0,1]) when both have embeddings,
--                       else Jaccard of tokens (Engram's keyword fallback)
--   decayed_importance  importance · e^(-ln2·age/30d) · (1 + log2(1+n)·0.1)
--   recency             max(0, 1 - age/90 days)
--   access_frequency    min(n/100, 1)
-- Default weights (profile engram): the design's Full Ranking Example, .5/.3/.2/0.
--
-- Early termination (engram.md, Performance Optimizations 4, "Stop when we have enough
-- high-quality matches": for memory in sortedMemories, keep it if score > 0.8, stop at k).
-- early_termination => true (or, left NULL, the setting recall_early_termination, off by
-- default: issue 36, E29) reads the candidates one by one in the HNSW index's order (nearest
-- first: relevance, the largest of the Engram weights, is the order the index can give), scores
-- each with the four Engram scores, keeps it when its score is above min_score (0.8) and stops
-- reading as soon as it holds k: the design's loop, with the index's order as its sortedMemories.
-- It reads at most the n candidates the HNSW branch reads (q.n); what it saves is the reading and
-- scoring of the rest and the other candidate branches (lexical, recent: sql/203_candidates.sql).
-- The memories waiting for the index job (vector_queue) are read first (few, by exact distance).
-- Without a query embedding, or asked for other states than active (not under the index), it
-- keeps the former behaviour: every candidate scored, the k best above min_score returned.
-- How many candidates a call read is in the session setting pgmem.recall_candidates_read.
-- (The design's loop takes the first k above the bar in its sort order, as this one does; the
-- ones returned are then ordered by score.) Whether it can be the default is LoCoMo dev R@10's
-- to say (bench/locomo.py; the setting is off until it is measured).
drop function if exists pgmem.recall(text, vector, integer, jsonb, jsonb, timestamptz, text);
create or replace function pgmem.recall(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null,
  profile text default 'engram',
  early_termination boolean default null,
  min_score float8 default 0.8)
returns table (id bigint, score float8, relevance float8, decayed_importance float8, recency float8, access_frequency float8,
               content text, summary text, who text, category text, importance real, access_count integer, created_at timestamptz)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
  set plan_cache_mode = force_generic_plan  -- plans cached for the session, never per call (sql/203_candidates.sql)
as $$
declare
  q pgmem.query := pgmem._query('recall', query_text, query_embedding, k, null, null, null, profile, weights,
                                filters, as_of);
  v_early boolean := coalesce(early_termination, pgmem._setting_bool('recall_early_termination'));
  v_ids bigint[];
  v_sup bigint[];
  v_read integer := 0;
  v_score float8;
  v_rest bigint[] := '{}'::bigint[];        -- (early exit) the candidates read below the bar, and their scores
  v_rest_score float8[] := '{}'::float8[];
  v_prev_scan text := current_setting('hnsw.iterative_scan', true);
  r_mem pgmem.memories;
begin
  perform pgmem._check_unit(min_score, 'min_score');
  if v_early and q.embedding is not null and q.states = array['active'] then
    -- engram.md, Performance Optimizations 4: the candidates nearest first, from the index (an
    -- iterative scan, so that a filter leaves the next ones coming), stopped at k above the bar
    perform set_config('hnsw.iterative_scan', 'strict_order', true);
    v_ids := '{}';
    -- (the memories waiting for the index job first: few, ordered exactly; then the index's,
    -- nearest first. An Append of the two runs lazily: the loop's cursor reads the index only
    -- as far as it goes)
    for r_mem in (select x.* from pgmem.vector_queue vq join pgmem.memories x on x.id = vq.memory_id
                   where vq.tenant = q.tenant and x.tenant = q.tenant and x.state = 'active' and x.embedding is not null
                     and pgmem._eligible(x, q)
                   order by x.embedding operator(public.<=>) q.embedding, x.id limit q.n)
                 union all
                 (select x.* from pgmem.memory_vectors v join pgmem.memories x on x.id = v.memory_id
                   where (v.tenant = q.tenant) is true and x.tenant = q.tenant and x.state = 'active'
                     and pgmem._eligible(x, q)
                   order by v.embedding operator(public.<=>) q.embedding limit q.n)
    loop
      v_read := v_read + 1;
      v_sup := pgmem._superseded(array[r_mem.id], q.tenant, q.as_of);
      continue when q.current_only and cardinality(v_sup) > 0;
      v_score := (q.w_relevance * pgmem._engram_relevance(r_mem, q) + q.w_importance * pgmem._engram_importance(r_mem, q)
                  + q.w_recency * pgmem._engram_recency(r_mem, q) + q.w_access * pgmem._engram_access(r_mem, q))
                 * case when cardinality(v_sup) > 0 then q.superseded_factor else 1 end
                 * case when r_mem.category in ('question', 'answer') then q.conversation_factor else 1 end;
      if v_score > min_score then
        v_ids := v_ids || r_mem.id;
        exit when cardinality(v_ids) >= q.k;
      else
        v_rest := v_rest || r_mem.id;
        v_rest_score := v_rest_score || v_score;
      end if;
    end loop;
    perform set_config('hnsw.iterative_scan', coalesce(v_prev_scan, 'off'), true);
    -- (pgmem's reading: fewer than k above the bar once every candidate is read, the best of the
    -- others fill the k, as recall without the early exit would rank them; the design's loop
    -- returned nothing at all then, and on LoCoMo's dev file no Engram score reaches .8)
    if cardinality(v_ids) < q.k then
      v_ids := v_ids || array(select x.id from unnest(v_rest, v_rest_score) x(id, sc)
                               order by x.sc desc, x.id limit q.k - cardinality(v_ids));
      v_early := false;
    end if;
  else
    v_early := coalesce(early_termination, false);  -- (the setting asks for the early exit only)
    v_ids := pgmem._candidate_ids(q);
    v_read := cardinality(v_ids);
  end if;
  v_sup := pgmem._superseded(v_ids, q.tenant, q.as_of);  -- current beats stale (sql/202_signals.sql)
  perform set_config('pgmem.recall_candidates_read', v_read::text, false);
  return query
  with s as (
    select m.id, m.content, m.summary, m.who, m.category, m.importance, m.access_count, m.created_at,
           pgmem._engram_relevance(m, q) as rel, pgmem._engram_importance(m, q) as imp,
           pgmem._engram_recency(m, q) as rec, pgmem._engram_access(m, q) as acc
      from pgmem.memories m
     where m.id = any(v_ids) and m.tenant = q.tenant and m.state = any(q.states) and pgmem._eligible(m, q)
       and not (q.current_only and m.id = any(v_sup)))
  ,
  top as (
    -- Engram, Retrieval & Ranking: the weighted sum of the four scores
    -- (a superseded memory keeps superseded_factor of its score: current beats stale)
    -- (issue 32: a question or an answer an agent loop stored keeps conversation_factor, as in search)
    select s.id, (q.w_relevance * s.rel + q.w_importance * s.imp + q.w_recency * s.rec + q.w_access * s.acc)
                 * case when s.id = any(v_sup) then q.superseded_factor else 1 end
                 * case when s.category in ('question', 'answer') then q.conversation_factor else 1 end as score,
           s.rel, s.imp, s.rec, s.acc, s.content, s.summary, s.who, s.category, s.importance, s.access_count, s.created_at
      from s
     where not v_early
        or (q.w_relevance * s.rel + q.w_importance * s.imp + q.w_recency * s.rec + q.w_access * s.acc)
           * case when s.id = any(v_sup) then q.superseded_factor else 1 end
           * case when s.category in ('question', 'answer') then q.conversation_factor else 1 end > min_score
     order by 2 desc, s.id
     limit q.k),
  -- what is returned is recorded as a retrieval (sql/212_access_log.sql), once
  rec as materialized (
    select pgmem._record_access('retrieval', 'recall', array(select t2.id from top t2 order by t2.score desc, t2.id)))
  select t.* from top t cross join rec
   order by t.score desc, t.id;
end $$;
comment on function pgmem.recall(text, vector, integer, jsonb, jsonb, timestamptz, text, boolean, float8) is
  'Engram ranking: relevance (cosine, or token Jaccard without embeddings), decayed importance with access boost, linear 90-day recency and access frequency, weighted by the engram profile (.5/.3/.2/0) or explicit weights. early_termination => true (NULL: the setting recall_early_termination, off by default): reads the candidates nearest first from the index and stops once k score above min_score (Engram''s 0.8); fewer than k above it, the best of the others read fill the k. The candidates read are in the session setting pgmem.recall_candidates_read.';
