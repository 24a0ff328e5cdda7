-- pgmem idempotent layer: utilities used by every other file (settings, errors, size limits,
-- text helpers, validation; tenancy is sql/005_tenancy.sql).
-- Re-applied after every upgrade (create or replace only). Load order = file name order.
--
-- Convention: API functions pin search_path (pgmem, pg_catalog, pg_temp) and name pgvector's
-- objects by their schema: public.vector, operator(public.<=>), public.l2_normalize() (issue
-- 28; tests/test_codebase.py checks the catalog). Tiny pure-math SQL helpers that run once per
-- row are left unpinned so the planner can inline them; they reference only pg_catalog
-- built-ins and schema-qualified pgmem and pgvector objects.

-- ------------------------------------------------------------------ settings
-- The tenant (pgmem.current_tenant(): a checked value, not free) is looked up only when some
-- tenant overrides the key: most keys have only the installation's value.
-- (PL/pgSQL, not SQL: a SQL function is planned at every call, and the planner evaluates
-- current_tenant() to estimate the selectivity of the override query even when it never runs.
-- SECURITY DEFINER: it reads only '*' rows and the checked tenant's, and as the owner its
-- queries skip the row-level security policies, which would check the tenant again each.)
create or replace function pgmem._setting(p_key text) returns jsonb
  language plpgsql stable parallel safe security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v jsonb;
begin
  if exists (select 1 from pgmem.settings o where o.key = p_key and o.tenant <> '*') then
    select s.value into v from pgmem.settings s
     where s.key = p_key and s.tenant in (pgmem.current_tenant(), '*')
     order by (s.tenant = '*')  -- a tenant's own value wins over the installation default
     limit 1;
  else
    select s.value into v from pgmem.settings s where s.key = p_key and s.tenant = '*';
  end if;
  return v;
end $$;
comment on function pgmem._setting(text) is 'A setting for the current tenant (its own value, else the installation default).';

create or replace function pgmem._setting_num(p_key text, p_default float8 default null) returns float8
  language sql stable parallel safe
  return coalesce((pgmem._setting(p_key))::text::float8, p_default);

create or replace function pgmem._setting_bool(p_key text) returns boolean
  language sql stable parallel safe
  return coalesce((pgmem._setting(p_key))::text::boolean, false);

-- ------------------------------------------------------------------ errors
-- Volatile, not immutable: an immutable call with constant arguments is evaluated when the
-- statement is planned, so a linter that plans every statement (plpgsql_check) would raise
-- every error message in the code at once.
create or replace function pgmem._bad_input(p_message text, p_hint text default null) returns void
  language plpgsql volatile parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_hint is null then
    raise exception '%', p_message using errcode = '22023';
  end if;
  raise exception '%', p_message using errcode = '22023', hint = p_hint;
end $$;
comment on function pgmem._bad_input(text, text) is 'Raises invalid_parameter_value (22023) with a message for people.';

-- ------------------------------------------------------------------ size limits (issue 27)
-- The errors of the argument limits (sql/015_limits.sql holds the checks and the list of limits).
-- Raises the size error. Immutable (it depends on its arguments only), so that an immutable SQL
-- function may call it in a CASE and still be inlined; it is only reached when a limit is passed.
create or replace function pgmem._too_big(p_arg text, p_size bigint, p_max bigint, p_unit text, p_setting text default null)
returns void
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_setting is null then
    raise exception '% is % %, more than % % (a fixed limit)', p_arg, p_size, p_unit, p_max, p_unit
      using errcode = '22023', hint = format('pass at most %s %s as %s', p_max, p_unit, p_arg);
  end if;
  raise exception '% is % %, more than % (%)', p_arg, p_size, p_unit, p_setting, p_max
    using errcode = '22023',
          hint = format('pass at most %s %s as %s; an admin may change the limit with: update pgmem.settings set value = ''<n>'' where tenant = ''*'' and key = %L',
                        p_max, p_unit, p_arg, p_setting);
end $$;
comment on function pgmem._too_big(text, bigint, bigint, text, text) is
  'Raises 22023: an argument is larger than its limit (naming the argument, its size, the limit and its setting).';

-- For immutable SQL helpers (tokens, jaccard, path_overlap, ...), which read no settings and
-- must stay immutable: `case when octet_length(x) > N then pgmem._over_limit('x', octet_length(x), N, null::T) else ... end`
-- raises, else the helper's own expression runs (one comparison in C on the normal path).
create or replace function pgmem._over_limit(p_arg text, p_size bigint, p_max bigint, p_type anyelement, p_unit text default 'bytes')
returns anyelement
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  -- (raised here, not through _too_big: the reader role may run this, through a view's helper)
  if p_size > p_max then
    raise exception '% is % %, more than % % (a fixed limit)', p_arg, p_size, p_unit, p_max, p_unit
      using errcode = '22023', hint = format('pass at most %s %s as %s', p_max, p_unit, p_arg);
  end if;
  return p_type;
end $$;
comment on function pgmem._over_limit(text, bigint, bigint, anyelement, text) is
  'Raises the size error of pgmem._too_big (a fixed limit); typed like p_type, for a CASE in an immutable SQL helper.';

-- A bad value in an immutable SQL helper: raises 22023 with the message; typed like p_type, for a CASE.
-- Volatile: its arguments are constants, which the planner would fold, raising at plan time.
create or replace function pgmem._invalid(p_message text, p_type anyelement) returns anyelement
  language plpgsql volatile parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_message is not null then
    raise exception '%', p_message using errcode = '22023';
  end if;
  return p_type;
end $$;
comment on function pgmem._invalid(text, anyelement) is 'Raises 22023 with the message (an invalid argument of an immutable SQL helper); typed like p_type.';

-- Whether a text has nothing to read: NULL, or only whitespace and invisible formatting
-- characters (zero-width spaces and joiners, direction marks and isolates, the byte order mark,
-- soft hyphens, variation selectors, fillers). A content of zero-width spaces was stored as a
-- memory that every search then showed blank (issue 27, L3).
create or replace function pgmem._is_blank(p_text text) returns boolean
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return p_text is null
      or p_text !~ '[^[:space:]\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]';
comment on function pgmem._is_blank(text) is
  'True for NULL or a text of only whitespace and invisible formatting characters (zero-width spaces, joiners, direction marks, BOM, ...).';

-- ------------------------------------------------------------------ text helpers
-- Engram's tokenize(): lower-case words, as a set (engram.md, Keyword Novelty).
create or replace function pgmem.tokens(p_text text) returns text[]
  language sql immutable parallel safe strict
  -- (issue 27: a fixed limit, as for every immutable helper; SECURITY.md, "Limits")
  return case when octet_length(p_text) > 1048576 then pgmem._over_limit('p_text', octet_length(p_text), 1048576, null::text[], 'bytes')
              else array(select distinct t from regexp_split_to_table(lower(p_text), '[^[:alnum:]]+') t where t <> '' order by t) end;
comment on function pgmem.tokens(text) is
  'Distinct lower-case alphanumeric tokens of a text, sorted (Engram tokenize; used for Jaccard similarity).';

-- Jaccard similarity J(A,B) = |A ∩ B| / |A ∪ B| (engram.md, Keyword Novelty).
create or replace function pgmem.jaccard(a text[], b text[]) returns float8
  language sql immutable parallel safe
  return case
    when cardinality(a) > 1048576 then pgmem._over_limit('a', cardinality(a), 1048576, null::float8, 'items')
    when cardinality(b) > 1048576 then pgmem._over_limit('b', cardinality(b), 1048576, null::float8, 'items')
    when coalesce(cardinality(a), 0) = 0 and coalesce(cardinality(b), 0) = 0 then 0
    else (select count(*) from (select unnest(a) intersect select unnest(b)) i)::float8
       / (select count(*) from (select unnest(a) union select unnest(b)) u)::float8
  end;
comment on function pgmem.jaccard(text[], text[]) is
  'Jaccard similarity of two token sets, in [0,1]; 0 when both are empty.';

-- Shadow's summary similarity: token overlap (shadow-memory-system.md, SimilarityEngine).
create or replace function pgmem.text_overlap(a text, b text) returns float8
  language sql immutable parallel safe
  return case when octet_length(a) > 1048576 then pgmem._over_limit('a', octet_length(a), 1048576, null::float8, 'bytes')
              when octet_length(b) > 1048576 then pgmem._over_limit('b', octet_length(b), 1048576, null::float8, 'bytes')
              else pgmem.jaccard(pgmem.tokens(coalesce(a, '')), pgmem.tokens(coalesce(b, ''))) end;
comment on function pgmem.text_overlap(text, text) is 'Jaccard similarity of the token sets of two texts.';

-- A token estimate for the context budget when the client gives none: ~4 characters a
-- token for English BPE vocabularies (OpenAI's rule of thumb), at least 1 per word.
create or replace function pgmem.estimate_tokens(p_text text) returns integer
  language sql immutable parallel safe strict
  return case when octet_length(p_text) > 1048576 then pgmem._over_limit('p_text', octet_length(p_text), 1048576, null::integer, 'bytes')
              else greatest(ceil(char_length(p_text) / 4.0)::int,
                            coalesce(array_length(regexp_split_to_array(btrim(p_text), '\s+'), 1), 0)) end;
comment on function pgmem.estimate_tokens(text) is
  'Estimated LLM tokens of a text: max(ceil(chars/4), words). Clients may store an exact count instead.';

-- Cosine similarity from pgvector's cosine distance, clipped to [0,1].
create or replace function pgmem.cosine_sim(a vector, b vector) returns float8
  language sql immutable parallel safe strict
  return greatest(0.0, least(1.0, 1.0 - (a operator(public.<=>) b)));
comment on function pgmem.cosine_sim(vector, vector) is
  'Cosine similarity of two vectors clipped to [0,1] (negative similarity counts as unrelated).';

-- ------------------------------------------------------------------ validation
create or replace function pgmem._check_embedding(p_embedding public.vector, p_what text default 'embedding') returns public.vector
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  want int := (pgmem._setting('embedding_dim'))::text::int;
  n float8;
begin
  if p_embedding is null then return null; end if;
  if public.vector_dims(p_embedding) <> want then
    perform pgmem._bad_input(format('%s has %s dimensions, but this pgmem installation stores %s', p_what, public.vector_dims(p_embedding), want),
      'use an embedder that makes the installed dimension (embedding_dim in pgmem.settings; PGMEM_EMBEDDER, PGMEM_EMBED_MODEL, PGMEM_EMBED_DIMENSIONS); the dimension is chosen at install: pgmem migrate --dimensions N');
  end if;
  n := public.vector_norm(p_embedding);
  if n = 'NaN'::float8 or n = 'Infinity'::float8 then
    perform pgmem._bad_input(format('%s contains NaN or infinite values', p_what), 'check the embedding model output');
  end if;
  if n = 0 then
    perform pgmem._bad_input(format('%s is all zeros: cosine similarity is undefined for it', p_what),
      'pass NULL to have the worker embed the text, or a non-zero vector');
  end if;
  -- pgvector computes distances in float32 (norms included): a norm whose square over- or
  -- underflows float32 gives NaN similarities (all 1e30: inf/inf; all 1e-30: 0/0) that rank
  -- first everywhere. The norm is taken in double precision above; 1e-6 .. 1e6 keeps every
  -- square, and every dot product of two accepted vectors, inside float32's normal range.
  if n < 1e-6 or n > 1e6 then
    perform pgmem._bad_input(format('%s has norm %s: float32 distances of a vector this %s are NaN or infinite',
                                    p_what, btrim(to_char(n, '9.99EEEE')), case when n < 1e-6 then 'small' else 'large' end),
      'pass the model''s normalised vector (norm 1), or NULL to have the worker embed the text');
  end if;
  return p_embedding;
end $$;
comment on function pgmem._check_embedding(vector, text) is
  'Returns the vector if it has the installed dimension and a finite norm between 1e-6 and 1e6 (float32 distances stay defined); else raises a clear error.';

-- SECURITY DEFINER for the reason _setting is: it reads '*' rows and the checked tenant's only.
create or replace function pgmem._check_category(p_category text) returns real
  language plpgsql stable parallel safe security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare w real;
begin
  -- the tenant (a checked value, not free) only when some tenant has its own categories
  if exists (select 1 from pgmem.categories o where o.tenant <> '*') then
    select c.weight into w from pgmem.categories c
     where c.category = p_category and c.tenant in (pgmem.current_tenant(), '*')
     order by (c.tenant = '*') limit 1;
  else
    select c.weight into w from pgmem.categories c where c.category = p_category and c.tenant = '*';
  end if;
  if w is null then
    perform pgmem._bad_input(format('unknown category "%s": known categories are %s', p_category,
      (select string_agg(distinct category, ', ' order by category) from pgmem.categories
        where tenant in (coalesce(pgmem.current_tenant(), '*'), '*'))),
      format('add it with: insert into pgmem.categories (tenant, category, weight) values (%L, %L, 0.6)',
             coalesce(pgmem.current_tenant(), '*'), p_category));
  end if;
  return w;
end $$;
comment on function pgmem._check_category(text) is 'The Engram importance weight of a category, or a clear error for an unknown one.';

create or replace function pgmem._check_unit(p_value float8, p_name text) returns float8
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_value is not null and (p_value <> p_value or p_value < 0 or p_value > 1) then
    perform pgmem._bad_input(format('%s must be between 0 and 1, got %s', p_name, p_value::real));
  end if;
  return p_value;
end $$;

-- A count argument (k, batch, candidates): NULL or out of [p_min, p_max] is a clear error.
create or replace function pgmem._check_between(p_value bigint, p_name text, p_min bigint, p_max bigint) returns bigint
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_value is null or p_value < p_min or p_value > p_max then
    perform pgmem._bad_input(format('%s must be between %s and %s, got %s', p_name, p_min, p_max,
                                    coalesce(p_value::text, 'NULL')));
  end if;
  return p_value;
end $$;
comment on function pgmem._check_between(bigint, text, bigint, bigint) is
  'Raises a clear error (22023) unless p_min <= p_value <= p_max (NULL included); returns the value.';

create or replace function pgmem._check_time(p_value timestamptz, p_name text, p_allow_future boolean default false) returns timestamptz
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  -- an observation time (created_at: never in the future) starts at the Unix epoch: a memory
  -- observed in 1901 is a data error (issue 14: its decay underflowed), and an old event
  -- time belongs in happened_at, which goes back to 1900
  v_min timestamptz := case when p_allow_future then '1900-01-01'::timestamptz else '1970-01-01'::timestamptz end;
begin
  if p_value is null then return null; end if;
  if p_value = 'infinity'::timestamptz or p_value = '-infinity'::timestamptz
     or p_value < v_min or p_value > now() + interval '200 years' then
    perform pgmem._bad_input(format('%s %s is out of range (%s .. now + 200 years)', p_name, p_value,
                                    to_char(v_min, 'YYYY')),
      case when not p_allow_future then 'created_at is when the memory was observed; put an old event time in happened_at (the 5W1H "when")' end);
  end if;
  if not p_allow_future and p_value > now() + interval '5 minutes' then
    perform pgmem._bad_input(format('%s %s is in the future', p_name, p_value),
      'created_at is when the memory was observed; put future event times in happened_at (the 5W1H "when")');
  end if;
  return p_value;
end $$;
