-- The read path, part 3: the signals of the three rankings, one function each, over a memory m
-- and the query record q (sql/200_query.sql). Plain SQL expressions without SET clauses: the
-- planner inlines them into the ranking statement, so they cost what the expression costs.
-- Each is in [0,1]; NULL when the query does not give what the signal needs.

-- ================================================================== JAM (search)
-- jam-journalistic-agent-memory.md, Retrieval Pipeline, Stage 2.2 (signals) and Time Decay Models.

create or replace function pgmem.path_overlap(a text, b text) returns float8
  language sql immutable parallel safe
  return case when octet_length(a) > 1048576 then pgmem._over_limit('a', octet_length(a), 1048576, null::float8, 'bytes')  -- issue 27
              when octet_length(b) > 1048576 then pgmem._over_limit('b', octet_length(b), 1048576, null::float8, 'bytes')
              when a is null or b is null then 0 else coalesce((
    select count(*)::float8 / greatest(
             (select count(*) from regexp_split_to_table(a, '/') x where x <> ''),
             (select count(*) from regexp_split_to_table(b, '/') y where y <> ''), 1)
      from (select x from regexp_split_to_table(a, '/') x where x <> ''
            intersect
            select y from regexp_split_to_table(b, '/') y where y <> '') c), 0) end;
comment on function pgmem.path_overlap(text, text) is
  'JAM spatial proximity: shared path components / max(component counts), splitting on "/" (empty components dropped). 0 when either is NULL.';

-- semantic = 1 - cosine_distance / 2 = (1 + cos) / 2   (JAM Stage 2.2: "similarity = 1 - distance/2")
-- NULL for a memory not embedded yet: a signal the memory does not have is treated like one
-- the query does not have (its weight is shared out over the others, sql/205_search.sql),
-- not as 0, which ranked it below unrelated memories (cosine 0 scores .5; issue 14).
-- The memory's vector comes from pgmem.memory_vectors (p_indexed; inline in its row) when it is
-- there, else from memories.embedding (a memory not indexed yet, or not active): memories keeps its
-- vectors out of line (TOAST), and reading one there cost 17 us a candidate at 1,000,000 memories,
-- one memory_vectors row by its key 6 us (bench/README.md R6). The two are the same vector
-- (sql/040's triggers keep memory_vectors in step).
create or replace function pgmem._jam_semantic(m pgmem.memories, p_indexed vector, q pgmem.query) returns float8
  language sql immutable parallel safe
  return 1 - (coalesce(p_indexed, m.embedding) operator(public.<=>) q.embedding) / 2;

-- context (issue 29; pgmem's, none of the designs has it): the semantic signal of a memory read
-- together with the turn before it in its session (its temporal binding's src), i.e. of the sum
-- of the two vectors: "I've had them for 3 years now" answers "How long have you had the
-- turtles?" asked just before it, and alone shares no meaning with "how long has Nate had his
-- turtles?". Cosine distance normalises the sum, so this is the cosine of the question to the
-- two turns' mean direction, on the scale of _jam_semantic. A memory without a previous turn
-- among the candidates gets its own semantic signal. (On LoCoMo's dev file a second embedding
-- of "previous turn + turn" measured R@10 +.005 at weight .2 of the fusion, this sum of stored
-- vectors the same, without a second vector per memory; bench/EVAL.md, round 3.)
create or replace function pgmem._jam_context(p_vec vector, p_prev vector, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when p_vec is null then null
              when p_prev is null then 1 - (p_vec operator(public.<=>) q.embedding) / 2
              else 1 - ((p_vec operator(public.+) p_prev) operator(public.<=>) q.embedding) / 2 end;
comment on function pgmem._jam_context(vector, vector, pgmem.query) is
  'search''s context signal: (1 + cos(question, memory vector + its previous turn''s vector)) / 2; the memory''s own semantic signal when it has no previous turn. NULL without a vector.';

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

-- lexical (profile param lexical = bm25; the default profile pgmem): Okapi BM25 with the
-- tenant's document frequencies (issue 12, item 3; pgmem.lexicon, idf in the query record):
--   Σ_{t in q, t in m} idf(t) · (k1 + 1) / (1 + k1 · (1 - b + b · |m| / avg|m|))
-- with a term's frequency counted as 1 (memories are short: a turn, a fact; the tsvector keeps
-- lexemes, and their positions would cost a scan of each) and |m| the memory's distinct
-- lexemes. The ranking statement divides it by the largest among the candidates (on LoCoMo's
-- dev file this normalisation fused best: R@10 .691, against .614-.664 for absolute or
-- saturated forms; quality-recipe).
-- The sum is written out over the query's 16 rarest lexemes (q.terms and q.idf are ordered by
-- idf, rarest first; a question's further lexemes are its most common ones and add least):
-- a sum over unnest() would be a subquery, which keeps the function from being inlined, and a
-- SQL function called per row cost ~0.2 ms a row (measured on LoCoMo's tenants), over 5,000
-- lexical candidates a second. Written out, the planner folds each q.terms[i] to a constant.
create or replace function pgmem._jam_bm25(p_tsv tsvector, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.tsq is null then null else
    (
        case when p_tsv @@ q.terms[1] then q.idf[1] else 0 end
      + case when p_tsv @@ q.terms[2] then q.idf[2] else 0 end
      + case when p_tsv @@ q.terms[3] then q.idf[3] else 0 end
      + case when p_tsv @@ q.terms[4] then q.idf[4] else 0 end
      + case when p_tsv @@ q.terms[5] then q.idf[5] else 0 end
      + case when p_tsv @@ q.terms[6] then q.idf[6] else 0 end
      + case when p_tsv @@ q.terms[7] then q.idf[7] else 0 end
      + case when p_tsv @@ q.terms[8] then q.idf[8] else 0 end
      + case when p_tsv @@ q.terms[9] then q.idf[9] else 0 end
      + case when p_tsv @@ q.terms[10] then q.idf[10] else 0 end
      + case when p_tsv @@ q.terms[11] then q.idf[11] else 0 end
      + case when p_tsv @@ q.terms[12] then q.idf[12] else 0 end
      + case when p_tsv @@ q.terms[13] then q.idf[13] else 0 end
      + case when p_tsv @@ q.terms[14] then q.idf[14] else 0 end
      + case when p_tsv @@ q.terms[15] then q.idf[15] else 0 end
      + case when p_tsv @@ q.terms[16] then q.idf[16] else 0 end
    ) * (q.bm25_k1 + 1) / (1 + q.bm25_k1 * (1 - q.bm25_b + q.bm25_b * length(p_tsv) / greatest(q.avg_len, 1))) end;

-- The lexical signal before its normalisation over the candidates (coverage is absolute).
create or replace function pgmem._jam_lexical(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case q.lexical_mode when 'bm25' then pgmem._jam_bm25(m.tsv, q)
                             when 'rank' then pgmem._jam_lexical_rank(m, q)
                             else pgmem._jam_coverage(m, q) end;

-- The time of a memory's event: when it happened (the 5W1H "when") if known, else when it was
-- recorded (issue 12, item 5).
create or replace function pgmem.event_time(m pgmem.memories) returns timestamptz
  language sql immutable parallel safe
  return coalesce(m.happened_at, m.created_at);
comment on function pgmem.event_time(pgmem.memories) is
  'When a memory''s event happened: happened_at (the 5W1H "when") if known, else created_at. Recency, decay and the time window of search read it.';

-- recency = e^(-ln2 · age / half-life), half-life 30 days, age of the event   (JAM Time Decay Models: exponential)
-- JAM's two time-decay models (Time Decay Models): exponential, e^(-ln2·t/half_life) (the
-- default), or with the profile's params.decay = 'power' the power law 1/(1+t)^α, α =
-- params.decay_alpha (1.5) for long-term retention. (The test of a text field per candidate is
-- ~.1 us; the record has no field of its own for it.)
create or replace function pgmem._jam_recency(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.params->>'decay' = 'power'
              then pgmem.power_law_decay(pgmem.age_days(pgmem.event_time(m), q.as_of),
                                         coalesce((q.params->>'decay_alpha')::float8, 1.5))
              else pgmem.exp_decay(pgmem.age_days(pgmem.event_time(m), q.as_of), q.half_life) end;

-- actor = 1.0 when the memory's who is the asking actor, else 0.3   (JAM Stage 2.2: actor relevance)
-- With no actor given, a profile with params.actor_from_text takes the actors the question
-- names (q.actors, pgmem.query_actors): "What did Caroline research?" is about Caroline's
-- memories. On LoCoMo's dev file, weight .4 of that signal (with names out of the query's
-- embedding) took R@10 from .781 to .812 (quality-recipe, 05:25Z).
create or replace function pgmem._jam_actor(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.actor is not null then case when m.who = q.actor then 1.0 else q.actor_mismatch end
              when q.actors is not null then case when m.who = any(q.actors) then 1.0 else q.actor_mismatch end end;

-- time = 1 when the memory's event falls in the question's time window, else halving every
-- time_tau days away from it (pgmem.time_window; for a month of any year, the distance in
-- months · 30 days). NULL when the question names no time.   (issue 12, item 5: a soft window,
-- a boost, never a filter)
create or replace function pgmem._jam_time(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.time_tau is null then null
              when q.time_month is not null then
                pgmem.exp_decay(30 * least(abs(extract(month from pgmem.event_time(m) at time zone 'UTC')::int - q.time_month),
                                           12 - abs(extract(month from pgmem.event_time(m) at time zone 'UTC')::int - q.time_month)), q.time_tau)
              else pgmem.exp_decay(greatest(date_part('epoch', q.time_from - pgmem.event_time(m)),
                                            date_part('epoch', pgmem.event_time(m) - q.time_to), 0::float8) / 86400.0::float8,
                                   q.time_tau) end;

-- spatial = shared path components / max(component counts)   (JAM Stage 2.2: spatial proximity)
create or replace function pgmem._jam_spatial(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.location is null then null else pgmem.path_overlap(m.location, q.location) end;

-- usage = access_count / the tenant's largest access_count × e^(-ln2 · days since last access / 30)
-- (JAM Stage 2.2: usage patterns: what JAM says, and the jam profile does). With params.usage =
-- "log" (the pgmem profile) the count is log-scaled, ln(1 + count) / ln(1 + largest): JAM's
-- linear share gives one memory touched 5,000 times 1 and every memory touched 50 times .01, so
-- usage only ever tells the single most used memory apart (the bench's Pareto access counts);
-- log-scaled, 50 of 5,000 is .46 (issue 12, item 4).
create or replace function pgmem._jam_usage(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return case when q.max_access > 0
              then case when q.usage_log then ln(1.0::float8 + m.access_count) / ln(1.0::float8 + q.max_access)
                        else least(1.0, m.access_count::float8 / q.max_access) end
                   * pgmem.exp_decay(pgmem.age_days(coalesce(m.last_accessed_at, m.created_at), q.as_of), q.usage_half_life)
              else 0 end;

-- The summed weights of the signals a memory has (not NULL): the fused score's denominator.
-- 1 for a memory with every signal the query has; less for one that lacks some (no embedding
-- yet, no session, no neighbour), whose other weights are then rescaled to sum 1.
create or replace function pgmem._jam_present(q pgmem.query, p_semantic float8, p_lexical float8, p_recency float8,
                                              p_actor float8, p_spatial float8, p_usage float8, p_time float8,
                                              p_session float8, p_neighbour float8) returns float8
  language sql immutable parallel safe
  return case when p_semantic is null then 0 else q.w_semantic end + case when p_lexical is null then 0 else q.w_lexical end
       + case when p_recency is null then 0 else q.w_recency end + case when p_actor is null then 0 else q.w_actor end
       + case when p_spatial is null then 0 else q.w_spatial end + case when p_usage is null then 0 else q.w_usage end
       + case when p_time is null then 0 else q.w_time end + case when p_session is null then 0 else q.w_session end
       + case when p_neighbour is null then 0 else q.w_neighbour end;

-- The order of search's lexical candidates: the fused score without the signals that are
-- costly here or need the other candidates (semantic, spatial, session, neighbour), i.e. the
-- lexical signal with recency, actor, usage and time at their weights. Among the lexical probe's
-- matches many memories share the best lexical score (at 1,000,000 in the benchmark, thousands
-- hold every lexeme of a templated question) and the other signals rank them; ordering by the
-- lexical score alone kept the wrong ones (bench/README.md L12; and R5: with BM25 alone, "what is
-- on the calendar with Nadia this week" lost the memories of this week, and "how experienced is
-- Fatima with German" Fatima's, to older or other speakers' ones with the same words:
-- overlap@10 .92 -> see R5). With lexical = bm25 the BM25 sum is divided by q.bm25_norm, the
-- score of a memory of average length holding every term, so that it weighs what it weighs in
-- the fused score (where it is divided by the best candidate's). The semantic signal is left
-- to the HNSW branches (computing it here means reading every match's vector: 60-80 ms for
-- 10,000 matches at 1,000,000); path_overlap is the one expensive expression and weighs .01-.03.
create or replace function pgmem._jam_prior(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return coalesce(q.w_lexical * case when q.lexical_mode = 'bm25' then pgmem._jam_bm25(m.tsv, q) / nullif(q.bm25_norm, 0)
                                     else pgmem._jam_coverage(m, q) end, 0)
       + coalesce(q.w_recency * pgmem._jam_recency(m, q), 0)
       + coalesce(q.w_actor * pgmem._jam_actor(m, q), 0) + coalesce(q.w_usage * pgmem._jam_usage(m, q), 0)
       + coalesce(q.w_time * pgmem._jam_time(m, q), 0);

-- ================================================================== current beats stale
-- Issue 24: a memory that a newer active memory supersedes (a `supersedes` binding: src = newer,
-- dst = older; written when a profile fact replaces another, sql/610_profile_facts.sql, and for a
-- restatement with other numbers, sql/130_bindings.sql) is lowered in every ranking: its score is
-- multiplied by the setting superseded_factor (.5), a step, not a signal, so that the designs'
-- weights stay as they are and a memory nothing supersedes scores exactly what it did. The filter
-- current_only leaves such memories out. (pgmem's choice: none of the five designs ranks by it;
-- "which editor does maya use now" put "My editor is VS Code" first and the Neovim turn below the
-- top 5 before it.)
-- The candidates of a call that a newer active memory supersedes (one look-up of the bindings for
-- all of them, before the ranking statement).
create or replace function pgmem._superseded(p_ids bigint[], p_tenant text, p_as_of timestamptz) returns bigint[]
  language sql stable parallel safe
  return array(select distinct l.dst_id from pgmem.links l join pgmem.memories s on s.id = l.src_id
                where l.dst_id = any(p_ids) and l.kind = 'supersedes' and l.tenant = p_tenant and s.state = 'active'
                  and s.created_at <= p_as_of);
comment on function pgmem._superseded(bigint[], text, timestamptz) is
  'Which of the given memories a newer active memory (one that existed at as_of) supersedes (a supersedes binding to them).';

-- ================================================================== Shadow (activate)
-- shadow-memory-system.md, MemoryAwarenessInterface / SimilarityEngine.

-- embedding: cosine similarity clipped to [0,1]; NULL when either side has no vector (the
-- activation then shares its weight out over the other three, sql/220_activate.sql)
create or replace function pgmem._shadow_embedding(m pgmem.memories, q pgmem.query) returns float8
  language sql immutable parallel safe
  return pgmem.cosine_sim(m.embedding, q.embedding);

-- metadata and summary are Jaccard similarities of two sets: the query's (keys or tokens,
-- distinct by construction) and the memory's (its topics ∪ entities lower-cased; the tokens of
-- its summary, or content when it has none). The activate statement counts, for each candidate,
-- the memory's distinct items and how many of them the query has (pgmem._shared_items, a
-- lateral subquery the planner inlines), and pgmem._shadow_jaccard divides:
--   |A ∩ B| / |A ∪ B|,  |A ∪ B| = |A| + |B| - |A ∩ B|,  0 when both are empty
-- (pgmem.jaccard(q.tokens, pgmem.tokens(...)) per row, two SQL function calls with set
-- operations each, cost 30 us a memory: 26 ms of activate's 27 over 200 candidates; R6.)
create or replace function pgmem._shared_items(p_items text[], p_keys text[])
returns table (shared bigint, items bigint)
  language sql immutable parallel safe
begin atomic
  select count(distinct x) filter (where x = any(p_keys)), count(distinct x) from unnest(p_items) x where x <> '';
end;
comment on function pgmem._shared_items(text[], text[]) is
  'How many distinct non-empty items an array has, and how many of them are among p_keys: the counts of a Jaccard similarity (inlined as a lateral subquery).';

-- the memory's tokens (pgmem.tokens' split, without its sort: the counts need none)
create or replace function pgmem._token_items(p_text text) returns text[]
  language sql immutable parallel safe
  return regexp_split_to_array(lower(p_text), '[^[:alnum:]]+');

-- the memory's topics ∪ entities, lower-cased
create or replace function pgmem._tag_items(m pgmem.memories) returns text[]
  language sql immutable parallel safe
  return string_to_array(lower(array_to_string(m.topics || m.entities, chr(31))), chr(31));

create or replace function pgmem._shadow_jaccard(p_shared bigint, p_items bigint, p_keys text[]) returns float8
  language sql immutable parallel safe
  return case when p_items + coalesce(cardinality(p_keys), 0) = 0 then 0
              else p_shared::float8 / (p_items + coalesce(cardinality(p_keys), 0) - p_shared) end;

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
