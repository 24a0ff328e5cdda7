-- Triggers on pgmem.memories: validation and defaults for every write path (remember(),
-- remember_many(), plain INSERT/UPDATE/COPY), the embedding queue, and history. Every change
-- to a memory is recorded in pgmem.history with before/after snapshots, whatever wrote it.

-- What a history snapshot keeps of a row: everything but the derived vectors.
create or replace function pgmem._snapshot(m pgmem.memories) returns jsonb
  language sql immutable parallel safe
  return (to_jsonb(m) - 'embedding' - 'tsv') || jsonb_build_object('has_embedding', m.embedding is not null);

-- API functions name the operation they perform (merge, unmerge, ...) for the triggers.
create or replace function pgmem._set_op(p_op text, p_details jsonb default '{}') returns void
  language sql volatile
  return (select null::void from (select set_config('pgmem.op', coalesce(p_op, ''), true),
                                         set_config('pgmem.op_details', coalesce(p_details, '{}')::text, true)) s);

create or replace function pgmem._op_details() returns jsonb
  language sql stable
  return coalesce(nullif(current_setting('pgmem.op_details', true), '')::jsonb, '{}');

create or replace function pgmem._memories_before() returns trigger
  language plpgsql
  set search_path = pgmem, public, pg_temp
as $$
begin
  if tg_op = 'INSERT' then
    -- a tenant the row names itself is checked too (enforce_tenants; issue 14, Low)
    new.tenant := coalesce(pgmem._check_registered(new.tenant), pgmem._require_tenant());
    new.created_at := coalesce(pgmem._check_time(new.created_at, 'created_at'), now());
    new.updated_at := new.created_at;
  else
    new.updated_at := now();
    if new.content is distinct from old.content and new.embedding is not distinct from old.embedding then
      new.embedding := null;  -- stale: the worker re-embeds the new text
    end if;
    if new.state is distinct from old.state then
      new.state_changed_at := now();
    end if;
  end if;
  if new.content is null or new.content !~ '\S' then
    perform pgmem._bad_input('content is empty: a memory needs some text', 'pass the event text as content');
  end if;
  if octet_length(new.content) > pgmem._setting_num('max_content_bytes', 262144) then
    perform pgmem._bad_input(format('content is %s bytes, more than max_content_bytes (%s)', octet_length(new.content),
                                    pgmem._setting_num('max_content_bytes', 262144)::bigint),
      'store a summary and keep the full text elsewhere (metadata can hold a reference), or raise max_content_bytes in pgmem.settings');
  end if;
  if tg_op = 'INSERT' or new.category is distinct from old.category then
    perform pgmem._check_category(new.category);
  end if;
  if tg_op = 'INSERT' or new.embedding is distinct from old.embedding then
    perform pgmem._check_embedding(new.embedding);
    new.embedded_at := case when new.embedding is null then null else now() end;
    if new.embedding is null then new.embedding_model := null; end if;
  end if;
  perform pgmem._check_unit(new.importance, 'importance'), pgmem._check_unit(new.salience, 'salience'),
          pgmem._check_unit(new.valence, 'valence'), pgmem._check_unit(new.arousal, 'arousal'),
          pgmem._check_unit(new.dominance, 'dominance');
  perform pgmem._check_time(new.happened_at, 'happened_at (when)', true),
          pgmem._check_time(new.expires_at, 'expires_at', true);
  if tg_op = 'INSERT' or new.content is distinct from old.content then
    if new.token_count is null or new.token_count = 0 or (tg_op = 'UPDATE' and new.token_count = old.token_count) then
      new.token_count := pgmem.estimate_tokens(new.content);
    end if;
  end if;
  return new;
end $$;

create or replace function pgmem._memories_after() returns trigger
  language plpgsql
  set search_path = pgmem, public, pg_temp
as $$
declare
  v_op text := nullif(current_setting('pgmem.op', true), '');
  v_before jsonb;
  v_after jsonb;
begin
  if tg_op = 'INSERT' then
    insert into pgmem.history (tenant, memory_id, op, after, details)
    values (new.tenant, new.id, coalesce(v_op, 'add'), pgmem._snapshot(new), pgmem._op_details());
    if new.embedding is null then
      insert into pgmem.embedding_queue (memory_id, tenant) values (new.id, new.tenant)
      on conflict (memory_id) do nothing;
    end if;
    return null;
  elsif tg_op = 'DELETE' then
    v_before := case when v_op = 'erase'
                     then jsonb_build_object('id', old.id, 'tenant', old.tenant, 'user_id', old.user_id, 'erased', true)
                     else pgmem._snapshot(old) end;
    insert into pgmem.history (tenant, memory_id, op, before, details)
    values (old.tenant, old.id, coalesce(v_op, 'purge'), v_before, pgmem._op_details());
    return null;
  end if;
  -- UPDATE: bookkeeping of usage alone is the access log's job, not history's
  v_before := pgmem._snapshot(old);
  v_after := pgmem._snapshot(new);
  if (v_before - 'access_count' - 'last_accessed_at' - 'updated_at')
     = (v_after - 'access_count' - 'last_accessed_at' - 'updated_at') then
    return null;
  end if;
  if v_op is null then
    v_op := case
      when new.state is distinct from old.state and new.state = 'deleted' then 'delete'
      when new.state is distinct from old.state and new.state = 'archived' then 'archive'
      when new.state is distinct from old.state and new.state = 'merged' then 'merge'
      when new.state is distinct from old.state and new.state = 'active' then 'restore'
      when old.embedding is null and new.embedding is not null then 'embed'
      else 'update' end;
  end if;
  insert into pgmem.history (tenant, memory_id, op, before, after, details)
  values (new.tenant, new.id, v_op, v_before, v_after, pgmem._op_details());
  if old.embedding is null and new.embedding is not null then
    delete from pgmem.embedding_queue q where q.memory_id = new.id;  -- the caller gave the vector
  end if;
  if new.embedding is null and (old.embedding is not null or new.content is distinct from old.content) then
    insert into pgmem.embedding_queue (memory_id, tenant) values (new.id, new.tenant)
    on conflict (memory_id) do update set queued_at = now(), attempts = 0, last_error = null, not_before = now();
  end if;
  return null;
end $$;

create or replace trigger memories_before
  before insert or update on pgmem.memories
  for each row execute function pgmem._memories_before();

create or replace trigger memories_after
  after insert or update or delete on pgmem.memories
  for each row execute function pgmem._memories_after();
