"""``pgmem mcp``, driven by the official MCP SDK's own client over both transports.

* stdio: the SDK's client starts ``pgmem mcp --tenant acme --user maya`` as a subprocess, with
  real MiniLM embeddings: remember, search (meaning, not words), context, forget, history,
  and the user/tenant walls.
* streamable HTTP on 127.0.0.1: bearer tokens made by ``pgmem mcp --new-token`` map to a
  tenant and a user; a request without a valid token gets HTTP 401 and no tool runs.
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import time

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import connect
from pgmem.mcp_server import MemoryTools, Principal, SqlTool, TokenStore, build_server

BASE_TOOLS = {"remember", "search", "context", "forget", "history"}
OPTIONAL = {"profile": "profile", "context_for": "context_for"}  # tool -> SQL function (layered tiers)


def _env(dsn: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    env.update(PGMEM_DSN=dsn, PYTHONPATH=os.environ.get("PYTHONPATH", ""), **more)
    env.pop("PGMEM_LLM_BASE_URL", None)  # the heuristic extractor
    return env


def _functions(dsn: str) -> set[str]:
    with connect(dsn, tenant=None) as c:
        return {r[0] for r in c.execute("select proname from pg_proc where pronamespace = 'pgmem'::regnamespace")}


def _seed_other(dsn: str) -> tuple[int, int]:
    """A memory of user kofi (tenant acme) and one of tenant beta, written by plain SQL."""
    ids = []
    for tenant, user, text in (("acme", "kofi", "Kofi keeps his peanut butter in the office fridge"),
                               ("beta", "maya", "Beta's Maya also hates peanuts")):
        with connect(dsn, tenant=tenant) as c:
            ids.append(c.execute("select memory_id from pgmem.remember(content => %s, user_id => %s)",
                                 (text, user)).fetchone()[0])
    return ids[0], ids[1]


async def _call(client: Client, tool: str, args: dict) -> dict:
    r = await client.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.structured_content


async def _error(client: Client, tool: str, args: dict) -> str:
    r = await client.call_tool(tool, args)
    assert r.is_error, r
    return r.content[0].text


# ------------------------------------------------------------------------------ stdio
def test_stdio_tools_end_to_end_with_real_embeddings(dsn):
    kofi_memory, beta_memory = _seed_other(dsn)
    params = StdioServerParameters(command=sys.executable, args=["-m", "pgmem.cli", "mcp", "--tenant", "acme",
                                                                 "--user", "maya"], env=_env(dsn))

    async def go():
        async with Client(params) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            have = _functions(dsn)
            assert set(tools) == BASE_TOOLS | {t for t, fn in OPTIONAL.items() if fn in have}
            assert tools["remember"].input_schema["required"] == ["content"]
            assert "tenant" not in json.dumps([t.input_schema for t in tools.values()])  # fixed by the server
            stored = [await _call(c, "remember", {"content": text}) for text in (
                "Maya is allergic to peanuts and carries an EpiPen",
                "Maya's team deploys the billing service every Friday",
                "Maya prefers window seats on long flights")]
            again = await _call(c, "remember", {"content": "Maya is allergic to peanuts and carries an EpiPen"})
            # meaning, not words: no query word occurs in the allergy memory
            found = await _call(c, "search", {"query": "which food could hurt her?", "k": 3})
            ctx = await _call(c, "context", {"query": "what must the caterer know about Maya", "token_budget": 60})
            gone = await _call(c, "forget", {"memory_id": stored[1]["id"], "reason": "project ended"})
            after = await _call(c, "search", {"query": "billing deploy Friday", "k": 5})
            hist = await _call(c, "history", {"memory_id": stored[1]["id"]})
            other_user = await _error(c, "forget", {"memory_id": kofi_memory})
            other_tenant = await _error(c, "history", {"memory_id": beta_memory})
            bad = await _error(c, "remember", {"content": "x", "category": "gossip"})
            nuts = await _call(c, "search", {"query": "peanut", "k": 10})
            return stored, again, found, ctx, gone, after, hist, other_user, other_tenant, bad, nuts

    stored, again, found, ctx, gone, after, hist, other_user, other_tenant, bad, nuts = asyncio.run(go())
    assert [s["decision"] for s in stored] == ["stored"] * 3
    assert again["decision"] == "duplicate" and again["nearest_id"] == stored[0]["id"]
    top = found["memories"][0]
    assert top["id"] == stored[0]["id"] and top["signals"]["semantic"] > 0.2 and top["signals"].get("lexical", 0) == 0
    assert ctx["memories"][0]["id"] == stored[0]["id"] and ctx["tokens"] <= 60
    assert gone == {"id": stored[1]["id"], "state": "deleted",
                    "content": "Maya's team deploys the billing service every Friday"}
    assert stored[1]["id"] not in [m["id"] for m in after["memories"]]
    assert [h["op"] for h in hist["changes"]] == ["add", "delete"]
    assert hist["changes"][1]["details"]["reason"] == "project ended"
    assert f"memory {kofi_memory} does not exist for user \"maya\"" in other_user
    assert f"memory {beta_memory} does not exist" in other_tenant
    assert 'unknown category "gossip"' in bad and "hint:" in bad
    # the user's wall: kofi's peanut memory and tenant beta's never come back
    got = [m["id"] for m in nuts["memories"]]
    assert got[0] == stored[0]["id"] and kofi_memory not in got and beta_memory not in got
    with connect(dsn, tenant="acme") as c:
        row = c.execute("select user_id, metadata->>'via', who from pgmem.memories where id = %s",
                        (stored[2]["id"],)).fetchone()
    assert row[:2] == ("maya", "mcp")


def test_stdio_needs_a_tenant(dsn):
    env = _env(dsn)
    env.pop("PGMEM_TENANT", None)
    out = subprocess.run([sys.executable, "-m", "pgmem.cli", "mcp"], capture_output=True, text=True, env=env,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "the tenant comes from --tenant or PGMEM_TENANT" in out.stderr


# ------------------------------------------------------------------------------ SQL tools
def test_a_sql_tool_is_one_entry_and_gets_the_callers_user(dsn):
    """The mechanism profile and context_for use, on a function every install has
    (export_user: what is stored about a user)."""
    _seed_other(dsn)
    extra = (SqlTool("what_you_know", "export_user", "Everything stored about the user."),
             SqlTool("not_installed", "no_such_function", "never registered"))
    tools = MemoryTools(dsn, principal=Principal("acme", "kofi"), embed=False, sql_tools=extra)

    async def go():
        async with Client(build_server(tools)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            out = await _call(c, "what_you_know", {})
        await tools.close()
        return names, out

    names, out = asyncio.run(go())
    assert names == BASE_TOOLS | {"what_you_know"}
    memories = out["result"]["memories"]
    assert [m["content"] for m in memories] == ["Kofi keeps his peanut butter in the office fridge"]


# ------------------------------------------------------------------------------ tokens
def test_token_file_keeps_digests_only(tmp_path):
    store = TokenStore(tmp_path / "t" / "tokens.json")
    a, b = store.add("acme", "maya"), store.add("beta")
    text = store.path.read_text()
    assert a not in text and b not in text and TokenStore.digest(a) in text
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert store.principals() == {TokenStore.digest(a): Principal("acme", "maya"), TokenStore.digest(b): Principal("beta")}


# ------------------------------------------------------------------------------ HTTP
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pgmem(env: dict, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pgmem.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120, stdin=subprocess.DEVNULL, **kw)


@pytest.fixture
def http_server(dsn, tmp_path):
    """``pgmem mcp --transport http`` on a free loopback port, with tokens for acme/maya and beta/bob."""
    env = _env(dsn, PGMEM_MCP_TOKENS=str(tmp_path / "tokens.json"))
    tokens = {}
    for tenant, user in (("acme", "maya"), ("beta", "bob")):
        made = _pgmem(env, "mcp", "--new-token", "--tenant", tenant, "--user", user)
        assert made.returncode == 0, made.stderr
        tokens[tenant] = made.stdout.strip()
        assert "shown only this once" in made.stderr
    port = _free_port()
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "pgmem.cli", "mcp", "--transport", "http", "--port", str(port),
                             "--no-embed"], env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            assert time.monotonic() < deadline, "the MCP server did not listen within 60 s"
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp", tokens
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def _client(url: str, token: str | None = None) -> Client:
    """The SDK's client over its streamable HTTP transport, with a bearer token when given."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)))


def test_http_bearer_tokens_map_to_tenants(http_server, dsn):
    url, tokens = http_server

    async def go():
        async with _client(url, tokens["acme"]) as maya:
            names = {t.name for t in (await maya.list_tools()).tools}
            stored = await _call(maya, "remember", {"content": "Maya's locker code is 4711"})
            mine = await _call(maya, "search", {"query": "locker code"})
        async with _client(url, tokens["beta"]) as bob:
            theirs = await _call(bob, "search", {"query": "locker code"})
            refused = await _error(bob, "history", {"memory_id": stored["id"]})
        return names, stored, mine, theirs, refused

    names, stored, mine, theirs, refused = asyncio.run(go())
    assert BASE_TOOLS <= names
    assert stored["decision"] == "stored"
    assert [m["id"] for m in mine["memories"]] == [stored["id"]] and mine["memories"][0]["signals"]["lexical"] > 0
    assert theirs["memories"] == [] and "does not exist" in refused
    with connect(dsn, tenant="acme") as c:
        assert c.execute("select tenant, user_id from pgmem.memories where id = %s",
                         (stored["id"],)).fetchone() == ("acme", "maya")


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token", "Basic bWF5YTpwdw==", "Bearer"])
def test_http_refuses_requests_without_a_valid_token(http_server, dsn, authorization):
    url, _ = http_server
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if authorization:
        headers["Authorization"] = authorization
    r = httpx2.post(url, json=init, headers=headers, timeout=30)
    assert r.status_code == 401
    assert r.headers["www-authenticate"].lower().startswith("bearer")
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "written without a token"}}}
    assert httpx2.post(url, json=call, headers=headers, timeout=30).status_code == 401
    with connect(dsn, tenant=None) as c:
        assert c.execute("select count(*) from pgmem.memories where content like 'written without%%'").fetchone()[0] == 0


def test_sdk_client_without_token_fails(http_server):
    """The SDK's own client gets no session without a token (the HTTP 401 is shown above; the
    client reports it as an error response)."""
    from mcp.shared.exceptions import MCPError

    url, _ = http_server

    async def go():
        async with _client(url) as c:
            await c.list_tools()

    with pytest.raises(BaseException) as ei:
        asyncio.run(go())
    errors, todo = [], [ei.value]
    while todo:
        e = todo.pop()
        errors.append(e)
        todo.extend(getattr(e, "exceptions", ()))
    assert any(isinstance(e, MCPError) and "error response" in str(e) for e in errors), errors


def test_http_only_on_loopback_and_tokens_name_the_tenant(dsn, tmp_path):
    env = _env(dsn, PGMEM_MCP_TOKENS=str(tmp_path / "none.json"))
    out = _pgmem(env, "mcp", "--transport", "http", "--host", "0.0.0.0")
    assert out.returncode == 2 and "loopback interface only" in out.stderr
    out = _pgmem(env, "mcp", "--transport", "http", "--tenant", "acme")
    assert out.returncode == 2 and "each bearer token names its tenant" in out.stderr
    out = _pgmem(env, "mcp", "--transport", "http", "--port", str(_free_port()))
    assert out.returncode == 2 and "no MCP tokens in" in out.stderr and "--new-token" in out.stderr
