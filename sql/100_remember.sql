-- remember(): store one memory behind Engram's surprise gate, with Fragment salience.
-- remember_many(): the same rules for a batch in one call.

create or replace function pgmem._scope_key(p_user_id text) returns text
  language sql immutable parallel safe
  return coalesce(p_user_id, '');

-- Engram's surprise gate (engram.md, Surprise Detection). Returns the components; the
-- decision is taken by the caller. "Existing memories" are the active memories of the same
-- tenant and user. Semantic novelty uses the HNSW nearest neighbour (not a scan); keyword
-- novelty compares with the lexical (GIN) and semantic neighbours, at most
-- surprise_lexical_pool of them; category rarity counts at most rarity_count_cap memories.
create or replace function pgmem.surprise(
  content text,
  embedding vector default null,
  category text default 'episode',
  user_id text default null,
  exclude_id bigint default null)
returns table (surprise float8, semantic_novelty float8, keyword_novelty float8, rarity float8,
               nearest_id bigint, nearest_similarity float8, duplicate_id bigint)
  language plpgsql volatile security definer
  set search_path = pgmem, public, pg_temp
  set hnsw.iterative_scan = strict_order
as $$
#variable_conflict use_variable
declare
  v_tenant text := pgmem._require_tenant();
  v_scope text := pgmem._scope_key(user_id);
  v_tokens text[] := pgmem.tokens(content);
  v_pool int := pgmem._setting_num('surprise_lexical_pool', 20)::int;
  v_cap int := pgmem._setting_num('rarity_count_cap', 1024)::int;
  v_w jsonb;
  v_kw_sim float8 := 0;
  v_count int;
  v_any boolean;
  v_query tsquery;
  v_ids bigint[];
  v_contents text[];
  v_dist float8;
  v_kw_id bigint;
  v_kw_best float8;
begin
  -- 1. exact duplicate (fast path): case- and whitespace-insensitive content hash
  select m.id into duplicate_id from pgmem.memories m
   where m.tenant = v_tenant and coalesce(m.user_id, '') = v_scope
     and m.content_hash = md5(pgmem._content_key(content))::uuid
     and m.state in ('active', 'archived') and m.id is distinct from exclude_id
   order by m.id limit 1;
  if duplicate_id is not null then
    surprise := 0; semantic_novelty := 0; keyword_novelty := 0; rarity := null;
    nearest_id := duplicate_id; nearest_similarity := 1;
    return next; return;
  end if;

  select exists (select 1 from pgmem.memories m where m.tenant = v_tenant and coalesce(m.user_id, '') = v_scope
                  and m.state = 'active' and m.id is distinct from exclude_id) into v_any;

  -- 2. semantic novelty = 1 - max cosine similarity (first memory: 1.0). One HNSW query
  --    gives the nearest neighbour and the 10 semantic candidates for keyword novelty.
  if embedding is not null and v_any then
    perform set_config('hnsw.ef_search', greatest(40, pgmem._setting_num('hnsw_ef_search', 100)::int)::text, true);
    select array_agg(n.id order by n.d, n.id), array_agg(n.content order by n.d, n.id), min(n.d)
      into v_ids, v_contents, v_dist
      from (select m.id, m.content, m.embedding <=> embedding as d from pgmem.memories m
             where m.tenant = v_tenant and coalesce(m.user_id, '') = v_scope and m.state = 'active'
               and m.embedding is not null and m.id is distinct from exclude_id
             order by m.embedding <=> embedding limit 10) n;
    nearest_id := v_ids[1];
    nearest_similarity := 1 - v_dist;
    semantic_novelty := case when nearest_id is null then 1.0
                             else 1.0 - greatest(0.0, least(1.0, nearest_similarity)) end;
  elsif embedding is not null then
    semantic_novelty := 1.0;
  end if;

  -- 3. keyword novelty = 1 - max Jaccard (first memory: 1.0). Engram takes the max over all
  --    memories; pgmem over bounded, index-driven candidates that hold the high-Jaccard ones:
  --    the 10 semantic neighbours, up to surprise_lexical_pool memories containing every
  --    lexeme of the candidate (GIN, AND query: a repeat or near-repeat), and the scope's
  --    surprise_lexical_pool most recent memories. (An OR query would make GIN visit nearly
  --    every row: O(n) per write.)
  if v_any then
    v_query := plainto_tsquery('english', content);
    select max(x.j), (array_agg(x.id order by x.j desc, x.id))[1], (array_agg(x.j order by x.j desc, x.id))[1]
      into v_kw_sim, v_kw_id, v_kw_best
      from (select c.id, pgmem.jaccard(v_tokens, pgmem.tokens(c.content)) as j
              from (select u.id, u.content from unnest(coalesce(v_ids, '{}'), coalesce(v_contents, '{}')) u(id, content)
                    union
                    (select m.id, m.content from pgmem.memories m
                      where numnode(v_query) > 0 and m.tsv @@ v_query and m.tenant = v_tenant
                        and coalesce(m.user_id, '') = v_scope and m.state = 'active' and m.id is distinct from exclude_id
                      limit v_pool)
                    union
                    (select m.id, m.content from pgmem.memories m
                      where m.tenant = v_tenant and coalesce(m.user_id, '') = v_scope and m.state = 'active'
                        and m.id is distinct from exclude_id
                      order by m.created_at desc limit v_pool)) c) x;
    keyword_novelty := 1.0 - coalesce(v_kw_sim, 0);
    if nearest_id is null then
      -- without an embedding, the nearest memory is the best keyword match
      nearest_id := v_kw_id;
      nearest_similarity := v_kw_best;
    end if;
  else
    keyword_novelty := 1.0;
  end if;

  -- 4. category rarity = 1 / log2(2 + count of the category)
  select count(*) into v_count from (
    select 1 from pgmem.memories m
     where m.tenant = v_tenant and coalesce(m.user_id, '') = v_scope and m.category = category
       and m.state = 'active' and m.id is distinct from exclude_id
     limit v_cap) x;
  rarity := 1.0 / log(2.0, (2 + v_count)::numeric)::float8;

  -- 5. combine
  if embedding is not null then
    v_w := pgmem._setting('surprise_weights');
    surprise := (v_w->>'semantic')::float8 * semantic_novelty + (v_w->>'keyword')::float8 * keyword_novelty
              + (v_w->>'rarity')::float8 * rarity;
  else
    v_w := pgmem._setting('surprise_weights_no_embedding');
    surprise := (v_w->>'keyword')::float8 * keyword_novelty + (v_w->>'rarity')::float8 * rarity;
  end if;
  surprise := greatest(0.0, least(1.0, surprise));
  return next;
end $$;
comment on function pgmem.surprise(text, vector, text, text, bigint) is
  'Engram surprise of a candidate memory against the current tenant''s memories of the same user: exact duplicate, semantic novelty (HNSW nearest neighbour), keyword novelty (Jaccard), category rarity, combined 0.6/0.3/0.1 (0.8/0.2 without an embedding).';

do $$ begin
  if to_regtype('pgmem.remember_result') is null then
    create type pgmem.remember_result as (memory_id bigint, decision text, surprise real, importance real,
      salience real, nearest_id bigint, nearest_similarity real, details jsonb);
  end if;
end $$;
comment on type pgmem.remember_result is 'What remember() returns for one memory.';

drop function if exists pgmem.remember(text, vector, text, text, timestamptz, text, text, text, text, real, jsonb, text, text, text, text, text, text[], text[], real, real, real, timestamptz, timestamptz, text, integer, text, boolean);

create or replace function pgmem.remember(
  content text,
  embedding vector default null,
  who text default null,
  what text default null,
  happened_at timestamptz default null,
  location text default null,
  why text default null,
  how text default null,
  category text default 'episode',
  importance float8 default null,
  metadata jsonb default '{}',
  user_id text default null,
  agent_id text default null,
  session_id text default null,
  tier text default 'episodic',
  summary text default null,
  topics text[] default '{}',
  entities text[] default '{}',
  valence float8 default null,
  arousal float8 default null,
  dominance float8 default null,
  created_at timestamptz default null,
  expires_at timestamptz default null,
  event_key text default null,
  token_count integer default null,
  embedding_model text default null,
  force boolean default false,
  motor jsonb default null,    -- reconstructive (issue 16): Fragment content domains
  sensory jsonb default null)
returns setof pgmem.remember_result
  -- SECURITY DEFINER (sql/900_security.sql, rule 3): it writes history rows for rejected and
  -- duplicate candidates, which pgmem_app may not write; every statement filters on v_tenant
  language plpgsql volatile security definer
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_variable
declare
  v_tenant text := pgmem._require_tenant();
  v_weight real;
  g record;
  v_threshold float8 := pgmem._setting_num('surprise_threshold', 0.15);
  v_novelty float8;
  v_emotion float8;
  v_prev record;
  v_gate jsonb;
  v_importance_source text := 'surprise';
  v_new pgmem.memories;
  v_new_numbers text[];
  res pgmem.remember_result;
begin
  select null::bigint as id, null::integer as seq into v_prev;
  -- validation with messages for people (the triggers check again for plain INSERTs)
  if content is null or content !~ '\S' then
    perform pgmem._bad_input('content is empty: a memory needs some text', 'pass the event text as content');
  end if;
  if octet_length(content) > pgmem._setting_num('max_content_bytes', 262144) then
    perform pgmem._bad_input(format('content is %s bytes, more than max_content_bytes (%s)', octet_length(content),
                                    pgmem._setting_num('max_content_bytes', 262144)::bigint),
      'store a summary and keep the full text elsewhere (metadata can hold a reference), or raise max_content_bytes in pgmem.settings');
  end if;
  embedding := pgmem._check_embedding(embedding);
  v_weight := pgmem._check_category(category);
  perform pgmem._check_unit(importance, 'importance'), pgmem._check_unit(valence, 'valence'),
          pgmem._check_unit(arousal, 'arousal'), pgmem._check_unit(dominance, 'dominance');
  perform pgmem._check_time(created_at, 'created_at'), pgmem._check_time(happened_at, 'happened_at (when)', true);
  if metadata is not null and jsonb_typeof(metadata) <> 'object' then
    perform pgmem._bad_input(format('metadata must be a JSON object, got %s', jsonb_typeof(metadata)));
  end if;
  if (motor is not null and jsonb_typeof(motor) <> 'object') or (sensory is not null and jsonb_typeof(sensory) <> 'object') then
    perform pgmem._bad_input(format('motor and sensory content must be JSON objects, got %s and %s',
                                    coalesce(jsonb_typeof(motor), 'NULL'), coalesce(jsonb_typeof(sensory), 'NULL')),
      'e.g. motor => ''{"action": "grasp", "effector": "right hand"}'', sensory => ''{"visual": "red mug"}''');
  end if;

  -- one writer at a time per (tenant, user, content): concurrent equal writes cannot both pass
  perform pg_advisory_xact_lock(hashtextextended(v_tenant || chr(31) || coalesce(user_id, '') || chr(31)
                                                 || pgmem._content_key(content), 0));

  -- idempotent replay: the same event_key returns the memory it created before
  if event_key is not null then
    select m.id into res.memory_id from pgmem.memories m where m.tenant = v_tenant and m.event_key = event_key;
    if res.memory_id is not null then
      res.decision := 'replayed';
      select m.surprise, m.importance, m.salience into res.surprise, res.importance, res.salience from pgmem.memories m where m.id = res.memory_id;
      res.details := jsonb_build_object('event_key', event_key);
      return next res; return;
    end if;
  end if;

  select * into g from pgmem.surprise(content, embedding, category, user_id);
  v_gate := jsonb_build_object(
    'surprise', round(g.surprise::numeric, 6), 'semantic_novelty', round(g.semantic_novelty::numeric, 6),
    'keyword_novelty', round(g.keyword_novelty::numeric, 6), 'rarity', round(g.rarity::numeric, 6),
    'nearest_id', g.nearest_id, 'nearest_similarity', round(g.nearest_similarity::numeric, 6),
    'threshold', v_threshold, 'category_weight', v_weight, 'with_embedding', embedding is not null);

  res.nearest_id := g.nearest_id;
  res.nearest_similarity := g.nearest_similarity;

  -- exact duplicate: nothing new is stored; the existing memory's history says it was seen again
  if g.duplicate_id is not null and not force then
    res.memory_id := g.duplicate_id;
    res.decision := 'duplicate';
    res.surprise := 0;
    select m.importance, m.salience into res.importance, res.salience from pgmem.memories m where m.id = g.duplicate_id;
    res.details := v_gate || jsonb_build_object('decision', 'duplicate');
    insert into pgmem.history (tenant, memory_id, op, after, details)
    values (v_tenant, g.duplicate_id, 'duplicate',
            jsonb_build_object('content', content, 'who', who, 'session_id', session_id, 'event_key', event_key,
                               'created_at', coalesce(created_at, now())), res.details);
    return next res; return;
  end if;

  res.surprise := g.surprise;
  -- engram.md step 6: importance = surprise × category weight (unless the caller knows better)
  if importance is null then
    importance := least(1.0, g.surprise * v_weight);
  else
    v_importance_source := 'caller';
  end if;
  res.importance := importance;

  -- Fragment salience (fragment-reconstructive-memory.md, Salience Formula); novelty is the
  -- gate's semantic novelty (keyword novelty without an embedding); goal relevance is the
  -- max cosine to the active goals (pgmem.goal_relevance, 700_identity.sql; NULL without goals).
  v_novelty := coalesce(g.semantic_novelty, g.keyword_novelty);
  v_emotion := case when valence is null and arousal is null then null
                    else pgmem.emotional_intensity(valence, arousal) end;
  res.salience := pgmem.salience(v_emotion, v_novelty, pgmem.goal_relevance(embedding, agent_id),
                             pgmem.processing_depth(who, what, happened_at, location, why, how),
                             pgmem._setting('salience_weights'));
  v_gate := v_gate || jsonb_build_object('importance_source', v_importance_source,
                                         'emotion', v_emotion, 'novelty', v_novelty);

  -- A restatement with different numbers (a moved date, a new price) is an update, not a
  -- repeat: the gate keeps it (pgmem's addition to Engram; bench/EVAL.md found the gate
  -- rejecting "Sat 29 Aug 08:00 -> Sat 05 Sep" at surprise .149 against the old entry).
  if g.surprise < v_threshold and not force and g.nearest_id is not null then
    select array(select t from unnest(pgmem.tokens(content)) t where t ~ '[0-9]'
                 except
                 select t from unnest(pgmem.tokens(m.content)) t)
      into v_new_numbers from pgmem.memories m where m.id = g.nearest_id;
    if cardinality(v_new_numbers) > 0 then
      v_gate := v_gate || jsonb_build_object('kept_because', 'new numbers: ' || array_to_string(v_new_numbers, ' '));
      force := true;
    end if;
  end if;

  if g.surprise < v_threshold and not force then
    res.memory_id := null;
    res.decision := 'rejected';
    res.details := v_gate || jsonb_build_object('decision', 'rejected',
      'reason', format('surprise %s is below the threshold %s', round(g.surprise::numeric, 4), v_threshold));
    insert into pgmem.history (tenant, memory_id, op, after, details)
    values (v_tenant, g.nearest_id, 'reject',
            jsonb_build_object('content', content, 'who', who, 'what', what, 'category', category,
                               'user_id', user_id, 'session_id', session_id, 'event_key', event_key,
                               'created_at', coalesce(created_at, now())), res.details);
    return next res; return;
  end if;

  res.decision := 'stored';
  -- the previous memory of the same session: its successor gets seq + 1 and a temporal link
  if session_id is not null then
    select m.id, m.seq into v_prev from pgmem.memories m
     where m.tenant = v_tenant and m.session_id = session_id
       and m.state in ('active', 'archived') and m.created_at <= coalesce(created_at, now())
     order by m.created_at desc, m.id desc limit 1;
  end if;
  res.details := v_gate || jsonb_build_object('decision', 'stored',
    'forced', force and g.surprise < v_threshold and not v_gate ? 'kept_because');
  perform pgmem._set_op('add', res.details);
  insert into pgmem.memories as m (tenant, user_id, agent_id, session_id, tier, category, content, summary,
      who, what, happened_at, location, why, how, topics, entities, valence, arousal, dominance,
      importance, salience, surprise, gate, embedding, embedding_model, metadata, token_count, created_at,
      expires_at, event_key, seq, motor, sensory)
  values (v_tenant, user_id, agent_id, session_id, coalesce(tier, 'episodic'), category, content, summary,
      who, what, happened_at, location, why, how, coalesce(topics, '{}'), coalesce(entities, '{}'),
      valence, arousal, dominance, importance, res.salience, res.surprise, v_gate, embedding,
      case when embedding is not null then embedding_model end, coalesce(metadata, '{}'),
      token_count, coalesce(created_at, now()), expires_at, event_key,
      case when session_id is not null then coalesce(v_prev.seq, 0) + 1 end, motor, sensory)
  returning m.* into v_new;
  perform pgmem._set_op(null);
  res.memory_id := v_new.id;

  -- temporal binding to the previous memory of the same session (Fragment bindings)
  if v_prev.id is not null then
    insert into pgmem.links (tenant, src_id, dst_id, kind, weight)
    values (v_tenant, v_prev.id, v_new.id, 'temporal', 1.0) on conflict do nothing;
  end if;
  return next res;
end $$;
comment on function pgmem.remember(text, vector, text, text, timestamptz, text, text, text, text, float8, jsonb, text, text, text, text, text, text[], text[], float8, float8, float8, timestamptz, timestamptz, text, integer, text, boolean, jsonb, jsonb) is
  'Stores one memory behind Engram''s surprise gate. decision: stored | duplicate (exact duplicate in scope: existing id returned, nothing stored) | rejected (surprise below the threshold: nothing stored, recorded in history) | replayed (event_key seen before). Without an embedding the memory is queued for the worker and lexical search finds it at once.';

-- remember_many: one call for a batch (a JSON array of objects with remember()'s argument
-- names). Items are processed in order, so duplicates inside the batch are caught too.
create or replace function pgmem.remember_many(items jsonb)
returns table (ord integer, memory_id bigint, decision text, surprise real, importance real, salience real,
               nearest_id bigint, nearest_similarity real, details jsonb)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  it jsonb;
  i integer := 0;
  r record;
  k text;
  allowed text[] := array['content', 'embedding', 'who', 'what', 'happened_at', 'when', 'location', 'where',
    'why', 'how', 'category', 'importance', 'metadata', 'user_id', 'agent_id', 'session_id', 'tier', 'summary',
    'topics', 'entities', 'valence', 'arousal', 'dominance', 'created_at', 'expires_at', 'event_key',
    'token_count', 'embedding_model', 'force', 'motor', 'sensory'];
begin
  if items is null or jsonb_typeof(items) <> 'array' then
    perform pgmem._bad_input('remember_many expects a JSON array of objects');
  end if;
  for it in select value from jsonb_array_elements(items) loop
    i := i + 1;
    if jsonb_typeof(it) <> 'object' then
      perform pgmem._bad_input(format('item %s of remember_many is %s, not an object', i, jsonb_typeof(it)));
    end if;
    for k in select jsonb_object_keys(it) loop
      if not k = any(allowed) then
        perform pgmem._bad_input(format('item %s of remember_many has an unknown key "%s"', i, k),
          format('known keys: %s', array_to_string(allowed, ', ')));
      end if;
    end loop;
    select * into r from pgmem.remember(
      content => it->>'content',
      embedding => (it->>'embedding')::vector,
      who => it->>'who', what => it->>'what',
      happened_at => coalesce(it->>'happened_at', it->>'when')::timestamptz,
      location => coalesce(it->>'location', it->>'where'),
      why => it->>'why', how => it->>'how',
      category => coalesce(it->>'category', 'episode'),
      importance => (it->>'importance')::float8,
      metadata => coalesce(it->'metadata', '{}'),
      user_id => it->>'user_id', agent_id => it->>'agent_id', session_id => it->>'session_id',
      tier => coalesce(it->>'tier', 'episodic'), summary => it->>'summary',
      topics => coalesce(array(select jsonb_array_elements_text(it->'topics')), '{}'),
      entities => coalesce(array(select jsonb_array_elements_text(it->'entities')), '{}'),
      valence => (it->>'valence')::float8, arousal => (it->>'arousal')::float8, dominance => (it->>'dominance')::float8,
      created_at => (it->>'created_at')::timestamptz, expires_at => (it->>'expires_at')::timestamptz,
      event_key => it->>'event_key', token_count => (it->>'token_count')::int,
      embedding_model => it->>'embedding_model', force => coalesce((it->>'force')::boolean, false),
      motor => it->'motor', sensory => it->'sensory');
    ord := i; memory_id := r.memory_id; decision := r.decision; surprise := r.surprise;
    importance := r.importance; salience := r.salience; nearest_id := r.nearest_id;
    nearest_similarity := r.nearest_similarity; details := r.details;
    return next;
  end loop;
end $$;
comment on function pgmem.remember_many(jsonb) is
  'remember() for a JSON array of items (same keys as remember()''s arguments; "when"/"where" accepted for happened_at/location). Returns one row per item with its position (ord).';
