"""The thin Python client. It extracts 5W1H (optional), computes embeddings, and calls the
SQL API: one method is one SQL call, and every method accepts the caller's connection (and
so its transaction) through ``conn=``.

    from pgmem import MemoryClient
    mem = MemoryClient(tenant="acme")            # PGMEM_DSN, else the embedded cluster
    mem.remember("I'm allergic to peanuts", who="user", user_id="maya", category="fact")
    for hit in mem.search("what is maya allergic to", k=5):
        print(hit.score, hit.content, hit.signals)
"""
from __future__ import annotations

import base64
import functools
import inspect
import json
import logging
import random
import re
import sys
import time
from contextlib import contextmanager, nullcontext as _nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Concatenate, Coroutine, Iterable, Iterator, Mapping, ParamSpec, Sequence, TypeVar

import psycopg
from psycopg.rows import dict_row

from .errors import ConfigError, PgmemError, ServerUnavailable, from_database

log = logging.getLogger("pgmem.client")

RETRYABLE_SQLSTATES = {"40001", "40P01", "57P01", "08006", "08003", "08000"}


# ------------------------------------------------------------------------- results
@dataclass
class RememberResult:
    id: int | None
    decision: str
    surprise: float | None
    importance: float | None
    salience: float | None
    nearest_id: int | None = None
    nearest_similarity: float | None = None
    details: dict = field(default_factory=dict)

    @property
    def stored(self) -> bool:
        return self.decision == "stored"


@dataclass
class Hit:
    """One ranked memory with the per-signal scores that explain its rank."""

    id: int
    score: float
    signals: dict[str, float]
    content: str
    summary: str | None = None
    who: str | None = None
    what: str | None = None
    when: datetime | None = None
    where: str | None = None
    why: str | None = None
    how: str | None = None
    category: str | None = None
    created_at: datetime | None = None
    metadata: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


_HIT_FIELDS = {"id", "score", "content", "summary", "memory_summary", "who", "what", "happened_at", "location", "why", "how",
               "category", "created_at", "metadata"}


def _hit(row: Mapping[str, Any], signal_names: Sequence[str]) -> Hit:
    signals = {s: float(row[s]) for s in signal_names if s in row and row[s] is not None}
    extra = {k: v for k, v in row.items() if k not in _HIT_FIELDS and k not in signals}
    return Hit(id=row["id"], score=float(row["score"]), signals=signals, content=row.get("content"),
               summary=row.get("summary", row.get("memory_summary")), who=row.get("who"), what=row.get("what"), when=row.get("happened_at"),
               where=row.get("location"), why=row.get("why"), how=row.get("how"), category=row.get("category"),
               created_at=row.get("created_at"), metadata=row.get("metadata") or {}, extra=extra)


SEARCH_SIGNALS = ("semantic", "lexical", "recency", "actor", "spatial", "usage", "time", "session", "neighbour",
                  "context")
ACTIVATE_SIGNALS = ("embedding_sim", "metadata_sim", "summary_sim", "temporal")
RECALL_SIGNALS = ("relevance", "decayed_importance", "recency", "access_frequency")


# --------------------------------------------------------------------- events → args
def event_to_args(event: Mapping[str, Any] | str, extractor=None, *, now: datetime | None = None) -> dict[str, Any]:
    """Map an event (the JSONL format of ``pgmem ingest``, see examples/README.md) or a plain
    text to remember() arguments, filling the 5W1H fields with the extractor when given.
    Fields the event states explicitly win over extracted ones."""
    if isinstance(event, str):
        event = {"content": event}
    content = event.get("content") or event.get("text")
    if content is None or not str(content).strip():
        raise PgmemError("event has no content: a memory needs some text")
    args: dict[str, Any] = {
        "content": content,
        "who": event.get("who") or event.get("actor") or event.get("role"),
        "what": event.get("what"),
        "happened_at": event.get("when") or event.get("happened_at"),
        "location": event.get("where") or event.get("location"),
        "why": event.get("why"),
        "how": event.get("how"),
        "category": event.get("category"),
        "importance": event.get("importance"),
        "metadata": dict(event.get("metadata") or {}),
        "user_id": event.get("user_id"),
        "agent_id": event.get("agent_id"),
        "session_id": event.get("session_id"),
        "created_at": event.get("ts") or event.get("created_at"),
        "event_key": event.get("event_id") or event.get("event_key"),
        "summary": event.get("summary"),
        "topics": event.get("topics"),
        "entities": event.get("entities"),
        "tier": event.get("tier"),
        "expires_at": event.get("expires_at"),
        # a precomputed embedding travels with its event (the client then does not embed it)
        "embedding": event.get("embedding"),
        "embedding_model": event.get("embedding_model") if event.get("embedding") is not None else None,
        # Fragment content domains (issue 16): action-related and perceptual content, JSON objects
        "motor": event.get("motor"),
        "sensory": event.get("sensory"),
    }
    if extractor is not None:
        x = extractor.extract(event, now=now)
        for key, value in (("who", x.who), ("what", x.what), ("happened_at", x.when), ("location", x.where),
                           ("why", x.why), ("how", x.how), ("summary", x.summary), ("category", x.category),
                           ("topics", x.topics or None), ("entities", x.entities or None),
                           ("valence", x.valence), ("arousal", x.arousal), ("dominance", x.dominance)):
            if args.get(key) in (None, "", []):
                args[key] = value
        if args.get("importance") is None and x.importance is not None and x.source == "llm":
            args["importance"] = x.importance
        args["metadata"].setdefault("extracted_by", x.source)
        # layered tiers (issue 15): the profile facts a user's statement makes; the database's
        # memories_profile_facts trigger writes them (pgmem.set_fact) as the memory is stored
        facts = getattr(x, "facts", None)
        if facts is None:  # an extractor without profile-statement detection: the heuristic's
            from .engine.profile_facts import detect_facts

            facts = detect_facts(content, speaker=args.get("who"))
        if facts and args.get("user_id"):
            args["metadata"].setdefault("facts", facts)
    return {k: v for k, v in args.items() if v is not None and v != {} or k == "content"}


def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


# ----------------------------------------------------------------------- the client
TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}")
_NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def validate_tenant(tenant: Any) -> str:
    """The tenant name, or a ConfigError naming the rule (the database checks the same rule,
    and that the login may act for the tenant: pgmem.current_tenant())."""
    if not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant):
        raise ConfigError(f"invalid tenant name {tenant!r}: use 1 to 64 letters, digits and _ . : @ -, "
                          "starting with a letter or digit")
    return tenant


def _claim_tenant(token: str) -> str:
    """The tenant a signed claim names (read, not verified: the database verifies it)."""
    try:
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["tenant"]
    except Exception:
        raise ConfigError("tenant_claim is not a signed tenant claim (header.payload.signature; see pgmem.claims)") from None


def _connect_error(dsn: str, e: BaseException) -> PgmemError:
    """One clear error for a connection that failed: the server's refusal mapped by SQLSTATE
    (a wrong password is 28P01), else :class:`ServerUnavailable` naming the address (never the
    password) and what to check."""
    from .db import describe_dsn, mask_password

    state = getattr(e, "sqlstate", None)
    if state and state[:2] not in ("08", "57"):
        mapped = from_database(e)
        if isinstance(mapped, PgmemError):
            return mapped
    text = str(e).strip()
    reason = mask_password(text.splitlines()[-1] if text else type(e).__name__, dsn)
    return ServerUnavailable(f"cannot connect to {describe_dsn(dsn)}: {reason}: is PostgreSQL running there? "
                             "check PGMEM_DSN (or start the embedded cluster: pgmem db up)")


def _probe(dsn: str, timeout: float) -> None:
    """Connect once before a pool is made, so that a server that is down, or a wrong password,
    is an error at once (at most 5 s), not a pool's retries until its timeout."""
    try:
        psycopg.connect(dsn, connect_timeout=max(2, min(5, int(timeout))), autocommit=True).close()
    except psycopg.Error as e:
        raise _connect_error(dsn, e) from None


async def _aprobe(dsn: str, timeout: float) -> None:
    try:
        c = await psycopg.AsyncConnection.connect(dsn, connect_timeout=max(2, min(5, int(timeout))), autocommit=True)
        await c.close()
    except psycopg.Error as e:
        raise _connect_error(dsn, e) from None


def _mapped(e: BaseException) -> BaseException:
    """The client exception for a psycopg error (pgmem.errors.from_database); a lost
    connection without a SQLSTATE becomes ServerUnavailable."""
    mapped = from_database(e)
    if mapped is e and isinstance(e, psycopg.OperationalError):
        text = str(e).strip()
        return ServerUnavailable(f"the database connection failed: {text.splitlines()[-1] if text else type(e).__name__}"
                                 ": is PostgreSQL running? check PGMEM_DSN")
    return mapped


class _Base:
    def __init__(self, dsn: str | None = None, tenant: str | None = "default", *, embedder: Any = "auto",
                 extractor: Any = None, min_size: int = 1, max_size: int = 4, timeout: float = 30.0,
                 retries: int = 3, statement_timeout_ms: int | None = 30000,
                 idle_in_transaction_ms: int | None = 60000, tenant_claim: str | None = None,
                 read_dsn: str | None = None, read_your_writes: bool = False):
        """``tenant``: the tenant this client acts for; the login must be granted it
        (pgmem.grant_tenant). ``tenant_claim``: instead, a signed claim for the tenant (a shared
        application role; pgmem.claims); ``set_tenant_claim`` replaces it when it expires.
        ``statement_timeout_ms`` / ``idle_in_transaction_ms``: the session's timeouts (sessions of
        app and reader logins must have both, at most max_statement_timeout_ms and
        max_idle_in_transaction_ms of pgmem.settings; None leaves the server's).
        ``read_dsn`` (else PGMEM_READ_DSN): a hot standby (``pgmem db replica up``) that takes the
        read-only calls (READ_ONLY_CALLS); writes and touch go to ``dsn``. ``read_your_writes``:
        writes wait until the synchronous standby has applied them (synchronous_commit =
        remote_apply; the standby must be in synchronous_standby names: ``db replica up --sync``)."""
        import os

        from .db import check_dsn, resolve_dsn

        self.dsn = check_dsn(resolve_dsn(dsn))  # a malformed DSN: an error now, without its password
        # scaleout (issue 19): reads on a replica
        read_dsn = read_dsn or os.environ.get("PGMEM_READ_DSN") or None
        self.read_dsn = check_dsn(read_dsn) if read_dsn else None
        self.read_your_writes = bool(read_your_writes)
        self.tenant_claim = None
        if tenant_claim is not None:
            self.set_tenant_claim(tenant_claim)
            if tenant not in (None, "default", self.tenant):
                raise ConfigError(f"tenant {tenant!r} differs from the tenant of tenant_claim ({self.tenant!r})")
        else:
            self.tenant = validate_tenant(tenant)
        for name, v in (("statement_timeout_ms", statement_timeout_ms), ("idle_in_transaction_ms", idle_in_transaction_ms)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ConfigError(f"{name} must be a non-negative integer (milliseconds), got {v!r}")
        self.idle_in_transaction_ms = idle_in_transaction_ms
        self._arg_names: dict[str, frozenset[str]] | None = None
        self._embedder_arg = embedder
        self._embedder = None
        self.extractor = extractor
        self.min_size, self.max_size, self.timeout = min_size, max_size, timeout
        self.retries = retries
        self.statement_timeout_ms = statement_timeout_ms

    # embeddings ----------------------------------------------------------------
    @property
    def embedder(self):
        """The embedder (``pgmem.embedding.Embedder()``: the one PGMEM_EMBEDDER chooses, by
        default all-MiniLM-L6-v2), or None when the client was made with ``embedder=None``:
        memories are then queued for the worker. A core install without an embedder (no numpy,
        no model package) falls back to None too, and says so once: search is lexical only."""
        if self._embedder is None and self._embedder_arg not in (None, False):
            if self._embedder_arg == "auto":
                self._embedder = _auto_embedder()
                if self._embedder is None:
                    self._embedder_arg = None
            else:
                self._embedder = self._embedder_arg
        return self._embedder

    @staticmethod
    def _text_of(args: Mapping[str, Any]) -> str:
        """The text embedded for remember() arguments (pgmem.embedding.embedding_text)."""
        from .embedding.text import embedding_text

        return embedding_text(content=args["content"], who=args.get("who"), what=args.get("what"),
                              where=args.get("location"), why=args.get("why"), how=args.get("how"))

    def _embed_args(self, args: dict) -> None:
        if args.get("embedding") is None and self.embedder is not None:
            args["embedding"] = self.embedder.embed(self._text_of(args))
            args.setdefault("embedding_model", self.embedder.model_name)

    def _batch_payload(self, events: Sequence[Any], extractor, embed: bool) -> str:
        """The JSON array remember_many() takes for a batch of events: extracted, and embedded
        in one model call when ``embed`` and an embedder is configured."""
        return self._payload_json(self._embed_items([event_to_args(e, extractor) for e in events], embed))

    def _embed_items(self, items: list[dict], embed: bool = True, skip: Iterable[int] = ()) -> list[dict]:
        """Embeds the remember() arguments that have no embedding yet, in one model call (the
        embedder batches it); the indexes in ``skip`` are left alone (events replayed anyway)."""
        skipped = set(skip)
        todo = [a for i, a in enumerate(items) if a.get("embedding") is None and i not in skipped]
        if embed and self.embedder is not None and todo:
            vecs = self.embedder.embed_many([self._text_of(a) for a in todo])
            for a, v in zip(todo, vecs):
                a["embedding"] = v
                a["embedding_model"] = self.embedder.model_name
        return items

    @staticmethod
    def _payload_json(items: list[dict]) -> str:
        # a vector travels as pgvector's text ('[0.1,0.2,...]'), a JSON string: the server parses
        # it once into the vector, where a JSON array of 384 numbers was first parsed into 384
        # numerics (issue 23: 0.04 ms of server time per item)
        out = []
        for a in items:
            d = {k: _jsonable(v) for k, v in a.items()}
            e = a.get("embedding")
            if e is not None and not isinstance(e, str):
                d["embedding"] = "[" + ",".join(map(repr, map(float, e.tolist() if hasattr(e, "tolist") else e))) + "]"
            out.append(d)
        return json.dumps(out)

    def _embed_query(self, query: str | None, embedding: Any) -> Any:
        """A question's embedding: with the query instruction prefix of an asymmetric model
        (Embedder.embed_query; an embedder without it embeds the question as it is)."""
        if embedding is None and query and self.embedder is not None:
            return _query_vector(self.embedder, query)
        return embedding

    def _embed_doc(self, text: str | None, embedding: Any) -> Any:
        if embedding is None and text and self.embedder is not None:
            return self.embedder.embed(text)
        return embedding

    def _with_search_embedding(self, query: str | None, embedding: Any, profile: str | None, conn, then,
                               filters: dict | None = None):
        """then(embedding) for a search: the caller's embedding, or the question embedded here
        without the names of the actors it names and of the user it is filtered on
        (pgmem.query_embedding_text: with the default profile those count through the actor
        signal or the filter, and in an embedding a name swamps what is asked). One more round
        trip, a fraction of the embedding's cost."""
        if embedding is not None or not query or self.embedder is None:
            return then(embedding)
        user = (filters or {}).get("user_id")
        return self._do("query_embedding_text", dict(p_text=query, p_profile=profile,
                                                     p_user_id=user if isinstance(user, str) else None),
                        lambda rows: then(_query_vector(self.embedder, rows[0]["query_embedding_text"] or query)), conn,
                        setof=False)

    def set_tenant_claim(self, token: str) -> None:
        """Use a (fresh) signed tenant claim: connections take it at their next use."""
        if not isinstance(token, str) or not token:
            raise ConfigError("tenant_claim must be the token string your auth service signed")
        self.tenant = validate_tenant(_claim_tenant(token))
        self.tenant_claim = token

    def _connect_kwargs(self) -> dict:
        # nothing of the tenant goes into libpq's options (a value there is parsed as more
        # options): it is set with set_config() once connected (_session_sql)
        return {"connect_timeout": int(self.timeout)}

    def _session_sql(self, read: bool = False) -> tuple[str, tuple]:
        """The statement that gives a connection this client's tenant (or claim) and limits."""
        q = ("select set_config('pgmem.tenant', %s, false), set_config('pgmem.tenant_claim', %s, false)")
        params: tuple = ("" if self.tenant_claim else self.tenant, self.tenant_claim or "")
        if self.read_your_writes and not read:
            q += ", set_config('synchronous_commit', 'remote_apply', false)"
        for name, v in (("statement_timeout", self.statement_timeout_ms),
                        ("idle_in_transaction_session_timeout", self.idle_in_transaction_ms)):
            if v is not None:
                q += f", set_config('{name}', %s, false)"
                params += (str(int(v)),)
        return q, params

    def _session_key(self) -> tuple:
        return (self.tenant, self.tenant_claim, self.statement_timeout_ms, self.idle_in_transaction_ms)

    def _on_replica(self, fn: str, params: Mapping[str, Any], conn) -> bool:
        """Whether this call goes to read_dsn: a read-only call, no caller's connection given."""
        if self.read_dsn is None or conn is not None or fn not in READ_ONLY_CALLS:
            return False
        return not ((fn == "search" and params.get("touch")) or (fn == "activate" and params.get("query_id")))

    # SQL builders: one SQL function call each ------------------------------------
    @staticmethod
    def _call_sql(fn: str, args: Mapping[str, Any], *, setof: bool = True) -> tuple[str, dict]:
        if not _NAME_RE.fullmatch(fn):
            raise PgmemError(f"{fn!r} is not a pgmem function name")
        for k in args:
            if not isinstance(k, str) or not _NAME_RE.fullmatch(k):
                raise PgmemError(f"{k!r} is not an argument name of pgmem.{fn}: names are lower-case identifiers")
        named = ", ".join(f"{k} => %({k})s" + _CASTS.get(k, "") for k in args)
        return (f"select * from pgmem.{fn}({named})" if setof else f"select pgmem.{fn}({named})"), dict(args)

    # input argument names of every public function (output columns of RETURNS TABLE excluded)
    _ARG_NAMES_SQL = ("select p.proname, array_agg(distinct a.n) filter (where a.n is not null"
                      " and coalesce(a.m, 'i') in ('i', 'b', 'v')) from pg_proc p"
                      " left join lateral unnest(p.proargnames, p.proargmodes::text[]) a(n, m) on true"
                      " where p.pronamespace = 'pgmem'::regnamespace and p.proname !~ '^_' group by p.proname")

    def _check_args(self, fn: str, names: Iterable[str]) -> None:
        """Argument names against the function's signature (read once from pg_proc)."""
        known = self._arg_names.get(fn) if self._arg_names is not None else None
        if self._arg_names is not None and known is None:
            raise PgmemError(f"pgmem.{fn} does not exist (or is private): see docs/reference.md")
        unknown = sorted(set(names) - (known or set()))
        if known is not None and unknown:
            raise PgmemError(f"pgmem.{fn} has no argument {', '.join(map(repr, unknown))}; "
                             f"its arguments are: {', '.join(sorted(known))}")

    def _remember_args(self, content: str, kw: dict) -> dict:
        args = {"content": content}
        for k, v in kw.items():
            if k in ("when",):
                k = "happened_at"
            elif k == "where":
                k = "location"
            if v is not None:
                args[k] = v
        for k in ("metadata", "motor", "sensory"):
            if k in args and not isinstance(args[k], str):
                args[k] = json.dumps(args[k])
        for k in ("topics", "entities"):
            if k in args:
                args[k] = list(args[k])
        return args

    # write path ------------------------------------------------------------------
    def remember(self, content: str, *, who: str | None = None, what: str | None = None, when: Any = None,
                 where: str | None = None, why: str | None = None, how: str | None = None,
                 category: str | None = None, importance: float | None = None, metadata: dict | None = None,
                 session_id: str | None = None, user_id: str | None = None, agent_id: str | None = None,
                 extract: bool = False, embedding: Any = None, embed: bool = True, conn=None, **more) -> RememberResult:
        """Store one memory behind the surprise gate (pgmem.remember). ``extract=True`` fills
        the 5W1H fields with the extractor; ``embed=False`` leaves the embedding to the worker."""
        if extract:
            ev = {"content": content, "who": who, "what": what, "when": when, "where": where, "why": why,
                  "how": how, "category": category, "importance": importance, "metadata": metadata or {},
                  "session_id": session_id, "user_id": user_id, "agent_id": agent_id}
            args = event_to_args(ev, self.extractor or _default_extractor())
            args.update({k: v for k, v in more.items() if v is not None})
        else:
            args = self._remember_args(content, dict(who=who, what=what, when=when, where=where, why=why, how=how,
                                                     category=category, importance=importance, metadata=metadata,
                                                     session_id=session_id, user_id=user_id, agent_id=agent_id, **more))
        if embedding is not None:
            args["embedding"] = embedding
        elif embed:
            self._embed_args(args)
        for k in ("metadata", "motor", "sensory"):
            if k in args and not isinstance(args[k], str):
                args[k] = json.dumps(args[k])
        return self._do("remember", args, lambda rows: _remember_result(rows[0]), conn)

    def forget(self, memory_id: int, reason: str | None = None, conn=None) -> dict:
        return self._do("forget", dict(memory_id=memory_id, reason=reason), _first, conn)

    def restore(self, memory_id: int, reason: str | None = None, conn=None) -> dict:
        return self._do("restore", dict(memory_id=memory_id, reason=reason), _first, conn)

    def archive(self, ids: Sequence[int], reason: str | None = None, conn=None) -> list[dict]:
        """Shadow's manual archival (pgmem.archive): the memories leave every ranking until
        ``restore``; merged and deleted ones are refused."""
        return self._do("archive", dict(ids=list(ids), reason=reason), list, conn)

    def memory_activation(self, memory_id: int, as_of: Any = None, conn=None) -> dict:
        """The lifecycle activation of a memory (pgmem.memory_activation) with its parts and the
        tenant's archival threshold."""
        return self._do("memory_activation", dict(memory_id=memory_id, as_of=as_of), _first, conn)

    def update_memory(self, memory_id: int, changes: dict, reason: str | None = None, conn=None) -> dict:
        return self._do("update_memory", dict(memory_id=memory_id, changes=json.dumps(changes, default=_jsonable), reason=reason), _first, conn)

    def get(self, memory_id: int, conn=None) -> dict | None:
        return self._do("get_memory", dict(memory_id=memory_id), lambda rows: rows[0] if rows else None, conn)

    def history(self, memory_id: int, conn=None) -> list[dict]:
        return self._do("history", dict(memory_id=memory_id), list, conn)

    # read path -------------------------------------------------------------------
    def search(self, query: str | None = None, *, embedding: Any = None, k: int = 10, actor: str | None = None,
               location: str | None = None, profile: str | None = None, weights: dict | None = None,
               filters: dict | None = None, as_of: Any = None, touch: bool = False, rewrite: bool = False,
               conn=None) -> list[Hit]:
        """Fused search (pgmem.search; default profile: the setting search_profile).

        ``rewrite=True`` (off by default; issue 29) asks the configured OpenAI-compatible LLM
        (``mem.llm``: PGMEM_LLM_BASE_URL) for up to three search queries, one per fact the
        question needs, and searches with the question and each of them (one pgmem.search call
        each): a memory keeps its best score, and ``hit.extra["query"]`` says which query found
        it. Without an LLM, or when it fails, it is the plain search."""
        if rewrite and query:
            return self._run(self._search_rewritten_steps(query, embedding, dict(
                k=k, actor=actor, location=location, profile=profile, weights=json.dumps(weights) if weights else None,
                filters=json.dumps(filters, default=_jsonable) if filters else None, as_of=as_of), filters, touch), conn)
        return self._with_search_embedding(query, embedding, profile, conn, filters=filters, then=lambda vec: self._do(
            "search", dict(query_text=query, query_embedding=vec, k=k, actor=actor, location=location, profile=profile,
                           weights=json.dumps(weights) if weights else None,
                           filters=json.dumps(filters, default=_jsonable) if filters else None, as_of=as_of, touch=touch),
            lambda rows: [_hit(r, SEARCH_SIGNALS) for r in rows], conn))

    #: The LLM round of search(rewrite=True): the instruction the model gets with the question.
    REWRITE_PROMPT = (
        "You turn a question about what a person said in earlier conversations into search queries for a "
        "memory store. Answer with a JSON object {\"queries\": [...]}: one to three short queries, one per fact "
        "the answer needs (a question about several things or people: one query per thing or person), keeping "
        "names and dates, in the question's language.")

    def _rewrite_queries(self, query: str) -> list[str]:
        """The LLM's search queries for a question (at most three, none equal to it), or []
        when no LLM is configured or its answer is unusable (the LLM's failure is logged)."""
        llm = self.llm
        if llm is None:
            return []
        obj = llm._ask({"model": llm.model, "temperature": 0, "response_format": {"type": "json_object"},
                        "messages": [{"role": "system", "content": self.REWRITE_PROMPT},
                                     {"role": "user", "content": query}]}, "query rewriting")
        got = obj.get("queries") if isinstance(obj, dict) else None
        if not isinstance(got, list):
            if obj is not None:
                log.warning("LLM query rewriting answer unusable: %.200s", json.dumps(obj))
            return []
        out: list[str] = []
        for q in got:
            q = " ".join(q.split())[:500] if isinstance(q, str) else ""
            if q and q.casefold() != query.strip().casefold() and q.casefold() not in {x.casefold() for x in out}:
                out.append(q)
        return out[:3]

    def _search_rewritten_steps(self, query, embedding, kw, filters, touch):
        """search(rewrite=True) as a generator of SQL calls (MemoryClient._run, sync or async)."""
        user = (filters or {}).get("user_id")
        best: dict[int, Hit] = {}
        for i, text in enumerate([query, *self._rewrite_queries(query)]):
            vec = embedding if i == 0 else None
            if vec is None and self.embedder is not None:
                et = yield ("query_embedding_text", dict(p_text=text, p_profile=kw["profile"],
                                                         p_user_id=user if isinstance(user, str) else None),
                            lambda rows: rows[0]["query_embedding_text"], False)
                vec = _query_vector(self.embedder, et or text)
            hits = yield ("search", dict(query_text=text, query_embedding=vec, **kw),
                          lambda rows: [_hit(r, SEARCH_SIGNALS) for r in rows], True)
            for h in hits:
                if h.id not in best or h.score > best[h.id].score:
                    h.extra["query"] = text
                    best[h.id] = h
        out = sorted(best.values(), key=lambda h: (-h.score, h.id))[:kw["k"]]
        if touch and out:  # what is returned is a use, once
            yield ("touch", dict(ids=[h.id for h in out], kind="search"), lambda rows: rows[0]["touch"], False)
        return out

    def search_exact(self, query: str | None = None, *, embedding: Any = None, k: int = 10, actor: str | None = None,
                     location: str | None = None, profile: str | None = None, weights: dict | None = None,
                     filters: dict | None = None, as_of: Any = None, conn=None) -> list[Hit]:
        """The exhaustive reference scorer (pgmem.search_exact): same scores over every eligible memory."""
        return self._with_search_embedding(query, embedding, profile, conn, filters=filters, then=lambda vec: self._do(
            "search_exact", dict(query_text=query, query_embedding=vec, k=k, actor=actor, location=location, profile=profile,
                                 weights=json.dumps(weights) if weights else None,
                                 filters=json.dumps(filters, default=_jsonable) if filters else None, as_of=as_of),
            lambda rows: [_hit(r, SEARCH_SIGNALS) for r in rows], conn))

    def explain_search(self, query: str | None = None, *, embedding: Any = None, k: int = 10, conn=None, **kw) -> list[dict]:
        return self._with_search_embedding(query, embedding, kw.get("profile"), conn, filters=kw.get("filters"),
                                           then=lambda vec: self._do(
            "explain_search", dict(query_text=query, query_embedding=vec, k=k,
                                   **{k2: (json.dumps(v) if isinstance(v, dict) else v) for k2, v in kw.items()}), list, conn))

    def activate(self, query: str | None = None, *, embedding: Any = None, context_type: str = "conversation",
                 topics: Sequence[str] | None = None, entities: Sequence[str] | None = None,
                 summary: str | None = None, threshold: float | None = None, k: int = 50,
                 filters: dict | None = None, as_of: Any = None, profile: str | None = None,
                 weights: dict | None = None, query_id: Any = None, conn=None) -> list[Hit]:
        """Shadow activation (pgmem.activate): every candidate with its activation score and
        whether it passed the threshold of the context type (``hit.extra['activated']``).
        ``profile`` names an activate profile (default shadow); ``query_id`` logs what was shown
        so that ``pgmem.feedback`` can refer to it."""
        return self._do("activate", dict(query_text=query, query_embedding=self._embed_query(query, embedding),
                         context_type=context_type, topics=list(topics) if topics else None,
                         entities=list(entities) if entities else None, summary=summary, threshold=threshold, k=k,
                         filters=json.dumps(filters, default=_jsonable) if filters else None, as_of=as_of,
                         weights=json.dumps(weights) if weights else None, query_id=query_id, profile=profile),
            lambda rows: [_hit(r, ACTIVATE_SIGNALS) for r in rows], conn)

    def recall(self, query: str | None = None, *, embedding: Any = None, k: int = 10, weights: dict | None = None,
               filters: dict | None = None, as_of: Any = None, profile: str | None = None,
               early_termination: bool = False, min_score: float | None = None, conn=None) -> list[Hit]:
        """Engram ranking (pgmem.recall); ``profile`` names a recall profile (default engram);
        ``early_termination``: only the memories scoring above ``min_score`` (0.8), at most k."""
        return self._do("recall", dict(query_text=query, query_embedding=self._embed_query(query, embedding),
                         k=k, weights=json.dumps(weights) if weights else None,
                         filters=json.dumps(filters, default=_jsonable) if filters else None, as_of=as_of,
                         profile=profile, early_termination=early_termination or None, min_score=min_score),
            lambda rows: [_hit(r, RECALL_SIGNALS) for r in rows], conn)

    def build_context(self, query: str | None = None, *, embedding: Any = None, token_budget: int | None = None,
                      candidates: int = 50, lam: float = 0.5, profile: str | None = None, weights: dict | None = None,
                      filters: dict | None = None, as_of: Any = None, conversation_tokens: int = 0,
                      actor: str | None = None, location: str | None = None, conn=None) -> list[dict]:
        """JAM context building (pgmem.build_context): search candidates (with the same profile,
        weights, filters, actor and location as ``search``), MMR order, knapsack into the token
        budget. Returns every candidate; ``selected`` ones first in MMR order."""
        return self._with_search_embedding(query, embedding, profile, conn, filters=filters, then=lambda vec: self._do(
            "build_context", dict(query_text=query, query_embedding=vec, token_budget=token_budget, candidates=candidates,
                                  **{"lambda": lam}, profile=profile, weights=json.dumps(weights) if weights else None,
                                  filters=json.dumps(filters, default=_jsonable) if filters else None, as_of=as_of,
                                  conversation_tokens=conversation_tokens, actor=actor, location=location), list, conn))

    def touch(self, ids: Sequence[int], kind: str = "touch", conn=None) -> int:
        return self._do("touch", dict(ids=list(ids), kind=kind), lambda rows: rows[0]["touch"], conn, setof=False)

    # jobs ------------------------------------------------------------------------
    def run_job(self, name: str, conn=None, **params) -> list[dict]:
        """Run a maintenance job now (merge, prune, archive, tune, purge, index) with its parameters."""
        fn = JOBS.get(name)
        if fn is None:
            raise PgmemError(f"unknown job {name!r}: known jobs are {', '.join(sorted(JOBS))}")
        return self._do(fn, {k: (json.dumps(v) if isinstance(v, dict) else v) for k, v in params.items()}, list, conn)


    # knowledge-base documents (issue 24, sql/680_documents.sql) ------------------------
    def ingest_document(self, title: str, content: str, *, source: str | None = None, user_id: str | None = None,
                        metadata: dict | None = None, max_tokens: int | None = None, embed: bool = True,
                        conn=None) -> dict:
        """Store a knowledge-base document (pgmem.ingest_document): the database splits it into
        chunks (pgmem.chunk_document), the client embeds each chunk, and the chunks are stored with
        their vectors under their own HNSW and full-text indexes. ``user_id`` None: the tenant's
        knowledge base (every user). Returns {document_id, decision (stored/duplicate), chunks, tokens}."""
        def store(chunks: list[dict]):
            vecs = None
            if embed and self.embedder is not None and chunks:
                vecs = list(self.embedder.embed_many([c["chunk"] for c in chunks]))
            return self._do("ingest_document", dict(
                title=title, content=content, source=source, user_id=user_id,
                metadata=json.dumps(metadata, default=_jsonable) if metadata else None, max_tokens=max_tokens,
                embeddings=vecs, embedding_model=self.embedder.model_name if vecs else None), _first, conn, replica=False)
        return self._do("chunk_document", dict(content=content, max_tokens=max_tokens), store, conn, replica=False)

    def search_documents(self, query: str | None = None, *, embedding: Any = None, k: int = 5,
                         user_id: str | None = None, conn=None) -> list[dict]:
        """The knowledge-base chunks nearest a question (pgmem.search_documents)."""
        return self._do("search_documents", dict(query_text=query, query_embedding=self._embed_query(query, embedding),
                                                 k=k, user_id=user_id), list, conn)

    def list_documents(self, user_id: str | None = None, *, include_deleted: bool = False, conn=None) -> list[dict]:
        return self._do("list_documents", dict(user_id=user_id, include_deleted=include_deleted or None), list, conn)

    def delete_document(self, document_id: int, conn=None) -> dict:
        return self._do("delete_document", dict(document_id=document_id), _first, conn)

    def restore_document(self, document_id: int, conn=None) -> dict:
        return self._do("restore_document", dict(document_id=document_id), _first, conn)

    # layered tiers (issue 15, layered-memory-architecture.md): profile facts, intent,
    # conversation state, threads, insights, and context_for. The methods that may ask the
    # LLM (context_for, classify_intent, observe_reply) are generators of SQL calls run by
    # the client's _run (sync or async); the LLM (PGMEM_LLM_BASE_URL) answers what SQL cannot.
    @property
    def llm(self):
        """The LayeredLLM for the intent fallback, thread summaries and insights: from
        PGMEM_LLM_BASE_URL unless set (``mem.llm = None`` turns it off)."""
        if not hasattr(self, "_llm"):
            from .layered import LayeredLLM

            self._llm = LayeredLLM.from_env()
        return self._llm

    @llm.setter
    def llm(self, value) -> None:
        self._llm = value

    def context_for(self, query: str, *, conversation_id: str, user_id: str | None = None, embedding: Any = None,
                    k: int | None = None, remember: bool = True, filters: dict | None = None,
                    search_profile: str | None = None, created_at: Any = None, conn=None):
        """The memory half of the layered pipeline for one user message (pgmem.context_for):
        classify (asking the LLM when no fast path decides and one is configured), topic gate,
        remember, state, thread, research, policy, history, retrieval. Returns a
        :class:`pgmem.layered.ContextResult`; ``result.annotations()`` are the stage events to
        stream before the first token."""
        return self._run(self._context_for_steps(query, conversation_id, user_id, embedding, k, remember, filters,
                                                 search_profile, created_at), conn)

    def _context_for_steps(self, query, conversation_id, user_id, embedding, k, remember, filters, search_profile,
                           created_at):
        from .layered import ContextResult

        emb = self._embed_query(query, embedding)
        llm = self.llm
        if llm is not None:
            yield from self._llm_intent_steps(query, conversation_id, user_id, llm)
        doc = yield ("context_for", dict(query_text=query, query_embedding=emb, conversation_id=conversation_id,
                                         user_id=user_id, k=k, remember=remember,
                                         filters=json.dumps(filters, default=_jsonable) if filters else None,
                                         search_profile=search_profile, created_at=created_at), _scalar, False)
        result = ContextResult(doc)
        thread = result.stage("thread")
        if llm is not None and thread.get("summary_due"):
            msgs = yield ("thread_messages", dict(thread_id=thread["thread_id"]), list, True)
            summary, label = llm.summarize(msgs)
            if summary:
                t = yield ("set_thread_summary", dict(thread_id=thread["thread_id"], summary=summary, label=label,
                                                      source="llm"), _first, True)
                thread.update(summary=t["summary"], summary_source=t["summary_source"], label=t["label"])
                result.context["thread"] = {"id": t["id"], "label": t["label"], "summary": t["summary"]}
        return result

    def _llm_intent_steps(self, query, conversation_id, user_id, llm):
        """classify_intent in SQL; when it needs the LLM, ask it and cache the answer."""
        from .layered import IntentResult

        got = yield ("classify_intent", dict(query_text=query, conversation_id=conversation_id), _first, True)
        res = IntentResult(**{k: got[k] for k in ("intent", "confidence", "source", "rule", "needs_llm")},
                           facts=got.get("facts") or [])
        if got["needs_llm"] and llm is not None:
            ans = llm.classify(query)
            if ans:
                yield ("cache_intent", dict(query_text=query, intent=ans["intent"], confidence=ans["confidence"],
                                            model=llm.model, user_id=user_id), _first, True)
                res = IntentResult(intent=ans["intent"], confidence=ans["confidence"], source="llm", rule="llm")
        return res

    def classify_intent(self, text: str, conversation_id: str | None = None, *, user_id: str | None = None, conn=None):
        """The intent of a message (pgmem.classify_intent), asking the LLM and caching its
        answer when no fast path decides and one is configured: a :class:`IntentResult`."""
        return self._run(self._llm_intent_steps(text, conversation_id, user_id, self.llm), conn)

    def observe_reply(self, conversation_id: str, content: str, *, embedding: Any = None, insights: list | None = None,
                      remember: bool = True, created_at: Any = None, conn=None):
        """Records the assistant's reply (pgmem.observe_reply): it joins its question's thread,
        is remembered, and its insights (the LLM's when one is configured, else cue phrases)
        and concepts are stored. Returns the JSON document of observe_reply."""
        return self._run(self._observe_reply_steps(conversation_id, content, embedding, insights, remember, created_at), conn)

    def _observe_reply_steps(self, conversation_id, content, embedding, insights, remember, created_at):
        emb = self._embed_doc(content, embedding)  # the reply is remembered: a document
        if insights is None and self.llm is not None:
            insights = self.llm.insights(content, "assistant")
        return (yield ("observe_reply", dict(conversation_id=conversation_id, content=content, embedding=emb,
                                             insights=json.dumps(insights) if insights is not None else None,
                                             remember=remember, created_at=created_at), _scalar, False))

    def set_fact(self, user_id: str, key: str, value: Any, *, valid_from: Any = None, valid_to: Any = None,
                 confidence: float = 1.0, source: str = "api", statement: str | None = None, conn=None) -> dict:
        """Sets a profile fact (pgmem.set_fact): the value in force is superseded, never deleted."""
        return self._do("set_fact", dict(user_id=user_id, key=key, value=json.dumps(value, default=_jsonable),
                                         valid_from=valid_from, valid_to=valid_to, confidence=confidence, source=source,
                                         statement=statement), _first, conn)

    def end_fact(self, user_id: str, key: str, *, valid_to: Any = None, statement: str | None = None, conn=None) -> dict:
        return self._do("end_fact", dict(user_id=user_id, key=key, valid_to=valid_to, statement=statement), _first, conn)

    def profile(self, user_id: str, *, as_of: Any = None, known_at: Any = None, conn=None) -> dict[str, Any]:
        """The user's facts in force at ``as_of`` (default now) as pgmem knew them at
        ``known_at``: ``{key: value}`` (pgmem.profile has the rows with both times)."""
        return self._do("profile", dict(user_id=user_id, as_of=as_of, known_at=known_at),
                        lambda rows: {r["key"]: r["value"] for r in rows}, conn)

    def fact_history(self, user_id: str, key: str | None = None, conn=None) -> list[dict]:
        return self._do("fact_history", dict(user_id=user_id, key=key), list, conn)

    def conversation_state(self, conversation_id: str, conn=None) -> dict | None:
        return self._do("conversation_state", dict(conversation_id=conversation_id), _scalar, conn, setof=False)

    def conversation_threads(self, conversation_id: str, include_archived: bool = False, conn=None) -> list[dict]:
        return self._do("conversation_threads", dict(conversation_id=conversation_id, include_archived=include_archived),
                        list, conn)

    def search_insights(self, query: str | None = None, *, embedding: Any = None, user_id: str | None = None,
                        k: int = 10, types: Sequence[str] | None = None, conn=None) -> list[dict]:
        """Research insights across every thread (pgmem.search_insights)."""
        return self._do("search_insights", dict(query_text=query, query_embedding=self._embed_query(query, embedding),
                                                user_id=user_id, k=k, types=list(types) if types else None), list, conn)

    # embedding models (issue 26): limits checked before embedding, replays, model moves ----
    def write_limits(self, conn=None) -> dict:
        """The size limits a write must keep (pgmem.write_limits): check them before embedding."""
        return self._do("write_limits", {}, _scalar, conn, setof=False)

    def known_event_keys(self, event_keys: Sequence[str], conn=None) -> set[str]:
        """The event keys this tenant already stored (pgmem.known_event_keys): their events
        are replayed, so they need no embedding."""
        return self._do("known_event_keys", dict(event_keys=list(event_keys)),
                        lambda rows: {next(iter(r.values())) for r in rows}, conn)

    def reembed(self, model: str | None = None, conn=None) -> dict:
        """Starts moving this tenant to another embedding model (pgmem.reembed): ``model``
        defaults to this client's embedder's. Workers running that model embed the memories;
        the vectors are swapped at once when all are ready. Returns the move."""
        if model is None:
            if self.embedder is None:
                raise ConfigError("reembed needs the new model's name, or a client with that embedder")
            model = self.embedder.model_name
        return self._do("reembed", dict(model=model), _first, conn)

    def reembed_status(self, conn=None) -> list[dict]:
        """This tenant's embedding moves, newest first (pgmem.reembed_status)."""
        return self._do("reembed_status", {}, list, conn)

    def cancel_reembed(self, conn=None) -> dict:
        """Cancels the running move (pgmem.cancel_reembed): every memory keeps its vector."""
        return self._do("cancel_reembed", {}, _first, conn)

    # integrations (issue 26, sql/128_integrations.sql): memories by filters, items, sessions --
    def list_memories(self, filters: dict | None = None, *, k: int = 20, skip: int = 0, conn=None) -> list[dict]:
        """Memories matching filters, newest first, without a query (pgmem.list_memories)."""
        return self._do("list_memories", dict(filters=json.dumps(filters, default=_jsonable) if filters else None,
                                              k=k, skip=skip), list, conn)

    def put_item(self, namespace: Sequence[str], key: str, value: dict, *, content: str | None = None,
                 embedding: Any = None, embed: bool = True, user_id: str | None = None, agent_id: str | None = None,
                 session_id: str | None = None, conn=None) -> int:
        """Stores a JSON object under (namespace, key) as a memory (pgmem.put_item); ``content``
        is the text searched and embedded (default: the value's content/text field, else its
        JSON, as in SQL). Putting the key again updates it. Returns the memory id."""
        if embedding is None and embed and self.embedder is not None:
            text = content or next((value[f] for f in ("content", "text", "memory", "data")
                                    if isinstance(value.get(f), str) and value[f].strip()), None) \
                or json.dumps(value, default=_jsonable)
            embedding = self.embedder.embed(text)
        return self._do("put_item", dict(namespace=list(namespace), key=key, value=json.dumps(value, default=_jsonable),
                                         content=content, embedding=embedding,
                                         embedding_model=self.embedder.model_name if embedding is not None and self.embedder
                                         is not None else None, user_id=user_id, agent_id=agent_id,
                                         session_id=session_id), _scalar, conn, setof=False)

    def get_item(self, namespace: Sequence[str], key: str, conn=None) -> dict | None:
        """The item under (namespace, key), or None (pgmem.get_item)."""
        return self._do("get_item", dict(namespace=list(namespace), key=key), lambda rows: rows[0] if rows else None, conn)

    def delete_item(self, namespace: Sequence[str], key: str, conn=None) -> bool:
        """Forgets the item under (namespace, key) (restorable; pgmem.delete_item)."""
        return self._do("delete_item", dict(namespace=list(namespace), key=key), _scalar, conn, setof=False)

    def search_items(self, namespace_prefix: Sequence[str] = (), query: str | None = None, *, embedding: Any = None,
                     filter: dict | None = None, k: int = 10, skip: int = 0, conn=None) -> list[dict]:
        """Items under a namespace prefix: ranked by the fused search when there is a query,
        else newest first; ``filter`` on the value's fields (pgmem.search_items)."""
        return self._do("search_items", dict(namespace_prefix=list(namespace_prefix), query_text=query,
                                             query_embedding=self._embed_query(query, embedding),
                                             filter=json.dumps(filter, default=_jsonable) if filter else None,
                                             k=k, skip=skip), list, conn)

    def list_item_namespaces(self, prefix: Sequence[str] | None = None, suffix: Sequence[str] | None = None,
                             max_depth: int | None = None, k: int = 100, skip: int = 0, conn=None) -> list[tuple]:
        """The namespaces of the items (pgmem.list_item_namespaces)."""
        return self._do("list_item_namespaces", dict(prefix=list(prefix) if prefix is not None else None,
                                                     suffix=list(suffix) if suffix is not None else None,
                                                     max_depth=max_depth, k=k, skip=skip),
                        lambda rows: [tuple(next(iter(r.values()))) for r in rows], conn)

    def session_add_items(self, session_id: str, items: Sequence[dict], *, user_id: str | None = None,
                          remember: bool = False, conn=None) -> int:
        """Appends a framework's conversation items to a session (pgmem.session_add_items);
        ``remember`` also stores each user/assistant text turn as a memory."""
        return self._do("session_add_items", dict(session_id=session_id, items=json.dumps(list(items), default=_jsonable),
                                                  user_id=user_id, remember=remember), _scalar, conn, setof=False)

    def session_get_items(self, session_id: str, max_items: int | None = None, conn=None) -> list[dict]:
        """A session's items in order; the latest ``max_items`` (pgmem.session_get_items)."""
        return self._do("session_get_items", dict(session_id=session_id, max_items=max_items),
                        lambda rows: [next(iter(r.values())) for r in rows], conn)

    def session_pop_item(self, session_id: str, conn=None) -> dict | None:
        """Removes and returns a session's latest item (pgmem.session_pop_item)."""
        return self._do("session_pop_item", dict(session_id=session_id), _scalar, conn, setof=False)

    def session_clear(self, session_id: str, conn=None) -> int:
        """Removes every item of a session (pgmem.session_clear); the rows are kept."""
        return self._do("session_clear", dict(session_id=session_id), _scalar, conn, setof=False)

    def user_data(self, user_id: str, conn=None) -> dict:
        """What is stored about a user, tier by tier (pgmem.user_data_summary)."""
        return self._do("user_data_summary", dict(user_id=user_id), _scalar, conn, setof=False)

    def export_user(self, user_id: str, conn=None) -> dict:
        return self._do("export_user", dict(user_id=user_id), _scalar, conn, setof=False)

    def erase_user(self, user_id: str, conn=None) -> dict:
        return self._do("erase_user", dict(user_id=user_id), _first, conn)



_CASTS = {"event_keys": "::text[]", "namespace": "::text[]", "namespace_prefix": "::text[]", "prefix": "::text[]",
          "suffix": "::text[]", "filter": "::jsonb", "metadata": "::jsonb", "filters": "::jsonb", "weights": "::jsonb", "changes": "::jsonb",
          "items": "::jsonb", "params": "::jsonb", "embedding": "::vector", "query_embedding": "::vector",
          "ids": "::bigint[]", "topics": "::text[]", "entities": "::text[]", "query_id": "::uuid",
          "motor": "::jsonb", "sensory": "::jsonb",  # Fragment content domains (issue 16)
          "embeddings": "::vector[]",  # knowledge-base documents (issue 24)
          # layered tiers (issue 15)
          "value": "::jsonb", "insights": "::jsonb", "types": "::text[]"}


class MemoryClient(_Base):
    """Synchronous client over a psycopg connection pool. Every method takes ``conn=`` to
    run inside the caller's connection/transaction instead (the client sets pgmem.tenant on it)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._pool = None
        self._read_pool = None

    # connections -----------------------------------------------------------------
    @property
    def pool(self):
        if self._pool is None:
            from psycopg_pool import ConnectionPool

            _probe(self.dsn, self.timeout)
            self._pool = ConnectionPool(self.dsn, min_size=self.min_size, max_size=self.max_size,
                                        kwargs={"autocommit": True, **self._connect_kwargs()},
                                        configure=self._configure, timeout=self.timeout, open=True)
        return self._pool

    @property
    def read_pool(self):
        """The pool of the replica (read_dsn) for read-only calls; the primary's without one."""
        if self.read_dsn is None:
            return self.pool
        if self._read_pool is None:
            from psycopg_pool import ConnectionPool

            _probe(self.read_dsn, self.timeout)
            self._read_pool = ConnectionPool(self.read_dsn, min_size=self.min_size, max_size=self.max_size,
                                             kwargs={"autocommit": True, **self._connect_kwargs()},
                                             configure=lambda c: self._configure(c, read=True), timeout=self.timeout,
                                             open=True)
        return self._read_pool

    def _configure(self, conn, read: bool = False) -> None:
        """Per connection: vector types, then this client's tenant (or claim) and limits."""
        _configure(conn)
        if getattr(conn, "_pgmem_session", None) != self._session_key():
            q, params = self._session_sql(read)
            with conn.transaction() if not conn.autocommit else _nullcontext():
                conn.execute(q, params)
            conn._pgmem_session = self._session_key()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._read_pool is not None:
            self._read_pool.close()
            self._read_pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextmanager
    def connection(self, conn: psycopg.Connection | None = None, *, read: bool = False) -> Iterator[psycopg.Connection]:
        """The caller's connection (tenant set on it) or one from the pool (the replica's when
        ``read`` and the client has a read_dsn)."""
        if conn is not None:
            _configure(conn)
            conn.execute(*self._session_sql())
            yield conn
            return
        with (self.read_pool if read else self.pool).connection() as c:
            self._configure(c, read=read and self.read_dsn is not None)  # a claim replaced since the connection was made
            yield c

    def _rows(self, sql: str, params: dict, conn=None, *, read: bool = False) -> list[dict]:
        attempt = 0
        while True:
            try:
                with self.connection(conn, read=read) as c:
                    with c.cursor(row_factory=dict_row) as cur:
                        cur.execute(sql, params)
                        return cur.fetchall() if cur.description else []
            except psycopg.OperationalError as e:
                # a dropped connection or a serialisation failure: retry with backoff, but only
                # on our own pooled connections (the caller's transaction is theirs to retry)
                state = getattr(e, "sqlstate", None)
                if conn is not None or attempt >= self.retries or (state and state not in RETRYABLE_SQLSTATES):
                    raise _mapped(e) from e
                attempt += 1
                delay = min(2.0, 0.05 * 2 ** attempt) * (0.5 + random.random())
                log.warning("retrying after %s (attempt %d/%d, sleeping %.2fs)", type(e).__name__, attempt, self.retries, delay)
                time.sleep(delay)
            except psycopg.Error as e:
                # every SQLSTATE its class (pgmem.errors): 22023 -> InvalidInput, P0002 -> NotFound, ...
                raise _mapped(e) from e
            except _pool_timeout() as e:
                raise ServerUnavailable(f"no database connection within {self.timeout:g}s (pool of {self.max_size}): "
                                        "is PostgreSQL running and accepting connections? check PGMEM_DSN") from e

    def _do(self, fn: str, args: dict, post, conn=None, *, setof: bool = True, replica: bool = True):
        sql, params = self._call_sql(fn, {k: v for k, v in args.items() if v is not None}, setof=setof)
        read = replica and self._on_replica(fn, params, conn)
        if self._arg_names is None:  # the catalog is the same on a replica: read where the call goes
            self._arg_names = {r["proname"]: frozenset(r["array_agg"] or ())
                               for r in self._rows(self._ARG_NAMES_SQL, {}, conn, read=read)}
        self._check_args(fn, params)
        return post(self._rows(sql, params, conn, read=read))

    def _run(self, steps, conn=None):
        """Runs a generator of SQL calls (layered methods): each yielded (function, args, post,
        setof) is called and its result sent back; the generator's return value is returned."""
        result = None
        try:
            while True:
                fn, args, post, setof = steps.send(result)
                # a pipeline reads what it just wrote (thread_messages after context_for): primary only
                result = self._do(fn, args, post, conn, setof=setof, replica=False)
        except StopIteration as stop:
            return stop.value

    def call(self, fn: str, conn=None, **args) -> list[dict]:
        """Call any pgmem SQL function by name with named arguments (None = SQL default)."""
        return self._do(fn, args, list, conn)

    def _remember_prepared(self, items: list[dict], conn=None) -> list[RememberResult]:
        """pgmem.remember_many for remember() arguments already extracted and embedded (the
        CLI's ingest: a batch the database refuses is sent again item by item, never embedded twice)."""
        rows = self._rows("select * from pgmem.remember_many(%(items)s::jsonb)", {"items": self._payload_json(items)}, conn)
        return [_remember_result(r) for r in rows]

    def remember_many(self, events: Iterable[Mapping[str, Any] | str], *, batch_size: int = 256,
                      progress: bool | None = None, extract: bool = True, embed: bool = True,
                      on_error=None, conn=None) -> list[RememberResult]:
        """Store many events (dicts in the JSONL event format, or texts): embeds each batch at
        once and sends it in one pgmem.remember_many call. A progress bar shows on a terminal."""
        from ._progress import progress_bar

        events = list(events)
        if progress is None:
            progress = sys.stderr.isatty()
        extractor = (self.extractor or _default_extractor()) if extract else None
        out: list[RememberResult] = []
        bar = progress_bar(total=len(events), unit="mem", disable=not progress, desc="remember")
        chunks = [events[start:start + batch_size] for start in range(0, len(events), batch_size)]

        def send(payload: str) -> list[dict]:
            return self._rows("select * from pgmem.remember_many(%(items)s::jsonb)", {"items": payload}, conn)

        try:
            if not (embed and self.embedder is not None and len(chunks) > 1):
                for chunk in chunks:
                    out.extend(_remember_result(r) for r in send(self._batch_payload(chunk, extractor, embed)))
                    bar.update(len(chunk))
            else:
                # the next batch is embedded while the database stores this one (one call at a
                # time, in order: a batch's gate sees the batches before it): the model and the
                # server each keep a core busy (issue 23, ingest with CPU embedding)
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgmem-remember") as pool:
                    pending = None
                    for chunk in chunks:
                        payload = self._batch_payload(chunk, extractor, embed)
                        if pending is not None:
                            out.extend(_remember_result(r) for r in pending[0].result())
                            bar.update(pending[1])
                        pending = (pool.submit(send, payload), len(chunk))
                    out.extend(_remember_result(r) for r in pending[0].result())
                    bar.update(pending[1])
        finally:
            bar.close()
        return out

# scaleout (issue 19): the calls a client with read_dsn sends to the replica (they write nothing;
# search with touch => true and activate with a query_id write, and go to the primary)
READ_ONLY_CALLS = frozenset({"search", "search_exact", "explain_search", "activate", "recall", "build_context",
                             "query_embedding_text",
                             "get_memory", "history", "export_user",
                             # layered reads (sql/6xx): language sql STABLE, no write, no touch
                             "profile", "fact_history", "conversation_state", "conversation_threads",
                             "thread_messages", "search_insights"})

JOBS = {"merge": "merge_duplicates", "prune": "prune", "archive": "archive_stale", "tune": "tune_thresholds",
        "purge": "purge", "index": "index_vectors", "cluster": "cluster",
        # Shadow's cleanup (issue 24): archived memories deleted after their retention; statistics
        "delete_archived": "delete_archived", "compact": "compact"}


def _query_vector(embedder, text: str):
    fn = getattr(embedder, "embed_query", None)
    return fn(text) if fn is not None else embedder.embed(text)


_NO_EMBEDDER_SAID = False


def _auto_embedder():
    """``pgmem.embedding.Embedder()``, or None (said once, on the pgmem.client logger) when this
    install has no embedder: the core install without numpy or a model package. Memories are
    then stored for the worker and search is lexical only."""
    global _NO_EMBEDDER_SAID
    try:
        from .embedding import Embedder

        emb = Embedder()
        emb.check_available()
        return emb
    except ImportError as e:  # pgmem.embedding.EmbeddingUnavailable is an ImportError too
        if not _NO_EMBEDDER_SAID:
            _NO_EMBEDDER_SAID = True
            log.warning("no embedding model in this install (%s is missing): search is lexical only and memories wait "
                        "for the embedding worker; pip install 'pgmem-agent[embed]' (or [onnx], or [http]) for "
                        "semantic search", getattr(e, "name", None) or e)
        return None


def _pool_timeout() -> type[BaseException]:
    from psycopg_pool import PoolTimeout

    return PoolTimeout


def _remember_result(row: Mapping[str, Any]) -> RememberResult:
    return RememberResult(id=row["memory_id"], decision=row["decision"], surprise=row["surprise"],
                          importance=row["importance"], salience=row["salience"], nearest_id=row.get("nearest_id"),
                          nearest_similarity=row.get("nearest_similarity"), details=row.get("details") or {})


def _configure(conn) -> None:
    """Per-connection set-up: vector type adaptation (numpy arrays <-> vector)."""
    if getattr(conn, "_pgmem_configured", False):
        return
    try:
        from pgvector.psycopg import register_vector

        register_vector(conn)
    except Exception as e:  # pgmem not installed in this database
        raise PgmemError(f"the database has no vector type: run 'pgmem migrate' first ({e})") from None
    conn._pgmem_configured = True


_DEFAULT_EXTRACTOR = None


def _default_extractor():
    global _DEFAULT_EXTRACTOR
    if _DEFAULT_EXTRACTOR is None:
        from .extraction import make_extractor

        _DEFAULT_EXTRACTOR = make_extractor()
    return _DEFAULT_EXTRACTOR


def _first(rows: list[dict]) -> dict:
    return rows[0]


def _scalar(rows: list[dict]) -> Any:
    """The value of a one-column, one-row result (a function returning jsonb)."""
    return next(iter(rows[0].values())) if rows else None


P = ParamSpec("P")
R = TypeVar("R")


def _coroutine(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """The async client's twin of a ``_Base`` method: the same signature and docstring, as a
    true coroutine function (``inspect.iscoroutinefunction`` is true, and a type checker sees
    ``Coroutine[..., R]``). ``_Base``'s methods end in ``self._do(...)``, which the async
    client defines as a coroutine, so the twin awaits what the method returns."""

    @functools.wraps(method)
    async def twin(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return await method(self, *args, **kwargs)  # type: ignore[misc]

    return twin


class AsyncMemoryClient(_Base):
    """The asyncio twin of MemoryClient (psycopg's async API and AsyncConnectionPool). Same
    methods, awaited: ``await mem.remember(...)``, ``await mem.search(...)``. Embedding runs
    on the event loop's thread (a few ms per text); use remember_many for bulk."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._pool = None

    # _Base's API as coroutines, one line each (tests/test_package.py fails on a missing one).
    remember = _coroutine(_Base.remember)
    forget = _coroutine(_Base.forget)
    restore = _coroutine(_Base.restore)
    archive = _coroutine(_Base.archive)
    memory_activation = _coroutine(_Base.memory_activation)
    ingest_document = _coroutine(_Base.ingest_document)
    search_documents = _coroutine(_Base.search_documents)
    list_documents = _coroutine(_Base.list_documents)
    delete_document = _coroutine(_Base.delete_document)
    restore_document = _coroutine(_Base.restore_document)
    update_memory = _coroutine(_Base.update_memory)
    get = _coroutine(_Base.get)
    history = _coroutine(_Base.history)
    search = _coroutine(_Base.search)
    search_exact = _coroutine(_Base.search_exact)
    explain_search = _coroutine(_Base.explain_search)
    activate = _coroutine(_Base.activate)
    recall = _coroutine(_Base.recall)
    build_context = _coroutine(_Base.build_context)
    touch = _coroutine(_Base.touch)
    run_job = _coroutine(_Base.run_job)
    # layered tiers (issue 15)
    context_for = _coroutine(_Base.context_for)
    classify_intent = _coroutine(_Base.classify_intent)
    observe_reply = _coroutine(_Base.observe_reply)
    set_fact = _coroutine(_Base.set_fact)
    end_fact = _coroutine(_Base.end_fact)
    profile = _coroutine(_Base.profile)
    fact_history = _coroutine(_Base.fact_history)
    conversation_state = _coroutine(_Base.conversation_state)
    conversation_threads = _coroutine(_Base.conversation_threads)
    search_insights = _coroutine(_Base.search_insights)
    list_memories = _coroutine(_Base.list_memories)
    put_item = _coroutine(_Base.put_item)
    get_item = _coroutine(_Base.get_item)
    delete_item = _coroutine(_Base.delete_item)
    search_items = _coroutine(_Base.search_items)
    list_item_namespaces = _coroutine(_Base.list_item_namespaces)
    session_add_items = _coroutine(_Base.session_add_items)
    session_get_items = _coroutine(_Base.session_get_items)
    session_pop_item = _coroutine(_Base.session_pop_item)
    session_clear = _coroutine(_Base.session_clear)
    write_limits = _coroutine(_Base.write_limits)
    known_event_keys = _coroutine(_Base.known_event_keys)
    reembed = _coroutine(_Base.reembed)
    reembed_status = _coroutine(_Base.reembed_status)
    cancel_reembed = _coroutine(_Base.cancel_reembed)
    user_data = _coroutine(_Base.user_data)
    export_user = _coroutine(_Base.export_user)
    erase_user = _coroutine(_Base.erase_user)

    async def _get_pool(self):
        if self._pool is None:
            from psycopg_pool import AsyncConnectionPool

            await _aprobe(self.dsn, self.timeout)
            self._pool = AsyncConnectionPool(self.dsn, min_size=self.min_size, max_size=self.max_size,
                                             kwargs={"autocommit": True, **self._connect_kwargs()},
                                             configure=self._aconfigure, timeout=self.timeout, open=False)
            await self._pool.open()
        return self._pool

    async def _get_read_pool(self):
        if self.read_dsn is None:
            return await self._get_pool()
        if getattr(self, "_read_pool", None) is None:
            from psycopg_pool import AsyncConnectionPool

            await _aprobe(self.read_dsn, self.timeout)
            async def configure(conn):
                await self._aconfigure(conn, read=True)

            self._read_pool = AsyncConnectionPool(self.read_dsn, min_size=self.min_size, max_size=self.max_size,
                                                  kwargs={"autocommit": True, **self._connect_kwargs()},
                                                  configure=configure, timeout=self.timeout, open=False)
            await self._read_pool.open()
        return self._read_pool

    async def _aconfigure(self, conn, read: bool = False) -> None:
        await _aconfigure(conn)
        if getattr(conn, "_pgmem_session", None) != self._session_key():
            await conn.execute(*self._session_sql(read))
            conn._pgmem_session = self._session_key()

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if getattr(self, "_read_pool", None) is not None:
            await self._read_pool.close()
            self._read_pool = None

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def _rows(self, sql: str, params: dict, conn=None, *, read: bool = False) -> list[dict]:
        import asyncio

        attempt = 0
        while True:
            try:
                if conn is not None:
                    await _aconfigure(conn)
                    await conn.execute(*self._session_sql())
                    async with conn.cursor(row_factory=dict_row) as cur:
                        await cur.execute(sql, params)
                        return await cur.fetchall() if cur.description else []
                pool = await (self._get_read_pool() if read else self._get_pool())
                async with pool.connection() as c:
                    await self._aconfigure(c, read=read and self.read_dsn is not None)  # a claim replaced since it was made
                    async with c.cursor(row_factory=dict_row) as cur:
                        await cur.execute(sql, params)
                        return await cur.fetchall() if cur.description else []
            except psycopg.OperationalError as e:
                state = getattr(e, "sqlstate", None)
                if conn is not None or attempt >= self.retries or (state and state not in RETRYABLE_SQLSTATES):
                    raise _mapped(e) from e
                attempt += 1
                await asyncio.sleep(min(2.0, 0.05 * 2 ** attempt) * (0.5 + random.random()))
            except psycopg.Error as e:
                raise _mapped(e) from e
            except _pool_timeout() as e:
                raise ServerUnavailable(f"no database connection within {self.timeout:g}s (pool of {self.max_size}): "
                                        "is PostgreSQL running and accepting connections? check PGMEM_DSN") from e

    async def _do(self, fn: str, args: dict, post, conn=None, *, setof: bool = True, replica: bool = True):
        sql, params = self._call_sql(fn, {k: v for k, v in args.items() if v is not None}, setof=setof)
        read = replica and self._on_replica(fn, params, conn)
        if self._arg_names is None:
            self._arg_names = {r["proname"]: frozenset(r["array_agg"] or ())
                               for r in await self._rows(self._ARG_NAMES_SQL, {}, conn, read=read)}
        self._check_args(fn, params)
        out = post(await self._rows(sql, params, conn, read=read))
        while inspect.isawaitable(out):  # a method that chains two calls (search: embedding text, then search)
            out = await out
        return out

    async def _run(self, steps, conn=None):
        """MemoryClient._run, awaiting each SQL call."""
        result = None
        try:
            while True:
                fn, args, post, setof = steps.send(result)
                result = await self._do(fn, args, post, conn, setof=setof, replica=False)
        except StopIteration as stop:
            return stop.value

    async def call(self, fn: str, conn=None, **args) -> list[dict]:
        return await self._do(fn, args, list, conn)

    async def remember_many(self, events, *, batch_size: int = 256, extract: bool = True, embed: bool = True,
                            conn=None) -> list[RememberResult]:
        extractor = (self.extractor or _default_extractor()) if extract else None
        events = list(events)
        out: list[RememberResult] = []
        for start in range(0, len(events), batch_size):
            payload = self._batch_payload(events[start:start + batch_size], extractor, embed)
            rows = await self._rows("select * from pgmem.remember_many(%(items)s::jsonb)", {"items": payload}, conn)
            out.extend(_remember_result(r) for r in rows)
        return out


async def _aconfigure(conn) -> None:
    if getattr(conn, "_pgmem_configured", False):
        return
    from pgvector.psycopg import register_vector_async

    try:
        await register_vector_async(conn)
    except Exception as e:
        raise PgmemError(f"the database has no vector type: run 'pgmem migrate' first ({e})") from None
    conn._pgmem_configured = True
