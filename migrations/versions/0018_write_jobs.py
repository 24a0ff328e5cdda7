"""The write path and the jobs at their floors (issue 23), and jobs one tenant cannot stall (issue 27, M1-M3).

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
