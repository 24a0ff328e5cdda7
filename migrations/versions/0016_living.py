"""Memory that learns from use (issue 24): the append-only log of retrievals and uses.

* ``pgmem.access_log``: one row per ranking call (kind ``retrieval``: what search, activate and
  recall returned) and per use (kind ``use``: what build_context, context_for and the MCP context
  tool packed into a context, and explicit feedback through ``touch``), with the memory ids as an
  array. The read path only appends here: it never takes a row lock on memories. The job
  ``access`` (sql/212_access_log.sql) folds the rows into the access log proper
  (``pgmem.accesses``) and, for uses, into memories' access_count and last_accessed_at.
* ``pgmem.query``: ``superseded_factor`` and ``current_only`` (current beats stale: a memory a newer
  one supersedes is lowered, or left out).
* ``pgmem.accesses.count``: the fold writes one row per memory, kind and batch with how many
  times it was retrieved or used then (a search a second over ten results would otherwise add
  864,000 rows a day); Fragment's rehearsal counts each of them.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26
"""
from pgmem.migrate import drop_dependents, run_sql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

UPGRADE = r"""
create table pgmem.access_log (
  id       bigint generated always as identity primary key,
  tenant   text not null,
  at       timestamptz not null default now(),
  kind     text not null check (kind in ('retrieval', 'use')),
  source   text not null check (source ~ '^[a-z][a-z0-9_]{0,31}$'),
  ids      bigint[] not null check (cardinality(ids) between 1 and 1000),
  query_id uuid
);
comment on table pgmem.access_log is
  'What the rankings returned (retrieval) and what was packed into a context or marked used (use), appended by the read path and folded by the job access into pgmem.accesses and memories'' access counts.';
create index access_log_tenant on pgmem.access_log (tenant, id);

alter table pgmem.accesses add column count integer not null default 1 check (count >= 1);

-- the query record: current beats stale (sql/202_signals.sql, _superseded)
alter type pgmem.query add attribute superseded_factor float8, add attribute current_only boolean;
comment on column pgmem.accesses.count is
  'How many times the memory was retrieved or used in this row (the fold of pgmem.access_log writes one row per memory, kind and batch).';
"""

DOWNGRADE = r"""
alter type pgmem.query drop attribute if exists superseded_factor, drop attribute if exists current_only;
alter table pgmem.accesses drop column if exists count;
drop table if exists pgmem.access_log;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    drop_dependents("pgmem.access_log", "pgmem.accesses.count", "pgmem.query.superseded_factor",
                    "pgmem.query.current_only")
    run_sql(DOWNGRADE)
