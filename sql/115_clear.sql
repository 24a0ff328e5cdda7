-- Shadow's clearMemories() and clearHistory() (shadow-memory-system.md, 2. ShadowMemorySystem:
-- "clearMemories(): Remove all memories"; API Integration, MemoryAugmentedAgent: "clearHistory()").
--
-- Both are restorable, not destructive. pgmem's "remove" is the soft delete (forget, prune): the
-- design asks for an empty store, not for the data to be gone, and a call that wipes a tenant by
-- mistake must be undoable. What destroys data stays where it was: purge (an operator's job) and
-- erase_user (a user's right to be forgotten).
--
--   clear_memories(user_id)       every active and archived memory of the tenant (or of one user)
--                                 is deleted (state deleted), in history with one clear_id;
--                                 restore_cleared(clear_id) brings back those still deleted.
--   clear_history(conversation)   the agent's chat history (the design's clearHistory resets the
--                                 agent's conversation, not the memories it stored): the
--                                 conversation's messages, threads and state move aside under a new
--                                 id, "<id> (cleared <time>)", so the next context_for of the id
--                                 starts a fresh conversation; the memories its turns became stay.
--                                 restore_history(conversation, cleared_as) moves them back while
--                                 the id holds no new conversation.

create or replace function pgmem.clear_memories(user_id text default null, reason text default null)
returns table (clear_id uuid, memories bigint)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_id uuid := gen_random_uuid();
  n bigint;
begin
  perform pgmem._check_args('clear_memories', jsonb_build_object('user_id', clear_memories.user_id, 'reason', clear_memories.reason));  -- sizes first (issue 27)
  perform pgmem._check_reason(reason);
  -- a merged memory lives on in its survivor (forget refuses it alone): it goes with it
  perform pgmem._set_op('delete', jsonb_build_object('clear_memories', v_id, 'reason', reason, 'user_id', clear_memories.user_id));
  update pgmem.memories m set state = 'deleted', state_changed_at = now(), updated_at = now()
   where m.tenant = v_tenant and m.state in ('active', 'archived')
     and (clear_memories.user_id is null or m.user_id = clear_memories.user_id);
  get diagnostics n = row_count;
  perform pgmem._set_op(null);
  clear_id := v_id; memories := n;
  return next;
end $$;
comment on function pgmem.clear_memories(text, text) is
  'Shadow''s clearMemories: deletes (soft: state deleted, in history) every active and archived memory of the current tenant, or of one user; returns the clear_id that pgmem.restore_cleared takes to bring them back.';

create or replace function pgmem.restore_cleared(clear_id uuid) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  n bigint;
begin
  if clear_id is null then
    perform pgmem._bad_input('restore_cleared needs the clear_id that clear_memories returned');
  end if;
  -- the memories that clear deleted (their latest delete in history names it) and that are still deleted
  perform pgmem._set_op('restore', jsonb_build_object('clear_memories', clear_id));
  with cleared as (
    select distinct on (h.memory_id) h.memory_id, (h.details->>'clear_memories')::uuid as cid, h.before->>'state' as was
      from pgmem.history h
     where h.tenant = v_tenant and h.op = 'delete'
       and h.memory_id in (select x.memory_id from pgmem.history x
                            where x.tenant = v_tenant and x.op = 'delete' and x.details->>'clear_memories' = clear_id::text)
     order by h.memory_id, h.id desc)
  update pgmem.memories m set state = c.was, state_changed_at = now(), updated_at = now()
    from cleared c
   where m.id = c.memory_id and m.tenant = v_tenant and m.state = 'deleted' and c.cid = restore_cleared.clear_id;
  get diagnostics n = row_count;
  perform pgmem._set_op(null);
  return n;
end $$;
comment on function pgmem.restore_cleared(uuid) is
  'Undoes pgmem.clear_memories: the memories that clear deleted and that are still deleted go back to what they were (active or archived), in history. Returns how many.';

create or replace function pgmem.clear_history(conversation_id text, reason text default null)
returns table (conversation text, cleared_as text, messages bigint)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  c pgmem.conversations;
  v_new text;
  n bigint;
begin
  perform pgmem._check_args('clear_history', jsonb_build_object('conversation_id', clear_history.conversation_id, 'reason', clear_history.reason));  -- sizes first (issue 27)
  perform pgmem._check_reason(reason);
  select * into c from pgmem.conversations x where x.tenant = v_tenant and x.conversation_id = clear_history.conversation_id for update;
  if c.conversation_id is null then
    raise exception 'conversation "%" does not exist for tenant "%"', clear_history.conversation_id, v_tenant
      using errcode = 'P0002', hint = 'context_for(..., conversation_id => ...) starts one';
  end if;
  v_new := left(c.conversation_id, 170) || ' (cleared ' || to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || ')';
  -- the conversation's rows under the new id: its state first (the key the others point at)
  insert into pgmem.conversations select (jsonb_populate_record(c, jsonb_build_object('conversation_id', v_new,
    'tracker', c.tracker || jsonb_build_object('cleared', jsonb_build_object('from', c.conversation_id, 'at', now(), 'reason', reason))))).*;
  update pgmem.threads t set conversation_id = v_new where t.tenant = v_tenant and t.conversation_id = c.conversation_id;
  update pgmem.messages m set conversation_id = v_new where m.tenant = v_tenant and m.conversation_id = c.conversation_id;
  get diagnostics n = row_count;
  update pgmem.insights i set conversation_id = v_new where i.tenant = v_tenant and i.conversation_id = c.conversation_id;
  update pgmem.concept_mentions cm set conversation_id = v_new where cm.tenant = v_tenant and cm.conversation_id = c.conversation_id;
  delete from pgmem.conversations x where x.tenant = v_tenant and x.conversation_id = c.conversation_id;
  conversation := c.conversation_id; cleared_as := v_new; messages := n;
  return next;
end $$;
comment on function pgmem.clear_history(text, text) is
  'Shadow''s clearHistory: the conversation''s messages, threads, insights and state move aside under "<id> (cleared <time>)", so the next context_for of the id starts afresh; the memories its turns became stay. pgmem.restore_history moves them back.';

create or replace function pgmem.restore_history(conversation_id text, cleared_as text)
returns table (conversation text, messages bigint)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  c pgmem.conversations;
  n bigint;
begin
  perform pgmem._check_args('restore_history', jsonb_build_object('conversation_id', restore_history.conversation_id, 'cleared_as', restore_history.cleared_as));  -- sizes first (issue 27)
  select * into c from pgmem.conversations x where x.tenant = v_tenant and x.conversation_id = restore_history.cleared_as for update;
  if c.conversation_id is null or c.tracker->'cleared'->>'from' is distinct from restore_history.conversation_id then
    raise exception 'no history of conversation "%" was cleared as "%" for tenant "%"', restore_history.conversation_id,
      restore_history.cleared_as, v_tenant
      using errcode = 'P0002', hint = 'clear_history returned the cleared_as name';
  end if;
  if exists (select 1 from pgmem.conversations x where x.tenant = v_tenant and x.conversation_id = restore_history.conversation_id) then
    perform pgmem._bad_input(format('conversation "%s" was started again since it was cleared: clear it first (clear_history), then restore', restore_history.conversation_id));
  end if;
  insert into pgmem.conversations select (jsonb_populate_record(c, jsonb_build_object('conversation_id', restore_history.conversation_id,
    'tracker', c.tracker - 'cleared'))).*;
  update pgmem.threads t set conversation_id = restore_history.conversation_id where t.tenant = v_tenant and t.conversation_id = c.conversation_id;
  update pgmem.messages m set conversation_id = restore_history.conversation_id where m.tenant = v_tenant and m.conversation_id = c.conversation_id;
  get diagnostics n = row_count;
  update pgmem.insights i set conversation_id = restore_history.conversation_id where i.tenant = v_tenant and i.conversation_id = c.conversation_id;
  update pgmem.concept_mentions cm set conversation_id = restore_history.conversation_id where cm.tenant = v_tenant and cm.conversation_id = c.conversation_id;
  delete from pgmem.conversations x where x.tenant = v_tenant and x.conversation_id = c.conversation_id;
  conversation := restore_history.conversation_id; messages := n;
  return next;
end $$;
comment on function pgmem.restore_history(text, text) is
  'Undoes pgmem.clear_history: the conversation cleared as cleared_as gets its id back (refused while a new conversation holds the id: clear that one first).';
