"""Read path (issues 12, 13): the typed query record every ranking reads, and the row type of
search's hits; drops the string-building functions of the read path that the query record
replaces.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""
from pgmem.migrate import drop_dependents, run_sql

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
  lexemes         text[],       -- the distinct lexemes of the text (without the names of actors)
  terms           tsquery[],    -- the same lexemes, one tsquery each, rarest first
  idf             float8[],     -- BM25's inverse document frequency of each term (pgmem.lexicon)
  avg_len         float8,       -- BM25: the average length (distinct lexemes) of the memories
  actors          text[],       -- the stored actors (who) the text names, for the actor signal
  time_from       timestamptz,  -- the time window a date or phrase of the text names
  time_to         timestamptz,
  time_month      integer,      -- ... or a month of any year ("in June")
  time_tau        float8,       -- days: the window's soft edge
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
  w_time          float8,       -- search: the question's time window
  w_session       float8,       -- search: the best score of the memory's session
  w_neighbour     float8,       -- search: the best score of the memory's neighbours (links)
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
  lexical_mode    text,         -- JAM lexical: coverage | rank | bm25
  bm25_k1         float8,
  bm25_b          float8,
  neighbour_links text[],       -- the kinds of pgmem.links whose ends are neighbours
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

-- One row of search()/search_exact(): the score, each signal, the memory. (sql/205_search.sql
-- created an older version before this revision existed: replaced; the functions that return
-- it are re-created by the idempotent step.)
drop type if exists pgmem.search_hit cascade;
create type pgmem.search_hit as (
  id bigint, score float8,
  semantic float8, lexical float8, recency float8, actor float8, spatial float8, usage float8,
  time float8, session float8, neighbour float8,
  content text, summary text, who text, what text, happened_at timestamptz, location text, why text, how text,
  category text, tier text, user_id text, agent_id text, session_id text, created_at timestamptz,
  access_count integer, importance real, metadata jsonb);

-- Lexical statistics per tenant, kept current on write (sql/201_lexical.sql): for BM25's inverse
-- document frequencies and the lexical candidate query, instead of pg_stats, which counts every
-- tenant's words (issue 14) and cannot say how rare a word is within one tenant (issue 12).
-- scope '' = the tenant's active memories, 'user:<user_id>' = one user's, 'who' = the actors
-- (lexeme = the who value). Lexeme '' of a scope counts the memories themselves (df) and their
-- summed length (len, in distinct lexemes). Writers only append to lexicon_delta (no hot rows
-- for common lexemes under concurrent writers); pgmem.fold_lexicon() folds it into lexicon;
-- readers add the two.
create table pgmem.lexicon (
  tenant  text not null,
  scope   text not null,
  lexeme  text not null,
  df      bigint not null default 0,
  len     bigint not null default 0,
  primary key (tenant, scope, lexeme)
);
comment on table pgmem.lexicon is
  'Per tenant (and user, and actor) document frequencies of lexemes among active memories, folded from lexicon_delta.';
create table pgmem.lexicon_delta (
  id      bigint generated always as identity primary key,
  tenant  text not null,
  scope   text not null,
  lexeme  text not null,
  df      bigint not null,
  len     bigint not null default 0
);
create index lexicon_delta_key on pgmem.lexicon_delta (tenant, scope, lexeme);
comment on table pgmem.lexicon_delta is
  'Changes to pgmem.lexicon appended by the triggers on memories; pgmem.fold_lexicon() folds them.';

-- the statistics of the memories already stored
insert into pgmem.lexicon (tenant, scope, lexeme, df, len)
select m.tenant, s.scope, x.lexeme, count(*), 0
  from pgmem.memories m
 cross join lateral (values (''), ('user:' || m.user_id)) s(scope)
 cross join lateral unnest(tsvector_to_array(m.tsv)) x(lexeme)
 where m.state = 'active' and s.scope is not null
 group by 1, 2, 3;
insert into pgmem.lexicon (tenant, scope, lexeme, df, len)
select m.tenant, s.scope, '', count(*), sum(length(m.tsv))
  from pgmem.memories m cross join lateral (values (''), ('user:' || m.user_id)) s(scope)
 where m.state = 'active' and s.scope is not null
 group by 1, 2;
insert into pgmem.lexicon (tenant, scope, lexeme, df, len)
select m.tenant, 'who', m.who, count(*), 0 from pgmem.memories m
 where m.state = 'active' and m.who is not null group by 1, 3;

-- search, activate and recall assembled their statements from SQL strings; the query record
-- and the signal functions replace them (sql/2xx)
drop function if exists pgmem._search_sql(text, boolean);   -- (in the order of their dependencies)
drop function if exists pgmem._lexical_order_sql();
drop function if exists pgmem._signal_sql(text);
drop function if exists pgmem._candidates_sql(text);
drop function if exists pgmem._candidates_sql(text, text);
drop function if exists pgmem._candidates_sql(text, text, text);
drop function if exists pgmem._filter_sql(jsonb);
drop function if exists pgmem._candidate_tsquery(text, vector);
drop function if exists pgmem.fold_lexicon(integer);          -- the job's signature: (batch, tenant)   -- lexical_probe reads pgmem.lexicon now

-- activate and build_context take the profile, actor and location arguments search takes
-- (issue 14); their old signatures go
drop function if exists pgmem.activate(text, vector, text, text[], text[], text, float8, integer, jsonb, timestamptz, jsonb);
drop function if exists pgmem.activate(text, vector, text, text[], text[], text, float8, integer, jsonb, timestamptz, jsonb, uuid);
drop function if exists pgmem._activate(text, vector, text, text[], text[], text, float8, integer, jsonb, timestamptz, jsonb);
drop function if exists pgmem.context_threshold(text);
drop function if exists pgmem.build_context(text, vector, integer, integer, float8, text, jsonb, jsonb, timestamptz,
                                            integer, integer, integer, integer);
"""

DOWNGRADE = r"""
drop table if exists pgmem.lexicon_delta, pgmem.lexicon;
drop type if exists pgmem.query cascade;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    # the sql/ lane's functions over the lexicon (recreated by the next upgrade) go first
    drop_dependents("pgmem.lexicon_delta", "pgmem.lexicon")
    run_sql(DOWNGRADE)
