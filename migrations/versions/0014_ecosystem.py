"""Ecosystem (issue 26): embedding dimension and model moves, integrations' tables.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
