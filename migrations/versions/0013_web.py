"""Web (issue 25): per-tenant API keys and the tables pgmem serve needs.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
