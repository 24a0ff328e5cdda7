"""One transport for both clients: how a client method's SQL calls reach the database.

A client method does no I/O. It returns a *plan*:

- a :class:`Call`: one call of a pgmem SQL function, with what to make of its rows (``post``);
- a :class:`Pipeline`: a generator of calls, for a method that needs one call's answer
  before the next (search: the text to embed, then the search), or asks the LLM between two
  (the layered methods). A call's error is raised inside the generator, where it may be
  handled (``remember_many(on_error=...)``). ``Start`` / ``Join`` run one call while the
  generator goes on (the next batch is embedded while the database stores this one).

:meth:`Transport._plan_ops` turns a plan into a generator of operations, and every decision is
taken there, once, for both clients: the statement and its arguments (checked against the
catalog), the replica or the primary, the session's tenant and limits, retries with backoff
and the exception class of an error (pgmem.errors). The two drivers only perform the four
operations (:class:`Execute`, :class:`Sleep`, :class:`Spawn`, :class:`Join`):
:class:`SyncTransport` with psycopg's blocking API and a thread, :class:`AsyncTransport` with
asyncio. They are the only code written twice, and they are a dozen lines each.
"""
from __future__ import annotations

import logging
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Generator, Generic, Iterable, Iterator, Mapping, TypeVar, Union

import psycopg
from psycopg.rows import dict_row

from . import telemetry
from .errors import PgmemError, ServerUnavailable, from_database

log = logging.getLogger("pgmem.client")

R = TypeVar("R")
Rows = list[dict[str, Any]]

#: SQLSTATEs after which the client retries a call on its own pooled connection: a
#: serialisation failure, a deadlock, a server restart or a lost connection
RETRYABLE_SQLSTATES = {"40001", "40P01", "57P01", "08006", "08003", "08000"}

# scaleout (issue 19): the calls a client with read_dsn sends to the replica (they write nothing;
# search with touch => true and activate with a query_id write, and go to the primary)
READ_ONLY_CALLS = frozenset({"search", "search_exact", "explain_search", "activate", "recall", "build_context",
                             "query_embedding_text",
                             "get_memory", "history", "export_user",
                             # layered reads (sql/6xx): language sql STABLE, no write, no touch
                             "profile", "fact_history", "conversation_state", "conversation_threads",
                             "thread_messages", "search_insights"})

#: the SQL type of an argument, by name, where psycopg's own adaptation would not give it
CASTS = {"event_keys": "::text[]", "namespace": "::text[]", "namespace_prefix": "::text[]", "prefix": "::text[]",
         "suffix": "::text[]", "filter": "::jsonb", "metadata": "::jsonb", "filters": "::jsonb", "weights": "::jsonb",
         "changes": "::jsonb", "items": "::jsonb", "params": "::jsonb", "embedding": "::vector",
         "query_embedding": "::vector", "ids": "::bigint[]", "topics": "::text[]", "entities": "::text[]",
         "query_id": "::uuid",
         "motor": "::jsonb", "sensory": "::jsonb",  # Fragment content domains (issue 16)
         "embeddings": "::vector[]",  # knowledge-base documents (issue 24)
         # layered tiers (issue 15)
         "value": "::jsonb", "insights": "::jsonb", "types": "::text[]",
         "memories": "::jsonb"}  # format_context (the chat's memory block, issue 32)

NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")

#: input argument names of every public function (output columns of RETURNS TABLE excluded)
ARG_NAMES_SQL = ("select p.proname, array_agg(distinct a.n) filter (where a.n is not null"
                 " and coalesce(a.m, 'i') in ('i', 'b', 'v')) from pg_proc p"
                 " left join lateral unnest(p.proargnames, p.proargmodes::text[]) a(n, m) on true"
                 " where p.pronamespace = 'pgmem'::regnamespace and p.proname !~ '^_' group by p.proname")


# ------------------------------------------------------------------------------- plans
@dataclass(frozen=True)
class Call(Generic[R]):
    """One call of ``pgmem.<fn>(name => value, ...)`` (None values are left out: the SQL
    default applies) and ``post``, which makes the method's result of its rows. ``setof``:
    ``select * from`` (a set or a row) rather than ``select`` (one value). ``replica``: the
    call may go to the client's read_dsn when it is read-only (READ_ONLY_CALLS). ``conn``:
    the caller's connection (ignored for a call inside a Pipeline: the pipeline's is used)."""

    fn: str
    args: Mapping[str, Any]
    post: Callable[[Rows], R]
    conn: Any = None
    setof: bool = True
    replica: bool = True


@dataclass(frozen=True)
class Pipeline(Generic[R]):
    """A generator that yields :class:`Call` (and :class:`Start` / :class:`Join`) and is sent
    each one's result; what it returns is the method's result. ``replica``: its read-only
    calls may go to the replica (off by default: a pipeline often reads what it just wrote)."""

    steps: Generator[Any, Any, R]
    conn: Any = None
    replica: bool = False


@dataclass(frozen=True)
class Start:
    """In a Pipeline: start ``call`` and go on; its result is a handle for :class:`Join`."""

    call: Call[Any]


Plan = Union[Call[R], Pipeline[R]]


# ------------------------------------------------------------------------------ operations
@dataclass(frozen=True)
class Execute:
    """Run ``sql`` on the caller's connection, or on a pooled one (the replica's when ``read``):
    the rows as dicts."""

    sql: str
    params: Mapping[str, Any]
    conn: Any
    read: bool


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Spawn:
    """Drive ``ops`` while the caller goes on; the value is a handle with ``result()``."""

    ops: Generator[Any, Any, Any]


@dataclass(frozen=True)
class Join:
    """Wait for a handle (of :class:`Spawn` / :class:`Start`): its value, or its error."""

    handle: Any


Op = Union[Execute, Sleep, Spawn, Join]
Ops = Generator[Op, Any, R]


class _Done:
    """The async driver's handle of a Spawn, which it runs at once (same order, no overlap)."""

    def __init__(self, value: Any = None, error: BaseException | None = None):
        self.value, self.error = value, error

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


# --------------------------------------------------------------------- statements, errors
def call_sql(fn: str, args: Mapping[str, Any], *, setof: bool = True) -> tuple[str, dict[str, Any]]:
    """The statement of one call: ``select * from pgmem.fn(a => %(a)s::type, ...)``."""
    if not NAME_RE.fullmatch(fn):
        raise PgmemError(f"{fn!r} is not a pgmem function name")
    for k in args:
        if not isinstance(k, str) or not NAME_RE.fullmatch(k):
            raise PgmemError(f"{k!r} is not an argument name of pgmem.{fn}: names are lower-case identifiers")
    named = ", ".join(f"{k} => %({k})s" + CASTS.get(k, "") for k in args)
    return (f"select * from pgmem.{fn}({named})" if setof else f"select pgmem.{fn}({named})"), dict(args)


def arg_names_of(rows: Rows) -> dict[str, frozenset[str]]:
    """The rows of ARG_NAMES_SQL as {function: its input argument names}."""
    return {r["proname"]: frozenset(r["array_agg"] or ()) for r in rows}


def check_args(arg_names: Mapping[str, frozenset[str]], fn: str, names: Iterable[str]) -> None:
    """Argument names against the function's signature (read once from pg_proc)."""
    known = arg_names.get(fn)
    if known is None:
        raise PgmemError(f"pgmem.{fn} does not exist (or is private): see docs/reference.md")
    unknown = sorted(set(names) - known)
    if unknown:
        raise PgmemError(f"pgmem.{fn} has no argument {', '.join(map(repr, unknown))}; "
                         f"its arguments are: {', '.join(sorted(known))}")


def connect_error(dsn: str, e: BaseException) -> PgmemError:
    """One clear error for a connection that failed: the server's refusal mapped by SQLSTATE
    (a wrong password is 28P01), else :class:`ServerUnavailable` naming the address (never the
    password) and what to check."""
    state = getattr(e, "sqlstate", None)
    if state and state[:2] not in ("08", "57"):
        mapped = from_database(e)
        if isinstance(mapped, PgmemError):
            return mapped
    from .db import connect_failure

    return ServerUnavailable(connect_failure(dsn, e))  # one line naming the fix (issue 34)


def mapped_error(e: BaseException) -> BaseException:
    """The client exception for a psycopg error (pgmem.errors.from_database); a lost
    connection without a SQLSTATE becomes ServerUnavailable."""
    mapped = from_database(e)
    if mapped is e and isinstance(e, psycopg.OperationalError):
        text = str(e).strip()
        return ServerUnavailable(f"the database connection failed: {text.splitlines()[-1] if text else type(e).__name__}"
                                 ": is PostgreSQL running? check PGMEM_DSN")
    return mapped


def _pool_timeout() -> type[BaseException]:
    from psycopg_pool import PoolTimeout

    return PoolTimeout


def _probe_timeout(timeout: float) -> int:
    return max(2, min(5, int(timeout)))


def register_vector_types(conn: psycopg.Connection) -> None:
    """Per-connection set-up: vector type adaptation (numpy arrays <-> vector)."""
    if getattr(conn, "_pgmem_configured", False):
        return
    try:
        from pgvector.psycopg import register_vector

        register_vector(conn)
    except Exception as e:  # pgmem not installed in this database
        raise PgmemError(f"the database has no vector type: run 'pgmem migrate' first ({e})") from None
    conn._pgmem_configured = True  # type: ignore[attr-defined]  # a mark on psycopg's object: set up once


async def aregister_vector_types(conn: psycopg.AsyncConnection) -> None:
    """register_vector_types for an async connection."""
    if getattr(conn, "_pgmem_configured", False):
        return
    try:
        from pgvector.psycopg import register_vector_async

        await register_vector_async(conn)
    except Exception as e:
        raise PgmemError(f"the database has no vector type: run 'pgmem migrate' first ({e})") from None
    conn._pgmem_configured = True  # type: ignore[attr-defined]  # a mark on psycopg's object: set up once


# ------------------------------------------------------------------------------ the core
class Transport:
    """What both clients share: plans to operations, and the session a connection gets.
    The client sets these attributes (pgmem.client._Base.__init__)."""

    dsn: str
    read_dsn: str | None
    read_your_writes: bool
    tenant: str
    tenant_claim: str | None
    statement_timeout_ms: int | None
    idle_in_transaction_ms: int | None
    retries: int
    timeout: float
    min_size: int
    max_size: int
    _arg_names: dict[str, frozenset[str]] | None = None

    # the session ---------------------------------------------------------------------
    def _connect_kwargs(self) -> dict[str, Any]:
        # nothing of the tenant goes into libpq's options (a value there is parsed as more
        # options): it is set with set_config() once connected (_session_sql)
        return {"connect_timeout": int(self.timeout)}

    def _session_sql(self, read: bool = False) -> tuple[str, tuple[str, ...]]:
        """The statement that gives a connection this client's tenant (or claim) and limits."""
        q = "select set_config('pgmem.tenant', %s, false), set_config('pgmem.tenant_claim', %s, false)"
        params: tuple[str, ...] = ("" if self.tenant_claim else self.tenant, self.tenant_claim or "")
        if self.read_your_writes and not read:
            q += ", set_config('synchronous_commit', 'remote_apply', false)"
        for name, v in (("statement_timeout", self.statement_timeout_ms),
                        ("idle_in_transaction_session_timeout", self.idle_in_transaction_ms)):
            if v is not None:
                q += f", set_config('{name}', %s, false)"
                params += (str(int(v)),)
        return q, params

    def _session_key(self) -> tuple[Any, ...]:
        return (self.tenant, self.tenant_claim, self.statement_timeout_ms, self.idle_in_transaction_ms)

    def _on_replica(self, fn: str, params: Mapping[str, Any], conn: Any) -> bool:
        """Whether this call goes to read_dsn: a read-only call, no caller's connection given."""
        if self.read_dsn is None or conn is not None or fn not in READ_ONLY_CALLS:
            return False
        return not ((fn == "search" and params.get("touch")) or (fn == "activate" and params.get("query_id")))

    # plans to operations -------------------------------------------------------------
    def _plan_ops(self, plan: Plan[R]) -> Ops[R]:
        """The operations of a plan; its result is the method's."""
        if isinstance(plan, Call):
            return (yield from self._call_ops(plan, plan.conn, plan.replica))
        steps, conn = plan.steps, plan.conn
        result: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = steps.throw(error) if error is not None else steps.send(result)
            except StopIteration as stop:
                return stop.value
            result = error = None
            try:
                if isinstance(step, Call):
                    result = yield from self._call_ops(step, conn, plan.replica and step.replica)
                elif isinstance(step, Start):
                    result = yield Spawn(self._call_ops(step.call, conn, plan.replica and step.call.replica))
                elif isinstance(step, Join):
                    result = yield step
                else:
                    raise TypeError(f"a pipeline yields Call, Start or Join, not {step!r}")
            except Exception as e:  # raised where the pipeline yielded: it may handle it
                error = e

    def _call_ops(self, call: Call[R], conn: Any, replica: bool) -> Ops[R]:
        """One SQL call: its statement, its arguments checked against the catalog, its rows."""
        sql, params = call_sql(call.fn, {k: v for k, v in call.args.items() if v is not None}, setof=call.setof)
        read = replica and self._on_replica(call.fn, params, conn)
        if self._arg_names is None:  # the catalog is the same on a replica: read where the call goes
            self._arg_names = arg_names_of((yield from self._rows_ops(ARG_NAMES_SQL, {}, conn, read)))
        check_args(self._arg_names, call.fn, params)
        token = telemetry.call_started(call.fn)  # a span and the server's histogram (issue 34)
        try:
            rows = yield from self._rows_ops(sql, params, conn, read)
        except BaseException as e:
            telemetry.call_ended(token, e)
            raise
        telemetry.call_ended(token, None)
        return call.post(rows)

    def _rows_ops(self, sql: str, params: Mapping[str, Any], conn: Any = None, read: bool = False) -> Ops[Rows]:
        """One statement, retried with backoff after a dropped connection or a serialisation
        failure (only on the client's own pooled connections: the caller's transaction is
        theirs to retry); every error raised as its pgmem.errors class."""
        attempt = 0
        while True:
            try:
                rows: Rows = yield Execute(sql, params, conn, read)
                return rows
            except psycopg.OperationalError as e:
                state = getattr(e, "sqlstate", None)
                if conn is not None or attempt >= self.retries or (state and state not in RETRYABLE_SQLSTATES):
                    raise mapped_error(e) from e
                attempt += 1
                delay = min(2.0, 0.05 * 2 ** attempt) * (0.5 + random.random())
                log.warning("retrying after %s (attempt %d/%d, sleeping %.2fs)", type(e).__name__, attempt,
                            self.retries, delay)
                yield Sleep(delay)
            except psycopg.Error as e:
                # every SQLSTATE its class (pgmem.errors): 22023 -> InvalidInput, P0002 -> NotFound, ...
                raise mapped_error(e) from e
            except _pool_timeout() as e:
                raise ServerUnavailable(f"no database connection within {self.timeout:g}s (pool of {self.max_size}): "
                                        "is PostgreSQL running and accepting connections? check PGMEM_DSN") from e


# ------------------------------------------------------------------------------ drivers
class SyncTransport(Transport):
    """The blocking driver: psycopg's ConnectionPool (and the replica's), a thread for Spawn."""

    _pool: Any = None
    _read_pool: Any = None

    def _drive(self, ops: Ops[R]) -> R:
        threads: ThreadPoolExecutor | None = None
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    op = ops.throw(error) if error is not None else ops.send(value)
                except StopIteration as stop:
                    return stop.value
                value = error = None
                try:
                    if isinstance(op, Execute):
                        value = self._execute(op)
                    elif isinstance(op, Sleep):
                        time.sleep(op.seconds)
                    elif isinstance(op, Spawn):
                        threads = threads or ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgmem-call")
                        value = threads.submit(self._drive, op.ops)
                    else:
                        value = op.handle.result()
                except Exception as e:
                    error = e
        finally:
            if threads is not None:
                threads.shutdown(wait=True)

    def _rows(self, sql: str, params: Mapping[str, Any], conn: Any = None, *, read: bool = False) -> Rows:
        """The rows of one statement (retried and mapped as every call's)."""
        return self._drive(self._rows_ops(sql, params, conn, read))

    def _execute(self, op: Execute) -> Rows:
        with self.connection(op.conn, read=op.read) as c:
            with c.cursor(row_factory=dict_row) as cur:
                cur.execute(op.sql, op.params)
                return cur.fetchall() if cur.description else []

    @property
    def pool(self) -> Any:
        if self._pool is None:
            from psycopg_pool import ConnectionPool

            self._probe(self.dsn)
            self._pool = ConnectionPool(self.dsn, min_size=self.min_size, max_size=self.max_size,
                                        kwargs={"autocommit": True, **self._connect_kwargs()},
                                        configure=self._configure, timeout=self.timeout, open=True)
        return self._pool

    @property
    def read_pool(self) -> Any:
        """The pool of the replica (read_dsn) for read-only calls; the primary's without one."""
        if self.read_dsn is None:
            return self.pool
        if self._read_pool is None:
            from psycopg_pool import ConnectionPool

            self._probe(self.read_dsn)
            self._read_pool = ConnectionPool(self.read_dsn, min_size=self.min_size, max_size=self.max_size,
                                             kwargs={"autocommit": True, **self._connect_kwargs()},
                                             configure=lambda c: self._configure(c, read=True), timeout=self.timeout,
                                             open=True)
        return self._read_pool

    def _probe(self, dsn: str) -> None:
        """Connect once before a pool is made, so that a server that is down, or a wrong
        password, is an error at once (at most 5 s), not a pool's retries until its timeout."""
        from .db import require_pgmem

        try:
            conn = psycopg.connect(dsn, connect_timeout=_probe_timeout(self.timeout), autocommit=True)
        except psycopg.Error as e:
            raise connect_error(dsn, e) from None
        with conn:  # a database without pgmem: one line now, not the pool's retries (issue 34)
            require_pgmem(conn, dsn)

    def _configure(self, conn: psycopg.Connection, read: bool = False) -> None:
        """Per connection: vector types, then this client's tenant (or claim) and limits."""
        register_vector_types(conn)
        if getattr(conn, "_pgmem_session", None) != self._session_key():
            q, params = self._session_sql(read)
            with conn.transaction() if not conn.autocommit else nullcontext():
                conn.execute(q, params)
            conn._pgmem_session = self._session_key()  # type: ignore[attr-defined]  # a mark on psycopg's object

    @contextmanager
    def connection(self, conn: psycopg.Connection | None = None, *, read: bool = False) -> Iterator[psycopg.Connection]:
        """The caller's connection (tenant set on it) or one from the pool (the replica's when
        ``read`` and the client has a read_dsn)."""
        if conn is not None:
            register_vector_types(conn)
            conn.execute(*self._session_sql())
            yield conn
            return
        with (self.read_pool if read else self.pool).connection() as c:
            self._configure(c, read=read and self.read_dsn is not None)  # a claim replaced since the connection was made
            yield c

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._read_pool is not None:
            self._read_pool.close()
            self._read_pool = None


class AsyncTransport(Transport):
    """The asyncio driver: psycopg's AsyncConnectionPool (and the replica's). A Spawn runs at
    once (embedding runs on the event loop's thread: there is nothing to overlap with)."""

    _pool: Any = None
    _read_pool: Any = None

    async def _drive(self, ops: Ops[R]) -> R:
        import asyncio

        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                op = ops.throw(error) if error is not None else ops.send(value)
            except StopIteration as stop:
                return stop.value
            value = error = None
            try:
                if isinstance(op, Execute):
                    value = await self._execute(op)
                elif isinstance(op, Sleep):
                    await asyncio.sleep(op.seconds)
                elif isinstance(op, Spawn):
                    try:
                        value = _Done(await self._drive(op.ops))
                    except Exception as e:
                        value = _Done(error=e)
                else:
                    value = op.handle.result()
            except Exception as e:
                error = e

    async def _rows(self, sql: str, params: Mapping[str, Any], conn: Any = None, *, read: bool = False) -> Rows:
        """The rows of one statement (retried and mapped as every call's)."""
        return await self._drive(self._rows_ops(sql, params, conn, read))

    async def _execute(self, op: Execute) -> Rows:
        if op.conn is not None:
            await aregister_vector_types(op.conn)
            await op.conn.execute(*self._session_sql())
            async with op.conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(op.sql, op.params)
                return await cur.fetchall() if cur.description else []
        pool = await (self._get_read_pool() if op.read else self._get_pool())
        async with pool.connection() as c:
            await self._aconfigure(c, read=op.read and self.read_dsn is not None)  # a claim replaced since it was made
            async with c.cursor(row_factory=dict_row) as cur:
                await cur.execute(op.sql, op.params)
                return await cur.fetchall() if cur.description else []

    async def _probe(self, dsn: str) -> None:
        try:
            c = await psycopg.AsyncConnection.connect(dsn, connect_timeout=_probe_timeout(self.timeout),
                                                      autocommit=True)
        except psycopg.Error as e:
            raise connect_error(dsn, e) from None
        try:  # a database without pgmem: one line now, not the pool's retries (issue 34)
            cur = await c.execute("select to_regnamespace('pgmem') is not null and to_regtype('vector') is not null")
            installed = (await cur.fetchone() or (False,))[0]
        finally:
            await c.close()
        if not installed:
            from .db import not_installed

            raise not_installed(dsn)

    async def _get_pool(self) -> Any:
        if self._pool is None:
            from psycopg_pool import AsyncConnectionPool

            await self._probe(self.dsn)
            self._pool = AsyncConnectionPool(self.dsn, min_size=self.min_size, max_size=self.max_size,
                                             kwargs={"autocommit": True, **self._connect_kwargs()},
                                             configure=self._aconfigure, timeout=self.timeout, open=False)
            await self._pool.open()
        return self._pool

    async def _get_read_pool(self) -> Any:
        if self.read_dsn is None:
            return await self._get_pool()
        if self._read_pool is None:
            from psycopg_pool import AsyncConnectionPool

            await self._probe(self.read_dsn)

            async def configure(conn: psycopg.AsyncConnection) -> None:
                await self._aconfigure(conn, read=True)

            self._read_pool = AsyncConnectionPool(self.read_dsn, min_size=self.min_size, max_size=self.max_size,
                                                  kwargs={"autocommit": True, **self._connect_kwargs()},
                                                  configure=configure, timeout=self.timeout, open=False)
            await self._read_pool.open()
        return self._read_pool

    async def _aconfigure(self, conn: psycopg.AsyncConnection, read: bool = False) -> None:
        await aregister_vector_types(conn)
        if getattr(conn, "_pgmem_session", None) != self._session_key():
            await conn.execute(*self._session_sql(read))
            conn._pgmem_session = self._session_key()  # type: ignore[attr-defined]  # a mark on psycopg's object

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if self._read_pool is not None:
            await self._read_pool.close()
            self._read_pool = None


__all__ = ["Call", "Pipeline", "Start", "Join", "Plan", "Transport", "SyncTransport", "AsyncTransport",
           "READ_ONLY_CALLS", "RETRYABLE_SQLSTATES", "ARG_NAMES_SQL", "call_sql", "check_args", "connect_error",
           "mapped_error"]
