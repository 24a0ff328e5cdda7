"""Lifecycle: adaptive activation thresholds (per tenant and context type) with their
change log, relevance feedback, the activation log it refers to, and job cursors.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""
from pgmem.migrate import drop_dependents, run_sql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- Shadow's ThresholdManager (shadow-memory-system.md): tuned thresholds override the profile.
create table pgmem.thresholds (
  tenant       text not null,
  context_type text not null check (context_type ~ '^[a-z][a-z0-9_]{0,31}$'),
  threshold    real not null check (threshold between 0 and 1),
  updated_at   timestamptz not null default now(),
  primary key (tenant, context_type)
);

create table pgmem.threshold_changes (
  id           bigint generated always as identity primary key,
  tenant       text not null,
  context_type text not null,
  old_value    real,
  new_value    real not null,
  false_positive_rate real,
  false_negative_rate real,
  feedback_count integer,
  reason       text not null,
  job_run_id   bigint,
  changed_at   timestamptz not null default now()
);
create index threshold_changes_tenant_time on pgmem.threshold_changes (tenant, changed_at desc);

-- What activate(..., query_id => ...) showed: the rows feedback refers to.
create table pgmem.activation_log (
  tenant       text not null,
  query_id     uuid not null,
  memory_id    bigint not null references pgmem.memories (id) on delete cascade,
  context_type text not null,
  score        real not null,
  threshold    real not null,
  activated    boolean not null,
  logged_at    timestamptz not null default now(),
  primary key (query_id, memory_id)
);
create index activation_log_memory on pgmem.activation_log (memory_id);

create table pgmem.feedback (
  id           bigint generated always as identity primary key,
  tenant       text not null,
  memory_id    bigint not null references pgmem.memories (id) on delete cascade,
  query_id     uuid,
  relevant     boolean not null,
  context_type text,
  activated    boolean,
  score        real,
  created_at   timestamptz not null default now(),
  tuned_at     timestamptz
);
create index feedback_tenant_pending on pgmem.feedback (tenant, context_type) where tuned_at is null;

-- Where incremental jobs resume (e.g. merge compares only memories embedded since its last run).
create table pgmem.job_state (
  tenant     text not null,
  job        text not null,
  cursor_at  timestamptz,
  cursor_id  bigint,
  updated_at timestamptz not null default now(),
  primary key (tenant, job)
);

create index memories_embedded_at on pgmem.memories (embedded_at, id) where embedding is not null;
"""

DOWNGRADE = r"""
drop index if exists pgmem.memories_embedded_at;
drop table if exists pgmem.job_state, pgmem.feedback, pgmem.activation_log, pgmem.threshold_changes, pgmem.thresholds;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    # the sql/ lane's views of these tables (retrieval_success reads feedback) go first
    drop_dependents("pgmem.job_state", "pgmem.feedback", "pgmem.activation_log", "pgmem.threshold_changes",
                    "pgmem.thresholds")
    run_sql(DOWNGRADE)
