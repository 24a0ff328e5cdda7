"""The web chat and the knowledge base (issue 32 items 7 and 8; issue 36 L28): REST routes for
documents (ingest, list, search, delete), the chat's "Knowledge base" block when the policy
injects RAG, and use recorded for the ✓ memories the prompt carried, never the ○ candidates."""
from __future__ import annotations

import uuid

import pytest

from conftest import TEMPLATE, _janitor
from webhelpers import Running, embedder, llm, make_app, request  # noqa: F401  (fixtures)

RUNBOOK = ("Release runbook. To deploy a release of the billing service, run make release on the build host, "
           "then tag the commit with the version number and announce it in the ops channel. "
           "Rollbacks use make rollback with the previous tag.")


@pytest.fixture(scope="module")
def db(cluster):
    j = _janitor(cluster, f"t_webdocs_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    from pgmem.mcp_server import TokenStore

    store = TokenStore(tmp_path_factory.mktemp("webdocs") / "tokens.json")
    return {"path": store.path, "acme": store.add("acme"), "maya": store.add("acme", "maya")}


@pytest.fixture(scope="module")
def web(db, tokens, embedder, llm):
    running = Running(make_app(db, tokens, embedder, llm, mcp=False))
    yield running
    running.stop()


def test_document_routes_and_the_chats_knowledge_base(web, tokens, llm):
    acme, maya = tokens["acme"], tokens["maya"]
    st, _, doc = request(web.url + "/api/documents", "POST", {"title": "Release runbook", "content": RUNBOOK,
                                                              "source": "wiki/release"}, acme)
    assert st == 200 and doc["decision"] == "stored" and doc["chunks"] >= 1, doc
    doc_id = doc["document_id"]
    st, _, listed = request(web.url + "/api/documents", token=acme)
    assert st == 200 and [d["id"] for d in listed["documents"]] == [doc_id]
    assert listed["documents"][0]["embedded"] == listed["documents"][0]["chunks"]
    st, _, found = request(web.url + "/api/documents/search", "POST", {"query": "how do I deploy a release", "k": 3}, acme)
    assert st == 200 and found["chunks"][0]["document_id"] == doc_id
    # a user's token sees the tenant's documents, and may not delete them
    assert request(web.url + "/api/documents/search", "POST", {"query": "deploy a release"}, maya)[2]["chunks"]
    st, _, got = request(web.url + f"/api/documents/{doc_id}", "DELETE", token=maya)
    assert st == 404, got
    # the chat: a knowledge question carries the excerpt in a "Knowledge base" block
    st, _, chat = request(web.url + "/api/chat", "POST", {"message": "How do I deploy a release of the billing service?",
                                                          "conversation_id": "c-docs"}, maya)
    assert st == 200, chat
    system = llm.last_system_text()
    if chat["intent"] == "knowledge_base":
        assert "Knowledge base" in system and "make release" in system, system
    st, _, chat = request(web.url + "/api/chat", "POST", {"message": "What does the release runbook say about rollbacks?",
                                                          "conversation_id": "c-docs2"}, acme)
    assert st == 200 and chat["intent"] == "knowledge_base", chat
    assert "Knowledge base" in llm.last_system_text() and "[Release runbook]" in llm.last_system_text()
    # deleted: out of retrieval and out of the prompt
    st, _, gone = request(web.url + f"/api/documents/{doc_id}", "DELETE", token=acme)
    assert st == 200 and gone["state"] == "deleted"
    assert request(web.url + "/api/documents", token=acme)[2]["documents"] == []
    request(web.url + "/api/chat", "POST", {"message": "What does the release runbook say about rollbacks?",
                                            "conversation_id": "c-docs3"}, acme)
    assert "make release" not in llm.last_system_text()
    # bad input is a 4xx naming the field
    st, _, got = request(web.url + "/api/documents", "POST", {"title": "", "content": "x"}, acme)
    assert st == 422


def test_chat_records_only_the_activated_memories_as_used(web, tokens, db):
    from conftest import connect

    maya = tokens["maya"]
    ids = {}
    for key, text in (("dog", "My dog Pixel is a three year old border collie"),
                      ("editor", "I switched from VS Code to Neovim for all my coding"),
                      ("lisbon", "I moved to Lisbon in March and love the tram rides"),
                      ("peanut", "I am allergic to peanuts, even a trace makes me ill")):
        ids[key] = request(web.url + "/api/remember", "POST", {"content": text}, maya)[2]["id"]
    # a small token budget: the context carries the best memory, the next best are shown as ○
    with connect(db, tenant="acme") as c:
        c.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'context_memory_tokens', '12') "
                  "on conflict (tenant, key) do update set value = excluded.value")
    st, _, chat = request(web.url + "/api/chat", "POST", {"message": "What breed is my dog Pixel?",
                                                          "conversation_id": "c-use"}, maya)
    assert st == 200, chat
    mc = chat["memoryContext"]
    activated = {m["memoryId"] for m in mc["activatedMemories"]}
    below = {m["memoryId"] for m in mc["candidateMemories"] if not m["activated"]}
    assert mc["injected"] and ids["dog"] in activated
    assert below and "POTENTIALLY RELEVANT" in mc["formatted"]  # ○ candidates were shown in the block
    assert set(mc["usedMemoryIds"]) == activated & set(mc["usedMemoryIds"]) and ids["dog"] in mc["usedMemoryIds"]
    assert not below & set(mc["usedMemoryIds"])
    with connect(db, tenant="acme") as c:
        # (touch(kind => 'used') writes pgmem.accesses; the one verb pgmem.use may log to access_log)
        used = {r[0] for r in c.execute("select memory_id from pgmem.accesses where kind in ('used', 'use') union "
                                        "select unnest(ids) from pgmem.access_log where kind = 'use'").fetchall()}
    assert ids["dog"] in used and not (below & used), (below, used)
    with connect(db, tenant="acme") as c:
        c.execute("delete from pgmem.settings where tenant = 'acme' and key = 'context_memory_tokens'")
