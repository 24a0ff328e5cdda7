"""Retrieval quality round 3 (issue 29): the fields the default search's new parts read.

* ``pgmem.query``: ``w_context`` (the weight of the context signal: a memory read together
  with the turn before it, sql/202_signals.sql ``_jam_context``) and ``neighbour_far`` (the
  share of its score the second neighbour along the links passes on; 0 = the first neighbours
  only, as before).
* ``pgmem.search_hit``: ``context``, the context signal of a returned memory (appended: callers
  read search's rows by name).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

UPGRADE = r"""
do $$
declare a text;
begin
  foreach a in array array['w_context float8', 'neighbour_far float8'] loop
    if not exists (select 1 from pg_attribute where attrelid = 'pgmem.query'::regclass
                     and attname = split_part(a, ' ', 1) and not attisdropped) then
      execute format('alter type pgmem.query add attribute %s', a);
    end if;
  end loop;
  if not exists (select 1 from pg_attribute where attrelid = 'pgmem.search_hit'::regclass
                   and attname = 'context' and not attisdropped) then
    alter type pgmem.search_hit add attribute context float8;
  end if;
end $$;
"""

DOWNGRADE = r"""
alter type pgmem.search_hit drop attribute if exists context;
alter type pgmem.query drop attribute if exists w_context, drop attribute if exists neighbour_far;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    run_sql(DOWNGRADE)
