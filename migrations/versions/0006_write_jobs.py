"""Write path and jobs (issues 13, 14): history per statement, the HNSW index on active
memories only, job locks the application roles cannot take, and job runs that survive the
failure they record.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- History and the embedding queue are written by statement-level triggers now
-- (sql/040_memory_triggers.sql: memories_after_insert/_update/_delete); the row-level one goes.
drop trigger if exists memories_after on pgmem.memories;
drop function if exists pgmem._memories_after();

-- The HNSW index holds the active memories only. Every reader of it asks for state = 'active'
-- (search, activate, recall, the surprise gate, merge), and a job that archives, prunes or
-- merges a memory changes only its state: with a partial index the new row version is not
-- inserted into the graph again (at 1,000,000 memories an HNSW insertion costs milliseconds;
-- bench/README.md). A restored memory goes back into the graph.
drop index if exists pgmem.memories_embedding_hnsw;
create index memories_embedding_hnsw on pgmem.memories using hnsw (embedding vector_cosine_ops)
  with (m = 16, ef_construction = 64) where state = 'active';

-- Job locks (sql/400_jobs.sql). One row per (scope, job): a batch locks its row (FOR UPDATE
-- SKIP LOCKED: a second batch is skipped), the jobs that change memories share the row
-- ('*', 'maintenance') and wait for it at most job_lock_timeout_ms, and a run of run_job
-- (several transactions) leaves its backend in holder_pid so that a second run is skipped.
-- The application roles have no privilege on this table, so unlike an advisory lock key they
-- cannot take these locks and starve the jobs (issue 14, "Job denial by advisory lock").
create table pgmem.job_locks (
  tenant       text not null,  -- the job's scope: a tenant, or '*' (all tenants; and 'maintenance')
  job          text not null,
  holder_pid   integer,        -- run_job holding the job between its transactions
  holder_since timestamptz,    -- that backend's start: a pid reused later is not the holder
  run_id       bigint,
  updated_at   timestamptz not null default now(),
  primary key (tenant, job)
);
comment on table pgmem.job_locks is
  'Locks of the maintenance jobs (row locks, and the run_job holding a job between its transactions). Only the jobs (pgmem_admin) use it: the application roles cannot take these locks.';

-- The backend that runs a job batch: run_job writes the row first, in its own transaction,
-- so a batch killed with its backend leaves a 'running' row whose backend is gone
-- (job_status shows it as interrupted; the next run_job marks it failed).
alter table pgmem.job_runs add column pid integer;
drop function if exists pgmem._job_lock_key(text, text);  -- (advisory lock keys: replaced by job_locks)
"""

DOWNGRADE = r"""
alter table pgmem.job_runs drop column if exists pid;
drop table if exists pgmem.job_locks;
drop index if exists pgmem.memories_embedding_hnsw;
create index memories_embedding_hnsw on pgmem.memories using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64);
drop trigger if exists memories_after_insert on pgmem.memories;
drop trigger if exists memories_after_update on pgmem.memories;
drop trigger if exists memories_after_delete on pgmem.memories;
drop function if exists pgmem._memories_after_insert(), pgmem._memories_after_update(), pgmem._memories_after_delete();
-- (the row-level memories_after trigger and its function come back with the idempotent SQL of
-- the revision downgraded to, which defines them)
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    run_sql(DOWNGRADE)
