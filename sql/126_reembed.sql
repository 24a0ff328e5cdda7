-- Embedding models (issue 26): the write limits a client checks before it embeds, the event
-- keys already stored (a replayed event is not embedded again), and moving a tenant to a new
-- embedding model through a queue (`pgmem reembed`).
--
-- A move (pgmem.reembed(model)) queues every embedded memory of the tenant whose vector was
-- made by another model in pgmem.reembed_queue. Workers running the new model
-- (python/pgmem/worker.py) claim them (FOR UPDATE SKIP LOCKED, as the embedding queue), and
-- write each new vector into the queue row, not into the memory: until the last vector is
-- ready the memories keep their old vectors, so search with the old model keeps working all
-- along, and lexical search never stops. pgmem.finish_reembed then re-queues what changed
-- meanwhile (an edited memory, one written with the old model during the move) and, when
-- nothing is left, swaps every vector in one transaction (history op 'embed', details naming
-- the move). Clients switch to the new model after that (reembed_status shows 'done').
-- Nothing is lost: a memory's content is never touched, and a cancelled move
-- (pgmem.cancel_reembed) leaves the old vectors as they were.

create or replace function pgmem.write_limits() returns jsonb
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select jsonb_object_agg(s.key, s.value)
    from (select distinct on (x.key) x.key, x.value from pgmem.settings x
           where x.key in ('max_content_bytes', 'max_metadata_bytes', 'max_summary_bytes', 'max_field_bytes',
                           'max_id_bytes', 'max_tags', 'max_batch_items')
             and x.tenant in (coalesce(pgmem.current_tenant(), '*'), '*')
           order by x.key, (x.tenant = '*')) s
$$;
comment on function pgmem.write_limits() is
  'The size limits a write of the current tenant must keep (max_content_bytes, max_field_bytes, max_metadata_bytes, max_summary_bytes, max_id_bytes, max_tags, max_batch_items), as one JSON object: a client checks them before it embeds.';

create or replace function pgmem.known_event_keys(event_keys text[]) returns setof text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := pgmem._require_tenant();
begin
  perform pgmem._check_args('known_event_keys', jsonb_build_object('event_keys', to_jsonb(known_event_keys.event_keys)));  -- sizes first (issue 27)
  perform pgmem._check_between(coalesce(cardinality(event_keys), 0), 'cardinality(event_keys)', 0, 10000);
  return query select m.event_key from pgmem.memories m
                where m.tenant = v_tenant and m.event_key = any (event_keys);
end $$;
comment on function pgmem.known_event_keys(text[]) is
  'The event keys among the given ones that the current tenant already stored (at most 10,000 asked at once): remember() replays them, so a client need not embed them again.';

-- md5 of the fields a memory's vector is made from (pgmem.embedding.embedding_text's inputs)
create or replace function pgmem._embedding_source(m pgmem.memories) returns text
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return md5(concat_ws(chr(31), m.content, m.who, m.what, m.location, m.why, m.how));

create or replace function pgmem._reembed_enqueue(p_move bigint) returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_n integer;
begin
  insert into pgmem.reembed_queue (memory_id, tenant, move_id)
  select m.id, m.tenant, mv.id
    from pgmem.embedding_moves mv join pgmem.memories m on m.tenant = mv.tenant
   where mv.id = p_move and m.embedding is not null and m.embedding_model is distinct from mv.model
  on conflict (memory_id) do nothing;
  get diagnostics v_n = row_count;
  update pgmem.embedding_moves set total = total + v_n where id = p_move;
  return v_n;
end $$;

create or replace function pgmem.reembed(model text) returns pgmem.embedding_moves
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  mv pgmem.embedding_moves;
begin
  perform pgmem._check_args('reembed', jsonb_build_object('model', reembed.model));  -- sizes first (issue 27)
  if model is null or btrim(model) = '' or octet_length(model) > 256 then
    perform pgmem._bad_input('model must be the name the new model records with its vectors (1 to 256 bytes)',
      'use the embedder''s model_name, e.g. sentence-transformers/all-MiniLM-L6-v2 or text-embedding-3-small');
  end if;
  select * into mv from pgmem.embedding_moves x where x.tenant = v_tenant and x.state = 'running' for update;
  if mv.id is not null then
    if mv.model = model then
      return mv;  -- asked again: the same move
    end if;
    perform pgmem._bad_input(format('tenant %s is moving to model %s already', v_tenant, mv.model),
      'wait until pgmem.reembed_status() says done, or cancel it: select pgmem.cancel_reembed()');
  end if;
  insert into pgmem.embedding_moves (tenant, model) values (v_tenant, model) returning * into mv;
  perform pgmem._reembed_enqueue(mv.id);
  perform pgmem._reembed_finish(mv.id);  -- nothing to do: done at once
  select * into mv from pgmem.embedding_moves x where x.id = mv.id;
  return mv;
end $$;
comment on function pgmem.reembed(text) is
  'Starts moving the current tenant to another embedding model: every embedded memory whose vector another model made is queued for a worker running the new model (pgmem worker, or pgmem reembed). The old vectors serve search until all new ones are ready, then one transaction swaps them (pgmem.finish_reembed). Asking again for the same model returns the running move.';

create or replace function pgmem.claim_reembeddings(batch integer default 64, all_tenants boolean default false,
                                                    for_model text default null)
returns table (memory_id bigint, tenant text, move_id bigint, model text, content text, who text, what text,
               location text, why text, how text)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text;
begin
  perform pgmem._check_args('claim_reembeddings', jsonb_build_object('for_model', claim_reembeddings.for_model));  -- sizes first (issue 27)
  perform pgmem._check_between(batch, 'batch', 1, 10000);
  if all_tenants and not pgmem._is_admin() then
    raise exception 'claim_reembeddings(all_tenants => true) needs the pgmem_admin role' using errcode = '42501';
  end if;
  v_tenant := case when all_tenants then null else pgmem._require_tenant() end;
  return query
  with q as (
    select r.memory_id from pgmem.reembed_queue r
     where r.embedding is null and (v_tenant is null or r.tenant = v_tenant)
       and (for_model is null or r.move_id in (select x.id from pgmem.embedding_moves x
                                                where x.state = 'running' and x.model = for_model))
     order by r.queued_at, r.memory_id
     limit batch
     for update skip locked)
  select m.id, m.tenant, r.move_id, mv.model, m.content, m.who, m.what, m.location, m.why, m.how
    from q join pgmem.reembed_queue r using (memory_id) join pgmem.memories m on m.id = q.memory_id
    join pgmem.embedding_moves mv on mv.id = r.move_id
   order by r.queued_at, m.id;
end $$;
comment on function pgmem.claim_reembeddings(integer, boolean, text) is
  'Takes up to batch memories of running embedding moves (the current tenant''s; every tenant''s with all_tenants, pgmem_admin only; only moves to for_model when given), locked until the caller''s transaction ends, with the model each must be embedded with.';

create or replace function pgmem.complete_reembedding(memory_id bigint, embedding public.vector, model text)
returns boolean
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  r record;
begin
  perform pgmem._check_args('complete_reembedding', jsonb_build_object('model', complete_reembedding.model));  -- sizes first (issue 27)
  select q.memory_id, q.move_id, mv.model as target, m as mem into r
    from pgmem.reembed_queue q join pgmem.embedding_moves mv on mv.id = q.move_id
    join pgmem.memories m on m.id = q.memory_id
   where q.memory_id = complete_reembedding.memory_id and (q.tenant = pgmem.current_tenant() or pgmem._is_admin());
  if r.memory_id is null then
    return false;  -- the move was cancelled, or the memory purged, meanwhile
  end if;
  if r.target is distinct from model then
    perform pgmem._bad_input(format('memory %s was embedded with model %s, but its move is to %s', memory_id, model, r.target),
      'run the worker with the move''s model (PGMEM_EMBED_MODEL / PGMEM_EMBEDDER)');
  end if;
  update pgmem.reembed_queue q set embedding = pgmem._check_embedding(complete_reembedding.embedding, 'the new embedding'),
         text_hash = pgmem._embedding_source(r.mem)
   where q.memory_id = r.memory_id;
  return true;
end $$;
comment on function pgmem.complete_reembedding(bigint, public.vector, text) is
  'Stores the new vector of a memory in its embedding move (the memory keeps its old vector until pgmem.finish_reembed swaps them all). False when the move is gone.';

-- The swap of one move, when no vector is pending (the caller holds no lock; this takes the move's row).
create or replace function pgmem._reembed_finish(p_move bigint) returns boolean
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  mv pgmem.embedding_moves;
  v_changed integer;
  v_swapped integer;
begin
  select * into mv from pgmem.embedding_moves x where x.id = p_move and x.state = 'running' for update;
  if mv.id is null or exists (select 1 from pgmem.reembed_queue q where q.move_id = mv.id and q.embedding is null) then
    return false;
  end if;
  -- a memory edited since its new vector was made is embedded again
  update pgmem.reembed_queue q set embedding = null, text_hash = null
    from pgmem.memories m
   where q.move_id = mv.id and m.id = q.memory_id and q.text_hash is distinct from pgmem._embedding_source(m);
  get diagnostics v_changed = row_count;
  -- and one embedded with another model meanwhile (a writer still on the old model) joins the move
  v_changed := v_changed + pgmem._reembed_enqueue(mv.id);
  if v_changed > 0 then
    return false;
  end if;
  perform pgmem._set_op('embed', jsonb_build_object('reembed', mv.id, 'model', mv.model));
  update pgmem.memories m set embedding = q.embedding, embedding_model = mv.model
    from pgmem.reembed_queue q
   where q.move_id = mv.id and m.id = q.memory_id;
  get diagnostics v_swapped = row_count;
  perform pgmem._set_op(null);
  delete from pgmem.reembed_queue q where q.move_id = mv.id;
  update pgmem.embedding_moves x set state = 'done', finished_at = now(),
         details = x.details || jsonb_build_object('swapped', v_swapped)
   where x.id = mv.id;
  return true;
end $$;

create or replace function pgmem.finish_reembed(all_tenants boolean default false)
returns table (move_id bigint, tenant text, model text, state text, total integer, pending bigint)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text; r record;
begin
  if all_tenants and not pgmem._is_admin() then
    raise exception 'finish_reembed(all_tenants => true) needs the pgmem_admin role' using errcode = '42501';
  end if;
  v_tenant := case when all_tenants then null else pgmem._require_tenant() end;
  for r in select x.id from pgmem.embedding_moves x
            where x.state = 'running' and (v_tenant is null or x.tenant = v_tenant) order by x.id loop
    perform pgmem._reembed_finish(r.id);
  end loop;
  return query
  select x.id, x.tenant, x.model, x.state, x.total,
         (select count(*) from pgmem.reembed_queue q where q.move_id = x.id and q.embedding is null)
    from pgmem.embedding_moves x
   where (v_tenant is null or x.tenant = v_tenant)
     and (x.state = 'running' or x.finished_at > now() - interval '1 minute')
   order by x.id;
end $$;
comment on function pgmem.finish_reembed(boolean) is
  'Swaps the new vectors of each running embedding move of the current tenant (every tenant''s with all_tenants, pgmem_admin only) whose vectors are all ready, after re-queueing memories edited or embedded with the old model meanwhile; returns the moves still running or just finished. The worker calls it after each batch.';

create or replace function pgmem.cancel_reembed() returns pgmem.embedding_moves
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  mv pgmem.embedding_moves;
begin
  update pgmem.embedding_moves x set state = 'cancelled', finished_at = now()
   where x.tenant = v_tenant and x.state = 'running' returning * into mv;
  if mv.id is null then
    raise exception 'tenant % has no embedding move running', v_tenant using errcode = 'P0002',
      hint = 'pgmem.reembed_status() lists the moves';
  end if;
  delete from pgmem.reembed_queue q where q.move_id = mv.id;
  return mv;
end $$;
comment on function pgmem.cancel_reembed() is
  'Cancels the current tenant''s running embedding move: the new vectors made so far are dropped and every memory keeps the vector it has.';

create or replace function pgmem.reembed_status()
returns table (move_id bigint, model text, state text, total integer, embedded bigint, pending bigint,
               started_at timestamptz, finished_at timestamptz, details jsonb)
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select x.id, x.model, x.state, x.total,
         case when x.state = 'done' then x.total::bigint
              else (select count(*) from pgmem.reembed_queue q where q.move_id = x.id and q.embedding is not null) end,
         case when x.state = 'running'
              then (select count(*) from pgmem.reembed_queue q where q.move_id = x.id and q.embedding is null) else 0 end,
         x.started_at, x.finished_at, x.details
    from pgmem.embedding_moves x
   where x.tenant = pgmem._require_tenant()
   order by x.id desc
   limit 20
$$;
comment on function pgmem.reembed_status() is
  'The current tenant''s embedding moves, newest first (at most 20): target model, state (running, done, cancelled), memories queued, embedded and pending.';

create or replace view pgmem.embedding_models as
select m.tenant, coalesce(m.embedding_model, '(none)') as model,
       count(*) filter (where m.embedded_at is not null) as embedded,  -- (embedded_at: the reader may not read vectors)
       count(*) filter (where m.embedded_at is null) as waiting,
       count(*) filter (where m.state = 'active') as active
  from pgmem.memories m
 group by 1, 2;
comment on view pgmem.embedding_models is
  'Memories per tenant and embedding model (row-level security shows an application its own tenant): embedded, waiting for the worker, and active; more than one model means a move is due (pgmem reembed).';
