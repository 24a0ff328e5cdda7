"""The agent loop (issue 32): what context_for gives an agent equals what search finds.

* ``pgmem.query``:
  - ``not_ids`` and ``not_categories``: the filters ``exclude_ids`` and ``exclude_category``.
    A memory they name is no candidate of any ranking, so it shapes no other memory's signals
    (the best lexical score that BM25 divides by, the session and neighbour windows).
    context_for excludes the message itself, the turns of its history window, and the chat's
    own questions and answers.
  - ``metadata_path``: the filter ``metadata_path``, a SQL/JSON path predicate over a memory's
    metadata (what mem0's filter operators translate to).
  - ``conversation_factor``: the share of its score a question or an answer that an agent
    loop stored (category ``question`` or ``answer``) keeps in search, so that the chat's
    own turns do not outrank statements of fact. It is 1 when the question asks about the
    conversation itself ("what did you tell me about ...").

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""
from pgmem.migrate import run_sql

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

UPGRADE = r"""
do $$
declare a text;
begin
  foreach a in array array['not_ids bigint[]', 'not_categories text[]', 'conversation_factor float8',
                           'metadata_path jsonpath'] loop
    if not exists (select 1 from pg_attribute where attrelid = 'pgmem.query'::regclass
                     and attname = split_part(a, ' ', 1) and not attisdropped) then
      execute format('alter type pgmem.query add attribute %s', a);
    end if;
  end loop;
end $$;
"""

DOWNGRADE = r"""
alter type pgmem.query drop attribute if exists not_ids, drop attribute if exists not_categories,
  drop attribute if exists conversation_factor, drop attribute if exists metadata_path;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    run_sql(DOWNGRADE)
