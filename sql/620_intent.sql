-- Intent classification before any retrieval (layered-memory-architecture.md, "The Five
-- Intent Categories" and Step 3). The fast paths and their confidences are in
-- python/pgmem/engine/intent.py: greeting .97, privacy .95, profile statement .92,
-- continuation .85 (which needs earlier messages in the conversation).
--
-- Anything else needs the LLM, which SQL cannot call: classify_intent then looks in
-- pgmem.intent_cache (the client's LLM answers, keyed by the normalised text), and without
-- an entry returns pgmem's offline guess with needs_llm = true. The Python client asks its
-- LLM when one is configured, stores the answer with pgmem.cache_intent, and every later
-- classification of the same text (from any language) reads it.

create or replace function pgmem._text_hash(p_text text) returns uuid
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return md5(pgmem._content_key(p_text))::uuid;

create or replace function pgmem.classify_intent(query_text text, conversation_id text default null)
returns table (intent text, confidence real, source text, rule text, needs_llm boolean, facts jsonb)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_history boolean := false;
  r jsonb;
  c pgmem.intent_cache;
begin
  perform pgmem._check_args('classify_intent', jsonb_build_object('query_text', query_text, 'conversation_id', conversation_id));  -- sizes first (issue 27)
  if query_text is null then
    perform pgmem._bad_input('classify_intent needs the message text');
  end if;
  if conversation_id is not null then
    v_history := exists (select 1 from pgmem.messages m where m.tenant = v_tenant and m.conversation_id = classify_intent.conversation_id);
  end if;
  r := pgmem._engine('intent', 'classify', jsonb_build_object('text', query_text, 'has_history', v_history));
  if (r->>'needs_llm')::boolean then
    update pgmem.intent_cache x set hits = x.hits + 1, last_hit_at = now()
     where x.tenant = v_tenant and x.text_hash = pgmem._text_hash(query_text)
    returning x.* into c;
    if c.intent is not null then
      intent := c.intent; confidence := c.confidence; source := 'cache'; rule := coalesce(c.source, 'llm');
      needs_llm := false; facts := '[]';
      return next; return;
    end if;
  end if;
  intent := r->>'intent';
  confidence := (r->>'confidence')::real;
  source := case when (r->>'needs_llm')::boolean then 'heuristic' else 'fast_path' end;
  rule := r->>'rule';
  needs_llm := (r->>'needs_llm')::boolean;
  facts := coalesce(r->'facts', '[]');
  return next;
end $$;
comment on function pgmem.classify_intent(text, text) is
  'The intent of a message (general, knowledge_base, continuation, profile, privacy): a fast path (greeting .97, privacy .95, profile statement .92, continuation .85 when the conversation has earlier messages), else the cached LLM answer, else an offline guess with needs_llm = true (the client then asks its LLM and calls pgmem.cache_intent).';

create or replace function pgmem.cache_intent(query_text text, intent text, confidence float8, model text default null,
                                              user_id text default null, source text default 'llm')
returns pgmem.intent_cache
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  c pgmem.intent_cache;
begin
  perform pgmem._check_args('cache_intent', jsonb_build_object('query_text', query_text, 'intent', intent, 'model', model, 'user_id', user_id, 'source', source));  -- sizes first (issue 27)
  if query_text is null or query_text !~ '\S' then
    perform pgmem._bad_input('cache_intent needs the message text');
  end if;
  if intent is null or intent not in ('general', 'knowledge_base', 'continuation', 'profile', 'privacy') then
    perform pgmem._bad_input(format('unknown intent %s', coalesce(quote_literal(intent), 'NULL')),
      'intents: general, knowledge_base, continuation, profile, privacy');
  end if;
  perform pgmem._check_unit(confidence, 'confidence');
  insert into pgmem.intent_cache as x (tenant, text_hash, text, user_id, intent, confidence, source, model)
  values (v_tenant, pgmem._text_hash(query_text), query_text, user_id, intent, coalesce(confidence, 0.7),
          coalesce(source, 'llm'), model)
  on conflict (tenant, text_hash) do update
    set intent = excluded.intent, confidence = excluded.confidence, source = excluded.source, model = excluded.model,
        text = excluded.text, user_id = coalesce(excluded.user_id, x.user_id), created_at = now()
  returning x.* into c;
  return c;
end $$;
comment on function pgmem.cache_intent(text, text, float8, text, text, text) is
  'Stores an intent the client''s LLM gave for a message (keyed by the normalised text, per tenant); classify_intent returns it from then on (source cache).';

-- The kind of a chat message (issue 32): a question is stored as one (category question) and
-- steps back in search; a greeting or a filler is not stored as a memory at all.
create or replace function pgmem._is_question(p_text text) returns boolean
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  -- a question mark anywhere ("...? Answer yes or no."); or it opens with an interrogative (not
  -- an exclamation: "What a day", "How nice"); or with an inverted auxiliary before its subject
  -- ("Was the trip good.", not "Will is my brother", "May is my favourite month")
  return coalesce(p_text ~ '[?？¿]'
    -- a request to the agent is asked of it as a question is ("Tell me more about it")
    or p_text ~* '^\W*(?:(?:please\s+)?(?:tell|show|give)\s+(?:me|us)|explain|describe|define|summari[sz]e|compare|list|remind\s+me|can\s+you|could\s+you|would\s+you|will\s+you)\M'
    or (p_text ~* '^\W*(?:who|whom|whose|what|when|where|which|why|how)\M'
        and p_text !~* '^\W*(?:what\s+an?\M|how\s+(?:nice|great|cool|lovely|sad|wonderful|sweet|kind|awesome)\M)')
    or p_text ~* ('^\W*(?:do|does|did|is|are|was|were|can|could|would|should|will|shall|may|might|have|has|had|am'
                  || '|isn''t|aren''t|wasn''t|don''t|doesn''t|didn''t|won''t|can''t|couldn''t|wouldn''t|shouldn''t)\s+'
                  || '(?:i|you|he|she|it|we|they|there|this|that|these|those|my|your|his|her|its|our|their|the|a|an|any|anyone|anybody|someone|somebody|\w+''s)\M'),
    false);
comment on function pgmem._is_question(text) is
  'Whether a chat message is a question (or a request to the agent): it holds a question mark, or opens with a request ("tell me", "explain", "can you"), an interrogative (not an exclamation) or an auxiliary before its subject. context_for stores it with category question.';

create or replace function pgmem._is_filler(p_text text) returns boolean
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  -- a short acknowledgement that carries nothing to remember: "ok", "got it, thanks", "lol"
  return coalesce(char_length(p_text) <= 40 and p_text ~* ('^\W*(?:(?:ok(?:ay)?|k|kk|sure|yes|yeah|yep|yup|no|nope|nah|cool|nice|great|awesome|perfect|fine|right|alright|all right|got it|i see|makes sense|sounds good|good|hmm+|mm+|uh+|um+|ah+|oh+|wow|lol|haha(?:ha)*|heh|thanks|thank you|thx|ty|np|no problem|you too|same|indeed|exactly|true|agreed|noted)'
                                                        || '(?:\W+|$))+$'), false);
comment on function pgmem._is_filler(text) is
  'Whether a chat message is a filler (an acknowledgement such as "ok", "got it, thanks", "lol"): context_for keeps it as conversation and stores no memory for it.';

create or replace function pgmem._is_greeting(p_text text) returns boolean
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  -- python/pgmem/engine/intent.py's _GREETING and is_greeting (at most 200 characters and 8
  -- words), in SQL: where no PL/Python runs (the Agents session, the trusted install)
  return coalesce(char_length(p_text) <= 200
    and array_length(regexp_split_to_array(btrim(p_text), '\s+'), 1) <= 8
    and p_text ~* ('^\W*(?:(?:hi|hello|hey|hiya|howdy|yo|greetings|hallo|hola|bonjour|salut|sup|morning|evening)'
                   || '(?:\s+there)?|good\s+(?:morning|afternoon|evening|day|night)|what''?s\s+up|how\s+are\s+you(?:\s+doing)?(?:\s+today)?'
                   || '|how''?s\s+it\s+going|nice\s+to\s+meet\s+you|thanks?(?:\s+you)?(?:\s+(?:so|very)\s+much)?(?:\s+a\s+lot)?|thx|ty|cheers'
                   || '|bye|goodbye|see\s+you(?:\s+later|\s+soon)?|good\s*night|ok(?:ay)?\s+thanks?)'
                   || '(?:[\s,!.]+(?:(?:there|again|everyone|all|mate|friend|buddy|pgmem|assistant|bot)\M|[a-z]+))?[\s!.?,:;)(*^-]*$'),
    false);
comment on function pgmem._is_greeting(text) is
  'Whether a message is a greeting, thanks or goodbye (at most 8 words): the engine''s is_greeting (python/pgmem/engine/intent.py) in SQL.';
