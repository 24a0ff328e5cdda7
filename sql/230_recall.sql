-- Engram ranking (engram.md, Retrieval & Ranking):
--   score = w_rel·relevance + w_imp·decayed_importance + w_rec·recency + w_acc·access_frequency
--   relevance           cosine similarity (clipped to [0,1]) when both have embeddings,
--                       else Jaccard of tokens (Engram's keyword fallback)
--   decayed_importance  importance · e^(-ln2·age/30d) · (1 + log2(1+n)·0.1)
--   recency             max(0, 1 - age/90 days)
--   access_frequency    min(n/100, 1)
-- Default weights (profile engram): the design's Full Ranking Example, .5/.3/.2/0.
--
-- Early termination, an option (engram.md, Performance Optimizations 4, "Stop when we have enough
-- high-quality matches": for memory in sortedMemories, keep it if score > 0.8, stop at k).
-- early_termination => true keeps only the memories scoring above min_score (0.8), at most k.
-- The design's loop stops scanning once it holds k; recall never scans the memories in the first
-- place (its candidates are the index branches' top-N, sql/203_candidates.sql), so what the rule
-- changes here is what it returns: nothing below the bar, even when fewer than k clear it. (The
-- design's loop takes the first k above the bar in its sort order; these are the k best above it.)
drop function if exists pgmem.recall(text, vector, integer, jsonb, jsonb, timestamptz, text);
create or replace function pgmem.recall(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null,
  profile text default 'engram',
  early_termination boolean default false,
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
  v_ids bigint[] := pgmem._candidate_ids(q);
  v_sup bigint[] := pgmem._superseded(v_ids, q.tenant, q.as_of);  -- current beats stale (sql/202_signals.sql)
begin
  perform pgmem._check_unit(min_score, 'min_score');
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
    select s.id, (q.w_relevance * s.rel + q.w_importance * s.imp + q.w_recency * s.rec + q.w_access * s.acc)
                 * case when s.id = any(v_sup) then q.superseded_factor else 1 end as score,
           s.rel, s.imp, s.rec, s.acc, s.content, s.summary, s.who, s.category, s.importance, s.access_count, s.created_at
      from s
     where not coalesce(early_termination, false)
        or (q.w_relevance * s.rel + q.w_importance * s.imp + q.w_recency * s.rec + q.w_access * s.acc)
           * case when s.id = any(v_sup) then q.superseded_factor else 1 end > min_score
     order by 2 desc, s.id
     limit q.k),
  -- what is returned is recorded as a retrieval (sql/212_access_log.sql), once
  rec as materialized (
    select pgmem._record_access('retrieval', 'recall', array(select t2.id from top t2 order by t2.score desc, t2.id)))
  select t.* from top t cross join rec
   order by t.score desc, t.id;
end $$;
comment on function pgmem.recall(text, vector, integer, jsonb, jsonb, timestamptz, text, boolean, float8) is
  'Engram ranking: relevance (cosine, or token Jaccard without embeddings), decayed importance with access boost, linear 90-day recency and access frequency, weighted by the engram profile (.5/.3/.2/0) or explicit weights. early_termination => true: only the memories scoring above min_score (Engram''s 0.8), at most k.';
