-- Built-in settings, categories and profiles: the defaults of the five source designs.
-- Settings and categories a user changed are kept (on conflict do nothing); built-in
-- profiles are reset to the specification on every upgrade (copy one to customise it).

insert into pgmem.settings (tenant, key, value, description) values
  -- engram.md, Surprise Detection: "Store if surprise >= threshold (default 0.15)"
  ('*', 'surprise_threshold', '0.15', 'remember() stores a memory when its surprise is at least this'),
  -- engram.md, Combine scores (step 5)
  ('*', 'surprise_weights', '{"semantic": 0.6, "keyword": 0.3, "rarity": 0.1}', 'surprise with an embedding'),
  ('*', 'surprise_weights_no_embedding', '{"keyword": 0.8, "rarity": 0.2}', 'surprise without an embedding'),
  ('*', 'surprise_lexical_pool', '20', 'keyword novelty compares with the gate_neighbours semantic neighbours, at most this many memories containing all the candidate''s lexemes, and this many most recent memories of the scope'),
  ('*', 'rarity_count_cap', '1024', 'category rarity counts at most this many memories (1/log2(2+n) barely moves past it)'),
  -- fragment-reconstructive-memory.md, Salience Formula
  ('*', 'salience_weights', '{"emotion": 0.35, "novelty": 0.30, "goal": 0.25, "depth": 0.10}', 'Fragment salience weights'),
  ('*', 'max_content_bytes', '262144', 'largest content a memory may have (bytes); PostgreSQL''s tsvector caps at 1 MB of lexemes'),
  ('*', 'enforce_tenants', 'false', 'when true, a tenant must be registered in pgmem.tenants before it can write'),
  ('*', 'hnsw_ef_search', '100', 'hnsw.ef_search used by pgmem''s index scans'),
  ('*', 'candidate_pool', '100', 'search(), activate(), recall(): candidates taken from each index branch (HNSW, lexical, recent) before fusion'),
  ('*', 'recent_window', '1', 'search(): a third candidate branch takes the HNSW top-N among the memories younger than this many recency half-lives (0 = off)'),
  ('*', 'lexical_probe_rows', '1000', 'the lexical candidates come from the query''s rarest lexemes whose estimated matches add up to at most this many rows (pgmem.lexical_probe); when every lexeme is more common, from the matches among this many newest memories; 0 = every lexeme'),
  -- security (issue 14): ceilings for the sessions of logins that are not pgmem_admin (015_limits.sql)
  ('*', 'max_statement_timeout_ms', '60000', 'sessions of pgmem_app and pgmem_reader logins must run with statement_timeout on and at most this (ms; 0 = no ceiling)'),
  ('*', 'max_idle_in_transaction_ms', '60000', 'sessions of pgmem_app and pgmem_reader logins must run with idle_in_transaction_session_timeout on and at most this (ms; 0 = no ceiling)')
on conflict (tenant, key) do nothing;
-- Read path (issue 14, per-call limits): what one call of search, search_exact, explain_search,
-- activate, recall, build_context or touch may ask for; beyond them, a clear error naming the setting.
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'max_query_chars', '4000', 'longest query_text a ranking accepts (characters); a question, not a document'),
  ('*', 'max_candidates', '10000', 'largest candidates => of search, and most ids in a filters.ids list'),
  ('*', 'touch_max_ids', '1000', 'most memory ids one touch() call records'),
  ('*', 'search_profile', '"pgmem"', 'the profile search() ranks with when the call names none (jam: JAM as written)'),
  -- issue 23 (the read path at the speed of its indexes; bench/README.md R4-R6)
  ('*', 'exact_scan_rows', '1000', 'search(), activate(), recall(): a tenant (or a filtered user) with at most this many active memories is scored exactly, every memory a candidate, instead of through the shared indexes'),
  ('*', 'superseded_factor', '0.5', 'search(), activate(), recall(): the share of its score a memory keeps when a newer active memory supersedes it (a supersedes binding; 1 = no effect; the filter current_only leaves it out)'),
  ('*', 'record_retrievals', 'true', 'search(), activate(), recall() append what they return to pgmem.access_log (folded by the job access into the access log: Fragment rehearsal, cluster energy); false: only uses are recorded'),
  ('*', 'exact_knn_factor', '200', 'search(), activate(), recall(): a tenant (or filtered user) of d memories takes its nearest exactly (b-tree on its vectors and a sort) instead of from the shared HNSW graph while d^2 < this x all indexed vectors (0 = never)'),
  ('*', 'recent_vectors_days', '30', 'pgmem.recent_vectors (the recent candidate branch''s own HNSW index) holds the memories created in the last this many days; an older recent window falls back to a filtered scan of the global index'),
  ('*', 'hnsw_max_scan_tuples', '10000', 'most index tuples a filtered (iterative) HNSW scan of search, activate or recall visits (pgvector hnsw.max_scan_tuples)'),
  -- web (issue 25): pgmem.health()
  ('*', 'worker_stall_seconds', '300', 'pgmem.health(): the embedding worker counts as stalled (status degraded) when a queued item has waited longer than this many seconds')
on conflict (tenant, key) do nothing;

-- Write-path limits and job locks (concern: write path and jobs, issue 14 "No time limits" and
-- "Job denial by advisory lock"): each limit is a clear 22023 error naming the setting.
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'max_batch_items', '1000', 'remember_many(): most items in one call (split larger batches; the client does)'),
  ('*', 'max_metadata_bytes', '65536', 'largest metadata object of a memory (bytes of its JSON text)'),
  ('*', 'max_summary_bytes', '16384', 'largest summary of a memory (bytes)'),
  ('*', 'max_field_bytes', '8192', 'largest 5W1H field (who, what, location, why, how) of a memory (bytes)'),
  ('*', 'max_id_bytes', '256', 'largest user_id, agent_id, session_id, event_key, embedding_model, topic or entity (bytes; they are indexed)'),
  ('*', 'max_tags', '256', 'most topics, and most entities, of one memory'),
  ('*', 'max_reason_bytes', '2048', 'largest reason given to forget, restore or update_memory (bytes)'),
  ('*', 'job_lock_timeout_ms', '30000', 'how long a job batch waits for another job that changes memories (merge, prune, archive, purge) before it is recorded as skipped'),
  ('*', 'merge_text_candidates', '200', 'merge_duplicates without embeddings: how many memories sharing words with one (most shared first) it compares by Jaccard')
on conflict (tenant, key) do nothing;

-- engram.md, Category Importance Weights
insert into pgmem.categories (tenant, category, weight, description) values
  ('*', 'fact', 0.8, 'factual information'),
  ('*', 'preference', 0.9, 'user preferences (most important)'),
  ('*', 'skill', 0.7, 'user skills and abilities'),
  ('*', 'episode', 0.6, 'past events and interactions'),
  ('*', 'context', 0.5, 'contextual information'),
  -- (issue 32) an agent loop's own turns: kept as conversation, stepped back in search
  ('*', 'question', 0.4, 'a question the user asked an agent (context_for): conversation, not a statement of fact'),
  ('*', 'answer', 0.5, 'an agent''s reply (observe_reply): what it told the user')
on conflict (tenant, category) do nothing;

insert into pgmem.profiles (tenant, name, method, weights, params, description, builtin) values
  -- jam-journalistic-agent-memory.md, Stage 2.3 Score Fusion (weights) and 2.2 (signals)
  ('*', 'jam', 'search',
   '{"semantic": 0.55, "lexical": 0.20, "recency": 0.10, "actor": 0.07, "spatial": 0.03, "usage": 0.05}',
   '{"recency_half_life_days": 30, "actor_mismatch": 0.3, "usage_half_life_days": 30, "lexical": "coverage"}',
   'JAM six-signal fusion, as the design states it', true),
  -- pgmem's default search (setting search_profile): JAM's signals and fusion, with what LoCoMo's
  -- dev conversations measured (bench/EVAL.md, issue 12; quality-recipe for the prototypes):
  --  * lexical: BM25 with the tenant's document frequencies (k1 1.2, b .4: short memories),
  --    divided by the best candidate's, instead of the share of the question's lexemes;
  --  * actor: with no actor given, the actors the question names (actor_from_text), at a
  --    weight that lets "what did Caroline research?" prefer Caroline's memories;
  --  * time: the question's time window (pgmem.time_window), a soft boost;
  --  * usage: log-scaled access counts (sql/202_signals.sql, _jam_usage);
  --  * session and neighbour: a memory is scored with the best of its session and of its
  --    neighbours (the previous and next turn: temporal links), since a turn is often
  --    answered by the next one.
  -- The weights are the prototype's 0.7 cos + 0.3 bm25 + 0.4 actor + 0.2 time, then
  -- + .26 session + .3 neighbour, on JAM's semantic (1 + cos)/2 (which doubles cosine's
  -- weight) and summed to 1. JAM's recency, usage and spatial keep a small weight. (params.recent_window
  -- 0 would switch the recent candidate branch off: 2x faster, overlap@10 with search_exact .93
  -- instead of .98 at 100,000; bench/README.md R2.)
  -- Round 3 (issue 29; bench/EVAL.md, "Round 3"): a context signal (the memory read with the
  -- turn before it, sql/202_signals.sql _jam_context), the second neighbour at .9 of its score
  -- (params.neighbour_far), and the weights re-fitted with them on the dev file (rounded):
  -- R@10 .806 -> .818 in the prototype.
  ('*', 'pgmem', 'search',
   '{"semantic": 0.27, "lexical": 0.06, "recency": 0.02, "actor": 0.10, "spatial": 0.01, "usage": 0.01,
     "time": 0.05, "session": 0.125, "neighbour": 0.195, "context": 0.16}',
   '{"recency_half_life_days": 30, "actor_mismatch": 0.3, "usage_half_life_days": 30, "lexical": "bm25",
     "bm25_k1": 1.2, "bm25_b": 0.4, "actor_from_text": true, "neighbour_links": ["temporal"],
     "neighbour_far": 0.9, "usage": "log"}',
   'pgmem''s default search: JAM''s signals with BM25, the actors a question names, its time window, and conversation context (session, neighbours); measured on LoCoMo', true),
  -- shadow-memory-system.md, Activation Score Formula and Default Thresholds by Context Type
  ('*', 'shadow', 'activate',
   '{"embedding": 0.6, "metadata": 0.2, "summary": 0.15, "temporal": 0.05}',
   '{"thresholds": {"query": 0.75, "task": 0.8, "conversation": 0.3, "document": 0.6, "mixed": 0.65},
     "temporal_half_life_days": 30}',
   'Shadow activation scoring (default for activate)', true),
  -- engram.md, Retrieval & Ranking (weights of the Full Ranking Example) and Memory Decay
  ('*', 'engram', 'recall',
   '{"relevance": 0.5, "importance": 0.3, "recency": 0.2, "access_frequency": 0.0}',
   '{"half_life_days": 30, "recency_window_days": 90, "access_cap": 100}',
   'Engram ranking (default for recall)', true)
on conflict (tenant, name) do update
  set method = excluded.method, weights = excluded.weights, params = excluded.params,
      description = excluded.description, updated_at = now()
  where pgmem.profiles.builtin;

-- Layered memory (issue 15; layered-memory-architecture.md). The design's constants, one
-- setting each; a tenant may override any of them.
insert into pgmem.settings (tenant, key, value, description) values
  -- "Topic Vector Rolling Average": TOPIC_DECAY_ALPHA
  ('*', 'topic_alpha', '0.2', 'EMA weight of the newest message in a conversation''s topic vector'),
  -- Step 4, TOPIC_CONTINUATION_THRESHOLD
  ('*', 'topic_gate_threshold', '0.35', 'a continuation whose cosine to the topic vector is below this is demoted to general'),
  -- Step 4c: THREAD_ATTACH_THRESHOLD, THREAD_MAX_ACTIVE, EMA alpha; "Topic Threading": THREAD_SUMMARY_INTERVAL
  ('*', 'thread_alpha', '0.3', 'EMA weight of the newest message in a thread centroid'),
  ('*', 'thread_attach_threshold', '"auto"', 'a message joins the nearest active thread when its cosine to the centroid is at least this: a number (the seed''s 0.55, set for another embedding model), or "auto": calibrated for the embedding model (pgmem.calibrate_thread_threshold)'),
  ('*', 'thread_max_active', '12', 'active threads per conversation; a new one archives the least recently used'),
  ('*', 'thread_enabled', 'true', 'THREAD_ENABLED (layered design): false skips step 4c of context_for (no thread is resolved, created or summarised)'),
  ('*', 'research_insights_enabled', 'true', 'RESEARCH_INSIGHTS_ENABLED (layered design): false skips step 4d of context_for (no research context is read, and the message''s insights and concepts are not stored)'),
  ('*', 'thread_summary_interval', '8', 'a thread is summarised when its message count reaches a multiple of this'),
  -- Step 6: RECENCY_WINDOW, SEMANTIC_K
  ('*', 'history_recency_window', '6', 'history pruning keeps the last this many messages'),
  ('*', 'history_semantic_k', '3', '...and this many older messages most similar to the query'),
  -- Step 4b: repetition is Jaccard >= 0.7
  ('*', 'repetition_jaccard', '0.7', 'a user message repeats an earlier one when the Jaccard similarity of their tokens is at least this'),
  -- "Research Memory": insights below this confidence are not stored
  ('*', 'insight_min_confidence', '0.6', 'insights (cue phrases or LLM) with a lower confidence are dropped'),
  ('*', 'qa_history_min_similarity', '0.5', 'Q&A history: earlier user questions at least this similar to the query are offered with their answers')

on conflict (tenant, key) do nothing;

-- Concept and liquid clusters (jam-journalistic-agent-memory.md; the cluster job, sql/470_cluster.sql)
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'cluster_k', '"adaptive"', 'concept clusters: "adaptive" = JAM''s min(max(8, n / 10), 64), or a number (JAM''s Clustering Parameters use 50)'),
  ('*', 'cluster_fit_sample', '20000', 'the k-means fit runs on at most this many memories; partial_fit then streams every memory'),
  ('*', 'cluster_initial_energy', '0.5', 'energy of a new cluster (liquid clusters; energy is in [0, 1])'),
  ('*', 'cluster_energy_spread', '0', 'JAM energy propagation through the cluster network: each liquid step, a cluster moves this share of its energy toward the centroid-cosine-weighted mean energy of the other active clusters (0: off)'),
  ('*', 'cluster_step_hours', '1', 'length of a liquid step: energy x .99 per step, one flow of memories per step'),
  ('*', 'cluster_temporal_half_life_hours', '24', 'liquid affinity: temporal proximity 2^(-|dt| / half-life) between two memories'' times'),
  -- (JAM gives no number. 0.15 = .3 x 1 x .5: the pull of a new cluster (energy .5) on a memory
  -- written at the same moment as its members but sharing nothing else with them, so time
  -- alone does not move a memory)
  ('*', 'cluster_flow_rate', '0.15', 'liquid flow: a memory moves to the cluster that pulls it hardest when that pull (mean affinity x energy) exceeds this'),
  ('*', 'cluster_merge_cosine', '0.85', 'clusters whose centroids have a cosine above this merge (JAM, Energy Dynamics)'),
  ('*', 'cluster_run_seconds', '300', 'a cluster run stops between two batches after this many seconds; the next run goes on where it stopped'),
  ('*', 'cluster_label_sample', '200', 'a cluster''s label and top terms come from at most this many of its members (the most recent)')
on conflict (tenant, key) do nothing;

-- The agent loop (issue 32): what context_for carries, and how the chat's own turns rank
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'conversation_factor', '0.5', 'search(): the share of its score a question or an answer an agent loop stored (context_for, observe_reply: category question or answer) keeps, so that the chat''s own turns do not outrank statements of fact; 1 when the question asks about the conversation ("what did you tell me about ...")'),
  ('*', 'context_memory_tokens', '1200', 'context_for: the token budget of the memories it carries at the standard behaviour (retrieval_depth 5; a mode of depth d gets d/5 of it): search''s ranking, in order, until the budget is spent'),
  ('*', 'thread_attach_threshold_cold', '0.25', 'the topic threads'' attach threshold while too few memories are embedded to calibrate it (thread_attach_threshold "auto": fewer than 30 pairs)'),
  ('*', 'context_memories_per_depth', '4', 'context_for: at most this many memories per unit of the behaviour''s retrieval_depth (standard 5: 20), or the k a caller gives')
on conflict (tenant, key) do nothing;

-- (issue 32) the seed's .55 was set for another embedding model: an install that still has it
-- as written takes the calibrated threshold
update pgmem.settings set value = '"auto"'
 where tenant = '*' and key = 'thread_attach_threshold' and value = '0.55'::jsonb;
