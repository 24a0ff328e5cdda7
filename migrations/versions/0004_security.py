"""Tenancy and security (issue 14): role-to-tenant grants, signed tenant claims, least privilege.

Reserved in the revision chain so that work on each concern can land in any order; empty
until that work fills it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql  # noqa: F401

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
