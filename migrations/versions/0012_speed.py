"""The read path at the speed of its indexes (issue 23): recent vectors, write path, jobs.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
