-- Concept assignment at write time (jam-journalistic-agent-memory.md, Stage 4.2): a memory
-- that gets an embedding joins the nearest active cluster of its tenant (Euclidean distance,
-- as JAM's euclidean_distances), with confidence 1 / (1 + distance). The confidence is not
-- stored: centroids move (partial_fit, merges), so it is computed when read, from the
-- memory's current distance to its cluster's centroid (pgmem.cluster_members). The clusters themselves
-- are made and moved by the `cluster` job (sql/470_cluster.sql); until a tenant's first run
-- there is no cluster and cluster_id stays NULL (the job assigns those memories).
-- Cost on the write path: one look-up among at most 64 centroids (k <= 64) per embedded row.

-- The nearest active cluster of a tenant to a vector.
create or replace function pgmem._nearest_cluster(p_tenant text, p_embedding public.vector)
returns table (cluster_id bigint, distance float8)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select c.id, c.centroid operator(public.<->) p_embedding
    from pgmem.clusters c
   where c.tenant = p_tenant and c.state = 'active'
   order by c.centroid operator(public.<->) p_embedding, c.id
   limit 1
$$;
comment on function pgmem._nearest_cluster(text, vector) is
  'The nearest active cluster of a tenant to a vector and its Euclidean distance (JAM Stage 4.2).';

-- JAM Stage 4.2, assign_concept: the nearest centre; confidence = 1 / (1 + distance).
-- SECURITY DEFINER (audited, 900_security.sql): _nearest_cluster is private; every statement
-- filters on the caller's tenant.
create or replace function pgmem.assign_cluster(embedding public.vector)
returns table (cluster_id bigint, distance float8, confidence float8, label text)
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select n.cluster_id, n.distance, 1.0 / (1.0 + n.distance), c.label
    from pgmem._nearest_cluster(pgmem._require_tenant(), pgmem._check_embedding(assign_cluster.embedding)) n
    join pgmem.clusters c on c.id = n.cluster_id and c.tenant = pgmem._require_tenant()
$$;
comment on function pgmem.assign_cluster(vector) is
  'JAM concept assignment: the current tenant''s nearest active cluster to an embedding, its Euclidean distance and confidence 1 / (1 + distance). No row before the first run of the cluster job.';

-- Runs after memories_before (triggers fire in name order), so tenant and embedding are
-- checked. A memory whose embedding is new joins its nearest cluster; a cluster_id written
-- by hand must name a cluster of the memory's own tenant.
create or replace function pgmem._memories_cluster() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare r record;
begin
  if new.embedding is not null and (tg_op = 'INSERT' or new.embedding::real[] is distinct from old.embedding::real[]) then
    -- pgmem._nearest_cluster's statement, inline: PL/pgSQL caches its plan (the SQL function,
    -- with its SET clause, was planned on every call: 70 µs of every row remember inserted)
    select c.id as cluster_id into r
      from pgmem.clusters c
     where c.tenant = new.tenant and c.state = 'active'
     order by c.centroid operator(public.<->) new.embedding, c.id
     limit 1;
    if r.cluster_id is not null then
      new.cluster_id := r.cluster_id;
      return new;
    end if;
  end if;
  if new.cluster_id is not null and (tg_op = 'INSERT' or new.cluster_id is distinct from old.cluster_id)
     and not exists (select 1 from pgmem.clusters c where c.id = new.cluster_id and c.tenant = new.tenant) then
    raise exception 'memories.cluster_id = % refers to a cluster that does not belong to tenant "%"', new.cluster_id, new.tenant
      using errcode = '42501';
  end if;
  return new;
end $$;
comment on function pgmem._memories_cluster() is
  'Trigger: a memory that gets an embedding joins its tenant''s nearest active cluster (JAM Stage 4.2); a cluster_id set by hand must be one of the tenant''s clusters.';

create or replace trigger memories_cluster
  before insert or update of embedding, cluster_id on pgmem.memories
  for each row when (new.embedding is not null or new.cluster_id is not null) execute function pgmem._memories_cluster();
