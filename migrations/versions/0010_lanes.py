"""Packaging lanes (issue 18): one-off changes that belong in a revision, not in sql/.

One-off changes that lived in the idempotent lane (sql/), where they ran on every upgrade; each
is a no-op on a database installed from v0.1.0 and is kept here for databases older than it:
* the data fix of candidate_pool's built-in default (200 before the recent branch of search(),
  bench/README.md L7, L12; a value a user changed stays);
* the drop of activate()'s signature from before ``query_id`` (sql/220_activate.sql).

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
update pgmem.settings set value = '100' where tenant = '*' and key = 'candidate_pool' and value = '200';
drop function if exists pgmem.activate(text, vector, text, text[], text[], text, float8, integer, jsonb, timestamptz, jsonb);

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
