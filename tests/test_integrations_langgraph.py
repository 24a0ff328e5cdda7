"""The LangGraph store on pgmem (pgmem.integrations.langgraph.PgmemStore), inside a real
LangGraph graph whose chat model is langchain_core's fake chat model; real MiniLM vectors
(the int8 build), a real database."""
from __future__ import annotations

import asyncio
import uuid

import pytest

pytest.importorskip("langgraph", reason="needs the [langgraph] extra")

from conftest import connect  # noqa: E402
from sqlhelpers import rows  # noqa: E402


@pytest.fixture(scope="module")
def embedder():
    from pgmem.embedding import OnnxEmbedder

    return OnnxEmbedder()


@pytest.fixture
def store(dsn, embedder):
    from pgmem import MemoryClient
    from pgmem.integrations.langgraph import PgmemStore

    s = PgmemStore(MemoryClient(dsn, tenant="acme", embedder=embedder))
    yield s
    s.close()


def test_put_get_search_delete(store, dsn):
    ns = ("memories", "maya")
    store.put(ns, "allergy", {"content": "Maya is allergic to peanuts", "kind": "health", "confidence": 0.9})
    store.put(ns, "editor", {"content": "Maya switched from VS Code to Neovim", "kind": "tools", "confidence": 0.6})
    store.put(("memories", "tom"), "trip", {"content": "Tom flies to Japan on 17 October", "kind": "travel"})
    item = store.get(ns, "allergy")
    assert item.value == {"content": "Maya is allergic to peanuts", "kind": "health", "confidence": 0.9}
    assert item.namespace == ns and item.key == "allergy" and item.created_at is not None
    assert store.get(ns, "nothing") is None
    # pgmem's fused search, under the namespace prefix
    hits = store.search(ns, query="what food can maya not eat")
    assert [h.key for h in hits][0] == "allergy" and hits[0].score > 0
    assert {h.key for h in hits} == {"allergy", "editor"}  # not tom's
    assert {h.key for h in store.search(("memories",), query="flight to japan")} >= {"trip"}
    # filters on the value's fields: equality and comparisons
    assert [h.key for h in store.search(ns, filter={"kind": "tools"})] == ["editor"]
    assert [h.key for h in store.search(ns, query="maya", filter={"confidence": {"$gte": 0.8}})] == ["allergy"]
    assert [h.key for h in store.search(ns, limit=1)] == ["editor"]  # no query: newest first
    # namespaces map onto pgmem's scopes: ("memories", user_id)
    with connect(dsn) as c:
        got = rows(c, "select user_id, content from pgmem.memories where metadata->'item'->>'key' = 'allergy'")
    assert got == [{"user_id": "maya", "content": "Maya is allergic to peanuts"}]
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "maya"), ("memories", "tom")]
    assert store.list_namespaces(max_depth=1) == [("memories",)]
    assert store.list_namespaces(suffix=("tom",)) == [("memories", "tom")]
    # put again: updated in place, the old value in history
    store.put(ns, "allergy", {"content": "Maya is allergic to peanuts and cashews", "kind": "health"})
    assert store.get(ns, "allergy").value["content"].endswith("cashews")
    with connect(dsn) as c:
        mid = rows(c, "select id from pgmem.memories where metadata->'item'->>'key' = 'allergy'")[0]["id"]
        ops = [r["op"] for r in rows(c, "select op from pgmem.history where memory_id = %s order by id", (mid,))]
    assert ops[0] == "add" and "update" in ops
    assert store.search(ns, query="cashews")[0].key == "allergy"
    # delete: gone for the store, kept (restorable) in pgmem
    store.delete(ns, "allergy")
    assert store.get(ns, "allergy") is None
    assert "allergy" not in {h.key for h in store.search(ns, query="peanuts")}
    with connect(dsn) as c:
        assert rows(c, "select state from pgmem.memories where id = %s", (mid,)) == [{"state": "deleted"}]
    store.put(ns, "allergy", {"content": "Maya is allergic to peanuts"})  # and put again: restored
    assert store.get(ns, "allergy") is not None


def test_index_fields_and_async(store):
    from pgmem.integrations.langgraph import PgmemStore

    s = PgmemStore(store._client, index={"fields": ["summary"]})

    async def go():
        await s.aput(("notes", "maya"), "n1", {"summary": "dentist appointment next tuesday", "body": "x"})
        await s.aput(("notes", "maya"), "n2", {"summary": "buy oat milk", "body": "y"}, index=False)
        got = await s.aget(("notes", "maya"), "n1")
        hits = await s.asearch(("notes",), query="when do I see the dentist")
        return got, hits

    got, hits = asyncio.run(go())
    assert got.value["body"] == "x"
    assert hits[0].key == "n1"


def test_a_langgraph_graph_writes_and_recalls_memories(store):
    """A graph with a memory-writing node and a recalling node, compiled with the pgmem store:
    one thread tells a fact, a later thread (the same user) recalls it through the store."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.store.base import BaseStore

    model = GenericFakeChatModel(messages=iter([AIMessage(content="Noted."), AIMessage(content="Peanuts.")]))
    seen_prompts: list[str] = []

    class State(MessagesState):
        recalled: list[str]

    def remember(state: State, config, *, store: BaseStore):
        user = config["configurable"]["user_id"]
        text = state["messages"][-1].content
        if text.lower().startswith("remember"):
            store.put(("memories", user), str(uuid.uuid4()), {"content": text.split(":", 1)[1].strip()})
        return {}

    def respond(state: State, config, *, store: BaseStore):
        user = config["configurable"]["user_id"]
        hits = store.search(("memories", user), query=state["messages"][-1].content, limit=3)
        recalled = [h.value["content"] for h in hits]
        prompt = "You know about the user: " + "; ".join(recalled)
        seen_prompts.append(prompt)
        reply = model.invoke([SystemMessage(content=prompt), *state["messages"]])
        return {"messages": [reply], "recalled": recalled}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("respond", respond)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "respond")
    builder.add_edge("respond", END)
    graph = builder.compile(store=store)

    cfg = {"configurable": {"user_id": "maya", "thread_id": "t1"}}
    out = graph.invoke({"messages": [HumanMessage(content="Remember: I am allergic to peanuts")]}, cfg)
    assert out["messages"][-1].content == "Noted."
    store.put(("memories", "maya"), "other", {"content": "I switched from VS Code to Neovim"})
    store.put(("memories", "tom"), "toms", {"content": "I am allergic to shellfish"})  # another user
    cfg2 = {"configurable": {"user_id": "maya", "thread_id": "t2"}}
    out = graph.invoke({"messages": [HumanMessage(content="What food should I avoid?")]}, cfg2)
    assert out["recalled"][0] == "I am allergic to peanuts"
    assert "I am allergic to shellfish" not in out["recalled"]
    assert "I am allergic to peanuts" in seen_prompts[-1] and out["messages"][-1].content == "Peanuts."
