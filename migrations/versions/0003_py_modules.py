"""In-database Python modules: the source of python/pgmem/engine/*.py, which PL/Python
functions load (PL/Python runs the server's system Python, which cannot import the
client's virtual environment). Filled by the idempotent step after every upgrade.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""
from pgmem.migrate import run_sql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql(r"""
create table pgmem.py_modules (
  name       text primary key check (name ~ '^[a-z_][a-z0-9_]*$'),
  source     text not null,
  sha256     text not null,
  updated_at timestamptz not null default now()
);
comment on table pgmem.py_modules is 'Source of the pure-Python engine modules that PL/Python functions import (code, not tenant data).';
""")


def downgrade() -> None:
    run_sql("drop table if exists pgmem.py_modules;")
