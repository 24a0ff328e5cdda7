"""The OpenAI Agents SDK session on pgmem (pgmem.integrations.openai_agents.PgmemSession),
run by the SDK's own Runner against a local OpenAI-compatible server (tests/openai_server.py)
on 127.0.0.1: the second turn's request carries the first turn, read back from pgmem."""
from __future__ import annotations

import asyncio
import os

import pytest

pytest.importorskip("agents", reason="needs the [openai-agents] extra")

from conftest import connect  # noqa: E402
from sqlhelpers import rows, scalar  # noqa: E402


@pytest.fixture
def server():
    from openai_server import OpenAIServer

    with OpenAIServer(api_key="sk-test") as s:
        yield s


def _agent(server):
    from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no traces sent anywhere
    client = AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
    return Agent(name="assistant", instructions="You are a helpful assistant with a memory.",
                 model=OpenAIChatCompletionsModel(model="test-model", openai_client=client))


def test_the_runner_keeps_the_conversation_in_pgmem(dsn, server, monkeypatch):
    from agents import Runner

    from pgmem import MemoryClient
    from pgmem.integrations.openai_agents import PgmemSession

    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    agent = _agent(server)
    mem = MemoryClient(dsn, tenant="acme", embedder=None)
    session = PgmemSession("chat-42", mem, user_id="maya")

    async def turns():
        r1 = await Runner.run(agent, "My name is Maya and I am allergic to peanuts", session=session)
        r2 = await Runner.run(agent, "What am I allergic to?", session=session)
        return r1, r2

    r1, r2 = asyncio.run(turns())
    assert r1.final_output == "I heard: My name is Maya and I am allergic to peanuts"
    # the second request sent the first turn, which the SDK read from pgmem (get_items)
    second = server.paths("/chat/completions")[-1]["body"]["messages"]
    contents = [m.get("content") for m in second]
    assert "My name is Maya and I am allergic to peanuts" in contents
    assert "I heard: My name is Maya and I am allergic to peanuts" in contents
    assert r2.final_output.endswith("| What am I allergic to?")

    items = asyncio.run(session.get_items())
    assert [i.get("role") for i in items] == ["user", "assistant", "user", "assistant"]
    assert asyncio.run(session.get_items(limit=2))[0]["content"] == "What am I allergic to?"
    with connect(dsn) as c:
        assert scalar(c, "select count(*) from pgmem.session_items where session_id = 'chat-42'") == 4
        # the text turns are memories of the user too: long-term memory from the conversation
        got = rows(c, "select who, user_id, session_id, content from pgmem.memories order by id")
    assert {(g["who"], g["user_id"], g["session_id"]) for g in got} == {("user", "maya", "chat-42"),
                                                                       ("assistant", "maya", "chat-42")}
    hits = mem.search("peanuts allergy", k=3, filters={"user_id": "maya"})
    assert hits and "peanuts" in hits[0].content

    # pop and clear: gone for the SDK, kept (marked removed) in pgmem
    last = asyncio.run(session.pop_item())
    assert last["role"] == "assistant" and len(asyncio.run(session.get_items())) == 3
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == [] and asyncio.run(session.pop_item()) is None
    with connect(dsn) as c:
        assert scalar(c, "select count(*) from pgmem.session_items where removed_at is not null") == 4
    # another session of the same tenant starts empty
    assert asyncio.run(PgmemSession("chat-43", mem).get_items()) == []
    mem.close()


def test_tool_calls_round_trip_exactly(dsn):
    """Items that are not messages (a function call and its output) come back as they went in."""
    from pgmem import MemoryClient
    from pgmem.integrations.openai_agents import PgmemSession

    items = [{"role": "user", "content": [{"type": "input_text", "text": "weather in Oslo?"}]},
             {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
             {"type": "function_call_output", "call_id": "c1", "output": "{\"temp\": -3}"}]
    with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
        s = PgmemSession("tools-1", mem, remember=False)
        asyncio.run(s.add_items(items))
        assert asyncio.run(s.get_items()) == items
        assert mem.list_memories() == []  # remember=False: nothing remembered
    with pytest.raises(ValueError, match="session_id must be a non-empty string"):
        PgmemSession(" ", mem)
