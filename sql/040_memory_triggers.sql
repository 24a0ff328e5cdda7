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
  set search_path = pgmem, pg_catalog, pg_temp
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
-- (PL/pgSQL, whose plan is cached: as a SQL function with SET it was planned on every call,
-- 0.12 ms of every row a remember_many batch inserted.)
create or replace function pgmem._write_limits() returns jsonb
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := coalesce(pgmem.current_tenant(), '*');
begin
  return (select jsonb_object_agg(s.key, s.value)
            from (select distinct on (x.key) x.key, x.value from pgmem.settings x
                   where x.key in ('max_content_bytes', 'max_metadata_bytes', 'max_summary_bytes', 'max_field_bytes',
                                   'max_id_bytes', 'max_tags')
                     and x.tenant in (v_tenant, '*')
                   order by x.key, (x.tenant = '*')) s);
end $$;
comment on function pgmem._write_limits() is
  'The write-path size limits of the current tenant (max_content_bytes, max_metadata_bytes, max_summary_bytes, max_field_bytes, max_id_bytes, max_tags), as one JSON object.';

-- One text field against its limit: a clear error naming the field, its size and the setting.
create or replace function pgmem._check_bytes(p_value text, p_name text, p_limits jsonb, p_key text, p_where text default '')
returns void
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
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
  set search_path = pgmem, pg_catalog, pg_temp
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
  -- (each group is tested in one expression first; the calls that name the field run only when
  -- something is over its limit: a remember_many batch checks every item twice, here and in
  -- the trigger)
  if (ins or (n.who, n.what, n.location, n.why, n.how) is distinct from (o.who, o.what, o.location, o.why, o.how))
     and coalesce(greatest(octet_length(n.who), octet_length(n.what), octet_length(n.location), octet_length(n.why),
                           octet_length(n.how)), 0) > coalesce((p_limits->>'max_field_bytes')::bigint, 0) then
    perform pgmem._check_bytes(n.who, 'who', p_limits, 'max_field_bytes', p_where),
            pgmem._check_bytes(n.what, 'what', p_limits, 'max_field_bytes', p_where),
            pgmem._check_bytes(n.location, 'location (where)', p_limits, 'max_field_bytes', p_where),
            pgmem._check_bytes(n.why, 'why', p_limits, 'max_field_bytes', p_where),
            pgmem._check_bytes(n.how, 'how', p_limits, 'max_field_bytes', p_where);
  end if;
  if (ins or (n.user_id, n.agent_id, n.session_id, n.event_key, n.embedding_model)
             is distinct from (o.user_id, o.agent_id, o.session_id, o.event_key, o.embedding_model))
     and coalesce(greatest(octet_length(n.user_id), octet_length(n.agent_id), octet_length(n.session_id),
                           octet_length(n.event_key), octet_length(n.embedding_model)), 0)
         > coalesce((p_limits->>'max_id_bytes')::bigint, 0) then
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
      if octet_length(t) > coalesce((p_limits->>'max_id_bytes')::bigint, 0) then
        perform pgmem._check_bytes(t, 'a topic or entity', p_limits, 'max_id_bytes', p_where);
      end if;
    end loop;
  end if;
  if (ins or (n.importance, n.salience, n.valence, n.arousal, n.dominance)
             is distinct from (o.importance, o.salience, o.valence, o.arousal, o.dominance))
     and not (coalesce(n.importance between 0 and 1, true) and coalesce(n.salience between 0 and 1, true)
              and coalesce(n.valence between 0 and 1, true) and coalesce(n.arousal between 0 and 1, true)
              and coalesce(n.dominance between 0 and 1, true)) then
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
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  -- The rows pgmem._remember_core inserts were validated, item by item, before its INSERT: the
  -- same checks, with messages that name the item of the batch. It marks its INSERT in
  -- pgmem.write_checked (this backend, this transaction; removed when the INSERT is done), a
  -- table no application role may write, and they are not checked twice (0.25 ms a row of a
  -- remember_many batch). Every other INSERT (the application's plain SQL, COPY, an
  -- administrator's) is checked here. (This function is SECURITY DEFINER, 900_security.sql:
  -- current_user cannot tell who inserts.)
  v_checked boolean := false;
begin
  if tg_op = 'INSERT' and new.tenant is not null and to_regclass('pgmem.write_checked') is not null then  -- (revision 0018)
    v_checked := exists (select 1 from pgmem.write_checked c where c.pid = pg_backend_pid() and c.xid = pg_current_xact_id()::text::bigint);
  end if;
  if tg_op = 'INSERT' then
    if not v_checked then
      -- a tenant the row names itself is checked too (enforce_tenants; issue 14, Low)
      new.tenant := coalesce(pgmem._check_registered(new.tenant), pgmem._require_tenant());
      perform pgmem._check_memory(new, null, pgmem._write_limits());
    end if;
    new.created_at := coalesce(new.created_at, now());
    new.updated_at := new.created_at;
  else
    if new.tenant is distinct from old.tenant then
      perform pgmem._check_registered(new.tenant);
    end if;
    -- the limits are read only when a field they bound changed (a touch or a state change
    -- needs none: 28 µs a row of a job's batch)
    if (new.content, new.metadata, new.motor, new.sensory, new.summary, new.who, new.what, new.location, new.why, new.how,
        new.user_id, new.agent_id, new.session_id, new.event_key, new.embedding_model, new.topics, new.entities,
        new.importance, new.salience, new.valence, new.arousal, new.dominance, new.happened_at, new.expires_at)
       is distinct from
       (old.content, old.metadata, old.motor, old.sensory, old.summary, old.who, old.what, old.location, old.why, old.how,
        old.user_id, old.agent_id, old.session_id, old.event_key, old.embedding_model, old.topics, old.entities,
        old.importance, old.salience, old.valence, old.arousal, old.dominance, old.happened_at, old.expires_at) then
      perform pgmem._check_memory(new, old, pgmem._write_limits());
    end if;
    new.updated_at := now();
    if new.content is distinct from old.content and new.embedding::real[] is not distinct from old.embedding::real[] then
      new.embedding := null;  -- stale: the worker re-embeds the new text
    end if;
    if new.state is distinct from old.state then
      new.state_changed_at := now();
    end if;
  end if;
  if (tg_op = 'INSERT' and not v_checked) or (tg_op = 'UPDATE' and new.category is distinct from old.category) then
    perform pgmem._check_category(new.category);
  end if;
  if tg_op = 'INSERT' or new.embedding::real[] is distinct from old.embedding::real[] then
    if not v_checked then
      perform pgmem._check_embedding(new.embedding);
    end if;
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
  set search_path = pgmem, pg_catalog, pg_temp
  return case
    when n.state is distinct from o.state and n.state = 'deleted' then 'delete'
    when n.state is distinct from o.state and n.state = 'archived' then 'archive'
    when n.state is distinct from o.state and n.state = 'merged' then 'merge'
    when n.state is distinct from o.state and n.state = 'active' then 'restore'
    when o.embedding is null and n.embedding is not null then 'embed'
    else 'update' end;

-- The history snapshot of every row of a transition table, as SQL: the same JSON object as
-- pgmem._snapshot (every column but the vector and the tsvector, and has_embedding), built
-- from the row's columns in one expression instead of a PL/pgSQL call that copies the row.
-- The column list comes from the catalog, so a column added by a later revision is in it.
-- Measured on a prune batch of 10,000 (bench/write_floor.py, 100,000 memories): _snapshot
-- 27 µs a call, called 4 times a row (the subquery that named it twice was flattened into
-- the WHERE), 1.0 s of the batch's 4.7 s; this expression about 9 µs, twice a row.
create or replace function pgmem._snapshot_sql(p_alias text) returns text
  language sql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select '(' || string_agg(format('jsonb_build_object(%s)', c.pairs), ' || ' order by c.chunk)
         || format(' || jsonb_build_object(''has_embedding'', %I.embedding is not null))', p_alias)
    from (select (a.n - 1) / 40 as chunk, string_agg(format('%L, %I.%I', a.attname, p_alias, a.attname), ', ' order by a.n) as pairs
            from (select a.attname, row_number() over (order by a.attnum) as n
                    from pg_catalog.pg_attribute a
                   where a.attrelid = 'pgmem.memories'::regclass and a.attnum > 0 and not a.attisdropped
                     and a.attname not in ('embedding', 'tsv')) a
           group by 1) c
$$;
comment on function pgmem._snapshot_sql(text) is
  'The SQL expression of the history snapshot (pgmem._snapshot) of a memories row under an alias, built from the catalog; used by the statement triggers of memories.';

-- Whether two rows under aliases o and n are the same but for the lifecycle and usage columns
-- (state, state_changed_at, updated_at, merged_into, merged_from, cluster_id, access_count,
-- last_accessed_at): then the after snapshot is the before one with those changed.
create or replace function pgmem._lifecycle_only_sql() returns text
  language sql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select format('((%s) is not distinct from (%s) and (o.embedding is null) = (n.embedding is null))',
                string_agg(format('o.%I', a.attname), ', ' order by a.attnum),
                string_agg(format('n.%I', a.attname), ', ' order by a.attnum))
    from pg_catalog.pg_attribute a
   where a.attrelid = 'pgmem.memories'::regclass and a.attnum > 0 and not a.attisdropped
     and a.attname not in ('embedding', 'tsv', 'state', 'state_changed_at', 'updated_at', 'merged_into', 'merged_from',
                           'cluster_id', 'access_count', 'last_accessed_at')
$$;
comment on function pgmem._lifecycle_only_sql() is
  'The SQL test of whether two memories rows (aliases o, n) differ at most in state, state_changed_at, updated_at, merged_into, merged_from, cluster_id and usage bookkeeping; used by the update trigger.';

-- Whether two rows under aliases o and n differ in anything history records: every column
-- of the snapshot but usage bookkeeping (access_count, last_accessed_at) and updated_at; the
-- same comparison as the snapshots', without building them first.
create or replace function pgmem._changed_sql() returns text
  language sql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select format('((%s) is distinct from (%s) or (o.embedding is null) is distinct from (n.embedding is null))',
                string_agg(format('o.%I', a.attname), ', ' order by a.attnum),
                string_agg(format('n.%I', a.attname), ', ' order by a.attnum))
    from pg_catalog.pg_attribute a
   where a.attrelid = 'pgmem.memories'::regclass and a.attnum > 0 and not a.attisdropped
     and a.attname not in ('embedding', 'tsv', 'access_count', 'last_accessed_at', 'updated_at')
$$;
comment on function pgmem._changed_sql() is
  'The SQL test of whether two memories rows (aliases o, n) differ in anything history records (usage bookkeeping and updated_at aside); used by the update trigger.';

create or replace function pgmem._memories_after_insert() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  execute format($q$
  insert into pgmem.history (tenant, memory_id, op, after, details)
  select n.tenant, n.id, $1, %s, $2
    from new_rows n order by n.id$q$, pgmem._snapshot_sql('n'))
  using coalesce(nullif(current_setting('pgmem.op', true), ''), 'add'), pgmem._op_details();
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
  set search_path = pgmem, pg_catalog, pg_temp
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
  -- bookkeeping of usage alone (access_count, last_accessed_at) is the access log's job, not
  -- history's. The snapshots are built once a row, for the rows that changed (OFFSET 0 keeps
  -- the subquery from being flattened, which would build them again for the WHERE).
  execute format($q$
  insert into pgmem.history (tenant, memory_id, op, before, after, details)
  select s.tenant, s.id, coalesce($1, s.op), s.b, s.a, $2
    from (select n.tenant, n.id,
                 case when n.state is distinct from o.state and n.state = 'deleted' then 'delete'
                      when n.state is distinct from o.state and n.state = 'archived' then 'archive'
                      when n.state is distinct from o.state and n.state = 'merged' then 'merge'
                      when n.state is distinct from o.state and n.state = 'active' then 'restore'
                      when o.embedding is null and n.embedding is not null then 'embed'
                      else 'update' end as op,  -- (pgmem._inferred_op)
                 x.b,
                 -- a lifecycle change (prune, archive, merge): the before snapshot with what changed
                 case when %s
                      then x.b || jsonb_build_object('state', n.state, 'state_changed_at', n.state_changed_at,
                                                     'updated_at', n.updated_at, 'merged_into', n.merged_into,
                                                     'merged_from', n.merged_from, 'cluster_id', n.cluster_id,
                                                     'access_count', n.access_count, 'last_accessed_at', n.last_accessed_at)
                      else %s end as a
            from old_rows o join new_rows n on n.id = o.id
           cross join lateral (select %s as b offset 0) x
           where %s
          offset 0) s
   order by s.id$q$, pgmem._lifecycle_only_sql(), pgmem._snapshot_sql('n'), pgmem._snapshot_sql('o'), pgmem._changed_sql())
  using v_op, pgmem._op_details();
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
                 or n.embedding::real[] is distinct from o.embedding::real[]$q$ into v_vectors;
  if not v_vectors then
    return null;
  end if;
  execute $q$
  delete from pgmem.vector_queue q using old_rows o join new_rows n on n.id = o.id
   where q.memory_id = n.id
     and ((n.state, n.user_id, n.tenant) is distinct from (o.state, o.user_id, o.tenant) or n.embedding::real[] is distinct from o.embedding::real[])$q$;
  execute $q$
  delete from pgmem.memory_vectors v using old_rows o join new_rows n on n.id = o.id
   where v.memory_id = n.id
     and ((n.state, n.user_id, n.tenant) is distinct from (o.state, o.user_id, o.tenant) or n.embedding::real[] is distinct from o.embedding::real[])$q$;
  execute $q$
  insert into pgmem.vector_queue (memory_id, tenant)
  select n.id, n.tenant from old_rows o join new_rows n on n.id = o.id
   where n.state = 'active' and n.embedding is not null
     and ((n.state, n.user_id, n.tenant) is distinct from (o.state, o.user_id, o.tenant) or n.embedding::real[] is distinct from o.embedding::real[])
   order by n.id
  on conflict (memory_id) do nothing$q$;
  return null;
end $$;

create or replace function pgmem._memories_after_delete() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_op text := nullif(current_setting('pgmem.op', true), '');
begin
  execute format($q$
  insert into pgmem.history (tenant, memory_id, op, before, details)
  select o.tenant, o.id, coalesce($1, 'purge'),
         case when $1 = 'erase'
              then jsonb_build_object('id', o.id, 'tenant', o.tenant, 'user_id', o.user_id, 'erased', true)
              else %s end,
         $2
    from old_rows o order by o.id$q$, pgmem._snapshot_sql('o'))
  using v_op, pgmem._op_details();
  return null;
end $$;

create or replace trigger memories_before
  before insert on pgmem.memories
  for each row execute function pgmem._memories_before();

-- On UPDATE the row trigger runs unless the statement is a lifecycle change that did the
-- trigger's work itself: it set updated_at (and, when the state changes, state_changed_at) to
-- now(), and changed nothing but state, merged_into, merged_from, cluster_id and usage
-- bookkeeping (access_count, last_accessed_at), none of which the trigger checks or derives
-- anything from. prune, archive and merge write their batches that way: no per-row PL/pgSQL
-- call (issue 23). Any other UPDATE (a plain UPDATE, which leaves updated_at alone) runs it as
-- before. The test lists every column but those, from the catalog, so a column added later is
-- covered (generated columns are derived from the ones listed).
do $$
declare v_cols text;
begin
  select string_agg(format('%I', a.attname), ', ' order by a.attnum) into v_cols
    from pg_catalog.pg_attribute a
   where a.attrelid = 'pgmem.memories'::regclass and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
     and a.attname not in ('state', 'state_changed_at', 'updated_at', 'merged_into', 'merged_from', 'cluster_id',
                           'access_count', 'last_accessed_at');
  execute format($t$
    create or replace trigger memories_before_update
      before update on pgmem.memories
      for each row
      when (new.updated_at is distinct from now()
            or (new.state is distinct from old.state and new.state_changed_at is distinct from now())
            or (%s) is distinct from (%s))
      execute function pgmem._memories_before()$t$,
    regexp_replace(v_cols, '([^, ]+)', 'old.\1', 'g'), regexp_replace(v_cols, '([^, ]+)', 'new.\1', 'g'));
end $$;

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
