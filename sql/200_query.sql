-- The read path, part 1: the query record and the preamble shared by search, search_exact,
-- activate and recall.
--
-- Every ranking is one SQL statement over the memories and a typed query record
-- (pgmem.query, migration 0005), built once per call by pgmem._query(): the argument checks,
-- the profile and its parameters, the effective weights (a signal the query cannot have
-- weighs 0 and the others are rescaled to sum 1), the filters as typed fields, the lexical
-- queries, and the HNSW search depth. The statement reads the record; no SQL text is built
-- from the caller's input.
--
--   sql/199_time_window.sql the time a question names: the date grammar, time_window()
--   sql/200_query.sql       the query record: lexemes of a question, profiles, weights, filters, _query()
--   sql/201_lexical.sql     the lexical candidate query (lexical_probe)
--   sql/202_signals.sql     the signals of the three designs, one inlinable function each
--   sql/203_candidates.sql  the candidate set from the indexes (HNSW, recent HNSW, lexical)
--   sql/205_search.sql      search, search_exact, explain_search (JAM)
--   sql/220_activate.sql    activate (Shadow)          sql/230_recall.sql  recall (Engram)
--
-- Plans. The ranking statements are static SQL, planned with the values of the query record
-- (plan_cache_mode = force_custom_plan on the three ranking functions): the planner then drops
-- the branches a query switches off, removes the tests of absent filters, knows each branch's
-- LIMIT and can choose a b-tree over HNSW for a selective filter. A cached generic plan cannot:
-- with the record's fields as unknown parameters it estimates one row per branch and sorts
-- instead of walking HNSW: measured at 100,000 memories, 30 queries (load average 12), the
-- generic plan took 1,325 ms per query, the custom plan 241 ms, of which 1.6 ms planning
-- (bench/README.md, L13).

-- ------------------------------------------------------------------ the lexemes of a question
create or replace function pgmem.query_tsquery(p_text text) returns tsquery
  language sql immutable parallel safe
  return case when octet_length(p_text) > 65536 then pgmem._over_limit('p_text', octet_length(p_text), 65536, null::tsquery, 'bytes')  -- issue 27
              else nullif(replace(plainto_tsquery('english', coalesce(p_text, ''))::text, ' & ', ' | '), '')::tsquery end;
comment on function pgmem.query_tsquery(text) is
  'The lexical query for a natural-language text: its English lexemes OR-ed (a question need not contain every word of the answer). NULL when only stop words remain.';

-- A lexeme as a single-term tsquery, quoted: a URL's ':' or '/' must not be read as tsquery syntax.
create or replace function pgmem._lexeme_query(p_lexeme text) returns tsquery
  language sql immutable parallel safe
  return ('''' || replace(replace(p_lexeme, '\', '\\'), '''', '''''') || '''')::tsquery;
comment on function pgmem._lexeme_query(text) is
  'A lexeme as a single-term tsquery, quoted so that its characters are never read as tsquery syntax.';

create or replace function pgmem.query_terms(p_text text) returns tsquery[]
  language sql immutable parallel safe
  return case when octet_length(p_text) > 65536 then pgmem._over_limit('p_text', octet_length(p_text), 65536, null::tsquery[], 'bytes')  -- issue 27
              else array(select distinct pgmem._lexeme_query(lex)
                           from unnest(tsvector_to_array(to_tsvector('english', coalesce(p_text, '')))) lex
                          where lex <> '' order by 1) end;
comment on function pgmem.query_terms(text) is
  'The distinct English lexemes of a text, one single-term tsquery each: the lexical signal is the share of them a memory contains.';

-- ------------------------------------------------------------------ profiles and weights
create or replace function pgmem._profile(p_name text, p_method text) returns pgmem.profiles
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare p pgmem.profiles;
begin
  select * into p from pgmem.profiles x
   where x.name = p_name and x.tenant in (coalesce(pgmem.current_tenant(), '*'), '*')
   order by (x.tenant = '*') limit 1;
  if p.name is null then
    perform pgmem._bad_input(format('unknown profile "%s": known profiles for %s are %s', p_name, p_method,
      coalesce((select string_agg(distinct name, ', ' order by name) from pgmem.profiles
                 where method = p_method and tenant in (coalesce(pgmem.current_tenant(), '*'), '*')), 'none')),
      'add one with: insert into pgmem.profiles (tenant, name, method, weights, params) values (...); params not given are taken from the built-in profile of the method');
  end if;
  if p.method <> p_method then
    perform pgmem._bad_input(format('profile "%s" is a %s profile, not a %s profile', p_name, p.method, p_method));
  end if;
  if not p.builtin then
    -- a custom profile inherits the parameters (half-lives, thresholds) of its method's
    -- built-in profile, overriding only those it sets
    p.params := coalesce((select b.params from pgmem.profiles b
                           where b.tenant = '*' and b.builtin and b.method = p_method
                             and b.name = case p_method when 'search' then 'jam' when 'activate' then 'shadow'
                                                        when 'recall' then 'engram' end), '{}') || p.params;
  end if;
  return p;
end $$;

-- Weights: a JSON object of known signal names to non-negative numbers summing to 1.
create or replace function pgmem.check_weights(weights jsonb, known text[]) returns jsonb
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  k text;
  v jsonb;
  total numeric := 0;
begin
  perform pgmem._check_args('check_weights', jsonb_build_object('weights', weights, 'known', known));  -- sizes first (issue 27)
  if weights is null or jsonb_typeof(weights) <> 'object' then
    perform pgmem._bad_input('weights must be a JSON object of signal: weight',
      format('signals: %s', array_to_string(known, ', ')));
  end if;
  for k, v in select * from jsonb_each(weights) loop
    if not k = any(known) then
      perform pgmem._bad_input(format('unknown weight "%s": known signals are %s', k, array_to_string(known, ', ')));
    end if;
    if jsonb_typeof(v) <> 'number' then
      perform pgmem._bad_input(format('weight "%s" must be a number, got %s', k, v));
    end if;
    if (v::text)::numeric < 0 then
      perform pgmem._bad_input(format('weight "%s" is negative (%s): weights must be >= 0', k, v));
    end if;
    total := total + (v::text)::numeric;
  end loop;
  if abs(total - 1) > 0.000001 then
    perform pgmem._bad_input(format('weights must sum to 1, they sum to %s: %s', round(total, 6), weights::text));
  end if;
  -- every known signal present: those left out weigh 0
  return (select jsonb_object_agg(kn, coalesce(weights->kn, '0'::jsonb)) from unnest(known) kn);
end $$;
comment on function pgmem.check_weights(jsonb, text[]) is
  'Validates a weights object (known keys, numbers, non-negative, sum 1) and returns it with every known signal (those left out weigh 0); raises a clear error otherwise.';

-- ------------------------------------------------------------------ filters
-- A filter value that names one or several strings, as an array (NULL when the key is absent).
create or replace function pgmem._filter_strings(p_filters jsonb, p_key text) returns text[]
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v jsonb := p_filters->p_key;
begin
  if v is null then return null; end if;
  if jsonb_typeof(v) = 'string' then return array[v #>> '{}']; end if;
  if jsonb_typeof(v) = 'array' and not exists (select 1 from jsonb_array_elements(v) e where jsonb_typeof(e) <> 'string') then
    return array(select jsonb_array_elements_text(v));
  end if;
  perform pgmem._bad_input(format('filter "%s" must be a string or an array of strings, got %s', p_key, v));
end $$;

create or replace function pgmem._filter_time(p_filters jsonb, p_key text) returns timestamptz
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v jsonb := p_filters->p_key;
begin
  if v is null then return null; end if;
  if jsonb_typeof(v) <> 'string' then
    perform pgmem._bad_input(format('filter "%s" must be a timestamp string, got %s', p_key, v));
  end if;
  begin
    return (v #>> '{}')::timestamptz;
  exception when others then
    perform pgmem._bad_input(format('filter "%s" is not a timestamp: %s', p_key, v #>> '{}'));
  end;
end $$;

-- Whether a message asks about the conversation itself, what was said in it ("what did you
-- tell me about X", "what did I ask you yesterday", "remind me what we discussed"): then the
-- questions and answers an agent loop stored are what is asked for, and keep their whole score
-- (issue 32). English cue phrases; a question that names none of them is about the world.
create or replace function pgmem._asks_about_conversation(p_text text) returns boolean
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return coalesce(p_text ~* ('\m(?:(?:did|have|had)\s+(?:you|i|we)\s+(?:ever\s+)?(?:tell|told|say|said|mention|mentioned|ask|asked|suggest|suggested|recommend|recommended|answer|answered|discuss|discussed|talk|talked)'
                           || '|you\s+(?:told|said|mentioned|suggested|recommended|answered)|i\s+(?:asked|told\s+you)'
                           || '|we\s+(?:discussed|talked|spoke)|remind\s+me\s+what|(?:earlier|last)\s+(?:answer|reply|conversation|chat))\M'),
                  false);
comment on function pgmem._asks_about_conversation(text) is
  'Whether a message asks about the conversation itself ("what did you tell me about X"): then search does not step back the questions and answers an agent loop stored (setting conversation_factor).';

-- The filter metadata_path (issue 32): a SQL/JSON path predicate over a memory's metadata
-- (jsonb @@ jsonpath: ==, !=, <, <=, >, >=, &&, ||, !, exists, like_regex, starts with), for
-- conditions containment cannot say: "score > 3", "source != chat", "tag in (a, b)". The mem0
-- drop-in translates mem0's filter operators (eq, ne, gt, gte, lt, lte, in, nin, contains, AND,
-- OR, NOT) into one.
create or replace function pgmem._filter_path(p_filters jsonb) returns jsonpath
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if not p_filters ? 'metadata_path' then return null; end if;
  if jsonb_typeof(p_filters->'metadata_path') <> 'string' then
    perform pgmem._bad_input(format('filter "metadata_path" must be a SQL/JSON path predicate as a string, got %s',
                                    left((p_filters->'metadata_path')::text, 200)),
      'e.g. {"metadata_path": "$.score > 3 && $.source != \"chat\""}');
  end if;
  begin
    return (p_filters->>'metadata_path')::jsonpath;
  exception when others then
    perform pgmem._bad_input(format('filter "metadata_path" is not a SQL/JSON path: %s (%s)',
                                    left(p_filters->>'metadata_path', 200), sqlerrm),
      'a predicate over the metadata object, e.g. $.score > 3 && $.source != "chat"');
  end;
  return null;  -- (not reached: _bad_input raises; plpgsql_check cannot know that)
end $$;
comment on function pgmem._filter_path(jsonb) is
  'The filter metadata_path of a filters object as a jsonpath (a predicate over a memory''s metadata: jsonb @@ jsonpath), or a clear error naming it.';

-- The filters object of a call as fields of its query record. Memories in other states than
-- 'active' (archived, deleted, merged) only on request.
create or replace function pgmem._query_filters(q pgmem.query, p_filters jsonb) returns pgmem.query
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare k text;
begin
  p_filters := coalesce(p_filters, '{}');
  if jsonb_typeof(p_filters) <> 'object' then
    perform pgmem._bad_input(format('filters must be a JSON object, got %s', jsonb_typeof(p_filters)));
  end if;
  for k in select jsonb_object_keys(p_filters) loop
    if k not in ('user_id', 'agent_id', 'session_id', 'who', 'category', 'tier', 'state', 'location',
                 'created_after', 'created_before', 'metadata', 'ids', 'motor', 'sensory', 'current_only',
                 'exclude_ids', 'exclude_category', 'metadata_path') then
      perform pgmem._bad_input(format('unknown filter "%s"', k),
        'filters: user_id, agent_id, session_id, who, category, tier, state, location, exclude_category (string or array), created_after, created_before (timestamp), metadata, motor, sensory (object, containment), metadata_path (a SQL/JSON path predicate), ids, exclude_ids (array), current_only (boolean)');
    end if;
  end loop;
  q.user_ids := pgmem._filter_strings(p_filters, 'user_id');
  q.agent_ids := pgmem._filter_strings(p_filters, 'agent_id');
  q.session_ids := pgmem._filter_strings(p_filters, 'session_id');
  q.whos := pgmem._filter_strings(p_filters, 'who');
  q.categories := pgmem._filter_strings(p_filters, 'category');
  q.tiers := pgmem._filter_strings(p_filters, 'tier');
  q.locations := pgmem._filter_strings(p_filters, 'location');
  q.states := coalesce(pgmem._filter_strings(p_filters, 'state'), array['active']);
  q.created_after := pgmem._filter_time(p_filters, 'created_after');
  q.created_before := pgmem._filter_time(p_filters, 'created_before');
  if p_filters ? 'metadata' then
    if jsonb_typeof(p_filters->'metadata') <> 'object' then
      perform pgmem._bad_input(format('filter "metadata" must be a JSON object (containment), got %s', p_filters->'metadata'));
    end if;
    q.metadata := p_filters->'metadata';
  end if;
  -- reconstructive (issue 16): Fragment content domains, by containment like metadata
  for k in select x from unnest(array['motor', 'sensory']) x where p_filters ? x loop
    if jsonb_typeof(p_filters->k) <> 'object' then
      perform pgmem._bad_input(format('filter "%s" must be a JSON object (containment), got %s', k, p_filters->k));
    end if;
  end loop;
  q.motor := p_filters->'motor';
  q.sensory := p_filters->'sensory';
  -- current_only (issue 24): leave out the memories a newer active one supersedes
  if p_filters ? 'current_only' then
    if jsonb_typeof(p_filters->'current_only') <> 'boolean' then
      perform pgmem._bad_input(format('filter "current_only" must be true or false, got %s', p_filters->'current_only'));
    end if;
    q.current_only := (p_filters->>'current_only')::boolean;
  end if;
  if p_filters ? 'ids' then
    if jsonb_typeof(p_filters->'ids') <> 'array'
       or exists (select 1 from jsonb_array_elements(p_filters->'ids') e where jsonb_typeof(e) <> 'number') then
      perform pgmem._bad_input(format('filter "ids" must be an array of memory ids, got %s', p_filters->'ids'));
    end if;
    q.ids := array(select (jsonb_array_elements_text(p_filters->'ids'))::bigint);
    if cardinality(q.ids) > pgmem._setting_num('max_candidates', 10000) then
      perform pgmem._bad_input(format('filter "ids" lists %s memories, more than max_candidates (%s)', cardinality(q.ids),
                                      pgmem._setting_num('max_candidates', 10000)::bigint));
    end if;
  end if;
  -- exclude_ids, exclude_category (issue 32): memories that are no candidate at all, so that
  -- they shape no other memory's signals either (context_for: the message itself, its history
  -- window, the chat's own questions and answers). Not a restriction of the indexes' walk
  -- (q.filtered): the few they name are dropped where every candidate is checked (_eligible).
  if p_filters ? 'exclude_ids' then
    if jsonb_typeof(p_filters->'exclude_ids') <> 'array'
       or exists (select 1 from jsonb_array_elements(p_filters->'exclude_ids') e where jsonb_typeof(e) <> 'number') then
      perform pgmem._bad_input(format('filter "exclude_ids" must be an array of memory ids, got %s', left((p_filters->'exclude_ids')::text, 200)));
    end if;
    q.not_ids := array(select (jsonb_array_elements_text(p_filters->'exclude_ids'))::bigint);
    if cardinality(q.not_ids) > pgmem._setting_num('max_candidates', 10000) then
      perform pgmem._bad_input(format('filter "exclude_ids" lists %s memories, more than max_candidates (%s)',
                                      cardinality(q.not_ids), pgmem._setting_num('max_candidates', 10000)::bigint));
    end if;
    if cardinality(q.not_ids) = 0 then q.not_ids := null; end if;
  end if;
  q.not_categories := pgmem._filter_strings(p_filters, 'exclude_category');
  q.metadata_path := pgmem._filter_path(p_filters);
  return q;
end $$;

-- ------------------------------------------------------------------ the preamble
-- The weights a query ranks with: a signal the query cannot have (p_missing) weighs 0 and the
-- others are rescaled to sum 1 (one statement; the loop it replaced cost 0.06 ms a call).
create or replace function pgmem._effective_weights(p_weights jsonb, p_missing text[]) returns jsonb
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  total float8 := (select sum(value::text::float8) from jsonb_each(p_weights) where not key = any(p_missing));
begin
  if coalesce(total, 0) <= 0 then
    perform pgmem._bad_input(format('nothing to rank by: the query has no %s, and every other signal has weight 0',
                                    array_to_string(p_missing, ', ')), 'give a query text or embedding');
  end if;
  return (select jsonb_object_agg(key, case when key = any(p_missing) then 0 else value::text::float8 / total end)
            from jsonb_each(p_weights));
end $$;

-- The query record of one call of a ranking (p_ranking: search, activate, recall). Checks the
-- arguments, resolves the profile, its parameters and the effective weights, parses the filters,
-- computes the lexical queries, chooses the candidate branches (sql/203_candidates.sql: a small
-- tenant is scored exactly, q.scan) and sets the HNSW search depth for the index scans of this
-- transaction: ef_search = the candidate pool (pgvector's maximum is 1000; the iterative scan,
-- relaxed order, goes further when filters drop rows).
-- Its cost is part of every search: 1.6 ms p50 before issue 23, mostly the actors a question
-- names (tokens() per actor), the lexicon look-ups (four per lexeme), a dozen settings read one
-- by one and the time phrases; now one read of each (bench/README.md R4).
create or replace function pgmem._query(
  p_ranking text, p_text text, p_embedding public.vector, p_k integer, p_candidates integer,
  p_actor text, p_location text, p_profile text, p_weights jsonb, p_filters jsonb, p_as_of timestamptz,
  p_exact boolean default false)
returns pgmem.query
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  q pgmem.query;
  p pgmem.profiles;
  st jsonb;
  w jsonb;
  v_missing text[] := array[]::text[];
  v_docs bigint;
  v_len bigint;
  v_df bigint[];
  v_all_actors integer;
  v_names text[];
  v_users text[];
  v_recent float8;
  v_max_candidates bigint;
  v_max_chars bigint;
  tw record;
begin
  q.ranking := p_ranking;
  q.tenant := pgmem._require_tenant();
  -- every setting of the tenant, one read (its own values over the installation defaults)
  st := (select jsonb_object_agg(x.key, x.value)
           from (select distinct on (s.key) s.key, s.value from pgmem.settings s
                  where s.tenant in (q.tenant, '*') order by s.key, (s.tenant = '*')) x);
  -- (issue 27, H2 and item 2) every argument bounded before any work, one comparison each, the
  -- limits from st: a 5.5 MB location cost 3.37 GB of backend memory, split per candidate
  perform pgmem._check_read_args(st, p_actor, p_location, p_profile, p_weights, p_filters);
  p := pgmem._profile(coalesce(p_profile, case p_ranking when 'search' then st->>'search_profile'
                                                          when 'activate' then 'shadow' else 'engram' end, 'jam'),
                      p_ranking);
  q.profile := p.name;
  q.params := p.params;
  perform pgmem._check_between(p_k, 'k', 1, 1000);
  v_max_candidates := coalesce((st->>'max_candidates')::float8, 10000)::bigint;
  if p_candidates is not null then  -- NULL: the setting candidate_pool
    perform pgmem._check_between(p_candidates, 'candidates', 1, v_max_candidates);
  end if;
  if (p_text is null or btrim(p_text) = '') and p_embedding is null then
    perform pgmem._bad_input(format('%s needs a query_text, a query_embedding, or both', p_ranking));
  end if;
  v_max_chars := coalesce((st->>'max_query_chars')::float8, 4000)::bigint;
  if char_length(p_text) > v_max_chars then
    perform pgmem._bad_input(format('query_text is %s characters, more than max_query_chars (%s)', char_length(p_text),
                                    v_max_chars),
      'ask with the question (its lexemes and embedding), not a whole document; or raise max_query_chars in pgmem.settings');
  end if;
  q.k := p_k;
  q.exact := coalesce(p_exact, false);
  q.embedding := pgmem._check_embedding(p_embedding, 'query_embedding');
  q.as_of := coalesce(pgmem._check_time(p_as_of, 'as_of', true), now());
  q.query_text := p_text;
  q.actor := p_actor;
  q.location := p_location;
  q.n := greatest(coalesce(p_candidates, coalesce((st->>'candidate_pool')::float8, 100)::int), p_k);
  q.recent_n := 0;
  -- current beats stale (issue 24): a memory a newer active one supersedes scores this share of
  -- its score in every ranking (sql/202_signals.sql, _superseded)
  q.superseded_factor := coalesce((st->>'superseded_factor')::float8, 0.5);
  -- the agent loop's own turns (issue 32): a question or an answer a chat stored keeps this share
  -- of its score, unless the question asks about the conversation itself
  q.conversation_factor := case when pgmem._asks_about_conversation(p_text) then 1
                                else coalesce((st->>'conversation_factor')::float8, 0.5) end;
  q.current_only := false;  -- (the filter sets it: NULL here left every superseded memory out, `not (NULL and true)`)
  if p_filters is null or p_filters = '{}'::jsonb then  -- (most calls: no filter to parse)
    q.states := array['active'];
  else
    q := pgmem._query_filters(q, p_filters);
  end if;
  -- whether anything but the tenant and the state restricts the memories: then the HNSW branch
  -- filters in its (iterative) scan, joined to memories (sql/203_candidates.sql)
  q.filtered := q.ids is not null or q.user_ids is not null or q.agent_ids is not null or q.session_ids is not null
             or q.whos is not null or q.categories is not null or q.tiers is not null or q.locations is not null
             or q.created_after is not null or q.created_before is not null or q.metadata is not null
             or q.motor is not null or q.sensory is not null or q.metadata_path is not null or q.as_of < now();

  -- the words of the question. With params.actor_from_text (and no actor given), the actors it
  -- names (pgmem.query_actors) are matched by the actor signal, and their names leave the
  -- lexical query: a name counts once, and a name that every memory of its speaker would
  -- match does not swamp the words that say what is asked.
  if p_ranking = 'search' and p_actor is null and coalesce((q.params->>'actor_from_text')::boolean, false) and p_text is not null then
    select a.named, a.total, a.users into v_names, v_all_actors, v_users
      from pgmem._query_actors(q.tenant, p_text, case when cardinality(q.user_ids) = 1 then q.user_ids[1] end) a;
    -- an actor signal only tells memories apart when the question names some actors, not all
    if cardinality(v_names) > 0 and cardinality(v_names) < v_all_actors then q.actors := v_names; end if;
    -- the name of the user the call is filtered on tells none of the user's memories apart
    -- (pgmem.query_embedding_text leaves it out of the embedding too)
    v_names := v_names || v_users;
  end if;
  q.lexemes := array(select distinct lex from unnest(tsvector_to_array(to_tsvector('english', coalesce(p_text, '')))) lex
                      where lex <> '' and (cardinality(v_names) is null or cardinality(v_names) = 0
                                           or not lex = any(tsvector_to_array(to_tsvector('english', array_to_string(v_names, ' ')))))
                      order by 1);
  -- lexical statistics of the tenant, or of the one user a filter names (pgmem.lexicon); the
  -- memories counted ('' lexeme) decide whether the candidates come from the indexes or from
  -- every eligible memory (q.scan, sql/203_candidates.sql)
  if cardinality(q.user_ids) = 1 then q.user_scope := q.user_ids[1]; end if;
  select array_agg(d.df order by d.lexeme) filter (where d.lexeme <> ''), max(d.df) filter (where d.lexeme = ''),
         max(d.len) filter (where d.lexeme = '')
    into v_df, v_docs, v_len
    from pgmem._lexicon_df(q.tenant, coalesce('user:' || q.user_scope, ''), q.lexemes || ''::text) d;
  -- BM25's inverse document frequency (Robertson/Spärck Jones with +1 inside the log, so never
  -- negative): ln(1 + (N - df + 0.5) / (df + 0.5)); the terms rarest first (pgmem._jam_bm25 sums
  -- over the first 16)
  -- (df clamped to [0, N]: statistics gone out of step, e.g. rows written with triggers off and
  -- then changed with them on, must not break reads; pgmem.rebuild_lexicon() recounts them)
  v_docs := greatest(v_docs, 0);
  q.docs := v_docs;
  select coalesce(array_agg(pgmem._lexeme_query(t.lex) order by t.idf desc, t.lex), '{}'),
         coalesce(array_agg(t.idf order by t.idf desc, t.lex), '{}')
    into q.terms, q.idf
    from (select x.lex, ln(1 + (v_docs - least(greatest(x.df, 0), v_docs) + 0.5) / (least(greatest(x.df, 0), v_docs) + 0.5)) as idf
            from unnest(q.lexemes, v_df) x(lex, df)) t;
  q.tsq := (select string_agg(t::text, ' | ')::tsquery from unnest(q.terms) t);
  q.avg_len := case when v_docs > 0 then v_len::float8 / v_docs else 1 end;
  -- a tenant (or filtered user) of at most exact_scan_rows memories is scored exactly: every
  -- eligible memory is a candidate, faster than filtering the shared indexes, and exact
  q.scan := not q.exact and v_docs <= coalesce((st->>'exact_scan_rows')::float8, 1000);
  -- a mid-sized one takes its nearest memories exactly, through the b-tree on
  -- memory_vectors(tenant) and a sort, rather than by filtering the HNSW graph every tenant
  -- shares: a tenant of a share s of the graph makes the filtered scan visit ~n/s vectors for the
  -- n it wants, the sort reads its own d; cheaper while d^2 < exact_knn_factor x all vectors
  -- (the factor: the n of the candidate pool times the cost of a graph visit over a sorted
  -- distance, ~2; bench/README.md R7)
  q.exact_knn := not q.exact and not q.scan and p_embedding is not null
                 and v_docs::float8 * v_docs < coalesce((st->>'exact_knn_factor')::float8, 200)
                                               * greatest((select c.reltuples from pg_class c
                                                            where c.oid = 'pgmem.memory_vectors'::regclass), 0);
  q.probe_rows := coalesce((st->>'lexical_probe_rows')::float8, 1000);
  q.probe := case when q.exact or q.scan or q.embedding is null or q.probe_rows <= 0 then q.tsq
                  else pgmem._lexical_probe(q.lexemes, v_df, v_docs, q.probe_rows) end;

  if p_ranking = 'search' then
    -- jam-journalistic-agent-memory.md, Stage 2.3 Score Fusion: the weights of the profile (jam:
    -- JAM's six); a signal the query cannot have is shared out over the others in proportion
    -- (for a given query every memory is scored with the same weights, so the ranking equals
    -- that of a constant neutral value, and scores stay in [0,1])
    w := case when p_weights is null and p.builtin then p.weights  -- checked when the profile was written
              else pgmem.check_weights(coalesce(p_weights, p.weights),
                     array['semantic', 'lexical', 'recency', 'actor', 'spatial', 'usage', 'time', 'session', 'neighbour', 'context']) end;
    w := (select jsonb_object_agg(k, coalesce(w->k, '0'::jsonb))
            from unnest(array['semantic', 'lexical', 'recency', 'actor', 'spatial', 'usage', 'time', 'session', 'neighbour', 'context']) k);
    if (w->>'time')::float8 > 0 then
      select * into tw from pgmem.time_window(p_text, q.as_of) limit 1;
      q.time_from := tw.lo; q.time_to := tw.hi; q.time_month := tw.month; q.time_tau := tw.tau_days;
    end if;
    if q.embedding is null then v_missing := v_missing || array['semantic', 'context']; end if;
    if q.tsq is null then v_missing := v_missing || 'lexical'::text; end if;
    if p_actor is null and q.actors is null then v_missing := v_missing || 'actor'::text; end if;
    if p_location is null then v_missing := v_missing || 'spatial'::text; end if;
    if q.time_tau is null then v_missing := v_missing || 'time'::text; end if;
    w := pgmem._effective_weights(w, v_missing);
    q.w_semantic := w->>'semantic';
    q.w_lexical := w->>'lexical';
    q.w_recency := w->>'recency';
    q.w_actor := w->>'actor';
    q.w_spatial := w->>'spatial';
    q.w_usage := w->>'usage';
    q.w_time := w->>'time';
    q.w_session := w->>'session';
    q.w_neighbour := w->>'neighbour';
    q.w_context := w->>'context';
    q.half_life := q.params->>'recency_half_life_days';
    q.usage_half_life := q.params->>'usage_half_life_days';
    q.actor_mismatch := q.params->>'actor_mismatch';
    q.lexical_mode := coalesce(q.params->>'lexical', 'coverage');
    if q.lexical_mode not in ('coverage', 'rank', 'bm25') then
      perform pgmem._bad_input(format('profile "%s": params.lexical must be "coverage", "rank" or "bm25", got "%s"',
                                      q.profile, q.lexical_mode));
    end if;
    q.bm25_k1 := coalesce((q.params->>'bm25_k1')::float8, 1.2);
    q.bm25_b := coalesce((q.params->>'bm25_b')::float8, 0.75);
    -- BM25 of a memory of average length that holds every term (sql/202_signals.sql, _jam_prior)
    q.bm25_norm := (select sum(x) from unnest(q.idf[1:16]) x) * (q.bm25_k1 + 1) / (1 + q.bm25_k1);
    q.neighbour_links := coalesce(array(select jsonb_array_elements_text(q.params->'neighbour_links')), array['temporal']);
    -- the second neighbour along those links passes on this share of its score (issue 29; 0 or
    -- absent: the first neighbours only, as JAM-style profiles and profiles written before it)
    q.neighbour_far := coalesce((q.params->>'neighbour_far')::float8, 0);
    if q.neighbour_far < 0 or q.neighbour_far > 1 then
      perform pgmem._bad_input(format('profile "%s": params.neighbour_far must be between 0 and 1, got %s', q.profile, q.neighbour_far));
    end if;
    q.max_access := coalesce((select max(m.access_count) from pgmem.memories m where m.tenant = q.tenant), 0);
    q.usage_log := q.params->>'usage' = 'log';
    -- the recent branch: memories younger than recent_window half-lives of the recency signal
    -- (sql/203_candidates.sql); 0 turns it off. The profile's params.recent_window wins over the
    -- setting.
    v_recent := coalesce((q.params->>'recent_window')::float8, (st->>'recent_window')::float8, 1);
    if v_recent > 0 then
      q.recent_n := greatest(1, coalesce((st->>'recent_pool')::float8::int, q.n));
      q.recent_since := q.as_of - make_interval(secs => v_recent * q.half_life * 86400);
    end if;
  elsif p_ranking = 'activate' then
    -- shadow-memory-system.md, Activation Score Formula
    w := pgmem.check_weights(coalesce(p_weights, p.weights), array['embedding', 'metadata', 'summary', 'temporal']);
    q.w_embedding := w->>'embedding';
    q.w_metadata := w->>'metadata';
    q.w_summary := w->>'summary';
    q.w_temporal := w->>'temporal';
    q.half_life := q.params->>'temporal_half_life_days';
  elsif p_ranking = 'recall' then
    -- engram.md, Retrieval & Ranking
    w := pgmem.check_weights(coalesce(p_weights, p.weights), array['relevance', 'importance', 'recency', 'access_frequency']);
    q.w_relevance := w->>'relevance';
    q.w_importance := w->>'importance';
    q.w_recency := w->>'recency';
    q.w_access := w->>'access_frequency';
    q.half_life := q.params->>'half_life_days';
    q.recency_window := q.params->>'recency_window_days';
    q.access_cap := q.params->>'access_cap';
    q.tokens := pgmem.tokens(coalesce(p_text, ''));
  else
    perform pgmem._bad_input(format('unknown ranking "%s"', p_ranking));
  end if;

  if not (q.exact or q.scan or q.exact_knn) then
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true),
            -- a filtered branch (a user's memories, other filters) stops after this many index
            -- tuples (bench/README.md R2)
            set_config('hnsw.max_scan_tuples', coalesce((st->>'hnsw_max_scan_tuples')::float8, 10000)::int::text, true),
            set_config('hnsw.ef_search', least(1000, greatest(q.n, coalesce((st->>'hnsw_ef_search')::float8, 100)::int))::text, true);
  end if;
  return q;
end $$;
comment on function pgmem._query(text, text, vector, integer, integer, text, text, text, jsonb, jsonb, timestamptz, boolean) is
  'The shared preamble of search, search_exact, activate and recall: checks the arguments and returns the typed query record (effective weights, profile parameters, filters, lexical queries, the candidate branches) that the ranking statement reads.';
