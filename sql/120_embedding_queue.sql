-- The embedding queue: memories written without an embedding (plain INSERT, remember()
-- without a vector, a content change) wait here until a worker embeds them.
--
-- Protocol (one transaction per batch; see python/pgmem/worker.py):
--   begin; select * from pgmem.claim_embeddings(64);  -- rows locked FOR UPDATE SKIP LOCKED
--   ... compute embeddings outside the database ...
--   select pgmem.complete_embedding(id, vec, model) ...; commit;
-- A worker that dies mid-batch rolls back: nothing half-written, locks released, and the
-- rows are taken by the next worker.

-- (pgmem._is_admin(): sql/005_tenancy.sql)
-- The three queue functions are SECURITY DEFINER (sql/900_security.sql, rule 3): the queue is
-- written by pgmem only, so pgmem_app holds no write privilege on it (a DELETE privilege would
-- also let it LOCK the table for every tenant); each statement filters on the caller's tenant,
-- or on every tenant for a pgmem_admin login (_is_admin() looks at the login, not the owner).

create or replace function pgmem.claim_embeddings(batch integer default 64, all_tenants boolean default false)
returns table (memory_id bigint, tenant text, content text, who text, what text, location text, why text,
               how text, attempts integer)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text;
begin
  perform pgmem._check_between(batch, 'batch', 1, 10000);
  if all_tenants and not pgmem._is_admin() then
    raise exception 'claim_embeddings(all_tenants => true) needs the pgmem_admin role' using errcode = '42501';
  end if;
  -- resolved here, not in the query: a cached generic plan would evaluate it even when all_tenants
  v_tenant := case when all_tenants then null else pgmem._require_tenant() end;
  return query
  with q as (
    select e.memory_id from pgmem.embedding_queue e
     where e.not_before <= now()
       and (v_tenant is null or e.tenant = v_tenant)
     order by e.queued_at, e.memory_id
     limit batch
     for update skip locked)
  select m.id, m.tenant, m.content, m.who, m.what, m.location, m.why, m.how, e.attempts
    from q join pgmem.embedding_queue e using (memory_id) join pgmem.memories m on m.id = q.memory_id
   order by e.queued_at, m.id;
  -- (deleted memories stay queued: a restore brings them back, and then they need a vector)
end $$;
comment on function pgmem.claim_embeddings(integer, boolean) is
  'Takes up to batch queued memories for embedding, locked (FOR UPDATE SKIP LOCKED) until the caller''s transaction ends. all_tenants needs pgmem_admin.';

-- Stores the embedding, completes the write-time fields that needed it (semantic novelty,
-- surprise, importance when it was derived from surprise, salience novelty) and dequeues.
create or replace function pgmem.complete_embedding(memory_id bigint, embedding public.vector, model text default null)
returns pgmem.memories
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  m pgmem.memories;
  near pgmem.memories;
  v_sim float8;
  v_sem float8;
  v_w jsonb;
  v_surprise float8;
  v_threshold float8;
  v_gate jsonb;
  v_new_numbers text[];
  v_prev_tenant text := current_setting('pgmem.tenant', true);
begin
  perform pgmem._check_args('complete_embedding', jsonb_build_object('model', model));  -- sizes first (issue 27)
  select * into m from pgmem.memories x where x.id = memory_id
     and (x.tenant = pgmem.current_tenant() or pgmem._is_admin());
  if m.id is null then
    -- purged meanwhile (or not visible to this caller): drop only a queue row the caller may see
    delete from pgmem.embedding_queue e where e.memory_id = complete_embedding.memory_id
       and (e.tenant = pgmem.current_tenant() or pgmem._is_admin());
    return null;
  end if;
  perform set_config('pgmem.tenant', m.tenant, true);
  embedding := pgmem._check_embedding(embedding);
  -- the nearest memory of its user that existed when it was written (as the gate would have seen it)
  select x.* into near from pgmem._neighbours(m.tenant, embedding, 20, coalesce(m.user_id, '')) nb
    join pgmem.memories x on x.id = nb.id and x.tenant = m.tenant
   where x.id <> m.id and x.created_at <= m.created_at
   order by nb.distance, nb.id limit 1;
  if near.id is not null then
    v_sim := pgmem.cosine_sim(near.embedding, embedding);
  end if;
  v_sem := 1.0 - coalesce(v_sim, 0.0);
  v_gate := m.gate;
  if v_gate ? 'keyword_novelty' and v_gate ? 'rarity' and v_gate->>'rarity' is not null then
    v_w := pgmem._setting('surprise_weights');
    v_surprise := greatest(0.0, least(1.0, (v_w->>'semantic')::float8 * v_sem
      + (v_w->>'keyword')::float8 * (v_gate->>'keyword_novelty')::float8 + (v_w->>'rarity')::float8 * (v_gate->>'rarity')::float8));
    v_gate := v_gate || jsonb_build_object('semantic_novelty', round(v_sem::numeric, 6), 'surprise', round(v_surprise::numeric, 6),
                                           'with_embedding', true, 'completed_by_worker', true, 'novelty', v_sem);
    -- The surprise gate, late (issue 14): remember() without an embedding gated the memory on
    -- its words alone. With its vector the verdict is taken again, as remember() would have
    -- taken it: below the threshold (and neither forced at write nor bringing new numbers),
    -- the memory is a near-duplicate of its nearest memory and is merged into it below
    -- (pgmem.unmerge splits it out again); else it stays. The verdict is in the gate
    -- (late_decision) and in history.
    v_threshold := pgmem._setting_num('surprise_threshold', 0.15);
    if v_surprise < v_threshold and near.id is not null
       and not coalesce((v_gate->>'forced')::boolean, false) and not v_gate ? 'kept_because' then
      select array(select t from unnest(pgmem.tokens(m.content)) t where t ~ '[0-9]'
                   except select t from unnest(pgmem.tokens(near.content)) t) into v_new_numbers;
    end if;
    v_gate := v_gate || case
      when v_threshold is null or v_new_numbers is null then jsonb_build_object('late_decision', 'stored')
      when cardinality(v_new_numbers) > 0 then jsonb_build_object('late_decision', 'stored',
                                                'kept_because', 'new numbers: ' || array_to_string(v_new_numbers, ' '))
      else jsonb_build_object('late_decision', 'merged', 'nearest_id', near.id, 'nearest_similarity', round(v_sim::numeric, 6),
                              'reason', format('surprise %s with its embedding is below the threshold %s',
                                               round(v_surprise::numeric, 4), v_threshold)) end;
  end if;
  perform pgmem._set_op('embed', jsonb_build_object('model', model, 'semantic_novelty', v_sem));
  update pgmem.memories x set
    embedding = complete_embedding.embedding, embedding_model = model, gate = v_gate,
    surprise = coalesce(v_surprise, x.surprise),
    importance = case when v_surprise is not null and v_gate->>'importance_source' = 'surprise'
                      then least(1.0, v_surprise * pgmem._check_category(x.category)) else x.importance end,
    salience = case when v_surprise is not null
                    then pgmem.salience((v_gate->>'emotion')::float8, v_sem, null,
                           pgmem.processing_depth(x.who, x.what, x.happened_at, x.location, x.why, x.how),
                           pgmem._setting('salience_weights'))
                    else x.salience end
  where x.id = m.id
  returning x.* into m;
  perform pgmem._set_op(null);
  delete from pgmem.embedding_queue e where e.memory_id = m.id;
  if v_gate->>'late_decision' = 'merged' then
    -- lock both in id order, as the merge job does, and look again
    perform 1 from pgmem.memories x where x.id in (m.id, near.id) order by x.id for update;
    select * into near from pgmem.memories x where x.id = near.id;
    select * into m from pgmem.memories x where x.id = m.id;
    if near.state = 'active' and m.state = 'active' then
      perform pgmem._merge_pair(near, m, v_sim, 'late_gate',
                                jsonb_build_object('reason', 'the surprise gate, taken again with the embedding'));
      select * into m from pgmem.memories x where x.id = m.id;
    end if;
  end if;
  perform set_config('pgmem.tenant', coalesce(v_prev_tenant, ''), true);
  return m;
end $$;
comment on function pgmem.complete_embedding(bigint, vector, text) is
  'Stores a worker-computed embedding for a queued memory, completes its surprise/novelty/salience, and removes it from the queue. The surprise gate is taken again with the vector: a memory now below the threshold (not forced, no new numbers) is merged into its nearest memory (pgmem.unmerge undoes it).';

create or replace function pgmem.fail_embedding(memory_id bigint, error text) returns void
  language sql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  update pgmem.embedding_queue e
     set attempts = e.attempts + 1, last_error = left(error, 2000),
         not_before = now() + least(interval '1 hour', interval '10 seconds' * power(2, e.attempts))
   where pgmem._check_args('fail_embedding', jsonb_build_object('error', error))  -- sizes first (issue 27)
     and e.memory_id = fail_embedding.memory_id
     and (e.tenant = pgmem.current_tenant() or pgmem._is_admin())
$$;
comment on function pgmem.fail_embedding(bigint, text) is 'Records a failed embedding attempt; the memory is retried later with exponential backoff (max 1 hour).';
