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

-- ------------------------------------------------------------------ time in a question
-- The time window of a question (issue 12, item 5; issue 29, item 3: a grammar, tested on
-- phrasings of its own in tests/test_time_window.py): the period a date or a time phrase in
-- it names, as [lo, hi) with a soft edge of tau_days, or a month of any year ("in June").
-- search's time signal is 1 for a memory whose event time (happened_at, else created_at) is
-- inside, and halves every tau_days outside: a boost, never a filter.
--
-- The grammar, over the question lower-cased with number words as digits (pgmem._time_text):
--
--   window  := range | offset | period | "in" MONTH                  (the first that matches)
--   range   := ("between" | "from") period ("and" | "to" | "until" | "through") period
--   offset  := (N | "a" | "the" | "last") (UNIT | WEEKDAY) ("before" | "after" | "prior to" | "following") period
--   period  := the first kind below that occurs, most precise first:
--     iso 2023-07-07 | dmy 7 July, 2023 | mdy July 7th, 2023 | named_year Christmas 2022 |
--     month_part early/mid/late May 2022, the end of May 2022 | week_of the first week of July 2023 |
--     my July 2023 | season_year summer 2021 | dm 7 July, July 7 | named (last|this|next)? Christmas,
--     Easter, Thanksgiving, New Year's Eve, Halloween, ... | decade the 1990s | year 2023 |
--     rel_day yesterday, the day before yesterday, today, last night, tomorrow | ago N UNIT ago |
--     before_last the week before last | past_n the past N UNIT | rel_unit (last|this|next) (week |
--     weekend | month | year | SEASON | WEEKDAY) | weekday (on) Friday | recent recently, lately
--
-- Anchors: a date without a year (7 July, Christmas) is its latest occurrence on or before
-- as_of (with "next", the first after it); relative phrases count from as_of, the day the
-- question is asked (a conversation's session date when the caller passes it); an offset and a
-- range count from the period they name, an offset through it ("two days before 7 July, 2023"
-- is 5-8 July: memories are dated when told; "between August 11 and August 15 2023", where the
-- first date takes the second's year). Soft edges: a day 3.5
-- days (relative days 1), a weekend 2, a week 3.5, a month 7, a season 14, a year 30, a decade
-- 180 (quality-recipe: on LoCoMo's dev file the questions with a date went from R@10 .753 to
-- .92 with this window).

create or replace function pgmem._month(p_name text) returns integer
  language sql immutable parallel safe
  return array_position(array['jan','feb','mar','apr','may','jun','jul','aug','sep','oct','nov','dec'], left(lower(p_name), 3));
comment on function pgmem._month(text) is 'The number of a month from its English name or abbreviation (jan..dec), NULL otherwise.';

-- A question's text as the time grammar reads it: lower case, one space between words, number
-- words as digits ("two weekends ago" -> "2 weekends ago", "a couple of weeks" -> "2 weeks",
-- "a few days" -> "3 days", "a week ago" -> "1 week ago"), apostrophes dropped ("new year's" ->
-- "new years").
create or replace function pgmem._time_text(p_text text) returns text
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return (select coalesce(string_agg(coalesce((jsonb '{"one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
                                                        "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10",
                                                        "eleven": "11", "twelve": "12", "few": "3", "several": "3", "couple": "2"}')->>w, w),
                                     ' ' order by i), '')
            from unnest(regexp_split_to_array(
                   regexp_replace(regexp_replace(regexp_replace(regexp_replace(lower(coalesce(p_text, '')), '[''’.]|\ma (?=few\M)', '', 'g'), ',(?=\S)', ', ', 'g'),
                                                 '\m(a couple of|couple of|a couple)\M', 'couple', 'g'),
                                  '\m(a|an) (day|week|weekend|month|year|decade)', '1 \2', 'g'),
                   '\s+')) with ordinality x(w, i)
           where w <> '');
comment on function pgmem._time_text(text) is
  'A question as the time grammar reads it (pgmem.time_window): lower case, number words as digits, apostrophes dropped.';

-- The date of a named day in a year: Christmas (Eve, Boxing Day), New Year's Day and Eve,
-- Valentine's, St Patrick's, Halloween, Independence Day (the fourth of July), Easter (Sunday;
-- the Gregorian computus, anonymous algorithm), Thanksgiving (US: the fourth Thursday of
-- November), Mother's Day (US: the second Sunday of May), Father's Day (the third Sunday of June).
create or replace function pgmem._named_day(p_name text, p_year integer) returns date
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  n text := regexp_replace(lower(p_name), '^(the|st|saint)\s+|\s+(day|sunday)$', '', 'g');
  a int; b int; c int; d int; e int; f int; g int; h int; i int; k int; l int; m int;
begin
  case
  when n in ('christmas', 'xmas') then return make_date(p_year, 12, 25);
  when n in ('christmas eve', 'xmas eve') then return make_date(p_year, 12, 24);
  when n = 'boxing' then return make_date(p_year, 12, 26);
  when n in ('new years', 'new year') then return make_date(p_year, 1, 1);
  when n in ('new years eve', 'new year eve') then return make_date(p_year, 12, 31);
  when n in ('valentines', 'valentine') then return make_date(p_year, 2, 14);
  when n in ('patricks', 'st patricks', 'patrick') then return make_date(p_year, 3, 17);
  when n = 'halloween' then return make_date(p_year, 10, 31);
  when n in ('independence', 'fourth of july', '4th of july', '4 of july') then return make_date(p_year, 7, 4);
  when n = 'thanksgiving' then  -- the fourth Thursday of November
    return make_date(p_year, 11, 1) + ((4 - extract(isodow from make_date(p_year, 11, 1))::int + 7) % 7) + 21;
  when n in ('mothers', 'mother') then  -- the second Sunday of May (US)
    return make_date(p_year, 5, 1) + ((7 - extract(isodow from make_date(p_year, 5, 1))::int) % 7) + 7;
  when n in ('fathers', 'father') then  -- the third Sunday of June
    return make_date(p_year, 6, 1) + ((7 - extract(isodow from make_date(p_year, 6, 1))::int) % 7) + 14;
  when n = 'easter' then  -- Gregorian computus (Meeus/Jones/Butcher)
    a := p_year % 19; b := p_year / 100; c := p_year % 100; d := b / 4; e := b % 4;
    f := (b + 8) / 25; g := (b - f + 1) / 3; h := (19 * a + b - d - g + 15) % 30;
    i := c / 4; k := c % 4; l := (32 + 2 * e + 2 * i - h - k) % 7; m := (a + 11 * h + 22 * l) / 451;
    return make_date(p_year, (h + l - 7 * m + 114) / 31, ((h + l - 7 * m + 114) % 31) + 1);
  else return null;
  end case;
end $$;
comment on function pgmem._named_day(text, integer) is
  'The date of a named day (Christmas, Christmas Eve, Boxing Day, New Year''s Day/Eve, Valentine''s, St Patrick''s, Halloween, Independence Day, Easter, Thanksgiving, Mother''s Day, Father''s Day) in a year; NULL for a name it does not know.';

-- The kinds of period the grammar knows, most precise first, each with the pattern that finds
-- it in a question (only non-capturing groups: composed into range and offset below).
create or replace function pgmem._time_kinds() returns table (ord integer, kind text, pattern text)
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
begin atomic
  with p(mo, wd, y, d, named, season, unit) as (values (
    '(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)',
    '(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)',
    '(?:19|20)\d\d', '\d{1,2}(?:st|nd|rd|th)?',
    '(?:christmas eve|christmas day|christmas|xmas|new years eve|new years day|new years|new year|halloween|valentines day|valentines|thanksgiving|independence day|fourth of july|4th of july|4 of july|easter sunday|easter|st patricks day|boxing day|mothers day|fathers day)',
    '(?:spring|summer|autumn|fall|winter)', '(?:day|week|weekend|month|year|decade)s?'))
  select x.ord, x.kind, x.pattern from p cross join lateral (values
    (1, 'iso', '\d{4}-\d{2}-\d{2}'),
    (2, 'dmy', p.d || ' (?:of )?' || p.mo || ',? ' || p.y),
    (3, 'mdy', p.mo || ' ' || p.d || ',? ' || p.y),
    (4, 'named_year', p.named || ',? (?:of |in )?' || p.y),
    (5, 'month_part', '(?:early|mid|late|the (?:beginning|start|middle|end) of) ' || p.mo || ',? (?:of )?' || p.y),
    (6, 'week_of', '(?:the )?(?:first|1st|second|2nd|third|3rd|fourth|4th|last) week of ' || p.mo || '(?:,? (?:of )?' || p.y || ')?'),
    (7, 'my', p.mo || ',? (?:of )?' || p.y),
    (8, 'season_year', p.season || ',? (?:of )?' || p.y),
    (9, 'dm', p.d || ' (?:of )?' || p.mo || '|' || p.mo || ' ' || p.d || '(?!\d)'),
    (10, 'named', '(?:(?:last|this|next) )?' || p.named),
    (11, 'decade', '(?:the )?(?:19|20)?\d0s'),
    (12, 'year', p.y),
    (13, 'rel_day', 'the day before yesterday|the day after tomorrow|yesterday|today|tonight|this (?:morning|afternoon|evening)|last night|tomorrow'),
    (14, 'ago', '\d{1,4} ' || p.unit || ' ago'),
    (15, 'before_last', '(?:the )?(?:week|weekend|month|year) before last(?! (?:christmas|xmas|new|halloween|valentines|thanksgiving|independence|easter|st|boxing|mothers|fathers|week|weekend|month|year|summer|winter|spring|autumn|fall|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\M)'),
    (16, 'past_n', '(?:past|last|previous) \d{1,4} ' || p.unit),
    (17, 'rel_unit', '(?:earlier |later )?(?:last|this|next|past|previous|coming) (?:week|weekend|month|year|' || p.season || '|' || p.wd || ')'),
    (18, 'weekday', p.wd),
    (19, 'recent', 'recently|lately|the other day|these days'),
    (20, 'month', '(?:in|during|of|since|early|late|mid|around) ' || p.mo || '(?!,? (?:of )?\d{4})')) x(ord, kind, pattern)
  order by x.ord;
end;
comment on function pgmem._time_kinds() is
  'The kinds of period pgmem.time_window knows, most precise first, with the pattern that finds each in a question.';

-- The kinds' patterns as one expression (PostgreSQL keeps 32 compiled expressions per session:
-- one per kind, tried in turn, cost 8 ms a question). Locating the periods without groups is a
-- fast scan (.1 ms); pgmem._time_kind then tells each one's kind (a group per kind cost .2-.6 ms).
-- IMMUTABLE with a constant argument: PL/pgSQL folds it to a constant once per session.
create or replace function pgmem._time_regex(p_kind text) returns text
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return (select case p_kind
                   when 'locate' then '\m(?:' || string_agg(x.pattern, '|' order by x.ord) || ')\M' end
            from pgmem._time_kinds() x);
comment on function pgmem._time_regex(text) is
  'The patterns of pgmem._time_kinds() as one regular expression: locate (every period in a text, no groups).';

create or replace function pgmem._time_kind_names() returns text[]
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return (select array_agg(x.kind order by x.ord) from pgmem._time_kinds() x);
comment on function pgmem._time_kind_names() is 'The kinds of pgmem._time_kinds(), in their order.';

-- The kind of a period the locating expression found (its first kind in pgmem._time_kinds'
-- order whose pattern it is), read with a few short tests: a group per kind over the whole
-- alternation cost .2 ms a period.
create or replace function pgmem._time_kind(p_frag text) returns text
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return case
    when p_frag ~ '^\d{4}-\d{2}-\d{2}$' then 'iso'
    when p_frag ~ '^\d{4}$' then 'year'
    when p_frag ~ ' week of ' then 'week_of'
    when p_frag ~ '^(early|mid|late|the (beginning|start|middle|end) of) .*\d{4}$' then 'month_part'
    when p_frag ~ '(christmas|xmas|new year|halloween|valentine|thanksgiving|independence|(fourth|4th|4) of july|easter|patrick|boxing|mothers|fathers)' then
      case when p_frag ~ '\d{4}$' then 'named_year' else 'named' end
    when p_frag ~ '^(spring|summer|autumn|fall|winter),? (of )?\d{4}$' then 'season_year'
    when p_frag ~ '^\d{1,2}(st|nd|rd|th)? (of )?[a-z]+,? \d{4}$' then 'dmy'
    when p_frag ~ '^[a-z]+ \d{1,2}(st|nd|rd|th)?,? \d{4}$' then 'mdy'
    when p_frag ~ '^[a-z]+,? (of )?\d{4}$' then 'my'
    when p_frag ~ '^\d{1,2}(st|nd|rd|th)? (of )?[a-z]+$|^[a-z]+ \d{1,2}(st|nd|rd|th)?$' then 'dm'
    when p_frag ~ '0s$' then 'decade'
    when p_frag in ('the day before yesterday', 'the day after tomorrow', 'yesterday', 'today', 'tonight', 'this morning',
                    'this afternoon', 'this evening', 'last night', 'tomorrow') then 'rel_day'
    when p_frag ~ ' ago$' then 'ago'
    when p_frag ~ ' before last$' then 'before_last'
    when p_frag ~ '^(past|last|previous) \d' then 'past_n'
    when p_frag ~ '^(earlier |later )?(last|this|next|past|previous|coming) ' then 'rel_unit'
    when p_frag in ('monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday') then 'weekday'
    when p_frag in ('recently', 'lately', 'the other day', 'these days') then 'recent'
    else 'month' end;
comment on function pgmem._time_kind(text) is
  'The kind (pgmem._time_kinds) of a period the time grammar located in a question.';

-- One period of the grammar, resolved: p_frag is the text a kind's pattern matched
-- (pgmem._time_kinds), p_today the day the question is asked; p_year the year of a date
-- without one when a range gives it ("between August 11 and August 15 2023").
create or replace function pgmem._time_period(p_kind text, p_frag text, p_today date, p_year integer default null,
                                              out lo date, out hi date, out tau_days float8, out month integer, out phrase text)
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  mo constant text := '(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)';
  wds constant text[] := array['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'];
  f text := p_frag;
  m text[];
  y int;
  n int;
  d date;
  unit text;
  wk date := date_trunc('week', p_today)::date;  -- Monday of the week of p_today
begin
  phrase := f;
  -- (a date that does not exist, "31 June", "2023-13-45", or one out of PostgreSQL's range, "99999
  -- years ago": no window, never an error)
  begin
  case p_kind
  when 'iso' then
    m := regexp_match(f, '(\d{4})-(\d{2})-(\d{2})');
    lo := make_date(m[1]::int, m[2]::int, m[3]::int); hi := lo + 1; tau_days := 3.5;
  when 'dmy', 'mdy', 'dm' then
    m := regexp_match(f, '(\d{1,2})(?:st|nd|rd|th)? (?:of )?' || mo || '(?:,? (\d{4}))?');
    if m is not null then
      n := m[1]::int; y := m[3]::int; d := make_date(2000, pgmem._month(m[2]), 1);
    else
      m := regexp_match(f, mo || ' (\d{1,2})(?:st|nd|rd|th)?(?:,? (\d{4}))?');
      n := m[2]::int; y := m[3]::int; d := make_date(2000, pgmem._month(m[1]), 1);
    end if;
    if n < 1 or n > 31 then return; end if;
    y := coalesce(y, p_year);
    if y is null then  -- no year: its latest occurrence on or before the day of the question
      y := extract(year from p_today)::int;
      if make_date(y, extract(month from d)::int, least(n, 28)) > p_today then y := y - 1; end if;
    end if;
    begin
      lo := make_date(y, extract(month from d)::int, n);
    exception when others then return;  -- 31 June
    end;
    hi := lo + 1; tau_days := 3.5;
  when 'named_year', 'named' then
    m := regexp_match(f, '^(?:(last|this|next) )?(.*?)(?:,? (?:of |in )?(\d{4}))?$');
    y := coalesce(m[3]::int, p_year);
    if y is not null then
      lo := pgmem._named_day(m[2], y);
    elsif m[1] = 'next' then
      lo := pgmem._named_day(m[2], extract(year from p_today)::int);
      if lo <= p_today then lo := pgmem._named_day(m[2], extract(year from p_today)::int + 1); end if;
    else  -- (last) Christmas: the latest one on or before the day of the question
      lo := pgmem._named_day(m[2], extract(year from p_today)::int);
      if lo > p_today or (m[1] = 'last' and lo = p_today) then lo := pgmem._named_day(m[2], extract(year from p_today)::int - 1); end if;
    end if;
    if lo is null then return; end if;
    hi := lo + 1; tau_days := 3.5;
  when 'month_part' then
    m := regexp_match(f, '^(early|mid|late|the beginning of|the start of|the middle of|the end of) ' || mo || ',? (?:of )?(\d{4})');
    d := make_date(m[3]::int, pgmem._month(m[2]), 1);
    case when m[1] in ('early', 'the beginning of', 'the start of') then lo := d; hi := d + 10;
         when m[1] in ('mid', 'the middle of') then lo := d + 10; hi := d + 20;
         else lo := d + 20; hi := (d + interval '1 month')::date; end case;
    tau_days := 7;  -- (what happened early in a month is often told later in it)
  when 'week_of' then
    m := regexp_match(f, '(first|1st|second|2nd|third|3rd|fourth|4th|last) week of ' || mo || '(?:,? (?:of )?(\d{4}))?');
    if m[3] is null and p_year is null then  -- no year: that month of any year, as "in November" (LoCoMo dev:
      month := pgmem._month(m[2]); tau_days := 7;  -- the latest November ranked the answer 44th, any November 5th)
      return;
    end if;
    y := coalesce(m[3]::int, p_year);
    d := make_date(y, pgmem._month(m[2]), 1);
    if m[1] = 'last' then
      hi := (d + interval '1 month')::date; lo := hi - 7;
    else
      lo := d + 7 * (case when m[1] in ('first', '1st') then 0 when m[1] in ('second', '2nd') then 1
                          when m[1] in ('third', '3rd') then 2 else 3 end);
      hi := lo + 7;
    end if;
    tau_days := 3.5;
  when 'my' then
    m := regexp_match(f, mo || ',? (?:of )?(\d{4})');
    lo := make_date(m[2]::int, pgmem._month(m[1]), 1); hi := (lo + interval '1 month')::date; tau_days := 7;
  when 'season_year' then
    m := regexp_match(f, '(spring|summer|autumn|fall|winter),? (?:of )?(\d{4})');
    -- northern hemisphere, meteorological: winter 2021 is December 2021 to February 2022
    lo := make_date(m[2]::int, case m[1] when 'spring' then 3 when 'summer' then 6 when 'winter' then 12 else 9 end, 1);
    hi := (lo + interval '3 months')::date; tau_days := 14;
  when 'decade' then
    m := regexp_match(f, '(19|20)?(\d)0s');
    y := coalesce(m[1], case when m[2]::int <= (extract(year from p_today)::int % 100) / 10 then '20' else '19' end)::int * 100
         + m[2]::int * 10;
    lo := make_date(y, 1, 1); hi := make_date(y + 10, 1, 1); tau_days := 180;
  when 'year' then
    lo := make_date(f::int, 1, 1); hi := make_date(f::int + 1, 1, 1); tau_days := 30;
  when 'rel_day' then
    n := case f when 'the day before yesterday' then -2 when 'yesterday' then -1 when 'last night' then -1
                when 'tomorrow' then 1 when 'the day after tomorrow' then 2 else 0 end;
    lo := p_today + n; hi := lo + 1; tau_days := 1;
  when 'ago' then
    m := regexp_match(f, '(\d+) (day|week|weekend|month|year|decade)s? ago');
    n := m[1]::int; unit := m[2];
    case unit
    when 'day' then lo := p_today - n; hi := lo + 1; tau_days := 1;
    when 'week' then d := p_today - 7 * n; lo := d - 3; hi := d + 4; tau_days := 3.5;
    when 'weekend' then  -- the weekend n weekends back: last weekend is 1 weekend ago
      lo := p_today - (extract(isodow from p_today)::int % 7 + 1) - 7 * (n - 1); hi := lo + 2; tau_days := 2;
    when 'month' then d := (p_today - make_interval(months => n))::date; lo := d - 15; hi := d + 15; tau_days := 7;
    when 'year' then d := (p_today - make_interval(years => n))::date; lo := d - 182; hi := d + 183; tau_days := 30;
    else d := (p_today - make_interval(years => 10 * n))::date; lo := d - 1826; hi := d + 1826; tau_days := 180;
    end case;
  when 'before_last' then
    m := regexp_match(f, '(week|weekend|month|year) before last');
    case m[1]
    when 'week' then lo := wk - 14; hi := wk - 7; tau_days := 3.5;
    when 'weekend' then lo := p_today - (extract(isodow from p_today)::int % 7 + 1) - 7; hi := lo + 2; tau_days := 2;
    when 'month' then lo := (date_trunc('month', p_today) - interval '2 months')::date; hi := (lo + interval '1 month')::date; tau_days := 7;
    else lo := (date_trunc('year', p_today) - interval '2 years')::date; hi := (lo + interval '1 year')::date; tau_days := 30;
    end case;
  when 'past_n' then
    m := regexp_match(f, '(\d+) (day|week|weekend|month|year|decade)s?');
    n := m[1]::int; unit := m[2];
    hi := p_today + 1;
    lo := case unit when 'day' then p_today - n when 'week' then p_today - 7 * n when 'weekend' then p_today - 7 * n
                    when 'month' then (p_today - make_interval(months => n))::date
                    when 'year' then (p_today - make_interval(years => n))::date
                    else (p_today - make_interval(years => 10 * n))::date end;
    tau_days := case unit when 'day' then 1 when 'week' then 3.5 when 'weekend' then 3.5 when 'month' then 7
                          when 'year' then 30 else 180 end;
  when 'rel_unit' then
    m := regexp_match(f, '(last|this|next|past|previous|coming) (\w+)');
    n := case m[1] when 'this' then 0 when 'next' then 1 when 'coming' then 1 else -1 end;
    unit := m[2];
    if unit = 'week' then
      lo := wk + 7 * n; hi := lo + 7; tau_days := 3.5;
    elsif unit = 'weekend' then
      if n < 0 then lo := p_today - (extract(isodow from p_today)::int % 7 + 1);  -- the last Saturday before today
      else lo := wk + 5 + 7 * n; end if;
      hi := lo + 2; tau_days := 2;
    elsif unit = 'month' then
      lo := (date_trunc('month', p_today) + make_interval(months => n))::date; hi := (lo + interval '1 month')::date; tau_days := 7;
    elsif unit = 'year' then
      lo := (date_trunc('year', p_today) + make_interval(years => n))::date; hi := (lo + interval '1 year')::date; tau_days := 30;
    elsif unit = any(wds) then
      n := array_position(wds, unit);  -- isodow
      if m[1] = 'this' then lo := wk + n - 1;
      elsif m[1] in ('next', 'coming') then lo := p_today + ((n - extract(isodow from p_today)::int + 6) % 7) + 1;
      else lo := p_today - ((extract(isodow from p_today)::int - n + 6) % 7) - 1; end if;  -- the latest before today
      hi := lo + 1; tau_days := 1;
    else  -- a season: this one (the occurrence that contains today, or this year's), the last
          -- one that ended before today, the next one that starts after it
      y := extract(year from p_today)::int;
      d := make_date(y, case unit when 'spring' then 3 when 'summer' then 6 when 'winter' then 12 else 9 end, 1);
      if unit = 'winter' and extract(month from p_today) < 3 then d := make_date(y - 1, 12, 1); end if;
      if n < 0 then
        while (d + interval '3 months')::date > p_today loop d := (d - interval '1 year')::date; end loop;
      elsif n > 0 then
        while d <= p_today loop d := (d + interval '1 year')::date; end loop;
      end if;
      lo := d; hi := (d + interval '3 months')::date; tau_days := 14;
    end if;
  when 'weekday' then
    n := array_position(wds, f);
    lo := p_today - ((extract(isodow from p_today)::int - n + 6) % 7) - 1; hi := lo + 1; tau_days := 1;
  when 'recent' then
    lo := p_today - 30; hi := p_today + 1; tau_days := 7;
  when 'month' then
    m := regexp_match(f, mo);
    month := pgmem._month(m[1]); tau_days := 7;
  else
    return;
  end case;
  exception when datetime_field_overflow or numeric_value_out_of_range or invalid_datetime_format
                   or invalid_parameter_value then
    lo := null; hi := null; tau_days := null; month := null;
  end;
end $$;
comment on function pgmem._time_period(text, text, date, integer) is
  'One period of the time grammar (pgmem.time_window) resolved to [lo, hi) and its soft edge: p_kind one of pgmem._time_kinds(), p_frag the text its pattern matched, p_today the day of the question, p_year the year of a date without one (a range''s).';


-- The period of the grammar a question means, of those located in it (p_frags, pgmem.time_window):
-- the one of the most precise kind (pgmem._time_kinds' order), resolved (pgmem._time_period);
-- a month of any year only when nothing more precise is named.
create or replace function pgmem._time_window_first(p_frags text[], p_today date,
                                                    out lo date, out hi date, out tau_days float8, out month integer,
                                                    out phrase text)
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  kinds constant text[] := pgmem._time_kind_names();
  frag text;
  kind text;
  i int;
  best int := 0;
  r record;
begin
  foreach frag in array p_frags loop
    kind := pgmem._time_kind(frag);
    i := array_position(kinds, kind);
    if best = 0 or i < best then
      r := pgmem._time_period(kind, frag, p_today);
      if r.lo is not null or r.month is not null then
        best := i; lo := r.lo; hi := r.hi; tau_days := r.tau_days; month := r.month; phrase := r.phrase;
      end if;
    end if;
  end loop;
end $$;
comment on function pgmem._time_window_first(text[], date) is
  'Of the periods the time grammar located in a question, the one of the most precise kind (pgmem._time_kinds), resolved.';

create or replace function pgmem.time_window(p_text text, p_as_of timestamptz default now())
returns table (lo timestamptz, hi timestamptz, tau_days float8, month integer, phrase text)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
  set timezone = 'UTC'  -- dates in a question are read as UTC days
as $$
declare
  t text;
  today date := (coalesce(p_as_of, now()) at time zone 'UTC')::date;
  locate constant text := pgmem._time_regex('locate');
  frags text[] := '{}'::text[];
  starts int[] := '{}'::int[];
  f text;
  at int := 1;
  i int;
  m text[];
  p record;
  p1 record;
  n int;
  unit text;
begin
  -- sizes first (issue 27): the whole check only past the one comparison (_check_args costs
  -- ~0.2 ms, and _query calls this for every question that names a time)
  if char_length(p_text) > pgmem._setting_num('max_query_chars', 4000) then
    perform pgmem._check_args('time_window', jsonb_build_object('p_text', p_text));
  end if;
  -- most questions name no time: one test of the words every phrase needs before the grammar
  if coalesce(p_text, '') !~* '\d|yesterday|today|tonight|tomorrow|morning|night|week|month|year|ago|recent|lately|day|spring|summer|autumn|fall|winter|christmas|xmas|easter|halloween|valentine|thanksgiving|july|\m(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|couple|few|several|jan|feb|mar|apr|may|jun|aug|sep|sept|oct|nov|dec)' then
    return;
  end if;
  t := pgmem._time_text(p_text);
  -- the periods the question names, in order, with where each starts
  for f in select x[1] from regexp_matches(t, locate, 'g') x loop
    i := strpos(substr(t, at), f) + at - 1;
    frags := frags || f; starts := starts || i; at := i + length(f);
  end loop;
  if cardinality(frags) = 0 then
    return;
  end if;
  -- range: (between | from) <period> (and | to | until | through) <period>; the first takes the
  -- second's year when it has none
  for i in 1 .. cardinality(frags) - 1 loop
    if substr(t, 1, starts[i] - 1) ~ '\m(between|from) $'
       and substr(t, starts[i] + length(frags[i]), starts[i + 1] - starts[i] - length(frags[i])) ~ '^ (and|to|until|till|through|-) $'
       and pgmem._time_kind(frags[i]) <> 'month' and pgmem._time_kind(frags[i + 1]) <> 'month' then
      p := pgmem._time_period(pgmem._time_kind(frags[i + 1]), frags[i + 1], today);
      if p.lo is not null then
        p1 := pgmem._time_period(pgmem._time_kind(frags[i]), frags[i], today,
                                 case when frags[i] !~ '\d{4}' then extract(year from p.lo)::int end);
        if p1.lo is not null and p1.lo < p.hi then
          return query select p1.lo::timestamptz, p.hi::timestamptz, least(p1.tau_days, p.tau_days), null::int,
                              'from ' || p1.phrase || ' to ' || p.phrase;
          return;
        end if;
      end if;
    end if;
  end loop;
  -- offset: (N | a | the | last) unit (before | after | prior to | following) <period>, through the
  -- period: "two weeks before August 11, 2023" is [July 28, August 12). A memory is dated when it
  -- was told (a conversation's session), and the period a question anchors on is most often that
  -- day ("I got a puppy two weeks ago", said on August 11): on LoCoMo's dev file a window that
  -- stopped at the anchor lowered temporal R@10 by .006. A weekday as the unit ("the Sunday
  -- before October 25, 2022") is the latest one before the period.
  for i in 1 .. cardinality(frags) loop
    m := regexp_match(substr(t, 1, starts[i] - 1),
                      '\m(\d+|the|a|last|first) (day|week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)s? (before|after|prior to|following) $');
    if m is not null and pgmem._time_kind(frags[i]) <> 'month' then
      p := pgmem._time_period(pgmem._time_kind(frags[i]), frags[i], today);
      if p.lo is not null and (m[1] !~ '^\d+$' or length(m[1]) <= 4) then
        n := case when m[1] ~ '^\d+$' then m[1]::int else 1 end;
        unit := m[2];
        begin  -- (an offset beyond PostgreSQL's dates: no window)
        if m[3] in ('before', 'prior to') then
          return query select (case unit when 'day' then p.lo - n when 'week' then p.lo - 7 * n
                                         when 'weekend' then p.lo - (extract(isodow from p.lo)::int % 7 + 1) - 7 * (n - 1)
                                         when 'month' then (p.lo - make_interval(months => n))::date
                                         when 'year' then (p.lo - make_interval(years => n))::date
                                         else p.lo - ((extract(isodow from p.lo)::int
                                                       - array_position(array['monday', 'tuesday', 'wednesday', 'thursday',
                                                                              'friday', 'saturday', 'sunday'], unit) + 6) % 7) - 1
                               end)::timestamptz,
                              p.hi::timestamptz,
                              case unit when 'day' then 1.0 when 'weekend' then 2.0 when 'week' then 3.5 when 'month' then 7.0
                                        when 'year' then 30.0 else 1.0 end::float8,
                              null::int, m[1] || ' ' || unit || ' before ' || p.phrase;
        else
          return query select p.lo::timestamptz,
                              (case unit when 'day' then p.hi + n when 'week' then p.hi + 7 * n when 'weekend' then p.hi + 7 * n
                                         when 'month' then (p.hi + make_interval(months => n))::date
                                         when 'year' then (p.hi + make_interval(years => n))::date
                                         else p.hi + ((array_position(array['monday', 'tuesday', 'wednesday', 'thursday',
                                                                            'friday', 'saturday', 'sunday'], unit)
                                                       - extract(isodow from p.hi)::int + 7) % 7) + 1
                               end)::timestamptz,
                              case unit when 'day' then 1.0 when 'weekend' then 2.0 when 'week' then 3.5 when 'month' then 7.0
                                        when 'year' then 30.0 else 1.0 end::float8,
                              null::int, m[1] || ' ' || unit || ' after ' || p.phrase;
        end if;
        exception when datetime_field_overflow then
          null;
        end;
        return;
      end if;
    end if;
  end loop;
  -- a period: the most precise kind named (or a month of any year)
  p := pgmem._time_window_first(frags, today);
  if p.lo is not null or p.month is not null then
    return query select p.lo::timestamptz, p.hi::timestamptz, p.tau_days, p.month, p.phrase;
  end if;
end $$;
comment on function pgmem.time_window(text, timestamptz) is
  'The time window a question names, by a grammar (a range, an offset from a period, or a period: a date, a named day such as Christmas or Easter, a month, a season, a year, a decade, or a phrase relative to as_of such as "two weekends ago" or "last summer"): lo, hi, tau_days (the soft edge) or a month of any year, and the phrase understood. search() boosts memories whose event time falls inside.';

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
