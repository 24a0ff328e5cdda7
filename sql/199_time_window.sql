-- The read path, part 0: the time a question names (issue 37: the English date grammar in a
-- file of its own, before the query record that reads it; sql/200_query.sql lists the parts).

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
