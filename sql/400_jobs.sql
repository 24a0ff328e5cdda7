-- Lifecycle jobs: duplicate merge, pruning, purge, archival, threshold tuning. Each is a
-- function that does one bounded batch in the caller's (short) transaction and can be
-- called by hand; `CALL pgmem.run_job(job, params)` repeats batches, committing between
-- them, until there is nothing left. Every run is a row in pgmem.job_runs; two runs of the
-- same job and tenant never overlap (advisory lock: the second is recorded as skipped).
-- Nothing is destroyed except by purge(): merged, pruned and archived memories keep their
-- rows, and every change is in pgmem.history.
--
-- Scope: a job works on the current tenant (pgmem.tenant) or, with no tenant set, on all
-- tenants; the latter needs pgmem_admin (pg_cron runs jobs that way).

create or replace function pgmem._job_scope(p_tenant text) returns text
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
as $$
declare t text := coalesce(p_tenant, pgmem.current_tenant());
begin
  if t is null and not pgmem._is_admin() then
    raise exception 'this job runs for all tenants when no tenant is set, which needs the pgmem_admin role'
      using errcode = '42501', hint = 'SET pgmem.tenant = ''...'' to run it for one tenant';
  end if;
  if t is not null and t <> coalesce(pgmem.current_tenant(), t) and not pgmem._is_admin() then
    raise exception 'running a job for tenant "%" from tenant "%" needs pgmem_admin', t, pgmem.current_tenant()
      using errcode = '42501';
  end if;
  return t;  -- NULL = every tenant
end $$;

create or replace function pgmem._job_lock_key(p_job text, p_tenant text) returns bigint
  language sql immutable
  return hashtextextended('pgmem-job:' || p_job || ':' || coalesce(p_tenant, '*'), 0);

create or replace function pgmem._job_begin(p_job text, p_tenant text, p_params jsonb) returns bigint
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare id bigint;
begin
  -- a whole run (run_job) holds the session lock; a single batch takes the transaction lock
  if not pg_try_advisory_xact_lock(pgmem._job_lock_key(p_job, p_tenant)) then
    insert into pgmem.job_runs (tenant, job, params, status, finished_at, error)
    values (p_tenant, p_job, p_params, 'skipped', clock_timestamp(), 'skipped: already running');
    return null;
  end if;
  -- jobs that change memories wait for each other (one at a time per database): merge and
  -- prune lock rows in different orders and would otherwise deadlock
  if p_job in ('merge', 'prune', 'archive', 'purge', 'cluster') then  -- cluster: sql/470_cluster.sql
    perform pg_advisory_xact_lock(hashtextextended('pgmem-maintenance', 0));
  end if;
  insert into pgmem.job_runs (tenant, job, params) values (p_tenant, p_job, p_params) returning job_runs.id into id;
  return id;
end $$;

create or replace function pgmem._job_end(p_run bigint, p_examined bigint, p_changed bigint, p_details jsonb default '{}')
returns void
  language sql volatile
  set search_path = pgmem, public, pg_temp
as $$
  update pgmem.job_runs set finished_at = clock_timestamp(), status = 'ok', examined = p_examined,
         changed = p_changed, details = details || coalesce(p_details, '{}')
   where id = p_run
$$;

-- A job's position (a keyset cursor, or a run's as_of and cut-off) in pgmem.job_state.
create or replace function pgmem._job_state_save(p_tenant text, p_job text, p_at timestamptz, p_id bigint)
returns void
  language sql volatile
  set search_path = pgmem, public, pg_temp
as $$
  insert into pgmem.job_state (tenant, job, cursor_at, cursor_id) values (p_tenant, p_job, p_at, p_id)
  on conflict (tenant, job) do update set cursor_at = excluded.cursor_at, cursor_id = excluded.cursor_id, updated_at = now()
$$;
comment on function pgmem._job_state_save(text, text, timestamptz, bigint) is
  'Saves (upserts) a job''s position in pgmem.job_state: cursor_at, cursor_id for (tenant, job).';

-- Where an unfinished run stopped. Some jobs keep their position in pgmem.job_state only
-- for the length of a run (a run = the calls of run_job, or calls repeated by hand while
-- job_runs.details->'more' is true): merge with full_scan ('merge_full', 'merge_full_text')
-- and prune ('prune:<mode>', and 'prune:bottom:<scope>' for aggressive mode). The job deletes
-- them when its run is complete, and run_job before its first batch, so that every run_job
-- starts from the beginning even after an earlier run stopped half-way (max_batches, an
-- error). The incremental merge cursors ('merge', 'merge_text') outlive runs: never reset.
-- Dry runs neither read nor write these rows, so resetting for one would only lose a run
-- under way.
create or replace function pgmem._job_state_reset(p_job text, p_tenant text, p_params jsonb default '{}')
returns void
  language sql volatile
  set search_path = pgmem, public, pg_temp
as $$
  delete from pgmem.job_state s
   where coalesce((p_params->>'dry_run')::boolean, false) is false
     and case p_job
           when 'merge' then coalesce((p_params->>'full_scan')::boolean, false)
                             and s.tenant = coalesce(p_tenant, '*') and s.job in ('merge_full', 'merge_full_text')
           -- (prune's default mode is normal)
           when 'prune' then (s.tenant = coalesce(p_tenant, '*') and s.job = 'prune:' || coalesce(p_params->>'mode', 'normal'))
                          or (coalesce(p_params->>'mode', 'normal') = 'aggressive' and s.job = 'prune:bottom:' || coalesce(p_tenant, '*'))
           else false
         end
$$;

-- ------------------------------------------------------------------ merge
-- engram.md, Deduplication & Merging: pairs with similarity >= threshold (cosine with
-- embeddings, Jaccard of tokens without), same category unless >= the cross-category
-- threshold (0.95); keep the more important memory, sum access counts, record merged_from.
-- Candidates: each memory embedded since the last run looks up its nearest neighbours in
-- the HNSW index (same tenant and user, active); memories without an embedding use the
-- lexical index and Jaccard. full_scan => true examines every active memory instead (the
-- design's "for each pair of memories"), in keyset pages by (embedded_at, id) and
-- (created_at, id) like the incremental run, but with cursors of its own ('merge_full',
-- 'merge_full_text' in job_state) that live for one run: each call goes on from where the
-- previous one stopped, and the call that reaches the end deletes them, so the next full
-- scan starts from the beginning (run_job also resets them before its first batch).
-- Pairs are applied strongest first; each side is resolved to its current survivor, so
-- chains (A~B, B~C) end with one survivor, chosen by importance, then by the lower id: the
-- result does not depend on the order memories were processed.
create or replace function pgmem.merge_duplicates(
  threshold float8 default 0.85,
  cross_category_threshold float8 default 0.95,
  dry_run boolean default false,
  batch integer default 1000,
  tenant text default null,
  neighbours integer default 5,
  full_scan boolean default false)
returns table (survivor_id bigint, merged_id bigint, similarity float8, same_category boolean, method text, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
  set hnsw.iterative_scan = relaxed_order
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  v_params jsonb := jsonb_build_object('threshold', threshold, 'cross_category_threshold', cross_category_threshold,
                      'dry_run', dry_run, 'batch', batch, 'neighbours', neighbours, 'full_scan', full_scan);
  v_cursor record;
  v_last_at timestamptz;
  v_last_id bigint;
  v_examined bigint := 0;
  v_changed bigint := 0;
  p record;
  a pgmem.memories;
  b pgmem.memories;
  keep pgmem.memories;
  gone pgmem.memories;
  v_links jsonb;
  v_text_cursor record;
  v_horizon timestamptz;
  v_survivor_of jsonb := '{}';  -- dry run: merged id -> survivor id, as the real run would do
  v_more boolean;
  -- where this call starts: the incremental cursors, or those of the full scan under way
  v_cursor_job text := case when full_scan then 'merge_full' else 'merge' end;
  v_text_cursor_job text := case when full_scan then 'merge_full_text' else 'merge_text' end;
begin
  perform pgmem._check_unit(threshold, 'threshold'), pgmem._check_unit(cross_category_threshold, 'cross_category_threshold');
  perform pgmem._check_between(batch, 'batch', 1, 100000);
  v_run := pgmem._job_begin('merge', v_tenant, v_params);
  if v_run is null then
    raise notice 'pgmem: merge is already running for %; skipped', coalesce(v_tenant, 'all tenants');
    return;
  end if;
  perform set_config('hnsw.ef_search', greatest(40, neighbours * 4)::text, true);
  select cursor_at, cursor_id into v_cursor from pgmem.job_state s
   where s.tenant = coalesce(v_tenant, '*') and s.job = v_cursor_job;
  select cursor_at, cursor_id into v_text_cursor from pgmem.job_state s
   where s.tenant = coalesce(v_tenant, '*') and s.job = v_text_cursor_job;

  create temp table if not exists _pgmem_pairs (a bigint, b bigint, sim float8, same_cat boolean, method text) on commit drop;
  truncate _pgmem_pairs;
  create temp table if not exists _pgmem_batch (id bigint, at timestamptz, kind text) on commit drop;
  truncate _pgmem_batch;

  -- Only rows older than the oldest transaction still open: a memory written by a
  -- transaction that started earlier but commits later must not fall behind the cursor.
  select least(now(), min(a.xact_start)) into v_horizon from pg_stat_activity a
   where a.datname = current_database() and a.pid <> pg_backend_pid() and a.xact_start is not null;
  v_horizon := coalesce(v_horizon, now());

  -- this batch: memories embedded since the cursor, then memories still without an embedding
  -- (created since the text cursor); a full scan's cursors start at the beginning
  insert into _pgmem_batch
  select m.id, m.embedded_at, 'embedded' from pgmem.memories m
   where m.embedding is not null and m.state = 'active' and (v_tenant is null or m.tenant = v_tenant)
     and (v_cursor.cursor_at is null or (m.embedded_at, m.id) > (v_cursor.cursor_at, v_cursor.cursor_id))
     and m.embedded_at < v_horizon
   order by m.embedded_at, m.id limit batch;
  insert into _pgmem_batch
  select m.id, m.created_at, 'text' from pgmem.memories m
   where m.embedding is null and m.state = 'active' and (v_tenant is null or m.tenant = v_tenant)
     and (v_text_cursor.cursor_at is null or (m.created_at, m.id) > (v_text_cursor.cursor_at, v_text_cursor.cursor_id))
     and m.created_at < v_horizon
   order by m.created_at, m.id limit batch;
  select count(*) into v_examined from _pgmem_batch;

  -- candidate pairs from the indexes
  insert into _pgmem_pairs
  select least(x.id, n.id), greatest(x.id, n.id), n.sim, x.category = n.category, 'cosine'
    from _pgmem_batch bt join pgmem.memories x on x.id = bt.id and bt.kind = 'embedded'
    cross join lateral (
      select y.id, 1 - (y.embedding operator(public.<=>) x.embedding) as sim, y.category
        from pgmem.memories y
       where y.tenant = x.tenant and coalesce(y.user_id, '') = coalesce(x.user_id, '') and y.state = 'active'
         and y.embedding is not null and y.id <> x.id
       order by y.embedding operator(public.<=>) x.embedding limit neighbours) n
   where n.sim >= threshold and (x.category = n.category or n.sim >= cross_category_threshold);
  insert into _pgmem_pairs
  select least(x.id, n.id), greatest(x.id, n.id), n.sim, x.category = n.category, 'jaccard'
    from _pgmem_batch bt join pgmem.memories x on x.id = bt.id and bt.kind = 'text'
    cross join lateral (
      select y.id, pgmem.jaccard(pgmem.tokens(x.content), pgmem.tokens(y.content)) as sim, y.category
        from pgmem.memories y
       where y.tenant = x.tenant and coalesce(y.user_id, '') = coalesce(x.user_id, '') and y.state = 'active'
         and y.id <> x.id and y.tsv @@ pgmem.query_tsquery(x.content)
       limit 50) n
   where n.sim >= threshold and (x.category = n.category or n.sim >= cross_category_threshold);

  for p in select * from (select distinct on (pp.a, pp.b) pp.* from _pgmem_pairs pp order by pp.a, pp.b, pp.sim desc) q
            order by q.sim desc, q.a, q.b loop
    -- resolve both sides to their current survivors (earlier merges in this batch or before;
    -- in a dry run, the merges this run would have made)
    select * into a from pgmem.memories where id = coalesce((v_survivor_of->>p.a::text)::bigint, p.a);
    while a.state = 'merged' and a.merged_into is not null loop select * into a from pgmem.memories where id = a.merged_into; end loop;
    select * into b from pgmem.memories where id = coalesce((v_survivor_of->>p.b::text)::bigint, p.b);
    while b.state = 'merged' and b.merged_into is not null loop select * into b from pgmem.memories where id = b.merged_into; end loop;
    if a.id = b.id or a.state <> 'active' or b.state <> 'active' then continue; end if;
    if not dry_run then
      -- lock both in id order, then look again: a concurrent forget/merge may have won
      perform 1 from pgmem.memories where id in (a.id, b.id) order by id for update;
      select * into a from pgmem.memories where id = a.id;
      select * into b from pgmem.memories where id = b.id;
      if a.state <> 'active' or b.state <> 'active' then continue; end if;
    end if;
    if a.importance > b.importance or (a.importance = b.importance and a.id < b.id) then keep := a; gone := b;
    else keep := b; gone := a; end if;
    survivor_id := keep.id; merged_id := gone.id; similarity := p.sim; same_category := p.same_cat;
    method := p.method; applied := not dry_run;
    if dry_run then
      v_survivor_of := (select coalesce(jsonb_object_agg(k, case when v::text::bigint = gone.id then to_jsonb(keep.id) else v end), '{}')
                          from jsonb_each(v_survivor_of) e(k, v))
                       || jsonb_build_object(gone.id::text, keep.id);
    end if;
    if not dry_run then
      -- the merged memory's links, as they were: unmerge puts them back
      select coalesce(jsonb_agg(to_jsonb(l)), '[]') into v_links
        from pgmem.links l where l.src_id = gone.id or l.dst_id = gone.id;
      perform pgmem._set_op('merge', jsonb_build_object('role', 'merged', 'survivor_id', keep.id,
        'similarity', round(p.sim::numeric, 6), 'method', p.method, 'job_run_id', v_run, 'links', v_links,
        'access_count_added', gone.access_count));
      update pgmem.memories set state = 'merged', merged_into = keep.id where id = gone.id;
      -- memories merged into the loser before now point at the survivor
      update pgmem.memories set merged_into = keep.id where merged_into = gone.id and id <> gone.id;
      perform pgmem._set_op('merge', jsonb_build_object('role', 'survivor', 'merged_id', gone.id,
        'similarity', round(p.sim::numeric, 6), 'method', p.method, 'job_run_id', v_run,
        'access_count_added', gone.access_count));
      update pgmem.memories set access_count = access_count + gone.access_count,
             merged_from = merged_from || gone.id || gone.merged_from,
             last_accessed_at = greatest(last_accessed_at, gone.last_accessed_at)
       where id = keep.id;
      perform pgmem._set_op(null);
      -- re-point the links of the merged memory to the survivor (weights add up)
      insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, count, metadata)
      select x.tenant, case when x.src_id = gone.id then keep.id else x.src_id end,
             case when x.dst_id = gone.id then keep.id else x.dst_id end, x.kind, x.weight, x.count,
             x.metadata || jsonb_build_object('via_merge', gone.id)
        from pgmem.links x
       where (x.src_id = gone.id or x.dst_id = gone.id)
         and (case when x.src_id = gone.id then keep.id else x.src_id end) <> (case when x.dst_id = gone.id then keep.id else x.dst_id end)
      on conflict on constraint links_pkey do update set weight = l.weight + excluded.weight, count = l.count + excluded.count, updated_at = now();
      delete from pgmem.links x where x.src_id = gone.id or x.dst_id = gone.id;
      insert into pgmem.links (tenant, src_id, dst_id, kind, weight) values (gone.tenant, gone.id, keep.id, 'merged', p.sim)
      on conflict do nothing;
      v_changed := v_changed + 1;
    end if;
    return next;
  end loop;

  v_more := v_examined >= batch;
  if not dry_run and full_scan and not v_more then
    -- the full scan has seen every memory: the next one starts from the beginning
    perform pgmem._job_state_reset('merge', v_tenant, '{"full_scan": true}');
  elsif not dry_run then
    select max(bt.at), (array_agg(bt.id order by bt.at desc, bt.id desc))[1] into v_last_at, v_last_id
      from _pgmem_batch bt where bt.kind = 'embedded';
    if v_last_at is not null then
      perform pgmem._job_state_save(coalesce(v_tenant, '*'), v_cursor_job, v_last_at, v_last_id);
    end if;
    select max(bt.at), (array_agg(bt.id order by bt.at desc, bt.id desc))[1] into v_last_at, v_last_id
      from _pgmem_batch bt where bt.kind = 'text';
    if v_last_at is not null then
      perform pgmem._job_state_save(coalesce(v_tenant, '*'), v_text_cursor_job, v_last_at, v_last_id);
    end if;
  end if;
  perform pgmem._job_end(v_run, v_examined, v_changed,
    jsonb_build_object('more', v_more, 'pairs', (select count(*) from _pgmem_pairs)));
end $$;
comment on function pgmem.merge_duplicates(float8, float8, boolean, integer, text, integer, boolean) is
  'Engram duplicate merge for one batch of memories embedded since the last run (full_scan => true: the next batch of all memories, going on from where the previous full-scan call stopped until it has seen them all): pairs from the HNSW index at cosine >= threshold (Jaccard without embeddings), same category unless >= cross_category_threshold; the more important memory survives, access counts add up, merged_from is recorded, links are re-pointed; dry_run lists the pairs. Undo with pgmem.unmerge.';

create or replace function pgmem.unmerge(memory_id bigint) returns pgmem.memories
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare
  m pgmem.memories := pgmem._get_for_update(unmerge.memory_id);
  h pgmem.history;
  s pgmem.memories;
  l jsonb;
  v_added integer;
begin
  if m.state <> 'merged' then
    perform pgmem._bad_input(format('memory %s is %s, not merged: nothing to unmerge', m.id, m.state));
  end if;
  select * into h from pgmem.history x
   where x.memory_id = m.id and x.tenant = m.tenant and x.op = 'merge' and x.details->>'role' = 'merged'
   order by x.id desc limit 1;
  select * into s from pgmem.memories where id = m.merged_into for update;
  v_added := coalesce((h.details->>'access_count_added')::int, m.access_count);
  perform pgmem._set_op('unmerge', jsonb_build_object('role', 'survivor', 'merged_id', m.id, 'merge_history_id', h.id));
  update pgmem.memories set access_count = greatest(0, access_count - v_added),
         merged_from = array(select x from unnest(merged_from) x where x <> m.id)
   where id = s.id;
  perform pgmem._set_op('unmerge', jsonb_build_object('role', 'merged', 'survivor_id', s.id, 'merge_history_id', h.id));
  update pgmem.memories set state = 'active', merged_into = null where id = m.id returning * into m;
  perform pgmem._set_op(null);
  -- links: take back what the merge moved to the survivor, restore the originals
  delete from pgmem.links x where x.src_id = m.id and x.dst_id = s.id and x.kind = 'merged';
  for l in select value from jsonb_array_elements(coalesce(h.details->'links', '[]')) loop
    update pgmem.links x set weight = greatest(0, x.weight - (l->>'weight')::real), count = x.count - (l->>'count')::int
     where x.src_id = case when (l->>'src_id')::bigint = m.id then s.id else (l->>'src_id')::bigint end
       and x.dst_id = case when (l->>'dst_id')::bigint = m.id then s.id else (l->>'dst_id')::bigint end
       and x.kind = l->>'kind';
    insert into pgmem.links (tenant, src_id, dst_id, kind, weight, count, metadata, created_at, updated_at)
    values (l->>'tenant', (l->>'src_id')::bigint, (l->>'dst_id')::bigint, l->>'kind', (l->>'weight')::real,
            (l->>'count')::int, coalesce(l->'metadata', '{}'), (l->>'created_at')::timestamptz, now())
    on conflict on constraint links_pkey do nothing;
  end loop;
  delete from pgmem.links x where (x.src_id = s.id or x.dst_id = s.id) and x.count <= 0 and x.metadata ? 'via_merge';
  return m;
end $$;
comment on function pgmem.unmerge(bigint) is
  'Splits a merged memory out again: active, its links restored, the survivor''s access count and merged_from taken back; recorded in history.';

-- ------------------------------------------------------------------ prune
-- engram.md, Pruning Modes: gentle = expired; normal = expired or decayed importance < 0.01;
-- aggressive = also the bottom 10% by decayed importance: sorted ascending, the first
-- floor(n × 10%), per tenant (ties by id). Soft delete (restorable).
-- A run (run_job, or calls repeated by hand while job_runs.details->'more' is true) walks the
-- active memories once, in keyset pages by id, and judges each memory on its own, at one
-- as_of for the whole run: a call costs its page, not a ranking of every memory. Only
-- aggressive mode ranks, once, when its run starts: per tenant it keeps the memory at rank
-- floor(n × 10%) (the cut-off); a memory is in the bottom fraction iff (decayed importance,
-- id) <= the cut-off's, so a run prunes the same memories in one call or in many.
-- job_state while a run is under way (pgmem._job_state_reset deletes it when the run ends):
--   (scope, 'prune:<mode>')           cursor_at = the run's as_of, cursor_id = the last id walked
--   (tenant, 'prune:bottom:<scope>')  cursor_at = the run's as_of, cursor_id = the cut-off memory
-- (scope = the tenant, or '*' for all). A dry run starts afresh and changes no job_state.
create or replace function pgmem.prune(
  mode text default 'normal',
  dry_run boolean default false,
  batch integer default 10000,
  tenant text default null,
  min_importance float8 default 0.01,
  bottom_fraction float8 default 0.10,
  as_of timestamptz default null)
returns table (memory_id bigint, reason text, decayed_importance float8, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_scope text := coalesce(v_tenant, '*');
  v_run bigint;
  v_as_of timestamptz;
  v_state_at timestamptz;   -- the run under way: its as_of ...
  v_after bigint := 0;      -- ... and the last id it walked
  v_found bigint;
  v_last bigint;
  v_full boolean;
  v_examined bigint;
  v_changed bigint := 0;
  r record;
begin
  if mode is null or mode not in ('gentle', 'normal', 'aggressive') then
    perform pgmem._bad_input(format('unknown prune mode "%s": modes are gentle, normal, aggressive', mode));
  end if;
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  perform pgmem._check_unit(min_importance, 'min_importance'), pgmem._check_unit(bottom_fraction, 'bottom_fraction');
  v_run := pgmem._job_begin('prune', v_tenant, jsonb_build_object('mode', mode, 'dry_run', dry_run, 'batch', batch));
  if v_run is null then return; end if;

  create temp table if not exists _pgmem_prune_cut (tenant text, di float8, id bigint) on commit drop;
  truncate _pgmem_prune_cut;
  create temp table if not exists _pgmem_prune_page (id bigint, di float8, why text) on commit drop;
  truncate _pgmem_prune_page;

  -- go on with the run under way (same mode; as_of not given or the same), or start one
  if not dry_run then
    select s.cursor_at, s.cursor_id into v_state_at, v_after from pgmem.job_state s
     where s.tenant = v_scope and s.job = 'prune:' || mode;
  end if;
  if v_state_at is not null and (as_of is null or as_of = v_state_at) then
    v_as_of := v_state_at;
    if mode = 'aggressive' then
      -- the cut-offs chosen when the run started (decayed importance at the run's as_of)
      insert into _pgmem_prune_cut
      select s.tenant, pgmem.decayed_importance(c.importance, c.created_at, c.access_count, v_as_of), c.id
        from pgmem.job_state s join pgmem.memories c on c.id = s.cursor_id
       where s.job = 'prune:bottom:' || v_scope;
    end if;
  else
    v_as_of := coalesce(as_of, now());
    v_after := 0;
    if not dry_run then
      perform pgmem._job_state_reset('prune', v_tenant, jsonb_build_object('mode', mode));
    end if;
    if mode = 'aggressive' then
      -- engram.md, Pruning Modes (aggressive): sort by decayed importance, prune the first
      -- floor(n × 10%), per tenant; the cut-off is the memory at that rank (none when 0)
      insert into _pgmem_prune_cut
      select q.tenant, q.di, q.id
        from (select s.*, row_number() over (partition by s.tenant order by s.di, s.id) as rn,
                     count(*) over (partition by s.tenant) as n
                from (select m.tenant, m.id,
                             pgmem.decayed_importance(m.importance, m.created_at, m.access_count, v_as_of) as di
                        from pgmem.memories m
                       where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant)) s) q
       where q.rn = floor(q.n * bottom_fraction);
      if not dry_run then
        perform pgmem._job_state_save(c.tenant, 'prune:bottom:' || v_scope, v_as_of, c.id) from _pgmem_prune_cut c;
      end if;
    end if;
  end if;

  -- this call's page: the next `batch` memories to prune after the cursor, by id, each judged
  -- on its own (no ranking)
  insert into _pgmem_prune_page
  select q.id, q.di, q.why
    from (select m.id, d.di,
                 case when m.expires_at is not null and m.expires_at < v_as_of then 'expired'
                      when mode in ('normal', 'aggressive') and d.di < min_importance then 'decayed'
                      when mode = 'aggressive'
                       and (d.di, m.id) <= (select c.di, c.id from _pgmem_prune_cut c where c.tenant = m.tenant) then 'bottom'
                 end as why
            from pgmem.memories m
           cross join lateral (select pgmem.decayed_importance(m.importance, m.created_at, m.access_count, v_as_of) as di) d
           where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant) and m.id > v_after) q
   where q.why is not null
   order by q.id
   limit batch;
  select count(*), max(p.id) into v_found, v_last from _pgmem_prune_page p;
  v_full := coalesce(v_found > 0 and v_found >= batch, false);  -- there may be more after this page
  -- examined: the active memories this call walked past
  select count(*) into v_examined from pgmem.memories m
   where m.state = 'active' and (v_tenant is null or m.tenant = v_tenant) and m.id > v_after
     and (not v_full or m.id <= v_last);

  for r in select p.id, p.di, p.why from _pgmem_prune_page p order by p.di, p.id loop
    memory_id := r.id; reason := r.why; decayed_importance := r.di; applied := not dry_run;
    if not dry_run then
      perform pgmem._set_op('delete', jsonb_build_object('job', 'prune', 'mode', mode, 'reason', r.why,
                                                        'decayed_importance', r.di, 'job_run_id', v_run));
      update pgmem.memories m set state = 'deleted' where m.id = r.id and m.state = 'active';
      if not found then continue; end if;  -- merged or deleted meanwhile
      v_changed := v_changed + 1;
    end if;
    return next;
  end loop;
  perform pgmem._set_op(null);

  if not dry_run and v_full then
    perform pgmem._job_state_save(v_scope, 'prune:' || mode, v_as_of, v_last);
  elsif not dry_run then
    perform pgmem._job_state_reset('prune', v_tenant, jsonb_build_object('mode', mode));  -- the run is complete
  end if;
  perform pgmem._job_end(v_run, v_examined, v_changed, jsonb_build_object('more', v_full and not dry_run));
end $$;
comment on function pgmem.prune(text, boolean, integer, text, float8, float8, timestamptz) is
  'Engram pruning: gentle = expired; normal = expired or decayed importance < 0.01; aggressive = also the bottom floor(n × 10%) by decayed importance, per tenant, ranked once per run. One call prunes at most batch memories, walking them by id from where the previous call of the run stopped (details->''more'' in job_runs; run_job repeats the calls). Soft delete (state deleted, restorable); dry_run lists what the first call of a new run would prune.';

-- The only path that destroys memories: rows soft-deleted longer than older_than.
create or replace function pgmem.purge(older_than interval default '30 days', dry_run boolean default false,
                                       batch integer default 10000, tenant text default null)
returns table (memory_id bigint, deleted_at timestamptz, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  v_changed bigint := 0;
  r record;
begin
  if older_than is null or older_than < interval '0' then
    perform pgmem._bad_input('older_than must be a non-negative interval, e.g. ''30 days''');
  end if;
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  v_run := pgmem._job_begin('purge', v_tenant, jsonb_build_object('older_than', older_than::text, 'dry_run', dry_run));
  if v_run is null then return; end if;
  for r in select m.id, m.state_changed_at from pgmem.memories m
            where m.state = 'deleted' and coalesce(m.state_changed_at, m.updated_at) < now() - older_than
              and (v_tenant is null or m.tenant = v_tenant)
            order by m.id limit batch loop
    memory_id := r.id; deleted_at := r.state_changed_at; applied := not dry_run;
    if not dry_run then
      update pgmem.memories m set merged_into = null where m.merged_into = r.id;
      perform pgmem._set_op('purge', jsonb_build_object('job_run_id', v_run, 'older_than', older_than::text));
      delete from pgmem.memories m where m.id = r.id and m.state = 'deleted'
         and coalesce(m.state_changed_at, m.updated_at) < now() - older_than;
      if not found then continue; end if;  -- restored meanwhile
      v_changed := v_changed + 1;
    end if;
    return next;
  end loop;
  perform pgmem._set_op(null);
  perform pgmem._job_end(v_run, v_changed, v_changed, jsonb_build_object('more', v_changed >= batch));
end $$;
comment on function pgmem.purge(interval, boolean, integer, text) is
  'Deletes for good the memories soft-deleted longer ago than older_than (their last state is kept in history as op purge). The only function that destroys memories.';

-- ------------------------------------------------------------------ archive
-- shadow-memory-system.md, MemoryLifecycleManager: active memories move to archived when
-- their age exceeds the retention period and they have not been activated recently: no
-- access within the retention window, or (activation_threshold > 0) no recorded activation
-- score at or above activation_threshold in it. pgmem requires both age and inactivity, so a
-- memory in daily use is never archived just for being old. Archived memories are left out
-- of search by default (filters => '{"state": ["active", "archived"]}' includes them) and
-- come back with pgmem.restore().
create or replace function pgmem.archive_stale(
  retention interval default '90 days',
  activation_threshold float8 default 0,
  dry_run boolean default false,
  batch integer default 10000,
  tenant text default null,
  as_of timestamptz default null)
returns table (memory_id bigint, age_days float8, last_accessed_at timestamptz, best_recent_score float8, applied boolean)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  v_as_of timestamptz := coalesce(as_of, now());
  v_changed bigint := 0;
  v_examined bigint := 0;
  r record;
begin
  if retention is null or retention < interval '0' then
    perform pgmem._bad_input('retention must be a non-negative interval, e.g. ''90 days''');
  end if;
  perform pgmem._check_between(batch, 'batch', 1, 1000000);
  perform pgmem._check_unit(activation_threshold, 'activation_threshold');
  v_run := pgmem._job_begin('archive', v_tenant, jsonb_build_object('retention', retention::text,
            'activation_threshold', activation_threshold, 'dry_run', dry_run));
  if v_run is null then return; end if;
  for r in
    select m.id, pgmem.age_days(m.created_at, v_as_of) as age, m.last_accessed_at as la,
           (select max(a.score) from pgmem.accesses a where a.memory_id = m.id and a.accessed_at > v_as_of - retention) as best
      from pgmem.memories m
     where m.state = 'active' and m.created_at < v_as_of - retention and (v_tenant is null or m.tenant = v_tenant)
       and (m.last_accessed_at is null or m.last_accessed_at < v_as_of - retention
            or (activation_threshold > 0 and coalesce((select max(a.score) from pgmem.accesses a
                 where a.memory_id = m.id and a.accessed_at > v_as_of - retention), 0) < activation_threshold))
     order by m.created_at, m.id
     limit batch
  loop
    v_examined := v_examined + 1;
    memory_id := r.id; age_days := r.age; last_accessed_at := r.la; best_recent_score := r.best; applied := not dry_run;
    if not dry_run then
      perform pgmem._set_op('archive', jsonb_build_object('job', 'archive', 'retention', retention::text, 'job_run_id', v_run));
      update pgmem.memories m set state = 'archived' where m.id = r.id and m.state = 'active';
      if not found then continue; end if;
      v_changed := v_changed + 1;
    end if;
    return next;
  end loop;
  perform pgmem._set_op(null);
  perform pgmem._job_end(v_run, v_examined, v_changed, jsonb_build_object('more', v_changed >= batch));
end $$;
comment on function pgmem.archive_stale(interval, float8, boolean, integer, text, timestamptz) is
  'Shadow lifecycle: archives active memories older than retention that were not used within it (no access, or no activation score >= activation_threshold). Restorable; excluded from default search.';

-- ------------------------------------------------------------------ thresholds
create or replace function pgmem.feedback(memory_id bigint, query_id uuid, relevant boolean,
                                          context_type text default null, activated boolean default null)
returns bigint
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  a record;
  id bigint;
begin
  if relevant is null then perform pgmem._bad_input('relevant must be true or false'); end if;
  if not exists (select 1 from pgmem.memories m where m.id = feedback.memory_id and m.tenant = v_tenant) then
    raise exception 'memory % does not exist for tenant "%"', memory_id, v_tenant using errcode = 'P0002';
  end if;
  select l.context_type, l.activated, l.score into a from pgmem.activation_log l
   where l.query_id = feedback.query_id and l.memory_id = feedback.memory_id and l.tenant = v_tenant;
  if a.context_type is null and (context_type is null or activated is null) then
    perform pgmem._bad_input(format('no activation of memory %s was logged for query %s, so context_type and activated must be given',
                                    memory_id, coalesce(query_id::text, 'NULL')),
      'call pgmem.activate(..., query_id => ...) to log what was shown, or pass context_type and activated');
  end if;
  insert into pgmem.feedback (tenant, memory_id, query_id, relevant, context_type, activated, score)
  values (v_tenant, memory_id, query_id, relevant, coalesce(a.context_type, context_type),
          coalesce(a.activated, activated), a.score)
  returning feedback.id into id;
  return id;
end $$;
comment on function pgmem.feedback(bigint, uuid, boolean, text, boolean) is
  'Records whether a memory shown for a query (pgmem.activate(..., query_id)) was useful; tune_thresholds() learns from it.';

-- shadow-memory-system.md, ThresholdManager: per context type, false-positive rate > 0.2
-- raises the threshold by 0.1, else false-negative rate > 0.2 lowers it by 0.1, within [0,1].
--   false-positive rate = activated but irrelevant / activated
--   false-negative rate = relevant but not activated / relevant
-- Consistency: conversation and query are kept aligned (conversation never above query: a
-- query needs at least the confidence of chat). At least min_feedback rows are needed.
create or replace function pgmem.tune_thresholds(min_feedback integer default 10, step float8 default 0.1,
                                                 max_rate float8 default 0.2, tenant text default null)
returns table (tenant_id text, context_type text, old_value float8, new_value float8,
               false_positive_rate float8, false_negative_rate float8, feedback_count bigint)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  r record;
  v_old float8;
  v_new float8;
  v_changed bigint := 0;
  v_examined bigint := 0;
  v_prev text := current_setting('pgmem.tenant', true);
  q float8;
  c float8;
begin
  v_run := pgmem._job_begin('tune', v_tenant, jsonb_build_object('min_feedback', min_feedback, 'step', step, 'max_rate', max_rate));
  if v_run is null then return; end if;
  for r in
    select f.tenant, f.context_type, count(*) as n,
           count(*) filter (where f.activated and not f.relevant)::float8 / nullif(count(*) filter (where f.activated), 0) as fpr,
           count(*) filter (where not f.activated and f.relevant)::float8 / nullif(count(*) filter (where f.relevant), 0) as fnr
      from pgmem.feedback f
     where f.tuned_at is null and (v_tenant is null or f.tenant = v_tenant)
     group by f.tenant, f.context_type
     having count(*) >= min_feedback
     order by 1, 2
  loop
    v_examined := v_examined + r.n;
    perform set_config('pgmem.tenant', r.tenant, true);
    v_old := pgmem.context_threshold(r.context_type);
    v_new := v_old;
    if coalesce(r.fpr, 0) > max_rate then v_new := least(1.0, v_old + step);
    elsif coalesce(r.fnr, 0) > max_rate then v_new := greatest(0.0, v_old - step);
    end if;
    update pgmem.feedback f set tuned_at = now()
     where f.tenant = r.tenant and f.context_type = r.context_type and f.tuned_at is null;
    if v_new <> v_old then
      insert into pgmem.thresholds as t (tenant, context_type, threshold) values (r.tenant, r.context_type, v_new)
      on conflict (tenant, context_type) do update set threshold = excluded.threshold, updated_at = now();
      insert into pgmem.threshold_changes (tenant, context_type, old_value, new_value, false_positive_rate,
                                           false_negative_rate, feedback_count, reason, job_run_id)
      values (r.tenant, r.context_type, v_old, v_new, r.fpr, r.fnr, r.n,
              case when v_new > v_old then format('false-positive rate %s > %s', round(r.fpr::numeric, 3), max_rate)
                   else format('false-negative rate %s > %s', round(r.fnr::numeric, 3), max_rate) end, v_run);
      v_changed := v_changed + 1;
      tenant_id := r.tenant; context_type := r.context_type; old_value := v_old; new_value := v_new;
      false_positive_rate := r.fpr; false_negative_rate := r.fnr; feedback_count := r.n;
      return next;
      -- consistency: conversation <= query
      q := pgmem.context_threshold('query');
      c := pgmem.context_threshold('conversation');
      if c > q then
        insert into pgmem.thresholds as t (tenant, context_type, threshold)
        values (r.tenant, case when r.context_type = 'query' then 'conversation' else 'query' end,
                case when r.context_type = 'query' then q else c end)
        on conflict (tenant, context_type) do update set threshold = excluded.threshold, updated_at = now();
        insert into pgmem.threshold_changes (tenant, context_type, old_value, new_value, feedback_count, reason, job_run_id)
        values (r.tenant, case when r.context_type = 'query' then 'conversation' else 'query' end,
                case when r.context_type = 'query' then c else q end, case when r.context_type = 'query' then q else c end,
                r.n, 'consistency: the conversation threshold may not exceed the query threshold', v_run);
        tenant_id := r.tenant; context_type := case when r.context_type = 'query' then 'conversation' else 'query' end;
        old_value := case when r.context_type = 'query' then c else q end;
        new_value := case when r.context_type = 'query' then q else c end;
        false_positive_rate := null; false_negative_rate := null;
        v_changed := v_changed + 1;
        return next;
      end if;
    end if;
  end loop;
  perform set_config('pgmem.tenant', coalesce(v_prev, ''), true);
  perform pgmem._job_end(v_run, v_examined, v_changed);
end $$;
comment on function pgmem.tune_thresholds(integer, float8, float8, text) is
  'Shadow adaptive thresholds: per tenant and context type with at least min_feedback new feedback rows, false-positive rate > 0.2 raises the threshold by 0.1, else false-negative rate > 0.2 lowers it; bounded to [0,1]; conversation kept <= query; every change in pgmem.threshold_changes.';

-- ------------------------------------------------------------------ runs and schedules
-- (no SET search_path here: a procedure with SET clauses cannot COMMIT; every name is qualified)
create or replace procedure pgmem.run_job(job text, params jsonb default '{}', max_batches integer default 1000)
  language plpgsql
as $$
declare
  v_fn text;
  v_tenant text := coalesce(params->>'tenant', pgmem.current_tenant());
  v_key bigint;
  v_err text;
  v_more boolean;
  v_last bigint;
  i integer := 0;
  v_args text := '';
  k text;
  v jsonb;
  v_prev_tenant text := current_setting('pgmem.tenant', true);
  v_prev_path text := current_setting('search_path');
begin
  -- a procedure that commits cannot pin search_path with SET: it sets it for its run instead
  perform set_config('search_path', 'pgmem, public, pg_temp', false);
  -- {"tenant": "*"}: every tenant (what pg_cron runs), whatever the session's default tenant
  if params->>'tenant' = '*' then
    perform set_config('pgmem.tenant', '', false);
    params := params - 'tenant';
    v_tenant := null;
  end if;
  v_fn := case job when 'merge' then 'merge_duplicates' when 'prune' then 'prune' when 'archive' then 'archive_stale'
                   when 'tune' then 'tune_thresholds' when 'purge' then 'purge'
                   -- reconstructive (issue 16): the work queue (450) and reflection (460)
                   when 'work' then 'work' when 'reflect' then 'reflect'
                   when 'cluster' then 'cluster' end;  -- cluster: concept and liquid clusters (sql/470_cluster.sql)
  if v_fn is null then
    perform pgmem._bad_input(format('unknown job "%s": jobs are merge, prune, archive, tune, purge, work, reflect, cluster', job));
  end if;
  if params is null or jsonb_typeof(params) <> 'object' then
    perform pgmem._bad_input('params must be a JSON object of the job function''s arguments');
  end if;
  -- named arguments from the params object: names as identifiers, values as literals
  for k, v in select * from jsonb_each(params) loop
    if not exists (select 1 from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
                    where n.nspname = 'pgmem' and p.proname = v_fn and k = any(p.proargnames)) then
      perform pgmem._bad_input(format('job %s has no parameter "%s"', job, k));
    end if;
    v_args := v_args || format(', %I => %L', k, v #>> '{}');
  end loop;
  v_key := pgmem._job_lock_key(job || ':run', v_tenant);
  if not pg_try_advisory_lock(v_key) then
    insert into pgmem.job_runs (tenant, job, params, status, finished_at, error)
    values (v_tenant, job, params, 'skipped', clock_timestamp(), 'skipped: already running');
    commit;
    perform set_config('search_path', v_prev_path, false);
    return;
  end if;
  loop
    i := i + 1;
    v_err := null;
    begin
      if i = 1 then  -- a run starts from the beginning, wherever an earlier unfinished run stopped
        perform pgmem._job_state_reset(job, v_tenant, params);
      end if;
      execute format('select count(*) from pgmem.%I(%s)', v_fn, substr(v_args, 3));
      select r.id, coalesce((r.details->>'more')::boolean, false) into v_last, v_more
        from pgmem.job_runs r where r.job = run_job.job and r.status = 'ok' and r.tenant is not distinct from v_tenant
       order by r.id desc limit 1;
    exception when others then
      get stacked diagnostics v_err = message_text;
    end;
    if v_err is not null then
      insert into pgmem.job_runs (tenant, job, params, status, finished_at, error)
      values (v_tenant, job, params, 'failed', clock_timestamp(), v_err);
      commit;
      perform pg_advisory_unlock(v_key);
      perform set_config('pgmem.tenant', coalesce(v_prev_tenant, ''), false);
      perform set_config('search_path', v_prev_path, false);
      raise warning 'pgmem job % failed: %', job, v_err;
      return;
    end if;
    commit;
    exit when not coalesce(v_more, false) or i >= max_batches or (params->>'dry_run')::boolean is true;
  end loop;
  perform pg_advisory_unlock(v_key);
  perform set_config('pgmem.tenant', coalesce(v_prev_tenant, ''), false);
  perform set_config('search_path', v_prev_path, false);
end $$;
comment on procedure pgmem.run_job(text, jsonb, integer) is
  'Runs a job (merge, prune, archive, tune, purge) to completion in batches, committing between them (short transactions); params are the job function''s named arguments. This is what pg_cron calls.';

create or replace view pgmem.job_status as
select distinct on (r.job, r.tenant)
       r.job, r.tenant, r.id as last_run_id, r.status as last_status, r.started_at as last_started_at,
       r.finished_at as last_finished_at, extract(epoch from (r.finished_at - r.started_at)) as last_duration_s,
       r.examined as last_examined, r.changed as last_changed, r.error as last_error,
       (select count(*) from pgmem.job_runs f where f.job = r.job and f.tenant is not distinct from r.tenant
           and f.status = 'failed' and f.started_at > now() - interval '7 days') as failures_7d,
       (select count(*) from pgmem.job_runs f where f.job = r.job and f.tenant is not distinct from r.tenant
           and f.started_at > now() - interval '7 days') as runs_7d
  from pgmem.job_runs r
 where r.status <> 'skipped' and (r.tenant = pgmem.current_tenant() or pgmem._is_admin())
 order by r.job, r.tenant, r.id desc;
comment on view pgmem.job_status is 'The latest run of each job (per tenant; NULL = all tenants): status, duration, counts, error, and failures in the last 7 days.';

-- cron.database_name is readable by superusers (and pg_read_all_settings) only
create or replace function pgmem._cron_database() returns text
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
as $$
begin
  return current_setting('cron.database_name', true);
exception when insufficient_privilege then
  return 'unknown to this role';
end $$;

create or replace function pgmem.job_schedule_commands(
  merge text default '0 * * * *', prune text default '15 3 * * *', archive text default '30 3 * * *',
  tune text default '45 3 * * *', purge text default null, database text default null)
returns table (job_name text, schedule text, command text, database_name text)
  language sql stable
  set search_path = pgmem, public, pg_temp
as $$
  select format('pgmem-%s-%s', j.job, coalesce(database, current_database())), j.sched,
         format('CALL pgmem.run_job(%L, ''{"tenant": "*"}'')', j.job), coalesce(database, current_database())
    from (values ('merge', merge), ('prune', prune), ('archive', archive), ('tune', tune), ('purge', purge)) j(job, sched)
   where j.sched is not null
$$;
comment on function pgmem.job_schedule_commands(text, text, text, text, text, text) is
  'The pg_cron entries pgmem installs (name, schedule, command, database): run them with cron.schedule_in_database() in the database pg_cron lives in when that is another one.';

create or replace function pgmem.schedule_jobs(
  merge text default '0 * * * *', prune text default '15 3 * * *', archive text default '30 3 * * *',
  tune text default '45 3 * * *', purge text default null)
returns table (job_name text, schedule text, command text, jobid bigint)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare r record;
begin
  if to_regnamespace('cron') is null then
    raise exception 'pg_cron is not installed in database "%" (it lives in the database named by cron.database_name: "%")',
      current_database(), coalesce(pgmem._cron_database(), 'unset')
      using errcode = '55000',
            hint = 'in that database run the commands of: select * from pgmem.job_schedule_commands() with cron.schedule_in_database(job_name, schedule, command, database_name); `pgmem jobs schedule` does it for you';
  end if;
  for r in select * from pgmem.job_schedule_commands(merge, prune, archive, tune, purge) loop
    job_name := r.job_name; schedule := r.schedule; command := r.command;
    execute 'select cron.schedule_in_database($1, $2, $3, $4)' into jobid using r.job_name, r.schedule, r.command, r.database_name;
    return next;
  end loop;
end $$;
comment on function pgmem.schedule_jobs(text, text, text, text, text) is
  'Installs pg_cron schedules for pgmem''s jobs in this database (defaults: merge hourly, prune, archive and tune nightly; purge off). Pass NULL to leave one out. Needs pg_cron in this database.';

create or replace function pgmem.unschedule_jobs() returns integer
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare n integer := 0; j bigint;
begin
  if to_regnamespace('cron') is null then
    raise exception 'pg_cron is not installed in database "%"', current_database() using errcode = '55000',
      hint = 'unschedule from the pg_cron database: select cron.unschedule(jobid) from cron.job where jobname like ''pgmem-%''';
  end if;
  for j in execute 'select jobid from cron.job where jobname like ''pgmem-%'' and database = current_database()' loop
    execute 'select cron.unschedule($1)' using j;
    n := n + 1;
  end loop;
  return n;
end $$;
comment on function pgmem.unschedule_jobs() is 'Removes every pg_cron schedule pgmem installed for this database; returns how many.';
