"""Ecosystem (issue 26): moving a tenant to a new embedding model (``pgmem reembed``), and the
items of agent-framework sessions (the OpenAI Agents SDK's Session, sql/128_integrations.sql).

``embedding_moves`` records each move (tenant, target model, progress); ``reembed_queue``
holds the memories still to embed with the target model and, once a worker has embedded
one, its new vector: the memories keep their old vectors (and search keeps working with the
old model) until every vector of the move is ready; then one transaction swaps them all
(sql/126_reembed.sql).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

UPGRADE = r"""
create table pgmem.embedding_moves (
  id          bigint generated always as identity primary key,
  tenant      text not null,
  model       text not null,        -- the model every memory of the tenant is moved to
  state       text not null default 'running' check (state in ('running', 'done', 'cancelled')),
  total       integer not null default 0,   -- memories queued for the move (stragglers included)
  started_at  timestamptz not null default now(),
  finished_at timestamptz,
  details     jsonb not null default '{}'
);
comment on table pgmem.embedding_moves is
  'Moves of a tenant to a new embedding model (pgmem.reembed): the target model, its progress and when it finished.';
create unique index embedding_moves_running on pgmem.embedding_moves (tenant) where state = 'running';

do $$
declare dim int := (select value::text::int from pgmem.settings where tenant = '*' and key = 'embedding_dim');
begin
  execute format($t$
    create table pgmem.reembed_queue (
      memory_id  bigint primary key references pgmem.memories (id) on delete cascade,
      tenant     text not null,
      move_id    bigint not null references pgmem.embedding_moves (id) on delete cascade,
      embedding  vector(%s),   -- the new vector; null until a worker has embedded the memory
      text_hash  text,         -- md5 of the fields it was embedded from (a later edit re-queues it)
      queued_at  timestamptz not null default now()
    )$t$, dim);
end $$;
comment on table pgmem.reembed_queue is
  'Memories of a running embedding move: waiting for a worker with the target model (embedding null), or embedded and waiting for the swap.';
create index reembed_queue_pending on pgmem.reembed_queue (move_id, queued_at) where embedding is null;

-- The conversation items of an agent framework's session, as the framework gave them (JSON:
-- messages, tool calls, tool results), in order; pop and clear mark them removed (nothing is
-- deleted: removed_at). Text turns may also be remembered as memories (session_add_items).
create table pgmem.session_items (
  id          bigint generated always as identity primary key,
  tenant      text not null,
  session_id  text not null check (session_id ~ '\S' and length(session_id) <= 256),
  seq         integer not null,
  user_id     text,
  role        text,
  item        jsonb not null,
  memory_id   bigint references pgmem.memories (id) on delete set null,
  created_at  timestamptz not null default now(),
  removed_at  timestamptz,
  unique (tenant, session_id, seq)
);
comment on table pgmem.session_items is
  'Items of an agent framework''s conversation session (OpenAI Agents SDK Session: messages, tool calls and results as JSON), in order; removed_at marks the popped or cleared ones (kept, not deleted).';
create index session_items_live on pgmem.session_items (tenant, session_id, seq) where removed_at is null;
create index session_items_user on pgmem.session_items (tenant, user_id) where user_id is not null;
"""

DOWNGRADE = r"""
drop table if exists pgmem.session_items;
drop table if exists pgmem.reembed_queue;
drop table if exists pgmem.embedding_moves;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    from pgmem.migrate import drop_dependents

    drop_dependents("pgmem.session_items", "pgmem.reembed_queue", "pgmem.embedding_moves")
    run_sql(DOWNGRADE)
