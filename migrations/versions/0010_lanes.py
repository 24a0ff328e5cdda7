"""Packaging lanes (issue 18): one-off changes moved out of the idempotent sql/ lane.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
