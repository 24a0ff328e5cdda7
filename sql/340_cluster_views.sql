-- Views of the concept and liquid clusters for people and BI tools (issue 17, item 6;
-- jam-journalistic-agent-memory.md, Clustering Pipeline and Liquid Memory Clustering). Like
-- every view of pgmem they run with the reader's rights (900_security.sql makes them
-- security_invoker): row-level security keeps them inside the session's tenant.

-- The reader role gets exactly the columns its views read (900_security.sql), and never a
-- memory's content or embedding: the confidence and the typical members, which need them,
-- come from these two SECURITY DEFINER functions (audited: each filters on the session's
-- tenant; pgmem_admin sees every tenant), which return those and nothing else.

-- JAM Stage 4.2: confidence = 1 / (1 + Euclidean distance to the centroid), computed now
-- (centroids move with partial_fit and merges). NULL for a memory without a cluster, or
-- of another tenant.
create or replace function pgmem.cluster_confidence(memory_id bigint) returns float8
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select 1.0 / (1.0 + (m.embedding operator(public.<->) c.centroid))
    from pgmem.memories m join pgmem.clusters c on c.id = m.cluster_id and c.tenant = m.tenant
   where m.id = cluster_confidence.memory_id
     and (m.tenant = (select pgmem.current_tenant()) or (select pgmem._is_admin()))
$$;
comment on function pgmem.cluster_confidence(bigint) is
  'JAM concept-assignment confidence of a memory: 1 / (1 + Euclidean distance to its cluster''s centroid), now; NULL without a cluster.';

-- The n active members nearest a cluster's centroid (its most typical memories), with the
-- first 200 characters of their content and their confidence.
create or replace function pgmem.cluster_top_members(cluster_id bigint, n integer default 5) returns jsonb
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  -- (content only for logins that may read it: pgmem_reader may not, SECURITY.md; issue 27, L2)
  select coalesce(jsonb_agg(jsonb_build_object('id', x.id, 'content', case when pgmem._reads_content() then left(x.content, 200) end,
                                               'confidence', round((1.0 / (1.0 + x.d))::numeric, 4)) order by x.d, x.id), '[]')
    from (select m.id, m.content, m.embedding operator(public.<->) c.centroid as d
            from pgmem.clusters c
            join pgmem.memories m on m.cluster_id = c.id and m.tenant = c.tenant
           where c.id = cluster_top_members.cluster_id and m.state = 'active' and m.embedding is not null
             and (c.tenant = (select pgmem.current_tenant()) or (select pgmem._is_admin()))
           order by 3, m.id limit greatest(0, least(coalesce(n, 5), 100))) x
$$;
comment on function pgmem.cluster_top_members(bigint, integer) is
  'The n (at most 100) active members nearest a cluster''s centroid: id, the first 200 characters of the content (NULL for a pgmem_reader login, which may not read content), confidence.';

-- Each active memory with its cluster, label and confidence.
create or replace view pgmem.cluster_members as
select m.id as memory_id, m.tenant, m.cluster_id, c.label, pgmem.cluster_confidence(m.id) as confidence,
       m.created_at, m.access_count
  from pgmem.memories m
  join pgmem.clusters c on c.id = m.cluster_id
 where m.state = 'active';
comment on view pgmem.cluster_members is
  'Each active memory''s cluster, label and confidence 1 / (1 + distance to the centroid) (JAM concept assignment), computed at read time.';

-- Clusters with their members nearest the centroid (the most typical ones).
create or replace view pgmem.cluster_overview as
select c.id as cluster_id, c.tenant, c.state, c.label, c.top_terms, c.size, c.energy::float8 as energy,
       c.n_seen, c.generation, c.merged_into_cluster, c.created_at, c.updated_at,
       case when c.state = 'active' then pgmem.cluster_top_members(c.id) else '[]' end as top_members
  from pgmem.clusters c;
comment on view pgmem.cluster_overview is
  'Concept clusters: state, label and top terms, size (active members), energy (liquid clusters), k-means count, and the five members nearest the centroid.';

-- Cluster flow over time: memories moved between clusters per day (liquid flow and merges).
create or replace view pgmem.cluster_flow as
select date_trunc('day', v.moved_at) as day, v.tenant, v.reason, v.from_cluster, f.label as from_label,
       v.to_cluster, t.label as to_label, count(*) as moves, avg(v.pull)::float8 as avg_pull
  from pgmem.cluster_moves v
  left join pgmem.clusters f on f.id = v.from_cluster
  left join pgmem.clusters t on t.id = v.to_cluster
 group by 1, 2, 3, 4, 5, 6, 7;
comment on view pgmem.cluster_flow is
  'Liquid cluster flow by day: how many memories moved from one cluster to another (reason flow or merge), with the mean pull (merges: the centroids'' cosine).';

-- Size, energy and accesses of each cluster after each liquid step.
create or replace view pgmem.cluster_energy as
select s.at, s.tenant, s.cluster_id, c.label, c.state, s.size, s.energy::float8 as energy, s.accesses
  from pgmem.cluster_steps s
  join pgmem.clusters c on c.id = s.cluster_id;
comment on view pgmem.cluster_energy is
  'Each cluster''s size, energy and accesses after each liquid step (energy + .05 per access, x .99 per step): the clusters over time.';
