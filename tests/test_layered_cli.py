"""The layered CLI commands (pgmem context, reply, fact, profile, insights, mydata) against a
fresh database, in-process (pgmem.cli.main) with the real embedder."""
from __future__ import annotations

import json

import pytest

from pgmem.cli import main


@pytest.fixture
def cli(dsn, monkeypatch, capsys):
    monkeypatch.setenv("PGMEM_DSN", dsn)
    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)

    def run(*args):
        code = main([*args, "--tenant", "acme"])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def test_layered_cli(cli):
    code, out, _ = cli("context", "Hi, my name is Sam and I live in Oslo", "--conversation", "c", "--user", "sam")
    assert code == 0 and out.startswith("classified  ") and "intent=profile" in out and "profile    name=Sam, location=Oslo" in out
    code, out, _ = cli("context", "How does the HNSW index work?", "--conversation", "c", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["intent"] == "knowledge_base" and doc["user_id"] == "sam"
    assert [s["stage"] for s in doc["stages"]][0] == "classified" and doc["context"]["history"][0]["seq"] == 1
    code, out, _ = cli("reply", "We decided to use HNSW with m = 16.", "--conversation", "c")
    assert code == 0 and json.loads(out)["insights"][0]["type"] == "decision"
    code, out, _ = cli("fact", "sam", "location", "Bergen", "--statement", "I moved to Bergen")
    assert code == 0 and json.loads(out)["decision"] == "superseded"
    code, out, _ = cli("profile", "sam", "--json")
    assert json.loads(out) == {"name": "Sam", "location": "Bergen"}
    code, out, _ = cli("profile", "sam", "--history", "--key", "location")
    assert [line.split()[2] for line in out.splitlines()[2:]] == ["Oslo", "Oslo", "Bergen"]
    code, out, _ = cli("insights", "HNSW", "--user", "sam")
    assert "We decided to use HNSW with m = 16." in out
    code, out, _ = cli("mydata", "sam")
    assert json.loads(out)["tiers"]["semantic"]["current"] == {"name": "Sam", "location": "Bergen"}
    code, out, err = cli("mydata", "sam", "--erase")
    assert code != 0 and "add --yes to confirm" in err
    code, out, _ = cli("mydata", "sam", "--erase", "--yes")
    assert code == 0 and json.loads(out)["memories"] == 3
    code, out, _ = cli("mydata", "sam")
    assert json.loads(out)["tiers"]["conversational"]["conversations"] == 0


def test_mcp_context_for_and_profile_tools(dsn, monkeypatch):
    """The MCP server registers context_for and profile when the layered tiers are installed
    (pgmem.mcp_server.SQL_TOOLS): the agent names the conversation, the server the tenant and user."""
    import asyncio

    pytest.importorskip("mcp")
    from mcp import Client

    from pgmem.mcp_server import MemoryTools, Principal, build_server

    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)
    tools = MemoryTools(dsn, principal=Principal("acme", "maya"))

    async def call(c, tool, args):
        r = await c.call_tool(tool, args)
        assert not r.is_error, r.content[0].text
        return r.structured_content

    async def go():
        async with Client(build_server(tools)) as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            first = await call(c, "context_for", {"query": "Hi! My name is Maya and I live in Lisbon.", "conversation_id": "m1"})
            kb = await call(c, "context_for", {"query": "How do I tune an HNSW index in pgvector?", "conversation_id": "m1"})
            prof = await call(c, "profile", {})
            mine = await call(c, "context_for", {"query": "What do you know about me?", "conversation_id": "m1"})
            missing = await c.call_tool("context_for", {"query": "no conversation"})
        await tools.close()
        return listed, first, kb, prof, mine, missing

    listed, first, kb, prof, mine, missing = asyncio.run(go())
    schema = listed["context_for"].input_schema
    assert set(schema["required"]) == {"query", "conversation_id"} and "user_id" not in schema["properties"]
    assert "tenant" not in json.dumps(schema) and listed["profile"].input_schema.get("required", []) == []
    doc = first["result"]
    assert (doc["intent"], doc["user_id"], doc["conversation_id"]) == ("profile", "maya", "m1")
    stage = lambda d, name: next(s for s in d["stages"] if s["stage"] == name)  # noqa: E731
    assert doc["stages"][0]["stage"] == "classified" and doc["stages"][0]["confidence"] == 0.92
    assert doc["context"]["profile"] == {"name": "Maya", "location": "Lisbon"}
    assert kb["result"]["intent"] == "knowledge_base" and stage(kb["result"], "policy")["inject_rag"]
    assert {(r["key"], r["value"]) for r in prof["rows"]} == {("name", "Maya"), ("location", "Lisbon")}
    priv = mine["result"]
    assert priv["intent"] == "privacy" and stage(priv, "policy")["privacy_mode"]
    assert priv["context"]["privacy"]["tiers"]["semantic"]["current"] == {"name": "Maya", "location": "Lisbon"}
    assert priv["context"]["privacy"]["tiers"]["conversational"]["messages"] == 3
    assert missing.is_error and "conversation_id" in missing.content[0].text
