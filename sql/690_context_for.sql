-- One call for the memory half of the pipeline (layered-memory-architecture.md, "The
-- Pipeline (12 Steps)", steps 3 to 7, and step 11's memory writes for the user message):
--
--   classify (3) -> topic gate (4) -> remember the message (tier A) -> state update (4b:
--   observe_turn, behaviour) -> thread (4c) -> research context (4d) -> policy (5) ->
--   history pruning (6: the last 6 messages + the 3 older ones most similar to the query,
--   deduplicated) -> selective retrieval (7: pgmem.search and the knowledge-base documents'
--   chunks, pgmem.search_documents, when inject_rag; Q&A history, profile, privacy frame)
--
-- The result is one JSON document: "stages", each stage's result in pipeline order (the
-- "classified" and "retrieved" entries are the annotations a server streams before the
-- first token, in the design's format), and "context", what was selected for the prompt.
-- Steps 9 and 10 (generation) are the application's; pgmem.observe_reply records the answer.

-- The privacy frame: what is stored about a user, tier by tier (the privacy intent's context).
create or replace function pgmem.user_data_summary(user_id text) returns jsonb
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  with t as (select pgmem._require_tenant() as tenant
              where pgmem._check_args('user_data_summary', jsonb_build_object('user_id', user_data_summary.user_id)))  -- sizes first (issue 27)
  select jsonb_build_object(
    'tenant', t.tenant,
    'user_id', user_data_summary.user_id,
    'tiers', jsonb_build_object(
      'episodic', (select jsonb_build_object('table', 'pgmem.memories', 'memories', count(*),
                     'active', count(*) filter (where m.state = 'active'),
                     'by_category', coalesce((select jsonb_object_agg(x.category, x.n) from (select m2.category, count(*) as n
                        from pgmem.memories m2 where m2.tenant = t.tenant and m2.user_id = user_data_summary.user_id
                        group by m2.category) x), '{}'),
                     'first_at', min(m.created_at), 'last_at', max(m.created_at))
                     from pgmem.memories m where m.tenant = t.tenant and m.user_id = user_data_summary.user_id),
      'semantic', jsonb_build_object('table', 'pgmem.profile_facts',
                     'current', coalesce((select jsonb_object_agg(p.key, p.value order by p.key)
                                            from pgmem.profile(user_data_summary.user_id) p), '{}'),
                     'rows', (select count(*) from pgmem.profile_facts f where f.tenant = t.tenant and f.user_id = user_data_summary.user_id),
                     'superseded_rows', (select count(*) from pgmem.profile_facts f where f.tenant = t.tenant
                                           and f.user_id = user_data_summary.user_id and f.recorded_to is not null)),
      'conversational', jsonb_build_object('table', 'pgmem.conversations, pgmem.messages',
                     'conversations', (select count(*) from pgmem.conversations c where c.tenant = t.tenant and c.user_id = user_data_summary.user_id),
                     'messages', (select count(*) from pgmem.messages ms join pgmem.conversations c
                                    on c.tenant = ms.tenant and c.conversation_id = ms.conversation_id
                                   where c.tenant = t.tenant and c.user_id = user_data_summary.user_id),
                     'states', coalesce((select jsonb_agg(jsonb_build_object('conversation_id', c.conversation_id,
                                   'message_count', c.message_count, 'emotional_tone', c.emotional_tone,
                                   'interaction_pattern', c.interaction_pattern, 'last_update', c.last_update)
                                   order by c.last_update desc nulls last)
                                  from pgmem.conversations c where c.tenant = t.tenant and c.user_id = user_data_summary.user_id), '[]')),
      'threads', jsonb_build_object('table', 'pgmem.threads',
                     'threads', (select count(*) from pgmem.threads h where h.tenant = t.tenant and h.user_id = user_data_summary.user_id),
                     'labels', coalesce((select jsonb_agg(h.label order by h.last_message_at desc) from pgmem.threads h
                                          where h.tenant = t.tenant and h.user_id = user_data_summary.user_id and h.label is not null), '[]')),
      'research', jsonb_build_object('table', 'pgmem.insights, pgmem.concept_mentions',
                     'insights', coalesce((select jsonb_object_agg(x.type, x.n) from (select i.type, count(*) as n from pgmem.insights i
                                            where i.tenant = t.tenant and i.user_id = user_data_summary.user_id group by i.type) x), '{}'),
                     'concepts', (select count(distinct cm.concept) from pgmem.concept_mentions cm
                                   where cm.tenant = t.tenant and cm.user_id = user_data_summary.user_id)),
      'intent_cache', jsonb_build_object('table', 'pgmem.intent_cache',
                     'entries', (select count(*) from pgmem.intent_cache ic where ic.tenant = t.tenant and ic.user_id = user_data_summary.user_id))),
    'rights', jsonb_build_object(
      'export', format('select pgmem.export_user(%L)', user_data_summary.user_id),
      'erase', format('select * from pgmem.erase_user(%L)', user_data_summary.user_id),
      'note', 'erase_user deletes every tier for good and leaves content-free tombstones in history'))
  from t
$$;
comment on function pgmem.user_data_summary(text) is
  'What is stored about a user, tier by tier (episodic memories, profile facts, conversations and messages, threads, insights and concepts, cached intents), with how to export and erase it: the privacy intent''s context.';

create or replace function pgmem.context_for(
  query_text text,
  query_embedding vector default null,
  conversation_id text default null,
  user_id text default null,
  k integer default null,
  remember boolean default true,
  filters jsonb default null,
  search_profile text default null,  -- the tenant's (setting search_profile), as search()
  created_at timestamptz default null)
returns jsonb
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
  -- (the messages' HNSW index, 0019: a filtered scan goes on until the filter is met, in order)
  set hnsw.iterative_scan = strict_order
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_emb public.vector := pgmem._check_embedding(query_embedding, 'query embedding');
  v_conv pgmem.conversations;
  v_user text;
  c record;
  v_intent text;
  v_gate jsonb;
  v_sim float8;
  r pgmem.remember_result;
  v_memory_id bigint;
  o jsonb;
  v_seq int;
  v_msg bigint;
  t record;
  v_thread jsonb;
  v_own jsonb;
  v_research jsonb;
  v_policy jsonb;
  v_behaviour jsonb;
  v_depth int;
  v_recent int := pgmem._setting_num('history_recency_window', 6)::int;
  v_semk int := pgmem._setting_num('history_semantic_k', 3)::int;
  v_history jsonb;
  v_memories jsonb := '[]'::jsonb;
  v_candidates jsonb := '[]'::jsonb;  -- (issue 32) the next best the budget left out: shown, not carried
  v_documents jsonb := '[]'::jsonb;  -- knowledge-base excerpts (issue 24, 680_documents.sql)
  v_qa jsonb := '[]'::jsonb;
  v_profile jsonb;
  v_privacy jsonb;
  v_filters jsonb;
  v_kind text;         -- (issue 32) the message's kind: question, fact or episode (a statement)
  v_skipped text;      -- why the message was not remembered: greeting, empty, filler
  v_smalltalk text;    -- greeting, empty or filler: conversation, not a memory nor a topic
  v_words int;         -- how many words of its own the message has (lexemes, stop words left out)
  v_max int;
  v_budget int;
  v_exclude bigint[];
  v_sources jsonb;     -- a profile question: the turn that stated each fact
begin
  perform pgmem._check_args('context_for', jsonb_build_object('query_text', query_text, 'conversation_id', conversation_id, 'user_id', user_id, 'filters', filters, 'search_profile', search_profile));  -- sizes first (issue 27)
  if query_text is null or query_text !~ '\S' then
    perform pgmem._bad_input('context_for needs the user''s message (query_text)');
  end if;
  if conversation_id is null then
    perform pgmem._bad_input('context_for needs a conversation_id: conversation state, threads and history belong to a conversation',
      'one id per chat session, e.g. the session id your application already has');
  end if;
  if k is not null then
    perform pgmem._check_between(k, 'k', 0, 100);
  end if;
  -- Locks, in one order for every call on a conversation (issue 27, M3): the conversation row
  -- first (created here when it is new), then the user's write lock (remember), then what
  -- hangs off the conversation (messages, threads). observe_reply takes them in the same
  -- order; before, this function took the write lock first and the conversation second
  -- (observe_turn), and 4 workers on one conversation deadlocked in 140 of 400 calls.
  v_conv := pgmem._conversation(v_tenant, context_for.conversation_id, user_id, created_at);
  v_user := coalesce(user_id, v_conv.user_id);

  -- step 3: classify
  select * into c from pgmem.classify_intent(query_text, conversation_id);
  v_intent := c.intent;

  -- the message's own words (its lexemes less stop words): the topic gate and the policy read it
  v_words := cardinality(tsvector_to_array(to_tsvector('english', query_text)));

  -- step 4: topic gate, for continuations only: cos(query, topic vector) < .35 -> general
  -- (issue 32: a continuation with no content of its own, "Tell me more about it", "and then?",
  -- is near no topic by its embedding: the gate judges only a message with at least two words
  -- of its own, else it stays a continuation and joins the current thread)
  if v_intent = 'continuation' and v_emb is not null and v_conv.topic_vector is not null
     and v_words >= 2 then
    v_sim := pgmem._cos(v_emb, v_conv.topic_vector);
    if v_sim < pgmem._setting_num('topic_gate_threshold', 0.35) then
      v_intent := 'general';
    end if;
    v_gate := jsonb_build_object('stage', 'topic_gate', 'applied', true, 'similarity', round(v_sim::numeric, 4),
                                 'threshold', pgmem._setting_num('topic_gate_threshold', 0.35), 'demoted', v_intent <> c.intent);
  else
    v_gate := jsonb_build_object('stage', 'topic_gate', 'applied', false, 'reason',
                                 case when v_intent <> 'continuation' then 'not a continuation'
                                      when v_emb is null then 'no query embedding'
                                      when v_conv.topic_vector is null then 'the conversation has no topic yet'
                                      else 'a continuation with no words of its own' end);
  end if;

  -- tier A: the message is an episodic memory; a profile statement's facts travel with it
  -- (pgmem.memories_profile_facts / history_repeated_facts apply them, whatever the gate decides).
  -- Issue 32: a greeting or a filler ("Hi again!", "ok thanks") is conversation, not a memory
  -- (it stays a message of the conversation); a question is stored as one (category
  -- question), which search steps back (conversation_factor) and context_for's retrieval
  -- leaves out, so that the chat's own questions never echo back as memories.
  -- (a question that also states something, "I'm vegan, what can I cook?", is a question: its
  -- facts still reach the profile, through its metadata)
  v_kind := case when pgmem._is_question(query_text) then 'question'
                 when jsonb_array_length(c.facts) > 0 then 'fact' else 'episode' end;
  v_smalltalk := case when jsonb_array_length(c.facts) > 0 then null
                      when c.rule = 'greeting' then 'greeting' when c.rule = 'empty' then 'empty'
                      when pgmem._is_filler(query_text) then 'filler' end;
  if remember and v_smalltalk is not null then
    v_skipped := v_smalltalk;
  elsif remember then
    select * into r from pgmem.remember(content => query_text, embedding => v_emb, who => 'user', user_id => v_user,
      session_id => context_for.conversation_id, created_at => created_at, category => v_kind,
      metadata => case when jsonb_array_length(c.facts) > 0
                       then jsonb_build_object('facts', c.facts, 'extracted_by', 'heuristic') else '{}' end);
    v_memory_id := case when r.decision in ('stored', 'duplicate', 'replayed') then r.memory_id end;
  elsif jsonb_array_length(c.facts) > 0 and v_user is not null then
    perform pgmem.apply_facts(v_user, c.facts, created_at);
  end if;

  -- step 4b: conversation state and behaviour
  o := pgmem.observe_turn(conversation_id, query_text, v_emb, v_user, v_intent, c.confidence, created_at, v_memory_id, c.rule);
  v_msg := (o->>'message_id')::bigint;
  v_seq := (o->>'seq')::int;
  v_user := o->>'user_id';
  v_behaviour := o->'behaviour';

  -- step 4c: thread (the layered design's THREAD_ENABLED: setting thread_enabled); a greeting or
  -- a filler has no topic to put in a thread (issue 32)
  if not coalesce((pgmem._setting('thread_enabled'))::text::boolean, true) then
    v_thread := jsonb_build_object('stage', 'thread', 'thread_id', null, 'decision', 'skipped', 'reason', 'thread_enabled is false');
  elsif v_smalltalk is not null then
    v_thread := jsonb_build_object('stage', 'thread', 'thread_id', null, 'decision', 'skipped', 'reason', 'a ' || v_smalltalk);
  elsif v_emb is not null then
    select * into t from pgmem.resolve_thread(conversation_id, v_emb, v_msg, v_intent = 'continuation');
    v_thread := jsonb_build_object('stage', 'thread', 'thread_id', t.thread_id, 'decision', t.decision,
                                   'similarity', round(t.similarity::numeric, 4), 'label', t.label,
                                   'message_count', t.message_count, 'archived', to_jsonb(t.archived),
                                   'summary_due', t.summary_due, 'summary', t.summary, 'summary_source', t.summary_source,
                                   'threshold', round(t.threshold::numeric, 4));
  else
    v_thread := jsonb_build_object('stage', 'thread', 'thread_id', null, 'decision', 'skipped', 'reason', 'no query embedding');
  end if;

  -- step 4d: research context; then this message's own insights and concepts are stored (the
  -- layered design's RESEARCH_INSIGHTS_ENABLED: setting research_insights_enabled)
  if coalesce((pgmem._setting('research_insights_enabled'))::text::boolean, true) then
    v_research := pgmem.research_context(query_text, v_emb, v_user, (v_thread->>'thread_id')::bigint, 5);
  else
    v_research := jsonb_build_object('insights', '[]'::jsonb, 'concepts', '[]'::jsonb, 'skipped', 'research_insights_enabled is false');
  end if;
  v_own := pgmem._message_research(v_tenant, v_msg);  -- (it checks the switch itself)

  -- step 5: policy
  v_policy := pgmem.resolve_policy(o->'features' || jsonb_build_object('intent', v_intent, 'question', v_kind = 'question',
                                     'content_words', v_words));

  -- step 6: history pruning: the last v_recent messages before this one, and the v_semk older
  -- ones most similar to the query; deduplicated, in conversation order
  with earlier as (
    select m.* from pgmem.messages m
     where m.tenant = v_tenant and m.conversation_id = context_for.conversation_id and m.seq < v_seq),
  recent as (select e.id, 'recent' as why, null::float8 as sim from earlier e order by e.seq desc limit v_recent),
  semantic as (
    select e.id, 'semantic' as why, pgmem._cos(e.embedding, v_emb) as sim from earlier e
     where v_emb is not null and e.embedding is not null and e.id not in (select id from recent)
     order by e.embedding operator(public.<=>) v_emb limit v_semk)
  select coalesce(jsonb_agg(jsonb_build_object('message_id', m.id, 'seq', m.seq, 'role', m.role, 'content', m.content,
                                               'why', x.why, 'similarity', round(x.sim::numeric, 4),
                                               'memory_id', m.memory_id) order by m.seq), '[]')
    into v_history
    from (select * from recent union all select * from semantic) x join pgmem.messages m on m.id = x.id;

  -- step 7: selective retrieval (issue 32: what search ranks, as if the message were not stored)
  --   * the memories: search's ranking under the same profile, in its order, until the token
  --     budget is spent (setting context_memory_tokens at the standard behaviour's depth 5, a
  --     mode of depth d gets d/5 of it; at most context_memories_per_depth x d memories, or the
  --     k a caller gives);
  --   * no candidate (so no signal of any other memory is shaped by it either: the best lexical
  --     score BM25 divides by, the session and neighbour windows): the message itself, the
  --     turns of the history window (already in the prompt as conversation), and the chat's own
  --     questions and answers (category question, answer; the Q&A history offers those),
  --     unless the message asks about the conversation itself;
  --   * a question always retrieves (policy rule question_retrieves); a personal question
  --     (intent profile) gets the profile and the turn that stated each fact too
  --     (context.profile_sources).
  v_depth := coalesce(k, (v_behaviour->>'retrieval_depth')::int);
  v_max := case when k is not null then k
                else v_depth * coalesce(pgmem._setting_num('context_memories_per_depth', 4), 4)::int end;
  v_budget := case when k is not null then null  -- (k given: k memories, as before)
                   else ceil(coalesce(pgmem._setting_num('context_memory_tokens', 1200), 1200) * v_depth / 5.0)::int end;
  if (v_policy->>'inject_rag')::boolean and v_depth > 0 and v_max > 0 then
    v_filters := coalesce(filters, '{}');
    if v_user is not null and not v_filters ? 'user_id' then
      v_filters := v_filters || jsonb_build_object('user_id', v_user);
    end if;
    v_exclude := array(select x from unnest(array[v_memory_id] || array(select (h->>'memory_id')::bigint
                                                                          from jsonb_array_elements(v_history) h
                                                                         where h->>'memory_id' is not null)) x
                        where x is not null);
    if cardinality(v_exclude) > 0 then
      v_filters := v_filters || jsonb_build_object('exclude_ids',
                     coalesce(v_filters->'exclude_ids', '[]'::jsonb) || to_jsonb(v_exclude));
    end if;
    if not pgmem._asks_about_conversation(query_text) and not v_filters ? 'exclude_category' then
      v_filters := v_filters || '{"exclude_category": ["question", "answer"]}'::jsonb;
    end if;
    -- (search asks for 3 more: the best of those the budget left out are the context's
    -- candidates, shown, not carried: the chat's ○ below its ✓)
    with h as (
      select s.*, m.token_count as tokens,
             sum(greatest(m.token_count, 1)) over (order by s.score desc, s.id) as cum,
             row_number() over (order by s.score desc, s.id) as rk
        from pgmem.search(query_text => left(query_text, pgmem._limit('max_query_chars', 4000)::int),
                          query_embedding => v_emb, k => v_max + 3,
                          profile => search_profile, filters => v_filters) s
        join pgmem.memories m on m.id = s.id),
    hc0 as (select h.*, h.rk = 1 or (h.rk <= v_max and (v_budget is null or h.cum <= v_budget)) as carried from h),
    hc as (select hc0.*, row_number() over (partition by hc0.carried order by hc0.score desc, hc0.id) as n from hc0)
    select coalesce(jsonb_agg(jsonb_build_object('id', hc.id, 'score', round(hc.score::numeric, 4), 'content', hc.content,
                                                 'who', hc.who, 'category', hc.category, 'created_at', hc.created_at,
                                                 'tokens', hc.tokens)
                              order by hc.score desc, hc.id) filter (where hc.carried), '[]'),
           coalesce((jsonb_agg(jsonb_build_object('id', hc.id, 'score', round(hc.score::numeric, 4), 'content', hc.content,
                                                  'who', hc.who, 'category', hc.category, 'created_at', hc.created_at,
                                                  'tokens', hc.tokens)
                               order by hc.score desc, hc.id) filter (where not hc.carried and hc.n <= 3)), '[]')
      into v_memories, v_candidates
      from hc;
  end if;
  if v_intent = 'profile' and v_kind = 'question' and v_user is not null then
      -- a profile question: the turn that stated each fact in force (profile_facts.source_memory_id)
      select coalesce(jsonb_agg(jsonb_build_object('key', f.key, 'value', f.value, 'memory_id', m.id,
                                                   'content', m.content, 'created_at', m.created_at) order by f.key), '[]')
        into v_sources
        from pgmem.profile_facts f join pgmem.memories m on m.id = f.source_memory_id and m.tenant = f.tenant
       where f.tenant = v_tenant and f.user_id = v_user and f.recorded_to is null
         and (f.valid_to is null or f.valid_to > now()) and m.state = 'active';
  end if;
  if (v_policy->>'inject_rag')::boolean and v_depth > 0 and v_max > 0 then
    -- the memories put into the context are recorded as a use (sql/212_access_log.sql)
    perform pgmem._record_access('use', 'context_for', array(select (x->>'id')::bigint from jsonb_array_elements(v_memories) x));
    -- knowledge-base excerpts (the design's knowledge_base intent: "LLM gets knowledge base
    -- excerpts"; its RAG is document retrieval): the chunks of the tenant's documents, and the
    -- user's own, nearest the question (680_documents.sql), when the tenant has any
    if exists (select 1 from pgmem.documents d where d.tenant = v_tenant and d.state = 'active'
                  and (d.user_id is null or d.user_id = v_user)) then
      select coalesce(jsonb_agg(jsonb_build_object('chunk_id', x.chunk_id, 'document_id', x.document_id, 'title', x.title,
                                                   'ord', x.ord, 'score', round(x.score::numeric, 4), 'content', x.content,
                                                   'source', x.source) order by x.score desc, x.chunk_id), '[]')
        into v_documents
        from pgmem.search_documents(query_text, v_emb, v_depth, v_user) x;
    end if;
  end if;
  if (v_policy->>'inject_qa_history')::boolean and v_emb is not null then
    -- earlier questions like this one (the same conversation for a continuation, else all of
    -- the user's conversations), each with the answer that followed it
    select coalesce(jsonb_agg(jsonb_build_object('question', q.content, 'answer', q.answer, 'similarity', round(q.sim::numeric, 4),
                                                 'conversation_id', q.conversation_id, 'message_id', q.id)
                              order by q.sim desc), '[]')
      into v_qa
      from (select m.id, m.content, m.conversation_id, pgmem._cos(m.embedding, v_emb) as sim,
                   (select a.content from pgmem.messages a where a.tenant = m.tenant and a.conversation_id = m.conversation_id
                       and a.seq > m.seq and a.role = 'assistant' order by a.seq limit 1) as answer
              from pgmem.messages m join pgmem.conversations cv on cv.tenant = m.tenant and cv.conversation_id = m.conversation_id
             where m.tenant = v_tenant and m.role = 'user' and m.id <> v_msg and m.embedding is not null
               and (case when v_intent = 'continuation' then m.conversation_id = context_for.conversation_id
                         else cv.user_id is not distinct from v_user end)
               and pgmem._cos(m.embedding, v_emb) >= pgmem._setting_num('qa_history_min_similarity', 0.5)
             order by m.embedding operator(public.<=>) v_emb limit 3) q;
  end if;
  if (v_policy->>'inject_profile')::boolean and v_user is not null then
    select coalesce(jsonb_object_agg(p.key, p.value order by p.key), '{}') into v_profile from pgmem.profile(v_user) p;
  end if;
  if (v_policy->>'privacy_mode')::boolean and v_user is not null then
    v_privacy := pgmem.user_data_summary(v_user);
  end if;

  return jsonb_build_object(
    'conversation_id', conversation_id, 'user_id', v_user, 'message_id', v_msg, 'intent', v_intent,
    'memory', case when remember then jsonb_build_object('id', r.memory_id, 'decision', coalesce(r.decision, 'skipped'),
                                                         'kind', v_kind, 'skipped', v_skipped) end,
    'stages', jsonb_build_array(
      jsonb_build_object('stage', 'classified', 'intent', v_intent, 'confidence', c.confidence, 'source', c.source,
                         'rule', c.rule, 'needs_llm', c.needs_llm,
                         'demoted_from', case when v_intent <> c.intent then c.intent end),
      v_gate,
      jsonb_build_object('stage', 'state') || (o->'state') || jsonb_build_object('topic_similarity', o->'topic_similarity', 'turn', o->'turn'),
      jsonb_build_object('stage', 'behaviour') || v_behaviour,
      v_thread,
      jsonb_build_object('stage', 'research', 'insights', jsonb_array_length(v_research->'insights'),
                         'concepts', jsonb_array_length(v_research->'concepts'), 'stored_insights', v_own->'insights',
                         'message_concepts', v_own->'concepts', 'concept_links', v_own->'concept_links'),
      jsonb_build_object('stage', 'policy') || v_policy,
      jsonb_build_object('stage', 'history', 'recent', (select count(*) from jsonb_array_elements(v_history) h where h->>'why' = 'recent'),
                         'semantic', (select count(*) from jsonb_array_elements(v_history) h where h->>'why' = 'semantic')),
      -- (retrieval_info is the design's streamed annotation, as it wrote it; budget is pgmem's:
      -- how many memories the token budget let in, issue 32)
      jsonb_build_object('stage', 'retrieved', 'retrieval_info', jsonb_build_object(
                           'num_docs', jsonb_array_length(v_memories), 'similar_queries', jsonb_array_length(v_qa)),
                         'budget', jsonb_build_object(
                           'token_budget', v_budget, 'max_memories', v_max,
                           'tokens', (select coalesce(sum((x->>'tokens')::int), 0) from jsonb_array_elements(v_memories) x),
                           'excluded', coalesce(cardinality(v_exclude), 0)))),
    'context', jsonb_build_object(
      'behaviour_context', v_behaviour->'behaviour_context', 'personality_mode', v_behaviour->'personality_mode',
      'response_length_hint', v_behaviour->'response_length_hint', 'precision_mode', v_behaviour->'precision_mode',
      'history', v_history, 'memories', v_memories, 'candidates', v_candidates, 'documents', v_documents,
      'qa_history', v_qa, 'profile', v_profile,
      'profile_sources', v_sources,
      'privacy', v_privacy,
      'thread', case when v_thread->>'thread_id' is not null then jsonb_build_object('id', (v_thread->>'thread_id')::bigint,
                       'label', v_thread->'label', 'summary', v_thread->'summary') end,
      'research', v_research));
end $$;
comment on function pgmem.context_for(text, vector, text, text, integer, boolean, jsonb, text, timestamptz) is
  'The memory half of the layered pipeline for one user message: classify, topic gate, remember, conversation state and behaviour, thread, research context, policy, history pruning (last 6 + 3 most similar older messages) and selective retrieval (pgmem.search, and the knowledge-base chunks of pgmem.search_documents, when the policy injects RAG). Returns {"stages": [...], "context": {...}}; the "classified" and "retrieved" stages are what a server streams before the first token.';
