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
    if cardinality(q.ids) > pgmem._setting_num('max_candidates', 10000) then
      perform pgmem._bad_input(format('filter "ids" lists %s memories, more than max_candidates (%s)', cardinality(q.ids),
                                      pgmem._setting_num('max_candidates', 10000)::bigint));
    end if;
  end if;
  return q;
end $$;

-- ------------------------------------------------------------------ time in a question
create or replace function pgmem._month(p_name text) returns integer
  language sql immutable parallel safe
  return array_position(array['jan','feb','mar','apr','may','jun','jul','aug','sep','oct','nov','dec'], left(lower(p_name), 3));
comment on function pgmem._month(text) is 'The number of a month from its English name or abbreviation (jan..dec), NULL otherwise.';

-- The time window of a question (issue 12, item 5): the period a date or a relative time phrase
-- in it names, as [lo, hi) with a soft edge of tau_days, or a month of any year ("in June").
-- search's time signal is 1 for a memory whose event time (happened_at, else created_at) is
-- inside, and halves every tau_days outside: a boost, never a filter. The first phrase that
-- matches decides, the most precise kind first: a day ("7 July, 2023", "July 7th, 2023",
-- "2023-07-07"; "the week before/after" one), a month of a year ("July 2023"), a season of a
-- year ("summer 2021"), a year ("in 2023"), then phrases relative to as_of: yesterday, today,
-- last weekend, last/this week, last/this month, last/this year, "N days/weeks/months/years ago",
-- recently; then a month alone. Edges: a day 3.5 days, a week 3.5, a month 7, a season 14, a
-- year 30 (quality-recipe: on LoCoMo's dev file the questions with a date went from R@10 .753
-- to .92 with this window).
create or replace function pgmem.time_window(p_text text, p_as_of timestamptz default now())
returns table (lo timestamptz, hi timestamptz, tau_days float8, month integer, phrase text)
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
  set timezone = 'UTC'  -- dates in a question are read as UTC days
as $$
declare
  months constant text := '(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)';
  t text := lower(coalesce(p_text, ''));
  m text[];
  d date;
  today date := (p_as_of at time zone 'UTC')::date;
  n int;
  unit text;
  nums constant jsonb := jsonb '{"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "few": 3, "couple of": 2}';
begin
  perform pgmem._check_args('time_window', jsonb_build_object('p_text', p_text));  -- sizes first (issue 27)
  -- most questions name no time: one test of the words every phrase below needs (a digit, a
  -- month or season, day/week/month/year words, ago, recent) before the dozen patterns
  if t !~ '\d|yesterday|today|tonight|morning|week|month|year|ago|recent|lately|spring|summer|autumn|fall|winter|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec' then
    return;
  end if;
  -- a day: "7 July, 2023", "July 7th, 2023", "on 2023-07-07"
  m := regexp_match(t, '\m(\d{1,2})(?:st|nd|rd|th)?\s+' || months || '\.?,?\s+(\d{4})\M');
  if m is not null then
    d := make_date(m[3]::int, pgmem._month(m[2]), m[1]::int);
  else
    m := regexp_match(t, '\m' || months || '\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\M');
    if m is not null then
      d := make_date(m[3]::int, pgmem._month(m[1]), m[2]::int);
    else
      m := regexp_match(t, '\m(\d{4})-(\d{2})-(\d{2})\M');
      if m is not null then d := make_date(m[1]::int, m[2]::int, m[3]::int); end if;
    end if;
  end if;
  if d is not null then
    -- "the week before August 3, 2023", "two weeks before ...", "after ..."
    if t ~ '\m(before|prior to)\M' then
      return query select (d - 7)::timestamptz, d::timestamptz, 3.5::float8, null::int, 'the week before ' || d::text;
    elsif t ~ '\mafter\M' then
      return query select d::timestamptz, (d + 7)::timestamptz, 3.5::float8, null::int, 'the week after ' || d::text;
    else
      return query select d::timestamptz, (d + 1)::timestamptz, 3.5::float8, null::int, d::text;
    end if;
    return;
  end if;
  -- a month of a year: "July 2023", "in early May 2022"
  m := regexp_match(t, '\m' || months || '\.?,?\s+(?:of\s+)?(\d{4})\M');
  if m is not null then
    d := make_date(m[2]::int, pgmem._month(m[1]), 1);
    return query select d::timestamptz, (d + interval '1 month')::timestamptz, 7.0::float8, null::int, to_char(d, 'Month YYYY');
    return;
  end if;
  -- a season of a year: "summer 2021" (northern hemisphere, meteorological)
  m := regexp_match(t, '\m(spring|summer|autumn|fall|winter)\s+(?:of\s+)?(\d{4})\M');
  if m is not null then
    d := make_date(m[2]::int, case m[1] when 'spring' then 3 when 'summer' then 6 when 'winter' then 12 else 9 end, 1);
    return query select d::timestamptz, (d + interval '3 months')::timestamptz, 14.0::float8, null::int, m[1] || ' ' || m[2];
    return;
  end if;
  -- a year: "in 2023"
  m := regexp_match(t, '\m(19\d{2}|20\d{2})\M');
  if m is not null then
    d := make_date(m[1]::int, 1, 1);
    return query select d::timestamptz, (d + interval '1 year')::timestamptz, 30.0::float8, null::int, m[1];
    return;
  end if;
  -- relative to as_of
  if t ~ '\myesterday\M' then
    return query select (today - 1)::timestamptz, today::timestamptz, 1.0::float8, null::int, 'yesterday'; return;
  elsif t ~ '\mtoday\M|\mtonight\M|\mthis morning\M' then
    return query select today::timestamptz, (today + 1)::timestamptz, 1.0::float8, null::int, 'today'; return;
  elsif t ~ '\mlast weekend\M' then
    d := today - (extract(isodow from today)::int % 7 + 1);  -- the last Saturday before as_of
    return query select d::timestamptz, (d + 2)::timestamptz, 2.0::float8, null::int, 'last weekend'; return;
  elsif t ~ '\mlast week\M' then
    d := date_trunc('week', today)::date - 7;
    return query select d::timestamptz, (d + 7)::timestamptz, 3.5::float8, null::int, 'last week'; return;
  elsif t ~ '\mthis week\M' then
    d := date_trunc('week', today)::date;
    return query select d::timestamptz, (d + 7)::timestamptz, 3.5::float8, null::int, 'this week'; return;
  elsif t ~ '\mlast month\M' then
    d := (date_trunc('month', today) - interval '1 month')::date;
    return query select d::timestamptz, (d + interval '1 month')::timestamptz, 7.0::float8, null::int, 'last month'; return;
  elsif t ~ '\mthis month\M' then
    d := date_trunc('month', today)::date;
    return query select d::timestamptz, (d + interval '1 month')::timestamptz, 7.0::float8, null::int, 'this month'; return;
  elsif t ~ '\mlast year\M' then
    d := (date_trunc('year', today) - interval '1 year')::date;
    return query select d::timestamptz, (d + interval '1 year')::timestamptz, 30.0::float8, null::int, 'last year'; return;
  elsif t ~ '\mthis year\M' then
    d := date_trunc('year', today)::date;
    return query select d::timestamptz, (d + interval '1 year')::timestamptz, 30.0::float8, null::int, 'this year'; return;
  end if;
  m := regexp_match(t, '\m(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of)\s+(day|week|month|year)s?\s+ago\M');
  if m is not null then
    n := coalesce((nums->>m[1])::int, m[1]::int);
    unit := m[2];
    d := (today - make_interval(days => case unit when 'day' then n when 'week' then 7 * n else 0 end,
                                months => case unit when 'month' then n else 0 end,
                                years => case unit when 'year' then n else 0 end))::date;
    return query select (d - case unit when 'day' then 0 when 'week' then 3 when 'month' then 15 else 182 end)::timestamptz,
                        (d + case unit when 'day' then 1 when 'week' then 4 when 'month' then 15 else 183 end)::timestamptz,
                        case unit when 'day' then 1.0 when 'week' then 3.5 when 'month' then 7.0 else 30.0 end::float8,
                        null::int, m[1] || ' ' || unit || case when n = 1 then '' else 's' end || ' ago';
    return;
  end if;
  if t ~ '\mrecent(ly)?\M|\mlately\M' then
    return query select (today - 30)::timestamptz, (today + 1)::timestamptz, 7.0::float8, null::int, 'recently'; return;
  end if;
  -- a month without a year: "in June" (that month of any year)
  m := regexp_match(t, '\m(?:in|during|of|since|early|late|mid)\s+' || months || '\M');
  if m is not null then
    return query select null::timestamptz, null::timestamptz, 7.0::float8, pgmem._month(m[1]), m[1]; return;
  end if;
end $$;
comment on function pgmem.time_window(text, timestamptz) is
  'The time window a question names (a date, a month, a season, a year, or a phrase relative to as_of such as "last week" or "3 days ago"): lo, hi, tau_days (the soft edge) or a month of any year, and the phrase. search() boosts memories whose event time falls inside.';

-- ------------------------------------------------------------------ the preamble
-- The settings of a tenant as one object (its own values over the installation defaults): the
-- preamble reads a dozen settings, one query instead of two per setting (bench/README.md R4).
create or replace function pgmem._settings_of(p_tenant text) returns jsonb
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  return (select jsonb_object_agg(x.key, x.value)
            from (select distinct on (s.key) s.key, s.value from pgmem.settings s
                   where s.tenant in (p_tenant, '*') order by s.key, (s.tenant = '*')) x);
end $$;
comment on function pgmem._settings_of(text) is
  'Every setting of a tenant as one JSON object: its own value where it has one, else the installation default.';

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
  st := pgmem._settings_of(q.tenant);
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
  q := pgmem._query_filters(q, p_filters);
  -- whether anything but the tenant and the state restricts the memories: then the HNSW branch
  -- filters in its (iterative) scan, joined to memories (sql/203_candidates.sql)
  q.filtered := q.ids is not null or q.user_ids is not null or q.agent_ids is not null or q.session_ids is not null
             or q.whos is not null or q.categories is not null or q.tiers is not null or q.locations is not null
             or q.created_after is not null or q.created_before is not null or q.metadata is not null
             or q.motor is not null or q.sensory is not null or q.as_of < now();

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
  -- eligible memory is a candidate, faster than filtering the shared indexes and exact
  q.scan := not q.exact and v_docs <= coalesce((st->>'exact_scan_rows')::float8, 2000);
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
                     array['semantic', 'lexical', 'recency', 'actor', 'spatial', 'usage', 'time', 'session', 'neighbour']) end;
    w := (select jsonb_object_agg(k, coalesce(w->k, '0'::jsonb))
            from unnest(array['semantic', 'lexical', 'recency', 'actor', 'spatial', 'usage', 'time', 'session', 'neighbour']) k);
    if (w->>'time')::float8 > 0 then
      select * into tw from pgmem.time_window(p_text, q.as_of) limit 1;
      q.time_from := tw.lo; q.time_to := tw.hi; q.time_month := tw.month; q.time_tau := tw.tau_days;
    end if;
    if q.embedding is null then v_missing := v_missing || 'semantic'::text; end if;
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

  if not (q.exact or q.scan) then
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
