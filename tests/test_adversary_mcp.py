"""The MCP server mounted on ``pgmem serve`` (issues 34 and 35): it takes tokens made after
the server started and stops taking revoked ones; tokens can be listed and revoked; an error
never shows an agent the database login or the administrator's grant SQL."""
from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from conftest import TEMPLATE, _janitor, grant_tenant, login_roles
from webhelpers import FakeLLM, Running, embedder, request  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def db(cluster):
    j = _janitor(cluster, f"t_advmcp_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


@pytest.fixture(scope="module")
def logins(cluster):
    yield from login_roles(cluster, "advmcp_", {"app": "pgmem_app"})


def _call(url: str, token: str, tool: str, args: dict):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def go():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http:
            async with Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
                res = await client.call_tool(tool, args)
                return res.is_error, res.content[0].text

    return asyncio.run(go())


def _ping(url: str, token: str | None) -> int:
    return request(url + "/mcp", "POST", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, token,
                   headers={"Accept": "application/json, text/event-stream"})[0]


def test_mcp_takes_tokens_made_after_start_and_drops_revoked_ones(db, embedder, tmp_path):
    pytest.importorskip("mcp")
    from pgmem.mcp_server import TokenStore
    from pgmem.web.app import build_app
    from pgmem.web.llm import ChatModel

    store = TokenStore(tmp_path / "tokens.json")  # no token yet
    llm = FakeLLM()
    srv = Running(build_app(db, token_file=store.path, embedder=embedder, model=ChatModel(llm.url, "fake")))
    try:
        assert _ping(srv.url, None) == 401
        token = store.add("acme", "maya")  # made after the server started
        err, text = _call(srv.url, token, "remember", {"content": "My cat is called Miso"})
        assert not err and json.loads(text)["decision"] == "stored", text
        err, text = _call(srv.url, token, "search", {"query": "cat name", "k": 1})
        assert not err and "Miso" in text
        # listed without the token itself, and revoked by its id
        listing = store.listing()
        assert [(r["tenant"], r["user"]) for r in listing] == [("acme", "maya")] and token not in json.dumps(listing)
        gone = store.revoke(listing[0]["id"])
        assert gone["tenant"] == "acme"
        assert _ping(srv.url, token) == 401
        assert request(srv.url + "/api/session", token=token)[0] == 401
        with pytest.raises(Exception, match="no token"):
            store.revoke(listing[0]["id"])
    finally:
        srv.stop()
        llm.close()


def test_mcp_cli_lists_and_revokes_tokens(tmp_path, capsys):
    from pgmem.mcp_server import TokenStore, cmd_mcp, register
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    path = tmp_path / "t.json"
    token = TokenStore(path).add("acme", "bob")
    args = parser.parse_args(["mcp", "--tokens", str(path), "--list-tokens"])
    assert cmd_mcp(args) == 0
    out = capsys.readouterr().out
    assert "tenant=acme" in out and "user=bob" in out and token not in out
    tid = out.split()[0]
    assert cmd_mcp(parser.parse_args(["mcp", "--tokens", str(path), "--revoke-token", tid])) == 0
    assert TokenStore(path).listing() == []


def test_mcp_errors_never_show_the_login_or_grant_sql(cluster, db, logins, embedder, tmp_path):
    """The server's login is granted tenant acme only; a token of tenant beta gets a plain
    refusal, with neither the login's name nor the grant SQL."""
    pytest.importorskip("mcp")
    from pgmem.mcp_server import TokenStore
    from pgmem.web.app import build_app
    from pgmem.web.llm import ChatModel

    name, pw = logins["app"]
    grant_tenant(db, name, "acme")
    params = conninfo_to_dict(db)
    params.update(user=name, password=pw)
    app_dsn = make_conninfo(**params)
    store = TokenStore(tmp_path / "tokens.json")
    beta = store.add("beta", "eve")
    llm = FakeLLM()
    srv = Running(build_app(app_dsn, token_file=store.path, embedder=embedder, model=ChatModel(llm.url, "fake")))
    try:
        for tool, args in (("search", {"query": "anything"}), ("remember", {"content": "eve was here"})):
            err, text = _call(srv.url, beta, tool, args)
            assert err, text
            low = text.lower()
            assert name.lower() not in low and "grant_tenant(" not in low and "select " not in low, text
            assert "may not act for your tenant" in text
        # an input error is still told in the database's words
        err, text = _call(srv.url, store.add("acme", "ann"), "search", {"query": "x", "k": 0})
        assert err and ("k" in text) and name.lower() not in text.lower()
    finally:
        srv.stop()
        llm.close()
