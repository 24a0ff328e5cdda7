"""The write path and the jobs at their floors (issue 23), and jobs one tenant cannot stall (issue 27, M1-M3).

* pgmem.write_checked: the marker pgmem._remember_core sets while it inserts the rows it has
  validated, so that the memories trigger does not validate them a second time. The
  application roles have no privilege on it: a plain INSERT cannot claim to be validated.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

UPGRADE = r"""
create unlogged table pgmem.write_checked (
  pid integer not null,  -- the backend inserting
  xid xid8 not null,     -- in this transaction
  primary key (pid, xid)
);
comment on table pgmem.write_checked is
  'Set by pgmem._remember_core for the length of its INSERT: the rows it inserts were validated item by item, and the memories trigger does not check them again. No application role has a privilege on it.';
alter table pgmem.write_checked enable row level security;
"""

DOWNGRADE = r"""
drop table if exists pgmem.write_checked;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    run_sql(DOWNGRADE)
