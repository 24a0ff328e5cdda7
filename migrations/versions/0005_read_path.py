"""Read path (issues 12, 13): the typed query record every ranking reads, and the row type of
search's hits; drops the string-building functions of the read path that the query record
replaces.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""
from pgmem.migrate import run_sql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- The query of one call of search, search_exact, activate or recall, built once by the shared
-- preamble pgmem._query() (sql/200_query.sql) and read by the candidate set and by every signal
-- function (sql/202_signals.sql, sql/203_candidates.sql). Fields a ranking does not use are NULL.
create type pgmem.query as (
  -- who asks, when, and how many
  ranking         text,         -- search | activate | recall
  tenant          text,
  as_of           timestamptz,
  k               integer,
  exact           boolean,      -- every eligible memory is a candidate (search_exact)
  n               integer,      -- candidates of each index branch (HNSW, lexical)
  recent_n        integer,      -- candidates of the recent HNSW branch (0: off)
  recent_since    timestamptz,  -- the recent branch: memories created since
  -- what is asked
  query_text      text,
  embedding       vector,
  tsq             tsquery,      -- every lexeme of the text, OR-ed (query_tsquery)
  probe           tsquery,      -- the lexical candidate branch's query (lexical_probe)
  lexemes         text[],       -- the distinct lexemes of the text
  actor           text,
  location        text,
  -- how it is ranked: the profile, its parameters, the effective weights (a signal the query
  -- cannot have weighs 0, the others are rescaled to sum 1)
  profile         text,
  params          jsonb,
  w_semantic      float8,       -- search (JAM)
  w_lexical       float8,
  w_recency       float8,       -- search (JAM), recall (Engram)
  w_actor         float8,
  w_spatial       float8,
  w_usage         float8,
  w_embedding     float8,       -- activate (Shadow)
  w_metadata      float8,
  w_summary       float8,
  w_temporal      float8,
  w_relevance     float8,       -- recall (Engram)
  w_importance    float8,
  w_access        float8,
  half_life       float8,       -- days: JAM recency, Shadow temporal, Engram importance decay
  usage_half_life float8,       -- days: JAM usage
  actor_mismatch  float8,       -- JAM actor signal of another actor
  lexical_mode    text,         -- JAM lexical: coverage | rank
  max_access      float8,       -- the tenant's largest access_count (JAM usage)
  recency_window  float8,       -- days: Engram linear recency
  access_cap      float8,       -- Engram access frequency
  threshold       float8,       -- Shadow activation threshold
  keys            text[],       -- Shadow metadata keys (topics, entities)
  tokens          text[],       -- the query's token set (Shadow summary, Engram keyword fallback)
  -- which memories are eligible (the filters)
  states          text[],
  ids             bigint[],
  user_ids        text[],
  agent_ids       text[],
  session_ids     text[],
  whos            text[],
  categories      text[],
  tiers           text[],
  locations       text[],
  created_after   timestamptz,
  created_before  timestamptz,
  metadata        jsonb
);
comment on type pgmem.query is
  'One call of a ranking (search, activate, recall): the question, its effective weights and parameters, and its filters, built once by pgmem._query().';

-- One row of search()/search_exact(). Created by sql/200_search.sql before this revision
-- existed: kept when present.
do $$ begin
  if to_regtype('pgmem.search_hit') is null then
    create type pgmem.search_hit as (
      id bigint, score float8,
      semantic float8, lexical float8, recency float8, actor float8, spatial float8, usage float8,
      content text, summary text, who text, what text, happened_at timestamptz, location text, why text, how text,
      category text, tier text, user_id text, agent_id text, session_id text, created_at timestamptz,
      access_count integer, importance real, metadata jsonb);
  end if;
end $$;

-- search, activate and recall assembled their statements from SQL strings; the query record
-- and the signal functions replace them (sql/2xx)
drop function if exists pgmem._search_sql(text, boolean);   -- (in the order of their dependencies)
drop function if exists pgmem._lexical_order_sql();
drop function if exists pgmem._signal_sql(text);
drop function if exists pgmem._candidates_sql(text);
drop function if exists pgmem._candidates_sql(text, text);
drop function if exists pgmem._candidates_sql(text, text, text);
drop function if exists pgmem._filter_sql(jsonb);
"""

DOWNGRADE = r"""
drop type if exists pgmem.query cascade;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    run_sql(DOWNGRADE)
