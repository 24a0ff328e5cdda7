"""search(rewrite=True): the optional LLM round of issue 29, item 4, against a real
OpenAI-compatible HTTP server on 127.0.0.1 (tests/openai_server.py) and real MiniLM embeddings
(the int8 ONNX build). Off by default; without an LLM, or when it fails, the plain search."""
from __future__ import annotations

import json

import pytest

from pgmem import AsyncMemoryClient, MemoryClient
from pgmem.embedding import OnnxEmbedder
from pgmem.layered import LayeredLLM

QUESTION = "Where does my sister live, and what is my job?"
SUB = ["Where does my sister live?", "What is my job?"]
FACTS = ["My sister Carla moved to Madrid last spring.", "I work as a night nurse at St. Mary's hospital.",
         "The cat knocked a glass off the table again.", "We watched a documentary about volcanoes.",
         "Tomato plants need more sun than basil."]


@pytest.fixture(scope="module")
def embedder():
    return OnnxEmbedder(cache_size=0)


@pytest.fixture
def server():
    from openai_server import OpenAIServer

    with OpenAIServer() as s:
        yield s


@pytest.fixture
def mem(dsn, embedder):
    m = MemoryClient(dsn, tenant="acme", embedder=embedder)
    for f in FACTS:
        m.remember(f, force=True)
    m.llm = None
    yield m
    m.close()


def same(a, b) -> bool:
    """The same memories in the same order with the same scores (recency moves with the clock)."""
    return [h.id for h in a] == [h.id for h in b] and all(x.score == pytest.approx(y.score, abs=1e-6) for x, y in zip(a, b))


def chats(server) -> list[dict]:
    return server.paths("/chat/completions")


def test_rewrite_searches_with_each_query_and_keeps_the_best_score(mem, server):
    server.chat_answers.append(json.dumps({"queries": SUB + [QUESTION.upper()]}))  # the question itself is dropped
    mem.llm = LayeredLLM(server.url, "test-model", timeout=5, backoff=0.01)
    hits = mem.search(QUESTION, k=3, rewrite=True)
    # one chat request, with the question, asking for JSON
    (req,) = chats(server)
    body = req["body"]
    assert body["response_format"] == {"type": "json_object"} and body["messages"][-1]["content"] == QUESTION
    assert "queries" in body["messages"][0]["content"]
    # each memory's score is its best over the question and the two queries, and says which query found it
    runs = {q: {h.id: h.score for h in mem.search(q, k=len(FACTS))} for q in [QUESTION, *SUB]}
    for h in hits:
        want = max(r.get(h.id, 0.0) for r in runs.values())
        assert h.score == pytest.approx(want, abs=1e-6)
        assert runs[h.extra["query"]][h.id] == pytest.approx(h.score, abs=1e-6)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True) and len(hits) == 3
    by_text = {h.content: h for h in hits}
    # the sister and the job are both found, each through its own query
    assert by_text[FACTS[0]].extra["query"] == SUB[0] and by_text[FACTS[1]].extra["query"] == SUB[1]


def test_rewrite_is_off_by_default_and_optional(mem, server):
    plain = mem.search(QUESTION, k=3)
    assert chats(server) == []
    # rewrite without an LLM configured: the plain search, nothing asked
    assert same(mem.search(QUESTION, k=3, rewrite=True), plain)
    # an LLM that fails (HTTP 400) or answers nonsense: the plain search
    mem.llm = LayeredLLM(server.url, "test-model", timeout=5, backoff=0.01, retries=0)
    server.fail.append((400, {}, json.dumps({"error": {"message": "bad model"}})))
    assert same(mem.search(QUESTION, k=3, rewrite=True), plain)
    server.chat_answers.append(json.dumps({"answer": "Madrid"}))
    assert same(mem.search(QUESTION, k=3, rewrite=True), plain)
    assert len(chats(server)) == 2


def test_the_async_client_rewrites_too_and_touches_once(dsn, embedder, mem, server):
    import asyncio

    from conftest import connect

    server.chat_answers.append(json.dumps({"queries": SUB}))

    async def main():
        async with AsyncMemoryClient(dsn, tenant="acme", embedder=embedder) as amem:
            amem.llm = LayeredLLM(server.url, "test-model", timeout=5, backoff=0.01)
            return await amem.search(QUESTION, k=3, rewrite=True, touch=True)

    hits = asyncio.run(main())
    assert {h.content for h in hits} >= {FACTS[0], FACTS[1]} and len(chats(server)) == 1
    # touch => true: what was returned is touched once (pgmem.touch: one access each)
    with connect(dsn, tenant=None) as c:
        touched = c.execute("select memory_id from pgmem.accesses where tenant = 'acme' and kind = 'search'").fetchall()
    assert sorted(t[0] for t in touched) == sorted(h.id for h in hits)
