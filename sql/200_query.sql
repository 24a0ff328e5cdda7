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
  return nullif(replace(plainto_tsquery('english', coalesce(p_text, ''))::text, ' & ', ' | '), '')::tsquery;
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
  return array(select distinct pgmem._lexeme_query(lex)
                 from unnest(tsvector_to_array(to_tsvector('english', coalesce(p_text, '')))) lex
                where lex <> '' order by 1);
comment on function pgmem.query_terms(text) is
  'The distinct English lexemes of a text, one single-term tsquery each: the lexical signal is the share of them a memory contains.';

-- ------------------------------------------------------------------ profiles and weights
create or replace function pgmem._profile(p_name text, p_method text) returns pgmem.profiles
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
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
  set search_path = pgmem, public, pg_temp
as $$
declare
  k text;
  v jsonb;
  total numeric := 0;
begin
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

-- Zero the weights of signals the query cannot have, and rescale the rest to sum to 1.
create or replace function pgmem._effective_weights(p_weights jsonb, p_missing text[]) returns jsonb
  language plpgsql immutable
  set search_path = pgmem, public, pg_temp
as $$
declare
  total float8;
  r jsonb := '{}';
  k text;
  v jsonb;
begin
  select sum((value::text)::float8) into total from jsonb_each(p_weights) where not key = any(p_missing);
  if coalesce(total, 0) <= 0 then
    perform pgmem._bad_input(format('nothing to rank by: the query has no %s, and every other signal has weight 0',
                                    array_to_string(p_missing, ', ')), 'give a query text or embedding');
  end if;
  for k, v in select * from jsonb_each(p_weights) loop
    r := r || jsonb_build_object(k, case when k = any(p_missing) then 0 else (v::text)::float8 / total end);
  end loop;
  return r;
end $$;

-- ------------------------------------------------------------------ filters
-- A filter value that names one or several strings, as an array (NULL when the key is absent).
create or replace function pgmem._filter_strings(p_filters jsonb, p_key text) returns text[]
  language plpgsql immutable
  set search_path = pgmem, public, pg_temp
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
  set search_path = pgmem, public, pg_temp
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

-- The filters object of a call as fields of its query record. Memories in other states than
-- 'active' (archived, deleted, merged) only on request.
create or replace function pgmem._query_filters(q pgmem.query, p_filters jsonb) returns pgmem.query
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
as $$
declare k text;
begin
  p_filters := coalesce(p_filters, '{}');
  if jsonb_typeof(p_filters) <> 'object' then
    perform pgmem._bad_input(format('filters must be a JSON object, got %s', jsonb_typeof(p_filters)));
  end if;
  for k in select jsonb_object_keys(p_filters) loop
    if k not in ('user_id', 'agent_id', 'session_id', 'who', 'category', 'tier', 'state', 'location',
                 'created_after', 'created_before', 'metadata', 'ids', 'motor', 'sensory') then
      perform pgmem._bad_input(format('unknown filter "%s"', k),
        'filters: user_id, agent_id, session_id, who, category, tier, state, location (string or array), created_after, created_before (timestamp), metadata, motor, sensory (object, containment), ids (array)');
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
  if p_filters ? 'ids' then
    if jsonb_typeof(p_filters->'ids') <> 'array'
       or exists (select 1 from jsonb_array_elements(p_filters->'ids') e where jsonb_typeof(e) <> 'number') then
      perform pgmem._bad_input(format('filter "ids" must be an array of memory ids, got %s', p_filters->'ids'));
    end if;
    q.ids := array(select (jsonb_array_elements_text(p_filters->'ids'))::bigint);
  end if;
  return q;
end $$;

-- ------------------------------------------------------------------ the preamble
-- The query record of one call of a ranking (p_ranking: search, activate, recall). Checks the
-- arguments, resolves the profile, its parameters and the effective weights, parses the filters,
-- computes the lexical queries, and sets the HNSW search depth for the index scans of this
-- transaction: ef_search = the candidate pool (pgvector's maximum is 1000; the iterative scan,
-- relaxed order, goes further when filters drop rows).
create or replace function pgmem._query(
  p_ranking text, p_text text, p_embedding vector, p_k integer, p_candidates integer,
  p_actor text, p_location text, p_profile text, p_weights jsonb, p_filters jsonb, p_as_of timestamptz,
  p_exact boolean default false)
returns pgmem.query
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare
  q pgmem.query;
  p pgmem.profiles;
  w jsonb;
  v_missing text[] := array[]::text[];
begin
  q.ranking := p_ranking;
  q.tenant := pgmem._require_tenant();
  p := pgmem._profile(coalesce(p_profile, case p_ranking when 'search' then 'jam' when 'activate' then 'shadow'
                                                          else 'engram' end), p_ranking);
  q.profile := p.name;
  q.params := p.params;
  perform pgmem._check_between(p_k, 'k', 1, 1000);
  if p_candidates is not null then  -- NULL: the setting candidate_pool
    perform pgmem._check_between(p_candidates, 'candidates', 1, 100000);
  end if;
  if (p_text is null or btrim(p_text) = '') and p_embedding is null then
    perform pgmem._bad_input(format('%s needs a query_text, a query_embedding, or both', p_ranking));
  end if;
  q.k := p_k;
  q.exact := coalesce(p_exact, false);
  q.embedding := pgmem._check_embedding(p_embedding, 'query_embedding');
  q.as_of := coalesce(pgmem._check_time(p_as_of, 'as_of', true), now());
  q.query_text := p_text;
  q.tsq := pgmem.query_tsquery(p_text);
  q.lexemes := array(select distinct lex from unnest(tsvector_to_array(to_tsvector('english', coalesce(p_text, '')))) lex
                      where lex <> '' order by 1);
  q.probe := case when q.exact then q.tsq else pgmem._candidate_tsquery(p_text, q.embedding) end;
  q.actor := p_actor;
  q.location := p_location;
  q.n := greatest(coalesce(p_candidates, pgmem._setting_num('candidate_pool', 100)::int), p_k);
  q.recent_n := 0;
  q := pgmem._query_filters(q, p_filters);

  if p_ranking = 'search' then
    -- jam-journalistic-agent-memory.md, Stage 2.3 Score Fusion: the six weights of the profile;
    -- a signal the query cannot have is shared out over the others in proportion (for a given
    -- query every memory is scored with the same weights, so the ranking equals that of a
    -- constant neutral value, and scores stay in [0,1])
    w := pgmem.check_weights(coalesce(p_weights, p.weights),
                             array['semantic', 'lexical', 'recency', 'actor', 'spatial', 'usage']);
    if q.embedding is null then v_missing := v_missing || 'semantic'::text; end if;
    if q.tsq is null then v_missing := v_missing || 'lexical'::text; end if;
    if p_actor is null then v_missing := v_missing || 'actor'::text; end if;
    if p_location is null then v_missing := v_missing || 'spatial'::text; end if;
    w := pgmem._effective_weights(w, v_missing);
    q.w_semantic := w->>'semantic';
    q.w_lexical := w->>'lexical';
    q.w_recency := w->>'recency';
    q.w_actor := w->>'actor';
    q.w_spatial := w->>'spatial';
    q.w_usage := w->>'usage';
    q.half_life := q.params->>'recency_half_life_days';
    q.usage_half_life := q.params->>'usage_half_life_days';
    q.actor_mismatch := q.params->>'actor_mismatch';
    q.lexical_mode := coalesce(q.params->>'lexical', 'coverage');
    q.max_access := coalesce((select max(m.access_count) from pgmem.memories m where m.tenant = q.tenant), 0);
    -- the recent branch: memories younger than recent_window half-lives of the recency signal
    -- (sql/203_candidates.sql); 0 turns it off
    if pgmem._setting_num('recent_window', 1) > 0 then
      q.recent_n := greatest(1, coalesce(pgmem._setting_num('recent_pool')::int, q.n));
      q.recent_since := q.as_of - make_interval(secs => pgmem._setting_num('recent_window', 1) * q.half_life * 86400);
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

  if not q.exact then
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
    perform set_config('hnsw.ef_search', least(1000, greatest(q.n, pgmem._setting_num('hnsw_ef_search', 100)::int))::text, true);
  end if;
  return q;
end $$;
comment on function pgmem._query(text, text, vector, integer, integer, text, text, text, jsonb, jsonb, timestamptz, boolean) is
  'The shared preamble of search, search_exact, activate and recall: checks the arguments and returns the typed query record (effective weights, profile parameters, filters, lexical queries) that the ranking statement reads.';
