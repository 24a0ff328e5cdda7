"""Living memory (issue 24): retrieval and use log, supersession, Shadow's lifecycle.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
