"""The retrieval log without a WAL flush per search (issue 24, item 1: the recording's cost).

Every search, activate and recall appends one row to ``pgmem.access_log`` (sql/212_access_log.sql).
That INSERT made a read a writing transaction: its commit waited for a WAL flush, which was
most of what the recording cost (2.05 ms a search at 100,000 and 5.6 ms at 1,000,000 memories,
p50 with minus without, `make bench`, 2026-11-27), not the insert. An unlogged table writes no
WAL, and a transaction that wrote only unlogged tables commits without waiting for a flush.

What it gives up: after a crash the log is empty, so the retrievals and uses not folded yet (the
``access`` job folds every minute) are lost. They are statistics about use, not memories (no row
of history refers to them). A standby does not receive the log, and the read path on a standby
records nothing (pgmem._record_access) anyway.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27
"""
from pgmem.migrate import run_sql

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql("alter table pgmem.access_log set unlogged")


def downgrade() -> None:
    run_sql("alter table pgmem.access_log set logged")
