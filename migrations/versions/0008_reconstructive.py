"""Reconstructive memory (issue 16, fragment-reconstructive-memory.md): binding indexes and
the `supersedes` kind, motor and sensory content, the reconstruction log, identity (traits,
beliefs, goals, snapshots) and the priority work queue.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""
from pgmem.migrate import drop_dependents, run_sql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- ------------------------------------------------------------------ bindings
-- Fragment's bindings are pgmem.links. A newer memory that contradicts an older one (a moved
-- date, a new price) supersedes it: reconstruct() suppresses or flags the older one.
alter table pgmem.links drop constraint if exists links_kind_check;
alter table pgmem.links add constraint links_kind_check
  check (kind in ('temporal', 'semantic', 'causal', 'co_access', 'merged', 'concept', 'supersedes'));
-- spread() follows the strongest bindings of each kind of a memory first, from either end:
-- with these indexes it reads at most fan-out rows per kind, however many bindings a hub has.
create index links_src_kind_weight on pgmem.links (src_id, kind, weight desc);
create index links_dst_kind_weight on pgmem.links (dst_id, kind, weight desc);
create index links_tenant on pgmem.links (tenant, kind);

-- concept bindings: memories sharing entities (only rows that have entities are indexed)
create index memories_entities on pgmem.memories using gin (entities) where entities <> '{}';

-- ------------------------------------------------------------------ content domains
-- fragment-reconstructive-memory.md, Content Domains: "motor": {...} (action-related) and
-- "sensory": {...} (perceptual), both optional. Semantic = embedding, emotional = valence/
-- arousal/dominance and temporal = created_at/seq/session_id are columns already.
alter table pgmem.memories
  add column motor jsonb check (motor is null or jsonb_typeof(motor) = 'object'),
  add column sensory jsonb check (sensory is null or jsonb_typeof(sensory) = 'object');
create index memories_motor on pgmem.memories using gin (motor jsonb_path_ops) where motor is not null;
create index memories_sensory on pgmem.memories using gin (sensory jsonb_path_ops) where sensory is not null;
-- the read path's query record carries them as filters (sql/200_query.sql, 203_candidates.sql)
alter type pgmem.query add attribute motor jsonb, add attribute sensory jsonb;
-- remember() takes motor and sensory (sql/100_remember.sql): its old signature goes
drop function if exists pgmem.remember(text, vector, text, text, timestamptz, text, text, text, text, float8, jsonb,
  text, text, text, text, text, text[], text[], float8, float8, float8, timestamptz, timestamptz, text, integer, text, boolean);

-- ------------------------------------------------------------------ reconstruction log
-- fragment-reconstructive-memory.md, Variance and Certainty: every reconstruction of a query
-- is kept under the query's hash; certainty = 1 / (1 + variance) over them.
create table pgmem.reconstructions (
  id          bigint generated always as identity primary key,
  tenant      text not null,
  query_hash  uuid not null,
  query_text  text,
  user_id     text,
  k           integer not null,
  member_ids  bigint[] not null,
  scores      real[] not null,
  certainty   real,
  params      jsonb not null default '{}',
  created_at  timestamptz not null default clock_timestamp()
);
comment on table pgmem.reconstructions is
  'The reconstruction log: the members of every strand reconstruct() assembled, keyed by the query''s hash (certainty is computed over them).';
create index reconstructions_query on pgmem.reconstructions (tenant, query_hash, id desc);
create index reconstructions_user on pgmem.reconstructions (tenant, user_id) where user_id is not null;

-- ------------------------------------------------------------------ identity
-- fragment-reconstructive-memory.md, Identity Model: traits (high inertia), beliefs with
-- evidence (medium), goals (low); snapshots are the history of the self-concept. An identity
-- belongs to a tenant and an agent ('' = the tenant's agent).
create table pgmem.identity_traits (
  tenant       text not null,
  agent_id     text not null default '',
  name         text not null check (name ~ '^\S' and char_length(name) <= 128),
  value        float8 not null check (value between 0 and 1),
  inertia      float8 not null check (inertia between 0 and 1),
  observations integer not null default 1,
  created_at   timestamptz not null default clock_timestamp(),
  updated_at   timestamptz not null default clock_timestamp(),
  primary key (tenant, agent_id, name)
);
comment on table pgmem.identity_traits is 'Identity traits: stable characteristics (0..1), updated as an EMA with high inertia.';

create table pgmem.identity_beliefs (
  tenant       text not null,
  agent_id     text not null default '',
  key          text not null check (key ~ '^\S' and char_length(key) <= 128),
  statement    text not null check (statement ~ '\S' and char_length(statement) <= 1000),
  confidence   float8 not null check (confidence between 0 and 1),
  inertia      float8 not null check (inertia between 0 and 1),
  evidence     bigint[] not null default '{}',
  observations integer not null default 1,
  created_at   timestamptz not null default clock_timestamp(),
  updated_at   timestamptz not null default clock_timestamp(),
  primary key (tenant, agent_id, key, statement)
);
comment on table pgmem.identity_beliefs is
  'Identity beliefs: competing statements per key, each with an EMA confidence (medium inertia) and its evidence (memory ids); the held belief of a key is its most confident statement.';
create index identity_beliefs_evidence on pgmem.identity_beliefs using gin (evidence);

create table pgmem.identity_goals (
  tenant       text not null,
  agent_id     text not null default '',
  key          text not null check (key ~ '^\S' and char_length(key) <= 128),
  goal         text not null check (goal ~ '\S' and char_length(goal) <= 2000),
  embedding    vector(@EMBEDDING_DIM@),
  priority     float8 not null default 1 check (priority between 0 and 1),
  inertia      float8 not null check (inertia between 0 and 1),
  state        text not null default 'active' check (state in ('active', 'achieved', 'dropped')),
  observations integer not null default 1,
  created_at   timestamptz not null default clock_timestamp(),
  updated_at   timestamptz not null default clock_timestamp(),
  primary key (tenant, agent_id, key)
);
comment on table pgmem.identity_goals is
  'Identity goals: active objectives with an embedding (goal relevance in salience), updated as an EMA with low inertia.';

create table pgmem.identity_snapshots (
  id        bigint generated always as identity primary key,
  tenant    text not null,
  agent_id  text not null default '',
  taken_at  timestamptz not null default clock_timestamp(),
  reason    text not null,
  identity  jsonb not null
);
comment on table pgmem.identity_snapshots is
  'The history of the self-concept: the whole identity of an agent after every change (and on request); identity_at(as_of) reads it.';
create index identity_snapshots_at on pgmem.identity_snapshots (tenant, agent_id, taken_at desc, id desc);

-- ------------------------------------------------------------------ work queue
-- fragment-reconstructive-memory.md, Engine Goal Queue: QUERY 0, ENCODE 1, REFLECT 2,
-- MAINTENANCE 3, IDLE 4; the runner (pgmem.work) takes the highest priority (lowest number) first.
create table pgmem.work_queue (
  id          bigint generated always as identity primary key,
  tenant      text not null,
  priority    smallint not null check (priority between 0 and 4),
  task        text not null check (task ~ '^[a-z][a-z0-9_]{0,31}$'),
  memory_ids  bigint[] not null default '{}',
  params      jsonb not null default '{}' check (jsonb_typeof(params) = 'object'),
  enqueued_at timestamptz not null default clock_timestamp(),
  not_before  timestamptz not null default now(),
  attempts    integer not null default 0,
  last_error  text
);
comment on table pgmem.work_queue is
  'Work items waiting for pgmem.work(): priority (0 QUERY .. 4 IDLE), task, memory ids and parameters.';
create index work_queue_next on pgmem.work_queue (priority, not_before, id);
create index work_queue_tenant_task on pgmem.work_queue (tenant, task);
"""

DOWNGRADE = r"""
drop table if exists pgmem.work_queue, pgmem.identity_snapshots, pgmem.identity_goals, pgmem.identity_beliefs,
  pgmem.identity_traits, pgmem.reconstructions;
drop index if exists pgmem.memories_motor, pgmem.memories_sensory, pgmem.memories_entities,
  pgmem.links_src_kind_weight, pgmem.links_dst_kind_weight, pgmem.links_tenant;
alter type pgmem.query drop attribute if exists motor, drop attribute if exists sensory;
alter table pgmem.memories drop column if exists motor, drop column if exists sensory;
delete from pgmem.links where kind = 'supersedes';
alter table pgmem.links drop constraint if exists links_kind_check;
alter table pgmem.links add constraint links_kind_check
  check (kind in ('temporal', 'semantic', 'causal', 'co_access', 'merged', 'concept'));
"""


def upgrade() -> None:
    from alembic import op

    dim = op.get_bind().connection.driver_connection.execute(
        "select value::text from pgmem.settings where tenant = '*' and key = 'embedding_dim'").fetchone()[0]
    run_sql(UPGRADE.replace("@EMBEDDING_DIM@", str(int(dim))))


def downgrade() -> None:
    # views and functions of sql/ depend on these tables and columns (work_queue_status, the
    # identity_* functions returning a table's row, ...): they go first; the idempotent lane
    # recreates them on the next upgrade
    drop_dependents("pgmem.work_queue", "pgmem.identity_snapshots", "pgmem.identity_goals", "pgmem.identity_beliefs",
                  "pgmem.identity_traits", "pgmem.reconstructions", "pgmem.memories.motor", "pgmem.memories.sensory")
    run_sql(DOWNGRADE)
