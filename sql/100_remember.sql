-- remember(): store one memory behind Engram's surprise gate, with Fragment salience.
-- remember_many(): the same rules for a batch in one call, set-based.
-- surprise(): the gate's verdict on a candidate, without storing it.
--
-- All three run one implementation, pgmem._remember_core, over a batch (of one, for
-- remember and surprise):
--   1. what every item finds among the stored memories: exact duplicate (content hash),
--      event_key replay, its gate_neighbours nearest memories by embedding (one HNSW index scan
--      per item at gate_ef_search; the memories not under the index yet, pgmem.vector_queue,
--      compared with the whole batch in one matrix product), its keyword candidates (those
--      neighbours, the scope's most recent memories, and without an embedding the lexical
--      ones) and their tokens, once per candidate, the count of its category (once per scope
--      and category), its session's previous memory: two statements and one PL/Python call;
--   2. the decisions, in batch order (python/pgmem/engine/gate.py, PL/Python): what an item
--      finds among the EARLIER items of its batch depends on which of them were kept, exactly
--      as with one remember() call after the other;
--   3. ONE INSERT ... SELECT of the kept items (history of the new memories: one statement,
--      040's statement-level trigger; the rows, validated here item by item, are not
--      validated again by the row trigger: pgmem.write_checked), ONE INSERT of the history
--      rows of the duplicates and rejected candidates, ONE INSERT of the session links.
-- SECURITY DEFINER, audited: every statement filters on v_tenant = pgmem._require_tenant().
-- (Under row-level security the HNSW and GIN index paths would be lost: see 900_security.sql.)
--
-- Where the time goes (issue 23; bench/write_floor.py --corpus, 100,000 memories, backend CPU
-- per item of remember_many in batches of 256, precomputed embeddings): 6.1 ms before, of which
-- the neighbour lookups 4.1 (top 10 at ef_search 100, and an exact scan of the queue per item),
-- tokens and Jaccard in SQL 1.8, the gate in Python 0.9 (a pair of calls per pair of items),
-- the row trigger's checks 0.26; about 1.3-1.5 ms after, of which the lookups (top 5 at
-- ef_search 20) about 0.45.

create or replace function pgmem._scope_key(p_user_id text) returns text
  language sql immutable parallel safe
  return coalesce(p_user_id, '');

-- The gate's settings (issue 23): how many nearest neighbours an item looks up, at which
-- hnsw.ef_search, and up to how many memories waiting for the HNSW index the batch compares
-- exactly in one matrix product (more than that: each item scans the queue, pgmem._neighbours).
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'gate_neighbours', '5', 'remember(): how many nearest memories by embedding the surprise gate looks up per item (the nearest gives semantic novelty; all are keyword candidates)'),
  ('*', 'gate_ef_search', '20', 'remember(): hnsw.ef_search of the gate''s nearest-neighbour lookup (a user''s search uses hnsw_ef_search); near-duplicates are found at low values'),
  ('*', 'gate_queue_exact_max', '20000', 'remember(): memories waiting for the HNSW index (vector_queue) up to which a batch compares them in one matrix product; beyond it each item scans them')
on conflict (tenant, key) do nothing;

-- Fragment salience with unknown parts (fragment-reconstructive-memory.md, Salience Formula:
-- .35 emotion + .30 novelty + .25 goal relevance + .10 processing depth). A part is unknown when
-- the caller gave no emotion (valence, arousal) or the agent has no active goals (goal_relevance
-- is NULL). "renormalise" (the default) leaves unknown parts out and divides by the weights of
-- the known ones: a memory is not made less salient for what nobody measured, and memories with
-- and without an emotion annotation stay comparable. "zero" counts them as 0, the formula as
-- written. Measured on make demo's conversation (285 memories, heuristic extraction, no goals):
-- every memory has an emotion and none a goal relevance, so the two differ by one factor for all
-- (.75: salience .413 on average renormalised, .310 as zeros) and order the memories the same;
-- they differ only between memories whose goal relevance is known and those whose is not (a goal
-- set later: REFLECT's rescore_salience, 700_identity.sql). remember()'s details->'salience'
-- shows each part, null when unknown, and the weights used.
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'salience_unknown', '"renormalise"', 'Fragment salience at write: "renormalise" leaves unknown parts (no emotion, no goals) out and renormalises the weights; "zero" counts them as 0 (the formula as written)')
on conflict (tenant, key) do nothing;

-- (the signature before issue 23: the neighbour's and the keyword match's facts per item)
drop function if exists pgmem._gate_decide(text[], text[], text[], text[], boolean[], bytea[], text[], text[], float8[],
  bigint[], bigint[], boolean[], bigint[], float8[], text[], bigint[], float8[], text[], integer[], bigint[], integer[],
  float8[], float8, jsonb, jsonb, integer);

-- Step 2 (see above): Engram's gate over a batch, in order. Arrays by item, in batch order;
-- tokens are space-joined (tokens never contain a space); vectors in pgvector's binary format.
-- The candidates are flattened: (p_sem_ord, p_sem_id, p_sem_dist) the stored nearest
-- neighbours of item p_sem_ord, nearest first; (p_kw_ord, p_kw_id) its other keyword
-- candidates; (p_tok_id, p_tok, p_tok_text) the tokens of every candidate. Tokens
-- (pgmem.tokens) come from the database for a text that is not ASCII; an ASCII text comes as
-- it is (p_text, p_tok_text) and gate.py tokenizes it as pgmem.tokens would (25 µs a text in
-- SQL, 1,500 texts a batch of 256).
create or replace function pgmem._gate_decide(
  p_scope text[], p_hash text[], p_event_key text[], p_category text[], p_force boolean[], p_vector bytea[],
  p_tokens text[], p_text text[], p_session text[], p_created_at float8[],
  p_replay_id bigint[], p_dup_id bigint[], p_any boolean[], p_cat_count integer[],
  p_prev_id bigint[], p_prev_seq integer[], p_prev_at float8[],
  p_sem_ord integer[], p_sem_id bigint[], p_sem_dist float8[], p_kw_ord integer[], p_kw_id bigint[],
  p_tok_id bigint[], p_tok text[], p_tok_text text[],
  p_threshold float8, p_weights jsonb, p_weights_no_embedding jsonb, p_rarity_cap integer)
returns table (ord integer, decision text, memory_id bigint, memory_ord integer, surprise float8,
               semantic_novelty float8, keyword_novelty float8, rarity float8, nearest_id bigint, nearest_ord integer,
               nearest_similarity float8, new_numbers text[], forced boolean, seq integer, prev_id bigint, prev_ord integer)
  language plpython3u stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
import json
if "pgmem.gate" not in GD:  # the one loader (pgmem._py_load: the engine's import hook)
    plpy.execute("select pgmem._py_load('gate')")
mod = GD["pgmem.gate"]
if not p_scope:
    return []
split = lambda s: s.split(" ") if s else []
n = len(p_scope)
sem = [[] for _ in range(n)]
for o, i, d in zip(p_sem_ord or [], p_sem_id or [], p_sem_dist or []):
    sem[o - 1].append((i, d))
kw = [[] for _ in range(n)]
for o, i in zip(p_kw_ord or [], p_kw_id or []):
    kw[o - 1].append(i)
items = [dict(scope=p_scope[i], hash=p_hash[i], event_key=p_event_key[i], category=p_category[i], force=p_force[i],
              vector=mod.vector_from_send(p_vector[i]),
              tokens=mod.ascii_tokens(p_text[i]) if p_text[i] is not None else split(p_tokens[i]), session=p_session[i],
              created_at=p_created_at[i], replay_id=p_replay_id[i], dup_id=p_dup_id[i], any=p_any[i],
              sem=sem[i], kw_ids=kw[i], cat_count=p_cat_count[i],
              prev_id=p_prev_id[i], prev_seq=p_prev_seq[i], prev_at=p_prev_at[i])
         for i in range(n)]
tokens = {i: mod.ascii_tokens(x) if x is not None else split(t)
          for i, t, x in zip(p_tok_id or [], p_tok or [], p_tok_text or [])}
out = mod.decide(items, tokens=tokens, threshold=p_threshold, weights=json.loads(p_weights),
                 weights_no_embedding=json.loads(p_weights_no_embedding), rarity_cap=p_rarity_cap)
ref = lambda r: (None, None) if r is None else (r.id, None if r.ord is None else r.ord + 1)
rows = []
for i, d in enumerate(out):
    m, nr, p = ref(d.memory), ref(d.nearest), ref(d.prev)
    rows.append((i + 1, d.decision, m[0], m[1], d.surprise, d.semantic_novelty, d.keyword_novelty, d.rarity,
                 nr[0], nr[1], d.nearest_similarity, d.new_numbers, d.forced, d.seq, p[0], p[1]))
return rows
$$;
comment on function pgmem._gate_decide(text[], text[], text[], text[], boolean[], bytea[], text[], text[], text[], float8[], bigint[], bigint[], boolean[], integer[], bigint[], integer[], float8[], integer[], bigint[], float8[], integer[], bigint[], bigint[], text[], text[], float8, jsonb, jsonb, integer) is
  'Engram''s surprise gate over a batch in order (PL/Python, module gate): what each item finds among the earlier kept items of its batch, added to what it found among the stored memories. Internal to remember, remember_many and surprise.';

-- The memories waiting for the HNSW index nearest to each item of a batch (gate.py,
-- nearest_queued): (item ord, memory id), at most p_k (+2) per item, from one matrix product
-- per scope. The database then computes their exact distances.
create or replace function pgmem._gate_queued(p_scope text[], p_vector bytea[], p_q_id bigint[], p_q_scope text[],
                                              p_q_vector bytea[], p_k integer)
returns table (ord integer, memory_id bigint)
  language plpython3u stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
if "pgmem.gate" not in GD:  # the one loader (pgmem._py_load: the engine's import hook)
    plpy.execute("select pgmem._py_load('gate')")
mod = GD["pgmem.gate"]
if not p_scope or not p_q_id:
    return []
vec = mod.vector_from_send
pairs = mod.nearest_queued(list(p_scope), [vec(b) for b in p_vector], list(p_q_id), list(p_q_scope),
                           [vec(b) for b in p_q_vector], p_k)
return [(i + 1, m) for i, m in pairs]
$$;
comment on function pgmem._gate_queued(text[], bytea[], bigint[], text[], bytea[], integer) is
  'The memories waiting for the HNSW index (pgmem.vector_queue) nearest to each item of a remember batch, from one matrix product per user scope (PL/Python, module gate). Internal to the surprise gate.';

-- The profile facts a user's statement sets (metadata.facts: the extractor's, written by the
-- memories_profile_facts trigger, 610_profile_facts.sql) name what the memory is about: the words
-- of each fact's key ("editor"; "allergies.peanuts": allergies, peanuts) join its topics, which
-- the lexical index weighs highest (0001's tsvector, weight A). "which editor does maya use now"
-- then finds "I've switched from VS Code to Neovim", which never says "editor" (issue 24, the
-- demo's question 2: before, the Neovim turn ranked 4th behind turns that only share "use").
-- Only for a memory with a user (facts are a user's) and within max_tags.
create or replace function pgmem._fact_topics(p_topics text[], p_facts jsonb, p_user_id text, p_limits jsonb) returns text[]
  language sql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select case when p_user_id is null or jsonb_typeof(p_facts) is distinct from 'array' then coalesce(p_topics, '{}')
              else coalesce(p_topics, '{}') || array(
                select w from (select distinct on (w) w, min(n) over (partition by w) as n
                                 from jsonb_array_elements(p_facts) with ordinality f(x, n)
                                cross join lateral regexp_split_to_table(lower(f.x->>'key'), '[^a-z0-9]+') w
                                where f.x->>'key' is not null and length(w) > 1) k
                 where not (w = any(coalesce(p_topics, '{}')))
                 order by n, w
                 limit greatest(0, coalesce((p_limits->>'max_tags')::int, 256) - coalesce(cardinality(p_topics), 0))) end
$$;
comment on function pgmem._fact_topics(text[], jsonb, text, jsonb) is
  'The topics of a memory with the words of the keys of the profile facts it states added (within max_tags). Internal to remember.';

create or replace function pgmem._remember_core(p_rows pgmem.memories[], p_force boolean[], p_labels text[],
                                                p_dry_run boolean default false, p_exclude_id bigint default null)
returns setof pgmem.remember_outcome
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
  set hnsw.iterative_scan = strict_order
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_limits jsonb := pgmem._write_limits();
  v_pool int := pgmem._setting_num('surprise_lexical_pool', 20)::int;
  v_cap int := pgmem._setting_num('rarity_count_cap', 1024)::int;
  v_threshold float8 := pgmem._setting_num('surprise_threshold', 0.15);
  v_salience_w jsonb := pgmem._setting('salience_weights');
  v_salience_zero boolean := coalesce(pgmem._setting('salience_unknown') #>> '{}', 'renormalise') = 'zero';
  v_k int := least(100, greatest(1, pgmem._setting_num('gate_neighbours', 5)::int));
  v_queue_max int := greatest(0, pgmem._setting_num('gate_queue_exact_max', 20000)::int);
  v_n int := coalesce(cardinality(p_rows), 0);
  v_scopes text[];
  v_vecs bytea[];
  v_q record;
  v_scan_queue boolean := false;  -- more queued than gate_queue_exact_max: each item scans them (_neighbours)
  v_picks record;
  v_out pgmem.remember_outcome[];
  f record;  -- the facts of step 1, as arrays in batch order
begin
  if v_n = 0 then return; end if;
  -- validation with messages for people, naming the item of a batch (the trigger checks again)
  if not p_dry_run then
    perform pgmem._check_memory(u.m, null, v_limits, p_labels[u.i]), pgmem._check_embedding((u.m).embedding, p_labels[u.i] || 'embedding')
       from (select g.i::int as i, p_rows[g.i] as m from generate_subscripts(p_rows, 1) g(i)) u;
    perform pgmem._check_category(c) from (select distinct (u.m).category as c from (select g.i::int as i, p_rows[g.i] as m from generate_subscripts(p_rows, 1) g(i)) u) x;
    -- one writer at a time per (tenant, user scope): the gate of a concurrent batch must see what
    -- this one keeps. Row locks of pgmem.write_locks, which only pgmem's functions can take.
    insert into pgmem.write_locks (tenant, scope)
    select distinct v_tenant, pgmem._scope_key((u.m).user_id) from (select g.i::int as i, p_rows[g.i] as m from generate_subscripts(p_rows, 1) g(i)) u order by 2
    on conflict do nothing;
    perform 1 from pgmem.write_locks w
     where w.tenant = v_tenant and w.scope in (select pgmem._scope_key((u.m).user_id) from (select g.i::int as i, p_rows[g.i] as m from generate_subscripts(p_rows, 1) g(i)) u)
     order by w.scope for update;
  else
    perform pgmem._check_embedding((u.m).embedding) from (select g.i::int as i, p_rows[g.i] as m from generate_subscripts(p_rows, 1) g(i)) u;
  end if;
  -- The gate's nearest neighbours (engram.md, Semantic Novelty: 1 - max cosine similarity)
  -- need k = a few at a lower ef_search than a user's search: near-duplicates, the memories
  -- that decide a rejection, are found at ef_search 10-20 as at 100 (bench/README.md, "Write
  -- path and jobs", the recall of the gate's lookup), for a fifth of the cost.
  perform set_config('hnsw.ef_search', greatest(v_k, pgmem._setting_num('gate_ef_search', 20)::int)::text, true);
  select array_agg(pgmem._scope_key((u.m).user_id) order by u.i),
         array_agg(case when (u.m).embedding is not null then public.vector_send((u.m).embedding) end order by u.i)
    into v_scopes, v_vecs
    from (select g.i::int as i, p_rows[g.i] as m from generate_subscripts(p_rows, 1) g(i)) u;

  -- 1a. the memories of the batch's scopes still waiting for the HNSW index (pgmem.vector_queue,
  --     125_vectors.sql; the `index` job moves them): compared exactly with every item, in one
  --     matrix product per scope (gate.py), not by a scan of the queue per item (5 µs per queued
  --     row and item: 4,096 queued made each lookup 7x dearer)
  select null::integer[] as ords, null::bigint[] as ids into v_picks;
  if exists (select 1 from unnest(v_vecs) v where v is not null) then
    v_scan_queue := (select count(*) from (select 1 from pgmem.vector_queue q where q.tenant = v_tenant
                                            limit v_queue_max + 1) x) > v_queue_max;
    if not v_scan_queue then
      select array_agg(m.id order by m.id) as ids, array_agg(coalesce(m.user_id, '') order by m.id) as scopes,
             array_agg(public.vector_send(m.embedding) order by m.id) as vecs, count(*) as n
        into v_q
        from pgmem.vector_queue q join pgmem.memories m on m.id = q.memory_id
       where q.tenant = v_tenant and m.tenant = v_tenant and m.state = 'active' and m.embedding is not null
         and coalesce(m.user_id, '') = any(v_scopes) and m.id is distinct from p_exclude_id;
    end if;
    if not v_scan_queue and v_q.n > 0 then
      select array_agg(p.ord) as ords, array_agg(p.memory_id) as ids into v_picks
        from pgmem._gate_queued(v_scopes, v_vecs, v_q.ids, v_q.scopes, v_q.vecs,
                                v_k + case when p_exclude_id is null then 0 else 1 end) p;
    end if;
  end if;

  -- 1b. what every item finds among the stored memories of its tenant and user scope
  with it as (
    select u.i::int as i, u.m, pgmem._scope_key((u.m).user_id) as scope, md5(pgmem._content_key((u.m).content))::uuid as h,
           case when octet_length((u.m).content) <> char_length((u.m).content) then pgmem.tokens((u.m).content) end as toks,
           -- (lexical candidates; the query of the first 64 KB: plainto_tsquery of ~200 KB of
           -- ordinary text overflows PostgreSQL's stack removing stop words, issue 27)
           case when (u.m).embedding is null then plainto_tsquery('english', left((u.m).content, 65536)) end as q
      from (select g.i::int as i, p_rows[g.i] as m from generate_subscripts(p_rows, 1) g(i)) u),
  picks as (  -- 1a's queued candidates, per item
    select x.ord, array_agg(x.id) as ids from unnest(v_picks.ords, v_picks.ids) x(ord, id) group by x.ord),
  cat as (  -- category counts, once per scope and category
    select g.scope, g.category, c.n
      from (select distinct it.scope, (it.m).category as category from it) g
     cross join lateral (select count(*)::int as n from (
              select 1 from pgmem.memories m
               where m.tenant = v_tenant and coalesce(m.user_id, '') = g.scope and m.category = g.category
                 and m.state = 'active' and m.id is distinct from p_exclude_id
               limit v_cap) x) c),
  recent as (  -- the scope's most recent memories: keyword candidates of every item of that scope
    select g.scope, array_agg(r.id) as ids
      from (select distinct it.scope from it) g
     cross join lateral (select m.id from pgmem.memories m
                          where m.tenant = v_tenant and coalesce(m.user_id, '') = g.scope and m.state = 'active'
                            and m.id is distinct from p_exclude_id
                          order by m.created_at desc limit v_pool) r
     group by g.scope),
  per_item as materialized (
    select it.i, it.scope, it.h, it.toks, it.m,
      (select m.id from pgmem.memories m where m.tenant = v_tenant and m.event_key = (it.m).event_key
        and (it.m).event_key is not null) as replay_id,
      (select m.id from pgmem.memories m
        where m.tenant = v_tenant and coalesce(m.user_id, '') = it.scope and m.content_hash = it.h
          and m.state in ('active', 'archived') and m.id is distinct from p_exclude_id
        order by m.id limit 1) as dup_id,
      r.ids is not null as any_memory,
      nn.ids as nn_ids, nn.ds as nn_ds,
      -- keyword candidates besides the neighbours: the scope's most recent memories and, for an
      -- item without an embedding (the neighbours are then its only other source), up to
      -- surprise_lexical_pool memories holding every lexeme of the item (GIN, AND query: a
      -- repeat or near-repeat; an OR query would visit nearly every row). With an embedding a
      -- near-repeat is a near vector: the GIN query (27 ms per item for a paragraph at
      -- 1,000,000 memories, measured: every lexeme's posting list is read) would only find what
      -- the neighbours already hold.
      coalesce(r.ids, '{}') || coalesce(lex.ids, '{}') as kw_ids,
      cat.n as cat_count, prev.id as prev_id, prev.seq as prev_seq, prev.created_at as prev_at
    from it
    left join recent r on r.scope = it.scope
    left join cat on cat.scope = it.scope and cat.category = (it.m).category
    left join picks pk on pk.ord = it.i
    -- the gate_neighbours nearest by embedding: the HNSW index (memory_vectors) and the queued
    -- candidates of 1a, by their exact distance (or, past gate_queue_exact_max, _neighbours:
    -- HNSW and an exact scan of the queue)
    left join lateral (
      select array_agg(c.id order by c.d, c.id) as ids, array_agg(c.d order by c.d, c.id) as ds
        from (select x.id, x.d from (
                (select v.memory_id as id, v.embedding operator(public.<=>) (it.m).embedding as d
                   from pgmem.memory_vectors v
                  where not v_scan_queue and v.tenant = v_tenant and v.user_scope = it.scope
                  order by v.embedding operator(public.<=>) (it.m).embedding
                  limit v_k + case when p_exclude_id is null then 0 else 1 end)
                union
                select m.id, m.embedding operator(public.<=>) (it.m).embedding
                  from unnest(pk.ids) p(id) join pgmem.memories m on m.id = p.id and m.tenant = v_tenant
                union
                select n.id, n.distance
                  from pgmem._neighbours(v_tenant, (it.m).embedding, v_k + case when p_exclude_id is null then 0 else 1 end, it.scope) n
                 where v_scan_queue) x
               where x.id is distinct from p_exclude_id
               order by x.d, x.id limit v_k) c
       where (it.m).embedding is not null and r.ids is not null) nn on true
    left join lateral (
      select array_agg(m.id) as ids from (
        select m.id from pgmem.memories m
         where r.ids is not null and (it.m).embedding is null and numnode(it.q) > 0 and m.tsv @@ it.q
           and m.tenant = v_tenant
           and coalesce(m.user_id, '') = it.scope and m.state = 'active' and m.id is distinct from p_exclude_id
         limit v_pool) m) lex on true
    -- the session's previous memory, for seq and the temporal link
    left join lateral (
      select m.id, m.seq, m.created_at from pgmem.memories m
       where (it.m).session_id is not null and m.tenant = v_tenant and m.session_id = (it.m).session_id
         and m.state in ('active', 'archived') and m.created_at <= coalesce((it.m).created_at, now())
       order by m.created_at desc, m.id desc limit 1) prev on true),
  -- the tokens of every candidate, once per batch
  toks as (
    select array_agg(c.id order by c.id) as ids,
           array_agg(case when octet_length(m.content) <> char_length(m.content)
                          then array_to_string(pgmem.tokens(m.content), ' ') end order by c.id) as toks,
           array_agg(case when octet_length(m.content) = char_length(m.content) then m.content end order by c.id) as texts
      from (select distinct x.id from per_item p, unnest(coalesce(p.nn_ids, '{}') || p.kw_ids) x(id)) c
      join pgmem.memories m on m.id = c.id and m.tenant = v_tenant),
  sem as (
    select array_agg(p.i order by p.i, x.n) as ords, array_agg(x.id order by p.i, x.n) as ids,
           array_agg(x.d order by p.i, x.n) as ds
      from per_item p, unnest(p.nn_ids, p.nn_ds) with ordinality x(id, d, n)),
  kw as (
    select array_agg(p.i order by p.i, x.id) as ords, array_agg(x.id order by p.i, x.id) as ids
      from per_item p, unnest(p.kw_ids) x(id))
  select array_agg(p.scope order by p.i) as scope, array_agg(p.h::text order by p.i) as h,
         array_agg((p.m).event_key order by p.i) as event_key, array_agg((p.m).category order by p.i) as category,
         array_agg(coalesce(p_force[p.i], false) order by p.i) as force,
         array_agg(case when (p.m).embedding is not null then public.vector_send((p.m).embedding) end order by p.i) as vec,
         array_agg(array_to_string(p.toks, ' ') order by p.i) as toks,
         array_agg(case when p.toks is null then (p.m).content end order by p.i) as texts,
         array_agg((p.m).session_id order by p.i) as session,
         array_agg(extract(epoch from coalesce((p.m).created_at, now()))::float8 order by p.i) as created_at,
         array_agg(p.replay_id order by p.i) as replay_id, array_agg(p.dup_id order by p.i) as dup_id,
         array_agg(p.any_memory order by p.i) as any_memory,
         array_agg(coalesce(p.cat_count, 0) order by p.i) as cat_count, array_agg(p.prev_id order by p.i) as prev_id,
         array_agg(p.prev_seq order by p.i) as prev_seq,
         array_agg(extract(epoch from p.prev_at)::float8 order by p.i) as prev_at,
         (select sem.ords from sem) as sem_ord, (select sem.ids from sem) as sem_id, (select sem.ds from sem) as sem_dist,
         (select kw.ords from kw) as kw_ord, (select kw.ids from kw) as kw_id,
         (select toks.ids from toks) as tok_id, (select toks.toks from toks) as tok,
         (select toks.texts from toks) as tok_text
    into f
    from per_item p;

  -- 2. the decisions, in batch order (gate.py); 3. the writes, one statement each. The rows
  -- the INSERT writes were validated above: marked so for the memories trigger (040), until
  -- the INSERT is done.
  if not p_dry_run then
    insert into pgmem.write_checked (pid, xid) values (pg_backend_pid(), pg_current_xact_id()::text::bigint) on conflict do nothing;
  end if;
  with d as materialized (
    select d.*, u.m,
           -- the ids of the kept memories, in batch order, taken before they are written: an item
           -- can name an earlier item of its batch (its nearest, its duplicate, its session's previous)
           case when d.decision = 'stored' and not p_dry_run
                then nextval(pg_get_serial_sequence('pgmem.memories', 'id')) end as new_id
      from pgmem._gate_decide(f.scope, f.h, f.event_key, f.category, f.force, f.vec, f.toks, f.texts, f.session, f.created_at,
                              f.replay_id, f.dup_id, f.any_memory, f.cat_count, f.prev_id, f.prev_seq, f.prev_at,
                              f.sem_ord, f.sem_id, f.sem_dist, f.kw_ord, f.kw_id, f.tok_id, f.tok, f.tok_text, v_threshold,
                              pgmem._setting('surprise_weights'), pgmem._setting('surprise_weights_no_embedding'), v_cap) d
      join (select g.i::int as i, p_rows[g.i] as m from generate_subscripts(p_rows, 1) g(i)) u on u.i = d.ord),
  g as (
    select d.ord, d.m, d.decision, d.new_id, d.memory_ord, d.surprise, d.semantic_novelty, d.keyword_novelty, d.rarity,
           d.nearest_similarity, d.new_numbers, d.forced, d.seq,
           coalesce(d.memory_id, (select x.new_id from d x where x.ord = d.memory_ord)) as memory_id,
           coalesce(d.nearest_id, (select x.new_id from d x where x.ord = d.nearest_ord)) as nearest_id,
           coalesce(d.prev_id, (select x.new_id from d x where x.ord = d.prev_ord)) as prev_id
      from d),
  res as (
    select g.ord, g.m, g.decision, g.new_id, g.memory_id, g.surprise, g.semantic_novelty, g.keyword_novelty, g.rarity,
           g.nearest_id, g.nearest_similarity, g.seq, g.prev_id, g.memory_ord, g.forced, g.new_numbers, c.weight,
           -- engram.md step 6: importance = surprise × category weight (unless the caller knows better)
           case when (g.m).importance is not null then (g.m).importance
                else least(1.0, g.surprise * c.weight) end as importance,
           -- Fragment salience (fragment-reconstructive-memory.md, Salience Formula); novelty is
           -- the gate's semantic novelty (keyword novelty without an embedding); goal relevance is
           -- the max cosine to the active goals (pgmem.goal_relevance, 700_identity.sql; NULL
           -- without goals or embedding)
           e.emotion, coalesce(g.semantic_novelty, g.keyword_novelty) as novelty, sp.goal, sp.depth,
           -- unknown parts (no emotion given, no active goals): salience_unknown "renormalise"
           -- (default) leaves them out and renormalises the other weights; "zero" counts them as 0,
           -- the design's formula as written (see the setting's comment above)
           pgmem.salience(case when v_salience_zero then coalesce(e.emotion, 0) else e.emotion end,
                          coalesce(g.semantic_novelty, g.keyword_novelty),
                          case when v_salience_zero then coalesce(sp.goal, 0) else sp.goal end,
                          sp.depth, v_salience_w) as salience,
           jsonb_build_object(
             'surprise', round(g.surprise::numeric, 6), 'semantic_novelty', round(g.semantic_novelty::numeric, 6),
             'keyword_novelty', round(g.keyword_novelty::numeric, 6), 'rarity', round(g.rarity::numeric, 6),
             'nearest_id', g.nearest_id, 'nearest_similarity', round(g.nearest_similarity::numeric, 6),
             'threshold', v_threshold, 'category_weight', c.weight, 'with_embedding', (g.m).embedding is not null) as gate
      from g
      -- the category's weight (checked above, before any write; surprise() of an unknown one has none)
      left join lateral (select c.weight from pgmem.categories c
                          where c.category = (g.m).category and c.tenant in (v_tenant, '*')
                          order by (c.tenant = '*') limit 1) c on true
      cross join lateral (select case when (g.m).valence is null and (g.m).arousal is null then null
                                      else pgmem.emotional_intensity((g.m).valence, (g.m).arousal) end as emotion) e
      cross join lateral (select pgmem.goal_relevance((g.m).embedding, (g.m).agent_id) as goal,
                                 pgmem.processing_depth((g.m).who, (g.m).what, (g.m).happened_at, (g.m).location,
                                                        (g.m).why, (g.m).how) as depth) sp),
  out as (
    select r.*, case r.decision
      when 'duplicate' then r.gate || jsonb_build_object('decision', 'duplicate')
      when 'rejected' then r.gate || jsonb_build_object('decision', 'rejected',
        'reason', format('surprise %s is below the threshold %s', round(r.surprise::numeric, 4), v_threshold))
      when 'stored' then r.gate || jsonb_build_object('importance_source', case when (r.m).importance is null then 'surprise' else 'caller' end,
                                                      'emotion', r.emotion, 'novelty', r.novelty)
                        -- Fragment salience explained (issue 24): each part (null: unknown) and the
                        -- weights it was computed with
                        || jsonb_build_object('salience', jsonb_build_object(
                             'value', round(r.salience::numeric, 6), 'emotion', r.emotion, 'novelty', r.novelty,
                             'goal_relevance', r.goal, 'processing_depth', r.depth,
                             'unknown', case when v_salience_zero then 'zero' else 'renormalise' end,
                             'weights', (select jsonb_object_agg(k.key, round((k.v / nullif(k.total, 0))::numeric, 6))
                                           from (select w.key, w.value::text::float8 as v,
                                                        sum(w.value::text::float8) over () as total
                                                   from jsonb_each(v_salience_w) w
                                                  where v_salience_zero
                                                     or (w.key = 'emotion' and r.emotion is not null)
                                                     or (w.key = 'novelty' and r.novelty is not null)
                                                     or (w.key = 'goal' and r.goal is not null)
                                                     or (w.key = 'depth' and r.depth is not null)) k)))
                        || case when cardinality(r.new_numbers) > 0
                                then jsonb_build_object('kept_because', 'new numbers: ' || array_to_string(r.new_numbers, ' '))
                                else '{}' end
                        || jsonb_build_object('decision', 'stored', 'forced', r.forced)
      end as details
    from res r),
  ins as (
    insert into pgmem.memories as m (id, tenant, user_id, agent_id, session_id, tier, category, content, summary,
        who, what, happened_at, location, why, how, topics, entities, valence, arousal, dominance,
        importance, salience, surprise, gate, embedding, embedding_model, metadata, token_count, created_at,
        expires_at, event_key, seq, motor, sensory)
    overriding system value
    select o.new_id, v_tenant, (o.m).user_id, (o.m).agent_id, (o.m).session_id, coalesce((o.m).tier, 'episodic'),
           (o.m).category, (o.m).content, (o.m).summary, (o.m).who, (o.m).what, (o.m).happened_at, (o.m).location,
           (o.m).why, (o.m).how, pgmem._fact_topics((o.m).topics, (o.m).metadata->'facts', (o.m).user_id, v_limits),
           coalesce((o.m).entities, '{}'), (o.m).valence,
           (o.m).arousal, (o.m).dominance, o.importance, o.salience, o.surprise, o.details, (o.m).embedding,
           case when (o.m).embedding is not null then (o.m).embedding_model end, coalesce((o.m).metadata, '{}'),
           (o.m).token_count, coalesce((o.m).created_at, now()), (o.m).expires_at, (o.m).event_key,
           case when (o.m).session_id is not null then o.seq end, (o.m).motor, (o.m).sensory
      from out o where o.decision = 'stored' and not p_dry_run
     order by o.ord
    returning m.id),
  hist as (  -- duplicates and rejected candidates: in the history of the memory they were compared with
    insert into pgmem.history (tenant, memory_id, op, after, details)
    select v_tenant, coalesce(o.memory_id, o.nearest_id), case o.decision when 'duplicate' then 'duplicate' else 'reject' end,
           case o.decision
             when 'duplicate' then jsonb_build_object('content', (o.m).content, 'who', (o.m).who, 'session_id', (o.m).session_id,
                                                      'event_key', (o.m).event_key, 'created_at', coalesce((o.m).created_at, now()))
             else jsonb_build_object('content', (o.m).content, 'who', (o.m).who, 'what', (o.m).what, 'category', (o.m).category,
                                     'user_id', (o.m).user_id, 'session_id', (o.m).session_id, 'event_key', (o.m).event_key,
                                     'created_at', coalesce((o.m).created_at, now())) end,
           o.details
      from out o where o.decision in ('duplicate', 'rejected') and not p_dry_run
     order by o.ord
    returning 1)
  select array_agg(row(o.ord, case o.decision when 'stored' then o.new_id else o.memory_id end, o.decision,
                        case when o.decision = 'replayed' then coalesce(x.surprise::float8, y.surprise) else o.surprise end,
                        o.semantic_novelty, o.keyword_novelty, o.rarity,
                        case when o.decision in ('replayed', 'duplicate') then coalesce(x.importance, y.importance::real)
                             else o.importance::real end,
                        case when o.decision in ('replayed', 'duplicate') then coalesce(x.salience, y.salience::real)
                             else o.salience::real end,
                        o.nearest_id, o.nearest_similarity, case when o.decision = 'duplicate' then o.memory_id end,
                        case when o.decision = 'replayed' then jsonb_build_object('event_key', (o.m).event_key) else o.details end,
                        case when o.decision = 'stored' and not p_dry_run then o.prev_id end)::pgmem.remember_outcome
                   order by o.ord)
    into v_out
    from out o
    left join pgmem.memories x on x.id = o.memory_id and x.tenant = v_tenant and o.memory_ord is null
    left join out y on y.ord = o.memory_ord;

  if not p_dry_run then  -- the INSERT above is done: its rows are no longer marked as checked
    delete from pgmem.write_checked c where c.pid = pg_backend_pid() and c.xid = pg_current_xact_id()::text::bigint;
  end if;
  -- temporal binding to the previous memory of the same session (Fragment bindings); after the
  -- INSERT above, so that the links' tenant check (045) sees the new memories
  insert into pgmem.links (tenant, src_id, dst_id, kind, weight)
  select v_tenant, o.link_from, o.memory_id, 'temporal', 1.0 from unnest(v_out) o
   where o.link_from is not null order by o.ord
  on conflict do nothing;
  return query select * from unnest(v_out) o order by o.ord;
end $$;
comment on function pgmem._remember_core(pgmem.memories[], boolean[], text[], boolean, bigint) is
  'The surprise gate and the writes of remember, remember_many and surprise, for a batch (see the head of 100_remember.sql). Internal.';

-- Engram's surprise gate (engram.md, Surprise Detection) for one candidate, nothing stored:
-- its components and the memory it is nearest to. "Existing memories" are the active
-- memories of the same tenant and user. Semantic novelty uses the HNSW nearest neighbour (not
-- a scan); keyword novelty compares with the lexical (GIN) and semantic neighbours and the
-- most recent memories, at most surprise_lexical_pool of each; category rarity counts at most
-- rarity_count_cap memories.
create or replace function pgmem.surprise(
  content text,
  embedding vector default null,
  category text default 'episode',
  user_id text default null,
  exclude_id bigint default null)
returns table (surprise float8, semantic_novelty float8, keyword_novelty float8, rarity float8,
               nearest_id bigint, nearest_similarity float8, duplicate_id bigint)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_row pgmem.memories;
begin
  perform pgmem._check_args('surprise', jsonb_build_object('content', content, 'category', category, 'user_id', user_id));  -- sizes first (issue 27)
  embedding := pgmem._check_embedding(embedding);
  v_row.content := content; v_row.embedding := embedding; v_row.category := category; v_row.user_id := user_id;
  return query
  select c.surprise, c.semantic_novelty, c.keyword_novelty, c.rarity, c.nearest_id, c.nearest_similarity, c.duplicate_id
    from pgmem._remember_core(array[v_row], array[false], array[''], p_dry_run => true, p_exclude_id => exclude_id) c;
end $$;
comment on function pgmem.surprise(text, vector, text, text, bigint) is
  'Engram surprise of a candidate memory against the current tenant''s memories of the same user: exact duplicate, semantic novelty (HNSW nearest neighbour), keyword novelty (Jaccard), category rarity, combined 0.6/0.3/0.1 (0.8/0.2 without an embedding). Nothing is stored.';

create or replace function pgmem.remember(
  content text,
  embedding vector default null,
  who text default null,
  what text default null,
  happened_at timestamptz default null,
  location text default null,
  why text default null,
  how text default null,
  category text default 'episode',
  importance float8 default null,
  metadata jsonb default '{}',
  user_id text default null,
  agent_id text default null,
  session_id text default null,
  tier text default 'episodic',
  summary text default null,
  topics text[] default '{}',
  entities text[] default '{}',
  valence float8 default null,
  arousal float8 default null,
  dominance float8 default null,
  created_at timestamptz default null,
  expires_at timestamptz default null,
  event_key text default null,
  token_count integer default null,
  embedding_model text default null,
  force boolean default false,
  motor jsonb default null,    -- reconstructive (issue 16): Fragment content domains
  sensory jsonb default null)
returns setof pgmem.remember_result
  -- SECURITY DEFINER (sql/900_security.sql, rule 3): it writes history rows for rejected and
  -- duplicate candidates, which pgmem_app may not write; every statement filters on v_tenant
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  m pgmem.memories;
begin
  -- (issue 27) the JSON arguments' depth and the tier's size first (a small value cannot be too deep
  -- or too long: the check runs only past three comparisons); the other fields' sizes are _check_memory's
  if pg_column_size(metadata) > 64 or pg_column_size(motor) > 64 or pg_column_size(sensory) > 64 or octet_length(tier) > 64 then
    perform pgmem._check_args('remember', jsonb_build_object('metadata', metadata, 'motor', motor, 'sensory', sensory, 'tier', tier));
  end if;
  embedding := pgmem._check_embedding(embedding);  -- (before the vector(n) field would refuse it less clearly)
  m.content := content; m.embedding := embedding; m.who := who; m.what := what; m.happened_at := happened_at;
  m.location := location; m.why := why; m.how := how; m.category := coalesce(category, 'episode');
  m.importance := importance; m.metadata := coalesce(metadata, '{}'); m.user_id := user_id; m.agent_id := agent_id;
  m.session_id := session_id; m.tier := tier; m.summary := summary; m.topics := topics; m.entities := entities;
  m.valence := valence; m.arousal := arousal; m.dominance := dominance; m.created_at := created_at;
  m.expires_at := expires_at; m.event_key := event_key; m.token_count := token_count; m.embedding_model := embedding_model;
  m.motor := motor; m.sensory := sensory;  -- reconstructive (issue 16)
  return query
  select c.memory_id, c.decision, c.surprise::real, c.importance, c.salience, c.nearest_id, c.nearest_similarity::real, c.details
    from pgmem._remember_core(array[m], array[coalesce(force, false)], array['']) c;
end $$;
comment on function pgmem.remember(text, vector, text, text, timestamptz, text, text, text, text, float8, jsonb, text, text, text, text, text, text[], text[], float8, float8, float8, timestamptz, timestamptz, text, integer, text, boolean, jsonb, jsonb) is
  'Stores one memory behind Engram''s surprise gate. decision: stored | duplicate (exact duplicate in scope: existing id returned, nothing stored) | rejected (surprise below the threshold: nothing stored, recorded in history) | replayed (event_key seen before). Without an embedding the memory is queued for the worker and lexical search finds it at once.';

-- remember_many: one call for a batch (a JSON array of objects with remember()'s argument
-- names; "when"/"where" for happened_at/location). The decisions are those of one remember()
-- call per item, in order: duplicates inside the batch are caught too. At most
-- max_batch_items items (pgmem.settings).
create or replace function pgmem.remember_many(items jsonb)
returns table (ord integer, memory_id bigint, decision text, surprise real, importance real, salience real,
               nearest_id bigint, nearest_similarity real, details jsonb)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_max int := pgmem._setting_num('max_batch_items', 1000)::int;
  v_n int;
  v_bad record;
  allowed text[] := array['content', 'embedding', 'who', 'what', 'happened_at', 'when', 'location', 'where',
    'why', 'how', 'category', 'importance', 'metadata', 'user_id', 'agent_id', 'session_id', 'tier', 'summary',
    'topics', 'entities', 'valence', 'arousal', 'dominance', 'created_at', 'expires_at', 'event_key',
    'token_count', 'embedding_model', 'force', 'motor', 'sensory'];  -- motor, sensory: reconstructive (issue 16)
  v_rows pgmem.memories[];
  v_force boolean[];
  v_labels text[];
begin
  perform pgmem._check_json(items, 'items', pgmem._limit('max_batch_bytes', 33554432), 'max_batch_bytes');  -- issue 27: size, depth
  if items is null or jsonb_typeof(items) <> 'array' then
    perform pgmem._bad_input('remember_many expects a JSON array of objects');
  end if;
  v_n := jsonb_array_length(items);
  if v_n > v_max then
    perform pgmem._bad_input(format('remember_many got %s items, more than max_batch_items (%s)', v_n, v_max),
      'split the batch (MemoryClient.remember_many does, batch_size), or raise max_batch_items in pgmem.settings');
  end if;
  select e.i, jsonb_typeof(e.v) as t into v_bad from jsonb_array_elements(items) with ordinality e(v, i)
   where jsonb_typeof(e.v) <> 'object' order by e.i limit 1;
  if v_bad.i is not null then
    perform pgmem._bad_input(format('item %s of remember_many is %s, not an object', v_bad.i, v_bad.t));
  end if;
  select e.i, k into v_bad from jsonb_array_elements(items) with ordinality e(v, i), jsonb_object_keys(e.v) k
   where not k = any(allowed) order by e.i limit 1;
  if v_bad.i is not null then
    perform pgmem._bad_input(format('item %s of remember_many has an unknown key "%s"', v_bad.i, v_bad.k),
      format('known keys: %s', array_to_string(allowed, ', ')));
  end if;
  -- (issue 27, L3: a content given as a JSON object was stored as its text) text fields are strings
  select e.i, x.k, jsonb_typeof(x.v) as t into v_bad from jsonb_array_elements(items) with ordinality e(v, i), jsonb_each(e.v) x(k, v)
   where x.k in ('content', 'who', 'what', 'location', 'where', 'why', 'how', 'category', 'user_id', 'agent_id', 'session_id',
                 'tier', 'summary', 'event_key', 'embedding_model')
     and jsonb_typeof(x.v) not in ('string', 'null')
   order by e.i limit 1;
  if v_bad.i is not null then
    perform pgmem._bad_input(format('item %s of remember_many: %s must be a JSON string, got %s', v_bad.i, v_bad.k, v_bad.t),
      'pass text fields as strings (serialise structured data into metadata instead)');
  end if;
  -- a vector of the wrong dimension is _check_embedding's clear error (not the column type's)
  perform pgmem._check_embedding((e.v->>'embedding')::public.vector, format('item %s of remember_many: embedding', e.i))
     from jsonb_array_elements(items) with ordinality e(v, i) where e.v->>'embedding' is not null;
  -- each item as a memories row: remember()'s defaults, then the item's keys that are not null
  -- ("when"/"where" renamed)
  select array_agg(jsonb_populate_record(null::pgmem.memories,
                     '{"category": "episode", "tier": "episodic", "metadata": {}, "topics": [], "entities": []}'::jsonb
                     || (select coalesce(jsonb_object_agg(case x.k when 'when' then 'happened_at' when 'where' then 'location'
                                                                    else x.k end, x.v), '{}')
                           from jsonb_each(e.v - 'force') x(k, v)
                          where jsonb_typeof(x.v) <> 'null'
                            and not (x.k = 'when' and e.v ? 'happened_at') and not (x.k = 'where' and e.v ? 'location')))
                   order by e.i),
         array_agg(coalesce((e.v->>'force')::boolean, false) order by e.i),
         array_agg(format('item %s of remember_many: ', e.i) order by e.i)
    into v_rows, v_force, v_labels
    from jsonb_array_elements(items) with ordinality e(v, i);
  return query
  select c.ord, c.memory_id, c.decision, c.surprise::real, c.importance, c.salience, c.nearest_id,
         c.nearest_similarity::real, c.details
    from pgmem._remember_core(v_rows, v_force, v_labels) c;
end $$;
comment on function pgmem.remember_many(jsonb) is
  'remember() for a JSON array of items (same keys as remember()''s arguments; "when"/"where" accepted for happened_at/location), set-based: one neighbour query, one INSERT and one history statement per batch, with the decisions of one remember() call per item in order (duplicates inside the batch included). At most max_batch_items items. Returns one row per item with its position (ord).';
