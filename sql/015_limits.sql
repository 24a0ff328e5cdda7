-- Limits that hold whatever a session does (issue 14, "No time limits"; SECURITY.md, "Limits").
--
-- Session limits. statement_timeout and idle_in_transaction_session_timeout are settings any
-- session may change, and PostgreSQL applies a role's own defaults (ALTER ROLE ... SET) only
-- to sessions that log in as that role, not to the members of pgmem_app or pgmem_reader. So
-- the database checks them where every tenant session passes, pgmem.current_tenant()
-- (010_util.sql, in the same query as the login's grant): a session of a login that is not
-- an administrator must run with both timeouts switched on and at most the installation's
-- maxima (settings max_statement_timeout_ms and max_idle_in_transaction_ms), or it gets an
-- error naming the fix. MemoryClient sets both; an operator gives other logins defaults
-- with ALTER ROLE (SECURITY.md).

-- Profiles: a profile's parameters are checked when it is written, not when a search divides
-- by them (issue 14: recency_half_life_days 0 gave 22012, actor_mismatch 50 a score of 25.5).
--   *_days (half-lives, windows)  a number > 0 and at most 36500 (a century)
--   actor_mismatch                 a number in [0, 1]: the actor signal of a mismatch
--   thresholds                     an object of context type -> number in [0, 1]
--   access_cap                     a number >= 1
--   other numbers                  finite (JSON has no NaN); other values are the read path's to check
--   weights                        numbers >= 0 summing to 1 (or {} = the built-in profile's)
create or replace function pgmem._check_profile() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  k text;
  v jsonb;
  t text;
  tv jsonb;
  total numeric := 0;
  what text := format('profile "%s" (tenant %s)', new.name, new.tenant);
begin
  for k, v in select * from jsonb_each(new.params) loop
    if k like '%\_days' or k like '%half\_life%' then
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::float8 <= 0 or (v #>> '{}')::float8 > 36500 then
        perform pgmem._bad_input(format('%s: params.%s must be a number of days above 0 and at most 36500, got %s', what, k, v),
          'a half-life of 0 would divide by zero; use a very small number for "forget at once"');
      end if;
    elsif k = 'actor_mismatch' then
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::float8 < 0 or (v #>> '{}')::float8 > 1 then
        perform pgmem._bad_input(format('%s: params.actor_mismatch must be a number between 0 and 1, got %s', what, v),
          'it is the actor signal of a memory whose actor differs from the query''s (JAM: 0.3)');
      end if;
    elsif k = 'thresholds' then
      if jsonb_typeof(v) <> 'object' then
        perform pgmem._bad_input(format('%s: params.thresholds must be an object of context type: threshold, got %s', what, v));
      end if;
      for t, tv in select * from jsonb_each(v) loop
        if jsonb_typeof(tv) <> 'number' or (tv #>> '{}')::float8 < 0 or (tv #>> '{}')::float8 > 1 then
          perform pgmem._bad_input(format('%s: params.thresholds.%s must be a number between 0 and 1, got %s', what, t, tv));
        end if;
      end loop;
    elsif k = 'access_cap' then
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::float8 < 1 then
        perform pgmem._bad_input(format('%s: params.access_cap must be a number >= 1, got %s', what, v));
      end if;
    end if;
  end loop;
  if new.weights <> '{}' then
    for k, v in select * from jsonb_each(new.weights) loop
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::numeric < 0 then
        perform pgmem._bad_input(format('%s: weight "%s" must be a number >= 0, got %s', what, k, v));
      end if;
      total := total + (v #>> '{}')::numeric;
    end loop;
    if abs(total - 1) > 0.000001 then
      perform pgmem._bad_input(format('%s: weights must sum to 1, they sum to %s', what, round(total, 6)));
    end if;
  end if;
  return new;
end $$;
comment on function pgmem._check_profile() is
  'Trigger: a profile''s parameters (half-lives > 0, actor_mismatch and thresholds in [0,1], access_cap >= 1) and weights (>= 0, sum 1) are valid when written.';

create or replace trigger profiles_check before insert or update of params, weights on pgmem.profiles
  for each row execute function pgmem._check_profile();

-- ------------------------------------------------------------------ argument limits (issue 27)
-- Every text, jsonb and array argument of every public function has a size limit, checked at the
-- top of the function before any work, and refused with 22023 naming the argument, its size,
-- the limit and the setting that holds it (SECURITY.md, "Limits"; pgmem._argument_limits() below
-- lists them all, and tests/test_limits_catalog.py calls every public function with a value
-- just over each). Limits of the installation (tenant '*'); a tenant may have lower ones.
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'max_json_depth', '32', 'deepest nesting of a JSON argument (metadata, filters, params, ...): levels below the top'),
  ('*', 'map_max_points', '20000', 'project() and map_points(): most memories one map projects or returns'),
  ('*', 'map_tsne_max_points', '5000', 'project(''tsne''): most memories one t-SNE projects (its neighbours are found in chunks and its iterations can be cancelled; memory grows with the points)'),
  ('*', 'max_items', '10000', 'most elements of an array argument of ids or numbers (seed ids, evidence, coordinates, judgements) not bounded by a more specific setting'),
  ('*', 'max_claim_ttl_seconds', '86400', 'sign_tenant_claim(): the longest ttl of a signed tenant claim')
on conflict (tenant, key) do nothing;

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

-- The value of a limit setting for the current tenant (its own, else the installation's).
create or replace function pgmem._limit(p_key text, p_default bigint) returns bigint
  language sql stable parallel safe
  return coalesce(pgmem._setting_num(p_key), p_default)::bigint;
comment on function pgmem._limit(text, bigint) is 'A limit setting (bytes, characters or items) for the current tenant, or the default given.';

-- A text argument of at most p_max bytes (UTF-8 length, O(1): the varlena header).
create or replace function pgmem._check_text(p_value text, p_arg text, p_max bigint, p_setting text default null) returns text
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if octet_length(p_value) > p_max then
    perform pgmem._too_big(p_arg, octet_length(p_value), p_max, 'bytes', p_setting);
  end if;
  return p_value;
end $$;
comment on function pgmem._check_text(text, text, bigint, text) is
  'Returns the text, or raises 22023 naming the argument when it is longer than p_max bytes.';

-- A text argument of at most p_max characters (a question: max_query_chars).
create or replace function pgmem._check_chars(p_value text, p_arg text, p_max bigint, p_setting text default null) returns text
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if octet_length(p_value) > p_max and char_length(p_value) > p_max then  -- (bytes >= characters: the cheap test first)
    perform pgmem._too_big(p_arg, char_length(p_value), p_max, 'characters', p_setting);
  end if;
  return p_value;
end $$;
comment on function pgmem._check_chars(text, text, bigint, text) is
  'Returns the text, or raises 22023 naming the argument when it is longer than p_max characters.';

-- A JSON argument of at most p_max bytes (its stored size) and max_json_depth levels of nesting
-- (a deeper value broke a later recursive step with "stack depth limit exceeded", naming no
-- field; PostgreSQL's own JSON parser refuses a few thousand levels before any function runs).
create or replace function pgmem._check_json(p_value jsonb, p_arg text, p_max bigint, p_setting text default null)
returns jsonb
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_depth bigint;
begin
  if p_value is null then
    return null;
  end if;
  if pg_column_size(p_value) > p_max then
    perform pgmem._too_big(p_arg, pg_column_size(p_value)::bigint, p_max, 'bytes', p_setting);
  end if;
  if jsonb_typeof(p_value) in ('object', 'array') and pg_column_size(p_value) > 64 then  -- (a small value cannot be deep)
    v_depth := pgmem._limit('max_json_depth', 32);
    if jsonb_path_exists(p_value, format('strict $.**{%s}', v_depth + 1)::jsonpath) then
      raise exception '% is nested more than % levels deep (max_json_depth)', p_arg, v_depth
        using errcode = '22023', hint = format('flatten %s: JSON arguments are at most %s levels deep', p_arg, v_depth);
    end if;
  end if;
  return p_value;
end $$;
comment on function pgmem._check_json(jsonb, text, bigint, text) is
  'Returns the JSON value, or raises 22023 naming the argument when it is larger than p_max bytes or nested deeper than max_json_depth.';

-- An array argument of at most p_max elements (all dimensions).
create or replace function pgmem._check_items(p_value anyarray, p_arg text, p_max bigint, p_setting text default null)
returns anyarray
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if cardinality(p_value) > p_max then
    perform pgmem._too_big(p_arg, cardinality(p_value)::bigint, p_max, 'items', p_setting);
  end if;
  return p_value;
end $$;
comment on function pgmem._check_items(anyarray, text, bigint, text) is
  'Returns the array, or raises 22023 naming the argument when it has more than p_max elements.';

-- The same checks as conditions, for SQL functions: `where pgmem._fits(arg, 'arg', max, 'setting')`
-- is a pseudo-constant qual, so PostgreSQL evaluates it once, before any row is read (a check in a
-- column expression would not run when no row comes back).
create or replace function pgmem._fits(p_value text, p_arg text, p_max bigint, p_setting text default null) returns boolean
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  perform pgmem._check_text(p_value, p_arg, p_max, p_setting);
  return true;
end $$;
comment on function pgmem._fits(text, text, bigint, text) is 'True, or raises 22023 naming the argument when the text is longer than p_max bytes.';

create or replace function pgmem._fits(p_value jsonb, p_arg text, p_max bigint, p_setting text default null) returns boolean
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  perform pgmem._check_json(p_value, p_arg, p_max, p_setting);
  return true;
end $$;
comment on function pgmem._fits(jsonb, text, bigint, text) is 'True, or raises 22023 naming the argument when the JSON value is too large or too deep.';

create or replace function pgmem._fits(p_value anyarray, p_arg text, p_max bigint, p_setting text default null) returns boolean
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  perform pgmem._check_items(p_value, p_arg, p_max, p_setting);
  return true;
end $$;
comment on function pgmem._fits(anyarray, text, bigint, text) is 'True, or raises 22023 naming the argument when the array has more than p_max elements.';

-- The read path's shared arguments (pgmem._query, sql/200_query.sql, for search, search_exact,
-- explain_search, activate, recall and build_context): actor and location at most
-- max_field_bytes (issue 27, H2: path_overlap split a 5.5 MB location for every candidate:
-- 16.5 s and 3.37 GB), the profile name at most max_id_bytes, weights and filters at most
-- max_metadata_bytes and max_json_depth levels. p_st: the tenant's settings (_settings_of).
create or replace function pgmem._check_read_args(p_st jsonb, p_actor text, p_location text, p_profile text,
                                                  p_weights jsonb, p_filters jsonb)
returns void
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_field bigint := coalesce((p_st->>'max_field_bytes')::float8, 8192)::bigint;
  v_json bigint := coalesce((p_st->>'max_metadata_bytes')::float8, 65536)::bigint;
begin
  if octet_length(p_actor) > v_field then
    perform pgmem._too_big('actor', octet_length(p_actor), v_field, 'bytes', 'max_field_bytes');
  end if;
  if octet_length(p_location) > v_field then
    perform pgmem._too_big('location', octet_length(p_location), v_field, 'bytes', 'max_field_bytes');
  end if;
  if octet_length(p_profile) > coalesce((p_st->>'max_id_bytes')::float8, 256) then
    perform pgmem._too_big('profile', octet_length(p_profile), coalesce((p_st->>'max_id_bytes')::float8, 256)::bigint,
                           'bytes', 'max_id_bytes');
  end if;
  if p_weights is not null then
    perform pgmem._check_json(p_weights, 'weights', v_json, 'max_metadata_bytes');
  end if;
  if p_filters is not null and p_filters <> '{}' then
    perform pgmem._check_json(p_filters, 'filters', v_json, 'max_metadata_bytes');
  end if;
end $$;
comment on function pgmem._check_read_args(jsonb, text, text, text, jsonb, jsonb) is
  'The read path''s argument limits (actor, location, profile, weights, filters), from the tenant''s settings; raises 22023 naming the argument.';

-- activate's own arguments (sql/220_activate.sql): context_type a name, topics and entities at
-- most max_tags each, summary at most max_summary_bytes (its tokens are compared with every
-- candidate's).
create or replace function pgmem._check_activate_args(p_context_type text, p_topics text[], p_entities text[], p_summary text)
returns void
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_context_type is not null then
    perform pgmem._check_text(p_context_type, 'context_type', pgmem._limit('max_id_bytes', 256), 'max_id_bytes');
  end if;
  if p_topics is not null then
    perform pgmem._check_items(p_topics, 'topics', pgmem._limit('max_tags', 256), 'max_tags');
  end if;
  if p_entities is not null then
    perform pgmem._check_items(p_entities, 'entities', pgmem._limit('max_tags', 256), 'max_tags');
  end if;
  if p_summary is not null then
    perform pgmem._check_text(p_summary, 'summary', pgmem._limit('max_summary_bytes', 16384), 'max_summary_bytes');
  end if;
end $$;
comment on function pgmem._check_activate_args(text, text[], text[], text) is
  'activate''s argument limits (context_type, topics, entities, summary); raises 22023 naming the argument.';
