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
  set search_path = pgmem, public, pg_temp
as $$
declare v_links jsonb;
begin
  -- the merged memory's links, as they were: unmerge puts them back
  select coalesce(jsonb_agg(to_jsonb(l)), '[]') into v_links
    from pgmem.links l where l.tenant = gone.tenant and (l.src_id = gone.id or l.dst_id = gone.id);
  perform pgmem._set_op('merge', jsonb_build_object('role', 'merged', 'survivor_id', keep.id,
    'similarity', round(p_similarity::numeric, 6), 'method', p_method, 'links', v_links,
    'access_count_added', gone.access_count) || coalesce(p_details, '{}'));
  update pgmem.memories set state = 'merged', merged_into = keep.id where id = gone.id and tenant = gone.tenant;
  -- memories merged into the loser before now point at the survivor
  update pgmem.memories set merged_into = keep.id where merged_into = gone.id and id <> gone.id and tenant = gone.tenant;
  perform pgmem._set_op('merge', jsonb_build_object('role', 'survivor', 'merged_id', gone.id,
    'similarity', round(p_similarity::numeric, 6), 'method', p_method,
    'access_count_added', gone.access_count) || coalesce(p_details, '{}'));
  update pgmem.memories set access_count = access_count + gone.access_count,
         merged_from = merged_from || gone.id || gone.merged_from,
         last_accessed_at = greatest(last_accessed_at, gone.last_accessed_at)
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
  v_text_cursor record;
  v_horizon timestamptz;
  v_survivor_of jsonb := '{}';  -- dry run: merged id -> survivor id, as the real run would do
  v_more boolean;
  v_text_pool integer := greatest(1, pgmem._setting_num('merge_text_candidates', 200))::integer;
  -- where this call starts: the incremental cursors, or those of the full scan under way
  v_cursor_job text := case when full_scan then 'merge_full' else 'merge' end;
  v_text_cursor_job text := case when full_scan then 'merge_full_text' else 'merge_text' end;
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
      perform pgmem._merge_pair(keep, gone, p.sim, p.method, jsonb_build_object('job_run_id', v_run));
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

