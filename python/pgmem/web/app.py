"""The ASGI app of ``pgmem serve`` (FastAPI): Shadow's four endpoints, a REST route per SQL
function, chat, the MCP server and the explorer page.

Every route binds the request's tenant (:mod:`.auth`), validates the body's shape (pydantic)
and calls one SQL function through the client, on a pooled connection; the database is the
engine. Routes are plain functions, which FastAPI runs in its thread pool: embedding, the
extractor, the LLM and the database never block the event loop, so one tenant's call never
stalls another's. Exceptions:

- ``POST /api/chat``: prepares (``memory_context``, ``context_for``), calls the LLM and
  persists (``observe_reply``, ``touch``): :mod:`.chat`;
- a token bound to a user reads a memory before forgetting, restoring or showing it
  (``get_memory``), and a conversation before using it (``conversation_state``), to refuse
  another user's (as the MCP server does).
"""
# No `from __future__ import annotations`: FastAPI reads the routes' annotations, which name
# classes defined inside build_app, so they must be objects.

import json
import logging
import uuid
from contextlib import asynccontextmanager, contextmanager
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

log = logging.getLogger("pgmem.web")

STATIC_DIR = Path(__file__).resolve().parent / "static"
MAX_QUERY = 4000
# an id (user, conversation, session) has no control characters and no bidirectional overrides
# or isolates, which would make one id print as another (issue 35, L8)
ID_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]+$"


# ------------------------------------------------------------------------------ JSON
def plain(value: Any) -> Any:
    """A JSON-safe copy of what the database returned (vectors and tsvectors dropped)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k not in ("embedding", "tsv", "centroid", "topic_vector")}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "tolist"):
        return None  # a vector
    return str(value)


# ------------------------------------------------------------------------------ the database
class Session:
    """A client bound to one request's principal, on one pooled connection."""

    def __init__(self, db: "Database", client, conn):
        self.db, self.client, self.conn = db, client, conn
        self.tenant = client.tenant

    def embed(self, text: str):
        return self.db.embedder.embed(text) if self.db.embedder is not None and text else None

    def rows(self, fn: str, **args) -> list[dict]:
        return self.client.call(fn, conn=self.conn, **args)

    def scalar(self, fn: str, **args) -> Any:
        rows = self.rows(fn, **args)
        return rows[0][fn] if rows else None

    def stored_api_key(self, provider: str = "openai") -> str | None:
        """The tenant's stored key (pgmem._api_key: administrators' logins only), or None."""
        import psycopg

        if self.db.keys_readable is False:
            return None
        try:
            with self.client.connection(self.conn) as c:
                key = c.execute("select pgmem._api_key(%s)", (provider,)).fetchone()[0]
            self.db.keys_readable = True
            return key
        except psycopg.errors.InsufficientPrivilege:
            log.warning("this server's database login may not read stored API keys (pgmem._api_key): "
                        "chat uses OPENAI_API_KEY or the request's apiKey")
            self.db.keys_readable = False
            return None


class Database:
    """One connection pool for every tenant; a request's tenant (or claim) is set on the
    connection by the client before each call (``pgmem.tenant``, ``pgmem.tenant_claim``)."""

    def __init__(self, dsn: str | None, *, embedder: Any = None, extractor: Any = None, pool_size: int = 10):
        from ..db import check_dsn, resolve_dsn
        from ..layered import LayeredLLM

        self.dsn = check_dsn(resolve_dsn(dsn))
        self.embedder = embedder
        self.extractor = extractor
        self.layered_llm = LayeredLLM.from_env()
        self.pool_size = pool_size
        self.pool: "ConnectionPool | None" = None
        self.arg_names: dict | None = None
        self.keys_readable: bool | None = None

    def open(self) -> "ConnectionPool":
        from psycopg_pool import ConnectionPool

        from ..client import MemoryClient
        from ..db import connect_timeout

        pool = self.pool
        if pool is None:
            pool = ConnectionPool(self.dsn, min_size=1, max_size=self.pool_size, open=False, timeout=30,
                                  kwargs={"autocommit": True, "connect_timeout": connect_timeout()})
            pool.open(wait=True, timeout=30)
            self.pool = pool
        with pool.connection() as c:
            from psycopg.rows import dict_row

            cur = c.cursor(row_factory=dict_row)
            self.arg_names = {r["proname"]: frozenset(r["array_agg"] or ())
                              for r in cur.execute(MemoryClient._ARG_NAMES_SQL).fetchall()}
        return pool

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def client(self, p):
        from ..client import MemoryClient

        c = MemoryClient(self.dsn, tenant=None if p.claim else p.tenant, tenant_claim=p.claim,
                         embedder=self.embedder if self.embedder is not None else None, extractor=self.extractor)
        c._arg_names = self.arg_names  # read once at start (the catalog of pgmem's functions)
        c.llm = self.layered_llm
        return c

    @contextmanager
    def session(self, p) -> Iterator[Session]:
        pool = self.pool if self.pool is not None else self.open()
        with pool.connection() as conn:
            yield Session(self, self.client(p), conn)


# ------------------------------------------------------------------------------ limits
class BodyLimit:
    """ASGI middleware: request bodies over ``max_bytes`` are answered 413 (by Content-Length
    before reading, or as soon as a chunked body passes the limit)."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for k, v in scope.get("headers", []):
            if k == b"content-length":
                try:
                    too_big = int(v) > self.max_bytes
                except ValueError:
                    too_big = True
                if too_big:
                    return await self._refuse(send)
        seen = 0
        refused = False

        async def limited_receive():
            # past the limit: answer 413 now, and tell the app the client has gone (FastAPI would
            # turn an exception raised here into its own 400)
            nonlocal seen, refused
            msg = await receive()
            if msg["type"] == "http.request" and not refused:
                seen += len(msg.get("body", b""))
                if seen > self.max_bytes:
                    refused = True
                    await self._refuse(send)
                    return {"type": "http.disconnect"}
            return msg

        async def guarded_send(msg):
            if not refused:
                await send(msg)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not refused:
                raise

    async def _refuse(self, send):
        body = json.dumps({"error": "payload_too_large",
                           "message": f"request bodies are limited to {self.max_bytes} bytes "
                                      "(pgmem serve --max-body-bytes, PGMEM_WEB_MAX_BODY_BYTES)"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class SecurityHeaders:
    """nosniff, no referrer, no framing by other sites; API answers are not cached."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        api = scope.get("path", "").startswith("/api/")

        async def with_headers(msg):
            if msg["type"] == "http.response.start":
                headers = list(msg.get("headers", []))
                headers += [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                            (b"content-security-policy", b"frame-ancestors 'self'")]
                if api:
                    headers.append((b"cache-control", b"no-store"))
                msg = {**msg, "headers": headers}
            await send(msg)

        await self.app(scope, receive, with_headers)


# ------------------------------------------------------------------------------ chat's bounds
class TooBusy(Exception):
    """Answered 429: too many chats at once for this token or tenant."""


class ChatSlots:
    """Concurrent chats per token (principal) and per tenant (issue 35, H1): a chat holds its
    slot from the request until its reply is stored or its client has gone."""

    def __init__(self, per_token: int, per_tenant: int):
        import threading

        self.per_token, self.per_tenant = per_token, per_tenant
        self._lock = threading.Lock()
        self._tokens: dict[Any, int] = {}
        self._tenants: dict[str, int] = {}

    def acquire(self, p) -> "Callable[[], None]":
        token = (p.tenant, p.user, p.claim, p.token_id)
        with self._lock:
            if self._tokens.get(token, 0) >= self.per_token:
                raise TooBusy(f"this token already has {self.per_token} chats running: wait for one to finish")
            if self._tenants.get(p.tenant, 0) >= self.per_tenant:
                raise TooBusy(f"tenant {p.tenant!r} already has {self.per_tenant} chats running: wait for one to finish")
            self._tokens[token] = self._tokens.get(token, 0) + 1
            self._tenants[p.tenant] = self._tenants.get(p.tenant, 0) + 1
        done = False

        def release() -> None:
            nonlocal done
            with self._lock:
                if done:
                    return
                done = True
                self._tokens[token] -= 1
                self._tenants[p.tenant] -= 1
                if self._tokens[token] <= 0:
                    del self._tokens[token]
                if self._tenants[p.tenant] <= 0:
                    del self._tenants[p.tenant]
        return release

    def running(self, tenant: str) -> int:
        with self._lock:
            return self._tenants.get(tenant, 0)


def chat_stream_response(body: Iterator[str], upstream, limiter, release, headers: dict):
    """A StreamingResponse for a chat's SSE body that (1) pulls each part in chat's own thread
    limiter, not the routes' pool, (2) listens for the client's disconnect whatever the ASGI
    version and then aborts the upstream LLM call at once, and (3) closes the body (and with it
    the LLM's connection) and frees the chat's slot when it ends, however it ends."""
    import anyio
    from starlette.responses import StreamingResponse

    sentinel = object()

    def pull():
        return next(body, sentinel)

    async def parts():
        while True:
            part = await anyio.to_thread.run_sync(pull, limiter=limiter)
            if part is sentinel:
                return
            yield part

    class ChatStream(StreamingResponse):
        async def __call__(self, scope, receive, send):
            try:
                async with anyio.create_task_group() as tg:
                    async def stream():
                        try:
                            await self.stream_response(send)
                        except OSError:
                            upstream.abort("client gone")
                        tg.cancel_scope.cancel()

                    async def listen():
                        await self.listen_for_disconnect(receive)
                        upstream.abort("client gone")
                        tg.cancel_scope.cancel()

                    tg.start_soon(stream)
                    tg.start_soon(listen)
            finally:
                upstream.abort("client gone")  # a no-op when the reply is complete
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(getattr(body, "close", lambda: None), limiter=limiter)
                release()

    return ChatStream(parts(), media_type="text/event-stream", headers=headers)


# ------------------------------------------------------------------------------ the app
def build_app(dsn: str | None = None, *, token_file: Path | None = None, embed: bool = True, embedder: Any = None,
              extractor: Any = None, hooks=None, model=None, cors_origins: list[str] | None = None,
              max_body_bytes: int | None = None, mcp: bool = True, host: str = "127.0.0.1", port: int | None = None,
              pool_size: int = 10, chats_per_token: int = 2, chats_per_tenant: int = 4, chat_threads: int = 8):
    """The app. ``dsn``: PGMEM_DSN or the embedded cluster. ``token_file``: the bearer tokens
    (default PGMEM_MCP_TOKENS, else .pgmem/mcp-tokens.json). ``embedder``: an Embedder to share
    (default: all-MiniLM-L6-v2 when ``embed``). ``hooks``: :class:`pgmem.web.chat.Hooks`.
    ``model``: the chat model (default :meth:`ChatModel.from_env`). ``cors_origins``: none by
    default (CORS off). ``mcp``: mount the MCP server at /mcp (tokens made later work at once).
    ``chats_per_token``, ``chats_per_tenant``: concurrent chats (more are answered 429);
    ``chat_threads``: the threads chats run in, apart from the routes' pool, so that chats
    waiting on a slow LLM never hold another tenant's request (issue 35, H1)."""
    from fastapi import Depends, FastAPI, Path as PathParam, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.middleware.cors import CORSMiddleware
    from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
    from fastapi.staticfiles import StaticFiles
    from pydantic import BaseModel, Field

    import psycopg

    from .. import __version__
    from ..config import web_settings
    from ..errors import InvalidInput, NotFound, PgmemError, TenantError
    from ..mcp_server import default_token_file
    from . import expected_revision
    from .auth import UNAUTHORIZED_BODY, Authenticator, Principal, Unauthorized, describe
    from .chat import ChatPipeline, HookError, Hooks, stream_turn
    from .llm import ChatModel, LLMError

    settings = web_settings()
    if cors_origins is None:
        cors_origins = settings["cors_origins"]
    max_body_bytes = max_body_bytes or int(settings["max_body_bytes"])
    token_file = Path(token_file) if token_file else default_token_file()
    auth = Authenticator(token_file)
    if embedder is None and embed:
        import importlib.util

        if importlib.util.find_spec("sentence_transformers") is None:
            log.warning("no local embeddings (pip install 'pgmem-agent[embed]'): lexical search; the worker embeds later")
        else:
            from ..embedding import Embedder

            embedder = Embedder()
    db = Database(dsn, embedder=embedder, extractor=extractor, pool_size=pool_size)
    hooks = hooks if hooks is not None else Hooks()
    pipeline = ChatPipeline(hooks)
    import anyio

    chat_slots = ChatSlots(chats_per_token, chats_per_tenant)
    chat_limiter = anyio.CapacityLimiter(chat_threads)
    base_model = model or ChatModel.from_env()
    head = expected_revision()

    mcp_server = None
    mcp_tools = None
    import importlib.util

    if mcp and importlib.util.find_spec("mcp") is None:
        if auth.token_count:
            log.warning("MCP not mounted: the MCP SDK is not installed (pip install 'pgmem-agent[mcp]')")
    elif mcp:
        # mounted even before the first token is made: the token file is read again when it
        # changes, so a token made after start works at once (issue 34, item 3)
        from ..mcp_server import MemoryTools, TokenStore, build_server

        mcp_tools = MemoryTools(db.dsn, embed=embedder is not None, extractor=extractor)
        mcp_tools._embedder = embedder  # one model in memory for both
        base = f"http://{host}:{port}" if port else None
        mcp_server = build_server(mcp_tools, tokens=TokenStore(token_file), base_url=base, require_tokens=False)
        mcp_app = mcp_server.streamable_http_app(streamable_http_path="/mcp", host=host)
        if not auth.token_count:
            log.warning("%s has no tokens yet: make one with 'pgmem mcp --new-token --tenant T' (no restart needed)",
                        token_file)

    @asynccontextmanager
    async def lifespan(app):
        from starlette.concurrency import run_in_threadpool

        # (hasattr on the class: on the instance it would load the model here, on the event loop)
        if embedder is not None and hasattr(type(embedder), "model"):
            await run_in_threadpool(lambda: embedder.model)  # load the model before the first request
        await run_in_threadpool(db.open)
        try:
            if mcp_server is not None:
                async with mcp_server.session_manager.run():
                    yield
            else:
                yield
        finally:
            await run_in_threadpool(db.close)
            if mcp_tools is not None:
                await mcp_tools.close()

    app = FastAPI(title="pgmem", version=__version__, lifespan=lifespan,
                  description="Long-term memory for LLM agents that lives inside PostgreSQL: Shadow's chat API, a REST "
                              "route per SQL function, and the memory explorer. Every route needs "
                              "`Authorization: Bearer <token>` (pgmem mcp --new-token) or a signed tenant claim.")
    app.state.db, app.state.auth, app.state.hooks, app.state.pipeline = db, auth, hooks, pipeline
    app.state.mcp_mounted = mcp_server is not None
    app.add_middleware(SecurityHeaders)
    if cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["Authorization", "Content-Type", "Accept"])
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    from .metrics import mount_metrics  # issue 34: /metrics, /livez, request metrics and spans (outermost)

    mount_metrics(app, db)

    # -------------------------------------------------------------- errors
    def error(status: int, code: str, message: str, **more) -> JSONResponse:
        return JSONResponse({"error": code, "message": message, **{k: v for k, v in more.items() if v}}, status_code=status)

    def unauthorized() -> JSONResponse:
        return JSONResponse(UNAUTHORIZED_BODY, status_code=401, headers={"WWW-Authenticate": 'Bearer realm="pgmem"'})

    class Forbidden(Exception):
        pass

    @app.exception_handler(Unauthorized)
    def _unauthorized(request, exc):
        return unauthorized()

    @app.exception_handler(Forbidden)
    def _forbidden(request, exc):
        return error(403, "forbidden", str(exc))

    @app.exception_handler(NotFound)
    def _not_found(request, exc):
        return error(404, "not_found", exc.message, hint=exc.hint)

    @app.exception_handler(InvalidInput)
    def _invalid(request, exc):
        return error(422, "invalid_input", exc.message, hint=exc.hint)

    @app.exception_handler(TenantError)
    def _tenant(request, exc):
        # the database's words name the login: the caller learns only what it may not do
        log.warning("tenant refused: %s", exc)
        return error(403, "forbidden", "this server may not act for your tenant: an administrator grants its database "
                                       "login the tenant (pgmem.grant_tenant; SECURITY.md)")

    @app.exception_handler(LLMError)
    def _llm(request, exc):
        return error(502, "llm_unavailable", str(exc))

    @app.exception_handler(TooBusy)
    def _busy(request, exc):
        return JSONResponse({"error": "too_many_chats", "message": str(exc)}, status_code=429,
                            headers={"Retry-After": "5"})

    @app.exception_handler(HookError)
    def _hook(request, exc):
        return error(500, "hook_failed", str(exc))

    def _safe_text(v: Any) -> str:
        # a lone surrogate or a NUL in the request must not break the answer that names it
        return str(v).encode("utf-8", "replace").decode("utf-8").replace("\x00", "\\0")

    @app.exception_handler(RequestValidationError)
    def _validation(request, exc):
        # loc, msg and type only: the rejected input itself may be NaN, a lone surrogate or
        # megabytes, none of which belongs in the answer (issue 35, L2)
        detail = [{"loc": [_safe_text(x) for x in e.get("loc", ())], "msg": _safe_text(e.get("msg", "")),
                   "type": _safe_text(e.get("type", ""))} for e in exc.errors()]
        return JSONResponse({"error": "invalid_request", "message": "the request does not have the expected shape"
                             + (f": {detail[0]['msg']} at {'.'.join(detail[0]['loc'])}" if detail else ""),
                             "detail": detail}, status_code=422)

    def _bad_value(message: str) -> JSONResponse:
        return error(422, "invalid_input", message,
                     hint="send text without NUL characters or lone surrogates, and finite numbers")

    @app.exception_handler(UnicodeError)
    def _unicode(request, exc):
        return _bad_value("the request holds text that is not valid Unicode (a lone surrogate)")

    @app.exception_handler(psycopg.Error)
    def _database(request, exc):
        if getattr(exc, "sqlstate", None) == "28000":  # a claim the database refused: no detail
            log.info("claim refused: %s", getattr(getattr(exc, "diag", None), "message_primary", exc))
            return unauthorized()
        if isinstance(exc, psycopg.DataError) and getattr(exc, "sqlstate", None) is None:
            # refused by the driver before it reached the database: a NUL in a text value
            return _bad_value(f"a value cannot be stored: {_safe_text(exc)}")
        if (getattr(exc, "sqlstate", None) or "").startswith("22"):  # a data exception: about the input
            diag = getattr(exc, "diag", None)
            return _bad_value(f"a value was refused: {_safe_text(getattr(diag, 'message_primary', None) or exc)}")
        ref = uuid.uuid4().hex[:8]
        log.error("database error %s on %s %s: %s", ref, request.method, request.url.path, exc)
        return error(500, "internal", f"the request failed (reference {ref} in the server's log)")

    @app.exception_handler(PgmemError)
    def _pgmem(request, exc):
        from ..errors import SetupError

        if isinstance(exc, SetupError):
            ref = uuid.uuid4().hex[:8]
            log.error("setup error %s: %s", ref, exc)
            return error(503, "unavailable", f"the server cannot reach its database (reference {ref} in its log)")
        if getattr(exc, "sqlstate", None) == "28000":  # a claim the database refused (ClaimError): no detail
            log.info("claim refused: %s", exc)
            return unauthorized()
        return error(400, "bad_request", str(exc))

    @app.exception_handler(Exception)
    def _any(request, exc):
        ref = uuid.uuid4().hex[:8]
        log.exception("unexpected error %s on %s %s", ref, request.method, request.url.path)
        return error(500, "internal", f"the request failed (reference {ref} in the server's log)")

    # -------------------------------------------------------------- who calls
    bearer = HTTPBearer(auto_error=False, description="a token of `pgmem mcp --new-token`, or a signed tenant claim")

    def principal(request: Request, _creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Principal:
        return auth.principal(request.headers.get("authorization"))

    def user_for(p: Principal, requested: str | None) -> str | None:
        """A token bound to a user acts for that user only; otherwise the request names one."""
        if p.user is None:
            return requested
        if requested not in (None, "", p.user):
            raise Forbidden(f'this token acts for user "{p.user}" only')
        return p.user

    def tenant_wide(p: Principal, what: str) -> None:
        """Routes that read or change the whole tenant (its LLM key, jobs, statistics, clusters,
        map) are for tokens of the whole tenant: a token bound to a user gets 403 (issue 35, M4)."""
        if p.user is not None:
            raise Forbidden(f'{what} belongs to the whole tenant: this token acts for user "{p.user}" only '
                            "(use a token made without --user)")

    def scoped(p: Principal, filters: dict | None) -> dict | None:
        f = dict(filters or {})
        if p.user is not None:
            if f.get("user_id") not in (None, p.user):
                raise Forbidden(f'this token acts for user "{p.user}" only')
            f["user_id"] = p.user
        return f or None

    def own(s: Session, p: Principal, memory_id: int) -> dict:
        m = s.client.get(memory_id, conn=s.conn)
        if m is None or (p.user is not None and m.get("user_id") != p.user):
            raise NotFound(f"memory {memory_id} does not exist" + (f' for user "{p.user}"' if p.user else ""),
                           hint="search first: each result carries its id")
        return m

    def own_conversation(s: Session, p: Principal, conversation_id: str, *, must_exist: bool = False) -> None:
        """A token bound to a user may use its user's conversations (and start new ones) only:
        another user's history must not reach its prompts or its screen."""
        if p.user is None:
            return
        state = s.scalar("conversation_state", conversation_id=conversation_id)
        if (state is None and must_exist) or (state is not None and state.get("user_id") not in (None, p.user)):
            raise NotFound(f'conversation {conversation_id!r} does not exist for user "{p.user}"',
                           hint="use a conversation id of your own (any new id starts one)")

    def ok(value: Any) -> JSONResponse:
        return JSONResponse(plain(value))

    # -------------------------------------------------------------- bodies
    Text = Field(min_length=1, max_length=MAX_QUERY)
    Name = Field(default=None, min_length=1, max_length=200, pattern=ID_PATTERN)

    class ChatBody(BaseModel):
        message: str = Field(min_length=1, max_length=MAX_QUERY, description="the user's message")
        conversation_id: str | None = Field(default=None, min_length=1, max_length=200, pattern=ID_PATTERN,
                                            description="any stable id of the conversation (a new one when left out)")
        user_id: str | None = Name
        apiKey: str | None = Field(default=None, min_length=8, max_length=512,
                                   description="an API key for this call only (never stored or logged)")
        stream: bool = Field(default=False, description="stream the layered protocol over SSE")
        context_type: Literal["conversation", "query", "task", "document", "mixed"] = "conversation"

    class ApiKeyBody(BaseModel):
        apiKey: str = Field(min_length=1, max_length=512)
        provider: str = Field(default="openai", max_length=32)

    class RememberBody(BaseModel):
        content: str = Field(min_length=1, max_length=262144)
        who: str | None = None
        what: str | None = None
        when: datetime | None = None
        where: str | None = None
        why: str | None = None
        how: str | None = None
        category: str | None = Field(default=None, max_length=64)
        importance: float | None = Field(default=None, ge=0, le=1)
        metadata: dict[str, Any] | None = None
        session_id: str | None = Name
        user_id: str | None = Name
        extract: bool = Field(default=True, description="fill the 5W1H fields with the extractor")

    class SearchBody(BaseModel):
        query: str = Text
        k: int = Field(default=10, ge=1, le=100)
        explain: bool = Field(default=False, description="each signal's value, weight and contribution (explain_search)")
        filters: dict[str, Any] | None = None
        profile: str | None = Field(default=None, max_length=64)
        actor: str | None = Field(default=None, max_length=200)
        location: str | None = Field(default=None, max_length=500)
        as_of: datetime | None = None

    class ActivateBody(BaseModel):
        query: str = Text
        context_type: Literal["conversation", "query", "task", "document", "mixed"] = "conversation"
        k: int = Field(default=20, ge=1, le=100)
        threshold: float | None = Field(default=None, ge=0, le=1)
        filters: dict[str, Any] | None = None

    class RecallBody(BaseModel):
        query: str = Text
        k: int = Field(default=10, ge=1, le=100)
        filters: dict[str, Any] | None = None

    class ContextBody(BaseModel):
        query: str = Text
        token_budget: int | None = Field(default=1000, ge=0, le=1000000)
        candidates: int = Field(default=50, ge=1, le=500)
        filters: dict[str, Any] | None = None

    class ContextForBody(BaseModel):
        query: str = Text
        conversation_id: str = Field(min_length=1, max_length=200, pattern=ID_PATTERN)
        user_id: str | None = Name
        k: int | None = Field(default=None, ge=0, le=100)
        remember: bool = True

    class ReasonBody(BaseModel):
        reason: str | None = Field(default=None, max_length=2048)

    class InsightsBody(BaseModel):
        query: str | None = Field(default=None, max_length=MAX_QUERY)
        user_id: str | None = Name
        k: int = Field(default=10, ge=1, le=100)
        types: list[Literal["decision", "conclusion", "hypothesis", "open_question", "observation"]] | None = None

    class DocumentBody(BaseModel):
        title: str = Field(min_length=1, max_length=500)
        content: str = Field(min_length=1, max_length=4 * 1024 * 1024,
                             description="the document's text (split into chunks by pgmem.chunk_document)")
        source: str | None = Field(default=None, max_length=8192)
        user_id: str | None = Name
        metadata: dict[str, Any] | None = None
        max_tokens: int | None = Field(default=None, ge=16, le=8192, description="tokens per chunk")

    class DocumentSearchBody(BaseModel):
        query: str = Text
        k: int = Field(default=5, ge=1, le=50)
        user_id: str | None = Name

    class EraseBody(BaseModel):
        confirm: bool = Field(description="true: erase every tier of the user for good")

    class ProjectBody(BaseModel):
        method: Literal["pca", "tsne"] = "pca"
        max_points: int = Field(default=5000, ge=10, le=20000)

    # -------------------------------------------------------------- the page
    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    # -------------------------------------------------------------- Shadow's API
    def chat_model(s: Session, request_key: str | None) -> ChatModel:
        if request_key:
            return base_model.with_key(request_key)
        return base_model.with_key(s.stored_api_key())

    @app.post("/api/chat", tags=["shadow"], summary="Memory-augmented chat (layered pipeline + Shadow's memory context)")
    async def chat(body: ChatBody, request: Request, p: Principal = Depends(principal)):
        """Runs the layered pipeline for the message (pgmem.context_for), Shadow's activation
        (pgmem.memory_context), calls the LLM, stores both turns and records the memories used.
        `stream: true` (or `Accept: text/event-stream`) streams the layered protocol over SSE:
        `8:` stage annotations, `0:` tokens, the final `8:` annotation, `e:`/`d:` finish.
        Chats run in their own threads, a few at a time per token and per tenant (429 past
        that); the LLM call has a deadline and a reply-size cap, and is closed when the client
        disconnects."""
        from .llm import Upstream

        if not body.message.strip():
            raise InvalidInput("message is empty: it holds only whitespace", hint="send the user's words")
        if body.apiKey is not None and not all(33 <= ord(ch) <= 126 for ch in body.apiKey):
            raise InvalidInput("apiKey must be printable ASCII with no spaces or line breaks",
                               hint="paste the key alone, as the provider shows it")
        user = user_for(p, body.user_id)
        conversation = body.conversation_id or f"web-{uuid.uuid4().hex[:12]}"
        release = chat_slots.acquire(p)
        handed_off = False
        try:
            def prepare():
                with db.session(p) as s:
                    own_conversation(s, p, conversation)
                    llm = chat_model(s, body.apiKey)
                    llm.check_key()  # before anything is stored: a chat that cannot answer stores nothing
                    return llm, pipeline.prepare(s, body.message, conversation, user, body.context_type)

            llm, turn = await anyio.to_thread.run_sync(prepare, limiter=chat_limiter)
            upstream = Upstream()

            def finish(t):
                with db.session(p) as s2:
                    pipeline.finish(s2, t)

            if body.stream or "text/event-stream" in request.headers.get("accept", ""):
                handed_off = True
                return chat_stream_response(
                    stream_turn(turn, llm.stream(turn.messages, upstream), finish), upstream, chat_limiter, release,
                    {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "x-vercel-ai-data-stream": "v1"})
            got: list[Any] = []
            async with anyio.create_task_group() as tg:
                async def watch():  # the client went away: close the LLM's connection now
                    while (await request.receive())["type"] != "http.disconnect":
                        pass
                    upstream.abort("client gone")

                tg.start_soon(watch)
                try:
                    got.append(await anyio.to_thread.run_sync(llm.complete, turn.messages, upstream,
                                                              limiter=chat_limiter))
                except Exception as e:  # raised as itself, not in an ExceptionGroup
                    got.append(e)
                finally:
                    tg.cancel_scope.cancel()
            if isinstance(got[0], BaseException):
                raise got[0]
            turn.reply = got[0]
            await anyio.to_thread.run_sync(finish, turn, limiter=chat_limiter)
            return ok(turn.response())
        finally:
            if not handed_off:
                release()

    @app.get("/api/stats", tags=["shadow"], summary="System statistics (pgmem.system_stats)")
    def stats(p: Principal = Depends(principal)):
        tenant_wide(p, "the tenant's statistics")
        with db.session(p) as s:
            doc = s.scalar("system_stats")
            stored = bool(doc.get("hasApiKey"))
        doc["hasStoredApiKey"] = stored
        doc["hasApiKey"] = stored or bool(base_model.api_key)
        doc["model"] = {"base_url": base_model.base_url, "model": base_model.model}
        return ok(doc)

    @app.post("/api/config/apikey", tags=["shadow"], summary="Store the tenant's LLM API key (pgmem.set_api_key)")
    def set_api_key(body: ApiKeyBody, p: Principal = Depends(principal)):
        """Write-only: the key is never returned, never logged, and the app's database login
        cannot read it back. A token bound to a user may not change it (403)."""
        tenant_wide(p, "the tenant's LLM key")
        with db.session(p) as s:
            got = s.scalar("set_api_key", api_key=body.apiKey, provider=body.provider)
        return ok({"success": bool(got.get("success")), "provider": got.get("provider"),
                   "fingerprint": got.get("fingerprint")})

    @app.delete("/api/config/apikey", tags=["shadow"], summary="Remove the tenant's LLM API key (pgmem.clear_api_key)")
    def clear_api_key(provider: str = Query("openai", max_length=32), p: Principal = Depends(principal)):
        tenant_wide(p, "the tenant's LLM key")
        with db.session(p) as s:
            return ok({"success": bool(s.scalar("clear_api_key", provider=provider))})

    @app.get("/api/health", tags=["shadow"], summary="Database, migrations, worker and cron (pgmem.health)")
    def health(p: Principal = Depends(principal)):
        with db.session(p) as s:
            doc = s.scalar("health", expected_revision=head)
        doc["hasApiKey"] = bool(doc.get("hasApiKey")) or bool(base_model.api_key)
        doc["server"] = {"version": __version__, "mcp": mcp_server is not None, "embeddings": embedder is not None,
                         "model": base_model.model}
        return ok(doc)

    # -------------------------------------------------------------- the REST API over the SQL API
    @app.get("/api/session", tags=["memory"], summary="Who this request acts for (pgmem.current_tenant)")
    def session(p: Principal = Depends(principal)):
        with db.session(p) as s:
            tenant = s.scalar("current_tenant")  # verifies a claim
        return ok({**describe(p), "tenant": tenant})

    @app.post("/api/remember", tags=["memory"], summary="Store a memory behind the surprise gate (pgmem.remember)")
    def remember(body: RememberBody, p: Principal = Depends(principal)):
        with db.session(p) as s:
            r = s.client.remember(body.content, who=body.who, what=body.what, when=body.when, where=body.where,
                                  why=body.why, how=body.how, category=body.category, importance=body.importance,
                                  metadata={**(body.metadata or {}), "via": "web"}, session_id=body.session_id,
                                  user_id=user_for(p, body.user_id), extract=body.extract, conn=s.conn)
        return ok({"id": r.id, "decision": r.decision, "surprise": r.surprise, "importance": r.importance,
                   "salience": r.salience, "nearest_id": r.nearest_id, "nearest_similarity": r.nearest_similarity})

    @app.post("/api/search", tags=["memory"], summary="Fused search with every signal (pgmem.search / explain_search)")
    def search(body: SearchBody, p: Principal = Depends(principal)):
        kw = dict(k=body.k, filters=scoped(p, body.filters), profile=body.profile, actor=body.actor,
                  location=body.location, as_of=body.as_of)
        with db.session(p) as s:
            if body.explain:
                rows = s.client.explain_search(body.query, conn=s.conn, **{k: v for k, v in kw.items() if v is not None})
                return ok({"explain": rows})
            hits = s.client.search(body.query, conn=s.conn, **kw)
        return ok({"memories": [{"id": h.id, "score": h.score, "content": h.content, "who": h.who, "when": h.when,
                                 "created_at": h.created_at, "category": h.category, "signals": h.signals}
                                for h in hits]})

    @app.post("/api/activate", tags=["memory"], summary="Shadow activation: activated and candidate memories (pgmem.activate)")
    def activate(body: ActivateBody, p: Principal = Depends(principal)):
        with db.session(p) as s:
            hits = s.client.activate(body.query, context_type=body.context_type, k=body.k, threshold=body.threshold,
                                     filters=scoped(p, body.filters), conn=s.conn)
        return ok({"memories": [{"id": h.id, "score": h.score, "content": h.content, "summary": h.summary,
                                 "signals": h.signals, **h.extra} for h in hits]})

    @app.post("/api/recall", tags=["memory"], summary="Engram ranking (pgmem.recall)")
    def recall(body: RecallBody, p: Principal = Depends(principal)):
        with db.session(p) as s:
            hits = s.client.recall(body.query, k=body.k, filters=scoped(p, body.filters), conn=s.conn)
        return ok({"memories": [{"id": h.id, "score": h.score, "content": h.content, "signals": h.signals} for h in hits]})

    @app.post("/api/context", tags=["memory"], summary="Memories packed into a token budget (pgmem.build_context)")
    def context(body: ContextBody, p: Principal = Depends(principal)):
        with db.session(p) as s:
            rows = s.client.build_context(body.query, token_budget=body.token_budget, candidates=body.candidates,
                                          filters=scoped(p, body.filters), conn=s.conn)
        return ok({"memories": rows})

    @app.post("/api/context_for", tags=["memory"], summary="The layered pipeline's context (pgmem.context_for)")
    def context_for(body: ContextForBody, p: Principal = Depends(principal)):
        with db.session(p) as s:
            own_conversation(s, p, body.conversation_id)
            r = s.client.context_for(body.query, conversation_id=body.conversation_id, user_id=user_for(p, body.user_id),
                                     embedding=s.embed(body.query), k=body.k, remember=body.remember, conn=s.conn)
        return ok(r.doc)

    MemoryId = PathParam(ge=1, le=2**62)

    @app.get("/api/memories/{memory_id}", tags=["memory"], summary="A memory with its 5W1H (pgmem.get_memory)")
    def get_memory(memory_id: int = MemoryId, p: Principal = Depends(principal)):
        with db.session(p) as s:
            m = own(s, p, memory_id)
        return ok(m)

    @app.get("/api/memories/{memory_id}/history", tags=["memory"], summary="Every change to a memory (pgmem.history)")
    def history(memory_id: int = MemoryId, p: Principal = Depends(principal)):
        with db.session(p) as s:
            if p.user is not None:
                own(s, p, memory_id)
            return ok({"history": s.client.history(memory_id, conn=s.conn)})

    @app.get("/api/memories/{memory_id}/bindings", tags=["memory"], summary="A memory's bindings (pgmem.list_bindings)")
    def bindings(memory_id: int = MemoryId, p: Principal = Depends(principal)):
        with db.session(p) as s:
            if p.user is not None:
                own(s, p, memory_id)
            return ok({"bindings": s.rows("list_bindings", memory_id=memory_id)})

    @app.post("/api/memories/{memory_id}/forget", tags=["memory"], summary="Delete a memory, restorably (pgmem.forget)")
    def forget(body: ReasonBody | None = None, memory_id: int = MemoryId, p: Principal = Depends(principal)):
        with db.session(p) as s:
            if p.user is not None:
                own(s, p, memory_id)
            return ok(s.client.forget(memory_id, reason=(body.reason if body else None), conn=s.conn))

    @app.post("/api/memories/{memory_id}/restore", tags=["memory"], summary="Undo a forget or an archive (pgmem.restore)")
    def restore(body: ReasonBody | None = None, memory_id: int = MemoryId, p: Principal = Depends(principal)):
        with db.session(p) as s:
            if p.user is not None:
                own(s, p, memory_id)
            return ok(s.client.restore(memory_id, reason=(body.reason if body else None), conn=s.conn))

    @app.post("/api/history/{history_id}/revert", tags=["memory"], summary="Put a memory back as it was (pgmem.revert)")
    def revert(history_id: int = PathParam(ge=1, le=2**62), p: Principal = Depends(principal)):
        if p.user is not None:
            raise Forbidden("revert needs a token for the whole tenant (this one acts for one user): use restore")
        with db.session(p) as s:
            return ok(s.rows("revert", history_id=history_id)[0])

    UserId = PathParam(min_length=1, max_length=200, pattern=ID_PATTERN)

    @app.get("/api/profile/{user_id}", tags=["layered"], summary="The user's profile facts in force (pgmem.profile)")
    def profile(user_id: str = UserId, as_of: datetime | None = None, p: Principal = Depends(principal)):
        with db.session(p) as s:
            return ok({"facts": s.rows("profile", user_id=user_for(p, user_id), as_of=as_of)})

    @app.get("/api/profile/{user_id}/history", tags=["layered"], summary="Every profile fact, superseded ones too (pgmem.fact_history)")
    def fact_history(user_id: str = UserId, key: str | None = Query(None, max_length=96), p: Principal = Depends(principal)):
        with db.session(p) as s:
            return ok({"facts": s.client.fact_history(user_for(p, user_id), key, conn=s.conn)})

    @app.get("/api/conversations/{conversation_id}/threads", tags=["layered"],
             summary="A conversation's topic threads (pgmem.conversation_threads)")
    def threads(conversation_id: str = PathParam(min_length=1, max_length=200, pattern=ID_PATTERN), include_archived: bool = False,
                p: Principal = Depends(principal)):
        with db.session(p) as s:
            own_conversation(s, p, conversation_id, must_exist=True)
            return ok({"threads": s.client.conversation_threads(conversation_id, include_archived, conn=s.conn)})

    @app.get("/api/threads/{thread_id}/messages", tags=["layered"], summary="A thread's messages (pgmem.thread_messages)")
    def thread_messages(thread_id: int = PathParam(ge=1, le=2**62),
                        conversation_id: str | None = Query(None, min_length=1, max_length=200, pattern=ID_PATTERN,
                                                            description="the thread's conversation (required of a token "
                                                                        "bound to a user)"),
                        p: Principal = Depends(principal)):
        with db.session(p) as s:
            if p.user is not None:
                if conversation_id is None:
                    raise Forbidden("a token bound to a user names the thread's conversation: ?conversation_id=...")
                own_conversation(s, p, conversation_id, must_exist=True)
                if thread_id not in {t["thread_id"] for t in s.client.conversation_threads(conversation_id, True, conn=s.conn)}:
                    raise NotFound(f"thread {thread_id} is not a thread of conversation {conversation_id!r}")
            return ok({"messages": s.rows("thread_messages", thread_id=thread_id)})

    @app.post("/api/insights/search", tags=["layered"], summary="Research insights across threads (pgmem.search_insights)")
    def insights(body: InsightsBody, p: Principal = Depends(principal)):
        with db.session(p) as s:
            return ok({"insights": s.client.search_insights(body.query or None, user_id=user_for(p, body.user_id),
                                                            k=body.k, types=body.types, conn=s.conn)})

    # -------------------------------------------------------------- knowledge-base documents
    @app.post("/api/documents", tags=["documents"], summary="Store a knowledge-base document (pgmem.ingest_document)")
    def ingest_document(body: DocumentBody, p: Principal = Depends(principal)):
        """Chunked by the database, each chunk embedded by the server; user_id left out: the
        tenant's knowledge base (every user). A token bound to a user stores its user's."""
        user = user_for(p, body.user_id)
        with db.session(p) as s:
            got = s.client.ingest_document(body.title, body.content, source=body.source, user_id=user,
                                           metadata={**(body.metadata or {}), "via": "web"},
                                           max_tokens=body.max_tokens, embed=db.embedder is not None, conn=s.conn)
        return ok(got)

    @app.get("/api/documents", tags=["documents"], summary="The knowledge-base documents (pgmem.list_documents)")
    def list_documents(user_id: str | None = Query(None, min_length=1, max_length=200, pattern=ID_PATTERN),
                       include_deleted: bool = False,
                       p: Principal = Depends(principal)):
        with db.session(p) as s:
            return ok({"documents": s.client.list_documents(user_for(p, user_id), include_deleted=include_deleted,
                                                            conn=s.conn)})

    @app.post("/api/documents/search", tags=["documents"],
              summary="The document chunks nearest a question (pgmem.search_documents)")
    def search_documents(body: DocumentSearchBody, p: Principal = Depends(principal)):
        with db.session(p) as s:
            return ok({"chunks": s.client.search_documents(body.query, embedding=s.embed(body.query), k=body.k,
                                                           user_id=user_for(p, body.user_id), conn=s.conn)})

    @app.delete("/api/documents/{document_id}", tags=["documents"],
                summary="Take a document out of retrieval, restorably (pgmem.delete_document)")
    def delete_document(document_id: int = PathParam(ge=1, le=2**62), p: Principal = Depends(principal)):
        with db.session(p) as s:
            if p.user is not None:  # a user's token deletes its user's documents only
                mine = {d["id"] for d in s.client.list_documents(p.user, include_deleted=True, conn=s.conn)}
                if document_id not in mine:
                    raise NotFound(f'document {document_id} does not exist for user "{p.user}"',
                                   hint="GET /api/documents lists them")
            d = s.client.delete_document(document_id, conn=s.conn)
        return ok({k: v for k, v in d.items() if k in ("id", "title", "state", "user_id", "updated_at")})

    @app.get("/api/clusters", tags=["clusters"], summary="Concept clusters (pgmem.list_clusters)")
    def clusters(p: Principal = Depends(principal)):
        tenant_wide(p, "the tenant's clusters")
        with db.session(p) as s:
            return ok({"clusters": s.rows("list_clusters")})

    @app.get("/api/map", tags=["clusters"], summary="The 3-D memory map, as a page (pgmem.map_points)",
             response_class=HTMLResponse)
    def memory_map(method: Literal["pca", "tsne", "umap"] = "pca",
                   color: Literal["cluster", "energy", "recency", "usage"] = "cluster",
                   max_points: int = Query(5000, ge=10, le=20000), p: Principal = Depends(principal)):
        from ..map import render_html

        tenant_wide(p, "the tenant's memory map")

        with db.session(p) as s:
            points = s.rows("map_points", method=method, max_points=max_points)
        if not points:
            return HTMLResponse("<!doctype html><meta charset=utf-8><body data-pgmem-points=0 style='font:14px sans-serif'>"
                                "<p>No coordinates yet: the map shows embedded memories once they are projected "
                                "(the page does it every minute; POST /api/map/project).</p>")
        return HTMLResponse(render_html(points, method=method, color=color))

    @app.post("/api/map/project", tags=["clusters"], summary="Recompute the map's coordinates (pgmem.project)")
    def project(body: ProjectBody | None = None, p: Principal = Depends(principal)):
        tenant_wide(p, "the tenant's memory map")
        body = body or ProjectBody()
        with db.session(p) as s:
            return ok({"points": s.scalar("project", method=body.method, max_points=body.max_points)})

    @app.get("/api/jobs", tags=["jobs"], summary="The latest run of each job (pgmem.list_jobs)")
    def jobs(p: Principal = Depends(principal)):
        tenant_wide(p, "the tenant's jobs")
        with db.session(p) as s:
            return ok({"jobs": s.rows("list_jobs")})

    @app.get("/api/users/{user_id}/export", tags=["privacy"], summary="Everything stored about a user (pgmem.export_user)")
    def export_user(user_id: str = UserId, p: Principal = Depends(principal)):
        with db.session(p) as s:
            return ok(s.client.export_user(user_for(p, user_id), conn=s.conn))

    @app.post("/api/users/{user_id}/erase", tags=["privacy"], summary="Erase a user from every tier (pgmem.erase_user)")
    def erase_user(body: EraseBody, user_id: str = UserId, p: Principal = Depends(principal)):
        if not body.confirm:
            raise InvalidInput("erase_user deletes every tier of the user for good: send {\"confirm\": true}")
        with db.session(p) as s:
            return ok(s.client.erase_user(user_for(p, user_id), conn=s.conn))

    if mcp_server is not None:
        app.mount("/", mcp_app)  # last: /mcp (the SDK's app, with its own bearer authentication)
    return app
