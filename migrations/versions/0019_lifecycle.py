"""Living memory, lifecycle and documents (issue 24): knowledge-base documents, the indexes
the designs ask for.

* ``pgmem.documents`` and ``pgmem.document_chunks`` (layered-memory-architecture.md: the
  knowledge_base intent retrieves "knowledge base excerpts", its ``document_chunks`` table): a
  document ingested is split into chunks, each with its text, token count, optional embedding
  and a generated tsvector, under their own HNSW and GIN indexes (sql/680_documents.sql).
  Row-level security comes from their tenant column (sql/900_security.sql).
* HNSW on ``pgmem.messages.embedding`` (the design: "All vector columns use HNSW indexing";
  context_for's history pruning and Q&A history order a user's messages by distance to the
  query). ``threads.centroid`` is ordered only among one conversation's active threads (at most
  thread_max_active, 12) and ``conversations.topic_vector`` by no query: no index for them.
* A salience index (fragment-reconstructive-memory.md, Storage Layer: "Indexes: created_at,
  initial_salience"): a tenant's active memories in order of salience, without a sort.

Shadow's lifecycle itself needs no new table: it is sql/420_prune_archive.sql, 425_compact.sql.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26
"""
from alembic import op

from pgmem.migrate import drop_dependents, run_sql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

UPGRADE = r"""
create table pgmem.documents (
  id           bigint generated always as identity primary key,
  tenant       text not null,
  user_id      text,  -- NULL: the tenant's knowledge base, for every user; else one user's own document
  title        text not null check (title ~ '\S' and length(title) <= 500),
  source       text check (length(source) <= 2000),
  content_hash uuid not null,
  metadata     jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object'),
  chunks       integer not null default 0,
  tokens       integer not null default 0,
  state        text not null default 'active' check (state in ('active', 'deleted')),
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  unique (tenant, id)
);
comment on table pgmem.documents is
  'Knowledge-base documents (layered design, knowledge_base intent): title, source, the hash of the content, chunk and token counts; state deleted = out of retrieval, restorable. The text lives in pgmem.document_chunks.';
create unique index documents_tenant_hash on pgmem.documents (tenant, (coalesce(user_id, '')), content_hash) where state = 'active';
create index documents_tenant_time on pgmem.documents (tenant, created_at desc);

create table pgmem.document_chunks (
  id              bigint generated always as identity primary key,
  tenant          text not null,
  document_id     bigint not null,
  user_id         text,
  ord             integer not null check (ord >= 1),
  content         text not null check (content ~ '\S'),
  token_count     integer not null check (token_count >= 0),
  embedding       vector(@EMBEDDING_DIM@),
  embedding_model text,
  tsv             tsvector generated always as (to_tsvector('english'::regconfig, content)) stored,
  created_at      timestamptz not null default now(),
  unique (tenant, document_id, ord),
  foreign key (tenant, document_id) references pgmem.documents (tenant, id) on delete cascade
);
comment on table pgmem.document_chunks is
  'The chunks of a knowledge-base document, in order, each under its own HNSW (embedding) and GIN (full text) index: what the knowledge_base intent retrieves (pgmem.search_documents, context_for).';
create index document_chunks_embedding_hnsw on pgmem.document_chunks using hnsw (embedding vector_cosine_ops);
create index document_chunks_tsv_gin on pgmem.document_chunks using gin (tsv);
create index document_chunks_document on pgmem.document_chunks (tenant, document_id, ord);

create index messages_embedding_hnsw on pgmem.messages using hnsw (embedding vector_cosine_ops);

create index memories_salience on pgmem.memories (tenant, salience desc, id) where state = 'active';
"""

DOWNGRADE = r"""
drop index if exists pgmem.memories_salience;
drop index if exists pgmem.messages_embedding_hnsw;
drop table if exists pgmem.document_chunks;
drop table if exists pgmem.documents;
"""


def _embedding_dim() -> int:
    row = op.get_bind().connection.driver_connection.execute(
        "select value::text::int from pgmem.settings where tenant = '*' and key = 'embedding_dim'").fetchone()
    return int(row[0])


def upgrade() -> None:
    run_sql(UPGRADE.replace("@EMBEDDING_DIM@", str(_embedding_dim())))


def downgrade() -> None:
    drop_dependents("pgmem.documents", "pgmem.document_chunks")
    run_sql(DOWNGRADE)
