-- Limits that hold whatever a session does (issue 14, "No time limits"; SECURITY.md, "Limits").
--
-- Session limits. statement_timeout and idle_in_transaction_session_timeout are settings any
-- session may change, and PostgreSQL applies a role's own defaults (ALTER ROLE ... SET) only
-- to sessions that log in as that role, not to the members of pgmem_app or pgmem_reader. So
-- the database checks them where every tenant session passes, pgmem.current_tenant()
-- (005_tenancy.sql, in the same query as the login's grant): a session of a login that is not
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
  v_kinds text[] := array['temporal', 'semantic', 'causal', 'concept', 'co_access', 'merged', 'supersedes'];
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
    -- (issue 27, L3: params.lexical = 'bogus' was stored, and every search with the profile failed)
    elsif k = 'lexical' then
      if jsonb_typeof(v) <> 'string' or v #>> '{}' not in ('coverage', 'rank', 'bm25') then
        perform pgmem._bad_input(format('%s: params.lexical must be "coverage", "rank" or "bm25", got %s', what, v));
      end if;
    elsif k = 'usage' then
      if jsonb_typeof(v) <> 'string' or v #>> '{}' not in ('log', 'linear') then
        perform pgmem._bad_input(format('%s: params.usage must be "log" or "linear", got %s', what, v));
      end if;
    elsif k = 'actor_from_text' then
      if jsonb_typeof(v) <> 'boolean' then
        perform pgmem._bad_input(format('%s: params.actor_from_text must be true or false, got %s', what, v));
      end if;
    elsif k = 'neighbour_links' then
      -- (the kinds of pgmem._binding_kinds(), 130_bindings.sql, which 020's built-in profiles come before)
      if jsonb_typeof(v) <> 'array' or exists (select 1 from jsonb_array_elements(v) e
                                                where jsonb_typeof(e) <> 'string' or not (e #>> '{}') = any(v_kinds)) then
        perform pgmem._bad_input(format('%s: params.neighbour_links must be an array of binding kinds (%s), got %s', what,
                                        array_to_string(v_kinds, ', '), v));
      end if;
    elsif k in ('bm25_k1', 'recent_window') then
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::float8 < 0 or (v #>> '{}')::float8 > 100 then
        perform pgmem._bad_input(format('%s: params.%s must be a number between 0 and 100, got %s', what, k, v));
      end if;
    elsif k = 'decay' then
      if jsonb_typeof(v) <> 'string' or v #>> '{}' not in ('exponential', 'power') then
        perform pgmem._bad_input(format('%s: params.decay must be "exponential" or "power", got %s', what, v));
      end if;
    elsif k = 'decay_alpha' then
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::float8 <= 0 or (v #>> '{}')::float8 > 10 then
        perform pgmem._bad_input(format('%s: params.decay_alpha must be a number above 0 and at most 10, got %s', what, v));
      end if;
    elsif k = 'bm25_b' then
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::float8 < 0 or (v #>> '{}')::float8 > 1 then
        perform pgmem._bad_input(format('%s: params.bm25_b must be a number between 0 and 1, got %s', what, v));
      end if;
    elsif jsonb_typeof(v) in ('object', 'array') and pg_column_size(v) > 8192 then
      perform pgmem._bad_input(format('%s: params.%s is %s bytes, more than 8192', what, k, pg_column_size(v)));
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
  ('*', 'max_filters_bytes', '262144', 'largest filters argument of a ranking (bytes): its ids list may hold max_candidates ids'),
  ('*', 'map_max_points', '20000', 'project() and map_points(): most memories one map projects or returns'),
  ('*', 'map_tsne_max_points', '5000', 'project(''tsne''): most memories one t-SNE projects (its neighbours are found in chunks and its iterations can be cancelled; memory grows with the points)'),
  ('*', 'max_items', '10000', 'most elements of an array argument of ids or numbers (seed ids, evidence, coordinates, judgements) not bounded by a more specific setting')
on conflict (tenant, key) do nothing;

-- The value of a limit setting for the current tenant (its own, else the installation's).
create or replace function pgmem._limit(p_key text, p_default bigint) returns bigint
  language sql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
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
-- 16.5 s and 3.37 GB), the profile name at most max_id_bytes, weights at most max_metadata_bytes,
-- filters at most max_filters_bytes (a filter may list max_candidates ids), both at most
-- max_json_depth levels. p_st: the tenant's settings (the one read of _query, sql/200_query.sql).
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
    perform pgmem._check_json(p_filters, 'filters', coalesce((p_st->>'max_filters_bytes')::float8, 262144)::bigint,
                              'max_filters_bytes');
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

insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'max_batch_bytes', '33554432', 'remember_many(), format_context(): the largest JSON argument (bytes): a batch of memories')
on conflict (tenant, key) do nothing;

-- ------------------------------------------------------------------ the list of every limit
-- Every text, jsonb, bytea and array argument of every public function (tests/test_limits_catalog.py
-- checks that the catalog has no other, and calls each function with a value just over each
-- limit; SECURITY.md's table is generated from this list). unit: bytes (UTF-8 length of a text,
-- stored size of a JSON value), characters, or items (array elements). setting: the key in
-- pgmem.settings (the tenant's own value, else the installation's); fixed: the limit when no
-- setting holds it (immutable helpers, names with a format of their own).
-- (No pinned search_path: a SQL-standard body names nothing at run time, and without one
-- PostgreSQL inlines the list into the query of pgmem._check_args, which runs at the top of
-- most functions.)
create or replace function pgmem._argument_limits()
returns table (function_name text, argument text, unit text, setting text, fixed bigint)
  language sql immutable parallel safe
begin atomic
  select f, a, u, s, x from (values
    -- the read path (checked in pgmem._query and the functions themselves)
    ('search', 'query_text', 'characters', 'max_query_chars', null::bigint), ('search', 'actor', 'bytes', 'max_field_bytes', null),
    ('search', 'location', 'bytes', 'max_field_bytes', null), ('search', 'profile', 'bytes', 'max_id_bytes', null),
    ('search', 'weights', 'bytes', 'max_metadata_bytes', null), ('search', 'filters', 'bytes', 'max_filters_bytes', null),
    ('search_exact', 'query_text', 'characters', 'max_query_chars', null), ('search_exact', 'actor', 'bytes', 'max_field_bytes', null),
    ('search_exact', 'location', 'bytes', 'max_field_bytes', null), ('search_exact', 'profile', 'bytes', 'max_id_bytes', null),
    ('search_exact', 'weights', 'bytes', 'max_metadata_bytes', null), ('search_exact', 'filters', 'bytes', 'max_filters_bytes', null),
    ('explain_search', 'query_text', 'characters', 'max_query_chars', null), ('explain_search', 'actor', 'bytes', 'max_field_bytes', null),
    ('explain_search', 'location', 'bytes', 'max_field_bytes', null), ('explain_search', 'profile', 'bytes', 'max_id_bytes', null),
    ('explain_search', 'weights', 'bytes', 'max_metadata_bytes', null), ('explain_search', 'filters', 'bytes', 'max_filters_bytes', null),
    ('build_context', 'query_text', 'characters', 'max_query_chars', null), ('build_context', 'actor', 'bytes', 'max_field_bytes', null),
    ('build_context', 'location', 'bytes', 'max_field_bytes', null), ('build_context', 'profile', 'bytes', 'max_id_bytes', null),
    ('build_context', 'weights', 'bytes', 'max_metadata_bytes', null), ('build_context', 'filters', 'bytes', 'max_filters_bytes', null),
    ('activate', 'query_text', 'characters', 'max_query_chars', null), ('activate', 'context_type', 'bytes', 'max_id_bytes', null),
    ('activate', 'topics', 'items', 'max_tags', null), ('activate', 'entities', 'items', 'max_tags', null),
    ('activate', 'summary', 'bytes', 'max_summary_bytes', null), ('activate', 'filters', 'bytes', 'max_filters_bytes', null),
    ('activate', 'weights', 'bytes', 'max_metadata_bytes', null), ('activate', 'profile', 'bytes', 'max_id_bytes', null),
    ('recall', 'query_text', 'characters', 'max_query_chars', null), ('recall', 'weights', 'bytes', 'max_metadata_bytes', null),
    ('recall', 'filters', 'bytes', 'max_filters_bytes', null), ('recall', 'profile', 'bytes', 'max_id_bytes', null),
    ('touch', 'ids', 'items', 'touch_max_ids', null), ('touch', 'kind', 'bytes', null, 32),
    ('use', 'ids', 'items', 'touch_max_ids', null), ('use', 'source', 'bytes', null, 32),
    ('context_threshold', 'context_type', 'bytes', 'max_id_bytes', null), ('context_threshold', 'profile', 'bytes', 'max_id_bytes', null),
    ('memory_context', 'query_text', 'characters', 'max_query_chars', null), ('memory_context', 'context_type', 'bytes', 'max_id_bytes', null),
    ('memory_context', 'filters', 'bytes', 'max_filters_bytes', null),
    ('search_spread', 'query_text', 'characters', 'max_query_chars', null), ('search_spread', 'kinds', 'items', 'max_tags', null),
    ('search_spread', 'weights', 'bytes', 'max_metadata_bytes', null), ('search_spread', 'filters', 'bytes', 'max_filters_bytes', null),
    ('search_spread', 'profile', 'bytes', 'max_id_bytes', null),
    ('spread', 'seed_ids', 'items', 'max_items', null), ('spread', 'kinds', 'items', 'max_tags', null),
    ('spread', 'weights', 'bytes', 'max_metadata_bytes', null), ('spread', 'seed_levels', 'items', 'max_items', null),
    ('reconstruct', 'query_text', 'characters', 'max_query_chars', null), ('reconstruct', 'kinds', 'items', 'max_tags', null),
    ('reconstruct', 'weights', 'bytes', 'max_metadata_bytes', null), ('reconstruct', 'filters', 'bytes', 'max_filters_bytes', null),
    ('reconstruct', 'temporal', 'bytes', 'max_id_bytes', null), ('reconstruct', 'identity', 'bytes', 'max_id_bytes', null),
    ('reconstruct', 'agent_id', 'bytes', 'max_id_bytes', null), ('reconstruct', 'seed_levels', 'bytes', 'max_id_bytes', null),
    ('reconstruction_hash', 'query_text', 'characters', 'max_query_chars', null), ('reconstruction_hash', 'filters', 'bytes', 'max_filters_bytes', null),
    ('reconstruction_hash', 'kinds', 'items', 'max_tags', null), ('reconstruction_hash', 'agent_id', 'bytes', 'max_id_bytes', null),
    ('certainty', 'reconstructions', 'bytes', 'max_metadata_bytes', null),
    ('attention', 'ids', 'items', 'max_items', null),
    ('search_attention', 'query_text', 'characters', 'max_query_chars', null), ('search_attention', 'filters', 'bytes', 'max_filters_bytes', null),
    ('search_attention', 'profile', 'bytes', 'max_id_bytes', null),
    ('lexical_probe', 'p_text', 'characters', 'max_query_chars', null), ('query_actors', 'p_text', 'characters', 'max_query_chars', null),
    ('query_embedding_text', 'p_text', 'characters', 'max_query_chars', null), ('query_embedding_text', 'p_profile', 'bytes', 'max_id_bytes', null),
    ('query_embedding_text', 'p_user_id', 'bytes', 'max_id_bytes', null), ('time_window', 'p_text', 'characters', 'max_query_chars', null),
    ('check_weights', 'weights', 'bytes', null, 65536), ('check_weights', 'known', 'items', null, 256),
    -- immutable helpers: fixed limits (1 MB of text is also the most PostgreSQL's tsvector holds)
    ('tokens', 'p_text', 'bytes', null, 1048576), ('text_overlap', 'a', 'bytes', null, 1048576), ('text_overlap', 'b', 'bytes', null, 1048576),
    ('jaccard', 'a', 'items', null, 1048576), ('jaccard', 'b', 'items', null, 1048576), ('estimate_tokens', 'p_text', 'bytes', null, 1048576),
    -- (plainto_tsquery of ~200 KB of ordinary text overflows the stack removing stop words)
    ('query_tsquery', 'p_text', 'bytes', null, 65536), ('query_terms', 'p_text', 'bytes', null, 65536),
    ('path_overlap', 'a', 'bytes', null, 1048576), ('path_overlap', 'b', 'bytes', null, 1048576),
    ('processing_depth', 'p_who', 'bytes', null, 1048576), ('processing_depth', 'p_what', 'bytes', null, 1048576),
    ('processing_depth', 'p_where', 'bytes', null, 1048576), ('processing_depth', 'p_why', 'bytes', null, 1048576),
    ('processing_depth', 'p_how', 'bytes', null, 1048576), ('salience', 'p_weights', 'bytes', null, 65536),
    ('fragment_strength', 'p_access_times', 'items', null, 1048576), ('binding_strength', 'p_kind', 'bytes', null, 256),
    ('work_priority', 'name', 'bytes', null, 256),
    ('precision_at_k', 'retrieved', 'items', null, 10000), ('precision_at_k', 'relevant', 'items', null, 10000),
    ('ndcg', 'relevance', 'items', null, 10000), ('ndcg', 'ideal', 'items', null, 10000), ('ild', 'embeddings', 'items', null, 1000),
    -- the write path
    ('remember', 'content', 'bytes', 'max_content_bytes', null), ('remember', 'who', 'bytes', 'max_field_bytes', null),
    ('remember', 'what', 'bytes', 'max_field_bytes', null), ('remember', 'location', 'bytes', 'max_field_bytes', null),
    ('remember', 'why', 'bytes', 'max_field_bytes', null), ('remember', 'how', 'bytes', 'max_field_bytes', null),
    ('remember', 'category', 'bytes', 'max_id_bytes', null), ('remember', 'metadata', 'bytes', 'max_metadata_bytes', null),
    ('remember', 'user_id', 'bytes', 'max_id_bytes', null), ('remember', 'agent_id', 'bytes', 'max_id_bytes', null),
    ('remember', 'session_id', 'bytes', 'max_id_bytes', null), ('remember', 'tier', 'bytes', 'max_id_bytes', null),
    ('remember', 'summary', 'bytes', 'max_summary_bytes', null), ('remember', 'topics', 'items', 'max_tags', null),
    ('remember', 'entities', 'items', 'max_tags', null), ('remember', 'event_key', 'bytes', 'max_id_bytes', null),
    ('remember', 'embedding_model', 'bytes', 'max_id_bytes', null), ('remember', 'motor', 'bytes', 'max_metadata_bytes', null),
    ('remember', 'sensory', 'bytes', 'max_metadata_bytes', null),
    ('remember_many', 'items', 'bytes', 'max_batch_bytes', null),
    ('surprise', 'content', 'bytes', 'max_content_bytes', null), ('surprise', 'category', 'bytes', 'max_id_bytes', null),
    ('surprise', 'user_id', 'bytes', 'max_id_bytes', null),
    ('forget', 'reason', 'bytes', 'max_reason_bytes', null), ('restore', 'reason', 'bytes', 'max_reason_bytes', null),
    ('update_memory', 'changes', 'bytes', null, 1048576), ('update_memory', 'reason', 'bytes', 'max_reason_bytes', null),
    ('complete_embedding', 'model', 'bytes', 'max_id_bytes', null), ('fail_embedding', 'error', 'bytes', 'max_field_bytes', null),
    ('bind', 'kind', 'bytes', 'max_id_bytes', null), ('bind', 'metadata', 'bytes', 'max_metadata_bytes', null),
    ('refresh_bindings', 'ids', 'items', 'max_items', null), ('refresh_bindings', 'kinds', 'items', 'max_tags', null),
    ('record_causal', 'items', 'bytes', 'max_metadata_bytes', null),
    ('rescore_salience', 'ids', 'items', 'max_items', null),
    ('format_context', 'memories', 'bytes', 'max_batch_bytes', null),
    ('set_api_key', 'api_key', 'bytes', 'max_field_bytes', null), ('set_api_key', 'provider', 'bytes', 'max_id_bytes', null),
    ('has_api_key', 'provider', 'bytes', 'max_id_bytes', null), ('clear_api_key', 'provider', 'bytes', 'max_id_bytes', null),
    ('health', 'expected_revision', 'bytes', 'max_id_bytes', null),
    -- jobs and the work queue (administrators run most)
    ('run_job', 'job', 'bytes', 'max_id_bytes', null), ('run_job', 'params', 'bytes', 'max_metadata_bytes', null),
    ('enqueue', 'task', 'bytes', 'max_id_bytes', null), ('enqueue', 'memory_ids', 'items', 'max_items', null),
    ('enqueue', 'params', 'bytes', 'max_metadata_bytes', null),
    ('work', 'tenant', 'bytes', 'max_id_bytes', null), ('prune', 'mode', 'bytes', 'max_id_bytes', null), ('prune', 'tenant', 'bytes', 'max_id_bytes', null),
    ('purge', 'tenant', 'bytes', 'max_id_bytes', null), ('archive_stale', 'tenant', 'bytes', 'max_id_bytes', null),
    ('merge_duplicates', 'tenant', 'bytes', 'max_id_bytes', null), ('index_vectors', 'tenant', 'bytes', 'max_id_bytes', null),
    ('fold_lexicon', 'tenant', 'bytes', 'max_id_bytes', null), ('tune_thresholds', 'tenant', 'bytes', 'max_id_bytes', null),
    ('reflect', 'tenant', 'bytes', 'max_id_bytes', null), ('cluster', 'tenant', 'bytes', 'max_id_bytes', null),
    ('feedback', 'context_type', 'bytes', 'max_id_bytes', null),
    ('schedule_jobs', 'merge', 'bytes', 'max_id_bytes', null), ('schedule_jobs', 'prune', 'bytes', 'max_id_bytes', null),
    ('schedule_jobs', 'archive', 'bytes', 'max_id_bytes', null), ('schedule_jobs', 'tune', 'bytes', 'max_id_bytes', null),
    ('schedule_jobs', 'purge', 'bytes', 'max_id_bytes', null),
    ('job_schedule_commands', 'merge', 'bytes', 'max_id_bytes', null), ('job_schedule_commands', 'prune', 'bytes', 'max_id_bytes', null),
    ('job_schedule_commands', 'archive', 'bytes', 'max_id_bytes', null), ('job_schedule_commands', 'tune', 'bytes', 'max_id_bytes', null),
    ('job_schedule_commands', 'purge', 'bytes', 'max_id_bytes', null), ('job_schedule_commands', 'database', 'bytes', 'max_id_bytes', null),
    -- (a judged query is a key of pgmem.eval_queries' b-tree index, whose rows hold at most 2704
    -- bytes: a longer one was "index row size 11472 exceeds ...", naming no argument; issue 27, L4)
    ('evaluate', 'method', 'bytes', 'max_id_bytes', null), ('evaluate', 'profile', 'bytes', 'max_id_bytes', null),
    ('evaluate', 'filters', 'bytes', 'max_filters_bytes', null), ('judge', 'query', 'bytes', null, 2000),
    -- the map
    ('project', 'method', 'bytes', null, 16), ('map_points', 'method', 'bytes', null, 16), ('save_coords', 'method', 'bytes', null, 16),
    ('save_coords', 'ids', 'items', 'map_max_points', null), ('save_coords', 'xs', 'items', 'map_max_points', null),
    ('save_coords', 'ys', 'items', 'map_max_points', null), ('save_coords', 'zs', 'items', 'map_max_points', null),
    -- tenancy
    ('grant_tenant', 'role_name', 'bytes', null, 63), ('grant_tenant', 'tenant', 'bytes', null, 64), ('grant_tenant', 'note', 'bytes', 'max_reason_bytes', null),
    ('revoke_tenant', 'role_name', 'bytes', null, 63), ('revoke_tenant', 'tenant', 'bytes', null, 64),
    ('set_session_limits', 'role_name', 'bytes', null, 63),
    ('add_claim_key', 'kid', 'bytes', null, 64), ('add_claim_key', 'secret', 'bytes', null, 1024), ('drop_claim_key', 'kid', 'bytes', null, 64),
    ('sign_tenant_claim', 'tenant', 'bytes', null, 64), ('sign_tenant_claim', 'role_name', 'bytes', null, 63),
    ('sign_tenant_claim', 'kid', 'bytes', null, 64),
    -- privacy
    ('export_user', 'user_id', 'bytes', 'max_id_bytes', null), ('erase_user', 'user_id', 'bytes', 'max_id_bytes', null),
    ('user_data_summary', 'user_id', 'bytes', 'max_id_bytes', null),
    -- the layered tiers
    ('detect_facts', 'content', 'bytes', 'max_content_bytes', null), ('detect_facts', 'speaker', 'bytes', 'max_id_bytes', null),
    ('set_fact', 'user_id', 'bytes', 'max_id_bytes', null), ('set_fact', 'key', 'bytes', null, 96),
    ('set_fact', 'value', 'bytes', 'max_field_bytes', null), ('set_fact', 'source', 'bytes', 'max_id_bytes', null),
    ('set_fact', 'statement', 'bytes', 'max_field_bytes', null), ('set_fact', 'metadata', 'bytes', 'max_metadata_bytes', null),
    ('end_fact', 'user_id', 'bytes', 'max_id_bytes', null), ('end_fact', 'key', 'bytes', null, 96),
    ('end_fact', 'statement', 'bytes', 'max_field_bytes', null),
    ('profile', 'user_id', 'bytes', 'max_id_bytes', null),
    ('fact_history', 'user_id', 'bytes', 'max_id_bytes', null), ('fact_history', 'key', 'bytes', null, 96),
    ('apply_facts', 'user_id', 'bytes', 'max_id_bytes', null), ('apply_facts', 'facts', 'bytes', 'max_metadata_bytes', null),
    ('apply_facts', 'source', 'bytes', 'max_id_bytes', null),
    ('classify_intent', 'query_text', 'bytes', 'max_content_bytes', null), ('classify_intent', 'conversation_id', 'bytes', 'max_id_bytes', null),
    ('cache_intent', 'query_text', 'bytes', 'max_content_bytes', null), ('cache_intent', 'intent', 'bytes', 'max_id_bytes', null),
    ('cache_intent', 'model', 'bytes', 'max_id_bytes', null), ('cache_intent', 'user_id', 'bytes', 'max_id_bytes', null),
    ('cache_intent', 'source', 'bytes', 'max_id_bytes', null),
    ('behaviour_decision', 'features', 'bytes', 'max_metadata_bytes', null), ('resolve_policy', 'features', 'bytes', 'max_metadata_bytes', null),
    ('observe_turn', 'conversation_id', 'bytes', 'max_id_bytes', null), ('observe_turn', 'content', 'bytes', 'max_content_bytes', null),
    ('observe_turn', 'user_id', 'bytes', 'max_id_bytes', null), ('observe_turn', 'intent', 'bytes', 'max_id_bytes', null),
    ('observe_turn', 'rule', 'bytes', 'max_id_bytes', null),
    ('conversation_state', 'conversation_id', 'bytes', 'max_id_bytes', null),
    ('conversation_threads', 'conversation_id', 'bytes', 'max_id_bytes', null),
    ('resolve_thread', 'conversation_id', 'bytes', 'max_id_bytes', null),
    ('set_thread_summary', 'summary', 'bytes', 'max_summary_bytes', null), ('set_thread_summary', 'label', 'bytes', 'max_field_bytes', null),
    ('set_thread_summary', 'source', 'bytes', 'max_id_bytes', null),
    ('add_insight', 'type', 'bytes', 'max_id_bytes', null), ('add_insight', 'content', 'bytes', 'max_field_bytes', null),
    ('add_insight', 'user_id', 'bytes', 'max_id_bytes', null), ('add_insight', 'conversation_id', 'bytes', 'max_id_bytes', null),
    ('add_insight', 'source', 'bytes', 'max_id_bytes', null),
    ('extract_insights', 'content', 'bytes', 'max_content_bytes', null), ('extract_concepts', 'content', 'bytes', 'max_content_bytes', null),
    ('observe_reply', 'conversation_id', 'bytes', 'max_id_bytes', null), ('observe_reply', 'content', 'bytes', 'max_content_bytes', null),
    ('observe_reply', 'insights', 'bytes', 'max_metadata_bytes', null),
    ('search_insights', 'query_text', 'characters', 'max_query_chars', null), ('search_insights', 'user_id', 'bytes', 'max_id_bytes', null),
    ('search_insights', 'types', 'items', 'max_tags', null),
    ('research_context', 'query_text', 'bytes', 'max_content_bytes', null), ('research_context', 'user_id', 'bytes', 'max_id_bytes', null),
    ('context_for', 'query_text', 'bytes', 'max_content_bytes', null), ('context_for', 'conversation_id', 'bytes', 'max_id_bytes', null),
    ('context_for', 'user_id', 'bytes', 'max_id_bytes', null), ('context_for', 'filters', 'bytes', 'max_filters_bytes', null),
    ('context_for', 'search_profile', 'bytes', 'max_id_bytes', null),
    -- identity (names and texts in characters, as sql/700_identity.sql has always counted them)
    ('identity', 'agent_id', 'bytes', 'max_id_bytes', null), ('identity_at', 'agent_id', 'bytes', 'max_id_bytes', null),
    ('goal_relevance', 'agent_id', 'bytes', 'max_id_bytes', null),
    ('identity_update_trait', 'name', 'characters', null, 128), ('identity_update_trait', 'agent_id', 'bytes', 'max_id_bytes', null),
    ('identity_update_belief', 'key', 'characters', null, 128), ('identity_update_belief', 'statement', 'characters', null, 1000),
    ('identity_update_belief', 'evidence', 'items', 'max_items', null), ('identity_update_belief', 'agent_id', 'bytes', 'max_id_bytes', null),
    ('identity_set_goal', 'key', 'characters', null, 128), ('identity_set_goal', 'goal', 'characters', null, 2000),
    ('identity_set_goal', 'agent_id', 'bytes', 'max_id_bytes', null),
    ('identity_end_goal', 'key', 'characters', null, 128), ('identity_end_goal', 'state', 'bytes', 'max_id_bytes', null),
    ('identity_end_goal', 'agent_id', 'bytes', 'max_id_bytes', null),
    ('identity_snapshot', 'reason', 'characters', null, 1000), ('identity_snapshot', 'agent_id', 'bytes', 'max_id_bytes', null),
    -- lifecycle, items and sessions (the framework integrations), documents, re-embedding
    ('archive', 'ids', 'items', 'touch_max_ids', null), ('archive', 'reason', 'bytes', 'max_reason_bytes', null),
    ('chunk_document', 'content', 'bytes', 'max_document_bytes', null), ('claim_reembeddings', 'for_model', 'bytes', 'max_id_bytes', null),
    ('clear_history', 'conversation_id', 'bytes', 'max_id_bytes', null), ('clear_history', 'reason', 'bytes', 'max_reason_bytes', null),
    ('clear_memories', 'user_id', 'bytes', 'max_id_bytes', null), ('clear_memories', 'reason', 'bytes', 'max_reason_bytes', null),
    ('complete_reembedding', 'model', 'bytes', 'max_id_bytes', null), ('delete_archived', 'tenant', 'bytes', 'max_id_bytes', null),
    ('delete_item', 'namespace', 'items', 'max_tags', null), ('delete_item', 'key', 'bytes', 'max_field_bytes', null),
    ('fold_access_log', 'tenant', 'bytes', 'max_id_bytes', null), ('get_item', 'namespace', 'items', 'max_tags', null),
    ('get_item', 'key', 'bytes', 'max_field_bytes', null), ('ingest_document', 'title', 'characters', null, 500),
    ('ingest_document', 'content', 'bytes', 'max_document_bytes', null), ('ingest_document', 'source', 'bytes', 'max_field_bytes', null),
    ('ingest_document', 'user_id', 'bytes', 'max_id_bytes', null), ('ingest_document', 'metadata', 'bytes', 'max_metadata_bytes', null),
    ('ingest_document', 'embeddings', 'items', 'max_items', null), ('ingest_document', 'embedding_model', 'bytes', 'max_id_bytes', null),
    ('known_event_keys', 'event_keys', 'items', 'max_items', null), ('list_documents', 'user_id', 'bytes', 'max_id_bytes', null),
    ('list_item_namespaces', 'prefix', 'items', 'max_tags', null), ('list_item_namespaces', 'suffix', 'items', 'max_tags', null),
    ('list_memories', 'filters', 'bytes', 'max_filters_bytes', null), ('put_item', 'namespace', 'items', 'max_tags', null),
    ('put_item', 'key', 'bytes', 'max_field_bytes', null), ('put_item', 'value', 'bytes', 'max_content_bytes', null),
    ('put_item', 'content', 'bytes', 'max_content_bytes', null), ('put_item', 'embedding_model', 'bytes', 'max_id_bytes', null),
    ('put_item', 'user_id', 'bytes', 'max_id_bytes', null), ('put_item', 'agent_id', 'bytes', 'max_id_bytes', null),
    ('put_item', 'session_id', 'bytes', 'max_id_bytes', null), ('reembed', 'model', 'bytes', 'max_id_bytes', null),
    ('relevance_threshold', 'relevance_type', 'bytes', 'max_id_bytes', null), ('restore_history', 'conversation_id', 'bytes', 'max_id_bytes', null),
    ('restore_history', 'cleared_as', 'bytes', 'max_field_bytes', null), ('retrieval_success_rate', 'context_type', 'bytes', 'max_id_bytes', null),
    ('search_documents', 'query_text', 'characters', 'max_query_chars', null), ('search_documents', 'user_id', 'bytes', 'max_id_bytes', null),
    ('search_items', 'namespace_prefix', 'items', 'max_tags', null), ('search_items', 'query_text', 'characters', 'max_query_chars', null),
    ('search_items', 'filter', 'bytes', 'max_filters_bytes', null), ('session_add_items', 'session_id', 'bytes', 'max_id_bytes', null),
    ('session_add_items', 'items', 'bytes', 'max_batch_bytes', null), ('session_add_items', 'user_id', 'bytes', 'max_id_bytes', null),
    ('session_add_items', 'embeddings', 'items', 'max_items', null),
    ('session_clear', 'session_id', 'bytes', 'max_id_bytes', null), ('session_get_items', 'session_id', 'bytes', 'max_id_bytes', null),
    ('session_pop_item', 'session_id', 'bytes', 'max_id_bytes', null), ('set_chunk_embeddings', 'embeddings', 'items', 'max_items', null),
    ('set_chunk_embeddings', 'embedding_model', 'bytes', 'max_id_bytes', null)
  ) l(f, a, u, s, x);
end;
comment on function pgmem._argument_limits() is
  'Every size limit of a public function''s text, jsonb, bytea and array arguments: function, argument, unit (bytes, characters, items), the setting that holds it or the fixed limit (SECURITY.md, "Limits").';

-- The generic check at the top of a function: each argument of p_args (a JSON object built from
-- the call's arguments, arrays as JSON arrays) against its row of pgmem._argument_limits().
-- For the functions off the hot paths (the read path and remember check inline, in C-cheap
-- comparisons): one pass over the list, a few tens of microseconds. Returns true (for a WHERE).
create or replace function pgmem._check_args(p_function text, p_args jsonb) returns boolean
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  r record;
  v jsonb;
  v_max bigint;
  v_size bigint;
  v_elem bigint;
  v_elem_max bigint;
begin
  -- one query (its plan cached for the session): the function's rows of the list, each with its
  -- limit (the tenant's setting, else the installation's, else the fixed one)
  for r in select l.argument, l.unit, l.setting,
                  coalesce((select (s.value #>> '{}')::float8 from pgmem.settings s
                             where s.key = l.setting and s.tenant in ((select pgmem.current_tenant()), '*')
                             order by (s.tenant = '*') limit 1)::bigint, l.fixed) as lim
             from pgmem._argument_limits() l
            where l.function_name = p_function and p_args ? l.argument and jsonb_typeof(p_args -> l.argument) <> 'null' loop
    v := p_args -> r.argument;
    v_max := r.lim;
    continue when v_max is null;
    if r.unit = 'items' then
      v_size := case when jsonb_typeof(v) = 'array' then jsonb_array_length(v) end;
      if v_size > v_max then
        perform pgmem._too_big(r.argument, v_size, v_max, r.unit, r.setting);
      end if;
      -- each text element at most the matching scalar's limit (issue 35, M2: kinds => 64 x 1 MB
      -- peaked at 790 MB before "unknown binding kind"): a name (a binding kind, an insight type,
      -- an event key) max_id_bytes, any other text element max_field_bytes
      if v_size > 0 and jsonb_typeof(v -> 0) = 'string' then
        v_elem_max := case when r.argument in ('kinds', 'types', 'event_keys') then pgmem._limit('max_id_bytes', 256)
                           else pgmem._limit('max_field_bytes', 8192) end;
        select max(octet_length(e #>> '{}')) into v_elem from jsonb_array_elements(v) e where jsonb_typeof(e) = 'string';
        if v_elem > v_elem_max then
          raise exception '% has an element of % bytes, more than % (%)', r.argument, v_elem, v_elem_max,
                          case when r.argument in ('kinds', 'types', 'event_keys') then 'max_id_bytes' else 'max_field_bytes' end
            using errcode = '22023', hint = format('each element of %s is at most %s bytes', r.argument, v_elem_max);
        end if;
      end if;
      continue;
    elsif r.unit = 'characters' then
      v_size := char_length(v #>> '{}');
    elsif jsonb_typeof(v) = 'string' then
      v_size := octet_length(v #>> '{}');
    else
      perform pgmem._check_json(v, r.argument, v_max, r.setting);  -- size and depth
      continue;
    end if;
    if v_size > v_max then
      perform pgmem._too_big(r.argument, v_size, v_max, r.unit, r.setting);
    end if;
  end loop;
  return true;
end $$;
comment on function pgmem._check_args(text, jsonb) is
  'Checks a call''s arguments (a JSON object of name: value) against their limits in pgmem._argument_limits(); raises 22023 naming the first one over its limit.';

-- A number that must be finite and above 0 when given (a scale, a rate); NULL passes (issue 27,
-- L3: attention(scale => 0) returned NaN weights). True, for a WHERE.
create or replace function pgmem._check_positive(p_value float8, p_name text) returns boolean
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_value is not null and (p_value <= 0 or p_value in ('NaN', 'Infinity')) then  -- (PostgreSQL: NaN = NaN, NaN > every number)
    perform pgmem._bad_input(format('%s must be a finite number above 0, got %s', p_name, p_value));
  end if;
  return true;
end $$;
comment on function pgmem._check_positive(float8, text) is 'True, or raises 22023 naming the argument unless it is NULL or a finite number above 0.';

-- A number in [0, 1] when given (NULL passes), as a condition for SQL functions: true, or 22023
-- naming the argument (issue 27, L3: search_insights(min_confidence => NaN) silently matched nothing).
create or replace function pgmem._unit_ok(p_value float8, p_name text) returns boolean
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  perform pgmem._check_unit(p_value, p_name);
  return true;
end $$;
comment on function pgmem._unit_ok(float8, text) is 'True, or raises 22023 naming the argument unless it is NULL or a number between 0 and 1.';
