"""Living memory, lifecycle and documents (issue 24): Shadow's lifecycle, knowledge-base documents.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
