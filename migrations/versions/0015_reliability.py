"""Reliability (issue 27): bounded calls, fair queue, erase and export of every table.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

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
