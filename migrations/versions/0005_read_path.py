"""Read path (issues 12, 13): lexical statistics per tenant, event time, read-path indexes.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
