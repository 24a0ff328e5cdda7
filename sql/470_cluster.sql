-- The `cluster` job: concept clusters and liquid clusters (jam-journalistic-agent-memory.md,
-- Clustering Pipeline, Liquid Memory Clustering). The numbers run in PL/Python with the
-- module python/pgmem/engine/clustering.py (stored in pgmem.py_modules; Debian's numpy and
-- scikit-learn); the bookkeeping is SQL.
--
-- A run, per tenant, goes through phases (pgmem.cluster_state), one bounded batch per call,
-- so that pgmem.run_job commits between batches and a run over a million memories never
-- holds one long transaction; a run stops between two batches once it has used
-- cluster_run_seconds, and the next run goes on where it stopped:
--   fit     (when the tenant has no cluster, or k should grow, or refit => true)
--           MiniBatchKMeans(k, batch_size 100, n_init 3, max_no_improvement 10) on a sample
--           of at most cluster_fit_sample memories (new clusters in state 'building');
--   stream  partial_fit over every memory, `batch` rows a call, in mini-batches of 100 read
--           from a cursor (skipped when the sample was every memory);
--           then the new clusters replace the old ones (old: 'retired');
--   assign  every memory to its nearest cluster, `batch` rows a call (JAM Stage 4.2);
--   update  (runs without a fit) partial_fit on the memories embedded since the last run
--           (they were assigned at write time, sql/150_cluster_assign.sql), and assignment
--           of embedded memories no cluster holds yet;
--   liquid  once per liquid step (cluster_step_hours): energy from the access log, the flow
--           of memories between clusters (`batch` memories a call); then every run: merges
--           of clusters whose centroids have cosine > .85, sizes, labels, a snapshot per
--           cluster in pgmem.cluster_steps.
-- Every change of memories.cluster_id goes through the memories triggers, so it is in
-- pgmem.history (op 'update', details {"job": "cluster", "reason": ...}); moves between
-- clusters are also rows of pgmem.cluster_moves. A second run with nothing new (within the
-- same liquid step) changes nothing.

-- Adaptive k (JAM, 3D Visualization Pipeline, Adaptive Clustering):
-- optimal_clusters = min(max(8, n // 10), 64), "8 <= k <= 64"; the setting cluster_k = a
-- number (JAM's Clustering Parameters: "Clusters: 50") fixes it. Never more than n.
create or replace function pgmem.cluster_k(n bigint, fixed integer default null) returns integer
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return case when n is null or n <= 0 then 0
              else least(coalesce(fixed, least(greatest(8, n / 10), 64)), n)::integer end;
comment on function pgmem.cluster_k(bigint, integer) is
  'How many concept clusters for n memories: JAM''s adaptive min(max(8, n / 10), 64), or the fixed number given (setting cluster_k), never more than n.';

-- A setting of a given tenant (jobs run for many tenants at once, with no session tenant).
create or replace function pgmem._tenant_setting(p_tenant text, p_key text) returns jsonb
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select s.value from pgmem.settings s
   where s.key = p_key and s.tenant in (coalesce(p_tenant, '*'), '*')
   order by (s.tenant = '*') limit 1
$$;

-- Whether the current role may ANALYZE a table (its owner, or a member of the owner role).
create or replace function pgmem._is_table_owner(p_table regclass) returns boolean
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select pg_has_role(current_user, c.relowner, 'usage') from pg_class c where c.oid = p_table
$$;

-- ------------------------------------------------------------------ PL/Python steps
-- Embeddings travel as pgvector's binary form (vector_send), one bytes object per row.

-- JAM Stage 4.1, the k-means fit of the given vectors (pure Python, engine/clustering.py; no
-- SQL in its body: pgmem._cluster_fit gathers and writes). One row per centroid: its vector
-- as text and its k-means count. The fit checks for a cancel between mini-batch steps.
create or replace function pgmem._cluster_fit_points(p_vectors bytea[], p_k integer)
returns table (centroid text, n_seen float8)
  language plpython3u volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
if "pgmem.clustering" not in GD:
    plpy.execute("select pgmem._py_load('clustering')")
mod = GD["pgmem.clustering"]
if not p_vectors:
    return []
dim = int.from_bytes(p_vectors[0][:2], "big")
centers, counts = mod.fit(mod.from_vector_bytes(list(p_vectors), dim), min(p_k, len(p_vectors)))
return [(mod.to_vector_text(c), float(w)) for c, w in zip(centers, counts)]
$$;

-- JAM Stage 4.1, "partial fit for new data" (pure Python): the centroids and their counts,
-- moved by the given vectors in mini-batches of 100. One row per centroid, in the order given.
create or replace function pgmem._cluster_partial_fit_points(p_centroids bytea[], p_counts float8[], p_vectors bytea[])
returns table (ord integer, centroid text, n_seen float8)
  language plpython3u volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
if "pgmem.clustering" not in GD:
    plpy.execute("select pgmem._py_load('clustering')")
mod = GD["pgmem.clustering"]
if not p_centroids or not p_vectors:
    return []
import numpy as np
dim = int.from_bytes(p_centroids[0][:2], "big")
C = mod.from_vector_bytes(list(p_centroids), dim)
X = mod.from_vector_bytes(list(p_vectors), dim)
centers, counts = mod.partial_fit(C, np.array(p_counts, dtype=float), [X])
return [(i + 1, mod.to_vector_text(c), float(w)) for i, (c, w) in enumerate(zip(centers, counts))]
$$;

-- JAM Stage 4.1, initial fit on a sample (every memory when there are at most p_sample).
-- Inserts k clusters in state 'building'; returns the sampling step (1: every memory was fitted).
create or replace function pgmem._cluster_fit(p_tenant text, p_k integer, p_sample integer, p_generation integer,
                                              p_energy float8)
returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_n bigint;
  v_every bigint;
  v_vecs bytea[];
begin
  select count(*) into v_n from pgmem.memories m where m.tenant = p_tenant and m.state = 'active' and m.embedding is not null;
  v_every := greatest(1, v_n / greatest(1, p_sample));
  select array_agg(public.vector_send(m.embedding) order by m.id) into v_vecs
    from pgmem.memories m
   where m.tenant = p_tenant and m.state = 'active' and m.embedding is not null
     and (v_every = 1 or (hashint8(m.id) & 2147483647) % v_every = 0);
  if coalesce(cardinality(v_vecs), 0) < p_k and v_every > 1 then
    v_every := 1;
    select array_agg(public.vector_send(m.embedding) order by m.id) into v_vecs
      from pgmem.memories m where m.tenant = p_tenant and m.state = 'active' and m.embedding is not null;
  end if;
  if v_vecs is null then
    return 0;
  end if;
  insert into pgmem.clusters (tenant, state, centroid, n_seen, generation, energy)
  select p_tenant, 'building', f.centroid::public.vector, f.n_seen, p_generation, p_energy
    from pgmem._cluster_fit_points(v_vecs, p_k) f;
  return v_every;
end $$;

-- JAM Stage 4.1, "partial fit for new data": the given memories, in mini-batches of 100, move
-- the tenant's clusters of state p_state (their centroid and k-means counts). Returns rows used.
create or replace function pgmem._cluster_partial_fit(p_tenant text, p_state text, p_ids bigint[])
returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_cids bigint[];
  v_cents bytea[];
  v_counts float8[];
  v_vecs bytea[];
begin
  select array_agg(c.id order by c.id), array_agg(public.vector_send(c.centroid) order by c.id), array_agg(c.n_seen order by c.id)
    into v_cids, v_cents, v_counts
    from pgmem.clusters c where c.tenant = p_tenant and c.state = p_state;
  if v_cids is null or p_ids is null then
    return 0;
  end if;
  select array_agg(public.vector_send(m.embedding) order by m.id) into v_vecs
    from pgmem.memories m where m.id = any(p_ids) and m.tenant = p_tenant and m.embedding is not null;
  if v_vecs is null then
    return 0;
  end if;
  update pgmem.clusters c set centroid = f.centroid::public.vector, n_seen = f.n_seen, updated_at = now()
    from pgmem._cluster_partial_fit_points(v_cents, v_counts, v_vecs) f
   where c.id = v_cids[f.ord];
  return cardinality(v_vecs);
end $$;

-- JAM, Gradient Flow Dynamics, for the given memories: each one's mean affinity to the
-- members of every active cluster (.4 co-access + .3 temporal proximity + .3 semantic,
-- engine/clustering.py), times the cluster's energy, is its pull; it moves to its strongest
-- pull when that exceeds p_flow_rate. Returns the moves; the caller applies them.
-- Memory time: happened_at when given (the event's time), else created_at.
create or replace function pgmem._cluster_flow(p_tenant text, p_ids bigint[], p_half_life_hours float8, p_flow_rate float8,
                                               p_step timestamptz default null)
returns table (memory_id bigint, from_cluster bigint, to_cluster bigint, pull float8)
  language plpython3u volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
if "pgmem.clustering" not in GD:
    plpy.execute("select pgmem._py_load('clustering')")
mod = GD["pgmem.clustering"]
import numpy as np
cl = plpy.execute(plpy.prepare("select c.id, c.energy from pgmem.clusters c where c.tenant = $1 and c.state = 'active' "
                               "order by c.id", ["text"]), [p_tenant])
if not cl or not p_ids:
    return []
pos = {r["id"]: i for i, r in enumerate(cl)}
k = len(cl)
page = plpy.execute(plpy.prepare(
    "select m.id, m.cluster_id, public.vector_send(m.embedding) b, extract(epoch from coalesce(m.happened_at, m.created_at)) / 3600.0 t "
    "from pgmem.memories m where m.id = any($1) and m.tenant = $2 and m.state = 'active' and m.embedding is not null "
    "and m.cluster_id is not null order by m.id", ["int8[]", "text"]), [p_ids, p_tenant])
if not page:
    return []
dim = int.from_bytes(page[0]["b"][:2], "big")
# the members of every cluster (unit-vector sums, sizes, times): read once per liquid step and
# kept for the step's later batches in this session, so every batch of a step is weighed
# against the membership at the start of the step
skey = ("pgmem.cluster_flow", p_tenant, p_step, tuple(r["id"] for r in cl), p_half_life_hours)
stats = GD.get("pgmem.cluster_flow.stats")
if p_step is None or stats is None or stats[0] != skey:
    members = plpy.execute(plpy.prepare(
        "select m.cluster_id, count(*) n, public.vector_send(public.sum(public.l2_normalize(m.embedding))) s, "
        "array_agg(extract(epoch from coalesce(m.happened_at, m.created_at)) / 3600.0) t "
        "from pgmem.memories m where m.tenant = $1 and m.state = 'active' and m.embedding is not null "
        "and m.cluster_id is not null group by m.cluster_id", ["text"]), [p_tenant])
    sizes = np.zeros(k)
    sums = np.zeros((k, dim))
    kernels = [mod.TimeKernel([], p_half_life_hours) for _ in range(k)]
    for r in members:
        i = pos.get(r["cluster_id"])
        if i is None:
            continue  # members of a cluster that is no longer active (the assign phase moves them)
        sizes[i] = r["n"]
        sums[i] = np.frombuffer(r["s"], dtype=">f4", count=dim, offset=4)
        kernels[i] = mod.TimeKernel([float(x) for x in r["t"]], p_half_life_hours)
    del members
    stats = (skey, sizes, sums, kernels)
    GD["pgmem.cluster_flow.stats"] = stats if p_step is not None else None
_, sizes, sums, kernels = stats
ids = [r["id"] for r in page]
row = {m: j for j, m in enumerate(ids)}
U = mod.unit_rows(mod.from_vector_bytes([r["b"] for r in page], dim))
hours = np.array([float(r["t"]) for r in page])
current = np.array([pos.get(r["cluster_id"], -1) for r in page])
co = np.zeros((len(page), k))
# co-access to each cluster's members: Jaccard of the two memories' uses (links counted by touch)
# (the links of the batch first, materialised: right after a mass assignment the statistics of
# memories.cluster_id are stale, and a plan that starts from memories would revisit them per row)
pairs = plpy.execute(plpy.prepare(
    "with p as materialized (select unnest($1::int8[]) as id), "
    "l as materialized (select p.id, l.dst_id as other, l.count from p join pgmem.links l on l.src_id = p.id and l.kind = 'co_access' "
    "      union all select p.id, l.src_id, l.count from p join pgmem.links l on l.dst_id = p.id and l.kind = 'co_access') "
    "select l.id, o.cluster_id, sum(least(1.0, l.count::float8 / nullif(a.access_count + o.access_count - l.count, 0))) s "
    "from l join pgmem.memories a on a.id = l.id join pgmem.memories o on o.id = l.other "
    "where o.tenant = $2 and o.state = 'active' and o.embedding is not null and o.cluster_id is not null "
    "group by l.id, o.cluster_id", ["int8[]", "text"]), [ids, p_tenant])
for r in pairs:
    i = pos.get(r["cluster_id"])
    if i is not None and r["s"] is not None:
        co[row[r["id"]], i] = max(0.0, float(r["s"]))
aff = mod.mean_affinity(U, hours, current, sums, sizes, kernels, co)
target, strongest = mod.flow(aff, np.array([float(r["energy"]) for r in cl]), current, p_flow_rate)
return [(ids[j], page[j]["cluster_id"], cl[int(target[j])]["id"], float(strongest[j]))
        for j in range(len(page)) if target[j] >= 0]
$$;

-- ------------------------------------------------------------------ SQL steps

-- Moves memories to clusters: p_moves is a JSON array of {memory_id, to_cluster, pull}. Rows are
-- locked in id order first, as touch() and merge do (no deadlock with them); the update's
-- history is written by the memories triggers (op update, details {job, reason, job_run_id});
-- moves between two clusters (flow, merge) are also rows of pgmem.cluster_moves.
create or replace function pgmem._cluster_move(p_tenant text, p_moves jsonb, p_reason text, p_run bigint)
returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  n integer;
  v_locked bigint[];
  v_skipped integer;
begin
  -- the rows another transaction holds (a tenant's own SELECT ... FOR UPDATE) are skipped, not
  -- waited for: one tenant's locks never stall the all-tenant job (issue 27, M1). They keep
  -- their cluster until a later run moves them; the count is in the job run's details.
  select array_agg(x.id) into v_locked
    from (select x.id from pgmem.memories x
           where x.id in (select (e->>'memory_id')::bigint from jsonb_array_elements(p_moves) e) and x.tenant = p_tenant
           order by x.id for update skip locked) x;
  v_skipped := (select count(distinct (e->>'memory_id')::bigint) from jsonb_array_elements(p_moves) e
                 where not coalesce((e->>'memory_id')::bigint = any(v_locked), false)
                   and exists (select 1 from pgmem.memories x where x.id = (e->>'memory_id')::bigint and x.tenant = p_tenant));
  if v_skipped > 0 then
    perform set_config('pgmem.cluster_skipped_locked',
                       (coalesce(nullif(current_setting('pgmem.cluster_skipped_locked', true), ''), '0')::int + v_skipped)::text, true);
  end if;
  perform pgmem._set_op('update', jsonb_build_object('job', 'cluster', 'reason', p_reason, 'job_run_id', p_run));
  with mv as (
    select (e->>'memory_id')::bigint as memory_id, (e->>'to_cluster')::bigint as to_cluster, (e->>'pull')::float8 as pull
      from jsonb_array_elements(p_moves) e
     where (e->>'memory_id')::bigint = any(v_locked)),
  upd as (
    update pgmem.memories m set cluster_id = mv.to_cluster
      from mv join pgmem.clusters c on c.id = mv.to_cluster and c.tenant = p_tenant
     where m.id = mv.memory_id and m.tenant = p_tenant and m.cluster_id is distinct from mv.to_cluster
    returning m.id, mv.to_cluster, mv.pull),
  logged as (
    insert into pgmem.cluster_moves (tenant, memory_id, from_cluster, to_cluster, reason, pull, job_run_id)
    select p_tenant, upd.id, o.cluster_id, upd.to_cluster, p_reason, upd.pull, p_run
      from upd join pgmem.memories o on o.id = upd.id  -- (o: the row as the statement began)
     where p_reason in ('flow', 'merge') and o.cluster_id is not null)
  select count(*) into n from upd;
  perform pgmem._set_op(null);
  return n;
end $$;

-- Assigns the given memories to their nearest active cluster (JAM Stage 4.2) where that
-- changes their cluster; returns how many changed.
create or replace function pgmem._cluster_assign(p_tenant text, p_ids bigint[], p_reason text, p_run bigint)
returns integer
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select pgmem._cluster_move(p_tenant, coalesce(jsonb_agg(jsonb_build_object('memory_id', x.id, 'to_cluster', n.cluster_id)), '[]'),
                             p_reason, p_run)
    from pgmem.memories x
   cross join lateral pgmem._nearest_cluster(p_tenant, x.embedding) n
   where x.id = any(p_ids) and x.tenant = p_tenant and x.embedding is not null and x.cluster_id is distinct from n.cluster_id
$$;

-- JAM, Energy Dynamics: energy = min(1, energy + .05 x accesses) for the accesses of each
-- cluster's members since the last step (pgmem.accesses), then x .99 for each step elapsed;
-- then the optional propagation between similar clusters (below).
create or replace function pgmem._cluster_energy(p_tenant text, p_steps integer, p_access_from bigint, p_access_to bigint)
returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  update pgmem.clusters c
     set energy = least(1.0, c.energy + 0.05 * coalesce(a.n, 0)) * power(0.99, p_steps), updated_at = now()
    from pgmem.clusters c2
    left join (select m.cluster_id, sum(x.count) as n  -- (a row of the access log counts its accesses)
                 from pgmem.accesses x join pgmem.memories m on m.id = x.memory_id
                where x.tenant = p_tenant and x.id > p_access_from and x.id <= p_access_to
                group by m.cluster_id) a on a.cluster_id = c2.id
   where c.id = c2.id and c.tenant = p_tenant and c.state = 'active';
  -- JAM, Real-time Updates: "energy propagation through the cluster network". The design gives
  -- no formula; pgmem's: after each step, a cluster moves the share s (setting
  -- cluster_energy_spread, 0 = off, the default) of its energy toward the mean energy of the
  -- other active clusters weighted by centroid cosine (negative cosines count 0). All clusters
  -- at once, from the energies before this statement; with s = 0 nothing changes.
  with s as (select coalesce(pgmem._tenant_setting(p_tenant, 'cluster_energy_spread')::text::float8, 0) as v),
  pair as (  -- each pair's weight, the positive cosine of the centroids, computed once
    select a.id, greatest(0.0, 1.0 - (a.centroid operator(public.<=>) b.centroid)) as w, b.energy
      from s, pgmem.clusters a join pgmem.clusters b on b.tenant = a.tenant and b.state = 'active' and b.id <> a.id
     where s.v > 0 and a.tenant = p_tenant and a.state = 'active'),
  w as (select pair.id, sum(pair.w * pair.energy) as we, sum(pair.w) as ws from pair group by pair.id)
  update pgmem.clusters c
     set energy = least(1.0, greatest(0.0, (1 - s.v) * c.energy + s.v * w.we / w.ws))
    from w, s
   where c.id = w.id and w.ws > 0;
$$;

-- JAM, Energy Dynamics: "if cosine_similarity(centroid1, centroid2) > 0.85: merge_clusters".
-- Strongest pair first, until no pair of active clusters is above the threshold. Choices
-- (the design leaves merge_clusters open): the cluster with more members survives (then
-- the older one); its centroid becomes the k-means-count-weighted mean of the two, counts
-- add up, energy is the larger of the two; the other cluster's members move to it (history
-- and cluster_moves, reason 'merge') and it is kept as state 'merged' with merged_into_cluster.
create or replace function pgmem._cluster_merge(p_tenant text, p_threshold float8, p_run bigint)
returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  p record;
  keep pgmem.clusters;
  gone pgmem.clusters;
  n integer := 0;
begin
  loop
    select a.id as a, b.id as b, 1 - (a.centroid operator(public.<=>) b.centroid) as cos into p
      from pgmem.clusters a join pgmem.clusters b on b.tenant = a.tenant and b.state = 'active' and b.id > a.id
     where a.tenant = p_tenant and a.state = 'active'
       and 1 - (a.centroid operator(public.<=>) b.centroid) > p_threshold
     order by 3 desc, a.id, b.id limit 1;
    exit when p.a is null;
    select * into keep from pgmem.clusters where id = p.a;
    select * into gone from pgmem.clusters where id = p.b;
    if (select count(*) from pgmem.memories m where m.cluster_id = gone.id and m.state = 'active')
       > (select count(*) from pgmem.memories m where m.cluster_id = keep.id and m.state = 'active') then
      select * into keep from pgmem.clusters where id = p.b;
      select * into gone from pgmem.clusters where id = p.a;
    end if;
    update pgmem.clusters c
       set centroid = case when keep.n_seen + gone.n_seen > 0
                           then (select array_agg((a * keep.n_seen + b * gone.n_seen) / (keep.n_seen + gone.n_seen) order by o)
                                   from unnest(keep.centroid::real[], gone.centroid::real[]) with ordinality u(a, b, o))::public.vector
                           else c.centroid end,
           n_seen = keep.n_seen + gone.n_seen, energy = greatest(keep.energy, gone.energy), updated_at = now()
     where c.id = keep.id;
    update pgmem.clusters c set state = 'merged', merged_into_cluster = keep.id, updated_at = now() where c.id = gone.id;
    perform pgmem._cluster_move(p_tenant,
      coalesce((select jsonb_agg(jsonb_build_object('memory_id', m.id, 'to_cluster', keep.id, 'pull', round(p.cos::numeric, 6)))
                  from pgmem.memories m where m.cluster_id = gone.id and m.tenant = p_tenant), '[]'),
      'merge', p_run);
    n := n + 1;
  end loop;
  return n;
end $$;

-- Members, label and top terms of every active cluster. Terms: words of the members' content
-- (at least 3 letters, not an English stop word) and their topics and entities, from up to
-- p_sample members per cluster (the most recent). Choice (JAM: "label from the members' top
-- terms" is issue 17's wording; the design has no formula): a term's score in a cluster is
-- the share of the cluster's sampled members that contain it x log(1 + clusters / clusters
-- containing it), so that words every cluster has do not name one. The label is the top 3.
create or replace function pgmem._cluster_labels(p_tenant text, p_sample integer)
returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare n integer;
begin
  update pgmem.clusters c set size = coalesce(s.n, 0), updated_at = now()
    from pgmem.clusters c2
    left join (select m.cluster_id, count(*)::int as n from pgmem.memories m
                where m.tenant = p_tenant and m.state = 'active' and m.cluster_id is not null group by 1) s
           on s.cluster_id = c2.id
   where c.id = c2.id and c.tenant = p_tenant and c.state in ('active', 'merged', 'retired')
     and c.size is distinct from coalesce(s.n, 0);
  with cl as (select c.id from pgmem.clusters c where c.tenant = p_tenant and c.state = 'active'),
  sample as (
    select cl.id as cluster_id, m.id, m.content, m.topics, m.entities
      from cl cross join lateral (
        select x.id, x.content, x.topics, x.entities from pgmem.memories x
         where x.cluster_id = cl.id and x.state = 'active' order by x.id desc limit p_sample) m),
  terms as (
    select distinct s.cluster_id, s.id, w.term
      from sample s cross join lateral (
        select t as term from regexp_split_to_table(lower(s.content), '[^[:alnum:]]+') t
         where length(t) >= 3 and t !~ '^[0-9]+$'
        union select lower(t) from unnest(s.topics || s.entities) t where btrim(t) <> '') w),
  words as (select distinct t.term from terms t),
  keep as (select w.term from words w where w.term ~ '\s' or numnode(plainto_tsquery('english', w.term)) > 0),
  counted as (
    select t.cluster_id, t.term, count(*)::float8 / max(sz.n) as share
      from terms t join keep k on k.term = t.term
      join (select s.cluster_id, count(*) as n from sample s group by 1) sz on sz.cluster_id = t.cluster_id
     group by t.cluster_id, t.term),
  scored as (
    select c.cluster_id, c.term,
           c.share * ln(1 + (select count(*) from cl)::float8 / count(*) over (partition by c.term)) as score
      from counted c),
  ranked as (
    select s.cluster_id, array_agg(s.term order by s.score desc, s.term) as terms
      from scored s group by s.cluster_id)
  update pgmem.clusters c
     set top_terms = r.terms[1:10], label = array_to_string(r.terms[1:3], ' · '), updated_at = now()
    from ranked r
   where c.id = r.cluster_id and (c.top_terms is distinct from r.terms[1:10]);
  get diagnostics n = row_count;
  return n;
end $$;

-- ------------------------------------------------------------------ one tenant, one batch

create or replace function pgmem._cluster_tenant(p_tenant text, p_batch integer, p_refit boolean, p_as_of timestamptz,
                                                 p_run bigint)
returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  s pgmem.cluster_state;
  v_n bigint;
  v_fixed integer := nullif(pgmem._tenant_setting(p_tenant, 'cluster_k') #>> '{}', 'adaptive')::integer;
  v_k integer;
  v_every integer;
  v_ids bigint[];
  v_count integer;
  v_changed integer := 0;
  v_steps integer;
  v_acc bigint;
  v_moves jsonb;
  v_merges integer;
  v_cursor record;
  v_cur_at timestamptz;
  v_cur_id bigint;
  v_step interval := make_interval(secs => 3600 * pgmem._tenant_setting(p_tenant, 'cluster_step_hours')::text::float8);
begin
  insert into pgmem.cluster_state (tenant) values (p_tenant) on conflict do nothing;
  select * into s from pgmem.cluster_state x where x.tenant = p_tenant for update;

  if s.phase = 'idle' then
    select count(*) into v_n from pgmem.memories m
     where m.tenant = p_tenant and m.state = 'active' and m.embedding is not null;
    if v_n = 0 then
      return jsonb_build_object('phase', 'idle', 'examined', 0, 'changed', 0, 'more', false);
    end if;
    v_k := pgmem.cluster_k(v_n, v_fixed);
    -- a fit: the first; refit => true; k should grow (adaptive: once the memories have doubled
    -- since the last fit, so that refits cost O(n) in all) or the fixed k was changed
    if p_refit or not exists (select 1 from pgmem.clusters c where c.tenant = p_tenant and c.state = 'active')
       or (v_k <> s.k and (v_fixed is not null or v_n >= 2 * s.fitted_n)) then
      delete from pgmem.clusters c where c.tenant = p_tenant and c.state = 'building';  -- an interrupted fit
      v_every := pgmem._cluster_fit(p_tenant, v_k, pgmem._tenant_setting(p_tenant, 'cluster_fit_sample')::text::int,
                                    s.generation + 1, pgmem._tenant_setting(p_tenant, 'cluster_initial_energy')::text::float8);
      select m.embedded_at, m.id into v_cursor from pgmem.memories m
       where m.tenant = p_tenant and m.embedding is not null order by m.embedded_at desc, m.id desc limit 1;
      update pgmem.cluster_state x
         set phase = 'stream', cursor_id = 0, generation = s.generation + 1, k = v_k, fitted_n = v_n,
             fitted_at = p_as_of, embed_cursor_at = v_cursor.embedded_at, embed_cursor_id = v_cursor.id,
             run_details = jsonb_build_object('fit_sample_step', v_every), updated_at = now()
       where x.tenant = p_tenant;
      if v_every = 1 then  -- every memory was in the fit: nothing to stream
        perform pgmem._cluster_swap(p_tenant, s.generation + 1);
      end if;
      return jsonb_build_object('phase', 'fit', 'k', v_k, 'examined', v_n / v_every, 'changed', 0, 'more', true);
    end if;
    update pgmem.cluster_state x set phase = 'update', updated_at = now() where x.tenant = p_tenant;
    s.phase := 'update';
  end if;

  if s.phase = 'stream' then
    v_ids := array(select m.id from pgmem.memories m
                    where m.tenant = p_tenant and m.state = 'active' and m.embedding is not null and m.id > s.cursor_id
                    order by m.id limit p_batch);
    v_count := pgmem._cluster_partial_fit(p_tenant, 'building', v_ids);
    if cardinality(v_ids) < p_batch then
      perform pgmem._cluster_swap(p_tenant, s.generation);
    else
      update pgmem.cluster_state x set cursor_id = v_ids[cardinality(v_ids)], updated_at = now() where x.tenant = p_tenant;
    end if;
    return jsonb_build_object('phase', 'stream', 'examined', v_count, 'changed', 0, 'more', true);
  end if;

  if s.phase = 'assign' then
    v_ids := array(select m.id from pgmem.memories m
                    where m.tenant = p_tenant and m.state = 'active' and m.embedding is not null and m.id > s.cursor_id
                    order by m.id limit p_batch);
    v_changed := pgmem._cluster_assign(p_tenant, v_ids, 'assign', p_run);
    if cardinality(v_ids) < p_batch and pgmem._is_table_owner('pgmem.memories') then
      -- every memory changed its cluster_id: fresh statistics for the plans of the steps after
      analyze pgmem.memories;
    end if;
    update pgmem.cluster_state x
       set phase = case when cardinality(v_ids) < p_batch then 'liquid' else 'assign' end,
           cursor_id = case when cardinality(v_ids) < p_batch then 0 else v_ids[cardinality(v_ids)] end, updated_at = now()
     where x.tenant = p_tenant;
    return jsonb_build_object('phase', 'assign', 'examined', cardinality(v_ids), 'changed', v_changed, 'more', true);
  end if;

  if s.phase = 'update' then
    -- new memories move the centroids (they joined their nearest cluster when they were embedded)
    select array_agg(q.id order by q.embedded_at, q.id), max(q.embedded_at),
           (array_agg(q.id order by q.embedded_at desc, q.id desc))[1]
      into v_ids, v_cur_at, v_cur_id
      from (select m.id, m.embedded_at from pgmem.memories m
             where m.tenant = p_tenant and m.state = 'active' and m.embedding is not null
               and (s.embed_cursor_at is null or (m.embedded_at, m.id) > (s.embed_cursor_at, s.embed_cursor_id))
             order by m.embedded_at, m.id limit p_batch) q;
    v_count := pgmem._cluster_partial_fit(p_tenant, 'active', coalesce(v_ids, '{}'));
    if v_ids is not null then
      update pgmem.cluster_state x set embed_cursor_at = v_cur_at, embed_cursor_id = v_cur_id where x.tenant = p_tenant;
    end if;
    -- embedded memories no cluster holds yet (embedded before the first fit, or while it ran)
    v_ids := array(select m.id from pgmem.memories m
                    where m.tenant = p_tenant and m.cluster_id is null and m.embedding is not null and m.state = 'active'
                    order by m.id limit p_batch);
    v_changed := pgmem._cluster_assign(p_tenant, v_ids, 'assign', p_run);
    if v_count < p_batch and cardinality(v_ids) < p_batch then
      update pgmem.cluster_state x set phase = 'liquid', cursor_id = 0, updated_at = now() where x.tenant = p_tenant;
    end if;
    return jsonb_build_object('phase', 'update', 'examined', v_count + cardinality(v_ids), 'changed', v_changed, 'more', true);
  end if;

  -- liquid: a step begins at cursor 0 (energy), flows in batches, ends with merges and labels
  if s.cursor_id = 0 then
    v_steps := case when s.step_at is null then 1
                    else floor(extract(epoch from (p_as_of - s.step_at)) / extract(epoch from v_step))::int end;
    v_steps := greatest(v_steps, 0);
    if v_steps > 0 then
      select coalesce(max(x.id), s.access_cursor) into v_acc from pgmem.accesses x where x.tenant = p_tenant;
      perform pgmem._cluster_energy(p_tenant, v_steps, s.access_cursor, v_acc);
      update pgmem.cluster_state x
         set step_at = coalesce(s.step_at + v_step * v_steps, p_as_of), access_cursor = v_acc,
             run_details = jsonb_build_object('steps', v_steps, 'accesses_from', s.access_cursor, 'accesses_to', v_acc),
             updated_at = now()
       where x.tenant = p_tenant;
    else
      update pgmem.cluster_state x set run_details = jsonb_build_object('steps', 0) where x.tenant = p_tenant;
    end if;
    select * into s from pgmem.cluster_state x where x.tenant = p_tenant;
  end if;

  if coalesce((s.run_details->>'steps')::int, 0) > 0 then
    v_ids := array(select m.id from pgmem.memories m
                    where m.tenant = p_tenant and m.state = 'active' and m.embedding is not null
                      and m.cluster_id is not null and m.id > s.cursor_id
                    order by m.id limit p_batch);
    select coalesce(jsonb_agg(to_jsonb(f)), '[]') into v_moves
      from pgmem._cluster_flow(p_tenant, v_ids,
                               pgmem._tenant_setting(p_tenant, 'cluster_temporal_half_life_hours')::text::float8,
                               pgmem._tenant_setting(p_tenant, 'cluster_flow_rate')::text::float8, s.step_at) f;
    v_changed := pgmem._cluster_move(p_tenant, v_moves, 'flow', p_run);
    if cardinality(v_ids) >= p_batch then
      update pgmem.cluster_state x
         set cursor_id = v_ids[cardinality(v_ids)],
             run_details = x.run_details || jsonb_build_object('moved', coalesce((x.run_details->>'moved')::int, 0) + v_changed),
             updated_at = now()
       where x.tenant = p_tenant;
      return jsonb_build_object('phase', 'flow', 'examined', cardinality(v_ids), 'changed', v_changed, 'more', true);
    end if;
    update pgmem.cluster_state x
       set run_details = x.run_details || jsonb_build_object('moved', coalesce((x.run_details->>'moved')::int, 0) + v_changed)
     where x.tenant = p_tenant;
  end if;

  v_merges := pgmem._cluster_merge(p_tenant, pgmem._tenant_setting(p_tenant, 'cluster_merge_cosine')::text::float8, p_run);
  perform pgmem._cluster_labels(p_tenant, pgmem._tenant_setting(p_tenant, 'cluster_label_sample')::text::int);
  select * into s from pgmem.cluster_state x where x.tenant = p_tenant;
  if coalesce((s.run_details->>'steps')::int, 0) > 0 then
    insert into pgmem.cluster_steps (tenant, cluster_id, at, size, energy, accesses, job_run_id)
    select p_tenant, c.id, s.step_at, c.size, c.energy,
           (select coalesce(sum(x.count), 0) from pgmem.accesses x join pgmem.memories m on m.id = x.memory_id
             where x.tenant = p_tenant and x.id > (s.run_details->>'accesses_from')::bigint
               and x.id <= (s.run_details->>'accesses_to')::bigint and m.cluster_id = c.id), p_run
      from pgmem.clusters c where c.tenant = p_tenant and c.state = 'active'
    on conflict (cluster_id, at) do update set size = excluded.size, energy = excluded.energy, job_run_id = excluded.job_run_id;
  end if;
  update pgmem.cluster_state x set phase = 'idle', cursor_id = 0, updated_at = now() where x.tenant = p_tenant;
  return jsonb_build_object('phase', 'liquid', 'examined', coalesce(cardinality(v_ids), 0), 'changed', v_changed + v_merges,
                            'steps', coalesce((s.run_details->>'steps')::int, 0),
                            'moved', coalesce((s.run_details->>'moved')::int, 0), 'merged', v_merges, 'more', false);
end $$;

-- The clusters a fit built replace the tenant's active ones (kept as 'retired': history and
-- the flow view refer to them); the assign phase then moves every memory to its new cluster.
create or replace function pgmem._cluster_swap(p_tenant text, p_generation integer) returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  update pgmem.clusters c set state = 'retired', updated_at = now()
   where c.tenant = p_tenant and c.state = 'active';
  update pgmem.clusters c set state = 'active', updated_at = now()
   where c.tenant = p_tenant and c.state = 'building' and c.generation = p_generation;
  update pgmem.cluster_state x set phase = 'assign', cursor_id = 0, updated_at = now() where x.tenant = p_tenant;
$$;

-- ------------------------------------------------------------------ the job

create or replace function pgmem.cluster(batch integer default 20000, tenant text default null, refit boolean default false,
                                         as_of timestamptz default null)
returns table (tenant_id text, phase text, examined bigint, changed bigint, more boolean)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._job_scope(tenant);
  v_run bigint;
  v_as_of timestamptz := coalesce(as_of, now());
  t text;
  r jsonb;
  v_more boolean := false;
  v_examined bigint := 0;
  v_changed bigint := 0;
  v_details jsonb := '{}'::jsonb;
  -- the run's time budget counts from the start of the top-level statement (the CALL of
  -- run_job that pg_cron makes, or this select): past it the run stops between two batches and
  -- the next run goes on from the tenant's phase and cursor (pgmem.cluster_state)
  v_started timestamptz := coalesce((select a.query_start from pg_stat_activity a where a.pid = pg_backend_pid()), now());
  v_budget float8 := pgmem._tenant_setting(v_tenant, 'cluster_run_seconds')::text::float8;
  v_paused text;
begin
  perform pgmem._check_args('cluster', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  perform pgmem._check_between(batch, 'batch', 100, 1000000);
  v_run := pgmem._job_begin('cluster', v_tenant, jsonb_build_object('batch', batch, 'refit', refit, 'as_of', as_of));
  if v_run is null then
    raise notice 'pgmem: cluster is already running for %; skipped', coalesce(v_tenant, 'all tenants');
    return;
  end if;
  -- the tenants with embedded memories (a loose index scan of memories_state_time) or clusters
  for t in
    with recursive ts as (
      (select m.tenant from pgmem.memories m where v_tenant is null order by m.tenant limit 1)
      union all
      select (select m.tenant from pgmem.memories m where m.tenant > ts.tenant order by m.tenant limit 1)
        from ts where ts.tenant is not null)
    select x.tenant from (select ts.tenant from ts where ts.tenant is not null
                          union select s.tenant from pgmem.cluster_state s where v_tenant is null
                          union select v_tenant where v_tenant is not null) x
     order by 1
  loop
    -- refit applies once per tenant: only while that tenant is between runs
    perform set_config('pgmem.cluster_skipped_locked', '0', true);
    r := pgmem._cluster_tenant(t, batch, refit and coalesce((select s.phase = 'idle' from pgmem.cluster_state s where s.tenant = t), true),
                               v_as_of, v_run);
    -- memories another transaction held, left where they were (issue 27, M1)
    if current_setting('pgmem.cluster_skipped_locked', true)::int > 0 then
      r := r || jsonb_build_object('skipped_locked', current_setting('pgmem.cluster_skipped_locked', true)::int);
    end if;
    tenant_id := t; phase := r->>'phase'; examined := (r->>'examined')::bigint; changed := (r->>'changed')::bigint;
    more := (r->>'more')::boolean;
    v_more := v_more or more;
    v_examined := v_examined + examined;
    v_changed := v_changed + changed;
    v_details := v_details || jsonb_build_object(t, r);
    return next;
  end loop;
  if v_more and extract(epoch from clock_timestamp() - v_started) >= v_budget then
    v_more := false;
    v_paused := format('run time budget of %s s (cluster_run_seconds) used: the next run goes on', v_budget);
  end if;
  perform pgmem._job_end(v_run, v_examined, v_changed,
    jsonb_strip_nulls(jsonb_build_object('more', v_more, 'tenants', v_details, 'paused', v_paused)));
end $$;
comment on function pgmem.cluster(integer, text, boolean, timestamptz) is
  'JAM concept and liquid clusters, one batch per call (pgmem.run_job(''cluster'') repeats it to the end of a run): k-means fit (MiniBatchKMeans, adaptive k) and partial_fit, assignment, energy from the access log, the flow of memories between clusters, merges of clusters with centroid cosine > .85, labels. One row per tenant: the phase done, rows examined and changed, and whether more remains.';

create or replace trigger cluster_moves_tenant before insert or update on pgmem.cluster_moves
  for each row execute function pgmem._check_memory_tenant('memory_id');
