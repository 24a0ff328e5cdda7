"""Concept and liquid clusters, 3-D map, retrieval judgements (issue 17).

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
