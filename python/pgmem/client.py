"""The thin Python client. It extracts 5W1H (optional), computes embeddings, and calls the
SQL API: one method is one SQL call, and every method accepts the caller's connection (and
so its transaction) through ``conn=``.

    from pgmem import MemoryClient
    mem = MemoryClient(tenant="acme")            # PGMEM_DSN, else the embedded cluster
    mem.remember("I'm allergic to peanuts", who="user", user_id="maya", category="fact")
    for hit in mem.search("what is maya allergic to", k=5):
        print(hit.score, hit.content, hit.signals)

The client is in layers, one concern per module:

- :mod:`pgmem.results`: what the calls return (:class:`Hit`, :class:`RememberResult`);
- :mod:`pgmem.events`: events to remember() arguments (:func:`event_to_args`);
- :mod:`pgmem.tenants`: tenant names and claims (:func:`validate_tenant`);
- :mod:`pgmem._transport`: the one transport of both clients (statements, sessions, retries,
  errors, the replica);
- this module: the API. ``_Base``'s methods do no I/O: each returns a plan (a ``Call`` of one
  SQL function, or a ``Pipeline`` of calls), and :class:`MemoryClient` runs it with the
  blocking driver, :class:`AsyncMemoryClient` with the asyncio driver (``_sync`` / ``_coroutine``
  below: one line per method in each client; tests/test_package.py fails on a missing one).
"""
from __future__ import annotations

import functools
import inspect
import json
import logging
import re
import sys
from typing import (TYPE_CHECKING, Any, Callable, Concatenate, Coroutine, Generator, Iterable, Mapping, ParamSpec,
                    Sequence, TypeVar)

from ._transport import (ARG_NAMES_SQL, CASTS, READ_ONLY_CALLS, RETRYABLE_SQLSTATES, AsyncTransport, Call, Join,
                         Pipeline, Plan, Start, SyncTransport, Transport, connect_error, mapped_error)
from .errors import ConfigError, DataError, IntegrityError, LimitExceeded, PgmemError
from .events import event_to_args, jsonable, remember_many_payload
from .results import (ACTIVATE_SIGNALS, RECALL_SIGNALS, SEARCH_SIGNALS, Hit, RememberResult, hit_from_row,
                      remember_result)
from .tenants import TENANT_RE, claim_tenant, validate_tenant

if TYPE_CHECKING:  # the layered result types, imported when a layered method runs
    from .layered import ContextResult, IntentResult

log = logging.getLogger("pgmem.client")
P = ParamSpec("P")
R = TypeVar("R")

# the names other modules imported from here before the split (kept: `from pgmem.client import ...`)
_hit = hit_from_row
_remember_result = remember_result
_jsonable = jsonable
_claim_tenant = claim_tenant
_connect_error = connect_error
_mapped = mapped_error
_CASTS = CASTS

__all__ = ["MemoryClient", "AsyncMemoryClient", "Hit", "RememberResult", "event_to_args", "validate_tenant",
           "TENANT_RE", "READ_ONLY_CALLS", "RETRYABLE_SQLSTATES", "JOBS", "SEARCH_SIGNALS", "ACTIVATE_SIGNALS",
           "RECALL_SIGNALS"]

JOBS = {"merge": "merge_duplicates", "prune": "prune", "archive": "archive_stale", "tune": "tune_thresholds",
        "purge": "purge", "index": "index_vectors", "cluster": "cluster",
        # Shadow's cleanup (issue 24): archived memories deleted after their retention; statistics
        "delete_archived": "delete_archived", "compact": "compact"}

#: the errors of a batch the database refused for its content (remember_many's on_error): not
#: a lost connection, a missing privilege or a timeout, which end the call whatever on_error says
REFUSALS = (DataError, IntegrityError, LimitExceeded)


def _first(rows: list[dict]) -> dict:
    return rows[0]


def _first_or_none(rows: list[dict]) -> dict | None:
    return rows[0] if rows else None


def _scalar(rows: list[dict]) -> Any:
    """The value of a one-column, one-row result (a function returning jsonb)."""
    return next(iter(rows[0].values())) if rows else None


def _hits(signals: Sequence[str]) -> Callable[[list[dict]], list[Hit]]:
    return lambda rows: [hit_from_row(r, signals) for r in rows]


def _remember_results(rows: list[dict]) -> list[RememberResult]:
    return [remember_result(r) for r in rows]


def _json(v: Any) -> str | None:
    """A dict argument as JSON text (None and {} stay out: the SQL default)."""
    return json.dumps(v, default=jsonable) if v else None


class _Base(Transport):
    """What both clients are made of: the settings, the embedder and the LLM, and the pipelines'
    steps; the API is ``_Api``'s (plans), run by each client's transport."""

    _ARG_NAMES_SQL = ARG_NAMES_SQL  # the catalog query (web/app.py reads it once for every tenant's client)

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
        self._arg_names = None
        self._embedder_arg = embedder
        self._embedder: Any = None
        self.extractor = extractor
        self.min_size, self.max_size, self.timeout = min_size, max_size, timeout
        self.retries = retries
        self.statement_timeout_ms = statement_timeout_ms

    def set_tenant_claim(self, token: str) -> None:
        """Use a (fresh) signed tenant claim: connections take it at their next use."""
        if not isinstance(token, str) or not token:
            raise ConfigError("tenant_claim must be the token string your auth service signed")
        self.tenant = claim_tenant(token)
        self.tenant_claim = token

    # embeddings ----------------------------------------------------------------
    @property
    def embedder(self) -> Any:
        """The embedder (``pgmem.embedding.Embedder()``: the one PGMEM_EMBEDDER chooses, by
        default all-MiniLM-L6-v2), or None when the client was made with ``embedder=None``:
        memories are then queued for the worker. A core install without an embedder (no numpy,
        no model package) falls back to None too, and says so once: search is lexical only."""
        if self._embedder is None and self._embedder_arg not in (None, False):
            if self._embedder_arg == "auto":
                self._embedder = _auto_embedder()
                if self._embedder is None:
                    self._embedder_arg = None
            elif isinstance(self._embedder_arg, str):  # a kind: "onnx", "local", "http"
                from .embedding import make_embedder

                self._embedder = make_embedder(self._embedder_arg)
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
        return remember_many_payload(items)

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

    def _searching(self, fn: str, args: dict[str, Any], post: Callable[[list[dict]], R], query: str | None,
                   embedding: Any, profile: str | None, filters: dict | None, conn: Any) -> Plan[R]:
        """A search-like call (``query_embedding`` in ``args``): with the caller's embedding, or
        the question embedded here without the names of the actors it names and of the user it
        is filtered on (pgmem.query_embedding_text: with the default profile those count through
        the actor signal or the filter, and in an embedding a name swamps what is asked). One
        more round trip, a fraction of the embedding's cost."""
        if embedding is not None or not query or self.embedder is None:
            return Call(fn, {**args, "query_embedding": embedding}, post, conn)
        return Pipeline(self._search_steps(fn, args, post, query, embedding, profile, filters), conn, replica=True)

    def _search_steps(self, fn: str, args: dict[str, Any], post: Callable[[list[dict]], R], query: str | None,
                      embedding: Any, profile: str | None, filters: dict | None) -> Generator[Any, Any, R]:
        """_searching's calls, as pipeline steps (also one query of search(rewrite=True))."""
        if embedding is None and query and self.embedder is not None:
            user = (filters or {}).get("user_id")
            text = yield Call("query_embedding_text", dict(p_text=query, p_profile=profile,
                                                           p_user_id=user if isinstance(user, str) else None),
                              lambda rows: rows[0]["query_embedding_text"], setof=False)
            embedding = _query_vector(self.embedder, text or query)
        return (yield Call(fn, {**args, "query_embedding": embedding}, post))

    def _remember_args(self, content: str, kw: dict) -> dict[str, Any]:
        args: dict[str, Any] = {"content": content}
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

    def _remember_many_steps(self, events: list[Any], batch_size: int, progress: bool | None, extract: bool,
                             embed: bool, on_error: Callable[[int, Any, Exception], Any] | None
                             ) -> Generator[Any, Any, list[RememberResult]]:
        from ._progress import progress_bar

        extractor = (self.extractor or _default_extractor()) if extract else None
        starts = range(0, len(events), batch_size)
        # the next batch is embedded while the database stores this one (one call at a time, in
        # order: a batch's gate sees the batches before it): the model and the server each keep a
        # core busy (issue 23, ingest with CPU embedding)
        overlap = embed and self.embedder is not None and len(starts) > 1
        out: list[RememberResult] = []
        bar = progress_bar(total=len(events), unit="mem", disable=not (sys.stderr.isatty() if progress is None
                                                                        else progress), desc="remember")
        pending: tuple[Any, list[tuple[int, dict]], int] | None = None
        try:
            for start in starts:
                chunk = events[start:start + batch_size]
                batch = []
                for i, event in enumerate(chunk, start):
                    try:
                        batch.append((i, event_to_args(event, extractor)))
                    except PgmemError as e:
                        if on_error is None:
                            raise
                        on_error(i, event, e)
                self._embed_items([a for _, a in batch], embed)
                call = Call("remember_many", {"items": remember_many_payload(a for _, a in batch)}, _remember_results)
                if pending is not None:
                    out.extend((yield from self._stored(*pending[:2], events, on_error)))
                    bar.update(pending[2])
                    pending = None
                if not batch:
                    bar.update(len(chunk))
                elif overlap:
                    pending = ((yield Start(call)), batch, len(chunk))
                else:
                    out.extend((yield from self._stored(call, batch, events, on_error)))
                    bar.update(len(chunk))
            if pending is not None:
                out.extend((yield from self._stored(*pending[:2], events, on_error)))
                bar.update(pending[2])
        finally:
            bar.close()
        return out

    @staticmethod
    def _stored(call_or_handle: Any, batch: list[tuple[int, dict]], events: list[Any],
                on_error: Callable[[int, Any, Exception], Any] | None) -> Generator[Any, Any, list[RememberResult]]:
        """A batch's results (a Call, or the handle of one started); with on_error, a batch the
        database refused is sent again one event at a time."""
        try:
            results: list[RememberResult] = yield (call_or_handle if isinstance(call_or_handle, Call)
                                                   else Join(call_or_handle))
            return results
        except REFUSALS:
            if on_error is None:
                raise
        out: list[RememberResult] = []
        for i, a in batch:  # the same vectors, one event at a time
            try:
                out += yield Call("remember_many", {"items": remember_many_payload([a])}, _remember_results)
            except REFUSALS as e:
                on_error(i, events[i], e)
        return out

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

    def _search_rewritten_steps(self, query: str, embedding: Any, args: dict[str, Any], filters: dict | None,
                                touch: bool) -> Generator[Any, Any, list[Hit]]:
        """search(rewrite=True) as pipeline steps: each query searched (its text to embed first),
        a memory's best score kept, and what is returned touched once."""
        best: dict[int, Hit] = {}
        for i, text in enumerate([query, *self._rewrite_queries(query)]):
            hits = yield from self._search_steps("search", dict(query_text=text, **args), _hits(SEARCH_SIGNALS), text,
                                                 embedding if i == 0 else None, args["profile"], filters)
            for h in hits:
                if h.id not in best or h.score > best[h.id].score:
                    h.extra["query"] = text
                    best[h.id] = h
        out = sorted(best.values(), key=lambda h: (-h.score, h.id))[:args["k"]]
        if touch and out:  # what is returned is a use, once
            yield Call("touch", dict(ids=[h.id for h in out], kind="search"), lambda rows: rows[0]["touch"],
                       setof=False)
        return out

    def _ingest_document_steps(self, title: str, content: str, source: str | None, user_id: str | None,
                               metadata: dict | None, max_tokens: int | None,
                               embed: bool) -> Generator[Any, Any, dict]:
        chunks = yield Call("chunk_document", dict(content=content, max_tokens=max_tokens), list)
        vecs = None
        if embed and self.embedder is not None and chunks:
            vecs = list(self.embedder.embed_many([c["chunk"] for c in chunks]))
        return (yield Call("ingest_document", dict(
            title=title, content=content, source=source, user_id=user_id, metadata=_json(metadata),
            max_tokens=max_tokens, embeddings=vecs, embedding_model=self.embedder.model_name if vecs else None),
            _first))

    # layered tiers (issue 15, layered-memory-architecture.md): profile facts, intent,
    # conversation state, threads, insights, and context_for. The methods that may ask the
    # LLM (context_for, classify_intent, observe_reply) are pipelines: the LLM
    # (PGMEM_LLM_BASE_URL) answers, between two SQL calls, what SQL cannot.
    @property
    def llm(self) -> Any:
        """The LayeredLLM for the intent fallback, thread summaries and insights: from
        PGMEM_LLM_BASE_URL unless set (``mem.llm = None`` turns it off)."""
        if not hasattr(self, "_llm"):
            from .layered import LayeredLLM

            self._llm = LayeredLLM.from_env()
        return self._llm

    @llm.setter
    def llm(self, value: Any) -> None:
        self._llm = value

    def _context_for_steps(self, query: str, conversation_id: str, user_id: str | None, embedding: Any,
                           k: int | None, remember: bool, filters: dict | None, search_profile: str | None,
                           created_at: Any) -> Generator[Any, Any, ContextResult]:
        from .layered import ContextResult

        if embedding is None and query and self.embedder is not None:
            # embedded as search embeds a question (issue 32: context_for retrieves what search
            # finds): without the names of the actors it names and of its user
            # (pgmem.query_embedding_text)
            text = yield Call("query_embedding_text", dict(p_text=query, p_profile=search_profile, p_user_id=user_id),
                              lambda rows: rows[0]["query_embedding_text"], setof=False)
            emb = _query_vector(self.embedder, text or query)
        else:
            emb = self._embed_query(query, embedding)
        llm = self.llm
        if llm is not None:
            yield from self._llm_intent_steps(query, conversation_id, user_id, llm)
        doc = yield Call("context_for", dict(query_text=query, query_embedding=emb, conversation_id=conversation_id,
                                             user_id=user_id, k=k, remember=remember, filters=_json(filters),
                                             search_profile=search_profile, created_at=created_at), _scalar,
                         setof=False)
        result = ContextResult(doc)
        thread = result.stage("thread")
        if llm is not None and thread.get("summary_due"):
            msgs = yield Call("thread_messages", dict(thread_id=thread["thread_id"]), list)
            summary, label = llm.summarize(msgs)
            if summary:
                t = yield Call("set_thread_summary", dict(thread_id=thread["thread_id"], summary=summary, label=label,
                                                          source="llm"), _first)
                thread.update(summary=t["summary"], summary_source=t["summary_source"], label=t["label"])
                result.context["thread"] = {"id": t["id"], "label": t["label"], "summary": t["summary"]}
        return result

    def _llm_intent_steps(self, query: str, conversation_id: str | None, user_id: str | None,
                          llm: Any) -> Generator[Any, Any, IntentResult]:
        """classify_intent in SQL; when it needs the LLM, ask it and cache the answer."""
        from .layered import IntentResult

        got = yield Call("classify_intent", dict(query_text=query, conversation_id=conversation_id), _first)
        res = IntentResult(**{k: got[k] for k in ("intent", "confidence", "source", "rule", "needs_llm")},
                           facts=got.get("facts") or [])
        if got["needs_llm"] and llm is not None:
            ans = llm.classify(query)
            if ans:
                yield Call("cache_intent", dict(query_text=query, intent=ans["intent"], confidence=ans["confidence"],
                                                model=llm.model, user_id=user_id), _first)
                res = IntentResult(intent=ans["intent"], confidence=ans["confidence"], source="llm", rule="llm")
        return res

    def _observe_reply_steps(self, conversation_id: str, content: str, embedding: Any, insights: list | None,
                             remember: bool, created_at: Any) -> Generator[Any, Any, dict]:
        emb = self._embed_doc(content, embedding)  # the reply is remembered: a document
        if insights is None and self.llm is not None:
            insights = self.llm.insights(content, "assistant")  # the LLM's, between no two calls: before the one
        return (yield Call("observe_reply", dict(conversation_id=conversation_id, content=content, embedding=emb,
                                                 insights=json.dumps(insights) if insights is not None else None,
                                                 remember=remember, created_at=created_at), _scalar, setof=False))


class _Api(_Base):
    """The API of both clients: each method returns a plan (``Call`` / ``Pipeline``, pgmem._transport)
    and does no I/O. The clients do not inherit it: each wraps every method once (``_sync`` /
    ``_coroutine`` below), so that ``MemoryClient.search`` returns hits and ``AsyncMemoryClient.search``
    a coroutine of them, and a type checker sees both. A method here may use what ``_Base`` has, never
    another method of ``_Api`` (on a client that name is the run method, not the plan).
    """

    # any function ------------------------------------------------------------------
    def call(self, fn: str, conn=None, **args) -> Call[list[dict]]:
        """Call any pgmem SQL function by name with named arguments (None = SQL default)."""
        return Call(fn, args, list, conn)

    # write path ------------------------------------------------------------------
    def remember(self, content: str, *, who: str | None = None, what: str | None = None, when: Any = None,
                 where: str | None = None, why: str | None = None, how: str | None = None,
                 category: str | None = None, importance: float | None = None, metadata: dict | None = None,
                 session_id: str | None = None, user_id: str | None = None, agent_id: str | None = None,
                 extract: bool = False, embedding: Any = None, embed: bool = True, conn=None,
                 **more) -> Call[RememberResult]:
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
        return Call("remember", args, lambda rows: remember_result(rows[0]), conn)

    def remember_many(self, events: Iterable[Mapping[str, Any] | str], *, batch_size: int = 256,
                      progress: bool | None = None, extract: bool = True, embed: bool = True,
                      on_error: Callable[[int, Any, Exception], Any] | None = None,
                      conn=None) -> Pipeline[list[RememberResult]]:
        """Store many events (dicts in the JSONL event format, or texts): embeds each batch at
        once and sends it in one pgmem.remember_many call. A progress bar shows on a terminal
        (``progress``). Without ``on_error`` the first bad event, or a batch the database
        refuses, raises. With ``on_error(index, event, error)``: an event without content is
        reported and left out, and a batch the database refuses for its content (InvalidInput,
        LimitExceeded, ...) is sent again one event at a time with the same vectors, each
        refused event reported; the results are then those of the events stored, in order.
        (In the caller's open transaction the first refusal aborts it: use on_error with
        autocommit or the client's own connections.)"""
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        return Pipeline(self._remember_many_steps(list(events), batch_size, progress, extract, embed, on_error), conn)

    def _remember_prepared(self, items: list[dict], conn=None) -> Call[list[RememberResult]]:
        """pgmem.remember_many for remember() arguments already extracted and embedded (the
        CLI's ingest: a batch the database refuses is sent again item by item, never embedded twice)."""
        return Call("remember_many", {"items": remember_many_payload(items)}, _remember_results, conn)

    def forget(self, memory_id: int, reason: str | None = None, conn=None) -> Call[dict]:
        return Call("forget", dict(memory_id=memory_id, reason=reason), _first, conn)

    def restore(self, memory_id: int, reason: str | None = None, conn=None) -> Call[dict]:
        return Call("restore", dict(memory_id=memory_id, reason=reason), _first, conn)

    def archive(self, ids: Sequence[int], reason: str | None = None, conn=None) -> Call[list[dict]]:
        """Shadow's manual archival (pgmem.archive): the memories leave every ranking until
        ``restore``; merged and deleted ones are refused."""
        return Call("archive", dict(ids=list(ids), reason=reason), list, conn)

    def memory_activation(self, memory_id: int, as_of: Any = None, conn=None) -> Call[dict]:
        """The lifecycle activation of a memory (pgmem.memory_activation) with its parts and the
        tenant's archival threshold."""
        return Call("memory_activation", dict(memory_id=memory_id, as_of=as_of), _first, conn)

    def update_memory(self, memory_id: int, changes: dict, reason: str | None = None, conn=None) -> Call[dict]:
        return Call("update_memory", dict(memory_id=memory_id, changes=json.dumps(changes, default=jsonable),
                                          reason=reason), _first, conn)

    def get(self, memory_id: int, conn=None) -> Call[dict | None]:
        return Call("get_memory", dict(memory_id=memory_id), _first_or_none, conn)

    def history(self, memory_id: int, conn=None) -> Call[list[dict]]:
        return Call("history", dict(memory_id=memory_id), list, conn)

    # read path -------------------------------------------------------------------
    def search(self, query: str | None = None, *, embedding: Any = None, k: int = 10, actor: str | None = None,
               location: str | None = None, profile: str | None = None, weights: dict | None = None,
               filters: dict | None = None, as_of: Any = None, touch: bool = False, rewrite: bool = False,
               conn=None) -> Plan[list[Hit]]:
        """Fused search (pgmem.search; default profile: the setting search_profile).

        ``rewrite=True`` (off by default; issue 29) asks the configured OpenAI-compatible LLM
        (``mem.llm``: PGMEM_LLM_BASE_URL) for up to three search queries, one per fact the
        question needs, and searches with the question and each of them (one pgmem.search call
        each): a memory keeps its best score, and ``hit.extra["query"]`` says which query found
        it. Without an LLM, or when it fails, it is the plain search."""
        args = dict(k=k, actor=actor, location=location, profile=profile, weights=_json(weights),
                    filters=_json(filters), as_of=as_of)
        if rewrite and query:
            return Pipeline(self._search_rewritten_steps(query, embedding, args, filters, touch), conn)
        return self._searching("search", dict(query_text=query, touch=touch, **args), _hits(SEARCH_SIGNALS), query,
                               embedding, profile, filters, conn)

    def search_exact(self, query: str | None = None, *, embedding: Any = None, k: int = 10, actor: str | None = None,
                     location: str | None = None, profile: str | None = None, weights: dict | None = None,
                     filters: dict | None = None, as_of: Any = None, conn=None) -> Plan[list[Hit]]:
        """The exhaustive reference scorer (pgmem.search_exact): same scores over every eligible memory."""
        return self._searching("search_exact", dict(query_text=query, k=k, actor=actor, location=location,
                                                    profile=profile, weights=_json(weights), filters=_json(filters),
                                                    as_of=as_of),
                               _hits(SEARCH_SIGNALS), query, embedding, profile, filters, conn)

    def explain_search(self, query: str | None = None, *, embedding: Any = None, k: int = 10, conn=None,
                       **kw) -> Plan[list[dict]]:
        """Each signal of each hit of pgmem.search, with its weight and contribution (pgmem.explain_search)."""
        return self._searching("explain_search", dict(query_text=query, k=k, **{
            k2: (json.dumps(v) if isinstance(v, dict) else v) for k2, v in kw.items()}),
            list, query, embedding, kw.get("profile"), kw.get("filters"), conn)

    def activate(self, query: str | None = None, *, embedding: Any = None, context_type: str = "conversation",
                 topics: Sequence[str] | None = None, entities: Sequence[str] | None = None,
                 summary: str | None = None, threshold: float | None = None, k: int = 50,
                 filters: dict | None = None, as_of: Any = None, profile: str | None = None,
                 weights: dict | None = None, query_id: Any = None, conn=None) -> Call[list[Hit]]:
        """Shadow activation (pgmem.activate): every candidate with its activation score and
        whether it passed the threshold of the context type (``hit.extra['activated']``).
        ``profile`` names an activate profile (default shadow); ``query_id`` logs what was shown
        so that ``pgmem.feedback`` can refer to it."""
        return Call("activate", dict(query_text=query, query_embedding=self._embed_query(query, embedding),
                                     context_type=context_type, topics=list(topics) if topics else None,
                                     entities=list(entities) if entities else None, summary=summary,
                                     threshold=threshold, k=k, filters=_json(filters), as_of=as_of,
                                     weights=_json(weights), query_id=query_id, profile=profile),
                    _hits(ACTIVATE_SIGNALS), conn)

    def recall(self, query: str | None = None, *, embedding: Any = None, k: int = 10, weights: dict | None = None,
               filters: dict | None = None, as_of: Any = None, profile: str | None = None,
               early_termination: bool = False, min_score: float | None = None, conn=None) -> Call[list[Hit]]:
        """Engram ranking (pgmem.recall); ``profile`` names a recall profile (default engram);
        ``early_termination``: only the memories scoring above ``min_score`` (0.8), at most k."""
        return Call("recall", dict(query_text=query, query_embedding=self._embed_query(query, embedding),
                                   k=k, weights=_json(weights), filters=_json(filters), as_of=as_of,
                                   profile=profile, early_termination=early_termination or None, min_score=min_score),
                    _hits(RECALL_SIGNALS), conn)

    def build_context(self, query: str | None = None, *, embedding: Any = None, token_budget: int | None = None,
                      candidates: int = 50, lam: float = 0.5, profile: str | None = None, weights: dict | None = None,
                      filters: dict | None = None, as_of: Any = None, conversation_tokens: int = 0,
                      actor: str | None = None, location: str | None = None, conn=None) -> Plan[list[dict]]:
        """JAM context building (pgmem.build_context): search candidates (with the same profile,
        weights, filters, actor and location as ``search``), MMR order, knapsack into the token
        budget. Returns every candidate; ``selected`` ones first in MMR order."""
        return self._searching("build_context", dict(query_text=query, token_budget=token_budget,
                                                     candidates=candidates, **{"lambda": lam}, profile=profile,
                                                     weights=_json(weights), filters=_json(filters), as_of=as_of,
                                                     conversation_tokens=conversation_tokens, actor=actor,
                                                     location=location),
                               list, query, embedding, profile, filters, conn)

    def use(self, ids: Sequence[int], source: str = "use", conn=None) -> Call[int]:
        """Records that memories were used (pgmem.use): carried into a prompt, cited, clicked.
        The one verb for a use; a search result is not one until the caller says so here."""
        return Call("use", dict(ids=list(ids), source=source), lambda rows: rows[0]["use"], conn, setof=False)

    def touch(self, ids: Sequence[int], kind: str = "touch", conn=None) -> Call[int]:
        """The older name of :meth:`use` (pgmem.touch)."""
        return Call("touch", dict(ids=list(ids), kind=kind), lambda rows: rows[0]["touch"], conn, setof=False)

    # jobs ------------------------------------------------------------------------
    def run_job(self, name: str, conn=None, **params) -> Call[list[dict]]:
        """Run a maintenance job now (merge, prune, archive, tune, purge, index) with its parameters."""
        fn = JOBS.get(name)
        if fn is None:
            raise PgmemError(f"unknown job {name!r}: known jobs are {', '.join(sorted(JOBS))}")
        return Call(fn, {k: (json.dumps(v) if isinstance(v, dict) else v) for k, v in params.items()}, list, conn)

    # knowledge-base documents (issue 24, sql/680_documents.sql) ------------------------
    def ingest_document(self, title: str, content: str, *, source: str | None = None, user_id: str | None = None,
                        metadata: dict | None = None, max_tokens: int | None = None, embed: bool = True,
                        conn=None) -> Pipeline[dict]:
        """Store a knowledge-base document (pgmem.ingest_document): the database splits it into
        chunks (pgmem.chunk_document), the client embeds each chunk, and the chunks are stored with
        their vectors under their own HNSW and full-text indexes. ``user_id`` None: the tenant's
        knowledge base (every user). Returns {document_id, decision (stored/duplicate), chunks, tokens}."""
        return Pipeline(self._ingest_document_steps(title, content, source, user_id, metadata, max_tokens, embed),
                        conn)

    def search_documents(self, query: str | None = None, *, embedding: Any = None, k: int = 5,
                         user_id: str | None = None, conn=None) -> Call[list[dict]]:
        """The knowledge-base chunks nearest a question (pgmem.search_documents)."""
        return Call("search_documents", dict(query_text=query, query_embedding=self._embed_query(query, embedding),
                                             k=k, user_id=user_id), list, conn)

    def list_documents(self, user_id: str | None = None, *, include_deleted: bool = False,
                       conn=None) -> Call[list[dict]]:
        return Call("list_documents", dict(user_id=user_id, include_deleted=include_deleted or None), list, conn)

    def delete_document(self, document_id: int, conn=None) -> Call[dict]:
        return Call("delete_document", dict(document_id=document_id), _first, conn)

    def restore_document(self, document_id: int, conn=None) -> Call[dict]:
        return Call("restore_document", dict(document_id=document_id), _first, conn)

    def context_for(self, query: str, *, conversation_id: str, user_id: str | None = None, embedding: Any = None,
                    k: int | None = None, remember: bool = True, filters: dict | None = None,
                    search_profile: str | None = None, created_at: Any = None, conn=None) -> Pipeline[ContextResult]:
        """The memory half of the layered pipeline for one user message (pgmem.context_for):
        classify (asking the LLM when no fast path decides and one is configured), topic gate,
        remember, state, thread, research, policy, history, retrieval. Returns a
        :class:`pgmem.layered.ContextResult`; ``result.annotations()`` are the stage events to
        stream before the first token."""
        return Pipeline(self._context_for_steps(query, conversation_id, user_id, embedding, k, remember, filters,
                                                search_profile, created_at), conn)

    def classify_intent(self, text: str, conversation_id: str | None = None, *, user_id: str | None = None,
                        conn=None) -> Pipeline[IntentResult]:
        """The intent of a message (pgmem.classify_intent), asking the LLM and caching its
        answer when no fast path decides and one is configured: a :class:`IntentResult`."""
        return Pipeline(self._llm_intent_steps(text, conversation_id, user_id, self.llm), conn)

    def observe_reply(self, conversation_id: str, content: str, *, embedding: Any = None, insights: list | None = None,
                      remember: bool = True, created_at: Any = None, conn=None) -> Pipeline[dict]:
        """Records the assistant's reply (pgmem.observe_reply): it joins its question's thread,
        is remembered, and its insights (the LLM's when one is configured, else cue phrases)
        and concepts are stored. Returns the JSON document of observe_reply."""
        return Pipeline(self._observe_reply_steps(conversation_id, content, embedding, insights, remember, created_at),
                        conn)

    def set_fact(self, user_id: str, key: str, value: Any, *, valid_from: Any = None, valid_to: Any = None,
                 confidence: float = 1.0, source: str = "api", statement: str | None = None,
                 conn=None) -> Call[dict]:
        """Sets a profile fact (pgmem.set_fact): the value in force is superseded, never deleted."""
        return Call("set_fact", dict(user_id=user_id, key=key, value=json.dumps(value, default=jsonable),
                                     valid_from=valid_from, valid_to=valid_to, confidence=confidence, source=source,
                                     statement=statement), _first, conn)

    def end_fact(self, user_id: str, key: str, *, valid_to: Any = None, statement: str | None = None,
                 conn=None) -> Call[dict]:
        return Call("end_fact", dict(user_id=user_id, key=key, valid_to=valid_to, statement=statement), _first, conn)

    def profile(self, user_id: str, *, as_of: Any = None, known_at: Any = None, conn=None) -> Call[dict[str, Any]]:
        """The user's facts in force at ``as_of`` (default now) as pgmem knew them at
        ``known_at``: ``{key: value}`` (pgmem.profile has the rows with both times)."""
        return Call("profile", dict(user_id=user_id, as_of=as_of, known_at=known_at),
                    lambda rows: {r["key"]: r["value"] for r in rows}, conn)

    def fact_history(self, user_id: str, key: str | None = None, conn=None) -> Call[list[dict]]:
        return Call("fact_history", dict(user_id=user_id, key=key), list, conn)

    def conversation_state(self, conversation_id: str, conn=None) -> Call[dict | None]:
        return Call("conversation_state", dict(conversation_id=conversation_id), _scalar, conn, setof=False)

    def conversation_threads(self, conversation_id: str, include_archived: bool = False,
                             conn=None) -> Call[list[dict]]:
        return Call("conversation_threads", dict(conversation_id=conversation_id, include_archived=include_archived),
                    list, conn)

    def search_insights(self, query: str | None = None, *, embedding: Any = None, user_id: str | None = None,
                        k: int = 10, types: Sequence[str] | None = None, conn=None) -> Call[list[dict]]:
        """Research insights across every thread (pgmem.search_insights)."""
        return Call("search_insights", dict(query_text=query, query_embedding=self._embed_query(query, embedding),
                                            user_id=user_id, k=k, types=list(types) if types else None), list, conn)

    # embedding models (issue 26): limits checked before embedding, replays, model moves ----
    def write_limits(self, conn=None) -> Call[dict]:
        """The size limits a write must keep (pgmem.write_limits): check them before embedding."""
        return Call("write_limits", {}, _scalar, conn, setof=False)

    def known_event_keys(self, event_keys: Sequence[str], conn=None) -> Call[set[str]]:
        """The event keys this tenant already stored (pgmem.known_event_keys): their events
        are replayed, so they need no embedding."""
        return Call("known_event_keys", dict(event_keys=list(event_keys)),
                    lambda rows: {next(iter(r.values())) for r in rows}, conn)

    def reembed(self, model: str | None = None, conn=None) -> Call[dict]:
        """Starts moving this tenant to another embedding model (pgmem.reembed): ``model``
        defaults to this client's embedder's. Workers running that model embed the memories;
        the vectors are swapped at once when all are ready. Returns the move."""
        if model is None:
            if self.embedder is None:
                raise ConfigError("reembed needs the new model's name, or a client with that embedder")
            model = self.embedder.model_name
        return Call("reembed", dict(model=model), _first, conn)

    def reembed_status(self, conn=None) -> Call[list[dict]]:
        """This tenant's embedding moves, newest first (pgmem.reembed_status)."""
        return Call("reembed_status", {}, list, conn)

    def cancel_reembed(self, conn=None) -> Call[dict]:
        """Cancels the running move (pgmem.cancel_reembed): every memory keeps its vector."""
        return Call("cancel_reembed", {}, _first, conn)

    # integrations (issue 26, sql/128_integrations.sql): memories by filters, items, sessions --
    def list_memories(self, filters: dict | None = None, *, k: int = 20, skip: int = 0,
                      conn=None) -> Call[list[dict]]:
        """Memories matching filters, newest first, without a query (pgmem.list_memories)."""
        return Call("list_memories", dict(filters=_json(filters), k=k, skip=skip), list, conn)

    def put_item(self, namespace: Sequence[str], key: str, value: dict, *, content: str | None = None,
                 embedding: Any = None, embed: bool = True, user_id: str | None = None, agent_id: str | None = None,
                 session_id: str | None = None, conn=None) -> Call[int]:
        """Stores a JSON object under (namespace, key) as a memory (pgmem.put_item); ``content``
        is the text searched and embedded (default: the value's content/text field, else its
        JSON, as in SQL). Putting the key again updates it. Returns the memory id."""
        if embedding is None and embed and self.embedder is not None:
            text = content or next((value[f] for f in ("content", "text", "memory", "data")
                                    if isinstance(value.get(f), str) and value[f].strip()), None) \
                or json.dumps(value, default=jsonable)
            embedding = self.embedder.embed(text)
        return Call("put_item", dict(namespace=list(namespace), key=key, value=json.dumps(value, default=jsonable),
                                     content=content, embedding=embedding,
                                     embedding_model=self.embedder.model_name if embedding is not None
                                     and self.embedder is not None else None, user_id=user_id, agent_id=agent_id,
                                     session_id=session_id), _scalar, conn, setof=False)

    def get_item(self, namespace: Sequence[str], key: str, conn=None) -> Call[dict | None]:
        """The item under (namespace, key), or None (pgmem.get_item)."""
        return Call("get_item", dict(namespace=list(namespace), key=key), _first_or_none, conn)

    def delete_item(self, namespace: Sequence[str], key: str, conn=None) -> Call[bool]:
        """Forgets the item under (namespace, key) (restorable; pgmem.delete_item)."""
        return Call("delete_item", dict(namespace=list(namespace), key=key), _scalar, conn, setof=False)

    def search_items(self, namespace_prefix: Sequence[str] = (), query: str | None = None, *, embedding: Any = None,
                     filter: dict | None = None, k: int = 10, skip: int = 0, conn=None) -> Call[list[dict]]:
        """Items under a namespace prefix: ranked by the fused search when there is a query,
        else newest first; ``filter`` on the value's fields (pgmem.search_items)."""
        return Call("search_items", dict(namespace_prefix=list(namespace_prefix), query_text=query,
                                         query_embedding=self._embed_query(query, embedding), filter=_json(filter),
                                         k=k, skip=skip), list, conn)

    def list_item_namespaces(self, prefix: Sequence[str] | None = None, suffix: Sequence[str] | None = None,
                             max_depth: int | None = None, k: int = 100, skip: int = 0,
                             conn=None) -> Call[list[tuple]]:
        """The namespaces of the items (pgmem.list_item_namespaces)."""
        return Call("list_item_namespaces", dict(prefix=list(prefix) if prefix is not None else None,
                                                 suffix=list(suffix) if suffix is not None else None,
                                                 max_depth=max_depth, k=k, skip=skip),
                    lambda rows: [tuple(next(iter(r.values()))) for r in rows], conn)

    def session_add_items(self, session_id: str, items: Sequence[dict], *, user_id: str | None = None,
                          remember: bool = False, embeddings: Sequence[Any] | None = None, conn=None) -> Call[int]:
        """Appends a framework's conversation items to a session (pgmem.session_add_items);
        ``remember`` also stores each user/assistant text turn as a memory, with its embedding
        from ``embeddings`` (one per item, None for an item without text)."""
        return Call("session_add_items", dict(session_id=session_id, items=json.dumps(list(items), default=jsonable),
                                              user_id=user_id, remember=remember,
                                              embeddings=None if embeddings is None else list(embeddings)),
                    _scalar, conn, setof=False)

    def session_get_items(self, session_id: str, max_items: int | None = None, conn=None) -> Call[list[dict]]:
        """A session's items in order; the latest ``max_items`` (pgmem.session_get_items)."""
        return Call("session_get_items", dict(session_id=session_id, max_items=max_items),
                    lambda rows: [next(iter(r.values())) for r in rows], conn)

    def session_pop_item(self, session_id: str, conn=None) -> Call[dict | None]:
        """Removes and returns a session's latest item (pgmem.session_pop_item)."""
        return Call("session_pop_item", dict(session_id=session_id), _scalar, conn, setof=False)

    def session_clear(self, session_id: str, conn=None) -> Call[int]:
        """Removes every item of a session (pgmem.session_clear); the rows are kept."""
        return Call("session_clear", dict(session_id=session_id), _scalar, conn, setof=False)

    def user_data(self, user_id: str, conn=None) -> Call[dict]:
        """What is stored about a user, tier by tier (pgmem.user_data_summary)."""
        return Call("user_data_summary", dict(user_id=user_id), _scalar, conn, setof=False)

    def export_user(self, user_id: str, conn=None) -> Call[dict]:
        return Call("export_user", dict(user_id=user_id), _scalar, conn, setof=False)

    def erase_user(self, user_id: str, conn=None) -> Call[dict]:
        return Call("erase_user", dict(user_id=user_id), _first, conn)


# --------------------------------------------------------------------- the two clients
_PLAN_ANNOTATION = re.compile(r"(?:Plan|Call|Pipeline)\[(.*)\]")


def _as_run(twin: Callable[..., Any], method: Callable[..., Any]) -> None:
    """The twin shows the method's signature with the type of the result, not of the plan
    (help(), inspect.signature, typing.get_type_hints)."""
    sig = inspect.signature(method)
    ret = sig.return_annotation
    m = _PLAN_ANNOTATION.fullmatch(ret) if isinstance(ret, str) else None
    if m:
        ret = m.group(1)
    twin.__signature__ = sig.replace(return_annotation=ret)  # type: ignore[attr-defined]  # read by inspect
    twin.__annotations__ = {**method.__annotations__, "return": ret}
    del twin.__wrapped__  # type: ignore[attr-defined]  # inspect would follow it to the plan's signature


def _sync(method: Callable[Concatenate[Any, P], Plan[R]]) -> Callable[Concatenate[Any, P], R]:
    """MemoryClient's method: the ``_Base`` method's plan, run by the blocking driver."""

    @functools.wraps(method)
    def run(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._drive(self._plan_ops(method(self, *args, **kwargs)))

    _as_run(run, method)
    return run


def _coroutine(method: Callable[Concatenate[Any, P], Plan[R]]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """AsyncMemoryClient's method: the same signature and docstring, as a true coroutine function
    (``inspect.iscoroutinefunction`` is true, and a type checker sees ``Coroutine[..., R]``)
    whose plan the asyncio driver runs."""

    @functools.wraps(method)
    async def run(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._drive(self._plan_ops(method(self, *args, **kwargs)))

    _as_run(run, method)
    return run


class MemoryClient(_Base, SyncTransport):
    """Synchronous client over a psycopg connection pool. Every method takes ``conn=`` to
    run inside the caller's connection/transaction instead (the client sets pgmem.tenant on it)."""

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # _Api's methods, run (one line each, the same list as AsyncMemoryClient's: tests/test_package.py)
    call = _sync(_Api.call)
    remember = _sync(_Api.remember)
    remember_many = _sync(_Api.remember_many)
    _remember_prepared = _sync(_Api._remember_prepared)
    forget = _sync(_Api.forget)
    restore = _sync(_Api.restore)
    archive = _sync(_Api.archive)
    memory_activation = _sync(_Api.memory_activation)
    update_memory = _sync(_Api.update_memory)
    get = _sync(_Api.get)
    history = _sync(_Api.history)
    search = _sync(_Api.search)
    search_exact = _sync(_Api.search_exact)
    explain_search = _sync(_Api.explain_search)
    activate = _sync(_Api.activate)
    recall = _sync(_Api.recall)
    build_context = _sync(_Api.build_context)
    use = _sync(_Api.use)
    touch = _sync(_Api.touch)
    run_job = _sync(_Api.run_job)
    ingest_document = _sync(_Api.ingest_document)
    search_documents = _sync(_Api.search_documents)
    list_documents = _sync(_Api.list_documents)
    delete_document = _sync(_Api.delete_document)
    restore_document = _sync(_Api.restore_document)
    context_for = _sync(_Api.context_for)
    classify_intent = _sync(_Api.classify_intent)
    observe_reply = _sync(_Api.observe_reply)
    set_fact = _sync(_Api.set_fact)
    end_fact = _sync(_Api.end_fact)
    profile = _sync(_Api.profile)
    fact_history = _sync(_Api.fact_history)
    conversation_state = _sync(_Api.conversation_state)
    conversation_threads = _sync(_Api.conversation_threads)
    search_insights = _sync(_Api.search_insights)
    write_limits = _sync(_Api.write_limits)
    known_event_keys = _sync(_Api.known_event_keys)
    reembed = _sync(_Api.reembed)
    reembed_status = _sync(_Api.reembed_status)
    cancel_reembed = _sync(_Api.cancel_reembed)
    list_memories = _sync(_Api.list_memories)
    put_item = _sync(_Api.put_item)
    get_item = _sync(_Api.get_item)
    delete_item = _sync(_Api.delete_item)
    search_items = _sync(_Api.search_items)
    list_item_namespaces = _sync(_Api.list_item_namespaces)
    session_add_items = _sync(_Api.session_add_items)
    session_get_items = _sync(_Api.session_get_items)
    session_pop_item = _sync(_Api.session_pop_item)
    session_clear = _sync(_Api.session_clear)
    user_data = _sync(_Api.user_data)
    export_user = _sync(_Api.export_user)
    erase_user = _sync(_Api.erase_user)


class AsyncMemoryClient(_Base, AsyncTransport):
    """The asyncio twin of MemoryClient (psycopg's async API and AsyncConnectionPool). Same
    methods, awaited: ``await mem.remember(...)``, ``await mem.search(...)``. Embedding runs
    on the event loop's thread (a few ms per text); use remember_many for bulk."""

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # _Api's methods as coroutines (one line each, the same list as MemoryClient's: tests/test_package.py)
    call = _coroutine(_Api.call)
    remember = _coroutine(_Api.remember)
    remember_many = _coroutine(_Api.remember_many)
    _remember_prepared = _coroutine(_Api._remember_prepared)
    forget = _coroutine(_Api.forget)
    restore = _coroutine(_Api.restore)
    archive = _coroutine(_Api.archive)
    memory_activation = _coroutine(_Api.memory_activation)
    update_memory = _coroutine(_Api.update_memory)
    get = _coroutine(_Api.get)
    history = _coroutine(_Api.history)
    search = _coroutine(_Api.search)
    search_exact = _coroutine(_Api.search_exact)
    explain_search = _coroutine(_Api.explain_search)
    activate = _coroutine(_Api.activate)
    recall = _coroutine(_Api.recall)
    build_context = _coroutine(_Api.build_context)
    use = _coroutine(_Api.use)
    touch = _coroutine(_Api.touch)
    run_job = _coroutine(_Api.run_job)
    ingest_document = _coroutine(_Api.ingest_document)
    search_documents = _coroutine(_Api.search_documents)
    list_documents = _coroutine(_Api.list_documents)
    delete_document = _coroutine(_Api.delete_document)
    restore_document = _coroutine(_Api.restore_document)
    context_for = _coroutine(_Api.context_for)
    classify_intent = _coroutine(_Api.classify_intent)
    observe_reply = _coroutine(_Api.observe_reply)
    set_fact = _coroutine(_Api.set_fact)
    end_fact = _coroutine(_Api.end_fact)
    profile = _coroutine(_Api.profile)
    fact_history = _coroutine(_Api.fact_history)
    conversation_state = _coroutine(_Api.conversation_state)
    conversation_threads = _coroutine(_Api.conversation_threads)
    search_insights = _coroutine(_Api.search_insights)
    write_limits = _coroutine(_Api.write_limits)
    known_event_keys = _coroutine(_Api.known_event_keys)
    reembed = _coroutine(_Api.reembed)
    reembed_status = _coroutine(_Api.reembed_status)
    cancel_reembed = _coroutine(_Api.cancel_reembed)
    list_memories = _coroutine(_Api.list_memories)
    put_item = _coroutine(_Api.put_item)
    get_item = _coroutine(_Api.get_item)
    delete_item = _coroutine(_Api.delete_item)
    search_items = _coroutine(_Api.search_items)
    list_item_namespaces = _coroutine(_Api.list_item_namespaces)
    session_add_items = _coroutine(_Api.session_add_items)
    session_get_items = _coroutine(_Api.session_get_items)
    session_pop_item = _coroutine(_Api.session_pop_item)
    session_clear = _coroutine(_Api.session_clear)
    user_data = _coroutine(_Api.user_data)
    export_user = _coroutine(_Api.export_user)
    erase_user = _coroutine(_Api.erase_user)


# ------------------------------------------------------------------------ embedders, extractors
def _query_vector(embedder: Any, text: str) -> Any:
    fn = getattr(embedder, "embed_query", None)
    return fn(text) if fn is not None else embedder.embed(text)


_NO_EMBEDDER_SAID = False


def _auto_embedder() -> Any:
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


_DEFAULT_EXTRACTOR: Any = None


def _default_extractor() -> Any:
    global _DEFAULT_EXTRACTOR
    if _DEFAULT_EXTRACTOR is None:
        from .extraction import make_extractor

        _DEFAULT_EXTRACTOR = make_extractor()
    return _DEFAULT_EXTRACTOR

