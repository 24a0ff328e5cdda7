-- Tier B, profile facts (layered-memory-architecture.md, "Four Memory Tiers": B) Semantic,
-- user traits, preferences, personal facts, key-value, updated on profile statement
-- detection). Bitemporal (see the table's comment in migrations/versions/0007_layered.py):
--
--   valid_from / valid_to         when the fact held (event time: when it was stated, or given)
--   recorded_from / recorded_to   when pgmem held this row to be true (transaction time)
--
-- set_fact never deletes and never changes a value: it retires the rows whose validity the
-- new value overlaps (recorded_to = now) and inserts their remainders with the validity
-- closed, then the new row. So profile(user, as_of) answers "what held then" and
-- profile(user, as_of, known_at) "what did pgmem believe then held". Each call is one row
-- of pgmem.history (memory_id NULL, details.table = 'profile_facts').

create or replace function pgmem.detect_facts(content text, speaker text default null) returns jsonb
  language sql immutable security definer
  set search_path = pgmem, pg_catalog, pg_temp
  return case when pgmem._check_args('detect_facts', jsonb_build_object('content', content, 'speaker', speaker))  -- sizes first (issue 27)
              then pgmem._engine('profile_facts', 'detect_facts', jsonb_build_object('text', content, 'speaker', speaker)) end;
comment on function pgmem.detect_facts(text, text) is
  'The profile facts a message states about its speaker (python/pgmem/engine/profile_facts.py, the extractor''s heuristic): a JSON array of {key, value, confidence, statement, previous?}. An assistant, tool or system speaker states none.';

create or replace function pgmem._fact_key(p_key text) returns text
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare k text := lower(btrim(p_key));
begin
  if k is null or k !~ '^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$' or length(k) > 96 then
    perform pgmem._bad_input(format('fact key %s is not valid: keys are lower-case words joined by _ and . (at most 96 characters)',
                                    coalesce(quote_literal(p_key), 'NULL')),
      'e.g. ''name'', ''location'', ''allergies.peanuts'', ''favorite_color''');
  end if;
  return k;
end $$;

-- One writer per (tenant, user, key) until the transaction ends: validity intervals stay disjoint.
create or replace function pgmem._lock_fact(p_tenant text, p_user_id text, p_key text) returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
  return (select null::void from (select pg_advisory_xact_lock(hashtextextended(
            'pgmem.fact' || chr(31) || p_tenant || chr(31) || p_user_id || chr(31) || p_key, 0))) x);

create or replace function pgmem._fact_history(p_tenant text, p_op text, p_before jsonb, p_after jsonb, p_details jsonb)
returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  insert into pgmem.history (tenant, memory_id, op, before, after, details)
  values (p_tenant, null, p_op, p_before, p_after, jsonb_build_object('table', 'profile_facts') || p_details)
$$;

create or replace function pgmem.set_fact(
  user_id text,
  key text,
  value jsonb,
  valid_from timestamptz default null,
  valid_to timestamptz default null,
  confidence float8 default 1,
  source text default 'api',
  source_memory_id bigint default null,
  statement text default null,
  metadata jsonb default '{}')
returns table (fact_id bigint, decision text, previous_value jsonb, retired bigint[])
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_key text := pgmem._fact_key(key);
  v_vf timestamptz := coalesce(pgmem._check_time(valid_from, 'valid_from', true), now());
  v_vt timestamptz := pgmem._check_time(valid_to, 'valid_to', true);
  v_now timestamptz := clock_timestamp();
  v_same pgmem.profile_facts;
  v_old pgmem.profile_facts;
  v_new pgmem.profile_facts;
  v_retired bigint[] := '{}'::bigint[];
begin
  perform pgmem._check_args('set_fact', jsonb_build_object('user_id', user_id, 'key', key, 'value', value, 'source', source, 'statement', statement, 'metadata', metadata));  -- sizes first (issue 27)
  if user_id is null or user_id !~ '\S' then
    perform pgmem._bad_input('set_fact needs a user_id: profile facts belong to a user');
  end if;
  if value is null or jsonb_typeof(value) = 'null' then
    perform pgmem._bad_input(format('the value of fact "%s" is null', v_key),
      format('to end a fact, use pgmem.end_fact(%L, %L)', user_id, v_key));
  end if;
  if v_vt is not null and v_vt <= v_vf then
    perform pgmem._bad_input(format('valid_to %s is not after valid_from %s', v_vt, v_vf));
  end if;
  perform pgmem._check_unit(confidence, 'confidence');
  if metadata is not null and jsonb_typeof(metadata) <> 'object' then
    perform pgmem._bad_input(format('metadata must be a JSON object, got %s', jsonb_typeof(metadata)));
  end if;
  perform pgmem._lock_fact(v_tenant, user_id, v_key);

  -- an open-ended new value holds until the next value already known after it
  if v_vt is null then
    select min(f.valid_from) into v_vt from pgmem.profile_facts f
     where f.tenant = v_tenant and f.user_id = set_fact.user_id and f.key = v_key and f.recorded_to is null
       and f.valid_from > v_vf;
  end if;

  -- already in force with this value over the same span: nothing changes
  select * into v_same from pgmem.profile_facts f
   where f.tenant = v_tenant and f.user_id = set_fact.user_id and f.key = v_key and f.recorded_to is null
     and f.valid_from <= v_vf and (f.valid_to is null or f.valid_to > v_vf)
   limit 1;
  if v_same.id is not null and v_same.value = value and v_same.valid_to is not distinct from v_vt then
    fact_id := v_same.id; decision := 'unchanged'; previous_value := v_same.value; retired := '{}';
    return next; return;
  end if;
  previous_value := v_same.value;

  -- retire every row the new validity [v_vf, v_vt) overlaps, keeping what lies outside it
  for v_old in
    update pgmem.profile_facts f set recorded_to = v_now
     where f.tenant = v_tenant and f.user_id = set_fact.user_id and f.key = v_key and f.recorded_to is null
       and f.valid_from < coalesce(v_vt, 'infinity') and coalesce(f.valid_to, 'infinity') > v_vf
    returning f.*
  loop
    v_retired := v_retired || v_old.id;
    insert into pgmem.profile_facts (tenant, user_id, key, value, confidence, source, source_memory_id, statement,
                                     valid_from, valid_to, recorded_from, replaces, metadata)
    select v_old.tenant, v_old.user_id, v_old.key, v_old.value, v_old.confidence, v_old.source, v_old.source_memory_id,
           v_old.statement, p.lo, p.hi, v_now, v_old.id, v_old.metadata
      from (values ('before', v_old.valid_from, v_vf), ('after', v_vt, v_old.valid_to)) p(part, lo, hi)
     where (p.part = 'before' and v_old.valid_from < v_vf)
        or (p.part = 'after' and v_vt is not null and coalesce(v_old.valid_to, 'infinity') > v_vt);
  end loop;

  insert into pgmem.profile_facts as f (tenant, user_id, key, value, confidence, source, source_memory_id, statement,
                                        valid_from, valid_to, recorded_from, metadata)
  values (v_tenant, user_id, v_key, value, coalesce(confidence, 1), coalesce(source, 'api'), source_memory_id,
          statement, v_vf, v_vt, v_now, coalesce(metadata, '{}'))
  returning f.* into v_new;

  fact_id := v_new.id;
  retired := v_retired;
  decision := case when cardinality(v_retired) = 0 then 'added' else 'superseded' end;
  -- current beats stale (issue 24): the memory that states the new value supersedes the memories
  -- that stated the values it replaces (src = newer, dst = older; search and the other rankings
  -- lower a superseded memory, sql/202_signals.sql), when both are known, differ and are the tenant's
  insert into pgmem.links (tenant, src_id, dst_id, kind, weight, metadata)
  select v_tenant, v_new.source_memory_id, o.source_memory_id, 'supersedes', 1.0,
         jsonb_build_object('reason', 'profile_fact', 'key', v_key, 'fact_id', v_new.id)
    from pgmem.profile_facts o
    join pgmem.memories mn on mn.id = v_new.source_memory_id and mn.tenant = v_tenant
    join pgmem.memories mo on mo.id = o.source_memory_id and mo.tenant = v_tenant
   where o.id = any(v_retired) and o.value <> v_new.value and o.source_memory_id <> v_new.source_memory_id
  on conflict on constraint links_pkey do nothing;
  perform pgmem._fact_history(v_tenant, case when decision = 'added' then 'add' else 'update' end,
    (select to_jsonb(f) from pgmem.profile_facts f where f.id = v_retired[1]),
    to_jsonb(v_new),
    jsonb_build_object('fact_id', v_new.id, 'key', v_key, 'decision', decision, 'retired', to_jsonb(v_retired)));
  return next;
end $$;
comment on function pgmem.set_fact(text, text, jsonb, timestamptz, timestamptz, float8, text, bigint, text, jsonb) is
  'Sets a profile fact of a user from valid_from (default now) on: the value in force is superseded (its row retired, a copy with its validity closed put in its place; nothing is deleted) and the change recorded in history. decision: added | superseded | unchanged (the same value already holds).';

create or replace function pgmem.end_fact(user_id text, key text, valid_to timestamptz default null, statement text default null)
returns table (fact_id bigint, decision text)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_key text := pgmem._fact_key(key);
  v_at timestamptz := coalesce(pgmem._check_time(valid_to, 'valid_to', true), now());
  v_now timestamptz := clock_timestamp();
  v_old pgmem.profile_facts;
  v_new pgmem.profile_facts;
begin
  perform pgmem._check_args('end_fact', jsonb_build_object('user_id', user_id, 'key', key, 'statement', statement));  -- sizes first (issue 27)
  perform pgmem._lock_fact(v_tenant, user_id, v_key);
  update pgmem.profile_facts f set recorded_to = v_now
   where f.tenant = v_tenant and f.user_id = end_fact.user_id and f.key = v_key and f.recorded_to is null
     and f.valid_from < v_at and f.valid_to is null
  returning f.* into v_old;
  if v_old.id is null then
    fact_id := null; decision := 'not_in_force';
    return next; return;
  end if;
  insert into pgmem.profile_facts as f (tenant, user_id, key, value, confidence, source, source_memory_id, statement,
                                        valid_from, valid_to, recorded_from, replaces, metadata)
  values (v_old.tenant, v_old.user_id, v_old.key, v_old.value, v_old.confidence, v_old.source, v_old.source_memory_id,
          v_old.statement, v_old.valid_from, v_at, v_now, v_old.id,
          v_old.metadata || jsonb_build_object('ended_by', statement))
  returning f.* into v_new;
  perform pgmem._fact_history(v_tenant, 'update', to_jsonb(v_old), to_jsonb(v_new),
    jsonb_build_object('fact_id', v_new.id, 'key', v_key, 'decision', 'ended', 'retired', jsonb_build_array(v_old.id)));
  fact_id := v_new.id; decision := 'ended';
  return next;
end $$;
comment on function pgmem.end_fact(text, text, timestamptz, text) is
  'Ends the validity of a user''s fact at valid_to (default now) without a new value ("I am no longer vegetarian"); the old row is retired and kept, the change is in history.';

create or replace function pgmem.profile(user_id text, as_of timestamptz default null, known_at timestamptz default null)
returns table (key text, value jsonb, confidence real, valid_from timestamptz, valid_to timestamptz,
               recorded_from timestamptz, source text, source_memory_id bigint, statement text, fact_id bigint)
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select f.key, f.value, f.confidence, f.valid_from, f.valid_to, f.recorded_from, f.source, f.source_memory_id,
         f.statement, f.id
    from pgmem.profile_facts f
   where pgmem._check_args('profile', jsonb_build_object('user_id', profile.user_id))
     and f.tenant = (select pgmem._require_tenant()) and f.user_id = profile.user_id
     and f.valid_from <= coalesce(profile.as_of, now()) and (f.valid_to is null or f.valid_to > coalesce(profile.as_of, now()))
     and f.recorded_from <= coalesce(profile.known_at, clock_timestamp())
     and (f.recorded_to is null or f.recorded_to > coalesce(profile.known_at, clock_timestamp()))
   order by f.key
$$;
comment on function pgmem.profile(text, timestamptz, timestamptz) is
  'The facts about a user in force at as_of (default now), as pgmem knew them at known_at (default now): one row per key.';

create or replace function pgmem.fact_history(user_id text, key text default null)
returns table (fact_id bigint, key text, value jsonb, confidence real, valid_from timestamptz, valid_to timestamptz,
               recorded_from timestamptz, recorded_to timestamptz, status text, source text, source_memory_id bigint,
               statement text, replaces bigint)
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  -- the BI view's rows and status (sql/330_tier_views.sql), of the caller's tenant
  select h.fact_id, h.key, h.value, h.confidence, h.valid_from, h.valid_to, h.recorded_from, h.recorded_to, h.status,
         h.source, h.source_memory_id, h.statement, h.replaces
    from pgmem.profile_facts_history h
   where pgmem._check_args('fact_history', jsonb_build_object('user_id', fact_history.user_id, 'key', fact_history.key))
     and h.tenant = (select pgmem._require_tenant()) and h.user_id = fact_history.user_id
     and (fact_history.key is null or h.key = lower(btrim(fact_history.key)))
   order by h.key, h.valid_from, h.recorded_from, h.fact_id
$$;
comment on function pgmem.fact_history(text, text) is
  'Every row ever recorded about a user''s facts (one key, or all): current, past (validity closed), future, and retired (superseded knowledge), oldest first.';

-- Applies detected facts (pgmem.detect_facts, the client's extractor, or an LLM) with set_fact.
-- A fact that names what it replaces ("switched from VS Code to Neovim") under a key the text
-- did not name (switched.<old>) takes the key of the user's fact in force whose value is the
-- old one, if there is one (editor = 'VS Code' -> editor = 'Neovim').
create or replace function pgmem.apply_facts(user_id text, facts jsonb, valid_from timestamptz default null,
                                             source_memory_id bigint default null, source text default 'heuristic')
returns table (key text, value jsonb, fact_id bigint, decision text)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  f jsonb;
  v_key text;
  r record;
begin
  perform pgmem._check_args('apply_facts', jsonb_build_object('user_id', user_id, 'facts', facts, 'source', source));  -- sizes first (issue 27)
  if facts is null or jsonb_typeof(facts) <> 'array' then
    perform pgmem._bad_input('facts must be a JSON array of {"key", "value", ...} objects',
      'pgmem.detect_facts(text) returns one');
  end if;
  for f in select x from jsonb_array_elements(facts) x loop
    if jsonb_typeof(f) <> 'object' or not f ? 'key' or not f ? 'value' then
      perform pgmem._bad_input(format('a fact must be an object with "key" and "value", got %s', f));
    end if;
    v_key := f->>'key';
    if f ? 'previous' and v_key like 'switched.%' then
      select p.key into v_key from pgmem.profile_facts p
       where p.tenant = v_tenant and p.user_id = apply_facts.user_id and p.recorded_to is null and p.valid_to is null
         and lower(p.value #>> '{}') = lower(f->>'previous')
       order by p.valid_from desc limit 1;
      v_key := coalesce(v_key, f->>'key');
    end if;
    select * into r from pgmem.set_fact(user_id, v_key, f->'value', valid_from, null,
                                        coalesce((f->>'confidence')::float8, 1), coalesce(source, 'heuristic'),
                                        source_memory_id, f->>'statement',
                                        jsonb_strip_nulls(jsonb_build_object('previous', f->'previous', 'rule', f->'rule')));
    key := v_key; value := f->'value'; fact_id := r.fact_id; decision := r.decision;
    return next;
  end loop;
end $$;
comment on function pgmem.apply_facts(text, jsonb, timestamptz, bigint, text) is
  'Sets each detected fact of a JSON array (pgmem.detect_facts'' format) with set_fact, from valid_from on; a "switched from X" fact supersedes the user''s fact whose value is X.';

-- remember() and remember_many() write the facts their extractor found (metadata.facts, put
-- there by the client: see pgmem.client.event_to_args) as the memory is stored. A row trigger
-- with a WHEN clause: for a memory without facts PostgreSQL evaluates the condition and queues
-- nothing (a statement trigger with a transition table would make every insert capture its
-- rows; measured in tests/test_layered_profile.py's notes and bench figures in README).
create or replace function pgmem._memory_facts() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if new.tenant is distinct from pgmem.current_tenant() then
    return null;  -- a write for another tenant than the session's (an operator's bulk load): facts are the API's
  end if;
  perform pgmem.apply_facts(new.user_id, new.metadata->'facts', new.created_at, new.id,
                            coalesce(nullif(new.metadata->>'extracted_by', ''), 'heuristic'));
  return null;
end $$;

create or replace trigger memories_profile_facts
  after insert on pgmem.memories
  for each row when (new.user_id is not null and jsonb_typeof(new.metadata->'facts') = 'array')
  execute function pgmem._memory_facts();

-- A profile statement the surprise gate kept out (an exact duplicate, or a near-repeat it
-- rejected) is still a statement made now: "I live in Lisbon" again after "I moved to Berlin"
-- makes Lisbon current again. The history row of such a write points at the memory it
-- repeats; that memory's facts are applied at the new time, each only if the new text names
-- its value (or, for true/false facts, the key's last word), so a rejected "I moved back to
-- Lisbon" never re-applies the nearest memory's "Berlin".
create or replace function pgmem._repeated_facts() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_mem pgmem.memories;
  v_text text := lower(coalesce(new.after->>'content', ''));
  v_facts jsonb;
begin
  if new.tenant is distinct from pgmem.current_tenant() then
    return null;
  end if;
  select * into v_mem from pgmem.memories m where m.id = new.memory_id and m.tenant = new.tenant;
  v_facts := coalesce(new.after->'metadata'->'facts', v_mem.metadata->'facts');
  if v_mem.user_id is null or jsonb_typeof(v_facts) <> 'array' or v_mem.user_id is distinct from coalesce(new.after->>'user_id', v_mem.user_id) then
    return null;
  end if;
  v_facts := coalesce((select jsonb_agg(f) from jsonb_array_elements(v_facts) f
                        where position(lower(case when jsonb_typeof(f->'value') = 'boolean'
                                                  then replace(regexp_replace(f->>'key', '^.*\.', ''), '_', ' ')
                                                  else f->>'value' end) in v_text) > 0), '[]');
  if jsonb_array_length(v_facts) > 0 then
    perform pgmem.apply_facts(v_mem.user_id, v_facts, coalesce((new.after->>'created_at')::timestamptz, now()),
                              v_mem.id, coalesce(nullif(v_mem.metadata->>'extracted_by', ''), 'heuristic'));
  end if;
  return null;
end $$;

create or replace trigger history_repeated_facts
  after insert on pgmem.history
  for each row when (new.op in ('duplicate', 'reject') and new.memory_id is not null)
  execute function pgmem._repeated_facts();

create or replace trigger profile_facts_memory_tenant before insert or update of source_memory_id on pgmem.profile_facts
  for each row when (new.source_memory_id is not null) execute function pgmem._check_memory_tenant('source_memory_id');
