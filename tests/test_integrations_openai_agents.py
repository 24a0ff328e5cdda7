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


def test_a_new_session_of_the_same_user_remembers(dsn, server, monkeypatch):
    """Issue 32: a later session of the same user starts with what pgmem recalls for its first
    message (session_input_callback: pgmem.context_for), and the agent can search its memory
    itself (memory_tool), both through the SDK's Runner against the local server."""
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, set_tracing_disabled
    from openai import AsyncOpenAI

    from pgmem import MemoryClient
    from pgmem.integrations.openai_agents import PgmemSession, memory_tool

    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    set_tracing_disabled(True)
    mem = MemoryClient(dsn, tenant="acme", embedder="onnx")
    first = PgmemSession("monday", mem, user_id="maya")
    later = PgmemSession("friday", mem, user_id="maya")

    async def sessions():
        agent = _agent(server)
        await Runner.run(agent, "Hi!", session=first)
        await Runner.run(agent, "I am allergic to peanuts and I live in Lisbon.", session=first)
        await Runner.run(agent, "What restaurants are open late?", session=first)
        assert await later.get_items() == []  # a new session: no items of its own
        client = AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
        agent2 = Agent(name="assistant", instructions="You have a memory.", tools=[memory_tool(later)],
                       model=OpenAIChatCompletionsModel(model="test-model", openai_client=client))
        server.chat_answers = [{"tool_call": {"name": "search_memory", "arguments": {"query": "peanuts allergy"}}},
                               "You are allergic to peanuts."]
        return await Runner.run(agent2, "Can you suggest a snack for me?", session=later,
                                run_config=RunConfig(session_input_callback=later.recall_input))

    r = asyncio.run(sessions())
    assert r.final_output == "You are allergic to peanuts."
    calls = server.paths("/chat/completions")
    # 1. the first request of the new session carries what pgmem recalled, as a system message
    seeded = [m["content"] for m in calls[-2]["body"]["messages"] if m["role"] == "system"]
    recalled = "\n".join(seeded)
    assert "I am allergic to peanuts and I live in Lisbon." in recalled
    assert "Hi!" not in recalled and "What restaurants are open late?" not in recalled  # no greeting, no echo
    # 2. the agent's tool call searched pgmem, and its result went back to the model
    tool_results = [m for m in calls[-1]["body"]["messages"] if m["role"] == "tool"]
    assert tool_results and "allergic to peanuts" in tool_results[0]["content"]
    # the earlier session's turns were stored as kinds: a greeting none, a question, answers
    with connect(dsn) as c:
        kinds = dict(c.execute("select content, category from pgmem.memories where session_id = 'monday'").fetchall())
    assert "Hi!" not in kinds and kinds["What restaurants are open late?"] == "question"
    assert kinds["I am allergic to peanuts and I live in Lisbon."] not in ("question", "answer")
    assert {v for k, v in kinds.items() if k.startswith("I heard")} == {"answer"}
    mem.close()
