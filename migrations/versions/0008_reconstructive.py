"""Reconstructive memory (issue 16): bindings, reconstruction log, identity, work queue.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
