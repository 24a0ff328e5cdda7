"""Reliability (issue 27): bounded calls, fair queue, erase and export of every table.

Reserved in the revision chain so that work on each concern can land in any order. The
bounded calls, the argument limits, erase and export, and the Lows need no one-off DDL: their
functions and settings are in the idempotent lane (sql/010_util.sql, sql/015_limits.sql,
sql/500_privacy.sql, ...), re-applied after every upgrade. (The fair queue and the jobs that
skip locked rows, M1-M2, are revision 0018's.)

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
