-- Reading, changing, forgetting and restoring single memories. Every change goes through
-- the triggers of 040, so it is in pgmem.history with before/after.

-- A reason given to forget, restore or update_memory: at most max_reason_bytes (it is kept in history).
create or replace function pgmem._check_reason(p_reason text) returns void
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  perform pgmem._check_bytes(p_reason, 'reason', jsonb_build_object('max_reason_bytes', pgmem._setting_num('max_reason_bytes', 2048)),
                             'max_reason_bytes');
end $$;

create or replace function pgmem.get_memory(memory_id bigint) returns setof pgmem.memories
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select * from pgmem.memories m where m.id = get_memory.memory_id and m.tenant = pgmem._require_tenant()
$$;
comment on function pgmem.get_memory(bigint) is 'One memory of the current tenant (no row if it belongs to another tenant or does not exist).';

create or replace function pgmem._get_for_update(p_id bigint) returns pgmem.memories
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare m pgmem.memories;
begin
  select * into m from pgmem.memories x where x.id = p_id and x.tenant = pgmem._require_tenant() for update;
  if m.id is null then
    raise exception 'memory % does not exist for tenant "%"', p_id, pgmem.current_tenant()
      using errcode = 'P0002', hint = 'check the id (pgmem.search or pgmem.history show ids)';
  end if;
  return m;
end $$;

create or replace function pgmem.forget(memory_id bigint, reason text default null) returns pgmem.memories
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare m pgmem.memories := pgmem._get_for_update(forget.memory_id);
begin
  perform pgmem._check_args('forget', jsonb_build_object('reason', reason));  -- sizes first (issue 27)
  perform pgmem._check_reason(reason);
  if m.state = 'deleted' then return m; end if;
  -- a merged memory lives on in its survivor (its access count was added there): forgetting
  -- it alone and restoring it later would bring it back active beside the survivor
  if m.state = 'merged' then
    raise exception 'memory % was merged into memory %: forget memory % instead, or split it out first with pgmem.unmerge(%)',
      m.id, m.merged_into, m.merged_into, m.id using errcode = '22023';
  end if;
  perform pgmem._set_op('delete', jsonb_build_object('reason', reason, 'previous_state', m.state));
  update pgmem.memories x set state = 'deleted' where x.id = m.id returning * into m;
  perform pgmem._set_op(null);
  return m;
end $$;
comment on function pgmem.forget(bigint, text) is
  'Soft-deletes a memory (state deleted; excluded from search; kept in history and restorable with pgmem.restore). pgmem.purge is the only path that destroys data. A merged memory is refused (forget its survivor, or pgmem.unmerge it first).';

create or replace function pgmem.restore(memory_id bigint, reason text default null) returns pgmem.memories
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare m pgmem.memories;
begin
  perform pgmem._check_args('restore', jsonb_build_object('reason', reason));  -- sizes first (issue 27)
  perform pgmem._check_reason(reason);
  -- a memory purged (or deleted by the lifecycle and purged later) comes back from history
  if not exists (select 1 from pgmem.memories x where x.id = restore.memory_id and x.tenant = pgmem._require_tenant()) then
    return pgmem._restore_from_history(restore.memory_id, reason);
  end if;
  m := pgmem._get_for_update(restore.memory_id);
  if m.state = 'active' then return m; end if;
  if m.state = 'merged' then
    raise exception 'memory % was merged into memory %: use pgmem.unmerge(%) to split it out again', m.id, m.merged_into, m.id
      using errcode = '22023';
  end if;
  perform pgmem._set_op('restore', jsonb_build_object('reason', reason, 'previous_state', m.state));
  -- a deleted memory that still points at a survivor was merged when it was forgotten (before
  -- forget refused merged memories): it goes back to merged, and unmerge splits it out
  update pgmem.memories x set state = case when x.merged_into is not null then 'merged' else 'active' end
   where x.id = m.id returning * into m;
  perform pgmem._set_op(null);
  return m;
end $$;
comment on function pgmem.restore(bigint, text) is 'Brings a deleted or archived memory back to active, recorded in history; a purged one comes back from its last history snapshot (pgmem._restore_from_history). A merged memory is refused (pgmem.unmerge splits it out); a deleted memory that still points at its survivor (merged_into, forgotten while merged) goes back to merged, not active.';

-- "Nothing is lost": a memory destroyed by pgmem.purge (the only hard delete; e.g. after the
-- lifecycle deleted it, 420_prune_archive.sql) is written again from the snapshot history kept
-- of it (op purge: every column but the vectors), with its id, as an active memory. What the
-- snapshot does not hold comes back the way it first came: the embedding (queued for the
-- worker), the HNSW entry, the lexical statistics. Its bindings, accesses and cluster were
-- deleted with it and stay gone; its profile facts are not stated again (they were set when it
-- was first written, and their own history is in profile_facts). A memory erased by erase_user
-- is refused: its content was not kept, on purpose.
create or replace function pgmem._restore_from_history(p_id bigint, p_reason text) returns pgmem.memories
  language plpgsql volatile security definer  -- (it writes the id: no application role may; 900_security.sql)
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  h pgmem.history;
  b jsonb;
  v_cols text;
  m pgmem.memories;
begin
  select * into h from pgmem.history x where x.memory_id = p_id and x.tenant = v_tenant order by x.id desc limit 1;
  if h.id is null then
    raise exception 'memory % does not exist for tenant "%"', p_id, v_tenant
      using errcode = 'P0002', hint = 'check the id (pgmem.search or pgmem.history show ids)';
  end if;
  if h.op = 'erase' or exists (select 1 from pgmem.history x where x.memory_id = p_id and x.tenant = v_tenant and x.op = 'erase') then
    perform pgmem._bad_input(format('memory %s was erased with its user (erase_user): its content was not kept, so it cannot be restored', p_id));
  end if;
  if h.op <> 'purge' or h.before is null or h.before->>'content' is null then
    perform pgmem._bad_input(format('memory %s is gone but its last history entry (%s, op %s) holds no snapshot to restore it from', p_id, h.id, h.op));
  end if;
  b := h.before || jsonb_build_object('state', 'active', 'state_changed_at', now(), 'merged_into', null, 'cluster_id', null,
                                      'embedding_model', null, 'embedded_at', null, 'tenant', v_tenant);
  -- profile facts are not stated again (see above)
  if b->'metadata' ? 'facts' then
    b := jsonb_set(b, '{metadata}', ((b->'metadata') - 'facts') || jsonb_build_object('facts_when_written', b->'metadata'->'facts'));
  end if;
  -- an event_key taken meanwhile (a replay stored the event again) stays with that memory
  if exists (select 1 from pgmem.memories x where x.tenant = v_tenant and x.event_key = b->>'event_key') then
    b := b || '{"event_key": null}';
  end if;
  select string_agg(format('%I', a.attname), ', ' order by a.attnum) into v_cols
    from pg_catalog.pg_attribute a
   where a.attrelid = 'pgmem.memories'::regclass and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
     and a.attname not in ('embedding', 'embedded_at');
  perform pgmem._set_op('restore', jsonb_build_object('reason', p_reason, 'previous_state', 'purged',
                                                     'from_history_id', h.id));
  execute format('insert into pgmem.memories (%s) overriding system value select %s from jsonb_populate_record(null::pgmem.memories, $1) p returning *',
                 v_cols, regexp_replace(v_cols, '([^, ]+)', 'p.\1', 'g'))
    into m using b;
  perform pgmem._set_op(null);
  return m;
end $$;
comment on function pgmem._restore_from_history(bigint, text) is
  'Writes a purged memory again from its last history snapshot (op purge), with its id, active, its embedding queued; refuses an erased one. Internal to pgmem.restore.';

-- Shadow's "Manual archival command" (shadow-memory-system.md, MemoryLifecycleManager): the
-- memories leave every ranking (state archived), in history with the reason, and come back with
-- pgmem.restore. At most touch_max_ids ids a call; ids of another tenant or of no memory are an
-- error naming them; a merged or deleted memory is refused (what to do instead is named).
create or replace function pgmem.archive(ids bigint[], reason text default null) returns setof pgmem.memories
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_missing bigint[];
  r record;
begin
  perform pgmem._check_args('archive', jsonb_build_object('ids', to_jsonb(archive.ids), 'reason', archive.reason));  -- sizes first (issue 27)
  perform pgmem._check_reason(reason);
  if ids is null or cardinality(ids) = 0 then
    perform pgmem._bad_input('archive needs the ids of the memories to archive', 'e.g. pgmem.archive(array[42, 43])');
  end if;
  if cardinality(ids) > pgmem._setting_num('touch_max_ids', 1000) then
    perform pgmem._bad_input(format('archive takes at most %s ids at once, got %s', pgmem._setting_num('touch_max_ids', 1000)::bigint,
                                    cardinality(ids)), 'archive in batches, or raise touch_max_ids in pgmem.settings');
  end if;
  -- the tenant's memories, locked in id order (no deadlock between two callers)
  perform 1 from pgmem.memories m where m.id = any(ids) and m.tenant = v_tenant order by m.id for update;
  v_missing := array(select x from unnest(ids) x where x is null or not exists (
                       select 1 from pgmem.memories m where m.id = x and m.tenant = v_tenant) order by x);
  if cardinality(v_missing) > 0 then
    raise exception 'no memory % for tenant "%"', array_to_string(v_missing, ', ', 'NULL'), v_tenant
      using errcode = 'P0002', hint = 'check the ids (pgmem.search or pgmem.history show ids)';
  end if;
  select m.id, m.state, m.merged_into into r from pgmem.memories m
   where m.id = any(ids) and m.tenant = v_tenant and m.state in ('merged', 'deleted') order by m.id limit 1;
  if r.id is not null and r.state = 'merged' then
    raise exception 'memory % was merged into memory %: archive memory % instead, or split it out first with pgmem.unmerge(%)',
      r.id, r.merged_into, r.merged_into, r.id using errcode = '22023';
  elsif r.id is not null then
    raise exception 'memory % is deleted: pgmem.restore(%) brings it back first', r.id, r.id using errcode = '22023';
  end if;
  perform pgmem._set_op('archive', jsonb_build_object('manual', true, 'reason', reason));
  update pgmem.memories m set state = 'archived', state_changed_at = now(), updated_at = now()
   where m.id = any(ids) and m.tenant = v_tenant and m.state = 'active';
  perform pgmem._set_op(null);
  return query select * from pgmem.memories m where m.id = any(ids) and m.tenant = v_tenant order by m.id;
end $$;
comment on function pgmem.archive(bigint[], text) is
  'Shadow''s manual archival command: archives the given memories of the current tenant (state archived: out of every ranking by default; in history with the reason; pgmem.restore brings one back). Already archived ones are left as they are; merged and deleted ones are refused, naming what to do.';

create or replace function pgmem.update_memory(memory_id bigint, changes jsonb, reason text default null)
returns pgmem.memories
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  m pgmem.memories := pgmem._get_for_update(update_memory.memory_id);
  k text;
  editable text[] := array['content', 'summary', 'who', 'what', 'happened_at', 'location', 'why', 'how',
    'category', 'tier', 'topics', 'entities', 'valence', 'arousal', 'dominance', 'importance', 'salience',
    'metadata', 'expires_at', 'user_id', 'agent_id', 'session_id', 'embedding', 'embedding_model', 'token_count',
    'motor', 'sensory'];  -- motor, sensory: reconstructive (issue 16)
  r jsonb;
begin
  perform pgmem._check_args('update_memory', jsonb_build_object('changes', changes, 'reason', reason));  -- sizes first (issue 27)
  perform pgmem._check_reason(reason);
  if changes is null or jsonb_typeof(changes) <> 'object' or changes = '{}' then
    perform pgmem._bad_input('changes must be a non-empty JSON object of column: new value',
      'e.g. pgmem.update_memory(42, ''{"importance": 0.9, "content": "..."}'')');
  end if;
  for k in select jsonb_object_keys(changes) loop
    if not k = any(editable) then
      perform pgmem._bad_input(format('"%s" cannot be changed with update_memory', k),
        format('editable fields: %s (state changes: forget, restore, unmerge)', array_to_string(editable, ', ')));
    end if;
  end loop;
  if changes ? 'embedding' and jsonb_typeof(changes->'embedding') = 'array' then
    perform pgmem._check_embedding((changes->>'embedding')::public.vector);
  end if;
  -- jsonb_populate_record applies exactly the given keys over the current row
  r := pgmem._snapshot(m) || changes;
  perform pgmem._set_op('update', jsonb_build_object('reason', reason, 'fields', (select jsonb_agg(x) from jsonb_object_keys(changes) x)));
  update pgmem.memories x set
    content = p.content, summary = p.summary, who = p.who, what = p.what, happened_at = p.happened_at,
    location = p.location, why = p.why, how = p.how, category = p.category, tier = p.tier, topics = p.topics,
    entities = p.entities, valence = p.valence, arousal = p.arousal, dominance = p.dominance,
    importance = p.importance, salience = p.salience, metadata = p.metadata, expires_at = p.expires_at,
    user_id = p.user_id, agent_id = p.agent_id, session_id = p.session_id, motor = p.motor, sensory = p.sensory,
    token_count = case when changes ? 'token_count' then p.token_count else x.token_count end,
    embedding = case when changes ? 'embedding' then (changes->>'embedding')::public.vector else x.embedding end,
    embedding_model = case when changes ? 'embedding_model' then p.embedding_model else x.embedding_model end,
    gate = case when changes ? 'importance' then x.gate || '{"importance_source": "caller"}' else x.gate end
  from jsonb_populate_record(null::pgmem.memories, r - 'embedding') p
  where x.id = m.id
  returning x.* into m;
  perform pgmem._set_op(null);
  return m;
end $$;
comment on function pgmem.update_memory(bigint, jsonb, text) is
  'Changes fields of a memory from a JSON object; the old values stay in history. A content change re-queues the embedding.';

create or replace function pgmem.history(memory_id bigint)
returns table (id bigint, op text, at timestamptz, actor text, before jsonb, after jsonb, details jsonb)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select h.id, h.op, h.at, h.actor, h.before, h.after, h.details
    from pgmem.history h
   where h.memory_id = history.memory_id and h.tenant = pgmem._require_tenant()
   order by h.id
$$;
comment on function pgmem.history(bigint) is
  'Every recorded change to a memory (add, update, embed, merge, unmerge, archive, delete, restore, purge), and the duplicates and rejected candidates compared against it, oldest first.';

-- Restore a memory's fields to what they were before a given history entry.
create or replace function pgmem.revert(history_id bigint) returns pgmem.memories
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  h pgmem.history;
  m pgmem.memories;
  b jsonb;
begin
  select * into h from pgmem.history x where x.id = revert.history_id and x.tenant = pgmem._require_tenant();
  if h.id is null or h.before is null or h.memory_id is null then
    perform pgmem._bad_input(format('history entry %s does not exist for this tenant or has no "before" state to return to', history_id));
  end if;
  if h.op in ('merge', 'unmerge') then
    perform pgmem._bad_input(format('history entry %s is a %s: reverting it field by field would leave the survivor''s access count and links as they are',
                                    history_id, h.op),
      case when h.op = 'merge' then format('use pgmem.unmerge(%s) to undo a merge', coalesce((h.details->>'merged_id')::bigint, h.memory_id))
           else 'run pgmem.merge_duplicates() to merge them again if they are still duplicates' end);
  end if;
  m := pgmem._get_for_update(h.memory_id);
  b := h.before;
  perform pgmem._set_op('restore', jsonb_build_object('reverted_history_id', h.id));
  update pgmem.memories x set
    content = p.content, summary = p.summary, who = p.who, what = p.what, happened_at = p.happened_at,
    location = p.location, why = p.why, how = p.how, category = p.category, tier = p.tier, topics = p.topics,
    entities = p.entities, valence = p.valence, arousal = p.arousal, dominance = p.dominance,
    importance = p.importance, salience = p.salience, metadata = p.metadata, expires_at = p.expires_at,
    user_id = p.user_id, agent_id = p.agent_id, session_id = p.session_id,
    state = p.state, merged_into = p.merged_into, merged_from = p.merged_from, access_count = p.access_count
  from jsonb_populate_record(null::pgmem.memories, b) p
  where x.id = m.id
  returning x.* into m;
  perform pgmem._set_op(null);
  return m;
end $$;
comment on function pgmem.revert(bigint) is 'Puts a memory back to the state recorded as "before" in a history entry (the revert itself is recorded too).';
