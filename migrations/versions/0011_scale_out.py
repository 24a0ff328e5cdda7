"""Scale-out (issue 19): replication and shard support objects.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
