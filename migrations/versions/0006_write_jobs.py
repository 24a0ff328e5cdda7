"""Write path and jobs (issues 13, 14): history per statement, vectors in a table of their own
under the HNSW index with insertion deferred to a job (STORAGE.md), job locks the application
roles cannot take, job runs that survive the failure they record, the gate's lock rows.

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

-- Vectors for nearest-neighbour search in a table of their own, insertion into the HNSW graph
-- deferred to the `index` job (STORAGE.md; sql/125_vectors.sql, 040's triggers, 440_index.sql).
-- memories.embedding stays the source of truth; memory_vectors holds exactly the active,
-- embedded memories that have been indexed, vector_queue the ones waiting for it.
do $$
declare dim int := (select value::text::int from pgmem.settings where tenant = '*' and key = 'embedding_dim');
begin
  execute format($t$
    create table pgmem.memory_vectors (
      memory_id  bigint primary key references pgmem.memories (id) on delete cascade,
      tenant     text not null,
      user_scope text not null,  -- coalesce(user_id, ''): the gate and merge compare within a user
      embedding  vector(%s) not null
    )$t$, dim);
end $$;
comment on table pgmem.memory_vectors is
  'The active, embedded memories under the HNSW index (nearest-neighbour search); kept in step with pgmem.memories by its triggers, filled from pgmem.vector_queue by the index job.';
create table pgmem.vector_queue (
  memory_id bigint primary key references pgmem.memories (id) on delete cascade,
  tenant    text not null,
  queued_at timestamptz not null default now()
);
comment on table pgmem.vector_queue is
  'Active, embedded memories waiting for the index job to put them under the HNSW index (pgmem._neighbours searches them exactly meanwhile).';
create index vector_queue_tenant on pgmem.vector_queue (tenant, queued_at);
-- what is already there is indexed now (the graph is built once, after the rows are in)
insert into pgmem.memory_vectors (memory_id, tenant, user_scope, embedding)
select m.id, m.tenant, coalesce(m.user_id, ''), m.embedding from pgmem.memories m
 where m.state = 'active' and m.embedding is not null;
drop index if exists pgmem.memories_embedding_hnsw;
create index memory_vectors_hnsw on pgmem.memory_vectors using hnsw (embedding vector_cosine_ops)
  with (m = 16, ef_construction = 64);
analyze pgmem.memory_vectors;

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

-- remember()'s result type (was created by the idempotent SQL when missing), and the old
-- remember() signature with real-typed numbers (replaced by float8 ones before 0006).
do $$ begin
  if to_regtype('pgmem.remember_result') is null then
    create type pgmem.remember_result as (memory_id bigint, decision text, surprise real, importance real,
      salience real, nearest_id bigint, nearest_similarity real, details jsonb);
  end if;
end $$;
comment on type pgmem.remember_result is 'What remember() returns for one memory.';
drop function if exists pgmem.remember(text, vector, text, text, timestamptz, text, text, text, text, real, jsonb, text, text, text, text, text, text[], text[], real, real, real, timestamptz, timestamptz, text, integer, text, boolean);

-- What the gate (pgmem._remember_core, sql/100_remember.sql) returns for each item of a batch.
create type pgmem.remember_outcome as (ord integer, memory_id bigint, decision text, surprise float8,
  semantic_novelty float8, keyword_novelty float8, rarity float8, importance real, salience real, nearest_id bigint,
  nearest_similarity float8, duplicate_id bigint, details jsonb,
  link_from bigint);  -- the session's previous memory, linked to a stored one
comment on type pgmem.remember_outcome is 'The surprise gate''s outcome for one item of a batch (internal to remember, remember_many, surprise).';

-- One writer at a time per (tenant, user scope) in remember/remember_many: the gate of a
-- concurrent batch must see what this one keeps. Row locks of this table (taken by pgmem's
-- functions only; no application role has a privilege on it), not advisory locks, whose keys
-- any login can take.
create table pgmem.write_locks (
  tenant text not null,
  scope  text not null,   -- user_id, '' for memories without one
  primary key (tenant, scope)
);
comment on table pgmem.write_locks is
  'One row per (tenant, user scope) that remember/remember_many lock while they gate and write a batch: concurrent writes to one scope take turns.';

-- The backend that runs a job batch: run_job writes the row first, in its own transaction,
-- so a batch killed with its backend leaves a 'running' row whose backend is gone
-- (job_status shows it as interrupted; the next run_job marks it failed).
alter table pgmem.job_runs add column pid integer;

-- merge_duplicates' batch of memories without an embedding, by (created_at, id): without this
-- (small: only those waiting for the worker) every batch read all 1,000,000 rows (1.8 s at 1M).
create index memories_unembedded on pgmem.memories (created_at, id) where embedding is null and state = 'active';
drop function if exists pgmem._job_lock_key(text, text);  -- (advisory lock keys: replaced by job_locks)
"""

DOWNGRADE = r"""
drop function if exists pgmem._remember_core(pgmem.memories[], boolean[], text[], boolean, bigint);
drop type if exists pgmem.remember_outcome;
drop index if exists pgmem.memories_unembedded;
drop table if exists pgmem.write_locks;
-- job_status reads job_runs.pid: dropped here, recreated by the idempotent SQL of the revision
-- downgraded to
drop view if exists pgmem.job_status;
alter table pgmem.job_runs drop column if exists pid;
drop table if exists pgmem.job_locks;
drop table if exists pgmem.vector_queue, pgmem.memory_vectors;
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
