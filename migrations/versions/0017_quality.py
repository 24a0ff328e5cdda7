"""Retrieval quality round 3 (issue 29).

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
