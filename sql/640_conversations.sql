-- Tier C, conversation state (layered-memory-architecture.md, "Conversation State
-- (conversation_state.py)", Step 4b, "Topic Vector Rolling Average"). One row per
-- conversation in pgmem.conversations holds the 19 ConversationState fields; each user message
-- goes through pgmem.observe_turn once: the tracker (python/pgmem/engine/conversation.py)
-- derives the new fields from the previous ones and the message, the behaviour engine decides
-- the dynamic personality mode, and the topic vector moves by the EMA
--     topic' = (1 - 0.2) * topic + 0.2 * message          (TOPIC_DECAY_ALPHA, setting topic_alpha)
-- The message itself is stored in pgmem.messages (the conversation's turns, in order).

create or replace function pgmem._conversation(p_tenant text, p_conversation_id text, p_user_id text,
                                              p_at timestamptz) returns pgmem.conversations
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare c pgmem.conversations;
begin
  if p_conversation_id is null or p_conversation_id !~ '\S' or length(p_conversation_id) > 200 then
    perform pgmem._bad_input(format('conversation_id %s is not valid: give a non-empty id of at most 200 characters',
                                    coalesce(quote_literal(p_conversation_id), 'NULL')),
      'one id per chat session, e.g. the session id your application already has');
  end if;
  insert into pgmem.conversations as x (tenant, conversation_id, user_id, conversation_start)
  values (p_tenant, p_conversation_id, p_user_id, coalesce(p_at, now()))
  on conflict (tenant, conversation_id) do update set user_id = coalesce(x.user_id, excluded.user_id)
  returning x.* into c;
  -- the row is this transaction's until it commits: one message at a time per conversation
  select * into c from pgmem.conversations x where x.tenant = p_tenant and x.conversation_id = p_conversation_id for update;
  if p_user_id is not null and c.user_id is distinct from p_user_id then
    perform pgmem._bad_input(format('conversation %s belongs to user %s, not %s', p_conversation_id, c.user_id, p_user_id),
      'use one conversation_id per user');
  end if;
  return c;
end $$;

-- An existing conversation, locked for this transaction, or P0002 naming how one starts.
create or replace function pgmem._locked_conversation(p_tenant text, p_conversation_id text) returns pgmem.conversations
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare c pgmem.conversations;
begin
  select * into c from pgmem.conversations x
   where x.tenant = p_tenant and x.conversation_id = p_conversation_id for update;
  if c.conversation_id is null then
    raise exception 'conversation % does not exist for tenant "%"', p_conversation_id, p_tenant
      using errcode = 'P0002', hint = 'a conversation starts with a user message: pgmem.context_for or pgmem.observe_turn';
  end if;
  return c;
end $$;

-- Appends a message to a conversation (user or assistant turn); returns its row.
create or replace function pgmem._add_message(p_tenant text, p_conversation_id text, p_role text, p_content text,
                                             p_embedding public.vector, p_intent text, p_confidence real, p_memory_id bigint,
                                             p_at timestamptz, p_thread_id bigint default null) returns pgmem.messages
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare m pgmem.messages;
begin
  if p_content is null or p_content !~ '\S' then
    perform pgmem._bad_input('the message is empty');
  end if;
  insert into pgmem.messages as x (tenant, conversation_id, seq, role, content, embedding, intent, confidence,
                                   memory_id, created_at, thread_id)
  values (p_tenant, p_conversation_id,
          coalesce((select max(y.seq) from pgmem.messages y where y.tenant = p_tenant and y.conversation_id = p_conversation_id), 0) + 1,
          p_role, p_content, pgmem._check_embedding(p_embedding, 'message embedding'), p_intent, p_confidence, p_memory_id,
          coalesce(p_at, now()), p_thread_id)
  returning x.* into m;
  return m;
end $$;

-- A conversation's title from its first message (Step 11, "auto-title first message"): the
-- first sentence, at most 60 characters, cut at a word.
create or replace function pgmem._title(p_text text) returns text
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return (select case when length(s) <= 60 then s else regexp_replace(left(s, 59), '\s+\S*$', '') || '…' end
            from (select btrim(regexp_replace(substring(p_text from '^[^.!?\n]*[.!?]?'), '\s+', ' ', 'g')) as s) x);

-- The 19 ConversationState fields of a row, as the design names them.
create or replace function pgmem._state_json(c pgmem.conversations) returns jsonb
  language sql immutable
  set search_path = pgmem, pg_catalog, pg_temp
  return jsonb_build_object(
    'current_topic', c.current_topic, 'topic_turns_stable', c.topic_turns_stable, 'topic_drift_count', c.topic_drift_count,
    'emotional_tone', c.emotional_tone, 'tone_shift_count', c.tone_shift_count, 'interaction_pattern', c.interaction_pattern,
    'testing_flag', c.testing_flag, 'repetition_count', c.repetition_count, 'meta_comment_count', c.meta_comment_count,
    'last_intent', c.last_intent, 'intent_history', to_jsonb(c.intent_history), 'intent_streak', c.intent_streak,
    'message_count', c.message_count, 'avg_query_length', c.avg_query_length, 'short_query_streak', c.short_query_streak,
    'dynamic_personality_mode', c.dynamic_personality_mode, 'last_update', c.last_update,
    'conversation_start', c.conversation_start, 'precision_mode', c.precision_mode);

create or replace function pgmem.observe_turn(
  conversation_id text,
  content text,
  embedding vector default null,
  user_id text default null,
  intent text default null,
  confidence float8 default null,
  created_at timestamptz default null,
  memory_id bigint default null,
  rule text default null)
returns jsonb
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  c pgmem.conversations;
  v_sim float8;
  u jsonb;
  s jsonb;
  v_profile jsonb;
  v_features jsonb;
  v_behaviour jsonb;
  m pgmem.messages;
begin
  perform pgmem._check_args('observe_turn', jsonb_build_object('conversation_id', conversation_id, 'content', content, 'user_id', user_id, 'intent', intent, 'rule', rule));  -- sizes first (issue 27)
  if intent is not null and intent not in ('general', 'knowledge_base', 'continuation', 'profile', 'privacy') then
    perform pgmem._bad_input(format('unknown intent %L', intent), 'intents: general, knowledge_base, continuation, profile, privacy');
  end if;
  perform pgmem._check_unit(confidence, 'confidence'), pgmem._check_time(created_at, 'created_at');
  embedding := pgmem._check_embedding(embedding, 'message embedding');
  c := pgmem._conversation(v_tenant, conversation_id, user_id, created_at);
  if embedding is not null and c.topic_vector is not null then
    v_sim := pgmem._cos(embedding, c.topic_vector);
  end if;
  u := pgmem._engine('conversation', 'update', jsonb_build_object(
         'state', pgmem._state_json(c) || jsonb_build_object('tracker', c.tracker), 'text', content,
         'topic_similarity', v_sim, 'intent', intent,
         'gate', pgmem._setting_num('topic_gate_threshold', 0.35),
         'repetition_threshold', pgmem._setting_num('repetition_jaccard', 0.7)));
  s := u->'state';
  select jsonb_build_object('facts', count(*), 'has_name', coalesce(bool_or(p.key = 'name'), false)) into v_profile
    from pgmem.profile_facts p
   where p.tenant = v_tenant and p.user_id = coalesce(observe_turn.user_id, c.user_id) and p.recorded_to is null
     and p.valid_from <= now() and (p.valid_to is null or p.valid_to > now());
  v_features := jsonb_build_object('intent', intent, 'confidence', confidence, 'rule', rule,
                                   'state', s - 'tracker', 'turn', u->'turn', 'profile', v_profile);
  v_behaviour := pgmem.behaviour_decision(v_features);

  update pgmem.conversations x set
    current_topic = s->>'current_topic',
    topic_turns_stable = (s->>'topic_turns_stable')::int,
    topic_drift_count = (s->>'topic_drift_count')::int,
    emotional_tone = s->>'emotional_tone',
    tone_shift_count = (s->>'tone_shift_count')::int,
    interaction_pattern = s->>'interaction_pattern',
    testing_flag = (s->>'testing_flag')::boolean,
    repetition_count = (s->>'repetition_count')::int,
    meta_comment_count = (s->>'meta_comment_count')::int,
    last_intent = s->>'last_intent',
    intent_history = array(select jsonb_array_elements_text(s->'intent_history')),
    intent_streak = (s->>'intent_streak')::int,
    message_count = (s->>'message_count')::int,
    avg_query_length = (s->>'avg_query_length')::real,
    short_query_streak = (s->>'short_query_streak')::int,
    dynamic_personality_mode = v_behaviour->>'personality_mode',
    last_update = coalesce(observe_turn.created_at, now()),
    precision_mode = v_behaviour->>'precision_mode',
    behaviour_mode = v_behaviour->>'mode',
    last_topic_similarity = v_sim,
    topic_vector = pgmem._ema(x.topic_vector, observe_turn.embedding, pgmem._setting_num('topic_alpha', 0.2)),
    tracker = s->'tracker',
    title = coalesce(x.title, nullif(pgmem._title(observe_turn.content), ''))
  where x.tenant = v_tenant and x.conversation_id = c.conversation_id
  returning x.* into c;

  m := pgmem._add_message(v_tenant, c.conversation_id, 'user', content, embedding, intent, confidence::real,
                          memory_id, created_at);
  return jsonb_build_object('message_id', m.id, 'seq', m.seq, 'conversation_id', c.conversation_id, 'user_id', c.user_id,
                            'topic_similarity', v_sim, 'state', pgmem._state_json(c),
                            'turn', u->'turn', 'profile', v_profile, 'behaviour', v_behaviour,
                            'features', v_features || jsonb_build_object('state', pgmem._state_json(c), 'behaviour', v_behaviour));
end $$;
comment on function pgmem.observe_turn(text, text, vector, text, text, float8, timestamptz, bigint, text) is
  'Records one user message of a conversation and updates its state once: the 19 ConversationState fields (tracker: python/pgmem/engine/conversation.py), the behaviour decision (dynamic personality and precision mode) and the topic vector (EMA, alpha .2). Returns the message id, the state, the message''s features and the behaviour decision.';

create or replace function pgmem.conversation_state(conversation_id text) returns jsonb
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select pgmem._state_json(c) || jsonb_build_object('conversation_id', c.conversation_id, 'user_id', c.user_id, 'title', c.title,
           'behaviour_mode', c.behaviour_mode, 'last_topic_similarity', c.last_topic_similarity,
           'messages', (select count(*) from pgmem.messages m where m.tenant = c.tenant and m.conversation_id = c.conversation_id))
    from pgmem.conversations c
   where pgmem._check_args('conversation_state', jsonb_build_object('conversation_id', conversation_state.conversation_id))  -- sizes first (issue 27)
     and c.tenant = (select pgmem._require_tenant()) and c.conversation_id = conversation_state.conversation_id
$$;
comment on function pgmem.conversation_state(text) is
  'The 19 ConversationState fields of a conversation (and its behaviour mode, last topic similarity and message count), or NULL if it does not exist.';
