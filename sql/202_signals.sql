-- The read path, part 3: the signals of the three rankings, one function each, over a memory m
-- and the query record q (sql/200_query.sql). Plain SQL expressions without SET clauses: the
-- planner inlines them into the ranking statement, so they cost what the expression costs.
-- Each is in [0,1]; NULL when the query does not give what the signal needs.

-- ================================================================== JAM (search)
-- jam-journalistic-agent-memory.md, Retrieval Pipeline, Stage 2.2 (signals) and Time Decay Models.

create or replace function pgmem.path_overlap(a text, b text) returns float8
  language sql immutable parallel safe
  return case when a is null or b is null then 0 else coalesce((
    select count(*)::float8 / greatest(
             (select count(*) from regexp_split_to_table(a, '/') x where x <> ''),
             (select count(*) from regexp_split_to_table(b, '/') y where y <> ''), 1)
      from (select x from regexp_split_to_table(a, '/') x where x <> ''
            intersect
            select y from regexp_split_to_table(b, '/') y where y <> '') c), 0) end;
comment on function pgmem.path_overlap(text, text) is
  'JAM spatial proximity: shared path components / max(component counts), splitting on "/" (empty components dropped). 0 when either is NULL.';

-- semantic = 1 - cosine_distance / 2 = (1 + cos) / 2   (JAM Stage 2.2: "similarity = 1 - distance/2")
create or replace function pgmem._jam_semantic(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.embedding is null then null
              else coalesce(1 - (m.embedding operator(public.<=>) q.embedding) / 2, 0) end;

-- lexical (profile param lexical = coverage, the default): the share of the query's lexemes the
-- memory contains. JAM asks for "a normalised full-text score"; an absolute share keeps a
-- one-word match of a long question low (bench/EVAL.md). The lexemes the memory contains are
-- those ts_delete removes from its tsvector (an expression without a subquery: inlinable).
create or replace function pgmem._jam_coverage(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.tsq is null then null
              else (length(m.tsv) - length(ts_delete(m.tsv, q.lexemes)))::float8 / greatest(cardinality(q.lexemes), 1) end;

-- lexical (profile param lexical = rank): JAM's literal reading, ts_rank; the ranking statement
-- divides it by the largest ts_rank among the candidates.
create or replace function pgmem._jam_lexical_rank(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.tsq is null then null
              when m.tsv @@ q.tsq then ts_rank(m.tsv, q.tsq, 1)::float8 else 0 end;

-- recency = e^(-ln2 · age / half-life), half-life 30 days   (JAM Time Decay Models: exponential)
create or replace function pgmem._jam_recency(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return pgmem.exp_decay(pgmem.age_days(m.created_at, q.as_of), q.half_life);

-- actor = 1.0 when the memory's who is the asking actor, else 0.3   (JAM Stage 2.2: actor relevance)
create or replace function pgmem._jam_actor(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.actor is null then null when m.who = q.actor then 1.0 else q.actor_mismatch end;

-- spatial = shared path components / max(component counts)   (JAM Stage 2.2: spatial proximity)
create or replace function pgmem._jam_spatial(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.location is null then null else pgmem.path_overlap(m.location, q.location) end;

-- usage = access_count / the tenant's largest access_count × e^(-ln2 · days since last access / 30)
-- (JAM Stage 2.2: usage patterns)
create or replace function pgmem._jam_usage(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.max_access > 0
              then least(1.0, m.access_count::float8 / q.max_access)
                   * pgmem.exp_decay(pgmem.age_days(coalesce(m.last_accessed_at, m.created_at), q.as_of), q.usage_half_life)
              else 0 end;

-- The order of search's lexical candidates: the fused score without the semantic and the
-- spatial signals. Among the lexical probe's matches many memories share the best coverage (at
-- 1,000,000 in the benchmark, thousands hold every lexeme of a templated question) and the
-- other signals rank them; ordering by coverage and ts_rank alone kept the wrong ones. The
-- semantic signal is left to the two HNSW branches (computing it here means reading every
-- match's vector: 60-80 ms for 10,000 matches at 1,000,000); path_overlap is the one expensive
-- expression and weighs .03. Figures: bench/README.md L12.
create or replace function pgmem._jam_prior(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return coalesce(q.w_lexical * pgmem._jam_coverage(m, q), 0) + coalesce(q.w_recency * pgmem._jam_recency(m, q), 0)
       + coalesce(q.w_actor * pgmem._jam_actor(m, q), 0) + coalesce(q.w_usage * pgmem._jam_usage(m, q), 0);

-- ================================================================== Shadow (activate)
-- shadow-memory-system.md, MemoryAwarenessInterface / SimilarityEngine.

-- embedding: cosine similarity clipped to [0,1]; 0 when either side has no vector
create or replace function pgmem._shadow_embedding(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.embedding is null or m.embedding is null then 0 else pgmem.cosine_sim(m.embedding, q.embedding) end;

-- metadata: Jaccard of the query's keys (topics ∪ entities, or its tokens) with the memory's
-- topics ∪ entities, lower-cased
create or replace function pgmem._shadow_metadata(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return pgmem.jaccard(q.keys, array(select distinct lower(x) from unnest(m.topics || m.entities) x));

-- summary: Jaccard of the query summary's (or text's) tokens with the memory's summary (or
-- content when it has none)
create or replace function pgmem._shadow_summary(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return pgmem.jaccard(q.tokens, pgmem.tokens(coalesce(m.summary, m.content)));

-- temporal: e^(-ln2 · age / 30 days)
create or replace function pgmem._shadow_temporal(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return pgmem.exp_decay(pgmem.age_days(m.created_at, q.as_of), q.half_life);

-- ================================================================== Engram (recall)
-- engram.md, Retrieval & Ranking and Memory Decay.

-- relevance: cosine similarity (clipped to [0,1]) when both have embeddings, else Jaccard of
-- tokens (Engram's keyword fallback)
create or replace function pgmem._engram_relevance(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.embedding is not null and m.embedding is not null then pgmem.cosine_sim(m.embedding, q.embedding)
              else pgmem.jaccard(q.tokens, pgmem.tokens(m.content)) end;

-- decayed importance: importance · e^(-ln2 · age / 30 d) · (1 + log2(1 + accesses) · 0.1)
create or replace function pgmem._engram_importance(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return pgmem.decayed_importance(m.importance, m.created_at, m.access_count, q.as_of, q.half_life);

-- recency: max(0, 1 - age / 90 days)
create or replace function pgmem._engram_recency(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return pgmem.linear_recency(m.created_at, q.as_of, q.recency_window);

-- access frequency: min(accesses / 100, 1)
create or replace function pgmem._engram_access(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return pgmem.access_frequency(m.access_count, q.access_cap);
