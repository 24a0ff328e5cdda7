-- Engram ranking (engram.md, Retrieval & Ranking):
--   score = w_rel·relevance + w_imp·decayed_importance + w_rec·recency + w_acc·access_frequency
--   relevance           cosine similarity (clipped to [0,1]) when both have embeddings,
--                       else Jaccard of tokens (Engram's keyword fallback)
--   decayed_importance  importance · e^(-ln2·age/30d) · (1 + log2(1+n)·0.1)
--   recency             max(0, 1 - age/90 days)
--   access_frequency    min(n/100, 1)
-- Default weights (profile engram): the design's Full Ranking Example, .5/.3/.2/0.

create or replace function pgmem.recall(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null,
  profile text default 'engram')
returns table (id bigint, score float8, relevance float8, decayed_importance float8, recency float8, access_frequency float8,
               content text, summary text, who text, category text, importance real, access_count integer, created_at timestamptz)
  language plpgsql stable security definer
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._require_tenant();
  v_profile pgmem.profiles := pgmem._profile(coalesce(profile, 'engram'), 'recall');
  v_w jsonb;
  v_tokens text[] := pgmem.tokens(coalesce(query_text, ''));
  v_n integer;
begin
  perform pgmem._check_between(k, 'k', 1, 1000);
  if (query_text is null or btrim(query_text) = '') and query_embedding is null then
    perform pgmem._bad_input('recall needs a query_text, a query_embedding, or both');
  end if;
  query_embedding := pgmem._check_embedding(query_embedding, 'query_embedding');
  v_w := pgmem.check_weights(coalesce(weights, v_profile.weights), array['relevance', 'importance', 'recency', 'access_frequency']);
  v_n := greatest(pgmem._setting_num('candidate_pool', 100)::int, k);
  perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
  perform set_config('hnsw.ef_search', least(1000, greatest(v_n, pgmem._setting_num('hnsw_ef_search', 100)::int))::text, true);  -- pgvector's maximum is 1000; iterative scan goes further
  return query execute format($q$
    with cand as (%1$s),
    s as (
      select m.*,
        case when $4 is not null and m.embedding is not null then pgmem.cosine_sim(m.embedding, $4)
             else pgmem.jaccard($7, pgmem.tokens(m.content)) end as rel,
        pgmem.decayed_importance(m.importance, m.created_at, m.access_count, $3, ($9->>'half_life_days')::float8) as imp,
        pgmem.linear_recency(m.created_at, $3, ($9->>'recency_window_days')::float8) as rec,
        pgmem.access_frequency(m.access_count, ($9->>'access_cap')::float8) as acc
      from cand join pgmem.memories m using (id))
    select s.id, ($8->>'relevance')::float8 * s.rel + ($8->>'importance')::float8 * s.imp
               + ($8->>'recency')::float8 * s.rec + ($8->>'access_frequency')::float8 * s.acc,
           s.rel, s.imp, s.rec, s.acc, s.content, s.summary, s.who, s.category, s.importance, s.access_count, s.created_at
    from s order by 2 desc, s.id limit $10 $q$, pgmem._candidates_sql(pgmem._filter_sql(filters)))
  using coalesce(filters, '{}'::jsonb), v_tenant, coalesce(as_of, now()), query_embedding,
        pgmem._candidate_tsquery(query_text, query_embedding), v_n, v_tokens,
        v_w, v_profile.params, k;
end $$;
comment on function pgmem.recall(text, vector, integer, jsonb, jsonb, timestamptz, text) is
  'Engram ranking: relevance (cosine, or token Jaccard without embeddings), decayed importance with access boost, linear 90-day recency and access frequency, weighted by the engram profile (.5/.3/.2/0) or explicit weights.';
