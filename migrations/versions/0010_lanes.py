"""Packaging lanes (issue 18): one-off changes that belong in a revision, not in sql/.

Dead code found by the issue's review, removed once:
* ``pgmem._py_check(text)``: a loader check nothing called (sql/240_build_context.sql no
  longer creates it; an upgraded database must lose it too, tests/test_upgrade.py);
* ``pgmem.history.job_run_id``: never written; jobs record their run in ``details->>'job_run_id'``;
* the profile method ``write``: allowed by the check of ``pgmem.profiles.method`` but no
  function reads a profile of that method.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql(r"""
drop function if exists pgmem._py_check(text);

alter table pgmem.history drop column if exists job_run_id;

alter table pgmem.profiles drop constraint if exists profiles_method_check;
alter table pgmem.profiles add constraint profiles_method_check
  check (method in ('search', 'activate', 'recall'));
""")


def downgrade() -> None:
    run_sql(r"""
alter table pgmem.profiles drop constraint if exists profiles_method_check;
alter table pgmem.profiles add constraint profiles_method_check
  check (method in ('search', 'activate', 'recall', 'write'));

alter table pgmem.history add column if not exists job_run_id bigint;
""")
