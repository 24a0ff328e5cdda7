-- Explicit feedback: memories marked used, recorded at once (access counts, the access log for
-- Fragment's rehearsal, co-access links). The uses the read path records by itself (what a context
-- packs) and its retrievals are appended to pgmem.access_log instead and folded by a job
-- (sql/212_access_log.sql), so that no read takes a row lock on memories.

create or replace function pgmem.touch(ids bigint[], kind text default 'touch', query_id uuid default null) returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  n integer;
  v_ids bigint[];
  v_dup bigint;
begin
  if (ids is null or cardinality(ids) = 0) and octet_length(kind) > 32 then  -- (issue 27: the check below comes after this return)
    perform pgmem._too_big('kind', octet_length(kind), 32, 'bytes');
  end if;
  if ids is null or cardinality(ids) = 0 then return 0; end if;
  -- scaleout (issue 19): on a hot standby, an error naming the primary (not "read-only transaction")
  perform pgmem._standby_refuses('pgmem.touch (search/activate/recall with touch => true)');
  if cardinality(ids) > pgmem._setting_num('touch_max_ids', 1000) then
    perform pgmem._bad_input(format('touch takes at most %s ids at once, got %s',
                                    pgmem._setting_num('touch_max_ids', 1000)::bigint, cardinality(ids)),
      'touch in batches, or raise touch_max_ids in pgmem.settings');
  end if;
  -- one access of a memory is one use: access_count and the access log (Fragment's rehearsal,
  -- Engram's count) must agree, so an id given twice is a mistake, not two uses (issue 14)
  select x into v_dup from unnest(ids) x group by x having count(*) > 1 order by x limit 1;
  if v_dup is not null then
    perform pgmem._bad_input(format('touch got memory %s more than once: each id counts as one use', v_dup),
      'pass each memory id once (select distinct ...)');
  end if;
  if kind is null or kind !~ '^[a-z][a-z0-9_]{0,31}$' then
    perform pgmem._bad_input(format('touch kind must be a short lower-case name (a-z, 0-9, _; at most 32 characters), got %s',
                                    coalesce(quote_literal(left(kind, 40)) || case when char_length(kind) > 40 then '...' else '' end, 'NULL')),
      'e.g. touch, search, used');
  end if;
  -- only the current tenant's memories, in a stable order (no deadlocks between callers)
  v_ids := array(select m.id from pgmem.memories m where m.id = any(ids) and m.tenant = v_tenant order by m.id);
  update pgmem.memories m set access_count = m.access_count + 1, last_accessed_at = now()
   where m.id = any(v_ids) and m.tenant = v_tenant;
  get diagnostics n = row_count;
  insert into pgmem.accesses (tenant, memory_id, kind, query_id, rank)
  select v_tenant, x.id, kind, query_id, x.ord::int
    from unnest(ids) with ordinality x(id, ord) where x.id = any(v_ids);
  -- memories returned together are bound together (JAM liquid clusters: co-access affinity)
  insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, count)
  select v_tenant, a, b, 'co_access', 1, 1
    from unnest(v_ids) a cross join unnest(v_ids) b where a < b
  on conflict on constraint links_pkey do update set count = l.count + 1, weight = l.weight + 1, updated_at = now();
  return n;
end $$;
comment on function pgmem.touch(bigint[], text, uuid) is
  'Records that memories were used: access_count + 1, last_accessed_at, one pgmem.accesses row each (rehearsal for Fragment strength), and co_access links between memories used together. Each id once; kind a short lower-case name. Returns how many were touched.';

-- The one verb for "these memories were used" (issue 32): what an agent carried into its
-- prompt, what it cited, what a user clicked. A retrieval is never a use on its own: search,
-- activate and recall append what they return to the access log as retrievals
-- (sql/212_access_log.sql), which neither usage, Engram's access boost nor co-access bindings
-- read; only use() (and context_for and build_context for what they pack) counts. touch() is
-- the older name of the same call.
create or replace function pgmem.use(ids bigint[], source text default 'use', query_id uuid default null) returns integer
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
  return pgmem.touch(ids, source, query_id);
comment on function pgmem.use(bigint[], text, uuid) is
  'Records that memories were used (carried into a prompt, cited, clicked): access_count + 1, last_accessed_at, one pgmem.accesses row each with source as its kind, co_access links between memories used together. The one verb for a use: a retrieval never counts as one unless the caller says so here. Each id once. Returns how many were recorded. (touch is the older name.)';
