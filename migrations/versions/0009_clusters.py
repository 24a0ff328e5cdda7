"""Concept and liquid clusters, 3-D map, retrieval judgements (issue 17;
jam-journalistic-agent-memory.md: Clustering Pipeline, Liquid Memory Clustering, 3D
Visualization, Diversity and Performance Metrics).

Tables: clusters (centroid, k-means counts, size, energy, label), cluster_state (where the
`cluster` job of each tenant stands), cluster_moves (every flow/merge/refit move, for the flow
view), cluster_steps (size and energy of each cluster after each liquid step), memory_coords
(3-D coordinates per memory and method), eval_queries / eval_judgements / eval_runs
(retrieval metrics). memories.cluster_id refers to pgmem.clusters.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""
from pgmem.migrate import drop_dependents, run_sql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- One row per cluster of a tenant. centroid is the k-means centre (moved by partial_fit on new
-- memories and by merges); membership is memories.cluster_id, which the liquid flow changes.
create table pgmem.clusters (
  id          bigint generated always as identity primary key,
  tenant      text not null,
  state       text not null default 'active' check (state in ('building', 'active', 'merged', 'retired')),
  centroid    vector not null,
  n_seen      float8 not null default 0 check (n_seen >= 0),
  size        integer not null default 0 check (size >= 0),
  energy      real not null default 0.5 check (energy between 0 and 1),
  label       text,
  top_terms   text[] not null default '{}',
  generation  integer not null default 1,
  merged_into_cluster bigint references pgmem.clusters (id),
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);
create index clusters_tenant_state on pgmem.clusters (tenant, state);
comment on table pgmem.clusters is
  'Concept clusters (JAM Clustering Pipeline): k-means centroid and counts, members, energy (liquid clusters), label from the members'' top terms.';

alter table pgmem.memories add constraint memories_cluster_fk foreign key (cluster_id)
  references pgmem.clusters (id) on delete set null;
create index memories_cluster on pgmem.memories (cluster_id) where cluster_id is not null;
-- the job's sweep of embedded memories that no cluster holds yet
create index memories_unclustered on pgmem.memories (tenant, id)
  where cluster_id is null and embedding is not null and state = 'active';

create table pgmem.cluster_state (
  tenant         text primary key,
  phase          text not null default 'idle'
                 check (phase in ('idle', 'stream', 'assign', 'update', 'liquid')),
  cursor_id      bigint not null default 0,
  generation     integer not null default 0,
  k              integer,
  fitted_n       bigint not null default 0,
  fitted_at      timestamptz,
  step_at        timestamptz,
  access_cursor  bigint not null default 0,
  embed_cursor_at timestamptz,
  embed_cursor_id bigint,
  run_details    jsonb not null default '{}',
  updated_at     timestamptz not null default now()
);
comment on table pgmem.cluster_state is 'Where the cluster job of each tenant stands (phase, cursors, last fit and step).';

create table pgmem.cluster_moves (
  id           bigint generated always as identity primary key,
  tenant       text not null,
  memory_id    bigint not null references pgmem.memories (id) on delete cascade,
  from_cluster bigint references pgmem.clusters (id),
  to_cluster   bigint references pgmem.clusters (id),
  reason       text not null check (reason in ('flow', 'merge', 'refit')),
  pull         real,
  job_run_id   bigint,
  moved_at     timestamptz not null default now()
);
create index cluster_moves_tenant_time on pgmem.cluster_moves (tenant, moved_at);
create index cluster_moves_memory on pgmem.cluster_moves (memory_id);
comment on table pgmem.cluster_moves is 'Every move of a memory from one cluster to another (liquid flow, merge, refit), for the cluster flow view.';

create table pgmem.cluster_steps (
  tenant     text not null,
  cluster_id bigint not null references pgmem.clusters (id) on delete cascade,
  at         timestamptz not null,
  size       integer not null,
  energy     real not null,
  accesses   bigint not null default 0,
  job_run_id bigint,
  primary key (cluster_id, at)
);
create index cluster_steps_tenant_time on pgmem.cluster_steps (tenant, at);
comment on table pgmem.cluster_steps is 'Size and energy of each cluster after each liquid step (cluster flow over time).';

create table pgmem.memory_coords (
  tenant      text not null,
  memory_id   bigint not null references pgmem.memories (id) on delete cascade,
  method      text not null check (method in ('pca', 'tsne', 'umap')),
  x           real not null,
  y           real not null,
  z           real not null,
  computed_at timestamptz not null default now(),
  primary key (memory_id, method)
);
create index memory_coords_tenant on pgmem.memory_coords (tenant, method);
comment on table pgmem.memory_coords is '3-D coordinates of memories for the map (PCA, t-SNE, UMAP).';

create table pgmem.eval_queries (
  tenant          text not null,
  query           text not null check (query ~ '\S'),
  query_embedding vector,
  created_at      timestamptz not null default now(),
  primary key (tenant, query)
);
comment on table pgmem.eval_queries is 'Queries of the retrieval judgements, with their embedding when one is known.';

create table pgmem.eval_judgements (
  tenant     text not null,
  query      text not null,
  memory_id  bigint not null references pgmem.memories (id) on delete cascade,
  relevance  real not null default 1 check (relevance >= 0 and relevance <= 10),
  judged_at  timestamptz not null default now(),
  primary key (tenant, query, memory_id),
  foreign key (tenant, query) references pgmem.eval_queries (tenant, query) on delete cascade on update cascade
);
create index eval_judgements_memory on pgmem.eval_judgements (memory_id);
comment on table pgmem.eval_judgements is 'Graded relevance of memories to queries (0 = not relevant): the ground truth of P@K and NDCG.';

create table pgmem.eval_runs (
  id          bigint generated always as identity primary key,
  tenant      text not null,
  run_at      timestamptz not null default now(),
  query       text not null,
  method      text not null,
  k           integer not null,
  retrieved   bigint[] not null,
  relevant    integer not null,
  judged      integer not null,
  precision_at_k float8 not null,
  ndcg        float8 not null,
  ild         float8
);
create index eval_runs_tenant_time on pgmem.eval_runs (tenant, run_at);
comment on table pgmem.eval_runs is 'One row per judged query per evaluation: retrieved ids, P@K, NDCG@K, ILD.';
"""

DOWNGRADE = r"""
drop table if exists pgmem.eval_runs, pgmem.eval_judgements, pgmem.eval_queries, pgmem.memory_coords,
  pgmem.cluster_steps, pgmem.cluster_moves, pgmem.cluster_state;
drop index if exists pgmem.memories_unclustered;
drop index if exists pgmem.memories_cluster;
alter table pgmem.memories drop constraint if exists memories_cluster_fk;
update pgmem.memories set cluster_id = null where cluster_id is not null;
drop table if exists pgmem.clusters;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    # views and functions of sql/ depend on these tables (cluster_members, cluster_flow,
    # eval_by_day, ...): they go first; the idempotent lane recreates them on the next upgrade
    drop_dependents("pgmem.clusters", "pgmem.cluster_state", "pgmem.cluster_moves", "pgmem.cluster_steps",
                  "pgmem.memory_coords", "pgmem.eval_queries", "pgmem.eval_judgements", "pgmem.eval_runs")
    run_sql(DOWNGRADE)
