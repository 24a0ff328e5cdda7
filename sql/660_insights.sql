-- Tier D, research memory (layered-memory-architecture.md, "Research Memory
-- (research_memory.py)", Steps 4d and 11). Insights of five types (decision, conclusion,
-- hypothesis, open_question, observation), each with a confidence and its thread. Offline they
-- come from cue phrases (python/pgmem/engine/insights.py); a client with an LLM passes the
-- LLM's insights instead. Either way those below insight_min_confidence (.6) are dropped.
-- The concept heuristic (capitalised nouns, snake_case/camelCase, quoted and backtick terms,
-- acronyms) records which thread mentions which concept (pgmem.concept_mentions) and writes
-- `concept` links (pgmem.links, kind 'concept') from the latest memory of another thread that
-- mentions a concept to the new message's memory: the links run across threads.

create or replace function pgmem.extract_insights(content text) returns jsonb
  language sql immutable security definer
  set search_path = pgmem, pg_catalog, pg_temp
  return case when pgmem._check_args('extract_insights', jsonb_build_object('content', content))  -- sizes first (issue 27)
              then pgmem._engine('insights', 'extract_insights', jsonb_build_object('text', content)) end;
comment on function pgmem.extract_insights(text) is
  'The insights a text states by cue phrases (python/pgmem/engine/insights.py): a JSON array of {type, content, confidence, cue}, one per sentence at most.';

create or replace function pgmem.extract_concepts(content text) returns jsonb
  language sql immutable security definer
  set search_path = pgmem, pg_catalog, pg_temp
  return case when pgmem._check_args('extract_concepts', jsonb_build_object('content', content))  -- sizes first (issue 27)
              then pgmem._engine('insights', 'concepts', jsonb_build_object('text', content)) end;
comment on function pgmem.extract_concepts(text) is
  'The concepts of a text by the design''s heuristic (capitalised nouns, snake_case and camelCase terms, quoted and backtick terms, acronyms): a JSON array of {concept, term}.';

-- Concept mentions of a message or an insight, and the concept links across threads.
create or replace function pgmem._mention_concepts(p_tenant text, p_user_id text, p_conversation_id text,
                                                  p_thread_id bigint, p_message_id bigint, p_insight_id bigint,
                                                  p_memory_id bigint, p_text text, p_concepts jsonb default null) returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_concepts jsonb := coalesce(p_concepts, pgmem.extract_concepts(p_text));
  v_links int := 0;
begin
  -- a concept is a key of at most 120 characters (concept_mentions' check): a long name ("I work
  -- at " + a 3,000-letter company) is cut, not refused (issue 35, M3)
  v_concepts := (select coalesce(jsonb_agg(jsonb_build_object('concept', left(btrim(c->>'concept'), 120),
                                                              'term', left(c->>'term', 200))), '[]'::jsonb)
                   from jsonb_array_elements(v_concepts) c
                  where coalesce(c->>'concept', '') ~ '\S');
  if jsonb_array_length(v_concepts) = 0 then
    return jsonb_build_object('concepts', '[]'::jsonb, 'links', 0);
  end if;
  if p_memory_id is not null and p_thread_id is not null then
    -- per concept, the latest memory of another thread of this user that mentions it
    with prior as (
      select distinct on (c->>'concept') c->>'concept' as concept, cm.memory_id
        from jsonb_array_elements(v_concepts) c
        join pgmem.concept_mentions cm on cm.tenant = p_tenant and cm.user_id is not distinct from p_user_id
                                      and cm.concept = c->>'concept'
       where cm.thread_id is distinct from p_thread_id and cm.memory_id is not null and cm.memory_id <> p_memory_id
       order by c->>'concept', cm.created_at desc, cm.id desc),
    ins as (
      insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, metadata)
      select p_tenant, p.memory_id, p_memory_id, 'concept', count(*), jsonb_build_object('concepts', jsonb_agg(p.concept order by p.concept))
        from prior p group by p.memory_id
      on conflict (src_id, dst_id, kind) do update
        set count = l.count + 1, updated_at = now(), weight = greatest(l.weight, excluded.weight),
            metadata = l.metadata || jsonb_build_object('concepts', (select jsonb_agg(distinct x) from jsonb_array_elements(
                         coalesce(l.metadata->'concepts', '[]') || excluded.metadata->'concepts') x))
      returning 1)
    select count(*) into v_links from ins;
  end if;
  insert into pgmem.concept_mentions (tenant, user_id, concept, term, conversation_id, thread_id, message_id, insight_id, memory_id)
  select p_tenant, p_user_id, c->>'concept', c->>'term', p_conversation_id, p_thread_id, p_message_id, p_insight_id, p_memory_id
    from jsonb_array_elements(v_concepts) c;
  return jsonb_build_object('concepts', (select jsonb_agg(c->>'concept') from jsonb_array_elements(v_concepts) c), 'links', v_links);
end $$;

-- Stores one insight (checked, thresholded, deduplicated) with its concept mentions; the
-- concepts may come with it (pgmem._message_research has them from the same engine call).
create or replace function pgmem._store_insight(p_tenant text, p_type text, p_content text, p_confidence float8,
                                               p_user_id text, p_conversation_id text, p_thread_id bigint,
                                               p_message_id bigint, p_embedding public.vector, p_source text,
                                               p_concepts jsonb default null) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_id bigint;
  v_concepts jsonb;
begin
  if p_type is null or p_type not in ('decision', 'conclusion', 'hypothesis', 'open_question', 'observation') then
    perform pgmem._bad_input(format('unknown insight type %s', coalesce(quote_literal(p_type), 'NULL')),
      'types: decision, conclusion, hypothesis, open_question, observation');
  end if;
  if p_content is null or p_content !~ '\S' then
    perform pgmem._bad_input('the insight is empty');
  end if;
  if p_confidence is null then
    perform pgmem._bad_input('an insight needs a confidence between 0 and 1');
  end if;
  perform pgmem._check_unit(p_confidence, 'confidence');
  -- (issue 27, L4: a bad thread or message id was a raw foreign-key error naming no argument)
  if p_thread_id is not null and not exists (select 1 from pgmem.threads t where t.tenant = p_tenant and t.id = p_thread_id) then
    perform pgmem._bad_input(format('thread_id %s is not a thread of tenant "%s"', p_thread_id, p_tenant),
      'pgmem.conversation_threads(conversation_id) lists the threads of a conversation');
  end if;
  if p_message_id is not null and not exists (select 1 from pgmem.messages m where m.tenant = p_tenant and m.id = p_message_id) then
    perform pgmem._bad_input(format('message_id %s is not a message of tenant "%s"', p_message_id, p_tenant),
      'pgmem.observe_turn and observe_reply return the ids of the messages they store');
  end if;
  if p_source not in ('cue', 'llm', 'api') then
    perform pgmem._bad_input(format('insight source must be cue, llm or api, got %L', p_source));
  end if;
  -- "LLM-powered insight extraction with confidence thresholds": the threshold holds for every source
  if p_confidence < pgmem._setting_num('insight_min_confidence', 0.6) then
    return null;
  end if;
  -- the same insight of the same user again: the existing one (keeps its first thread)
  select i.id into v_id from pgmem.insights i
   where i.tenant = p_tenant and i.user_id is not distinct from p_user_id
     and pgmem._content_key(i.content) = pgmem._content_key(p_content)
   limit 1;
  if v_id is not null then
    return v_id;
  end if;
  v_concepts := coalesce(p_concepts, pgmem.extract_concepts(p_content));
  insert into pgmem.insights as i (tenant, user_id, conversation_id, thread_id, message_id, type, content, confidence,
                                   source, concepts, embedding)
  values (p_tenant, p_user_id, p_conversation_id, p_thread_id, p_message_id, p_type, p_content, p_confidence, p_source,
          array(select c->>'concept' from jsonb_array_elements(v_concepts) c),
          pgmem._check_embedding(p_embedding, 'insight embedding'))
  returning i.id into v_id;
  perform pgmem._mention_concepts(p_tenant, p_user_id, p_conversation_id, p_thread_id, p_message_id, v_id, null,
                                  p_content, v_concepts);
  return v_id;
end $$;

create or replace function pgmem.add_insight(
  type text,
  content text,
  confidence float8,
  user_id text default null,
  conversation_id text default null,
  thread_id bigint default null,
  message_id bigint default null,
  embedding vector default null,
  source text default 'api')
returns bigint
  language sql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
  return case when pgmem._check_args('add_insight', jsonb_build_object('type', type, 'content', content, 'user_id', user_id, 'conversation_id', conversation_id, 'source', source))  -- sizes first (issue 27)
              then pgmem._store_insight((select pgmem._require_tenant()), type, content, confidence, user_id, conversation_id,
                                        thread_id, message_id, embedding, source) end;
comment on function pgmem.add_insight(text, text, float8, text, text, bigint, bigint, vector, text) is
  'Stores a research insight (decision, conclusion, hypothesis, open_question, observation) with its confidence and thread; NULL when the confidence is below insight_min_confidence (.6). The same text of the same user returns the existing insight.';

-- Insights (cue phrases, or the given LLM ones) and concepts of one stored message.
create or replace function pgmem._message_research(p_tenant text, p_message_id bigint, p_insights jsonb default null)
returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  m pgmem.messages;
  v_user text;
  v_found jsonb;
  v_items jsonb;
  it jsonb;
  v_ids jsonb := '[]'::jsonb;
  v_id bigint;
  v_concepts jsonb;
begin
  -- the layered design's RESEARCH_INSIGHTS_ENABLED (setting research_insights_enabled): off, no
  -- cue insights or concepts are extracted from the message (insights a caller passes are stored)
  if p_insights is null and not coalesce((pgmem._setting('research_insights_enabled'))::text::boolean, true) then
    return jsonb_build_object('insights', '[]'::jsonb, 'concepts', '[]'::jsonb, 'concept_links', 0);
  end if;
  select * into m from pgmem.messages x where x.tenant = p_tenant and x.id = p_message_id;
  select c.user_id into v_user from pgmem.conversations c where c.tenant = p_tenant and c.conversation_id = m.conversation_id;
  v_found := pgmem._engine('insights', 'research', jsonb_build_object('text', m.content));  -- cue insights and concepts
  v_items := coalesce(p_insights, v_found->'insights');
  if jsonb_typeof(v_items) <> 'array' then
    perform pgmem._bad_input('insights must be a JSON array of {"type", "content", "confidence"} objects');
  end if;
  for it in select x from jsonb_array_elements(v_items) x loop
    v_id := pgmem._store_insight(p_tenant, it->>'type', it->>'content', (it->>'confidence')::float8, v_user,
                                 m.conversation_id, m.thread_id, m.id, coalesce((it->>'embedding')::public.vector, m.embedding),
                                 case when p_insights is not null then coalesce(it->>'source', 'llm') else 'cue' end,
                                 it->'concepts');
    if v_id is not null then
      v_ids := v_ids || jsonb_build_object('id', v_id, 'type', it->>'type', 'confidence', (it->>'confidence')::float8);
    end if;
  end loop;
  v_concepts := pgmem._mention_concepts(p_tenant, v_user, m.conversation_id, m.thread_id, m.id, null, m.memory_id,
                                        m.content, v_found->'concepts');
  return jsonb_build_object('insights', v_ids, 'concepts', v_concepts->'concepts', 'concept_links', v_concepts->'links');
end $$;

create or replace function pgmem.observe_reply(
  conversation_id text,
  content text,
  embedding vector default null,
  insights jsonb default null,
  remember boolean default true,
  created_at timestamptz default null)
returns jsonb
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  c pgmem.conversations;
  q pgmem.messages;
  m pgmem.messages;
  r pgmem.remember_result;
  v_research jsonb;
begin
  perform pgmem._check_args('observe_reply', jsonb_build_object('conversation_id', conversation_id, 'content', content, 'insights', insights));  -- sizes first (issue 27)
  c := pgmem._locked_conversation(v_tenant, observe_reply.conversation_id);
  if insights is not null and jsonb_typeof(insights) <> 'array' then
    perform pgmem._bad_input('insights must be a JSON array of {"type", "content", "confidence"} objects');
  end if;
  -- the question it answers: the latest user message
  select * into q from pgmem.messages x where x.tenant = v_tenant and x.conversation_id = c.conversation_id and x.role = 'user'
   order by x.seq desc limit 1;
  if remember then
    select * into r from pgmem.remember(content => content, embedding => embedding, who => 'assistant', user_id => c.user_id,
                                        session_id => c.conversation_id, created_at => created_at,
                                        category => 'answer');  -- (issue 32: the agent's reply is an answer)
  end if;
  m := pgmem._add_message(v_tenant, c.conversation_id, 'assistant', content, embedding, null, null,
                          case when r.decision in ('stored', 'duplicate', 'replayed') then r.memory_id end, created_at, q.thread_id);
  v_research := pgmem._message_research(v_tenant, m.id, insights);  -- (research_insights_enabled: there)
  return jsonb_build_object('message_id', m.id, 'seq', m.seq, 'thread_id', m.thread_id, 'memory_id', m.memory_id,
                            'remembered', r.decision) || v_research;
end $$;
comment on function pgmem.observe_reply(text, text, vector, jsonb, boolean, timestamptz) is
  'Records the assistant''s reply (step 11 of the pipeline): the message joins the thread of the question it answers, is remembered as an episodic memory (remember => true), and its insights (cue phrases, or the LLM''s when given) and concepts are stored, with concept links across threads.';

-- Cross-thread insight search. The design searches insights semantically; pgmem adds the
-- lexical match and the concepts the query shares with an insight, so a text-only query and
-- an exact term find them too:  score = .6 semantic + .25 lexical + .15 concept overlap,
-- the weights of absent signals (no embedding) spread over the others.
-- The ranking of search_insights for a tenant; query_concepts when the caller has them already.
create or replace function pgmem._search_insights(
  p_tenant text,
  query_text text,
  query_embedding public.vector,
  user_id text,
  k integer,
  types text[],
  current_thread_id bigint,
  min_confidence float8,
  query_concepts text[] default null)
returns table (id bigint, type text, content text, confidence real, score float8, semantic float8, lexical float8,
               concept float8, thread_id bigint, thread_label text, conversation_id text, same_thread boolean,
               concepts text[], insight_user text, created_at timestamptz)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := p_tenant;
  v_q tsquery := case when query_text is not null then pgmem._or_tsquery(query_text) end;
  v_concepts text[] := coalesce(query_concepts,
                                case when query_text is not null
                                     then array(select c->>'concept' from jsonb_array_elements(pgmem.extract_concepts(query_text)) c)
                                end, '{}');
  v_emb public.vector := pgmem._check_embedding(query_embedding, 'query embedding');
  v_ws float8 := case when query_embedding is not null then 0.6 else 0 end;
  v_wl float8 := case when numnode(v_q) > 0 then 0.25 else 0 end;
  v_wc float8 := case when cardinality(v_concepts) > 0 then 0.15 else 0 end;
begin
  perform pgmem._check_between(k, 'k', 1, 1000);
  if v_ws + v_wl + v_wc = 0 then
    if query_text is null then
      perform pgmem._bad_input('search_insights needs query text or a query embedding');
    end if;
    return;  -- a text with no words and no concepts ('?', ':)', an emoji) matches nothing (issue 35, M3)
  end if;
  return query
  with cand as (
    (select i.id from pgmem.insights i
      where v_emb is not null and i.tenant = v_tenant and (_search_insights.user_id is null or i.user_id = _search_insights.user_id)
        and i.embedding is not null
      order by i.embedding operator(public.<=>) v_emb limit greatest(50, k * 4))
    union
    (select i.id from pgmem.insights i
      where numnode(v_q) > 0 and i.tsv @@ v_q and i.tenant = v_tenant
        and (_search_insights.user_id is null or i.user_id = _search_insights.user_id)
      limit greatest(200, k * 10))
    union
    (select i.id from pgmem.insights i
      where cardinality(v_concepts) > 0 and i.concepts && v_concepts and i.tenant = v_tenant
        and (_search_insights.user_id is null or i.user_id = _search_insights.user_id)
      limit greatest(200, k * 10))),
  s as (
    select i.*, greatest(0.0, coalesce(pgmem._cos(i.embedding, v_emb), 0)) as sem,
           case when numnode(v_q) > 0 then ts_rank_cd(i.tsv, v_q) / (1 + ts_rank_cd(i.tsv, v_q)) else 0 end as lex,
           case when cardinality(v_concepts) > 0
                then (select count(*) from unnest(i.concepts) x where x = any(v_concepts))::float8 / cardinality(v_concepts)
                else 0 end as con
      from pgmem.insights i join cand on cand.id = i.id
     where (types is null or i.type = any(types)) and i.confidence >= coalesce(min_confidence, 0))
  select s.id, s.type, s.content, s.confidence,
         (v_ws * s.sem + v_wl * s.lex + v_wc * s.con) / (v_ws + v_wl + v_wc),
         s.sem, s.lex, s.con, s.thread_id, t.label, s.conversation_id,
         s.thread_id is not distinct from current_thread_id and current_thread_id is not null,
         s.concepts, s.user_id, s.created_at
    from s left join pgmem.threads t on t.tenant = s.tenant and t.id = s.thread_id
   order by 5 desc, s.id desc
   limit k;
end $$;

-- The closed list of insight types, checked before any work (issue 35, M2).
create or replace function pgmem._check_insight_types(p_types text[]) returns boolean
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_bad text;
begin
  select t into v_bad from unnest(p_types) t
   where t is null or t not in ('decision', 'conclusion', 'hypothesis', 'open_question', 'observation') limit 1;
  if found then
    perform pgmem._bad_input(format('unknown insight type %s', coalesce(quote_literal(left(v_bad, 64)), 'NULL')),
                             'types: decision, conclusion, hypothesis, open_question, observation');
  end if;
  return true;
end $$;
comment on function pgmem._check_insight_types(text[]) is
  'True, or raises 22023 naming the first element of types that is not an insight type (decision, conclusion, hypothesis, open_question, observation).';

create or replace function pgmem.search_insights(
  query_text text default null,
  query_embedding vector default null,
  user_id text default null,
  k integer default 10,
  types text[] default null,
  current_thread_id bigint default null,
  min_confidence float8 default 0)
returns table (id bigint, type text, content text, confidence real, score float8, semantic float8, lexical float8,
               concept float8, thread_id bigint, thread_label text, conversation_id text, same_thread boolean,
               concepts text[], insight_user text, created_at timestamptz)
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select * from pgmem._search_insights((select pgmem._require_tenant()), query_text, query_embedding, user_id, k, types,
                                       current_thread_id, min_confidence)
   where pgmem._check_args('search_insights', jsonb_build_object('query_text', query_text, 'user_id', user_id, 'types', types))
     and (types is null or pgmem._check_insight_types(types))
     and pgmem._unit_ok(min_confidence, 'min_confidence')  -- issue 27: sizes first; a NaN confidence matched nothing
$$;
comment on function pgmem.search_insights(text, vector, text, integer, text[], bigint, float8) is
  'Research insights of the current tenant (a user''s, or all) across every thread and conversation, ranked by .6 semantic + .25 lexical + .15 concept overlap (weights of absent signals spread over the rest); same_thread marks those of current_thread_id.';

-- Step 4d: the research context of a query: related insights from every thread of the user
-- (a conversation without a user sees only insights without one), and the query's concepts
-- that other threads of the user discussed.
create or replace function pgmem.research_context(query_text text, query_embedding vector default null,
                                                  user_id text default null, thread_id bigint default null,
                                                  k integer default 5)
returns jsonb
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  with q as (select (select pgmem._require_tenant()) as tenant,
                    array(select c->>'concept' from jsonb_array_elements(pgmem.extract_concepts(query_text)) c) as concepts
              where pgmem._check_args('research_context', jsonb_build_object('query_text', query_text, 'user_id', research_context.user_id)))
  select jsonb_build_object(
    'insights', coalesce((select jsonb_agg(jsonb_build_object('id', s.id, 'type', s.type, 'content', s.content,
                                   'confidence', s.confidence, 'score', round(s.score::numeric, 4), 'thread_id', s.thread_id,
                                   'thread_label', s.thread_label, 'same_thread', s.same_thread) order by s.score desc, s.id desc)
                            from (select x.* from q, pgmem._search_insights(q.tenant, query_text, query_embedding,
                                                                            research_context.user_id,
                                                                            case when research_context.user_id is null then 1000 else k end,
                                                                            null, research_context.thread_id, 0, q.concepts) x
                                   where x.score > 0 and x.insight_user is not distinct from research_context.user_id
                                   order by x.score desc, x.id desc limit k) s), '[]'),
    'concepts', coalesce((select jsonb_agg(jsonb_build_object('concept', x.concept, 'threads', x.threads) order by x.concept)
                            from (select cm.concept,
                                         jsonb_agg(distinct jsonb_build_object('thread_id', t.id, 'label', t.label,
                                                                               'conversation_id', t.conversation_id)) as threads
                                    from q, pgmem.concept_mentions cm
                                    join pgmem.threads t on t.tenant = cm.tenant and t.id = cm.thread_id
                                   where cm.tenant = q.tenant
                                     and cm.user_id is not distinct from research_context.user_id
                                     and cm.thread_id is distinct from research_context.thread_id
                                     and cm.concept = any(q.concepts)
                                   group by cm.concept) x), '[]'))
  from q
$$;
comment on function pgmem.research_context(text, vector, text, bigint, integer) is
  'Step 4d of the pipeline: the insights most related to a query across all threads (search_insights) and the query''s concepts other threads of the user mention, with those threads.';
