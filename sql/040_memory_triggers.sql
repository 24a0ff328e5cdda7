-- Triggers on pgmem.memories: validation and defaults for every write path (remember(),
-- remember_many(), plain INSERT/UPDATE/COPY), the embedding queue, and history. Every change
-- to a memory is recorded in pgmem.history with before/after snapshots, whatever wrote it.
--
-- Validation is per row (BEFORE ... FOR EACH ROW: it sets defaults). History and the
-- embedding queue are written per statement (AFTER ... FOR EACH STATEMENT with transition
-- tables): a batch of 1,000 new memories, or a job that archives 10,000, writes its history
-- in one INSERT ... SELECT instead of 1,000 or 10,000 (issue 13, "history per batch in one
-- statement").

-- What a history snapshot keeps of a row: everything but the derived vectors.
-- (The vector and the tsvector are set to NULL before to_jsonb, not removed after it: turning
-- 384 floats into JSON numbers twice per history row was most of the cost of a job batch's
-- history statement at 1M.)
create or replace function pgmem._snapshot(m pgmem.memories) returns jsonb
  language plpgsql immutable parallel safe
  set search_path = pgmem, public, pg_temp
as $$
declare v_embedded boolean := m.embedding is not null;
begin
  m.embedding := null;
  m.tsv := null;
  return (to_jsonb(m) - 'embedding' - 'tsv') || jsonb_build_object('has_embedding', v_embedded);
end $$;

-- API functions name the operation they perform (merge, unmerge, ...) for the triggers.
create or replace function pgmem._set_op(p_op text, p_details jsonb default '{}') returns void
  language sql volatile
  return (select null::void from (select set_config('pgmem.op', coalesce(p_op, ''), true),
                                         set_config('pgmem.op_details', coalesce(p_details, '{}')::text, true)) s);

create or replace function pgmem._op_details() returns jsonb
  language sql stable
  return coalesce(nullif(current_setting('pgmem.op_details', true), '')::jsonb, '{}');

-- The write limits of the current tenant (020_defaults.sql), read once per row or batch.
create or replace function pgmem._write_limits() returns jsonb
  language sql stable
  set search_path = pgmem, public, pg_temp
as $$
  select jsonb_object_agg(s.key, s.value)
    from (select distinct on (x.key) x.key, x.value from pgmem.settings x
           where x.key in ('max_content_bytes', 'max_metadata_bytes', 'max_summary_bytes', 'max_field_bytes',
                           'max_id_bytes', 'max_tags')
             and x.tenant in (coalesce(pgmem.current_tenant(), '*'), '*')
           order by x.key, (x.tenant = '*')) s
$$;
comment on function pgmem._write_limits() is
  'The write-path size limits of the current tenant (max_content_bytes, max_metadata_bytes, max_summary_bytes, max_field_bytes, max_id_bytes, max_tags), as one JSON object.';

-- One text field against its limit: a clear error naming the field, its size and the setting.
create or replace function pgmem._check_bytes(p_value text, p_name text, p_limits jsonb, p_key text, p_where text default '')
returns void
  language plpgsql immutable
  set search_path = pgmem, public, pg_temp
as $$
declare v_max bigint := (p_limits->>p_key)::bigint;
begin
  if p_value is not null and v_max is not null and octet_length(p_value) > v_max then
    perform pgmem._bad_input(format('%s%s is %s bytes, more than %s (%s)', p_where, p_name, octet_length(p_value), p_key, v_max),
      format('shorten it, or raise %s in pgmem.settings', p_key));
  end if;
end $$;

-- Every field check of a memory row, for the trigger (p_old = the row before an UPDATE: only
-- changed fields are checked, so a row written before a limit existed can still change state)
-- and for remember/remember_many (p_where names the item: 'item 3 of remember_many: ').
-- Category and embedding have checks of their own (_check_category, _check_embedding).
create or replace function pgmem._check_memory(n pgmem.memories, p_old pgmem.memories, p_limits jsonb, p_where text default '')
returns void
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
as $$
declare
  o pgmem.memories := p_old;
  ins boolean := p_old is null;
  t text;
begin
  if ins or n.content is distinct from o.content then
    if pgmem._is_blank(n.content) then  -- (issue 27, L3: zero-width spaces only were accepted)
      perform pgmem._bad_input(p_where || 'content is empty: a memory needs some text', 'pass the event text as content');
    end if;
    if octet_length(n.content) > coalesce((p_limits->>'max_content_bytes')::bigint, 262144) then
      perform pgmem._bad_input(format('%scontent is %s bytes, more than max_content_bytes (%s)', p_where, octet_length(n.content),
                                      coalesce((p_limits->>'max_content_bytes')::bigint, 262144)),
        'store a summary and keep the full text elsewhere (metadata can hold a reference), or raise max_content_bytes in pgmem.settings');
    end if;
  end if;
  if ins or n.metadata is distinct from o.metadata then
    if n.metadata is not null and jsonb_typeof(n.metadata) <> 'object' then
      perform pgmem._bad_input(format('%smetadata must be a JSON object, got %s', p_where, jsonb_typeof(n.metadata)));
    end if;
    perform pgmem._check_bytes(n.metadata::text, 'metadata', p_limits, 'max_metadata_bytes', p_where);
  end if;
  -- reconstructive (issue 16): motor and sensory content domains, JSON objects bounded like metadata
  if ins or (n.motor, n.sensory) is distinct from (o.motor, o.sensory) then
    if (n.motor is not null and jsonb_typeof(n.motor) <> 'object') or (n.sensory is not null and jsonb_typeof(n.sensory) <> 'object') then
      perform pgmem._bad_input(format('%smotor and sensory content must be JSON objects, got %s and %s', p_where,
                                      coalesce(jsonb_typeof(n.motor), 'NULL'), coalesce(jsonb_typeof(n.sensory), 'NULL')),
        'e.g. motor => ''{"action": "grasp", "effector": "right hand"}'', sensory => ''{"visual": "red mug"}''');
    end if;
    perform pgmem._check_bytes(n.motor::text, 'motor', p_limits, 'max_metadata_bytes', p_where),
            pgmem._check_bytes(n.sensory::text, 'sensory', p_limits, 'max_metadata_bytes', p_where);
  end if;
  if ins or n.summary is distinct from o.summary then
    perform pgmem._check_bytes(n.summary, 'summary', p_limits, 'max_summary_bytes', p_where);
  end if;
  if ins or (n.who, n.what, n.location, n.why, n.how) is distinct from (o.who, o.what, o.location, o.why, o.how) then
    perform pgmem._check_bytes(n.who, 'who', p_limits, 'max_field_bytes', p_where),
            pgmem._check_bytes(n.what, 'what', p_limits, 'max_field_bytes', p_where),
            pgmem._check_bytes(n.location, 'location (where)', p_limits, 'max_field_bytes', p_where),
            pgmem._check_bytes(n.why, 'why', p_limits, 'max_field_bytes', p_where),
            pgmem._check_bytes(n.how, 'how', p_limits, 'max_field_bytes', p_where);
  end if;
  if ins or (n.user_id, n.agent_id, n.session_id, n.event_key, n.embedding_model)
            is distinct from (o.user_id, o.agent_id, o.session_id, o.event_key, o.embedding_model) then
    perform pgmem._check_bytes(n.user_id, 'user_id', p_limits, 'max_id_bytes', p_where),
            pgmem._check_bytes(n.agent_id, 'agent_id', p_limits, 'max_id_bytes', p_where),
            pgmem._check_bytes(n.session_id, 'session_id', p_limits, 'max_id_bytes', p_where),
            pgmem._check_bytes(n.event_key, 'event_key', p_limits, 'max_id_bytes', p_where),
            pgmem._check_bytes(n.embedding_model, 'embedding_model', p_limits, 'max_id_bytes', p_where);
  end if;
  if ins or n.topics is distinct from o.topics or n.entities is distinct from o.entities then
    if coalesce(cardinality(n.topics), 0) > (p_limits->>'max_tags')::int
       or coalesce(cardinality(n.entities), 0) > (p_limits->>'max_tags')::int then
      perform pgmem._bad_input(format('%sa memory has at most max_tags (%s) topics and as many entities, got %s and %s', p_where,
                                      p_limits->>'max_tags', cardinality(n.topics), cardinality(n.entities)),
        'keep the most telling ones, or raise max_tags in pgmem.settings');
    end if;
    foreach t in array coalesce(n.topics, '{}') || coalesce(n.entities, '{}') loop
      perform pgmem._check_bytes(t, 'a topic or entity', p_limits, 'max_id_bytes', p_where);
    end loop;
  end if;
  if ins or (n.importance, n.salience, n.valence, n.arousal, n.dominance)
            is distinct from (o.importance, o.salience, o.valence, o.arousal, o.dominance) then
    perform pgmem._check_unit(n.importance, p_where || 'importance'), pgmem._check_unit(n.salience, p_where || 'salience'),
            pgmem._check_unit(n.valence, p_where || 'valence'), pgmem._check_unit(n.arousal, p_where || 'arousal'),
            pgmem._check_unit(n.dominance, p_where || 'dominance');
  end if;
  if ins then
    perform pgmem._check_time(n.created_at, p_where || 'created_at');
  end if;
  if ins or n.happened_at is distinct from o.happened_at then
    perform pgmem._check_time(n.happened_at, p_where || 'happened_at (when)', true);
  end if;
  if ins or n.expires_at is distinct from o.expires_at then
    perform pgmem._check_time(n.expires_at, p_where || 'expires_at', true);
    if ins and n.expires_at <= coalesce(n.created_at, now()) then  -- (issue 27, L3: an expiry in 1900 was stored)
      perform pgmem._bad_input(format('%sexpires_at %s is not after the memory''s creation (%s): it would expire at once',
                                      p_where, n.expires_at, coalesce(n.created_at, now())),
        'leave expires_at NULL for a memory that does not expire; pgmem.forget removes one now');
    end if;
  end if;
end $$;
comment on function pgmem._check_memory(pgmem.memories, pgmem.memories, jsonb, text) is
  'Checks the fields of a memory row (content, metadata, summary, 5W1H, ids, tags, unit values, times) against the write limits; on UPDATE (p_old given) only the fields that changed. Raises 22023 naming the field, the limit and its setting.';

create or replace function pgmem._memories_before() returns trigger
  language plpgsql
  set search_path = pgmem, public, pg_temp
as $$
declare
  v_limits jsonb := pgmem._write_limits();
begin
  if tg_op = 'INSERT' then
    -- a tenant the row names itself is checked too (enforce_tenants; issue 14, Low)
    new.tenant := coalesce(pgmem._check_registered(new.tenant), pgmem._require_tenant());
    perform pgmem._check_memory(new, null, v_limits);
    new.created_at := coalesce(new.created_at, now());
    new.updated_at := new.created_at;
  else
    if new.tenant is distinct from old.tenant then
      perform pgmem._check_registered(new.tenant);
    end if;
    perform pgmem._check_memory(new, old, v_limits);
    new.updated_at := now();
    if new.content is distinct from old.content and new.embedding is not distinct from old.embedding then
      new.embedding := null;  -- stale: the worker re-embeds the new text
    end if;
    if new.state is distinct from old.state then
      new.state_changed_at := now();
    end if;
  end if;
  if tg_op = 'INSERT' or new.category is distinct from old.category then
    perform pgmem._check_category(new.category);
  end if;
  if tg_op = 'INSERT' or new.embedding is distinct from old.embedding then
    perform pgmem._check_embedding(new.embedding);
    new.embedded_at := case when new.embedding is null then null else now() end;
    if new.embedding is null then new.embedding_model := null; end if;
  end if;
  if tg_op = 'INSERT' or new.content is distinct from old.content then
    if new.token_count is null or new.token_count = 0 or (tg_op = 'UPDATE' and new.token_count = old.token_count) then
      new.token_count := pgmem.estimate_tokens(new.content);
    end if;
  end if;
  return new;
end $$;

-- History op of an UPDATE the caller did not name (pgmem.op unset): inferred from the change.
create or replace function pgmem._inferred_op(o pgmem.memories, n pgmem.memories) returns text
  language sql immutable
  set search_path = pgmem, public, pg_temp
  return case
    when n.state is distinct from o.state and n.state = 'deleted' then 'delete'
    when n.state is distinct from o.state and n.state = 'archived' then 'archive'
    when n.state is distinct from o.state and n.state = 'merged' then 'merge'
    when n.state is distinct from o.state and n.state = 'active' then 'restore'
    when o.embedding is null and n.embedding is not null then 'embed'
    else 'update' end;

create or replace function pgmem._memories_after_insert() returns trigger
  language plpgsql
  set search_path = pgmem, public, pg_temp
as $$
begin
  insert into pgmem.history (tenant, memory_id, op, after, details)
  select n.tenant, n.id, coalesce(nullif(current_setting('pgmem.op', true), ''), 'add'), pgmem._snapshot(n::pgmem.memories),
         pgmem._op_details()
    from new_rows n order by n.id;
  insert into pgmem.embedding_queue (memory_id, tenant)
  select n.id, n.tenant from new_rows n where n.embedding is null order by n.id
  on conflict (memory_id) do nothing;
  -- active and embedded: queued for the HNSW index (125_vectors.sql; the `index` job)
  insert into pgmem.vector_queue (memory_id, tenant)
  select n.id, n.tenant from new_rows n where n.embedding is not null and n.state = 'active' order by n.id
  on conflict (memory_id) do nothing;
  return null;
end $$;

create or replace function pgmem._memories_after_update() returns trigger
  language plpgsql
  set search_path = pgmem, public, pg_temp
as $$
declare
  v_op text := nullif(current_setting('pgmem.op', true), '');
  v_vectors boolean;
begin
  -- Every statement joining old_rows to new_rows runs through EXECUTE, so that it is planned
  -- with this UPDATE's row count: PL/pgSQL caches the plan of a statement without parameters
  -- at its first run, and a nested loop over two transition tables planned for a one-row
  -- update (touch, forget) is quadratic for a 10,000-row job batch (prune took minutes
  -- instead of seconds at 1M: bench/README.md, "Write path and jobs at 1M").
  -- bookkeeping of usage alone (access_count, last_accessed_at) is the access log's job, not history's
  execute $q$
  insert into pgmem.history (tenant, memory_id, op, before, after, details)
  select s.tenant, s.id, coalesce($1, s.op), s.b, s.a, pgmem._op_details()
    from (select n.tenant, n.id, pgmem._inferred_op(o::pgmem.memories, n::pgmem.memories) as op,
                 pgmem._snapshot(o::pgmem.memories) as b, pgmem._snapshot(n::pgmem.memories) as a
            from old_rows o join new_rows n on n.id = o.id) s
   where (s.b - 'access_count' - 'last_accessed_at' - 'updated_at') <> (s.a - 'access_count' - 'last_accessed_at' - 'updated_at')
   order by s.id$q$ using v_op;
  -- the caller gave the vector: no longer queued
  execute $q$
  delete from pgmem.embedding_queue q
   using old_rows o join new_rows n on n.id = o.id
   where q.memory_id = n.id and o.embedding is null and n.embedding is not null$q$;
  execute $q$
  insert into pgmem.embedding_queue (memory_id, tenant)
  select n.id, n.tenant from old_rows o join new_rows n on n.id = o.id
   where n.embedding is null and (o.embedding is not null or n.content is distinct from o.content)
   order by n.id
  on conflict (memory_id) do update set queued_at = now(), attempts = 0, last_error = null, not_before = now()$q$;
  -- the HNSW index (125_vectors.sql) holds the active, embedded memories as they are now: one
  -- that leaves `active`, or whose vector, user or tenant changes, leaves it (and its queue),
  -- and is queued again when it is (still) active and embedded. The queue first: the `index`
  -- job holds the queue rows it is moving (FOR UPDATE), so this waits for it, and the next
  -- statement then sees, and removes, what it moved. Usually nothing of this changed (a touch,
  -- a new cluster_id): then they are skipped. (A count, not EXISTS: EXISTS is planned as a
  -- fast-start nested loop, which compares every old row with every new one when no row
  -- qualifies: 17 s for a 4,000-row UPDATE at 1M.)
  execute $q$select count(*) > 0 from old_rows o join new_rows n on n.id = o.id
              where (n.state, n.user_id, n.tenant) is distinct from (o.state, o.user_id, o.tenant)
                 or n.embedding is distinct from o.embedding$q$ into v_vectors;
  if not v_vectors then
    return null;
  end if;
  execute $q$
  delete from pgmem.vector_queue q using old_rows o join new_rows n on n.id = o.id
   where q.memory_id = n.id
     and ((n.state, n.user_id, n.tenant) is distinct from (o.state, o.user_id, o.tenant) or n.embedding is distinct from o.embedding)$q$;
  execute $q$
  delete from pgmem.memory_vectors v using old_rows o join new_rows n on n.id = o.id
   where v.memory_id = n.id
     and ((n.state, n.user_id, n.tenant) is distinct from (o.state, o.user_id, o.tenant) or n.embedding is distinct from o.embedding)$q$;
  execute $q$
  insert into pgmem.vector_queue (memory_id, tenant)
  select n.id, n.tenant from old_rows o join new_rows n on n.id = o.id
   where n.state = 'active' and n.embedding is not null
     and ((n.state, n.user_id, n.tenant) is distinct from (o.state, o.user_id, o.tenant) or n.embedding is distinct from o.embedding)
   order by n.id
  on conflict (memory_id) do nothing$q$;
  return null;
end $$;

create or replace function pgmem._memories_after_delete() returns trigger
  language plpgsql
  set search_path = pgmem, public, pg_temp
as $$
declare
  v_op text := nullif(current_setting('pgmem.op', true), '');
begin
  insert into pgmem.history (tenant, memory_id, op, before, details)
  select o.tenant, o.id, coalesce(v_op, 'purge'),
         case when v_op = 'erase'
              then jsonb_build_object('id', o.id, 'tenant', o.tenant, 'user_id', o.user_id, 'erased', true)
              else pgmem._snapshot(o::pgmem.memories) end,
         pgmem._op_details()
    from old_rows o order by o.id;
  return null;
end $$;

create or replace trigger memories_before
  before insert or update on pgmem.memories
  for each row execute function pgmem._memories_before();

-- (the row-level memories_after trigger of revisions before 0006 is dropped by 0006)
create or replace trigger memories_after_insert
  after insert on pgmem.memories referencing new table as new_rows
  for each statement execute function pgmem._memories_after_insert();

create or replace trigger memories_after_update
  after update on pgmem.memories referencing old table as old_rows new table as new_rows
  for each statement execute function pgmem._memories_after_update();

create or replace trigger memories_after_delete
  after delete on pgmem.memories referencing old table as old_rows
  for each statement execute function pgmem._memories_after_delete();
