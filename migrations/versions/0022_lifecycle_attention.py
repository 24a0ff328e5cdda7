"""The tenant's own clock and the attention log (issue 36).

* ``accesses_tenant_time``: a tenant's latest retrieval or use without reading its whole access
  log. The nightly archive and prune read each tenant's clock, when its memory was last in use
  (sql/420_prune_archive.sql, ``pgmem._tenant_clock``), not the wall clock.
* ``pgmem.attention_log`` (jam-journalistic-agent-memory.md, Attention Mechanism; the audit's
  row J34): one row per response of ``pgmem.search_attention``, the memories JAM's attention
  weighed and their weights, in rank order. Append-only as ``access_log`` is (the app may insert
  and read its tenant's rows, never update or delete them); row-level security from its tenant
  column (sql/900_security.sql); ``export_user`` and ``erase_user`` cover it (500_privacy.sql);
  read by the view ``pgmem.attention_weights`` (280_attention.sql).

Revision ID: 0022
Revises: 0020
Create Date: 2026-12-07
"""
from pgmem.migrate import drop_dependents, run_sql

revision = "0022"
down_revision = "0020"
branch_labels = None
depends_on = None

UPGRADE = r"""
create index if not exists accesses_tenant_time on pgmem.accesses (tenant, accessed_at desc);

create table pgmem.attention_log (
  id         bigint generated always as identity primary key,
  tenant     text not null,
  at         timestamptz not null default now(),
  source     text not null check (source ~ '^[a-z][a-z0-9_]{0,31}$'),
  query_id   uuid,
  scale      float8,
  memory_ids bigint[] not null check (cardinality(memory_ids) between 1 and 1000),
  weights    float8[] not null,
  check (cardinality(weights) = cardinality(memory_ids))
);
comment on table pgmem.attention_log is
  'JAM attention per response (append-only): the memories pgmem.attention weighed for one search_attention call and their softmax weights, in rank order.';
create index attention_log_tenant on pgmem.attention_log (tenant, id);
"""

DOWNGRADE = r"""
drop table if exists pgmem.attention_log;
drop index if exists pgmem.accesses_tenant_time;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    drop_dependents("pgmem.attention_log")
    run_sql(DOWNGRADE)
