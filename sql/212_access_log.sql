-- Retrievals and uses (issue 24): memory that learns from use, without a feedback loop.
--
--   retrieval  a ranking returned the memory: search, activate, recall (and what builds on them)
--   use        the memory was packed into an LLM's context (build_context, context_for, the MCP
--              context tool, the web chat) or marked used by explicit feedback (touch)
--
-- The read path only appends one row per call to pgmem.access_log (pgmem._record_access): it
-- never takes a row lock on memories, and costs one small INSERT. The job access
-- (pgmem.fold_access_log, every minute) folds the rows into the access log proper
-- (pgmem.accesses: one row per memory, kind and batch, with a count) and, for uses, into
-- memories.access_count and last_accessed_at, and binds memories used together (co_access).
--
-- What each design's signal reads, and why:
--   JAM usage (search's usage signal)        uses: access_count, last_accessed_at. JAM's usage
--                                            is how much the agent relies on a memory; counting
--                                            retrievals would let whatever search returns rank
--                                            higher the next time (the loop issue 24 closes:
--                                            tests/test_access_log.py).
--   Engram access boost, access frequency    uses: access_count ("frequent access slows decay":
--   (recall, prune's decayed importance)     a memory the agent keeps using is kept; one that is
--                                            only ever returned and passed over is not).
--   Fragment rehearsal (strength: reconstruct, memory_health)
--                                            both kinds: pgmem.accesses, each counted. The design
--                                            logs every recall; a retrieval is a recall.
--   JAM cluster energy (liquid clusters)     both kinds: pgmem.accesses since the last step. A
--                                            cluster a topic keeps being searched for is hot,
--                                            whether or not its memories were packed.
--   co_access bindings                       uses: memories packed together.
-- A hot standby or a read-only transaction records nothing; the setting record_retrievals = false
-- (for a tenant), or SET pgmem.record_retrievals = off (for a session: an analytics job, the
-- benchmark's comparison), turns the recording of retrievals off; uses are always recorded.

create or replace function pgmem._record_access(p_kind text, p_source text, p_ids bigint[], p_query_id uuid default null)
returns void
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_ids is null or cardinality(p_ids) = 0 or pg_is_in_recovery()
     or current_setting('transaction_read_only') = 'on' then
    return;
  end if;
  if p_kind = 'retrieval' and (current_setting('pgmem.record_retrievals', true) in ('off', 'false')
                               or (pgmem._setting('record_retrievals'))::text = 'false') then
    return;
  end if;
  insert into pgmem.access_log (tenant, kind, source, ids, query_id)
  values (pgmem._require_tenant(), p_kind, p_source, p_ids[1:1000], p_query_id);
end $$;
comment on function pgmem._record_access(text, text, bigint[], uuid) is
  'Appends one retrieval or use of memories to pgmem.access_log for the current tenant (nothing on a hot standby or in a read-only transaction; no retrieval with record_retrievals = false). The read path''s only write.';

-- Folds at most p_batch rows of the log (of a tenant, or of every tenant), oldest first; returns
-- how many. A use of a memory another transaction holds locked is not waited for: it goes back
-- to the log (a new row) and a later batch folds it. Ids of memories gone since are dropped.
create or replace function pgmem._fold_access_log(p_tenant text, p_batch integer) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  n bigint;
begin
  -- one statement (its sub-statements run once each, to completion, on one snapshot)
  with ev as (
    delete from pgmem.access_log x
     where x.id in (select y.id from pgmem.access_log y where p_tenant is null or y.tenant = p_tenant
                     order by y.id limit p_batch for update skip locked)
    returning x.tenant, x.kind, x.source, x.ids, x.at, x.query_id),
  per as (
    -- one row per memory and kind: how many times, the latest, the best rank (the memories still
    -- there, of the row's tenant)
    select e.tenant, u.id as memory_id, e.kind, count(*)::int as n, max(e.at) as at,
           (array_agg(e.query_id order by e.at desc))[1] as query_id, min(u.ord)::int as rank,
           (array_agg(e.source order by e.at desc))[1] as source
      from ev e cross join lateral unnest(e.ids) with ordinality u(id, ord)
      join pgmem.memories m on m.id = u.id and m.tenant = e.tenant
     group by e.tenant, u.id, e.kind),
  acc as (
    -- the access log proper (rehearsal, cluster energy)
    insert into pgmem.accesses (tenant, memory_id, kind, query_id, rank, accessed_at, count)
    select p.tenant, p.memory_id, p.kind, p.query_id, p.rank, p.at, p.n from per p order by p.memory_id),
  locked as (
    select m.id from pgmem.memories m
     where m.id in (select p.memory_id from per p where p.kind = 'use')
     order by m.id for update skip locked),
  upd as (
    -- uses: the memories' counts (rows another transaction holds are skipped ...)
    update pgmem.memories m set access_count = m.access_count + p.n,
                                last_accessed_at = greatest(m.last_accessed_at, p.at)
      from per p
     where p.kind = 'use' and m.id = p.memory_id and m.id in (select l.id from locked l)
    returning m.id),
  back as (
    -- (... and their uses put back for a later batch)
    insert into pgmem.access_log (tenant, at, kind, source, ids)
    select p.tenant, p.at, 'use', p.source, array_fill(p.memory_id, array[p.n])
      from per p where p.kind = 'use' and p.memory_id not in (select u.id from upd u)),
  co as (
    -- memories used together (in one use) are bound together (JAM liquid clusters: co-access)
    insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, count)
    select e.tenant, a.id, b.id, 'co_access', count(*), count(*)
      from ev e
      cross join lateral (select distinct x.id from unnest(e.ids) x(id)) a
      cross join lateral (select distinct y.id from unnest(e.ids) y(id)) b
      join pgmem.memories ma on ma.id = a.id and ma.tenant = e.tenant
      join pgmem.memories mb on mb.id = b.id and mb.tenant = e.tenant
     where e.kind = 'use' and a.id < b.id
     group by 1, 2, 3
    on conflict on constraint links_pkey do update set count = l.count + excluded.count, weight = l.weight + excluded.weight,
                                                       updated_at = now())
  select count(*) into n from ev;
  return n;
end $$;

-- The job access (pgmem._jobs(), every minute): one batch of _fold_access_log for a tenant, or for
-- every tenant (an administrator's run, tenant * or none set).
create or replace function pgmem.fold_access_log(batch integer default 10000, tenant text default null) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._job_scope(case when tenant = '*' then null else tenant end);
  v_run bigint;
  n bigint;
begin
  perform pgmem._check_args('fold_access_log', jsonb_build_object('tenant', fold_access_log.tenant));  -- sizes first (issue 27)
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  if tenant = '*' and not pgmem._is_admin() then
    raise exception 'folding every tenant''s access log needs pgmem_admin' using errcode = '42501';
  end if;
  v_run := pgmem._job_begin('access', v_tenant, jsonb_build_object('batch', batch));
  if v_run is null then return 0; end if;
  n := pgmem._fold_access_log(v_tenant, batch);
  perform pgmem._job_end(v_run, n, n, jsonb_build_object('more', n >= batch));
  return n;
end $$;
comment on function pgmem.fold_access_log(integer, text) is
  'The job access: folds up to batch of the current tenant''s appended retrievals and uses (pgmem.access_log; tenant * or none set as an administrator: every tenant''s) into pgmem.accesses (rehearsal, cluster energy) and, for uses, memories.access_count and last_accessed_at and co_access bindings. Returns the log rows folded.';
