"""Layered memory (issue 15): profile facts, conversations, intent and policy rules, threads, insights.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
