-- Duplicate merge (engram.md, Deduplication & Merging) and its undo, unmerge.

-- One merge (engram.md, Merge Example): gone joins keep. Keep's access count grows by gone's,
-- merged_from records gone (and what had been merged into it), memories merged into gone
-- before now point at keep, gone's links move to keep (weights add up) and a 'merged' link
-- ties gone to keep. History: gone's row (role merged, with its links as they were, for
-- unmerge) and keep's (role survivor). Both rows must be locked by the caller.
create or replace function pgmem._merge_pair(keep pgmem.memories, gone pgmem.memories, p_similarity float8,
                                             p_method text, p_details jsonb default '{}')
returns void
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_links jsonb;
begin
  -- the merged memory's links, as they were: unmerge puts them back
  select coalesce(jsonb_agg(to_jsonb(l)), '[]') into v_links
    from pgmem.links l where l.tenant = gone.tenant and (l.src_id = gone.id or l.dst_id = gone.id);
  perform pgmem._set_op('merge', jsonb_build_object('role', 'merged', 'survivor_id', keep.id,
    'similarity', round(p_similarity::numeric, 6), 'method', p_method, 'links', v_links,
    'access_count_added', gone.access_count) || coalesce(p_details, '{}'));
  update pgmem.memories set state = 'merged', merged_into = keep.id, state_changed_at = now(), updated_at = now()
   where id = gone.id and tenant = gone.tenant;
  -- memories merged into the loser before now point at the survivor
  update pgmem.memories set merged_into = keep.id, updated_at = now() where merged_into = gone.id and id <> gone.id and tenant = gone.tenant;
  perform pgmem._set_op('merge', jsonb_build_object('role', 'survivor', 'merged_id', gone.id,
    'similarity', round(p_similarity::numeric, 6), 'method', p_method,
    'access_count_added', gone.access_count) || coalesce(p_details, '{}'));
  update pgmem.memories set access_count = access_count + gone.access_count,
         merged_from = merged_from || gone.id || gone.merged_from,
         last_accessed_at = greatest(last_accessed_at, gone.last_accessed_at), updated_at = now()
   where id = keep.id and tenant = keep.tenant;
  perform pgmem._set_op(null);
  -- re-point the links of the merged memory to the survivor (weights add up)
  insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, count, metadata)
  select x.tenant, case when x.src_id = gone.id then keep.id else x.src_id end,
         case when x.dst_id = gone.id then keep.id else x.dst_id end, x.kind, x.weight, x.count,
         x.metadata || jsonb_build_object('via_merge', gone.id)
    from pgmem.links x
   where x.tenant = gone.tenant and (x.src_id = gone.id or x.dst_id = gone.id)
     and (case when x.src_id = gone.id then keep.id else x.src_id end) <> (case when x.dst_id = gone.id then keep.id else x.dst_id end)
  on conflict on constraint links_pkey do update set weight = l.weight + excluded.weight, count = l.count + excluded.count, updated_at = now();
  delete from pgmem.links x where x.tenant = gone.tenant and (x.src_id = gone.id or x.dst_id = gone.id);
  insert into pgmem.links (tenant, src_id, dst_id, kind, weight) values (gone.tenant, gone.id, keep.id, 'merged', p_similarity)
  on conflict do nothing;
end $$;
comment on function pgmem._merge_pair(pgmem.memories, pgmem.memories, float8, text, jsonb) is
  'Merges memory gone into memory keep (state merged, access counts added, merged_from, links moved), with history for both; undone by pgmem.unmerge. Internal to merge_duplicates and complete_embedding.';

-- ------------------------------------------------------------------ merge
-- engram.md, Deduplication & Merging: pairs with similarity >= threshold (cosine with
-- embeddings, Jaccard of tokens without), same category unless >= the cross-category
-- threshold (0.95); keep the more important memory, sum access counts, record merged_from.
-- Candidates: each memory embedded since the last run looks up its nearest neighbours in
-- the HNSW index (same tenant and user, active); memories without an embedding use the
-- lexical index and Jaccard. Incremental by default (issue 23): each tenant has its own
-- cursors ('merge', 'merge_text' in job_state, for that tenant), which a run for one tenant and
-- a run for every tenant both move, so each memory is examined once. A run for every tenant
-- takes the tenants round robin, at most merge_tenant_budget memories of each per run
-- (issue 27, M2): a flood of one tenant's near-duplicates waits for the next runs instead of
-- holding the run. A pair whose memories (or links) another transaction holds longer than
-- merge_lock_timeout_ms is skipped and counted in job_runs.details ('skipped_locked'): one
-- tenant's row locks on its own memories never stall the others (issue 27, M1); its memories
-- are examined again by the next run. full_scan => true examines every active memory instead (the
-- design's "for each pair of memories"), in keyset pages by (embedded_at, id) and
-- (created_at, id) like the incremental run, but with cursors of its own ('merge_full',
-- 'merge_full_text' in job_state) that live for one run: each call goes on from where the
-- previous one stopped, and the call that reaches the end deletes them, so the next full
-- scan starts from the beginning (run_job also resets them before its first batch).
-- Pairs are applied strongest first; each side is resolved to its current survivor, so
-- chains (A~B, B~C) end with one survivor, chosen by importance, then by the lower id: the
-- result does not depend on the order memories were processed.
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'merge_tenant_budget', '5000', 'merge_duplicates for every tenant: at most this many memories of one tenant examined per run (the rest waits for the next run: a flood of near-duplicates cannot hold the hourly merge)'),
  ('*', 'merge_lock_timeout_ms', '200', 'merge_duplicates: how long a merge waits for a row another transaction holds before it skips the pair (recorded in job_runs.details; the next run retries it)')
on conflict (tenant, key) do nothing;

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
  set search_path = pgmem, pg_catalog, pg_temp
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
  v_text_cursor record;
  v_horizon timestamptz;
  v_survivor_of jsonb := '{}';  -- dry run: merged id -> survivor id, as the real run would do
  v_more boolean;
  v_text_pool integer := greatest(1, pgmem._setting_num('merge_text_candidates', 200))::integer;
  v_budget bigint := case when v_tenant is null then greatest(1, pgmem._setting_num('merge_tenant_budget', 5000))::bigint
                          else null end;  -- per tenant and run, in a run for every tenant
  v_lock_timeout text := greatest(1, pgmem._setting_num('merge_lock_timeout_ms', 200))::bigint::text;
  v_prev_lock_timeout text := current_setting('lock_timeout');
  v_skipped bigint[] := '{}'::bigint[];  -- pairs left because another transaction holds a row
  v_deferred jsonb := '{}'::jsonb;  -- tenants over their budget this run -> memories left waiting
  v_err text;
begin
  perform pgmem._check_args('merge_duplicates', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  perform pgmem._check_unit(threshold, 'threshold'), pgmem._check_unit(cross_category_threshold, 'cross_category_threshold');
  perform pgmem._check_between(batch, 'batch', 1, 100000);
  v_run := pgmem._job_begin('merge', v_tenant, v_params);
  if v_run is null then
    raise notice 'pgmem: merge is already running for %; skipped', coalesce(v_tenant, 'all tenants');
    return;
  end if;
  perform set_config('hnsw.ef_search', greatest(40, neighbours * 4)::text, true);

  create temp table if not exists _pgmem_pairs (a bigint, b bigint, sim float8, same_cat boolean, method text) on commit drop;
  truncate _pgmem_pairs;
  create temp table if not exists _pgmem_batch (id bigint, tenant text, at timestamptz, kind text) on commit drop;
  truncate _pgmem_batch;

  -- Only rows older than the oldest transaction still open: a memory written by a
  -- transaction that started earlier but commits later must not fall behind the cursor.
  select least(now(), min(sa.xact_start)) into v_horizon from pg_stat_activity sa
   where sa.datname = current_database() and sa.pid <> pg_backend_pid() and sa.xact_start is not null
     and sa.backend_type <> 'autovacuum worker';  -- (a vacuum writes no memory)
  v_horizon := coalesce(v_horizon, now());

  if full_scan then
    -- a full scan: every active memory, in keyset pages of the scope's own cursors, which start
    -- at the beginning
    select cursor_at, cursor_id into v_cursor from pgmem.job_state s
     where s.tenant = coalesce(v_tenant, '*') and s.job = 'merge_full';
    select cursor_at, cursor_id into v_text_cursor from pgmem.job_state s
     where s.tenant = coalesce(v_tenant, '*') and s.job = 'merge_full_text';
    insert into _pgmem_batch
    select m.id, m.tenant, m.embedded_at, 'embedded' from pgmem.memories m
     where m.embedding is not null and m.state = 'active' and (v_tenant is null or m.tenant = v_tenant)
       and (v_cursor.cursor_at is null or (m.embedded_at, m.id) > (v_cursor.cursor_at, v_cursor.cursor_id))
       and m.embedded_at < v_horizon
     order by m.embedded_at, m.id limit batch;
    insert into _pgmem_batch
    select m.id, m.tenant, m.created_at, 'text' from pgmem.memories m
     where m.embedding is null and m.state = 'active' and (v_tenant is null or m.tenant = v_tenant)
       and (v_text_cursor.cursor_at is null or (m.created_at, m.id) > (v_text_cursor.cursor_at, v_text_cursor.cursor_id))
       and m.created_at < v_horizon
     order by m.created_at, m.id limit batch;
    v_more := (select count(*) from _pgmem_batch where kind = 'embedded') >= batch
              or (select count(*) from _pgmem_batch where kind = 'text') >= batch;
  else
    -- incremental: each tenant's memories embedded since its cursor, then those still without
    -- an embedding created since its text cursor; the tenants round robin (the first of each,
    -- then the second of each, ...), each at most its budget left in this run
    if v_budget is not null then  -- the budgets used by this run (a run is at most an hour old)
      delete from pgmem.job_state s where s.job = 'merge:used' and s.cursor_at < now() - interval '1 hour';
    end if;
    with recursive tenants as (  -- (a loose scan of memories_tenant_embedded: one probe per tenant)
      (select m.tenant from pgmem.memories m
        where m.embedding is not null and m.state = 'active' and (v_tenant is null or m.tenant = v_tenant)
        order by m.tenant limit 1)
      union all
      select (select m.tenant from pgmem.memories m
               where m.embedding is not null and m.state = 'active' and m.tenant > t.tenant
                 and (v_tenant is null or m.tenant = v_tenant)
               order by m.tenant limit 1)
        from tenants t where t.tenant is not null),
    work as (  -- each tenant's cursor and what it may still examine in this run
      select t.tenant, c.cursor_at, c.cursor_id,
             least(batch::bigint, coalesce(v_budget - coalesce(u.cursor_id, 0), batch)) as room
        from tenants t
        left join pgmem.job_state c on c.tenant = t.tenant and c.job = 'merge'
        left join pgmem.job_state u on u.tenant = t.tenant and u.job = 'merge:used' and v_budget is not null
       where t.tenant is not null),
    pending as (
      select w.*, count(*) over () as n from work w
       where w.room > 0
         and exists (select 1 from pgmem.memories m
                      where m.tenant = w.tenant and m.embedding is not null and m.state = 'active'
                        and (w.cursor_at is null or (m.embedded_at, m.id) > (w.cursor_at, w.cursor_id))
                        and m.embedded_at < v_horizon))
    insert into _pgmem_batch
    select x.id, x.tenant, x.embedded_at, 'embedded'
      from (select c.id, c.tenant, c.embedded_at, row_number() over (partition by c.tenant order by c.embedded_at, c.id) as rn
              from pending w
             cross join lateral (
                   select m.id, m.tenant, m.embedded_at from pgmem.memories m
                    where m.tenant = w.tenant and m.embedding is not null and m.state = 'active'
                      and (w.cursor_at is null or (m.embedded_at, m.id) > (w.cursor_at, w.cursor_id))
                      and m.embedded_at < v_horizon
                    order by m.embedded_at, m.id
                    limit least(w.room, greatest(ceil(batch::float8 / w.n)::bigint, 16))) c) x
     order by x.rn, x.embedded_at, x.id
     limit batch;
    -- without an embedding (few: they wait for the worker), from the same budgets
    insert into _pgmem_batch
    select x.id, x.tenant, x.created_at, 'text'
      from (select m.id, m.tenant, m.created_at,
                   row_number() over (partition by m.tenant order by m.created_at, m.id) as rn,
                   least(batch::bigint, coalesce(v_budget - coalesce(u.cursor_id, 0), batch))
                   - coalesce((select count(*) from _pgmem_batch bt where bt.tenant = m.tenant), 0) as room
              from pgmem.memories m
              left join pgmem.job_state c on c.tenant = m.tenant and c.job = 'merge_text'
              left join pgmem.job_state u on u.tenant = m.tenant and u.job = 'merge:used' and v_budget is not null
             where m.embedding is null and m.state = 'active' and (v_tenant is null or m.tenant = v_tenant)
               and (c.cursor_at is null or (m.created_at, m.id) > (c.cursor_at, c.cursor_id))
               and m.created_at < v_horizon) x
     where x.rn <= x.room
     order by x.rn, x.created_at, x.id
     limit batch;
    -- more: the batch is full, or a tenant with budget left has more than this batch took of it;
    -- deferred: the tenants this batch brought to their budget with memories still waiting
    -- (counted up to 10,000)
    with last as (
      select distinct on (bt.tenant) bt.tenant, bt.at, bt.id from _pgmem_batch bt where bt.kind = 'embedded'
       order by bt.tenant, bt.at desc, bt.id desc),
    took as (select bt.tenant, count(*) as n from _pgmem_batch bt group by bt.tenant),
    t as (
      select l.tenant, k.n, coalesce(u.cursor_id, 0) + k.n as used,
             (select count(*) from (select 1 from pgmem.memories m
                                     where m.tenant = l.tenant and m.embedding is not null and m.state = 'active'
                                       and m.embedded_at < v_horizon and (m.embedded_at, m.id) > (l.at, l.id)
                                     limit 10000) w) as waiting
        from last l join took k on k.tenant = l.tenant
        left join pgmem.job_state u on u.tenant = l.tenant and u.job = 'merge:used' and v_budget is not null)
    select (select count(*) from _pgmem_batch where kind = 'embedded') >= batch
           or (select count(*) from _pgmem_batch where kind = 'text') >= batch
           or coalesce(bool_or(t.waiting > 0 and (v_budget is null or t.used < v_budget)), false),
           coalesce(jsonb_object_agg(t.tenant, t.waiting) filter (where v_budget is not null and t.used >= v_budget
                                                                  and t.waiting > 0), '{}')
      into v_more, v_deferred
      from t;
  end if;
  select count(*) into v_examined from _pgmem_batch;

  -- candidate pairs from the indexes
  insert into _pgmem_pairs
  select least(x.id, n.id), greatest(x.id, n.id), n.sim, x.category = n.category, 'cosine'
    from _pgmem_batch bt join pgmem.memories x on x.id = bt.id and bt.kind = 'embedded'
    cross join lateral (
      select y.id, 1 - nb.distance as sim, y.category
        from pgmem._neighbours(x.tenant, x.embedding, neighbours + 1, coalesce(x.user_id, '')) nb
        join pgmem.memories y on y.id = nb.id and y.tenant = x.tenant
       where y.id <> x.id) n
   where n.sim >= threshold and (x.category = n.category or n.sim >= cross_category_threshold);
  insert into _pgmem_pairs
  select least(x.id, n.id), greatest(x.id, n.id), n.sim, x.category = n.category, 'jaccard'
    from _pgmem_batch bt join pgmem.memories x on x.id = bt.id and bt.kind = 'text'
    cross join lateral (
      -- the memories sharing a word with x, most shared words first (ts_rank of x's OR-ed
      -- lexemes), at most merge_text_candidates of them: a pair at Jaccard >= threshold shares
      -- most of its words, so it ranks among the first (issue 14: an unordered `limit 50`
      -- missed it behind 50 memories sharing one common word)
      select c.id, pgmem.jaccard(pgmem.tokens(x.content), pgmem.tokens(c.content)) as sim, c.category
        from (select y.id, y.content, y.category from pgmem.memories y
               where y.tenant = x.tenant and coalesce(y.user_id, '') = coalesce(x.user_id, '') and y.state = 'active'
                 and y.id <> x.id and y.tsv @@ pgmem.query_tsquery(x.content)
               order by ts_rank(y.tsv, pgmem.query_tsquery(x.content)) desc, y.id
               limit v_text_pool) c) n
   where n.sim >= threshold and (x.category = n.category or n.sim >= cross_category_threshold);

  -- a row another transaction holds (a tenant's own SELECT ... FOR UPDATE, a long UPDATE) is
  -- waited for at most merge_lock_timeout_ms: then the pair is left for the next run
  if not dry_run then
    perform set_config('lock_timeout', v_lock_timeout, true);
  end if;
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
      -- lock both in id order, then look again: a concurrent forget/merge may have won; the
      -- merge itself in a subtransaction, so that a row held too long skips this pair only
      begin
        perform 1 from pgmem.memories where id in (a.id, b.id) order by id for update;
        select * into a from pgmem.memories where id = a.id;
        select * into b from pgmem.memories where id = b.id;
        if a.state <> 'active' or b.state <> 'active' then continue; end if;
        if a.importance > b.importance or (a.importance = b.importance and a.id < b.id) then keep := a; gone := b;
        else keep := b; gone := a; end if;
        perform pgmem._merge_pair(keep, gone, p.sim, p.method, jsonb_build_object('job_run_id', v_run));
      exception when lock_not_available then
        v_skipped := v_skipped || array[p.a, p.b];
        continue;
      end;
      v_changed := v_changed + 1;
    else
      if a.importance > b.importance or (a.importance = b.importance and a.id < b.id) then keep := a; gone := b;
      else keep := b; gone := a; end if;
      v_survivor_of := (select coalesce(jsonb_object_agg(k, case when v::text::bigint = gone.id then to_jsonb(keep.id) else v end), '{}')
                          from jsonb_each(v_survivor_of) e(k, v))
                       || jsonb_build_object(gone.id::text, keep.id);
    end if;
    survivor_id := keep.id; merged_id := gone.id; similarity := p.sim; same_category := p.same_cat;
    method := p.method; applied := not dry_run;
    return next;
  end loop;
  if not dry_run then
    perform set_config('lock_timeout', v_prev_lock_timeout, true);
  end if;

  if not dry_run and full_scan then
    if not v_more then
      -- the full scan has seen every memory: the next one starts from the beginning
      perform pgmem._job_state_reset('merge', v_tenant, '{"full_scan": true}');
    else
      select max(bt.at), (array_agg(bt.id order by bt.at desc, bt.id desc))[1] into v_last_at, v_last_id
        from _pgmem_batch bt where bt.kind = 'embedded';
      if v_last_at is not null then
        perform pgmem._job_state_save(coalesce(v_tenant, '*'), 'merge_full', v_last_at, v_last_id);
      end if;
      select max(bt.at), (array_agg(bt.id order by bt.at desc, bt.id desc))[1] into v_last_at, v_last_id
        from _pgmem_batch bt where bt.kind = 'text';
      if v_last_at is not null then
        perform pgmem._job_state_save(coalesce(v_tenant, '*'), 'merge_full_text', v_last_at, v_last_id);
      end if;
    end if;
  elsif not dry_run then
    -- each tenant's cursors go to the last memory of it this batch examined; a pair skipped for
    -- a lock puts its memories' tenant back before them, so that the next run examines them again
    insert into pgmem.job_state as s (tenant, job, cursor_at, cursor_id)
    select c.tenant, c.job, c.at, c.id
      from (select distinct on (bt.tenant, bt.kind) bt.tenant,
                   case bt.kind when 'embedded' then 'merge' else 'merge_text' end as job, bt.at, bt.id
              from _pgmem_batch bt
             where not exists (select 1 from unnest(v_skipped) k(id) where k.id = bt.id)
             order by bt.tenant, bt.kind, bt.at desc, bt.id desc) c
     where not exists (  -- a skipped memory of the tenant before this one: stay before it
             select 1 from _pgmem_batch sk join unnest(v_skipped) k(id) on k.id = sk.id
              where sk.tenant = c.tenant and case sk.kind when 'embedded' then 'merge' else 'merge_text' end = c.job
                and (sk.at, sk.id) < (c.at, c.id))
    on conflict (tenant, job) do update set cursor_at = excluded.cursor_at, cursor_id = excluded.cursor_id, updated_at = now();
    insert into pgmem.job_state as s (tenant, job, cursor_at, cursor_id)
    select c.tenant, c.job, c.at, c.id
      from (select distinct on (bt.tenant, bt.kind) bt.tenant,
                   case bt.kind when 'embedded' then 'merge' else 'merge_text' end as job, bt.at, bt.id
              from _pgmem_batch bt join unnest(v_skipped) k(id) on k.id = bt.id
             order by bt.tenant, bt.kind, bt.at, bt.id) f
     cross join lateral (  -- just before the first skipped one: the memory examined before it, or the old cursor
           select f.tenant, f.job, coalesce(pv.at, old.cursor_at) as at, coalesce(pv.id, old.cursor_id) as id
             from (select 1) one
             left join lateral (select bt.at, bt.id from _pgmem_batch bt
                                 where bt.tenant = f.tenant and case bt.kind when 'embedded' then 'merge' else 'merge_text' end = f.job
                                   and (bt.at, bt.id) < (f.at, f.id)
                                 order by bt.at desc, bt.id desc limit 1) pv on true
             left join pgmem.job_state old on old.tenant = f.tenant and old.job = f.job) c
     where c.at is not null
    on conflict (tenant, job) do update set cursor_at = excluded.cursor_at, cursor_id = excluded.cursor_id, updated_at = now();
    if v_budget is not null then
      if v_more then  -- what each tenant examined so far in this run
        insert into pgmem.job_state as s (tenant, job, cursor_at, cursor_id)
        select bt.tenant, 'merge:used', now(), count(*) from _pgmem_batch bt group by bt.tenant
        on conflict (tenant, job) do update set cursor_id = s.cursor_id + excluded.cursor_id, updated_at = now();
      else  -- the run is over: the next one starts with every budget whole
        delete from pgmem.job_state s where s.job = 'merge:used';
      end if;
    end if;
  end if;
  perform pgmem._job_end(v_run, v_examined, v_changed,
    jsonb_build_object('more', v_more, 'pairs', (select count(*) from _pgmem_pairs))
    || case when cardinality(v_skipped) > 0
            then jsonb_build_object('skipped_locked', cardinality(v_skipped) / 2, 'skipped_pairs', to_jsonb(v_skipped))
            else '{}' end
    || case when v_deferred <> '{}' then jsonb_build_object('deferred', v_deferred) else '{}' end
    || case when v_tenant is null and not full_scan
            then jsonb_build_object('tenants', (select coalesce(jsonb_object_agg(t.tenant, t.n), '{}')
                                                  from (select bt.tenant, count(*) as n from _pgmem_batch bt
                                                         group by bt.tenant) t))
            else '{}' end);
end $$;
comment on function pgmem.merge_duplicates(float8, float8, boolean, integer, text, integer, boolean) is
  'Engram duplicate merge for one batch of memories embedded since the last run (full_scan => true: the next batch of all memories, going on from where the previous full-scan call stopped until it has seen them all): pairs from the HNSW index at cosine >= threshold (Jaccard without embeddings), same category unless >= cross_category_threshold; the more important memory survives, access counts add up, merged_from is recorded, links are re-pointed; dry_run lists the pairs. Undo with pgmem.unmerge.';

create or replace function pgmem.unmerge(memory_id bigint) returns pgmem.memories
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
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

