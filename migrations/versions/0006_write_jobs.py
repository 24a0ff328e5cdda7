"""Write path and jobs (issues 13, 14): set-based surprise gate, job storage and indexes.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
