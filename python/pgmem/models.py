"""SQLAlchemy 2.x table metadata for pgmem's tables (schema ``pgmem``).

pgmem's tables are created and changed by its own Alembic revisions
(``migrations/versions/``, run by ``pgmem db upgrade`` / :func:`pgmem.migrate.upgrade`);
this module *describes* them so that applications can query them with SQLAlchemy Core
or the ORM, declare foreign keys to ``pgmem.memories`` from their own tables, and let
their own Alembic autogenerate know that these tables exist. ``tests/test_models.py``
checks it against a freshly migrated database (reflection, Alembic's
``compare_metadata`` and the catalog of a copy created from this metadata), so it
follows the revisions exactly.

The schema has one source, the migrations; this module is written by hand and checked
against them (issue 28), never generated. A revision that adds a table or a column without
describing it here fails ``tests/test_models.py``, and the message says what to add: for a
table, a ``Table`` in :func:`make_metadata` (or the helper of its tier), its name in
``TABLE_NAMES`` and ``__all__``, and a typed ORM class; for a column, its type, nullability,
default and constraints as PostgreSQL renders them.

What is described, and what is not:

* every table of schema ``pgmem``, with exact column names, types, nullability,
  server defaults (as PostgreSQL stores them), identity columns, primary keys, foreign
  keys (with their ``ON DELETE``) and the check constraints, named as PostgreSQL names
  them (``<table>_<column>_check``). Check constraints are informational here: Alembic's
  autogenerate does not compare them, the database enforces them.
* the generated columns ``memories.tsv`` and ``memories.content_hash`` are declared
  ``Computed(..., persisted=True)``, so neither Core inserts nor the ORM ever write them.
* **not** described: indexes (HNSW on the embedding, GIN on tsv, partial and expression
  indexes), views, functions and triggers. They belong to the migrations and to
  ``sql/*.sql``; ``metadata.create_all()`` therefore does not make a working pgmem
  (install with ``pgmem.migrate.upgrade(dsn)``), it is only good for scratch copies.
* the embedding dimension is fixed at install (setting ``embedding_dim`` in
  ``pgmem.settings``, default 384). :data:`metadata` uses 384; for another dimension
  build your own with :func:`make_metadata` (``select value from pgmem.settings where
  tenant = '*' and key = 'embedding_dim'`` tells an installation's dimension).

Writing to the tables directly bypasses pgmem's functions but not its triggers:
``pgmem.tenant`` must be set on the session (``SET pgmem.tenant = '...'``) and
``tenant`` may be left out on insert (a trigger fills it). Prefer the SQL API
(``pgmem.remember(...)``, ``pgmem.search(...)``) or :class:`pgmem.MemoryClient` for
writes; the tables are fine to read.

Using it from your application's Alembic ``env.py``
----------------------------------------------------

Your migrations must never create, alter or drop pgmem's tables, and your autogenerate
must not propose to. Two pitfalls: with ``include_schemas=True`` autogenerate sees
schema ``pgmem`` and, if the tables are not in ``target_metadata``, proposes to drop
them; and it sees pgmem's version table ``public.pgmem_alembic_version`` and proposes to
drop that too. Pass pgmem's metadata next to yours (so foreign keys to
``pgmem.memories`` resolve) and filter pgmem out with the two hooks of this module::

    import pgmem.models
    from myapp.models import Base

    target_metadata = [Base.metadata, pgmem.models.metadata]

    def run_migrations_online():
        ...
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            include_schemas=True,                        # or False: see below
            include_name=pgmem.models.include_name,      # don't reflect schema pgmem
            include_object=pgmem.models.include_object,  # nor emit ops for its tables
        )

``include_name`` keeps autogenerate from reflecting schema ``pgmem`` and the
``pgmem_alembic_version`` table; ``include_object`` drops every object of schema pgmem
(table, column, index, constraint, foreign key), whether it comes from the database or
from ``target_metadata`` (without it, a pgmem table in ``target_metadata`` but filtered
out of the reflection would be proposed as "add table"). If you write your own hooks,
chain to these: ``return pgmem.models.include_object(obj, name, type_, reflected,
compare_to) and my_rule(...)``. With ``include_schemas=False`` (Alembic's default)
only the default schema is compared, so schema pgmem is not touched, but the version
table in ``public`` still is: keep ``include_name``.

A foreign key from your table to a memory: a string foreign key is resolved within one
``MetaData``, so either copy pgmem's tables into yours (the hooks above still keep them out
of autogenerate) ::

    pgmem.models.add_to_metadata(Base.metadata)   # once, before your models are used
    sa.Column("memory_id", sa.BigInteger, sa.ForeignKey("pgmem.memories.id", ondelete="CASCADE"))

(and then ``target_metadata = Base.metadata`` is enough), or refer to the column object::

    sa.Column("memory_id", sa.BigInteger,
              sa.ForeignKey(pgmem.models.memories.c.id, ondelete="CASCADE"))

This module imports SQLAlchemy and pgvector only (never torch or sentence-transformers).
"""
from __future__ import annotations

import datetime as _dt
import uuid as _uuid
from typing import Any, Optional

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Computed,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    REAL,
    SmallInteger,
    TIMESTAMP,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, DOUBLE_PRECISION, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, column_property

from .db import VERSION_TABLE

__all__ = [
    "SCHEMA", "DEFAULT_EMBEDDING_DIM", "VERSION_TABLE", "TABLE_NAMES", "GENERATED_COLUMNS",
    "make_metadata", "metadata", "add_to_metadata", "include_name", "include_object",
    "settings", "tenants", "categories", "profiles", "memories", "links", "accesses",
    "history", "embedding_queue", "job_runs", "thresholds", "threshold_changes", "activation_log",
    "feedback", "job_state", "py_modules", "tenant_grants", "claim_keys",
    "memory_vectors", "vector_queue", "job_locks", "write_locks", "write_checked",
    "Base", "Setting", "Tenant", "Category", "Profile", "Memory", "Link", "Access",
    "HistoryEntry", "EmbeddingQueueEntry", "JobRun", "Threshold", "ThresholdChange", "TenantGrant", "ClaimKey",
    "ActivationLogEntry", "Feedback", "JobState", "PyModule",
    # 0008 (reconstructive)
    "reconstructions", "identity_traits", "identity_beliefs", "identity_goals", "identity_snapshots", "work_queue",
    "Reconstruction", "IdentityTrait", "IdentityBelief", "IdentityGoal", "IdentitySnapshot", "WorkQueueEntry",
    # 0009 (clusters)
    "clusters", "cluster_state", "cluster_moves", "cluster_steps", "memory_coords",
    "eval_queries", "eval_judgements", "eval_runs",
    "Cluster", "ClusterState", "ClusterMove", "ClusterStep", "MemoryCoord", "EvalQuery", "EvalJudgement", "EvalRun",
    "MemoryVector", "VectorQueueEntry", "JobLock", "WriteLock", "WriteChecked",
    # layered tiers (0007)
    "profile_facts", "conversations", "threads", "messages", "insights", "concept_mentions", "intent_cache",
    "behaviour_rules", "policy_rules",
    "lexicon", "lexicon_delta", "LexiconEntry", "LexiconDelta",  # 0005 (read path)
    "ProfileFact", "Conversation", "Thread", "Message", "Insight", "ConceptMention", "IntentCacheEntry",
    "BehaviourRule", "PolicyRule",
    # 0014 (ecosystem)
    "embedding_moves", "reembed_queue", "session_items", "EmbeddingMove", "ReembedQueueEntry", "SessionItem",
    # 0012 (read path), 0013 (web), 0016 (living memory)
    "recent_vectors", "api_keys", "access_log", "RecentVector", "ApiKey", "AccessLogEntry",
    "documents", "document_chunks", "Document", "DocumentChunk",  # 0019 (knowledge-base documents)
    "attention_log", "AttentionLogEntry",  # 0022 (the attention log)
]

SCHEMA = "pgmem"
DEFAULT_EMBEDDING_DIM = 384
TABLE_NAMES = ("settings", "tenants", "categories", "profiles", "memories", "links",
               "accesses", "history", "embedding_queue", "job_runs",          # 0001
               "thresholds", "threshold_changes", "activation_log", "feedback", "job_state",  # 0002
               "py_modules",  # 0003
               "tenant_grants", "claim_keys",  # 0004
               "reconstructions", "identity_traits", "identity_beliefs", "identity_goals",
               "identity_snapshots", "work_queue",  # 0008 (reconstructive)
               "clusters", "cluster_state", "cluster_moves", "cluster_steps", "memory_coords",
               "eval_queries", "eval_judgements", "eval_runs",  # 0009 (clusters)
               "memory_vectors", "vector_queue", "job_locks", "write_locks",  # 0006
               "profile_facts", "conversations", "threads", "messages", "insights",  # 0007 (layered tiers)
               "concept_mentions", "intent_cache", "behaviour_rules", "policy_rules",
               "lexicon", "lexicon_delta",  # 0005 (read path)
               "embedding_moves", "reembed_queue", "session_items",  # 0014 (ecosystem)
               "write_checked",  # 0018 (write path)
               "recent_vectors", "api_keys", "access_log",  # 0012 (read path), 0013 (web), 0016 (living memory)
               "documents", "document_chunks",  # 0019 (knowledge-base documents)
               "attention_log")  # 0022 (JAM attention per response)
#: (table, column) of the generated (``GENERATED ALWAYS AS ... STORED``) columns.
GENERATED_COLUMNS = frozenset({("memories", "tsv"), ("memories", "content_hash"), ("insights", "tsv"),
                               ("document_chunks", "tsv")})

# Expressions of the generated columns, as in migration 0001 (functions schema-qualified,
# so that they do not depend on search_path).
TSV_EXPRESSION = (
    "setweight(to_tsvector('english'::regconfig, coalesce(pgmem._words(topics), '') || ' ' "
    "|| coalesce(pgmem._words(entities), '')), 'A') || "
    "setweight(to_tsvector('english'::regconfig, content), 'B') || "
    "setweight(to_tsvector('english'::regconfig, coalesce(summary, '') || ' ' || coalesce(why, '') "
    "|| ' ' || coalesce(how, '')), 'C') || "
    "setweight(to_tsvector('simple'::regconfig, coalesce(who, '') || ' ' || coalesce(location, '')), 'D')"
)
CONTENT_HASH_EXPRESSION = "md5(pgmem._content_key(content))::uuid"

_TSTZ = TIMESTAMP(timezone=True)
_NOW = text("now()")
_EMPTY_JSON = text("'{}'::jsonb")
_ALL_TENANTS = text("'*'::text")
_CLOCK = text("clock_timestamp()")


def _unit(table: str, column: str) -> CheckConstraint:
    """``column between 0 and 1`` (as PostgreSQL stores it), named as PostgreSQL names it."""
    return CheckConstraint(f"{column} >= 0::double precision AND {column} <= 1::double precision",
                           name=f"{table}_{column}_check")


def _in(table: str, column: str, values: tuple[str, ...]) -> CheckConstraint:
    listed = ", ".join(f"'{v}'::text" for v in values)
    return CheckConstraint(f"{column} = ANY (ARRAY[{listed}])", name=f"{table}_{column}_check")


def _is_object(table: str, column: str) -> CheckConstraint:
    return CheckConstraint(f"jsonb_typeof({column}) = 'object'::text", name=f"{table}_{column}_check")


def make_metadata(embedding_dim: int = DEFAULT_EMBEDDING_DIM) -> MetaData:
    """A new ``MetaData(schema="pgmem")`` holding every pgmem table, with
    ``memories.embedding`` declared ``vector(embedding_dim)``."""
    if not isinstance(embedding_dim, int) or not 1 <= embedding_dim <= 16000:
        raise ValueError(f"embedding_dim must be an int in 1..16000 (pgvector's limit), not {embedding_dim!r}")
    md = MetaData(schema=SCHEMA)

    # Settings: key/value; tenant '*' = installation default, a tenant may override a key.
    Table(
        "settings", md,
        Column("tenant", Text, nullable=False, server_default=_ALL_TENANTS),
        Column("key", Text, nullable=False),
        Column("value", JSONB, nullable=False),
        Column("description", Text),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", "key", name="settings_pkey"),
    )

    Table(
        "tenants", md,
        Column("tenant", Text, nullable=False),
        Column("description", Text),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", name="tenants_pkey"),
        CheckConstraint("tenant ~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$'::text", name="tenants_tenant_check"),
    )

    # Engram's categories and their importance weights.
    Table(
        "categories", md,
        Column("tenant", Text, nullable=False, server_default=_ALL_TENANTS),
        Column("category", Text, nullable=False),
        Column("weight", REAL, nullable=False),
        Column("description", Text),
        PrimaryKeyConstraint("tenant", "category", name="categories_pkey"),
        CheckConstraint("category ~ '^[a-z][a-z0-9_]{0,31}$'::text", name="categories_category_check"),
        _unit("categories", "weight"),
    )

    # Named weight/threshold sets for the ranking functions.
    Table(
        "profiles", md,
        Column("tenant", Text, nullable=False, server_default=_ALL_TENANTS),
        Column("name", Text, nullable=False),
        Column("method", Text, nullable=False),
        Column("weights", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("params", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("description", Text),
        Column("builtin", Boolean, nullable=False, server_default=text("false")),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", "name", name="profiles_pkey"),
        CheckConstraint("name ~ '^[a-z][a-z0-9_-]{0,62}$'::text", name="profiles_name_check"),
        _in("profiles", "method", ("search", "activate", "recall")),
        _is_object("profiles", "weights"),
        _is_object("profiles", "params"),
    )

    Table(
        "memories", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),  # ids are the database's (0004)
        Column("tenant", Text, nullable=False),  # filled from pgmem.tenant by a trigger when omitted
        Column("user_id", Text),
        Column("agent_id", Text),
        Column("session_id", Text),
        Column("tier", Text, nullable=False, server_default=text("'episodic'::text")),
        Column("category", Text, nullable=False, server_default=text("'episode'::text")),
        Column("content", Text, nullable=False),
        Column("summary", Text),
        # 5W1H; "when"/"where" are SQL keywords, hence happened_at and location
        Column("who", Text),
        Column("what", Text),
        Column("happened_at", _TSTZ),
        Column("location", Text),
        Column("why", Text),
        Column("how", Text),
        Column("topics", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
        Column("entities", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
        Column("valence", REAL),
        Column("arousal", REAL),
        Column("dominance", REAL),
        Column("importance", REAL, nullable=False, server_default=text("0.5")),
        Column("salience", REAL),
        Column("surprise", REAL),
        Column("gate", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("embedding", Vector(embedding_dim)),
        Column("embedding_model", Text),
        Column("embedded_at", _TSTZ),
        Column("tsv", TSVECTOR, Computed(TSV_EXPRESSION, persisted=True)),
        Column("content_hash", UUID(as_uuid=True), Computed(CONTENT_HASH_EXPRESSION, persisted=True)),
        Column("metadata", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("token_count", Integer, nullable=False, server_default=text("0")),
        Column("access_count", Integer, nullable=False, server_default=text("0")),
        Column("last_accessed_at", _TSTZ),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("expires_at", _TSTZ),
        Column("state", Text, nullable=False, server_default=text("'active'::text")),
        Column("state_changed_at", _TSTZ),
        Column("merged_into", BigInteger, ForeignKey("pgmem.memories.id", ondelete="SET NULL",
                                                     name="memories_merged_into_fkey")),
        Column("merged_from", ARRAY(BigInteger), nullable=False, server_default=text("'{}'::bigint[]")),
        Column("cluster_id", BigInteger),
        Column("event_key", Text),
        Column("seq", Integer),
        PrimaryKeyConstraint("id", name="memories_pkey"),
        _in("memories", "tier", ("episodic", "semantic", "procedural", "working", "insight")),
        CheckConstraint("content ~ '\\S'::text", name="memories_content_check"),
        *(_unit("memories", c) for c in ("valence", "arousal", "dominance", "importance",
                                         "salience", "surprise")),
        _is_object("memories", "metadata"),
        CheckConstraint("token_count >= 0", name="memories_token_count_check"),
        CheckConstraint("access_count >= 0", name="memories_access_count_check"),
        _in("memories", "state", ("active", "archived", "merged", "deleted")),
        comment="One row per memory: 5W1H fields, embedding, lexical vector, importance, "
                "salience, usage and lifecycle state.",
    )

    Table(
        "links", md,
        Column("tenant", Text, nullable=False),
        Column("src_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                name="links_src_id_fkey"), nullable=False),
        Column("dst_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                name="links_dst_id_fkey"), nullable=False),
        Column("kind", Text, nullable=False),
        Column("weight", REAL, nullable=False, server_default=text("1")),
        Column("count", Integer, nullable=False, server_default=text("1")),
        Column("metadata", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("src_id", "dst_id", "kind", name="links_pkey"),
        _in("links", "kind", ("temporal", "semantic", "causal", "co_access", "merged", "concept",
                              "supersedes")),  # supersedes: 0008 (reconstructive)
        CheckConstraint("weight >= 0::double precision", name="links_weight_check"),
        CheckConstraint("src_id <> dst_id", name="links_check"),
    )

    Table(
        "accesses", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="accesses_memory_id_fkey"), nullable=False),
        Column("accessed_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("kind", Text, nullable=False, server_default=text("'search'::text")),
        Column("query_id", UUID(as_uuid=True)),
        Column("rank", Integer),
        Column("score", REAL),
        Column("count", Integer, nullable=False, server_default=text("1"),  # 0016
               comment="How many times the memory was retrieved or used in this row (the fold of pgmem.access_log "
                       "writes one row per memory, kind and batch)."),
        PrimaryKeyConstraint("id", name="accesses_pkey"),
        CheckConstraint("count >= 1", name="accesses_count_check"),
    )
    # What the rankings returned and the contexts packed, appended by the read path and folded by
    # the job access (0016, sql/212_access_log.sql).
    Table(
        "access_log", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("at", _TSTZ, nullable=False, server_default=_NOW),
        Column("kind", Text, nullable=False),
        Column("source", Text, nullable=False),
        Column("ids", ARRAY(BigInteger), nullable=False),
        Column("query_id", UUID(as_uuid=True)),
        PrimaryKeyConstraint("id", name="access_log_pkey"),
        CheckConstraint("kind = ANY (ARRAY['retrieval'::text, 'use'::text])", name="access_log_kind_check"),
        CheckConstraint("source ~ '^[a-z][a-z0-9_]{0,31}$'::text", name="access_log_source_check"),
        CheckConstraint("cardinality(ids) >= 1 AND cardinality(ids) <= 1000", name="access_log_ids_check"),
        comment="What the rankings returned (retrieval) and what was packed into a context or marked used (use), "
                "appended by the read path and folded by the job access into pgmem.accesses and memories' access counts.",
    )
    # JAM attention per response, append-only (0022, sql/280_attention.sql).
    Table(
        "attention_log", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("at", _TSTZ, nullable=False, server_default=_NOW),
        Column("source", Text, nullable=False),
        Column("query_id", UUID(as_uuid=True)),
        Column("scale", DOUBLE_PRECISION),
        Column("memory_ids", ARRAY(BigInteger), nullable=False),
        Column("weights", ARRAY(DOUBLE_PRECISION), nullable=False),
        PrimaryKeyConstraint("id", name="attention_log_pkey"),
        CheckConstraint("source ~ '^[a-z][a-z0-9_]{0,31}$'::text", name="attention_log_source_check"),
        CheckConstraint("cardinality(memory_ids) >= 1 AND cardinality(memory_ids) <= 1000",
                        name="attention_log_memory_ids_check"),
        CheckConstraint("cardinality(weights) = cardinality(memory_ids)", name="attention_log_check"),
        comment="JAM attention per response (append-only): the memories pgmem.attention weighed for one "
                "search_attention call and their softmax weights, in rank order.",
    )

    # Every change to a memory. No foreign key on memory_id: history outlives purges.
    Table(
        "history", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("memory_id", BigInteger),
        Column("op", Text, nullable=False),
        Column("at", _TSTZ, nullable=False, server_default=text("clock_timestamp()")),
        Column("actor", Text, nullable=False, server_default=text("SESSION_USER")),  # the login (0004)
        Column("before", JSONB),
        Column("after", JSONB),
        Column("details", JSONB, nullable=False, server_default=_EMPTY_JSON),
        PrimaryKeyConstraint("id", name="history_pkey"),
        _in("history", "op", ("add", "update", "embed", "merge", "unmerge", "archive", "delete",
                              "restore", "reject", "duplicate", "purge", "erase")),
    )

    # Memories waiting for an embedding (the worker takes rows FOR UPDATE SKIP LOCKED).
    Table(
        "embedding_queue", md,
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="embedding_queue_memory_id_fkey"), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("queued_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("attempts", Integer, nullable=False, server_default=text("0")),
        Column("last_error", Text),
        Column("not_before", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("memory_id", name="embedding_queue_pkey"),
    )

    Table(
        "job_runs", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text),
        Column("job", Text, nullable=False),
        Column("params", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("started_at", _TSTZ, nullable=False, server_default=text("clock_timestamp()")),
        Column("finished_at", _TSTZ),
        Column("status", Text, nullable=False, server_default=text("'running'::text")),
        Column("examined", BigInteger, nullable=False, server_default=text("0")),
        Column("changed", BigInteger, nullable=False, server_default=text("0")),
        Column("error", Text),
        Column("details", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("pid", Integer),  # the backend running the batch (0006): a killed batch's row stays 'running'
        PrimaryKeyConstraint("id", name="job_runs_pkey"),
        _in("job_runs", "status", ("running", "ok", "failed", "skipped")),
    )

    # --- revision 0002 (lifecycle) ---
    # Adaptive activation thresholds per tenant and context type (override the profile).
    Table(
        "thresholds", md,
        Column("tenant", Text, nullable=False),
        Column("context_type", Text, nullable=False),
        Column("threshold", REAL, nullable=False),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", "context_type", name="thresholds_pkey"),
        CheckConstraint("context_type ~ '^[a-z][a-z0-9_]{0,31}$'::text", name="thresholds_context_type_check"),
        _unit("thresholds", "threshold"),
    )

    Table(
        "threshold_changes", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("context_type", Text, nullable=False),
        Column("old_value", REAL),
        Column("new_value", REAL, nullable=False),
        Column("false_positive_rate", REAL),
        Column("false_negative_rate", REAL),
        Column("feedback_count", Integer),
        Column("reason", Text, nullable=False),
        Column("job_run_id", BigInteger),
        Column("changed_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("id", name="threshold_changes_pkey"),
    )

    # What activate(..., query_id => ...) showed: the rows feedback refers to.
    Table(
        "activation_log", md,
        Column("tenant", Text, nullable=False),
        Column("query_id", UUID(as_uuid=True), nullable=False),
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="activation_log_memory_id_fkey"), nullable=False),
        Column("context_type", Text, nullable=False),
        Column("score", REAL, nullable=False),
        Column("threshold", REAL, nullable=False),
        Column("activated", Boolean, nullable=False),
        Column("logged_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("query_id", "memory_id", name="activation_log_pkey"),
    )

    Table(
        "feedback", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="feedback_memory_id_fkey"), nullable=False),
        Column("query_id", UUID(as_uuid=True)),
        Column("relevant", Boolean, nullable=False),
        Column("context_type", Text),
        Column("activated", Boolean),
        Column("score", REAL),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("tuned_at", _TSTZ),
        PrimaryKeyConstraint("id", name="feedback_pkey"),
    )

    # Where incremental jobs resume.
    Table(
        "job_state", md,
        Column("tenant", Text, nullable=False),
        Column("job", Text, nullable=False),
        Column("cursor_at", _TSTZ),
        Column("cursor_id", BigInteger),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", "job", name="job_state_pkey"),
    )

    # Source of the in-database Python modules (0003): code, not tenant data.
    Table(
        "py_modules", md,
        Column("name", Text, nullable=False),
        Column("source", Text, nullable=False),
        Column("sha256", Text, nullable=False),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("name", name="py_modules_pkey"),
        CheckConstraint("name ~ '^[a-z_][a-z0-9_]*$'::text", name="py_modules_name_check"),
        comment="Source of the pure-Python engine modules that PL/Python functions import (code, not tenant data).",
    )

    # Tenancy (0004, security): which logins may act for which tenant, and the keys that
    # verify signed tenant claims (readable by the owner role only).
    Table(
        "tenant_grants", md,
        Column("role_name", Text, nullable=False),
        Column("tenant", Text, nullable=False),
        Column("granted_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("granted_by", Text, nullable=False, server_default=text("SESSION_USER")),
        Column("note", Text),
        PrimaryKeyConstraint("tenant", "role_name", name="tenant_grants_pkey"),
        CheckConstraint("tenant ~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$'::text", name="tenant_grants_tenant_check"),
        comment="Which login (or group) roles may act for which tenant (SET pgmem.tenant). pgmem_admin members may "
                "act for every tenant; a shared application role uses signed claims instead (pgmem.claim_keys).",
    )
    Table(
        "claim_keys", md,
        Column("kid", Text, nullable=False),
        Column("ipad_key", BYTEA, nullable=False),
        Column("opad_key", BYTEA, nullable=False),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("created_by", Text, nullable=False, server_default=text("SESSION_USER")),
        Column("expires_at", _TSTZ),
        Column("note", Text),
        PrimaryKeyConstraint("kid", name="claim_keys_pkey"),
        CheckConstraint("kid ~ '^[A-Za-z0-9_.-]{1,64}$'::text", name="claim_keys_kid_check"),
        CheckConstraint("octet_length(ipad_key) = 64", name="claim_keys_ipad_key_check"),
        CheckConstraint("octet_length(opad_key) = 64", name="claim_keys_opad_key_check"),
        comment="Keys that verify signed tenant claims (HS256 JWT in pgmem.tenant_claim). Stored as the HMAC pads "
                "of the key; readable only by the owner role.",
    )

    # --- revision 0008 (reconstructive, issue 16; fragment-reconstructive-memory.md) ---
    # Content domains: motor and sensory content of a memory (JSON objects, both optional).
    _memories = md.tables[f"{SCHEMA}.memories"]
    for domain in ("motor", "sensory"):
        _memories.append_column(Column(domain, JSONB))
        _memories.append_constraint(CheckConstraint(
            f"{domain} IS NULL OR jsonb_typeof({domain}) = 'object'::text", name=f"memories_{domain}_check"))

    # The reconstruction log: the members of every strand reconstruct() assembled, by query hash.
    Table(
        "reconstructions", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("query_hash", UUID(as_uuid=True), nullable=False),
        Column("query_text", Text),
        Column("user_id", Text),
        Column("k", Integer, nullable=False),
        Column("member_ids", ARRAY(BigInteger), nullable=False),
        Column("scores", ARRAY(REAL), nullable=False),
        Column("certainty", REAL),
        Column("params", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("created_at", _TSTZ, nullable=False, server_default=_CLOCK),
        PrimaryKeyConstraint("id", name="reconstructions_pkey"),
        comment="The reconstruction log: the members of every strand reconstruct() assembled, keyed by the "
                "query's hash (certainty is computed over them).",
    )

    # Identity of a tenant's agent (agent_id '' = the tenant's agent): traits, beliefs, goals
    # and the snapshots of the whole self-concept.
    def _identity_name(table: str, column: str, max_len: int, first: bool) -> CheckConstraint:
        pattern = "^\\S" if first else "\\S"
        return CheckConstraint(f"{column} ~ '{pattern}'::text AND char_length({column}) <= {max_len}",
                               name=f"{table}_{column}_check")

    Table(
        "identity_traits", md,
        Column("tenant", Text, nullable=False),
        Column("agent_id", Text, nullable=False, server_default=text("''::text")),
        Column("name", Text, nullable=False),
        Column("value", DOUBLE_PRECISION, nullable=False),
        Column("inertia", DOUBLE_PRECISION, nullable=False),
        Column("observations", Integer, nullable=False, server_default=text("1")),
        Column("created_at", _TSTZ, nullable=False, server_default=_CLOCK),
        Column("updated_at", _TSTZ, nullable=False, server_default=_CLOCK),
        PrimaryKeyConstraint("tenant", "agent_id", "name", name="identity_traits_pkey"),
        _identity_name("identity_traits", "name", 128, first=True),
        _unit("identity_traits", "value"),
        _unit("identity_traits", "inertia"),
        comment="Identity traits: stable characteristics (0..1), updated as an EMA with high inertia.",
    )
    Table(
        "identity_beliefs", md,
        Column("tenant", Text, nullable=False),
        Column("agent_id", Text, nullable=False, server_default=text("''::text")),
        Column("key", Text, nullable=False),
        Column("statement", Text, nullable=False),
        Column("confidence", DOUBLE_PRECISION, nullable=False),
        Column("inertia", DOUBLE_PRECISION, nullable=False),
        Column("evidence", ARRAY(BigInteger), nullable=False, server_default=text("'{}'::bigint[]")),
        Column("observations", Integer, nullable=False, server_default=text("1")),
        Column("created_at", _TSTZ, nullable=False, server_default=_CLOCK),
        Column("updated_at", _TSTZ, nullable=False, server_default=_CLOCK),
        PrimaryKeyConstraint("tenant", "agent_id", "key", "statement", name="identity_beliefs_pkey"),
        _identity_name("identity_beliefs", "key", 128, first=True),
        _identity_name("identity_beliefs", "statement", 1000, first=False),
        _unit("identity_beliefs", "confidence"),
        _unit("identity_beliefs", "inertia"),
        comment="Identity beliefs: competing statements per key, each with an EMA confidence (medium inertia) "
                "and its evidence (memory ids); the held belief of a key is its most confident statement.",
    )
    Table(
        "identity_goals", md,
        Column("tenant", Text, nullable=False),
        Column("agent_id", Text, nullable=False, server_default=text("''::text")),
        Column("key", Text, nullable=False),
        Column("goal", Text, nullable=False),
        Column("embedding", Vector(embedding_dim)),
        Column("priority", DOUBLE_PRECISION, nullable=False, server_default=text("1")),
        Column("inertia", DOUBLE_PRECISION, nullable=False),
        Column("state", Text, nullable=False, server_default=text("'active'::text")),
        Column("observations", Integer, nullable=False, server_default=text("1")),
        Column("created_at", _TSTZ, nullable=False, server_default=_CLOCK),
        Column("updated_at", _TSTZ, nullable=False, server_default=_CLOCK),
        PrimaryKeyConstraint("tenant", "agent_id", "key", name="identity_goals_pkey"),
        _identity_name("identity_goals", "key", 128, first=True),
        _identity_name("identity_goals", "goal", 2000, first=False),
        _unit("identity_goals", "priority"),
        _unit("identity_goals", "inertia"),
        _in("identity_goals", "state", ("active", "achieved", "dropped")),
        comment="Identity goals: active objectives with an embedding (goal relevance in salience), updated as "
                "an EMA with low inertia.",
    )
    Table(
        "identity_snapshots", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("agent_id", Text, nullable=False, server_default=text("''::text")),
        Column("taken_at", _TSTZ, nullable=False, server_default=_CLOCK),
        Column("reason", Text, nullable=False),
        Column("identity", JSONB, nullable=False),
        PrimaryKeyConstraint("id", name="identity_snapshots_pkey"),
        comment="The history of the self-concept: the whole identity of an agent after every change (and on "
                "request); identity_at(as_of) reads it.",
    )

    # The priority work queue: QUERY 0, ENCODE 1, REFLECT 2, MAINTENANCE 3, IDLE 4.
    Table(
        "work_queue", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("priority", SmallInteger, nullable=False),
        Column("task", Text, nullable=False),
        Column("memory_ids", ARRAY(BigInteger), nullable=False, server_default=text("'{}'::bigint[]")),
        Column("params", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("enqueued_at", _TSTZ, nullable=False, server_default=_CLOCK),
        Column("not_before", _TSTZ, nullable=False, server_default=_NOW),
        Column("attempts", Integer, nullable=False, server_default=text("0")),
        Column("last_error", Text),
        PrimaryKeyConstraint("id", name="work_queue_pkey"),
        CheckConstraint("priority >= 0 AND priority <= 4", name="work_queue_priority_check"),
        CheckConstraint("task ~ '^[a-z][a-z0-9_]{0,31}$'::text", name="work_queue_task_check"),
        _is_object("work_queue", "params"),
        comment="Work items waiting for pgmem.work(): priority (0 QUERY .. 4 IDLE), task, memory ids and parameters.",
    )

    # --- revision 0009 (clusters, issue 17; jam-journalistic-agent-memory.md) ---
    # Concept and liquid clusters; memories.cluster_id (a column since 0001) refers to them.
    # The centroid is an unconstrained vector (its dimension is the embeddings').
    Table(
        "clusters", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("state", Text, nullable=False, server_default=text("'active'::text")),
        Column("centroid", Vector(), nullable=False),
        Column("n_seen", DOUBLE_PRECISION, nullable=False, server_default=text("0")),
        Column("size", Integer, nullable=False, server_default=text("0")),
        Column("energy", REAL, nullable=False, server_default=text("0.5")),
        Column("label", Text),
        Column("top_terms", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
        Column("generation", Integer, nullable=False, server_default=text("1")),
        Column("merged_into_cluster", BigInteger, ForeignKey("pgmem.clusters.id",
                                                             name="clusters_merged_into_cluster_fkey")),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("id", name="clusters_pkey"),
        _in("clusters", "state", ("building", "active", "merged", "retired")),
        CheckConstraint("n_seen >= 0::double precision", name="clusters_n_seen_check"),
        CheckConstraint("size >= 0", name="clusters_size_check"),
        _unit("clusters", "energy"),
        comment="Concept clusters (JAM Clustering Pipeline): k-means centroid and counts, members, energy "
                "(liquid clusters), label from the members' top terms.",
    )
    md.tables[f"{SCHEMA}.memories"].append_constraint(ForeignKeyConstraint(
        ["cluster_id"], ["pgmem.clusters.id"], ondelete="SET NULL", name="memories_cluster_fk"))

    Table(
        "cluster_state", md,
        Column("tenant", Text, nullable=False),
        Column("phase", Text, nullable=False, server_default=text("'idle'::text")),
        Column("cursor_id", BigInteger, nullable=False, server_default=text("0")),
        Column("generation", Integer, nullable=False, server_default=text("0")),
        Column("k", Integer),
        Column("fitted_n", BigInteger, nullable=False, server_default=text("0")),
        Column("fitted_at", _TSTZ),
        Column("step_at", _TSTZ),
        Column("access_cursor", BigInteger, nullable=False, server_default=text("0")),
        Column("embed_cursor_at", _TSTZ),
        Column("embed_cursor_id", BigInteger),
        Column("run_details", JSONB, nullable=False, server_default=_EMPTY_JSON),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", name="cluster_state_pkey"),
        _in("cluster_state", "phase", ("idle", "stream", "assign", "update", "liquid")),
        comment="Where the cluster job of each tenant stands (phase, cursors, last fit and step).",
    )
    Table(
        "cluster_moves", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="cluster_moves_memory_id_fkey"), nullable=False),
        Column("from_cluster", BigInteger, ForeignKey("pgmem.clusters.id", name="cluster_moves_from_cluster_fkey")),
        Column("to_cluster", BigInteger, ForeignKey("pgmem.clusters.id", name="cluster_moves_to_cluster_fkey")),
        Column("reason", Text, nullable=False),
        Column("pull", REAL),
        Column("job_run_id", BigInteger),
        Column("moved_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("id", name="cluster_moves_pkey"),
        _in("cluster_moves", "reason", ("flow", "merge", "refit")),
        comment="Every move of a memory from one cluster to another (liquid flow, merge, refit), for the "
                "cluster flow view.",
    )
    Table(
        "cluster_steps", md,
        Column("tenant", Text, nullable=False),
        Column("cluster_id", BigInteger, ForeignKey("pgmem.clusters.id", ondelete="CASCADE",
                                                    name="cluster_steps_cluster_id_fkey"), nullable=False),
        Column("at", _TSTZ, nullable=False),
        Column("size", Integer, nullable=False),
        Column("energy", REAL, nullable=False),
        Column("accesses", BigInteger, nullable=False, server_default=text("0")),
        Column("job_run_id", BigInteger),
        PrimaryKeyConstraint("cluster_id", "at", name="cluster_steps_pkey"),
        comment="Size and energy of each cluster after each liquid step (cluster flow over time).",
    )

    # 3-D coordinates of memories for the map.
    Table(
        "memory_coords", md,
        Column("tenant", Text, nullable=False),
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="memory_coords_memory_id_fkey"), nullable=False),
        Column("method", Text, nullable=False),
        Column("x", REAL, nullable=False),
        Column("y", REAL, nullable=False),
        Column("z", REAL, nullable=False),
        Column("computed_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("memory_id", "method", name="memory_coords_pkey"),
        _in("memory_coords", "method", ("pca", "tsne", "umap")),
        comment="3-D coordinates of memories for the map (PCA, t-SNE, UMAP).",
    )

    # Retrieval judgements and metrics (P@K, NDCG@K, ILD).
    Table(
        "eval_queries", md,
        Column("tenant", Text, nullable=False),
        Column("query", Text, nullable=False),
        Column("query_embedding", Vector()),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", "query", name="eval_queries_pkey"),
        CheckConstraint("query ~ '\\S'::text", name="eval_queries_query_check"),
        comment="Queries of the retrieval judgements, with their embedding when one is known.",
    )
    Table(
        "eval_judgements", md,
        Column("tenant", Text, nullable=False),
        Column("query", Text, nullable=False),
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="eval_judgements_memory_id_fkey"), nullable=False),
        Column("relevance", REAL, nullable=False, server_default=text("1")),
        Column("judged_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", "query", "memory_id", name="eval_judgements_pkey"),
        ForeignKeyConstraint(["tenant", "query"], ["pgmem.eval_queries.tenant", "pgmem.eval_queries.query"],
                             ondelete="CASCADE", onupdate="CASCADE", name="eval_judgements_tenant_query_fkey"),
        CheckConstraint("relevance >= 0::double precision AND relevance <= 10::double precision",
                        name="eval_judgements_relevance_check"),
        comment="Graded relevance of memories to queries (0 = not relevant): the ground truth of P@K and NDCG.",
    )
    Table(
        "eval_runs", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("run_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("query", Text, nullable=False),
        Column("method", Text, nullable=False),
        Column("k", Integer, nullable=False),
        Column("retrieved", ARRAY(BigInteger), nullable=False),
        Column("relevant", Integer, nullable=False),
        Column("judged", Integer, nullable=False),
        Column("precision_at_k", DOUBLE_PRECISION, nullable=False),
        Column("ndcg", DOUBLE_PRECISION, nullable=False),
        Column("ild", DOUBLE_PRECISION),
        PrimaryKeyConstraint("id", name="eval_runs_pkey"),
        comment="One row per judged query per evaluation: retrieved ids, P@K, NDCG@K, ILD.",
    )

    # --- revision 0006 (write path and jobs) ---
    # Vectors under the HNSW index, insertion deferred to the index job (STORAGE.md).
    Table(
        "memory_vectors", md,
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="memory_vectors_memory_id_fkey"), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("user_scope", Text, nullable=False),
        Column("embedding", Vector(embedding_dim), nullable=False),
        PrimaryKeyConstraint("memory_id", name="memory_vectors_pkey"),
        comment="The active, embedded memories under the HNSW index (nearest-neighbour search); kept in step with "
                "pgmem.memories by its triggers, filled from pgmem.vector_queue by the index job.",
    )
    # The recent memories' vectors under an HNSW index of their own (0012, sql/440_index.sql).
    Table(
        "recent_vectors", md,
        Column("memory_id", BigInteger, ForeignKey("pgmem.memory_vectors.memory_id", ondelete="CASCADE",
                                                   name="recent_vectors_memory_id_fkey"), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("user_scope", Text, nullable=False),
        Column("created_at", _TSTZ, nullable=False),
        Column("embedding", Vector(embedding_dim), nullable=False),
        PrimaryKeyConstraint("memory_id", name="recent_vectors_pkey"),
        comment="The vectors of the recent memories (created in the last recent_vectors_days) under an HNSW index of "
                "their own: search's recent candidate branch. A copy of memory_vectors' rows, kept by the index job; "
                "a row leaves with its memory_vectors row.",
    )
    # Knowledge-base documents and their chunks (0019, sql/680_documents.sql).
    Table(
        "documents", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("user_id", Text),
        Column("title", Text, nullable=False),
        Column("source", Text),
        Column("content_hash", UUID(as_uuid=True), nullable=False),
        Column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
        Column("chunks", Integer, nullable=False, server_default=text("0")),
        Column("tokens", Integer, nullable=False, server_default=text("0")),
        Column("state", Text, nullable=False, server_default=text("'active'::text")),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("id", name="documents_pkey"),
        UniqueConstraint("tenant", "id", name="documents_tenant_id_key"),
        CheckConstraint("title ~ '\\S'::text AND length(title) <= 500", name="documents_title_check"),
        CheckConstraint("length(source) <= 2000", name="documents_source_check"),
        CheckConstraint("jsonb_typeof(metadata) = 'object'::text", name="documents_metadata_check"),
        _in("documents", "state", ("active", "deleted")),
        comment="Knowledge-base documents (layered design, knowledge_base intent): title, source, the hash of the "
                "content, chunk and token counts; state deleted = out of retrieval, restorable. The text lives in "
                "pgmem.document_chunks.",
    )
    Table(
        "document_chunks", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("document_id", BigInteger, nullable=False),
        Column("user_id", Text),
        Column("ord", Integer, nullable=False),
        Column("content", Text, nullable=False),
        Column("token_count", Integer, nullable=False),
        Column("embedding", Vector(embedding_dim)),
        Column("embedding_model", Text),
        Column("tsv", TSVECTOR, Computed("to_tsvector('english'::regconfig, content)", persisted=True)),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("id", name="document_chunks_pkey"),
        UniqueConstraint("tenant", "document_id", "ord", name="document_chunks_tenant_document_id_ord_key"),
        _fk("document_chunks", ("tenant", "document_id"), "documents", ("tenant", "id"), "CASCADE"),
        CheckConstraint("ord >= 1", name="document_chunks_ord_check"),
        CheckConstraint("content ~ '\\S'::text", name="document_chunks_content_check"),
        CheckConstraint("token_count >= 0", name="document_chunks_token_count_check"),
        comment="The chunks of a knowledge-base document, in order, each under its own HNSW (embedding) and GIN "
                "(full text) index: what the knowledge_base intent retrieves (pgmem.search_documents, context_for).",
    )
    # LLM API keys per tenant (0013, sql/570_web.sql): write-only, the owner's alone.
    Table(
        "api_keys", md,
        Column("tenant", Text, nullable=False),
        Column("provider", Text, nullable=False, server_default=text("'openai'::text")),
        Column("api_key", Text, nullable=False),
        Column("fingerprint", Text, nullable=False),
        Column("set_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("set_by", Text, nullable=False, server_default=text("SESSION_USER")),
        PrimaryKeyConstraint("tenant", "provider", name="api_keys_pkey"),
        CheckConstraint("provider ~ '^[a-z][a-z0-9_]{0,31}$'::text", name="api_keys_provider_check"),
        CheckConstraint("api_key ~ '^[\\x21-\\x7e]+$'::text AND (char_length(api_key) >= 8 AND char_length(api_key) <= 512)",
                        name="api_keys_api_key_check"),
        CheckConstraint("fingerprint ~ '^[0-9a-f]{8}$'::text", name="api_keys_fingerprint_check"),
        comment="LLM API keys per tenant and provider, stored by pgmem.set_api_key (POST /api/config/apikey of pgmem "
                "serve). Write-only: readable by the owner role alone, through pgmem._api_key, which only "
                "administrators' logins may call.",
    )
    Table(
        "vector_queue", md,
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="vector_queue_memory_id_fkey"), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("queued_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("memory_id", name="vector_queue_pkey"),
        comment="Active, embedded memories waiting for the index job to put them under the HNSW index "
                "(pgmem._neighbours searches them exactly meanwhile).",
    )
    # Locks of the maintenance jobs (row locks the application roles cannot take).
    Table(
        "job_locks", md,
        Column("tenant", Text, nullable=False),
        Column("job", Text, nullable=False),
        Column("holder_pid", Integer),
        Column("holder_since", _TSTZ),
        Column("run_id", BigInteger),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", "job", name="job_locks_pkey"),
        comment="Locks of the maintenance jobs (row locks, and the run_job holding a job between its transactions). "
                "Only the jobs (pgmem_admin) use it: the application roles cannot take these locks.",
    )
    # One writer at a time per (tenant, user scope) in remember/remember_many.
    Table(
        "write_locks", md,
        Column("tenant", Text, nullable=False),
        Column("scope", Text, nullable=False),
        PrimaryKeyConstraint("tenant", "scope", name="write_locks_pkey"),
        comment="One row per (tenant, user scope) that remember/remember_many lock while they gate and write a "
                "batch: concurrent writes to one scope take turns.",
    )
    # 0018: the rows remember's INSERT writes were validated already (sql/100_remember.sql)
    Table(
        "write_checked", md,
        Column("pid", Integer, nullable=False),
        Column("xid", BigInteger, nullable=False),
        PrimaryKeyConstraint("pid", "xid", name="write_checked_pkey"),
        comment="Set by pgmem._remember_core for the length of its INSERT: the rows it inserts were validated item "
                "by item, and the memories trigger does not check them again. No application role has a privilege on it.",
    )
    # --- revision 0005 (read path): lexical statistics per tenant (sql/201_lexical.sql) ---
    Table(
        "lexicon", md,
        Column("tenant", Text, nullable=False),
        Column("scope", Text, nullable=False),
        Column("lexeme", Text, nullable=False),
        Column("df", BigInteger, nullable=False, server_default=text("0")),
        Column("len", BigInteger, nullable=False, server_default=text("0")),
        PrimaryKeyConstraint("tenant", "scope", "lexeme", name="lexicon_pkey"),
        comment="Per tenant (and user, and actor) document frequencies of lexemes among active memories, folded from lexicon_delta.",
    )
    Table(
        "lexicon_delta", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("scope", Text, nullable=False),
        Column("lexeme", Text, nullable=False),
        Column("df", BigInteger, nullable=False),
        Column("len", BigInteger, nullable=False, server_default=text("0")),
        PrimaryKeyConstraint("id", name="lexicon_delta_pkey"),
        comment="Changes to pgmem.lexicon appended by the triggers on memories; pgmem.fold_lexicon() folds them.",
    )
    _layered_tables(md, embedding_dim)
    _ecosystem_tables(md, embedding_dim)
    return md


# --- ecosystem (issue 26, migration 0014): embedding moves, agent-framework sessions ----------
def _ecosystem_tables(md: MetaData, embedding_dim: int) -> None:
    Table(
        "embedding_moves", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("model", Text, nullable=False),
        Column("state", Text, nullable=False, server_default=text("'running'::text")),
        Column("total", Integer, nullable=False, server_default=text("0")),
        Column("started_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("finished_at", _TSTZ),
        Column("details", JSONB, nullable=False, server_default=_EMPTY_JSON),
        PrimaryKeyConstraint("id", name="embedding_moves_pkey"),
        _in("embedding_moves", "state", ("running", "done", "cancelled")),
        comment="Moves of a tenant to a new embedding model (pgmem.reembed): the target model, its progress and "
                "when it finished.",
    )
    Table(
        "reembed_queue", md,
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="CASCADE",
                                                   name="reembed_queue_memory_id_fkey"), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("move_id", BigInteger, ForeignKey("pgmem.embedding_moves.id", ondelete="CASCADE",
                                                 name="reembed_queue_move_id_fkey"), nullable=False),
        Column("embedding", Vector(embedding_dim)),
        Column("text_hash", Text),
        Column("queued_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("memory_id", name="reembed_queue_pkey"),
        comment="Memories of a running embedding move: waiting for a worker with the target model (embedding null), "
                "or embedded and waiting for the swap.",
    )
    Table(
        "session_items", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("session_id", Text, nullable=False),
        Column("seq", Integer, nullable=False),
        Column("user_id", Text),
        Column("role", Text),
        Column("item", JSONB, nullable=False),
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="SET NULL",
                                                   name="session_items_memory_id_fkey")),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("removed_at", _TSTZ),
        PrimaryKeyConstraint("id", name="session_items_pkey"),
        UniqueConstraint("tenant", "session_id", "seq", name="session_items_tenant_session_id_seq_key"),
        CheckConstraint("session_id ~ '\\S'::text AND length(session_id) <= 256", name="session_items_session_id_check"),
        comment="Items of an agent framework's conversation session (OpenAI Agents SDK Session: messages, tool calls "
                "and results as JSON), in order; removed_at marks the popped or cleared ones (kept, not deleted).",
    )


# --- layered tiers (issue 15, migration 0007) -------------------------------------------------
_INTENTS = ("general", "knowledge_base", "continuation", "profile", "privacy")
_PRECISION_MODES = ("concise", "analytical", "speculative", "implementation", "adversarial")
_PERSONALITY_MODES = ("default", "concise", "detailed", "playful", "empathetic")


def _fk(table: str, cols: tuple[str, ...], ref: str, ref_cols: tuple[str, ...], ondelete: str) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(list(cols), [f"pgmem.{ref}.{c}" for c in ref_cols], ondelete=ondelete,
                                name=f"{table}_{'_'.join(cols)}_fkey")


def _layered_tables(md: MetaData, embedding_dim: int) -> None:
    """Profile facts, conversations, threads, messages, insights, concept mentions, the intent
    cache and the behaviour and policy rules (layered-memory-architecture.md)."""
    Table(
        "profile_facts", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("user_id", Text, nullable=False),
        Column("key", Text, nullable=False),
        Column("value", JSONB, nullable=False),
        Column("confidence", REAL, nullable=False, server_default=text("1")),
        Column("source", Text, nullable=False, server_default=text("'api'::text")),
        Column("source_memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="SET NULL",
                                                          name="profile_facts_source_memory_id_fkey")),
        Column("statement", Text),
        Column("valid_from", _TSTZ, nullable=False),
        Column("valid_to", _TSTZ),
        Column("recorded_from", _TSTZ, nullable=False, server_default=text("clock_timestamp()")),
        Column("recorded_to", _TSTZ),
        Column("replaces", BigInteger, ForeignKey("pgmem.profile_facts.id", ondelete="SET NULL",
                                                  name="profile_facts_replaces_fkey")),
        Column("metadata", JSONB, nullable=False, server_default=_EMPTY_JSON),
        PrimaryKeyConstraint("id", name="profile_facts_pkey"),
        CheckConstraint("user_id ~ '\\S'::text", name="profile_facts_user_id_check"),
        CheckConstraint("key ~ '^[a-z][a-z0-9_]*(\\.[a-z0-9_]+)*$'::text AND length(key) <= 96",
                        name="profile_facts_key_check"),
        CheckConstraint("jsonb_typeof(value) <> 'null'::text", name="profile_facts_value_check"),
        _unit("profile_facts", "confidence"),
        CheckConstraint("source ~ '^[a-z][a-z0-9_:-]{0,31}$'::text", name="profile_facts_source_check"),
        _is_object("profile_facts", "metadata"),
        CheckConstraint("valid_to IS NULL OR valid_to > valid_from", name="profile_facts_check"),
        CheckConstraint("recorded_to IS NULL OR recorded_to >= recorded_from", name="profile_facts_check1"),
        comment="Tier B: key/value facts about a user, bitemporal (valid_from/valid_to in event time, "
                "recorded_from/recorded_to in transaction time); superseded rows are retired, never deleted.",
    )
    Table(
        "conversations", md,
        Column("tenant", Text, nullable=False),
        Column("conversation_id", Text, nullable=False),
        Column("user_id", Text),
        Column("title", Text),
        Column("topic_vector", Vector(embedding_dim)),
        Column("current_topic", Text),
        Column("topic_turns_stable", Integer, nullable=False, server_default=text("0")),
        Column("topic_drift_count", Integer, nullable=False, server_default=text("0")),
        Column("emotional_tone", Text, nullable=False, server_default=text("'neutral'::text")),
        Column("tone_shift_count", Integer, nullable=False, server_default=text("0")),
        Column("interaction_pattern", Text, nullable=False, server_default=text("'standard'::text")),
        Column("testing_flag", Boolean, nullable=False, server_default=text("false")),
        Column("repetition_count", Integer, nullable=False, server_default=text("0")),
        Column("meta_comment_count", Integer, nullable=False, server_default=text("0")),
        Column("last_intent", Text),
        Column("intent_history", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
        Column("intent_streak", Integer, nullable=False, server_default=text("0")),
        Column("message_count", Integer, nullable=False, server_default=text("0")),
        Column("avg_query_length", REAL, nullable=False, server_default=text("0")),
        Column("short_query_streak", Integer, nullable=False, server_default=text("0")),
        Column("dynamic_personality_mode", Text, nullable=False, server_default=text("'default'::text")),
        Column("last_update", _TSTZ),
        Column("conversation_start", _TSTZ, nullable=False, server_default=_NOW),
        Column("precision_mode", Text, nullable=False, server_default=text("'analytical'::text")),
        Column("behaviour_mode", Text),
        Column("last_topic_similarity", REAL),
        Column("tracker", JSONB, nullable=False, server_default=_EMPTY_JSON),
        PrimaryKeyConstraint("tenant", "conversation_id", name="conversations_pkey"),
        CheckConstraint("conversation_id ~ '\\S'::text AND length(conversation_id) <= 200",
                        name="conversations_conversation_id_check"),
        _in("conversations", "emotional_tone", ("neutral", "positive", "curious", "confused", "frustrated", "anxious")),
        _in("conversations", "interaction_pattern", ("rapid_fire", "exploratory", "deep_dive", "standard")),
        _in("conversations", "dynamic_personality_mode", _PERSONALITY_MODES),
        _in("conversations", "precision_mode", _PRECISION_MODES),
        _is_object("conversations", "tracker"),
        comment="Tier C: one row per conversation, the 19 ConversationState fields derived from its messages, "
                "the EMA topic vector (alpha .2) and the tracker's bounded working memory.",
    )
    Table(
        "threads", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("conversation_id", Text, nullable=False),
        Column("user_id", Text),
        Column("label", Text),
        Column("centroid", Vector(embedding_dim), nullable=False),
        Column("message_count", Integer, nullable=False, server_default=text("0")),
        Column("status", Text, nullable=False, server_default=text("'active'::text")),
        Column("summary", Text),
        Column("summary_source", Text),
        Column("summarized_at_count", Integer),
        Column("summarized_at", _TSTZ),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("last_message_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("id", name="threads_pkey"),
        UniqueConstraint("tenant", "id", name="threads_tenant_id_key"),
        _fk("threads", ("tenant", "conversation_id"), "conversations", ("tenant", "conversation_id"), "CASCADE"),
        _in("threads", "status", ("active", "archived")),
        _in("threads", "summary_source", ("extractive", "llm")),
        comment="Topic threads of a conversation: EMA centroid (alpha .3), message count, label, "
                "and the summary written every 8 messages.",
    )
    Table(
        "messages", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("conversation_id", Text, nullable=False),
        Column("seq", Integer, nullable=False),
        Column("role", Text, nullable=False),
        Column("content", Text, nullable=False),
        Column("embedding", Vector(embedding_dim)),
        Column("intent", Text),
        Column("confidence", REAL),
        Column("thread_id", BigInteger),
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="SET NULL",
                                                   name="messages_memory_id_fkey")),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("id", name="messages_pkey"),
        UniqueConstraint("tenant", "id", name="messages_tenant_id_key"),
        UniqueConstraint("tenant", "conversation_id", "seq", name="messages_tenant_conversation_id_seq_key"),
        _fk("messages", ("tenant", "conversation_id"), "conversations", ("tenant", "conversation_id"), "CASCADE"),
        _fk("messages", ("tenant", "thread_id"), "threads", ("tenant", "id"), "SET NULL (thread_id)"),
        _in("messages", "role", ("user", "assistant", "system", "tool")),
        CheckConstraint("content ~ '\\S'::text", name="messages_content_check"),
        _in("messages", "intent", _INTENTS),
        _unit("messages", "confidence"),
        comment="The turns of a conversation in order (user and assistant), with embedding, intent and thread: "
                "the source of conversation state, threads, history pruning and Q&A history.",
    )
    Table(
        "insights", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("user_id", Text),
        Column("conversation_id", Text),
        Column("thread_id", BigInteger),
        Column("message_id", BigInteger),
        Column("type", Text, nullable=False),
        Column("content", Text, nullable=False),
        Column("confidence", REAL, nullable=False),
        Column("source", Text, nullable=False, server_default=text("'api'::text")),
        Column("concepts", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
        Column("embedding", Vector(embedding_dim)),
        Column("tsv", TSVECTOR, Computed("to_tsvector('english'::regconfig, content)", persisted=True)),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("id", name="insights_pkey"),
        UniqueConstraint("tenant", "id", name="insights_tenant_id_key"),
        _fk("insights", ("tenant", "thread_id"), "threads", ("tenant", "id"), "SET NULL (thread_id)"),
        _fk("insights", ("tenant", "message_id"), "messages", ("tenant", "id"), "SET NULL (message_id)"),
        _in("insights", "type", ("decision", "conclusion", "hypothesis", "open_question", "observation")),
        CheckConstraint("content ~ '\\S'::text", name="insights_content_check"),
        _unit("insights", "confidence"),
        _in("insights", "source", ("cue", "llm", "api")),
        comment="Tier D: decisions, conclusions, hypotheses, open questions and observations, each with a "
                "confidence and its thread (cue phrases offline, an LLM when configured).",
    )
    Table(
        "concept_mentions", md,
        Column("id", BigInteger, Identity(always=True), nullable=False),
        Column("tenant", Text, nullable=False),
        Column("user_id", Text),
        Column("concept", Text, nullable=False),
        Column("term", Text, nullable=False),
        Column("conversation_id", Text),
        Column("thread_id", BigInteger),
        Column("message_id", BigInteger),
        Column("insight_id", BigInteger),
        Column("memory_id", BigInteger, ForeignKey("pgmem.memories.id", ondelete="SET NULL",
                                                   name="concept_mentions_memory_id_fkey")),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("id", name="concept_mentions_pkey"),
        _fk("concept_mentions", ("tenant", "thread_id"), "threads", ("tenant", "id"), "CASCADE"),
        _fk("concept_mentions", ("tenant", "message_id"), "messages", ("tenant", "id"), "CASCADE"),
        _fk("concept_mentions", ("tenant", "insight_id"), "insights", ("tenant", "id"), "CASCADE"),
        CheckConstraint("concept ~ '\\S'::text AND length(concept) <= 120", name="concept_mentions_concept_check"),
        comment="Concepts (capitalised nouns, snake_case/camelCase, quoted and backtick terms, acronyms) found in "
                "messages and insights, with their thread: concept links across threads are read from it.",
    )
    Table(
        "intent_cache", md,
        Column("tenant", Text, nullable=False),
        Column("text_hash", UUID(as_uuid=True), nullable=False),
        Column("text", Text, nullable=False),
        Column("user_id", Text),
        Column("intent", Text, nullable=False),
        Column("confidence", REAL, nullable=False),
        Column("source", Text, nullable=False, server_default=text("'llm'::text")),
        Column("model", Text),
        Column("hits", Integer, nullable=False, server_default=text("0")),
        Column("created_at", _TSTZ, nullable=False, server_default=_NOW),
        Column("last_hit_at", _TSTZ),
        PrimaryKeyConstraint("tenant", "text_hash", name="intent_cache_pkey"),
        _in("intent_cache", "intent", _INTENTS),
        _unit("intent_cache", "confidence"),
        CheckConstraint("source ~ '^[a-z][a-z0-9_:-]{0,31}$'::text", name="intent_cache_source_check"),
        comment="Intents answered by the LLM for messages no fast path classified, keyed by md5 of the normalised "
                "text; classify_intent reads it before falling back.",
    )
    Table(
        "behaviour_rules", md,
        Column("tenant", Text, nullable=False, server_default=_ALL_TENANTS),
        Column("mode", Text, nullable=False),
        Column("priority", Integer, nullable=False),
        Column("condition", Text, nullable=False),
        Column("retrieval_depth", Integer, nullable=False),
        Column("personality_mode", Text, nullable=False),
        Column("response_length_hint", Text, nullable=False),
        Column("precision_mode", Text),
        Column("behaviour_context", Text),
        Column("enabled", Boolean, nullable=False, server_default=text("true")),
        Column("description", Text),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", "mode", name="behaviour_rules_pkey"),
        CheckConstraint("mode ~ '^[a-z][a-z0-9_]{0,31}$'::text", name="behaviour_rules_mode_check"),
        CheckConstraint("retrieval_depth >= 0 AND retrieval_depth <= 50", name="behaviour_rules_retrieval_depth_check"),
        _in("behaviour_rules", "personality_mode", _PERSONALITY_MODES),
        _in("behaviour_rules", "response_length_hint", ("brief", "normal", "detailed")),
        _in("behaviour_rules", "precision_mode", _PRECISION_MODES),
        comment="The behaviour engine's modes: the enabled rule of highest priority whose condition (jsonpath over "
                "the features) holds decides retrieval depth, personality, response length and precision.",
    )
    Table(
        "policy_rules", md,
        Column("tenant", Text, nullable=False, server_default=_ALL_TENANTS),
        Column("name", Text, nullable=False),
        Column("priority", Integer, nullable=False),
        Column("condition", Text, nullable=False),
        Column("flags", JSONB, nullable=False),
        Column("enabled", Boolean, nullable=False, server_default=text("true")),
        Column("description", Text),
        Column("updated_at", _TSTZ, nullable=False, server_default=_NOW),
        PrimaryKeyConstraint("tenant", "name", name="policy_rules_pkey"),
        CheckConstraint("name ~ '^[a-z][a-z0-9_]{0,62}$'::text", name="policy_rules_name_check"),
        _is_object("policy_rules", "flags"),
        comment="Policy: every enabled rule whose condition (jsonpath over intent and features) holds sets its flags "
                "(inject_rag, inject_qa_history, inject_profile, privacy_mode), in ascending priority: a later rule "
                "overrides an earlier one.",
    )


metadata: MetaData = make_metadata(DEFAULT_EMBEDDING_DIM)

settings: Table = metadata.tables["pgmem.settings"]
tenants: Table = metadata.tables["pgmem.tenants"]
categories: Table = metadata.tables["pgmem.categories"]
profiles: Table = metadata.tables["pgmem.profiles"]
memories: Table = metadata.tables["pgmem.memories"]
links: Table = metadata.tables["pgmem.links"]
accesses: Table = metadata.tables["pgmem.accesses"]
history: Table = metadata.tables["pgmem.history"]
embedding_queue: Table = metadata.tables["pgmem.embedding_queue"]
job_runs: Table = metadata.tables["pgmem.job_runs"]
thresholds: Table = metadata.tables["pgmem.thresholds"]
threshold_changes: Table = metadata.tables["pgmem.threshold_changes"]
activation_log: Table = metadata.tables["pgmem.activation_log"]
feedback: Table = metadata.tables["pgmem.feedback"]
job_state: Table = metadata.tables["pgmem.job_state"]
py_modules: Table = metadata.tables["pgmem.py_modules"]
tenant_grants: Table = metadata.tables["pgmem.tenant_grants"]
claim_keys: Table = metadata.tables["pgmem.claim_keys"]
# 0008 (reconstructive)
reconstructions: Table = metadata.tables["pgmem.reconstructions"]
identity_traits: Table = metadata.tables["pgmem.identity_traits"]
identity_beliefs: Table = metadata.tables["pgmem.identity_beliefs"]
identity_goals: Table = metadata.tables["pgmem.identity_goals"]
identity_snapshots: Table = metadata.tables["pgmem.identity_snapshots"]
work_queue: Table = metadata.tables["pgmem.work_queue"]
# 0009 (clusters)
clusters: Table = metadata.tables["pgmem.clusters"]
cluster_state: Table = metadata.tables["pgmem.cluster_state"]
cluster_moves: Table = metadata.tables["pgmem.cluster_moves"]
cluster_steps: Table = metadata.tables["pgmem.cluster_steps"]
memory_coords: Table = metadata.tables["pgmem.memory_coords"]
eval_queries: Table = metadata.tables["pgmem.eval_queries"]
eval_judgements: Table = metadata.tables["pgmem.eval_judgements"]
eval_runs: Table = metadata.tables["pgmem.eval_runs"]
memory_vectors: Table = metadata.tables["pgmem.memory_vectors"]
vector_queue: Table = metadata.tables["pgmem.vector_queue"]
job_locks: Table = metadata.tables["pgmem.job_locks"]
# 0014 (ecosystem)
embedding_moves: Table = metadata.tables["pgmem.embedding_moves"]
reembed_queue: Table = metadata.tables["pgmem.reembed_queue"]
session_items: Table = metadata.tables["pgmem.session_items"]
write_locks: Table = metadata.tables["pgmem.write_locks"]
write_checked: Table = metadata.tables["pgmem.write_checked"]  # 0018
recent_vectors: Table = metadata.tables["pgmem.recent_vectors"]  # 0012
api_keys: Table = metadata.tables["pgmem.api_keys"]  # 0013
access_log: Table = metadata.tables["pgmem.access_log"]  # 0016
attention_log: Table = metadata.tables["pgmem.attention_log"]  # 0022
documents: Table = metadata.tables["pgmem.documents"]  # 0019
document_chunks: Table = metadata.tables["pgmem.document_chunks"]
lexicon: Table = metadata.tables["pgmem.lexicon"]  # 0005 (read path)
lexicon_delta: Table = metadata.tables["pgmem.lexicon_delta"]
# layered tiers (0007)
profile_facts: Table = metadata.tables["pgmem.profile_facts"]
conversations: Table = metadata.tables["pgmem.conversations"]
threads: Table = metadata.tables["pgmem.threads"]
messages: Table = metadata.tables["pgmem.messages"]
insights: Table = metadata.tables["pgmem.insights"]
concept_mentions: Table = metadata.tables["pgmem.concept_mentions"]
intent_cache: Table = metadata.tables["pgmem.intent_cache"]
behaviour_rules: Table = metadata.tables["pgmem.behaviour_rules"]
policy_rules: Table = metadata.tables["pgmem.policy_rules"]


def add_to_metadata(target: MetaData, embedding_dim: int = DEFAULT_EMBEDDING_DIM) -> dict[str, Table]:
    """Copy pgmem's tables (schema ``pgmem`` kept) into ``target``, so that string foreign
    keys such as ``ForeignKey("pgmem.memories.id")`` in ``target`` resolve. Tables already
    in ``target`` are kept. Returns ``{table name: Table in target}``."""
    source = metadata if embedding_dim == DEFAULT_EMBEDDING_DIM else make_metadata(embedding_dim)
    return {t.name: target.tables[t.key] if t.key in target.tables else t.to_metadata(target)
            for t in source.sorted_tables}


# --- Alembic autogenerate filters ------------------------------------------------------

def include_name(name: str | None, type_: str, parent_names: dict[str, Any]) -> bool:
    """Alembic ``include_name`` hook: skip schema ``pgmem`` and pgmem's version table."""
    if type_ == "schema":
        return name != SCHEMA
    if type_ == "table":
        return parent_names.get("schema_name") != SCHEMA and name != VERSION_TABLE
    return True


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic ``include_object`` hook: skip every object of schema ``pgmem`` (tables and
    their columns, indexes, constraints, foreign keys) and pgmem's version table."""
    table = obj if type_ == "table" else getattr(obj, "table", None)
    if getattr(table, "schema", None) == SCHEMA:
        return False
    if type_ == "table" and name == VERSION_TABLE:
        return False
    return True


# --- Typed declarative classes (embedding dimension 384; mapped onto the tables above) ---
#
# Attribute names are the column names, except ``metadata`` (reserved by declarative),
# which is ``metadata_``. Generated and identity columns are never written by the ORM.

class Base(DeclarativeBase):
    metadata = metadata


class Setting(Base):
    __table__ = settings
    tenant: Mapped[str]
    key: Mapped[str]
    value: Mapped[Any]
    description: Mapped[Optional[str]]
    updated_at: Mapped[_dt.datetime]


class Tenant(Base):
    __table__ = tenants
    tenant: Mapped[str]
    description: Mapped[Optional[str]]
    created_at: Mapped[_dt.datetime]


class Category(Base):
    __table__ = categories
    tenant: Mapped[str]
    category: Mapped[str]
    weight: Mapped[float]
    description: Mapped[Optional[str]]


class Profile(Base):
    __table__ = profiles
    tenant: Mapped[str]
    name: Mapped[str]
    method: Mapped[str]
    weights: Mapped[dict[str, Any]]
    params: Mapped[dict[str, Any]]
    description: Mapped[Optional[str]]
    builtin: Mapped[bool]
    updated_at: Mapped[_dt.datetime]


class Memory(Base):
    __table__ = memories
    id: Mapped[int]
    tenant: Mapped[str]
    user_id: Mapped[Optional[str]]
    agent_id: Mapped[Optional[str]]
    session_id: Mapped[Optional[str]]
    tier: Mapped[str]
    category: Mapped[str]
    content: Mapped[str]
    summary: Mapped[Optional[str]]
    who: Mapped[Optional[str]]
    what: Mapped[Optional[str]]
    happened_at: Mapped[Optional[_dt.datetime]]
    location: Mapped[Optional[str]]
    why: Mapped[Optional[str]]
    how: Mapped[Optional[str]]
    topics: Mapped[list[str]]
    entities: Mapped[list[str]]
    valence: Mapped[Optional[float]]
    arousal: Mapped[Optional[float]]
    dominance: Mapped[Optional[float]]
    importance: Mapped[float]
    salience: Mapped[Optional[float]]
    surprise: Mapped[Optional[float]]
    gate: Mapped[dict[str, Any]]
    embedding: Mapped[Optional[Any]]  # numpy array (pgvector) or None
    embedding_model: Mapped[Optional[str]]
    embedded_at: Mapped[Optional[_dt.datetime]]
    tsv: Mapped[Optional[str]]
    content_hash: Mapped[Optional[_uuid.UUID]]
    metadata_: Mapped[dict[str, Any]] = column_property(memories.c.metadata)
    token_count: Mapped[int]
    access_count: Mapped[int]
    last_accessed_at: Mapped[Optional[_dt.datetime]]
    created_at: Mapped[_dt.datetime]
    updated_at: Mapped[_dt.datetime]
    expires_at: Mapped[Optional[_dt.datetime]]
    state: Mapped[str]
    state_changed_at: Mapped[Optional[_dt.datetime]]
    merged_into: Mapped[Optional[int]]
    merged_from: Mapped[list[int]]
    cluster_id: Mapped[Optional[int]]
    event_key: Mapped[Optional[str]]
    seq: Mapped[Optional[int]]
    motor: Mapped[Optional[dict[str, Any]]]  # 0008 (reconstructive)
    sensory: Mapped[Optional[dict[str, Any]]]  # 0008 (reconstructive)


class Link(Base):
    __table__ = links
    tenant: Mapped[str]
    src_id: Mapped[int]
    dst_id: Mapped[int]
    kind: Mapped[str]
    weight: Mapped[float]
    count: Mapped[int]
    metadata_: Mapped[dict[str, Any]] = column_property(links.c.metadata)
    created_at: Mapped[_dt.datetime]
    updated_at: Mapped[_dt.datetime]


class Access(Base):
    __table__ = accesses
    id: Mapped[int]
    tenant: Mapped[str]
    memory_id: Mapped[int]
    accessed_at: Mapped[_dt.datetime]
    kind: Mapped[str]
    query_id: Mapped[Optional[_uuid.UUID]]
    rank: Mapped[Optional[int]]
    score: Mapped[Optional[float]]
    count: Mapped[int]


class HistoryEntry(Base):
    __table__ = history
    id: Mapped[int]
    tenant: Mapped[str]
    memory_id: Mapped[Optional[int]]
    op: Mapped[str]
    at: Mapped[_dt.datetime]
    actor: Mapped[str]
    before: Mapped[Optional[dict[str, Any]]]
    after: Mapped[Optional[dict[str, Any]]]
    details: Mapped[dict[str, Any]]


class EmbeddingQueueEntry(Base):
    __table__ = embedding_queue
    memory_id: Mapped[int]
    tenant: Mapped[str]
    queued_at: Mapped[_dt.datetime]
    attempts: Mapped[int]
    last_error: Mapped[Optional[str]]
    not_before: Mapped[_dt.datetime]


class JobRun(Base):
    __table__ = job_runs
    id: Mapped[int]
    tenant: Mapped[Optional[str]]
    job: Mapped[str]
    params: Mapped[dict[str, Any]]
    started_at: Mapped[_dt.datetime]
    finished_at: Mapped[Optional[_dt.datetime]]
    status: Mapped[str]
    examined: Mapped[int]
    changed: Mapped[int]
    error: Mapped[Optional[str]]
    details: Mapped[dict[str, Any]]
    pid: Mapped[Optional[int]]


class Threshold(Base):
    __table__ = thresholds
    tenant: Mapped[str]
    context_type: Mapped[str]
    threshold: Mapped[float]
    updated_at: Mapped[_dt.datetime]


class ThresholdChange(Base):
    __table__ = threshold_changes
    id: Mapped[int]
    tenant: Mapped[str]
    context_type: Mapped[str]
    old_value: Mapped[Optional[float]]
    new_value: Mapped[float]
    false_positive_rate: Mapped[Optional[float]]
    false_negative_rate: Mapped[Optional[float]]
    feedback_count: Mapped[Optional[int]]
    reason: Mapped[str]
    job_run_id: Mapped[Optional[int]]
    changed_at: Mapped[_dt.datetime]


class ActivationLogEntry(Base):
    __table__ = activation_log
    tenant: Mapped[str]
    query_id: Mapped[_uuid.UUID]
    memory_id: Mapped[int]
    context_type: Mapped[str]
    score: Mapped[float]
    threshold: Mapped[float]
    activated: Mapped[bool]
    logged_at: Mapped[_dt.datetime]


class Feedback(Base):
    __table__ = feedback
    id: Mapped[int]
    tenant: Mapped[str]
    memory_id: Mapped[int]
    query_id: Mapped[Optional[_uuid.UUID]]
    relevant: Mapped[bool]
    context_type: Mapped[Optional[str]]
    activated: Mapped[Optional[bool]]
    score: Mapped[Optional[float]]
    created_at: Mapped[_dt.datetime]
    tuned_at: Mapped[Optional[_dt.datetime]]


class JobState(Base):
    __table__ = job_state
    tenant: Mapped[str]
    job: Mapped[str]
    cursor_at: Mapped[Optional[_dt.datetime]]
    cursor_id: Mapped[Optional[int]]
    updated_at: Mapped[_dt.datetime]


class PyModule(Base):
    __table__ = py_modules
    name: Mapped[str]
    source: Mapped[str]
    sha256: Mapped[str]
    updated_at: Mapped[_dt.datetime]


class TenantGrant(Base):
    __table__ = tenant_grants
    role_name: Mapped[str]
    tenant: Mapped[str]
    granted_at: Mapped[_dt.datetime]
    granted_by: Mapped[str]
    note: Mapped[Optional[str]]


class ClaimKey(Base):
    __table__ = claim_keys
    kid: Mapped[str]
    ipad_key: Mapped[bytes]
    opad_key: Mapped[bytes]
    created_at: Mapped[_dt.datetime]
    created_by: Mapped[str]
    expires_at: Mapped[Optional[_dt.datetime]]
    note: Mapped[Optional[str]]


# --- 0008 (reconstructive) ---

class Reconstruction(Base):
    __table__ = reconstructions
    id: Mapped[int]
    tenant: Mapped[str]
    query_hash: Mapped[_uuid.UUID]
    query_text: Mapped[Optional[str]]
    user_id: Mapped[Optional[str]]
    k: Mapped[int]
    member_ids: Mapped[list[int]]
    scores: Mapped[list[float]]
    certainty: Mapped[Optional[float]]
    params: Mapped[dict[str, Any]]
    created_at: Mapped[_dt.datetime]


class IdentityTrait(Base):
    __table__ = identity_traits
    tenant: Mapped[str]
    agent_id: Mapped[str]
    name: Mapped[str]
    value: Mapped[float]
    inertia: Mapped[float]
    observations: Mapped[int]
    created_at: Mapped[_dt.datetime]
    updated_at: Mapped[_dt.datetime]


class IdentityBelief(Base):
    __table__ = identity_beliefs
    tenant: Mapped[str]
    agent_id: Mapped[str]
    key: Mapped[str]
    statement: Mapped[str]
    confidence: Mapped[float]
    inertia: Mapped[float]
    evidence: Mapped[list[int]]
    observations: Mapped[int]
    created_at: Mapped[_dt.datetime]
    updated_at: Mapped[_dt.datetime]


class IdentityGoal(Base):
    __table__ = identity_goals
    tenant: Mapped[str]
    agent_id: Mapped[str]
    key: Mapped[str]
    goal: Mapped[str]
    embedding: Mapped[Optional[Any]]  # numpy array (pgvector) or None
    priority: Mapped[float]
    inertia: Mapped[float]
    state: Mapped[str]
    observations: Mapped[int]
    created_at: Mapped[_dt.datetime]
    updated_at: Mapped[_dt.datetime]


class IdentitySnapshot(Base):
    __table__ = identity_snapshots
    id: Mapped[int]
    tenant: Mapped[str]
    agent_id: Mapped[str]
    taken_at: Mapped[_dt.datetime]
    reason: Mapped[str]
    identity: Mapped[dict[str, Any]]


class WorkQueueEntry(Base):
    __table__ = work_queue
    id: Mapped[int]
    tenant: Mapped[str]
    priority: Mapped[int]
    task: Mapped[str]
    memory_ids: Mapped[list[int]]
    params: Mapped[dict[str, Any]]
    enqueued_at: Mapped[_dt.datetime]
    not_before: Mapped[_dt.datetime]
    attempts: Mapped[int]
    last_error: Mapped[Optional[str]]


# --- 0009 (clusters) ---

class Cluster(Base):
    __table__ = clusters
    id: Mapped[int]
    tenant: Mapped[str]
    state: Mapped[str]
    centroid: Mapped[Any]  # numpy array (pgvector)
    n_seen: Mapped[float]
    size: Mapped[int]
    energy: Mapped[float]
    label: Mapped[Optional[str]]
    top_terms: Mapped[list[str]]
    generation: Mapped[int]
    merged_into_cluster: Mapped[Optional[int]]
    created_at: Mapped[_dt.datetime]
    updated_at: Mapped[_dt.datetime]


class ClusterState(Base):
    __table__ = cluster_state
    tenant: Mapped[str]
    phase: Mapped[str]
    cursor_id: Mapped[int]
    generation: Mapped[int]
    k: Mapped[Optional[int]]
    fitted_n: Mapped[int]
    fitted_at: Mapped[Optional[_dt.datetime]]
    step_at: Mapped[Optional[_dt.datetime]]
    access_cursor: Mapped[int]
    embed_cursor_at: Mapped[Optional[_dt.datetime]]
    embed_cursor_id: Mapped[Optional[int]]
    run_details: Mapped[dict[str, Any]]
    updated_at: Mapped[_dt.datetime]


class ClusterMove(Base):
    __table__ = cluster_moves
    id: Mapped[int]
    tenant: Mapped[str]
    memory_id: Mapped[int]
    from_cluster: Mapped[Optional[int]]
    to_cluster: Mapped[Optional[int]]
    reason: Mapped[str]
    pull: Mapped[Optional[float]]
    job_run_id: Mapped[Optional[int]]
    moved_at: Mapped[_dt.datetime]


class ClusterStep(Base):
    __table__ = cluster_steps
    tenant: Mapped[str]
    cluster_id: Mapped[int]
    at: Mapped[_dt.datetime]
    size: Mapped[int]
    energy: Mapped[float]
    accesses: Mapped[int]
    job_run_id: Mapped[Optional[int]]


class MemoryCoord(Base):
    __table__ = memory_coords
    tenant: Mapped[str]
    memory_id: Mapped[int]
    method: Mapped[str]
    x: Mapped[float]
    y: Mapped[float]
    z: Mapped[float]
    computed_at: Mapped[_dt.datetime]


class EvalQuery(Base):
    __table__ = eval_queries
    tenant: Mapped[str]
    query: Mapped[str]
    query_embedding: Mapped[Optional[Any]]  # numpy array (pgvector) or None
    created_at: Mapped[_dt.datetime]


class EvalJudgement(Base):
    __table__ = eval_judgements
    tenant: Mapped[str]
    query: Mapped[str]
    memory_id: Mapped[int]
    relevance: Mapped[float]
    judged_at: Mapped[_dt.datetime]


class EvalRun(Base):
    __table__ = eval_runs
    id: Mapped[int]
    tenant: Mapped[str]
    run_at: Mapped[_dt.datetime]
    query: Mapped[str]
    method: Mapped[str]
    k: Mapped[int]
    retrieved: Mapped[list[int]]
    relevant: Mapped[int]
    judged: Mapped[int]
    precision_at_k: Mapped[float]
    ndcg: Mapped[float]
    ild: Mapped[Optional[float]]
class MemoryVector(Base):
    __table__ = memory_vectors
    memory_id: Mapped[int]
    tenant: Mapped[str]
    user_scope: Mapped[str]
    embedding: Mapped[Any]  # numpy array (pgvector)


class VectorQueueEntry(Base):
    __table__ = vector_queue
    memory_id: Mapped[int]
    tenant: Mapped[str]
    queued_at: Mapped[_dt.datetime]


class JobLock(Base):
    __table__ = job_locks
    tenant: Mapped[str]
    job: Mapped[str]
    holder_pid: Mapped[Optional[int]]
    holder_since: Mapped[Optional[_dt.datetime]]
    run_id: Mapped[Optional[int]]
    updated_at: Mapped[_dt.datetime]


class WriteLock(Base):
    __table__ = write_locks
    tenant: Mapped[str]
    scope: Mapped[str]


class WriteChecked(Base):
    """0018: the marker of remember's own INSERT (sql/100_remember.sql)."""
    __table__ = write_checked
    pid: Mapped[int]
    xid: Mapped[int]


class LexiconEntry(Base):
    """0005 (read path): a lexeme's document frequency in a tenant's scope (sql/201_lexical.sql)."""
    __table__ = lexicon
    tenant: Mapped[str]
    scope: Mapped[str]
    lexeme: Mapped[str]
    df: Mapped[int]
    len: Mapped[int]


class LexiconDelta(Base):
    """0005 (read path): an appended change to pgmem.lexicon, folded by the job lexicon."""
    __table__ = lexicon_delta
    id: Mapped[int]
    tenant: Mapped[str]
    scope: Mapped[str]
    lexeme: Mapped[str]
    df: Mapped[int]
    len: Mapped[int]
# layered tiers (0007)


class ProfileFact(Base):
    __table__ = profile_facts
    id: Mapped[int]
    tenant: Mapped[str]
    user_id: Mapped[str]
    key: Mapped[str]
    value: Mapped[Any]
    confidence: Mapped[float]
    source: Mapped[str]
    source_memory_id: Mapped[Optional[int]]
    statement: Mapped[Optional[str]]
    valid_from: Mapped[_dt.datetime]
    valid_to: Mapped[Optional[_dt.datetime]]
    recorded_from: Mapped[_dt.datetime]
    recorded_to: Mapped[Optional[_dt.datetime]]
    replaces: Mapped[Optional[int]]
    metadata_: Mapped[dict[str, Any]] = column_property(profile_facts.c.metadata)


class Conversation(Base):
    __table__ = conversations
    tenant: Mapped[str]
    conversation_id: Mapped[str]
    user_id: Mapped[Optional[str]]
    title: Mapped[Optional[str]]
    topic_vector: Mapped[Optional[Any]]  # numpy array (pgvector) or None
    current_topic: Mapped[Optional[str]]
    topic_turns_stable: Mapped[int]
    topic_drift_count: Mapped[int]
    emotional_tone: Mapped[str]
    tone_shift_count: Mapped[int]
    interaction_pattern: Mapped[str]
    testing_flag: Mapped[bool]
    repetition_count: Mapped[int]
    meta_comment_count: Mapped[int]
    last_intent: Mapped[Optional[str]]
    intent_history: Mapped[list[str]]
    intent_streak: Mapped[int]
    message_count: Mapped[int]
    avg_query_length: Mapped[float]
    short_query_streak: Mapped[int]
    dynamic_personality_mode: Mapped[str]
    last_update: Mapped[Optional[_dt.datetime]]
    conversation_start: Mapped[_dt.datetime]
    precision_mode: Mapped[str]
    behaviour_mode: Mapped[Optional[str]]
    last_topic_similarity: Mapped[Optional[float]]
    tracker: Mapped[dict[str, Any]]


class Thread(Base):
    __table__ = threads
    id: Mapped[int]
    tenant: Mapped[str]
    conversation_id: Mapped[str]
    user_id: Mapped[Optional[str]]
    label: Mapped[Optional[str]]
    centroid: Mapped[Any]  # numpy array (pgvector) or None
    message_count: Mapped[int]
    status: Mapped[str]
    summary: Mapped[Optional[str]]
    summary_source: Mapped[Optional[str]]
    summarized_at_count: Mapped[Optional[int]]
    summarized_at: Mapped[Optional[_dt.datetime]]
    created_at: Mapped[_dt.datetime]
    last_message_at: Mapped[_dt.datetime]


class Message(Base):
    __table__ = messages
    id: Mapped[int]
    tenant: Mapped[str]
    conversation_id: Mapped[str]
    seq: Mapped[int]
    role: Mapped[str]
    content: Mapped[str]
    embedding: Mapped[Optional[Any]]  # numpy array (pgvector) or None
    intent: Mapped[Optional[str]]
    confidence: Mapped[Optional[float]]
    thread_id: Mapped[Optional[int]]
    memory_id: Mapped[Optional[int]]
    created_at: Mapped[_dt.datetime]


class Insight(Base):
    __table__ = insights
    id: Mapped[int]
    tenant: Mapped[str]
    user_id: Mapped[Optional[str]]
    conversation_id: Mapped[Optional[str]]
    thread_id: Mapped[Optional[int]]
    message_id: Mapped[Optional[int]]
    type: Mapped[str]
    content: Mapped[str]
    confidence: Mapped[float]
    source: Mapped[str]
    concepts: Mapped[list[str]]
    embedding: Mapped[Optional[Any]]  # numpy array (pgvector) or None
    tsv: Mapped[Optional[str]]
    created_at: Mapped[_dt.datetime]


class ConceptMention(Base):
    __table__ = concept_mentions
    id: Mapped[int]
    tenant: Mapped[str]
    user_id: Mapped[Optional[str]]
    concept: Mapped[str]
    term: Mapped[str]
    conversation_id: Mapped[Optional[str]]
    thread_id: Mapped[Optional[int]]
    message_id: Mapped[Optional[int]]
    insight_id: Mapped[Optional[int]]
    memory_id: Mapped[Optional[int]]
    created_at: Mapped[_dt.datetime]


class IntentCacheEntry(Base):
    __table__ = intent_cache
    tenant: Mapped[str]
    text_hash: Mapped[_uuid.UUID]
    text: Mapped[str]
    user_id: Mapped[Optional[str]]
    intent: Mapped[str]
    confidence: Mapped[float]
    source: Mapped[str]
    model: Mapped[Optional[str]]
    hits: Mapped[int]
    created_at: Mapped[_dt.datetime]
    last_hit_at: Mapped[Optional[_dt.datetime]]


class BehaviourRule(Base):
    __table__ = behaviour_rules
    tenant: Mapped[str]
    mode: Mapped[str]
    priority: Mapped[int]
    condition: Mapped[str]
    retrieval_depth: Mapped[int]
    personality_mode: Mapped[str]
    response_length_hint: Mapped[str]
    precision_mode: Mapped[Optional[str]]
    behaviour_context: Mapped[Optional[str]]
    enabled: Mapped[bool]
    description: Mapped[Optional[str]]
    updated_at: Mapped[_dt.datetime]


class PolicyRule(Base):
    __table__ = policy_rules
    tenant: Mapped[str]
    name: Mapped[str]
    priority: Mapped[int]
    condition: Mapped[str]
    flags: Mapped[dict[str, Any]]
    enabled: Mapped[bool]
    description: Mapped[Optional[str]]
    updated_at: Mapped[_dt.datetime]


# ecosystem (0014)
class EmbeddingMove(Base):
    """A move of a tenant to a new embedding model (pgmem.reembed)."""
    __table__ = embedding_moves
    id: Mapped[int]
    tenant: Mapped[str]
    model: Mapped[str]
    state: Mapped[str]
    total: Mapped[int]
    started_at: Mapped[_dt.datetime]
    finished_at: Mapped[Optional[_dt.datetime]]
    details: Mapped[dict[str, Any]]


class ReembedQueueEntry(Base):
    """A memory of a running embedding move, with its new vector once a worker made it."""
    __table__ = reembed_queue
    memory_id: Mapped[int]
    tenant: Mapped[str]
    move_id: Mapped[int]
    embedding: Mapped[Optional[Any]]  # numpy array (pgvector) or None
    text_hash: Mapped[Optional[str]]
    queued_at: Mapped[_dt.datetime]


class SessionItem(Base):
    """An item of an agent framework's conversation session (pgmem.session_add_items)."""
    __table__ = session_items
    id: Mapped[int]
    tenant: Mapped[str]
    session_id: Mapped[str]
    seq: Mapped[int]
    user_id: Mapped[Optional[str]]
    role: Mapped[Optional[str]]
    item: Mapped[dict[str, Any]]
    memory_id: Mapped[Optional[int]]
    created_at: Mapped[_dt.datetime]
    removed_at: Mapped[Optional[_dt.datetime]]


class RecentVector(Base):
    """A recent memory's vector under the recent memories' own HNSW index (0012)."""
    __table__ = recent_vectors
    memory_id: Mapped[int]
    tenant: Mapped[str]
    user_scope: Mapped[str]
    created_at: Mapped[_dt.datetime]
    embedding: Mapped[Any]  # numpy array (pgvector)


class ApiKey(Base):
    """A tenant's LLM API key (0013; write-only: the owner role alone reads it)."""
    __table__ = api_keys
    tenant: Mapped[str]
    provider: Mapped[str]
    api_key: Mapped[str]
    fingerprint: Mapped[str]
    set_at: Mapped[_dt.datetime]
    set_by: Mapped[str]


class AccessLogEntry(Base):
    """Retrievals or uses of memories not folded yet (0016, sql/212_access_log.sql)."""
    __table__ = access_log
    id: Mapped[int]
    tenant: Mapped[str]
    at: Mapped[_dt.datetime]
    kind: Mapped[str]
    source: Mapped[str]
    ids: Mapped[list[int]]
    query_id: Mapped[Optional[_uuid.UUID]]


class AttentionLogEntry(Base):
    """JAM attention weights of one search_attention response (0022, sql/280_attention.sql)."""
    __table__ = attention_log
    id: Mapped[int]
    tenant: Mapped[str]
    at: Mapped[_dt.datetime]
    source: Mapped[str]
    query_id: Mapped[Optional[_uuid.UUID]]
    scale: Mapped[Optional[float]]
    memory_ids: Mapped[list[int]]
    weights: Mapped[list[float]]


class Document(Base):
    """A knowledge-base document (0019, sql/680_documents.sql): its text is in its chunks."""
    __table__ = documents
    id: Mapped[int]
    tenant: Mapped[str]
    user_id: Mapped[Optional[str]]
    title: Mapped[str]
    source: Mapped[Optional[str]]
    content_hash: Mapped[_uuid.UUID]
    metadata_: Mapped[dict[str, Any]] = column_property(documents.c.metadata)
    chunks: Mapped[int]
    tokens: Mapped[int]
    state: Mapped[str]
    created_at: Mapped[_dt.datetime]
    updated_at: Mapped[_dt.datetime]


class DocumentChunk(Base):
    """One chunk of a knowledge-base document, in order, with its embedding (0019)."""
    __table__ = document_chunks
    id: Mapped[int]
    tenant: Mapped[str]
    document_id: Mapped[int]
    user_id: Mapped[Optional[str]]
    ord: Mapped[int]
    content: Mapped[str]
    token_count: Mapped[int]
    embedding: Mapped[Any]  # numpy array (pgvector)
    embedding_model: Mapped[Optional[str]]
    tsv: Mapped[Any]
    created_at: Mapped[_dt.datetime]
