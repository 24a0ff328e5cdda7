"""pgmem.compat.Memory against mem0: the signatures of the installed mem0ai's Memory, and a
script written for mem0 that runs unchanged but for its import, on a real database."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from scripted_llm import completion, llm  # noqa: F401  (the scripted OpenAI-compatible server fixture)

METHODS = ["add", "get", "get_all", "search", "update", "delete", "delete_all", "history", "reset", "chat"]


def test_signatures_are_mem0s():
    mem0 = pytest.importorskip("mem0", reason="needs mem0ai to compare the signatures ([mem0] extra)")
    from pgmem.compat import Memory

    for name in METHODS:
        theirs = inspect.signature(getattr(mem0.Memory, name))
        ours = inspect.signature(getattr(Memory, name))
        assert list(theirs.parameters) == list(ours.parameters), name
        for p in theirs.parameters:
            a, b = theirs.parameters[p], ours.parameters[p]
            assert a.kind == b.kind, (name, p)
            if a.default is inspect.Parameter.empty or type(a.default) is object:  # mem0's private sentinels
                assert (b.default is inspect.Parameter.empty) == (a.default is inspect.Parameter.empty), (name, p)
            else:
                assert a.default == b.default, (name, p, a.default, b.default)
    assert inspect.signature(Memory.from_config).parameters.keys() == inspect.signature(mem0.Memory.from_config).parameters.keys()


MEM0_SCRIPT = '''
import json
from mem0 import Memory

m = Memory()
out = {}
out["add"] = m.add([{"role": "user", "content": "I'm allergic to peanuts"},
                    {"role": "assistant", "content": "Got it, no peanuts for you."}], user_id="maya",
                   metadata={"source": "chat"})
out["add_again"] = m.add("I'm allergic to peanuts", user_id="maya")
out["add_raw"] = m.add("Tom flies to Tokyo on Friday", user_id="tom", infer=False)
found = m.search("what food is maya allergic to", filters={"user_id": "maya"}, top_k=3)
out["search"] = found
first = found["results"][0]
out["get"] = m.get(first["id"])
out["get_all"] = m.get_all(filters={"user_id": "maya"})
out["update"] = m.update(first["id"], text="I'm allergic to peanuts and cashews")
out["after_update"] = m.get(first["id"])
out["history"] = m.history(first["id"])
out["by_metadata"] = m.get_all(filters={"user_id": "maya", "source": "chat"})
try:
    m.search("x", user_id="maya")
except ValueError as e:
    out["top_level_ids"] = str(e)
out["delete"] = m.delete(first["id"])
out["gone"] = m.get(first["id"])
out["delete_all"] = m.delete_all(user_id="maya")
out["left"] = m.get_all(filters={"user_id": "maya"})
out["tom"] = m.get_all(filters={"user_id": "tom"})
print(json.dumps(out, default=str))
'''


def test_a_mem0_script_runs_unchanged_but_for_the_import(dsn, tmp_path):
    script = tmp_path / "app.py"
    script.write_text(MEM0_SCRIPT.replace("from mem0 import Memory", "from pgmem.compat import Memory"))
    env = {**os.environ, "PGMEM_DSN": dsn, "PGMEM_TENANT": "acme", "PYTHONPATH": str(ROOT / "python"),
           "PGMEM_EMBEDDER": "onnx"}
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    added = out["add"]["results"]
    # infer=True keeps the user's statements: the assistant's pleasantry is no fact about maya
    assert [a["event"] for a in added] == ["ADD"] and added[0]["memory"] == "I'm allergic to peanuts"
    assert all(isinstance(a["id"], str) for a in added)
    assert out["add_again"]["results"][0]["event"] == "NONE"  # the surprise gate: nothing new
    assert out["add_again"]["results"][0]["id"] == added[0]["id"]
    assert out["add_raw"]["results"][0]["event"] == "ADD"
    hits = out["search"]["results"]
    assert hits[0]["memory"] == "I'm allergic to peanuts" and hits[0]["user_id"] == "maya"
    assert set(hits[0]) >= {"id", "memory", "hash", "metadata", "score", "created_at", "updated_at", "user_id"}
    assert hits[0]["metadata"] == {"source": "chat"} and hits[0]["score"] > 0.1
    assert all(h["user_id"] == "maya" for h in hits)
    assert out["get"]["memory"] == "I'm allergic to peanuts" and out["get"]["id"] == hits[0]["id"]
    assert {r["memory"] for r in out["get_all"]["results"]} == {"I'm allergic to peanuts"}
    assert out["update"] == {"message": "Memory updated successfully!"}
    assert out["after_update"]["memory"] == "I'm allergic to peanuts and cashews"
    h = out["history"]
    assert [x["event"] for x in h] == ["ADD", "UPDATE"]  # the repeated add changed nothing: no event, as in mem0
    assert h[1]["old_memory"] == "I'm allergic to peanuts" and h[1]["new_memory"] == "I'm allergic to peanuts and cashews"
    assert len(out["by_metadata"]["results"]) == 1
    assert "in filters" in out["top_level_ids"]
    assert out["delete"] == {"message": "Memory deleted successfully!"} and out["gone"] is None
    assert out["delete_all"] == {"message": "Memories deleted successfully!"}
    assert out["left"] == {"results": []}
    assert [r["memory"] for r in out["tom"]["results"]] == ["Tom flies to Tokyo on Friday"]


def test_add_keeps_statements_not_greetings_or_questions(dsn):
    """mem0's add extracts facts: "Nice to meet you Alex!" is none, and must not outrank
    "I love pizza" for "what food does alex like" (issue 32)."""
    from pgmem import MemoryClient
    from pgmem.compat import Memory

    m = Memory(client=MemoryClient(dsn, tenant="acme", embedder="onnx"))
    out = m.add([{"role": "user", "content": "Hi there!"}, {"role": "assistant", "content": "Nice to meet you Alex!"},
                 {"role": "user", "content": "I love pizza"}, {"role": "user", "content": "What do you like?"},
                 {"role": "user", "content": "ok thanks"}], user_id="alex")
    assert [(r["event"], r["memory"]) for r in out["results"]] == [("ADD", "I love pizza")]
    hits = m.search("what food does alex like", filters={"user_id": "alex"})["results"]
    assert [h["memory"] for h in hits] == ["I love pizza"]
    # an agent's memories (agent_id alone): the agent's statements
    out = m.add([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "I answer in French."}],
                agent_id="bot")
    assert [r["memory"] for r in out["results"]] == ["I answer in French."]
    # infer=False stores every message as it is
    raw = m.add("Nice to meet you Alex!", user_id="alex", infer=False)
    assert raw["results"][0]["event"] == "ADD"


def test_ids_tenant_and_config_errors_name_the_problem(dsn, monkeypatch):
    from pgmem import MemoryClient
    from pgmem.compat import Memory

    m = Memory(client=MemoryClient(dsn, tenant="acme", embedder="onnx"))
    for bad in ("not-a-number", "3f2b1c9e-uuid", 1.5):
        with pytest.raises(ValueError, match="is not a pgmem memory id"):
            m.get(bad)
    assert m.get("999999") is None
    monkeypatch.delenv("PGMEM_TENANT", raising=False)
    monkeypatch.setenv("PGMEM_DSN", dsn)
    with pytest.raises(ValueError, match="needs a tenant"):
        Memory()
    monkeypatch.setenv("PGMEM_TENANT", "acme")
    with pytest.raises(ValueError, match="vector_store provider 'qdrant' not supported"):
        Memory.from_config({"vector_store": {"provider": "qdrant", "config": {"path": "/tmp/q"}}})
    with pytest.raises(ValueError, match="graph_store not supported"):
        Memory.from_config({"graph_store": {"provider": "neo4j"}})
    with pytest.raises(ValueError, match="llm provider 'anthropic' not supported"):
        Memory.from_config({"llm": {"provider": "anthropic", "config": {"model": "claude"}}})
    # a supported config is mapped: pgvector's connection string, an OpenAI-compatible LLM
    mm = Memory.from_config({"vector_store": {"provider": "pgvector", "config": {"connection_string": dsn}},
                             "llm": {"provider": "openai", "config": {"model": "m", "openai_base_url": "http://127.0.0.1:9/v1",
                                                                      "api_key": "k"}}})
    assert mm.client.dsn == dsn and type(mm.client.extractor).__name__ == "LLMExtractor"
    mm.close()


def test_mem0_filter_operators(dsn):
    """mem0's filter operators (eq, ne, gt, gte, lt, lte, in, nin, contains, AND, OR, NOT) on
    metadata, through pgmem's filter metadata_path (a SQL/JSON path predicate) in search and
    get_all alike."""
    from pgmem import MemoryClient
    from pgmem.compat import Memory

    m = Memory(client=MemoryClient(dsn, tenant="acme", embedder="onnx"))
    rows = [("I walk my dog every morning", {"score": 1, "source": "chat", "tags": ["pets"]}),
            ("I cook pasta on Sundays", {"score": 3, "source": "email", "tags": ["food"]}),
            ("I love spicy ramen", {"score": 5, "source": "chat", "tags": ["food", "japan"]}),
            ("I play chess on Tuesdays", {"score": 4})]
    for text, meta in rows:
        assert m.add(text, user_id="u", metadata=meta, infer=False)["results"][0]["event"] == "ADD"

    def got(**flt):
        a = {r["memory"] for r in m.get_all(filters={"user_id": "u", **flt})["results"]}
        b = {r["memory"] for r in m.search("what do I do", filters={"user_id": "u", **flt}, threshold=0)["results"]}
        assert a == b, (flt, a, b)
        return {t.split()[1] for t in a}  # the verb: walk, cook, love, play

    assert got(score={"gt": 3}) == {"love", "play"}
    assert got(score={"gte": 3, "lt": 5}) == {"cook", "play"}
    assert got(score={"lte": 1}) == {"walk"}
    assert got(source="chat") == got(source={"eq": "chat"}) == {"walk", "love"}
    assert got(source={"ne": "chat"}) == {"cook", "play"}  # no source: not equal
    assert got(source={"in": ["email", "fax"]}) == {"cook"}
    assert got(source={"nin": ["chat"]}) == {"cook", "play"}
    assert got(tags={"contains": "food"}) == {"cook", "love"}
    assert got(source={"icontains": "MAI"}) == {"cook"}
    assert got(OR=[{"score": {"lt": 2}}, {"tags": {"contains": "japan"}}]) == {"walk", "love"}
    assert got(AND=[{"source": "chat"}, {"score": {"gt": 2}}]) == {"love"}
    assert got(NOT=[{"source": "chat"}]) == {"cook", "play"}
    with pytest.raises(ValueError, match="unknown operator 'between'"):
        got(score={"between": [1, 2]})
    with pytest.raises(ValueError, match="inside AND/OR/NOT"):
        got(OR=[{"user_id": "x"}])


def test_add_with_an_llm_makes_mem0s_decisions(dsn, llm):
    """With an OpenAI-compatible LLM (a scripted one on 127.0.0.1), add() does what mem0's does:
    the LLM extracts the facts, then decides ADD / UPDATE / DELETE / NONE against the nearest
    memories of the same user, shown to it under small local ids; pgmem applies each decision
    (history keeps every change)."""
    import json as _json

    from pgmem import MemoryClient
    from pgmem.compat import Memory
    from pgmem.layered import LayeredLLM

    client = MemoryClient(dsn, tenant="acme", embedder="onnx")
    client.llm = LayeredLLM(llm.base_url, "test-model", None, retries=0)
    m = Memory(client=client)
    llm.answer(200, completion(_json.dumps({"facts": ["Is allergic to peanuts", "Lives in Lisbon"]})))
    llm.answer(200, completion(_json.dumps({"memory": [{"id": "0", "text": "Is allergic to peanuts", "event": "ADD"},
                                                       {"id": "1", "text": "Lives in Lisbon", "event": "ADD"}]})))
    first = m.add([{"role": "user", "content": "Hi! I'm allergic to peanuts and I live in Lisbon."},
                   {"role": "assistant", "content": "Noted!"}], user_id="maya")["results"]
    assert [(r["event"], r["memory"]) for r in first] == [("ADD", "Is allergic to peanuts"), ("ADD", "Lives in Lisbon")]
    peanuts, lisbon = first[0]["id"], first[1]["id"]
    # the fact extraction saw the conversation; no system message of the caller's
    asked = llm.requests[0]["body"]["messages"][1]["content"]
    assert "user: Hi! I'm allergic to peanuts" in asked and "assistant: Noted!" in asked

    llm.script.clear()
    llm.answer(200, completion(_json.dumps({"facts": ["Is allergic to peanuts and cashews", "Moved to Porto"]})))

    def decide(body):  # the decisions name the memories by the local ids pgmem showed
        shown = _json.loads(body["messages"][1]["content"])["existing_memories"]
        assert all(x["id"].isdigit() and int(x["id"]) < 10 for x in shown)  # local ids, not pgmem's
        by_text = {x["text"]: x["id"] for x in shown}
        return completion(_json.dumps({"memory": [
            {"id": by_text["Is allergic to peanuts"], "text": "Is allergic to peanuts and cashews", "event": "UPDATE",
             "old_memory": "Is allergic to peanuts"},
            {"id": by_text["Lives in Lisbon"], "text": "Lives in Lisbon", "event": "DELETE"},
            {"id": "9", "text": "Lives in Porto", "event": "ADD"}]}))
    llm.answer(200, decide)
    second = m.add("Actually it's peanuts and cashews, and I moved to Porto.", user_id="maya")["results"]
    events = {r["event"]: r for r in second}
    assert set(events) == {"UPDATE", "DELETE", "ADD"}
    assert events["UPDATE"]["id"] == peanuts and events["UPDATE"]["previous_memory"] == "Is allergic to peanuts"
    assert events["DELETE"]["id"] == lisbon
    assert m.get(peanuts)["memory"] == "Is allergic to peanuts and cashews" and m.get(lisbon) is None
    assert [h["event"] for h in m.history(peanuts)] == ["ADD", "UPDATE"]
    assert [h["event"] for h in m.history(lisbon)] == ["ADD", "DELETE"]
    # an LLM that fails: the statements are kept as without one
    llm.script[:] = [(500, {"error": "down"}, 0.0)]
    kept = m.add([{"role": "user", "content": "I play the violin."}], user_id="maya")["results"]
    assert [(r["event"], r["memory"]) for r in kept] == [("ADD", "I play the violin.")]
