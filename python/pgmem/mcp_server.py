"""``pgmem mcp``: pgmem's memory as Model Context Protocol tools, on the official ``mcp`` SDK.

Agents (Claude Desktop, Claude Code, Cursor, any MCP client) call these tools:

=============  =====================================================================
tool           what it does (SQL function)
=============  =====================================================================
remember       store a memory behind the surprise gate, 5W1H filled in (remember)
search         the memories that answer a question, ranked (search)
context        the best memories that fit a token budget, for a prompt (build_context)
profile        what is known about the user: current profile facts (profile) [1]
context_for    the layered context: profile, thread, memories (context_for) [1]
forget         delete a memory (it stays restorable in history) (forget)
history        every change to a memory, with before and after (history)
=============  =====================================================================

[1] registered when the database has the function (the layered tiers install it): a tool
that calls one SQL function is one line of :data:`SQL_TOOLS`.

Tenant and user are fixed by the server's configuration, never by the agent: over stdio by
``--tenant``/``--user`` (or PGMEM_TENANT/PGMEM_USER); over streamable HTTP (127.0.0.1 only)
each request carries ``Authorization: Bearer <token>`` and the token maps to one tenant and
user (``pgmem mcp --new-token`` makes one). A request without a valid token gets HTTP 401. The
token file keeps only SHA-256 digests of the tokens.

With a user configured, remember stores the memory under that user, search and context look
only at that user's memories, and forget and history refuse memories of other users.
"""
# No `from __future__ import annotations` here: the SDK reads the tools' annotations (the
# input schemas) from the functions defined inside build_server, where they must be objects.
import dataclasses
import hashlib
import ipaddress
import json
import logging
import os
import secrets
import sys
import threading
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

from .errors import ConfigError, PgmemError, SetupError

log = logging.getLogger("pgmem.mcp")

DEFAULT_PORT = 8765
INSTRUCTIONS = (
    "Long-term memory (pgmem). Call `remember` with facts, preferences and events worth keeping "
    "across sessions; `search` or `context` before answering a question that may depend on "
    "them; `forget` what the user asks you to forget; `history` shows what changed."
)


def _require_sdk():
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        from .config import DISTRIBUTION

        raise SetupError(f"the MCP server needs the official MCP SDK: pip install '{DISTRIBUTION}[mcp]'")


# ------------------------------------------------------------------------------ who calls
@dataclasses.dataclass(frozen=True)
class Principal:
    """The tenant and user every tool call acts for."""

    tenant: str
    user: str | None = None


class TokenStore:
    """Bearer tokens for the HTTP transport: a JSON file of SHA-256 digests, each mapped to a
    tenant and a user (``{"tokens": [{"sha256": ..., "tenant": ..., "user": ...}]}``, mode 0600).
    The tokens themselves are shown once, when made, and never stored."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @staticmethod
    def digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def entries(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except json.JSONDecodeError as e:
            raise ConfigError(f"{self.path} is not valid JSON ({e}); fix it or remove it and make new tokens") from None
        if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
            raise ConfigError(f'{self.path} must hold {{"tokens": [...]}}: see `pgmem mcp --new-token`')
        return data["tokens"]

    def principals(self) -> dict[str, Principal]:
        out: dict[str, Principal] = {}
        for i, e in enumerate(self.entries()):
            if not isinstance(e, dict) or not e.get("sha256") or not e.get("tenant"):
                raise ConfigError(f"{self.path}: token entry {i} needs 'sha256' and 'tenant'")
            out[e["sha256"]] = Principal(e["tenant"], e.get("user"))
        return out

    def listing(self) -> list[dict[str, Any]]:
        """The tokens (never the tokens themselves): id (the digest's first 12 hex digits),
        tenant, user, created_at."""
        return [{"id": str(e.get("sha256", ""))[:12], "tenant": e.get("tenant"), "user": e.get("user"),
                 "created_at": e.get("created_at")} for e in self.entries() if isinstance(e, dict)]

    def revoke(self, token_id: str) -> dict[str, Any]:
        """Remove the token whose id (a prefix of its digest, 8 hex digits at least; or the
        token itself) is given; the web server and /mcp stop taking it at their next request."""
        tid = (token_id or "").strip()
        if tid.startswith("pgm_"):
            tid = self.digest(tid)
        tid = tid.lower()
        if len(tid) < 8 or not all(c in "0123456789abcdef" for c in tid):
            raise ConfigError("a token id is 8 or more hex digits of its digest: see 'pgmem mcp --list-tokens'")
        entries = self.entries()
        hits = [e for e in entries if isinstance(e, dict) and str(e.get("sha256", "")).startswith(tid)]
        if not hits:
            raise ConfigError(f"no token {tid!r} in {self.path}: see 'pgmem mcp --list-tokens'")
        if len(hits) > 1:
            raise ConfigError(f"{len(hits)} tokens start with {tid!r}: give more digits")
        self._write([e for e in entries if e is not hits[0]])
        return {"id": tid[:12], "tenant": hits[0].get("tenant"), "user": hits[0].get("user")}

    def _write(self, entries: list) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"tokens": entries}, indent=2) + "\n")
        os.chmod(tmp, 0o600)
        tmp.replace(self.path)

    def add(self, tenant: str, user: str | None = None) -> str:
        """Make a token for ``tenant`` (and ``user``), store its digest, return the token."""
        if not tenant:
            raise ConfigError("a token needs a tenant (--tenant or PGMEM_TENANT)")
        token = "pgm_" + secrets.token_urlsafe(32)
        entries = self.entries()
        entries.append({"sha256": self.digest(token), "tenant": tenant, "user": user,
                        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        self._write(entries)
        return token


def default_token_file() -> Path:
    """PGMEM_MCP_TOKENS, else ``mcp-tokens.json`` in pgmem's home (``.pgmem``)."""
    env = os.environ.get("PGMEM_MCP_TOKENS")
    if env:
        return Path(env)
    from .config import home

    return home() / "mcp-tokens.json"


class TokenVerifier:
    """The SDK's TokenVerifier protocol over a :class:`TokenStore`, read again when the file
    changes: a token made after the server started works, a revoked one stops working
    (issue 34, item 3). ``require``: refuse to start with no token (``pgmem mcp``; ``pgmem
    serve`` mounts /mcp before the first token is made)."""

    def __init__(self, store: TokenStore, *, require: bool = True):
        self.store = store
        self._stamp: tuple[float, int] | None = None
        self._principals: dict[str, Principal] = {}
        self._reload()
        if require and not self._principals:
            raise ConfigError(f"no MCP tokens in {store.path}: make one with "
                              "'pgmem mcp --new-token --tenant <tenant> [--user <user>]'")

    def _reload(self) -> None:
        try:
            st = os.stat(self.store.path)
        except FileNotFoundError:
            self._principals, self._stamp = {}, None
            return
        stamp = (st.st_mtime, st.st_size)
        if stamp != self._stamp:
            self._principals, self._stamp = self.store.principals(), stamp

    async def verify_token(self, token: str):
        from mcp.server.auth.provider import AccessToken

        try:
            self._reload()
        except ConfigError as e:  # a broken token file: no token passes until it is fixed
            log.error("MCP tokens: %s", e)
            return None
        p = self._principals.get(TokenStore.digest(token))
        if p is None:
            return None
        return AccessToken(token=token, client_id=f"pgmem:{p.tenant}", scopes=[],
                           claims={"tenant": p.tenant, "user": p.user})


def _caller(fixed: Principal | None) -> Principal:
    """The principal of this call: the server's own (stdio), else the bearer token's (HTTP)."""
    if fixed is not None:
        return fixed
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    claims = (token.claims or {}) if token is not None else {}
    if not claims.get("tenant"):  # the SDK refuses such requests before a tool runs
        raise PermissionError("this request carries no valid bearer token")
    return Principal(claims["tenant"], claims.get("user"))


# ------------------------------------------------------------------------------ results
def _plain(value: Any) -> Any:
    """A JSON-safe copy of a value from the database (vectors dropped: an agent reads text)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "embedding"}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _hit(h) -> dict[str, Any]:
    return _plain({"id": h.id, "score": round(h.score, 4), "content": h.content, "who": h.who,
                   "when": h.when or h.created_at, "category": h.category,
                   "signals": {k: round(v, 4) for k, v in h.signals.items()}})


# ------------------------------------------------------------------------------ the tools
@dataclasses.dataclass(frozen=True)
class SqlTool:
    """A tool that calls one pgmem SQL function with the caller's user and the agent's
    arguments; registered only when the database has the function.

    ``params`` maps each tool argument to ``(type, default, description)`` (``...`` as the
    default: required). The argument ``query`` is passed as ``query_text``, and as
    ``query_embedding`` too when the function takes one and the server embeds; ``user_id`` is
    the caller's user whenever the function takes it."""

    name: str
    function: str
    description: str
    params: dict[str, tuple[Any, Any, str]] = dataclasses.field(default_factory=dict)


SQL_TOOLS: tuple[SqlTool, ...] = (
    SqlTool("profile", "profile", "What is known about the user: their current profile facts (key, value, "
            "confidence, valid since). The user is the server's, not an argument."),
    SqlTool("context_for", "context_for", "The layered context for a question: the user's profile facts, the "
            "conversation's thread and the memories that answer it, in one object.",
            {"query": (str, ..., "the question or the user's message"),
             # required: the conversation state, threads and history belong to one (layered tiers)
             "conversation_id": (str, ..., "the conversation this turn belongs to (any stable id)"),
             "k": (int | None, None, "how many memories at most")}),
)


class MemoryTools:
    """The tools' implementation: one MemoryClient per tenant, one embedder for all.

    Every call runs in a worker thread (``asyncio.to_thread``), as the web server runs its
    routes: extraction and embedding are CPU work, and on the event loop one tenant's
    ``remember`` held up every other tenant's calls (issue 27, H1: 7 s). The event loop only
    passes messages."""

    def __init__(self, dsn: str | None = None, *, principal: Principal | None = None, embed: bool = True,
                 extractor: Any = None, max_connections: int = 4, sql_tools: tuple[SqlTool, ...] = SQL_TOOLS):
        from .db import resolve_dsn

        self.dsn = resolve_dsn(dsn)
        self.sql_tools = sql_tools
        self.principal = principal
        self.embed = embed
        self._embedder: Any = None
        self._embedder_lock = threading.Lock()
        self.extractor = extractor
        self.max_connections = max_connections
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.sql_arguments = self._sql_signatures()

    def _sql_signatures(self) -> dict[str, set[str]]:
        """Argument names of the pgmem functions :data:`SQL_TOOLS` call, for those that exist."""
        from .db import connect

        names = [t.function for t in self.sql_tools]
        with connect(self.dsn, autocommit=True) as c:
            rows = c.execute("select p.proname, p.proargnames from pg_proc p where p.pronamespace = "
                             "to_regnamespace('pgmem') and p.proname = any(%s)", (names,)).fetchall()
        return {name: set(args or []) for name, args in rows}

    @property
    def embedder(self):
        """The sentence-transformers embedder ([embed] extra), or None: then memories are stored
        for the embedding worker and questions are answered by lexical search."""
        with self._embedder_lock:
            return self._load_embedder()

    def _load_embedder(self):
        if self.embed and self._embedder is None:
            try:
                from .embedding import Embedder

                self._embedder = Embedder()
            except ImportError as e:
                log.warning("no local embeddings (%s): lexical search only; pip install 'pgmem-agent[embed]'", e.name)
                self.embed = False
        return self._embedder

    def client(self, tenant: str):
        """The tenant's MemoryClient (thread-safe: its connections come from a pool)."""
        with self._lock:
            c = self._clients.get(tenant)
            if c is None:
                from .client import MemoryClient

                c = MemoryClient(self.dsn, tenant=tenant, embedder=self.embedder, extractor=self.extractor,
                                 min_size=0, max_size=self.max_connections)
                self._clients[tenant] = c
            return c

    @staticmethod
    async def _off_loop(fn: Callable, *args, **kwargs):
        """fn(*args, **kwargs) in a worker thread: the event loop stays free for other calls."""
        import asyncio

        return await asyncio.to_thread(fn, *args, **kwargs)

    async def close(self) -> None:
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for c in clients:
            await self._off_loop(c.close)

    def _scope(self, p: Principal) -> dict[str, Any] | None:
        return {"user_id": p.user} if p.user else None

    async def _own(self, p: Principal, memory_id: int) -> dict:
        """The memory if it belongs to the caller (tenant, and user when one is configured)."""
        from .errors import NotFound

        m = await self._off_loop(self.client(p.tenant).get, memory_id)
        if m is None or (p.user and m.get("user_id") != p.user):
            who = f'user "{p.user}"' if p.user else f'tenant "{p.tenant}"'
            raise NotFound(f"memory {memory_id} does not exist for {who}",
                           hint="search first: each result carries its id")
        return m

    # the six tools ------------------------------------------------------------------
    async def remember(self, p: Principal, content: str, category: str | None = None,
                       importance: float | None = None, who: str | None = None,
                       session_id: str | None = None, metadata: dict | None = None) -> dict[str, Any]:
        r = await self._off_loop(
            self.client(p.tenant).remember,
            content, who=who, category=category, importance=importance, session_id=session_id,
            user_id=p.user, metadata={**(metadata or {}), "via": "mcp"}, extract=True)
        return _plain({"id": r.id, "decision": r.decision, "surprise": r.surprise, "importance": r.importance,
                       "nearest_id": r.nearest_id, "nearest_similarity": r.nearest_similarity})

    async def search(self, p: Principal, query: str, k: int = 5) -> dict[str, Any]:
        hits = await self._off_loop(self.client(p.tenant).search, query, k=k, filters=self._scope(p))
        return {"memories": [_hit(h) for h in hits]}

    async def context(self, p: Principal, query: str, token_budget: int = 1000) -> dict[str, Any]:
        rows = await self._off_loop(self.client(p.tenant).build_context, query, token_budget=token_budget,
                                    filters=self._scope(p))
        picked = [r for r in rows if r["selected"]]
        return _plain({"token_budget": token_budget, "tokens": sum(r["token_count"] for r in picked),
                       "memories": [{"id": r["id"], "content": r["content"], "who": r["who"],
                                     "created_at": r["created_at"], "tokens": r["token_count"]} for r in picked]})

    async def forget(self, p: Principal, memory_id: int, reason: str | None = None) -> dict[str, Any]:
        await self._own(p, memory_id)
        m = await self._off_loop(self.client(p.tenant).forget, memory_id, reason=reason)
        return _plain({"id": m["id"], "state": m["state"], "content": m["content"]})

    async def history(self, p: Principal, memory_id: int) -> dict[str, Any]:
        await self._own(p, memory_id)
        return {"changes": _plain(await self._off_loop(self.client(p.tenant).history, memory_id))}

    async def sql_tool(self, p: Principal, tool: SqlTool, args: dict[str, Any]) -> dict[str, Any]:
        takes = self.sql_arguments[tool.function]
        call = {k: v for k, v in args.items() if k != "query"}
        if "query" in args:
            call["query_text"] = args["query"]
            if "query_embedding" in takes and self.embedder is not None:
                # embedded as search embeds a question: without the names of the actors it names
                # and of its user (pgmem.query_embedding_text; issue 32: context_for's memories
                # are then search's)
                rows = await self._off_loop(self.client(p.tenant).call, "query_embedding_text", p_text=args["query"],
                                            p_user_id=p.user)
                text = (rows[0].get("query_embedding_text") if rows else None) or args["query"]
                call["query_embedding"] = await self._off_loop(self.embedder.embed, text)
        if "user_id" in takes:
            if not p.user:
                raise ConfigError(f"the tool {tool.name} needs a user: start the server with --user "
                                  "(stdio) or make the token with --user (HTTP)")
            call["user_id"] = p.user
        rows = await self._off_loop(self.client(p.tenant).call, tool.function, **call)
        if len(rows) == 1 and list(rows[0]) == [tool.function]:
            return _plain({"result": rows[0][tool.function]})  # a function returning one value
        return {"rows": _plain(rows)}


def _tool_error(fn: Callable) -> Callable:
    """Errors reach the agent as a tool error with the database's words and hint."""
    import functools

    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    async def wrapped(*args, **kwargs):
        try:
            return await fn(*args, **kwargs)
        except Exception as e:
            raise ToolError(_agent_message(e)) from e

    return wrapped


# SQLSTATE classes whose words are about the caller's input, safe to show an agent: 22 (a
# value: pgmem._bad_input), 23 (a constraint), 54 (a limit), P0 (pgmem's own RAISE: not found)
_AGENT_CLASSES = ("22", "23", "54", "P0")


def _agent_message(e: BaseException) -> str:
    """What an agent is told of an error: input errors in the database's words and hint;
    anything about the server's login, grants or setup (42501, a tenant not granted, a lost
    connection, an internal error) as one line with a reference, the detail in the server's
    log (issue 35: MCP errors showed the database login and the administrator's grant SQL)."""
    import uuid

    import psycopg

    from .errors import DatabaseError, DataError, IntegrityError, LimitExceeded, RaisedError, TenantError

    if isinstance(e, TenantError) or getattr(e, "sqlstate", None) in ("42501", "28000", "28P01"):
        log.warning("MCP call refused by the database: %s", e)
        return ("this server may not act for your tenant: an administrator grants its database login the tenant "
                "(SECURITY.md)")
    if isinstance(e, PermissionError) and not isinstance(e, PgmemError):
        return str(e)  # this module's own: no valid bearer token
    state = getattr(e, "sqlstate", None) or ""
    if isinstance(e, ConfigError) and not isinstance(e, SetupError):
        return str(e)
    if isinstance(e, (DataError, IntegrityError, LimitExceeded, RaisedError)) or (
            isinstance(e, DatabaseError) and state[:2] in _AGENT_CLASSES):
        return str(e)
    if isinstance(e, psycopg.Error) and state[:2] in _AGENT_CLASSES:
        diag = e.diag
        msg = (diag.message_primary or str(e)).strip()
        return msg + (f" (hint: {diag.message_hint})" if diag.message_hint else "")
    if isinstance(e, PgmemError) and not isinstance(e, (DatabaseError, SetupError)):
        return str(e)
    ref = uuid.uuid4().hex[:8]
    log.error("MCP call failed (reference %s): %s", ref, e, exc_info=not isinstance(e, (PgmemError, psycopg.Error)))
    return f"the call failed on the server (reference {ref} in its log)"


def _sql_tool_function(tools: MemoryTools, fixed: Principal | None, tool: SqlTool) -> Callable:
    """A coroutine function with the tool's signature (the SDK derives the input schema from
    it) that calls :meth:`MemoryTools.sql_tool`."""
    import inspect
    from typing import Annotated

    from pydantic import Field

    async def run(**kwargs):
        return await tools.sql_tool(_caller(fixed), tool, kwargs)

    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                default=inspect.Parameter.empty if default is ... else default,
                                annotation=Annotated[typ, Field(description=doc)])
              for name, (typ, default, doc) in tool.params.items()]
    run.__signature__ = inspect.Signature(params, return_annotation=dict[str, Any])  # type: ignore[attr-defined]
    run.__name__ = tool.name
    run.__doc__ = tool.description
    return run


def build_server(tools: MemoryTools, *, tokens: TokenStore | None = None, base_url: str | None = None,
                 require_tokens: bool = True):
    """The MCPServer with pgmem's tools. ``tokens``: bearer authentication (HTTP), read again
    when the file changes; ``require_tokens``: refuse to start without one."""
    _require_sdk()
    from typing import Annotated

    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from pydantic import Field

    from . import __version__

    from pydantic import AnyHttpUrl

    verifier, settings = None, None
    if tokens is not None:
        # The tokens are issued by `pgmem mcp --new-token`, not by an OAuth server: the SDK
        # asks for an issuer URL all the same, and this server's own URL is the honest one.
        verifier = TokenVerifier(tokens, require=require_tokens)
        settings = AuthSettings(issuer_url=AnyHttpUrl(base_url or f"http://127.0.0.1:{DEFAULT_PORT}"),
                                resource_server_url=None)
    server = MCPServer("pgmem", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING",
                       token_verifier=verifier, auth=settings)
    fixed = tools.principal if tokens is None else None

    def tool(fn: Callable) -> None:
        server.add_tool(_tool_error(fn), name=fn.__name__, description=fn.__doc__)

    Text = Annotated[str, Field(min_length=1)]

    @tool
    async def remember(content: Annotated[Text, Field(description="the fact, preference or event, in plain words")],
                       category: Annotated[str | None, Field(description="fact, preference, skill, episode or context "
                                                             "(guessed from the text when left out)")] = None,
                       importance: Annotated[float | None, Field(ge=0, le=1, description="0..1; computed when left out")] = None,
                       who: Annotated[str | None, Field(description="who said or did it, e.g. user or assistant")] = None,
                       session_id: Annotated[str | None, Field(description="the conversation it came from")] = None,
                       metadata: Annotated[dict[str, Any] | None, Field(description="any JSON object to keep with it")] = None,
                       ) -> dict[str, Any]:
        """Store a memory for later sessions. pgmem's surprise gate skips what it already knows:
        `decision` is stored, duplicate or rejected, and `id` names the memory."""
        return await tools.remember(_caller(fixed), content, category, importance, who, session_id, metadata)

    @tool
    async def search(query: Annotated[Text, Field(description="a question or keywords")],
                     k: Annotated[int, Field(ge=1, le=50, description="how many memories at most")] = 5,
                     ) -> dict[str, Any]:
        """The memories that answer a question, best first, with their score and the signals behind it
        (semantic, lexical, recency, actor, spatial, usage)."""
        return await tools.search(_caller(fixed), query, k)

    @tool
    async def context(query: Annotated[Text, Field(description="the question the context is for")],
                      token_budget: Annotated[int, Field(ge=50, le=100000, description="tokens the memories may take")] = 1000,
                      ) -> dict[str, Any]:
        """The most useful, least redundant memories for a question that fit in a token budget, ready to
        put in a prompt (MMR order, packed by a knapsack)."""
        return await tools.context(_caller(fixed), query, token_budget)

    @tool
    async def forget(memory_id: Annotated[int, Field(description="the id of the memory (search shows ids)")],
                     reason: Annotated[str | None, Field(description="why, kept in the history")] = None,
                     ) -> dict[str, Any]:
        """Delete a memory. Nothing is lost: the change is in its history and can be undone by an operator."""
        return await tools.forget(_caller(fixed), memory_id, reason)

    @tool
    async def history(memory_id: Annotated[int, Field(description="the id of the memory")]) -> dict[str, Any]:
        """Every change to a memory (add, update, merge, delete, restore), oldest first, with before and after."""
        return await tools.history(_caller(fixed), memory_id)

    for t in tools.sql_tools:
        if t.function in tools.sql_arguments:
            server.add_tool(_tool_error(_sql_tool_function(tools, fixed, t)), name=t.name, description=t.description)
    return server


# ------------------------------------------------------------------------------ running
def _check_loopback(host: str) -> None:
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(f"pgmem mcp serves HTTP on the loopback interface only, not {host!r}: "
                          "put a TLS reverse proxy in front of it to reach it from elsewhere")


def serve(*, transport: str = "stdio", dsn: str | None = None, tenant: str | None = None, user: str | None = None,
          host: str = "127.0.0.1", port: int = DEFAULT_PORT, token_file: Path | None = None,
          embed: bool = True) -> None:
    """Run the server until the client disconnects (stdio) or the process is stopped (HTTP)."""
    _require_sdk()
    from .extraction import make_extractor

    if transport == "stdio":
        if not tenant:
            raise ConfigError("stdio: the tenant comes from --tenant or PGMEM_TENANT")
        tools = MemoryTools(dsn, principal=Principal(tenant, user), embed=embed, extractor=make_extractor())
        build_server(tools).run("stdio")
        return
    if transport != "http":
        raise ConfigError(f"unknown transport {transport!r}: use stdio or http")
    _check_loopback(host)
    if tenant or user:
        raise ConfigError("over HTTP each bearer token names its tenant and user: drop --tenant/--user, "
                          "and make tokens with 'pgmem mcp --new-token --tenant T --user U'")
    store = TokenStore(token_file or default_token_file())
    tools = MemoryTools(dsn, embed=embed, extractor=make_extractor())
    server = build_server(tools, tokens=store, base_url=f"http://{host}:{port}")
    log.warning("pgmem MCP server on http://%s:%d/mcp (tokens: %s)", host, port, store.path)
    server.run("streamable-http", host=host, port=port)


# ------------------------------------------------------------------------------ the command
def cmd_mcp(args) -> int:
    tenant = args.mcp_tenant or os.environ.get("PGMEM_TENANT")
    user = args.mcp_user or os.environ.get("PGMEM_USER")
    if getattr(args, "list_tokens", False):
        store = TokenStore(args.tokens or default_token_file())
        rows = store.listing()
        for r in rows:
            print(f"{r['id']}  tenant={r['tenant']}  user={r['user'] or '-'}  created={r['created_at'] or '?'}")
        print(f"pgmem: {len(rows)} token(s) in {store.path}", file=sys.stderr)
        return 0
    if getattr(args, "revoke_token", None):
        store = TokenStore(args.tokens or default_token_file())
        gone = store.revoke(args.revoke_token)
        print(f"pgmem: token {gone['id']} of tenant {gone['tenant']!r}" + (f", user {gone['user']!r}" if gone["user"] else "")
              + f" revoked in {store.path}", file=sys.stderr)
        return 0
    if args.new_token:
        store = TokenStore(args.tokens or default_token_file())
        token = store.add(tenant or "", user)
        print(token)
        print(f"pgmem: token for tenant {tenant!r}" + (f", user {user!r}" if user else "") +
              f" stored (as a SHA-256 digest) in {store.path}; it is shown only this once", file=sys.stderr)
        return 0
    serve(transport=args.transport, dsn=args.dsn, tenant=tenant if args.transport == "stdio" else args.mcp_tenant,
          user=user if args.transport == "stdio" else args.mcp_user, host=args.host, port=args.port,
          token_file=args.tokens, embed=not args.no_embed)
    return 0


def register(sub) -> None:
    """The ``pgmem mcp`` command (called by cli.build_parser)."""
    p = sub.add_parser("mcp", help="serve pgmem's memory as MCP tools (stdio, or streamable HTTP on 127.0.0.1)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--tenant", dest="mcp_tenant", help="stdio: the tenant every call acts for (default PGMEM_TENANT); "
                   "with --new-token: the token's tenant")
    p.add_argument("--user", dest="mcp_user", help="stdio: the user every call acts for (default PGMEM_USER); "
                   "with --new-token: the token's user")
    p.add_argument("--host", default="127.0.0.1", help="http: loopback address to listen on")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"http: port (default {DEFAULT_PORT})")
    p.add_argument("--tokens", type=Path, help="http: the token file (default PGMEM_MCP_TOKENS, else .pgmem/mcp-tokens.json)")
    p.add_argument("--new-token", action="store_true", help="make a bearer token for --tenant/--user, print it, exit")
    p.add_argument("--list-tokens", action="store_true", help="list the tokens (id, tenant, user, created), exit")
    p.add_argument("--revoke-token", metavar="ID", help="revoke the token with this id (from --list-tokens), exit")
    p.add_argument("--no-embed", action="store_true", help="no local embeddings: lexical search, worker embeds later")
    p.set_defaults(func=cmd_mcp)
