-- What the agent-framework integrations call (issue 26; python/pgmem/integrations/, compat/):
-- they add no logic of their own, so everything they do is here, in SQL, for every language.
--
--   list_memories         memories by filters without a query, newest first (mem0's get_all)
--   put_item ... list_item_namespaces
--                         a key-value view of memories: an item (namespace, key, value) is a
--                         memory whose event key is derived from (namespace, key) and whose
--                         metadata holds them (LangGraph's BaseStore); its text is found by the
--                         fused search, its value's fields by containment and comparisons
--   session_add_items ... session_clear
--                         the items of a conversation session as the framework gave them
--                         (OpenAI Agents SDK's Session); text turns may be remembered too

-- ------------------------------------------------------------------ memories by filters
create or replace function pgmem.list_memories(filters jsonb default null, k integer default 20,
                                               skip integer default 0)
returns table (id bigint, content text, summary text, who text, category text, user_id text, agent_id text,
               session_id text, metadata jsonb, state text, event_key text, created_at timestamptz,
               updated_at timestamptz)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  f jsonb := coalesce(filters, '{}');
  k2 text;
  v_path jsonpath;
begin
  perform pgmem._check_args('list_memories', jsonb_build_object('filters', list_memories.filters));  -- sizes first (issue 27)
  perform pgmem._check_between(k, 'k', 1, 1000);
  perform pgmem._check_between(skip, 'skip', 0, 100000);
  if jsonb_typeof(f) <> 'object' then
    perform pgmem._bad_input(format('filters must be a JSON object, got %s', jsonb_typeof(f)));
  end if;
  for k2 in select jsonb_object_keys(f) loop
    if k2 not in ('user_id', 'agent_id', 'session_id', 'category', 'who', 'state', 'metadata', 'metadata_path') then
      perform pgmem._bad_input(format('unknown filter "%s"', k2),
        'list_memories filters: user_id, agent_id, session_id, category, who, state (string or array), metadata (object, containment), metadata_path (a SQL/JSON path predicate)');
    end if;
  end loop;
  if f ? 'metadata' and jsonb_typeof(f->'metadata') <> 'object' then
    perform pgmem._bad_input('filter "metadata" must be a JSON object (containment)');
  end if;
  v_path := pgmem._filter_path(f);
  return query
  select m.id, m.content, m.summary, m.who, m.category, m.user_id, m.agent_id, m.session_id, m.metadata, m.state,
         m.event_key, m.created_at, m.updated_at
    from pgmem.memories m
   where m.tenant = v_tenant
     and m.state = any (coalesce(pgmem._filter_strings(f, 'state'), array['active']))
     and (not f ? 'user_id' or m.user_id = any (pgmem._filter_strings(f, 'user_id')))
     and (not f ? 'agent_id' or m.agent_id = any (pgmem._filter_strings(f, 'agent_id')))
     and (not f ? 'session_id' or m.session_id = any (pgmem._filter_strings(f, 'session_id')))
     and (not f ? 'category' or m.category = any (pgmem._filter_strings(f, 'category')))
     and (not f ? 'who' or m.who = any (pgmem._filter_strings(f, 'who')))
     and (not f ? 'metadata' or m.metadata @> (f->'metadata'))
     and (v_path is null or m.metadata @@ v_path)
   order by m.created_at desc, m.id desc
   limit k offset skip;
end $$;
comment on function pgmem.list_memories(jsonb, integer, integer) is
  'The current tenant''s memories matching filters (user_id, agent_id, session_id, category, who, state: a string or an array; metadata: containment; metadata_path: a SQL/JSON path predicate over the metadata), newest first, k at a time after skipping skip; without a query (pgmem.search ranks by a query).';

-- ------------------------------------------------------------------ items (key-value)
create or replace function pgmem._item_key(p_namespace text[], p_key text) returns text
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return 'item:' || encode(sha256(convert_to(jsonb_build_array(to_jsonb(p_namespace), p_key)::text, 'UTF8')), 'hex');

-- the namespace as an object {"0": label, "1": label, ...}: a prefix is then a containment
create or replace function pgmem._item_path(p_namespace text[]) returns jsonb
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return coalesce((select jsonb_object_agg((o - 1)::text, l) from unnest(p_namespace) with ordinality u(l, o)), '{}');

create or replace function pgmem._check_namespace(p_namespace text[], p_what text default 'namespace') returns void
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_namespace is null or exists (select 1 from unnest(p_namespace) l where l is null or l = '' or l ~ '\.') then
    perform pgmem._bad_input(format('%s must be labels without dots, none empty, got %s', p_what, p_namespace),
      'e.g. array[''memories'', ''maya'']');
  end if;
end $$;

create or replace function pgmem.put_item(namespace text[], key text, value jsonb, content text default null,
                                          embedding public.vector default null, embedding_model text default null,
                                          user_id text default null, agent_id text default null,
                                          session_id text default null)
returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_key text;
  v_meta jsonb;
  v_text text;
  m record;
  v_changes jsonb;
begin
  perform pgmem._check_args('put_item', jsonb_build_object('namespace', to_jsonb(put_item.namespace), 'key', put_item.key, 'value', put_item.value, 'content', put_item.content, 'embedding_model', put_item.embedding_model, 'user_id', put_item.user_id, 'agent_id', put_item.agent_id, 'session_id', put_item.session_id));  -- sizes first (issue 27)
  perform pgmem._check_namespace(namespace);
  if namespace = '{}' then
    perform pgmem._bad_input('namespace must have at least one label', 'e.g. array[''memories'', ''maya'']');
  end if;
  if key is null or key = '' then
    perform pgmem._bad_input('key must be a non-empty text');
  end if;
  if value is null or jsonb_typeof(value) <> 'object' then
    perform pgmem._bad_input('value must be a JSON object', 'delete an item with pgmem.delete_item');
  end if;
  v_key := pgmem._item_key(namespace, key);
  v_meta := jsonb_build_object('item', jsonb_build_object('namespace', to_jsonb(namespace), 'key', key,
                                                          'path', pgmem._item_path(namespace), 'value', value));
  -- the text that is searched: the caller's, else the value's own text field, else its JSON
  v_text := coalesce(nullif(btrim(content), ''), nullif(btrim(value->>'content'), ''), nullif(btrim(value->>'text'), ''),
                     nullif(btrim(value->>'memory'), ''), nullif(btrim(value->>'data'), ''), value::text);
  select x.id, x.state into m from pgmem.memories x where x.tenant = v_tenant and x.event_key = v_key;
  if m.id is null then
    -- an item is stored as given: force past the surprise gate (a store keeps what it is told)
    return (select r.memory_id from pgmem.remember(content => v_text, metadata => v_meta, event_key => v_key,
                                                   embedding => embedding, embedding_model => embedding_model,
                                                   user_id => user_id, agent_id => agent_id, session_id => session_id,
                                                   force => true) r);
  end if;
  if m.state <> 'active' then
    perform pgmem.restore(m.id, 'put_item: the key is written again');
  end if;
  v_changes := jsonb_build_object('content', v_text, 'metadata', v_meta, 'user_id', user_id, 'agent_id', agent_id,
                                  'session_id', session_id);
  if embedding is not null then
    v_changes := v_changes || jsonb_build_object('embedding', embedding::text::jsonb, 'embedding_model', embedding_model);
  end if;
  perform pgmem.update_memory(m.id, v_changes, 'put_item');
  return m.id;
end $$;
comment on function pgmem.put_item(text[], text, jsonb, text, public.vector, text, text, text, text) is
  'Stores an item: a JSON object value under (namespace, key), as a memory (forced past the surprise gate) whose text is content, else the value''s content/text/memory/data field, else its JSON. Putting the key again updates the memory (history keeps the old value), restoring it if it was deleted. Returns the memory id.';

create or replace function pgmem.get_item(namespace text[], key text)
returns table (memory_id bigint, namespace text[], key text, value jsonb, content text, created_at timestamptz,
               updated_at timestamptz)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select m.id, array(select jsonb_array_elements_text(m.metadata->'item'->'namespace')), m.metadata->'item'->>'key',
         m.metadata->'item'->'value', m.content, m.created_at, m.updated_at
    from pgmem.memories m
   where m.tenant = pgmem._require_tenant() and m.event_key = pgmem._item_key(get_item.namespace, get_item.key)
     and m.state = 'active' and pgmem._check_args('get_item', jsonb_build_object('namespace', to_jsonb(get_item.namespace), 'key', get_item.key))
$$;
comment on function pgmem.get_item(text[], text) is 'The item stored under (namespace, key), if it exists and is not deleted.';

create or replace function pgmem.delete_item(namespace text[], key text) returns boolean
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_id bigint;
begin
  perform pgmem._check_args('delete_item', jsonb_build_object('namespace', to_jsonb(delete_item.namespace), 'key', delete_item.key));  -- sizes first (issue 27)
  select m.id into v_id from pgmem.memories m
   where m.tenant = pgmem._require_tenant() and m.event_key = pgmem._item_key(namespace, key) and m.state = 'active';
  if v_id is null then
    return false;
  end if;
  perform pgmem.forget(v_id, 'delete_item');
  return true;
end $$;
comment on function pgmem.delete_item(text[], text) is
  'Deletes the item under (namespace, key): its memory is forgotten (soft delete: pgmem.restore, or putting the key again, brings it back). False when there was none.';

-- one value against a LangGraph-style filter: {"field": value} (equality) or {"field": {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": value}}
create or replace function pgmem._item_matches(p_value jsonb, p_filter jsonb) returns boolean
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  f record;
  c record;
  v jsonb;
  cmp integer;
begin
  for f in select * from jsonb_each(coalesce(p_filter, '{}')) loop
    v := p_value->f.key;
    if jsonb_typeof(f.value) = 'object' and exists (select 1 from jsonb_object_keys(f.value) o where o like '$%') then
      for c in select * from jsonb_each(f.value) loop
        if c.key not in ('$eq', '$ne', '$gt', '$gte', '$lt', '$lte') then
          perform pgmem._bad_input(format('filter operator %s is not supported', c.key), 'use $eq, $ne, $gt, $gte, $lt or $lte');
        end if;
        if c.key = '$eq' and v is distinct from c.value then return false; end if;
        if c.key = '$ne' and v is not distinct from c.value then return false; end if;
        if c.key in ('$gt', '$gte', '$lt', '$lte') then
          if v is null or jsonb_typeof(v) <> jsonb_typeof(c.value) or jsonb_typeof(v) not in ('number', 'string') then
            return false;
          end if;
          cmp := case when jsonb_typeof(v) = 'number'
                      then sign((v #>> '{}')::numeric - (c.value #>> '{}')::numeric)::int
                      else case when (v #>> '{}') < (c.value #>> '{}') then -1 when (v #>> '{}') > (c.value #>> '{}') then 1 else 0 end end;
          if (c.key = '$gt' and cmp <= 0) or (c.key = '$gte' and cmp < 0) or (c.key = '$lt' and cmp >= 0)
             or (c.key = '$lte' and cmp > 0) then
            return false;
          end if;
        end if;
      end loop;
    elsif v is distinct from f.value then
      return false;
    end if;
  end loop;
  return true;
end $$;

create or replace function pgmem.search_items(namespace_prefix text[] default '{}', query_text text default null,
                                              query_embedding public.vector default null, filter jsonb default null,
                                              k integer default 10, skip integer default 0)
returns table (memory_id bigint, namespace text[], key text, value jsonb, content text, created_at timestamptz,
               updated_at timestamptz, score float8)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_meta jsonb;
  v_wide integer;
begin
  perform pgmem._check_args('search_items', jsonb_build_object('namespace_prefix', to_jsonb(search_items.namespace_prefix), 'query_text', search_items.query_text, 'filter', search_items.filter));  -- sizes first (issue 27)
  perform pgmem._check_namespace(coalesce(namespace_prefix, '{}'), 'namespace_prefix');
  perform pgmem._check_between(k, 'k', 1, 1000);
  perform pgmem._check_between(skip, 'skip', 0, 10000);
  if filter is not null and jsonb_typeof(filter) <> 'object' then
    perform pgmem._bad_input('filter must be a JSON object of field: value or field: {"$op": value}');
  end if;
  v_meta := jsonb_build_object('item', jsonb_build_object('path', pgmem._item_path(coalesce(namespace_prefix, '{}'))));
  if query_text is null and query_embedding is null then
    -- no query: the newest matching items
    return query
    select m.id, array(select jsonb_array_elements_text(m.metadata->'item'->'namespace')), m.metadata->'item'->>'key',
           m.metadata->'item'->'value', m.content, m.created_at, m.updated_at, null::float8
      from pgmem.memories m
     where m.tenant = v_tenant and m.state = 'active' and m.metadata @> v_meta
       and pgmem._item_matches(m.metadata->'item'->'value', filter)
     order by m.updated_at desc, m.id desc
     limit k offset skip;
    return;
  end if;
  -- the fused search over the items under the prefix; comparisons filter its candidates
  v_wide := least(1000, (k + skip) * case when filter is null then 1 else 4 end);
  return query
  select s.id, array(select jsonb_array_elements_text(m.metadata->'item'->'namespace')), m.metadata->'item'->>'key',
         m.metadata->'item'->'value', m.content, m.created_at, m.updated_at, s.score::float8
    from pgmem.search(query_text => query_text, query_embedding => query_embedding, k => v_wide,
                      filters => jsonb_build_object('metadata', v_meta)) s
    join pgmem.memories m on m.id = s.id and m.tenant = v_tenant
   where pgmem._item_matches(m.metadata->'item'->'value', filter)
   order by s.score desc, s.id
   limit k offset skip;
end $$;
comment on function pgmem.search_items(text[], text, public.vector, jsonb, integer, integer) is
  'Items under a namespace prefix: ranked by the fused search (pgmem.search) when a query (text or embedding) is given, else newest first; filter on the value''s fields: {"field": value} or {"field": {"$eq|$ne|$gt|$gte|$lt|$lte": value}}.';

create or replace function pgmem.list_item_namespaces(prefix text[] default null, suffix text[] default null,
                                                      max_depth integer default null, k integer default 100,
                                                      skip integer default 0)
returns setof text[]
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := pgmem._require_tenant();
begin
  perform pgmem._check_args('list_item_namespaces', jsonb_build_object('prefix', to_jsonb(list_item_namespaces.prefix), 'suffix', to_jsonb(list_item_namespaces.suffix)));  -- sizes first (issue 27)
  perform pgmem._check_between(k, 'k', 1, 10000);
  perform pgmem._check_between(coalesce(max_depth, 1), 'max_depth', 1, 100);
  return query
  select distinct ns from (
    select case when max_depth is null then n.full else n.full[1:max_depth] end as ns
      from (select array(select jsonb_array_elements_text(m.metadata->'item'->'namespace')) as full
              from pgmem.memories m
             where m.tenant = v_tenant and m.state = 'active' and m.metadata ? 'item') n
     where (prefix is null or (cardinality(n.full) >= cardinality(prefix) and not exists (
              select 1 from unnest(prefix) with ordinality p(l, o) where p.l <> '*' and p.l <> n.full[p.o])))
       and (suffix is null or (cardinality(n.full) >= cardinality(suffix) and not exists (
              select 1 from unnest(suffix) with ordinality s(l, o)
               where s.l <> '*' and s.l <> n.full[cardinality(n.full) - cardinality(suffix) + s.o])))) x
   order by ns
   limit k offset skip;
end $$;
comment on function pgmem.list_item_namespaces(text[], text[], integer, integer, integer) is
  'The namespaces of the current tenant''s items, matching a prefix and a suffix (''*'' matches any label), cut to max_depth labels, in order.';

-- ------------------------------------------------------------------ sessions
drop function if exists pgmem.session_add_items(text, jsonb, text, boolean);
create or replace function pgmem.session_add_items(session_id text, items jsonb, user_id text default null,
                                                   remember boolean default false, embeddings vector[] default null)
returns integer
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_seq integer;
  it record;
  v_role text;
  v_text text;
  v_mem bigint;
  n integer := 0;
begin
  perform pgmem._check_args('session_add_items', jsonb_build_object('session_id', session_add_items.session_id, 'items', session_add_items.items, 'user_id', session_add_items.user_id, 'embeddings', session_add_items.embeddings));  -- sizes first (issue 27)
  if session_id is null or session_id !~ '\S' or length(session_id) > 256 then
    perform pgmem._bad_input('session_id must be 1 to 256 characters, not blank');
  end if;
  if items is null or jsonb_typeof(items) <> 'array' then
    perform pgmem._bad_input('items must be a JSON array of the framework''s items');
  end if;
  perform pgmem._check_between(jsonb_array_length(items), 'number of items', 0, 10000);
  -- (issue 32) the embeddings of the items, in their order (NULL for an item that is no text turn):
  -- a session's memories are found by meaning at once, not after the worker
  if embeddings is not null and cardinality(embeddings) <> jsonb_array_length(items) then
    perform pgmem._bad_input(format('embeddings has %s entries for %s items: one per item (NULL for an item without text)',
                                    cardinality(embeddings), jsonb_array_length(items)));
  end if;
  -- one writer of a session at a time: the next seq is taken under this lock
  perform pg_advisory_xact_lock(hashtext('pgmem.session_items'), hashtext(v_tenant || '/' || session_id));
  select coalesce(max(s.seq), 0) into v_seq from pgmem.session_items s
   where s.tenant = v_tenant and s.session_id = session_add_items.session_id;
  for it in select x.value as item, x.ord from jsonb_array_elements(items) with ordinality x(value, ord) loop
    if jsonb_typeof(it.item) <> 'object' then
      perform pgmem._bad_input(format('each item must be a JSON object, got %s', jsonb_typeof(it.item)));
    end if;
    v_seq := v_seq + 1;
    v_role := it.item->>'role';
    v_mem := null;
    -- a text turn of the user or the assistant is remembered too (when asked): its content, or the
    -- text parts of its content list
    if remember and v_role in ('user', 'assistant') then
      v_text := case jsonb_typeof(it.item->'content')
                  when 'string' then it.item->>'content'
                  when 'array' then (select string_agg(p->>'text', ' ') from jsonb_array_elements(it.item->'content') p
                                      where p->>'text' is not null)
                end;
      -- (issue 32: as context_for does, a greeting or a filler is conversation, not a memory; the
      -- user's questions and the assistant's replies are kept as such, category question and
      -- answer, and do not outrank statements in search)
      if v_text ~ '\S' and not (v_role = 'user' and (pgmem._is_filler(v_text) or pgmem._is_greeting(v_text))) then
        select r.memory_id into v_mem
          from pgmem.remember(content => v_text, who => v_role, user_id => user_id, session_id => session_id,
                              embedding => embeddings[it.ord],
                              event_key => 'session:' || md5(session_id) || ':' || v_seq,
                              category => case when v_role = 'assistant' then 'answer'
                                               when pgmem._is_question(v_text) then 'question' else 'episode' end) r;
      end if;
    end if;
    insert into pgmem.session_items (tenant, session_id, seq, user_id, role, item, memory_id)
    values (v_tenant, session_id, v_seq, user_id, v_role, it.item, v_mem);
    n := n + 1;
  end loop;
  return n;
end $$;
comment on function pgmem.session_add_items(text, jsonb, text, boolean, vector[]) is
  'Appends a framework''s conversation items (a JSON array of objects: messages, tool calls, tool results) to a session, in order. With remember, each user or assistant text turn is also remembered (pgmem.remember, who = role, session_id, with its embedding from embeddings, one per item): long-term memory from the conversation; a greeting or filler is not, a user''s question is category question and an assistant''s reply answer. Returns the number of items added.';

create or replace function pgmem.session_get_items(session_id text, max_items integer default null)
returns setof jsonb
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select x.item from (
    select s.item, s.seq from pgmem.session_items s
     where s.tenant = pgmem._require_tenant() and s.session_id = session_get_items.session_id and s.removed_at is null
       and pgmem._check_args('session_get_items', jsonb_build_object('session_id', session_get_items.session_id))
     order by s.seq desc
     limit pgmem._check_between(coalesce(max_items, 100000), 'max_items', 0, 100000)) x
  order by x.seq
$$;
comment on function pgmem.session_get_items(text, integer) is
  'A session''s items in order; with max_items, the latest max_items items (still in order).';

create or replace function pgmem.session_pop_item(session_id text) returns jsonb
  language sql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  update pgmem.session_items s set removed_at = now()
   where s.id = (select x.id from pgmem.session_items x
                  where x.tenant = pgmem._require_tenant() and x.session_id = session_pop_item.session_id
                    and x.removed_at is null and pgmem._check_args('session_pop_item', jsonb_build_object('session_id', session_pop_item.session_id))
                  order by x.seq desc limit 1 for update)
  returning s.item
$$;
comment on function pgmem.session_pop_item(text) is
  'Removes the latest item of a session and returns it (NULL for an empty session); the row is kept, marked removed_at.';

create or replace function pgmem.session_clear(session_id text) returns integer
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare n integer;
begin
  perform pgmem._check_args('session_clear', jsonb_build_object('session_id', session_clear.session_id));  -- sizes first (issue 27)
  update pgmem.session_items s set removed_at = now()
   where s.tenant = pgmem._require_tenant() and s.session_id = session_clear.session_id and s.removed_at is null;
  get diagnostics n = row_count;
  return n;
end $$;
comment on function pgmem.session_clear(text) is
  'Removes every item of a session (rows kept, marked removed_at; memories remembered from it stay). Returns how many.';
