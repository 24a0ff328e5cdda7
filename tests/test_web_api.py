"""``pgmem serve`` over real HTTP (issue 25): uvicorn on a free loopback port, a real cluster,
real MiniLM embeddings, and a local OpenAI-compatible LLM server written here (batch and
streamed chat completions). Shadow's four endpoints in their shapes, the layered stream
protocol, hooks, the REST routes, tenancy by tokens and signed claims, 401/413/CORS, the
write-only API key, the MCP server mounted on the same app.
"""
from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from conftest import ROOT, TEMPLATE, _janitor, connect
from sqlhelpers import rows, scalar
from webhelpers import FakeLLM, Running, embedder, free_port, llm, make_app, request  # noqa: F401  (fixtures)

LLM_KEY = "sk-tenant-stored-key-0001"
ENV_KEY = "sk-server-env-key-0002"
REQUEST_KEY = "sk-request-only-key-0003"


@pytest.fixture(scope="module")
def db(cluster):
    j = _janitor(cluster, f"t_webapi_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    """Bearer tokens: acme bound to user maya, acme for the whole tenant, beta bound to bob."""
    from pgmem.mcp_server import TokenStore

    store = TokenStore(tmp_path_factory.mktemp("web") / "tokens.json")
    return {"path": store.path, "maya": store.add("acme", "maya"), "acme": store.add("acme"),
            "bob": store.add("beta", "bob")}


@pytest.fixture(scope="module")
def web(db, tokens, embedder, llm):
    from pgmem.web.chat import Hooks

    hooks = Hooks()
    running = Running(make_app(db, tokens, embedder, llm, hooks=hooks, max_body_bytes=64 * 1024))
    running.hooks = hooks
    yield running
    running.stop()


@pytest.fixture(scope="module")
def seeded(web, tokens):
    """maya's memories, through the API (remember with extraction and real embeddings)."""
    ids = {}
    for key, text in (("peanut", "I am allergic to peanuts, even a trace makes me ill"),
                      ("editor", "I switched from VS Code to Neovim for all my coding"),
                      ("lisbon", "I moved to Lisbon in March and love the tram rides"),
                      ("dog", "My dog Pixel is a three year old border collie")):
        st, _, got = request(web.url + "/api/remember", "POST", {"content": text, "who": "user"}, tokens["maya"])
        assert st == 200 and got["decision"] == "stored", got
        ids[key] = got["id"]
    return ids


# ------------------------------------------------------------------------------ tenancy: 401, tokens, claims
FORBIDDEN_WORDS = ("pgmem.", "postgres", "sql", "tenant_claim", "signature", "28000", "42501", "psycopg", "login")


def test_no_token_is_401_and_names_nothing_about_the_database(web, db):
    from pgmem.claims import sign_tenant_claim

    bad_claim = sign_tenant_claim(b"k" * 32, "acme", kid="nope")  # a claim no key of the database signs
    for headers in ({}, {"Authorization": "Bearer pgm_not-a-token"}, {"Authorization": "Basic dXNlcjpwdw=="},
                    {"Authorization": f"Bearer {bad_claim}"}, {"Authorization": "Bearer a.b.c"}):
        for method, path, body in (("GET", "/api/stats", None), ("POST", "/api/chat", {"message": "hi"}),
                                   ("POST", "/api/config/apikey", {"apiKey": LLM_KEY}), ("GET", "/api/health", None),
                                   ("GET", "/api/memories/1", None)):
            st, hdrs, got = request(web.url + path, method, body, headers=headers)
            assert st == 401, (headers, path, st, got)
            assert hdrs.get("www-authenticate", hdrs.get("WWW-Authenticate")) == 'Bearer realm="pgmem"'
            text = json.dumps(got).lower()
            assert got["error"] == "unauthorized" and not any(w in text for w in FORBIDDEN_WORDS), text
    with connect(db, tenant=None) as su:
        assert scalar(su, "select count(*) from pgmem.api_keys") == 0  # nothing happened on the way


def test_tokens_bind_tenants_and_users(web, tokens, seeded, db):
    st, _, me = request(web.url + "/api/session", token=tokens["maya"])
    assert (st, me) == (200, {"tenant": "acme", "user": "maya", "via": "token"})
    # bob (tenant beta) finds nothing of acme's, by search or by id
    st, _, got = request(web.url + "/api/search", "POST", {"query": "peanut allergy"}, tokens["bob"])
    assert st == 200 and got["memories"] == []
    for path in (f"/api/memories/{seeded['peanut']}", f"/api/memories/{seeded['peanut']}/history"):
        st, _, got = request(web.url + path, token=tokens["bob"])
        assert st == 404 and "does not exist" in got["message"], got
    st, _, got = request(web.url + f"/api/memories/{seeded['peanut']}/forget", "POST", {}, tokens["bob"])
    assert st == 404
    # maya's token acts for maya only
    st, _, got = request(web.url + "/api/profile/tom/history", token=tokens["maya"])
    assert st == 403 and got["message"] == 'this token acts for user "maya" only'
    st, _, got = request(web.url + "/api/search", "POST", {"query": "x", "filters": {"user_id": "tom"}}, tokens["maya"])
    assert st == 403
    # a memory of another user of the same tenant is not maya's
    st, _, other = request(web.url + "/api/remember", "POST", {"content": "Tom likes the peanut butter cookies",
                                                               "user_id": "tom"}, tokens["acme"])
    assert st == 200
    st, _, got = request(web.url + f"/api/memories/{other['id']}", token=tokens["maya"])
    assert st == 404 and 'for user "maya"' in got["message"]
    st, _, got = request(web.url + "/api/search", "POST", {"query": "peanut", "k": 10}, tokens["maya"])
    assert other["id"] not in {m["id"] for m in got["memories"]}
    st, _, got = request(web.url + "/api/search", "POST", {"query": "peanut", "k": 10}, tokens["acme"])
    assert {other["id"], seeded["peanut"]} <= {m["id"] for m in got["memories"]}
    with connect(db, tenant=None) as su:
        assert {r["tenant"] for r in rows(su, "select tenant from pgmem.memories where id = any(%s)",
                                          (list(seeded.values()) + [other["id"]],))} == {"acme"}


def test_a_user_token_cannot_use_another_users_conversation(web, tokens, llm):
    """tom's conversation (a tenant-wide token chatting as tom) stays out of maya's prompts and screens."""
    st, _, got = request(web.url + "/api/chat", "POST", {"message": "My locker code is 4711", "conversation_id": "c-tom",
                                                         "user_id": "tom"}, tokens["acme"])
    assert st == 200, got
    n = len(llm.requests)
    for method, path, body in (("POST", "/api/chat", {"message": "what did we talk about?", "conversation_id": "c-tom"}),
                               ("POST", "/api/context_for", {"query": "and then?", "conversation_id": "c-tom"}),
                               ("GET", "/api/conversations/c-tom/threads", None)):
        st, _, got = request(web.url + path, method, body, tokens["maya"])
        assert st == 404 and 'does not exist for user "maya"' in got["message"], (path, got)
    assert len(llm.requests) == n  # nothing reached the model
    st, _, got = request(web.url + "/api/conversations/c-tom/threads", token=tokens["acme"])
    assert st == 200 and got["threads"]


def test_signed_claims_bind_the_tenant_as_the_database_does(web, db):
    from pgmem.claims import sign_tenant_claim

    with connect(db, tenant=None) as su:
        key = bytes(scalar(su, "select pgmem.add_claim_key('web-test')"))
    claim = sign_tenant_claim(key, "gamma", kid="web-test", ttl=300)
    st, _, me = request(web.url + "/api/session", token=claim)
    assert (st, me) == (200, {"tenant": "gamma", "user": None, "via": "claim"})
    st, _, got = request(web.url + "/api/remember", "POST", {"content": "gamma keeps its own notes"}, claim)
    assert st == 200 and got["decision"] == "stored"
    with connect(db, tenant=None) as su:
        assert scalar(su, "select tenant from pgmem.memories where id = %s", (got["id"],)) == "gamma"
    # expired, or for another role than the server's login: refused by the database, 401 here
    for bad in (sign_tenant_claim(key, "gamma", kid="web-test", ttl=1, now=time.time() - 3600),
                sign_tenant_claim(key, "gamma", kid="web-test", role="some_other_role")):
        st, _, got = request(web.url + "/api/stats", token=bad)
        assert st == 401 and got["error"] == "unauthorized"
    # a key dropped stops its claims at once
    with connect(db, tenant=None) as su:
        su.execute("select pgmem.drop_claim_key('web-test')")
    assert request(web.url + "/api/session", token=claim)[0] == 401


# ------------------------------------------------------------------------------ limits and CORS
def test_request_bodies_are_limited(web, tokens, db):
    big = {"content": "x " * 40000}  # 80 kB > the 64 kB limit of this server
    st, _, got = request(web.url + "/api/remember", "POST", big, tokens["acme"])
    assert st == 413 and got["error"] == "payload_too_large" and "65536 bytes" in got["message"]
    # a chunked body (no Content-Length) is cut as it passes the limit
    import http.client

    c = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
    c.putrequest("POST", "/api/remember")
    c.putheader("Authorization", f"Bearer {tokens['acme']}")
    c.putheader("Content-Type", "application/json")
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    payload = json.dumps(big).encode()
    for i in range(0, len(payload), 8192):
        part = payload[i:i + 8192]
        c.send(f"{len(part):x}\r\n".encode() + part + b"\r\n")
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    assert r.status == 413, r.read()
    with connect(db, tenant=None) as su:
        assert scalar(su, "select count(*) from pgmem.memories where content like 'x x x%%'") == 0


def test_cors_is_off_by_default_and_on_for_named_origins(web, db, tokens, embedder, llm):
    pre = {"Origin": "http://elsewhere.example", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization,content-type"}
    st, hdrs, _ = request(web.url + "/api/search", "OPTIONS", headers=pre)
    assert not any(k.lower().startswith("access-control-allow") for k in hdrs), hdrs
    st, hdrs, _ = request(web.url + "/api/stats", token=tokens["acme"], headers={"Origin": "http://elsewhere.example"})
    assert st == 200 and "access-control-allow-origin" not in {k.lower() for k in hdrs}
    other = Running(make_app(db, tokens, embedder, llm, cors_origins=["http://ui.example"], mcp=False))
    try:
        st, hdrs, _ = request(other.url + "/api/search", "OPTIONS", headers={**pre, "Origin": "http://ui.example"})
        assert st == 200 and {k.lower(): v for k, v in hdrs.items()}["access-control-allow-origin"] == "http://ui.example"
        st, hdrs, _ = request(other.url + "/api/search", "OPTIONS", headers=pre)
        assert "access-control-allow-origin" not in {k.lower() for k in hdrs}
    finally:
        other.stop()


# ------------------------------------------------------------------------------ Shadow's endpoints
def test_apikey_is_write_only_and_used_for_the_llm(web, tokens, llm, seeded, caplog):
    caplog.set_level("DEBUG")
    st, _, got = request(web.url + "/api/config/apikey", "POST", {"apiKey": LLM_KEY}, tokens["acme"])
    assert st == 200 and got["success"] is True and LLM_KEY not in json.dumps(got)
    st, _, stats = request(web.url + "/api/stats", token=tokens["acme"])
    assert stats["hasApiKey"] is True and stats["hasStoredApiKey"] is True
    st, _, health = request(web.url + "/api/health", token=tokens["maya"])
    assert health["hasApiKey"] is True
    # the chat sends the tenant's key to the LLM; a key sent with the request wins, for that call only
    n = len(llm.requests)
    assert request(web.url + "/api/chat", "POST", {"message": "hello there"}, tokens["maya"])[0] == 200
    assert llm.requests[n]["authorization"] == f"Bearer {LLM_KEY}"
    assert request(web.url + "/api/chat", "POST", {"message": "hello again", "apiKey": REQUEST_KEY}, tokens["maya"])[0] == 200
    assert llm.requests[n + 1]["authorization"] == f"Bearer {REQUEST_KEY}"
    # another tenant has no key (and the local server needs none)
    assert request(web.url + "/api/chat", "POST", {"message": "hi"}, tokens["bob"])[0] == 200
    assert llm.requests[-1]["authorization"] is None
    # no answer, export or log line holds a key
    answers = [request(web.url + p, token=tokens["acme"])[2] for p in ("/api/stats", "/api/health", "/api/users/maya/export")]
    assert not any(k in json.dumps(answers) for k in (LLM_KEY, REQUEST_KEY))
    assert not any(k in caplog.text for k in (LLM_KEY, REQUEST_KEY))
    st, _, got = request(web.url + "/api/config/apikey", "POST", {"apiKey": "has spaces in it"}, tokens["acme"])
    assert st == 422 and "printable ASCII" in got["message"] and "has spaces" not in json.dumps(got)
    st, _, got = request(web.url + "/api/config/apikey?provider=openai", "DELETE", token=tokens["acme"])
    assert got == {"success": True}
    assert request(web.url + "/api/stats", token=tokens["acme"])[2]["hasStoredApiKey"] is False


def test_stats_and_health_have_the_designs_shapes(web, tokens, seeded):
    st, _, s = request(web.url + "/api/stats", token=tokens["acme"])
    assert st == 200
    # shadow-memory-system.md, Frontend Integration: {totalMemories, averageActivationScore, hasApiKey, ...}
    assert isinstance(s["totalMemories"], int) and s["totalMemories"] >= 4
    assert "averageActivationScore" in s and isinstance(s["hasApiKey"], bool)
    assert s["tenant"] == "acme" and s["tiers"]["episodic"] >= 4 and "jobs" in s and s["model"]["model"] == "fake-model"
    st, _, h = request(web.url + "/api/health", token=tokens["maya"])
    # {status: 'ok', hasApiKey: boolean, timestamp: string} and pgmem's parts
    assert h["status"] == "ok" and isinstance(h["hasApiKey"], bool) and isinstance(h["timestamp"], str), h
    assert h["migrations"]["current"] is True and h["database"]["reachable"] is True
    assert h["cron"]["running"] is True and h["worker"]["alive"] is True and h["server"]["mcp"] is True


def test_chat_returns_shadows_shape_and_records_use(web, tokens, llm, seeded, db):
    with connect(db, tenant="acme") as c:
        before = scalar(c, "select access_count from pgmem.memories where id = %s", (seeded["peanut"],))
    st, _, got = request(web.url + "/api/chat", "POST",
                         {"message": "Which foods must I avoid because of my allergy?", "conversation_id": "c-json"},
                         tokens["maya"])
    assert st == 200, got
    mc = got["memoryContext"]
    assert set(mc) >= {"activatedMemories", "candidateMemories", "totalMemories", "avgActivationScore"}
    top = mc["candidateMemories"][0]
    assert top["memoryId"] == seeded["peanut"] and top["activated"] is True
    assert set(top) >= {"memoryId", "activationScore", "relevanceType", "summary", "confidence"}
    assert mc["totalMemories"] == len(mc["candidateMemories"])
    assert mc["avgActivationScore"] == pytest.approx(
        sum(c["activationScore"] for c in mc["candidateMemories"]) / len(mc["candidateMemories"]), abs=1e-3)
    # the prompt carried Shadow's block, and the LLM answered from it
    system = llm.last_system_text()
    assert "HIGHLY RELEVANT MEMORIES:\n- [Score: " in system and "allergic to peanuts" in system
    assert got["content"].startswith("From memory: I am allergic to peanuts")
    assert llm.requests[-1]["payload"]["model"] == "fake-model" and llm.requests[-1]["payload"]["stream"] is False
    # both turns stored; the memories the prompt carried are recorded as used
    with connect(db, tenant="acme") as c:
        asked = scalar(c, "select content from pgmem.memories where id = %s", (got["storedMemoryId"],))
        assert asked == "Which foods must I avoid because of my allergy?"
        msgs = rows(c, "select role, content from pgmem.messages where conversation_id = 'c-json' order by seq")
        assert [(m["role"], m["content"]) for m in msgs][1] == ("assistant", got["content"])
        if got["replyMemoryId"] is not None:  # (else the surprise gate found the reply nothing new)
            assert scalar(c, "select who from pgmem.memories where id = %s", (got["replyMemoryId"],)) == "assistant"
        assert seeded["peanut"] in mc["usedMemoryIds"]
        # (issue 32: context_for records what it carried as a use, in the access log, once; the
        # access job folds it into access_count)
        assert scalar(c, "select count(*) from pgmem.access_log where kind = 'use' and source = 'context_for' "
                         "and %s = any(ids)", (seeded["peanut"],)) == 1
        assert scalar(c, "select access_count from pgmem.memories where id = %s", (seeded["peanut"],)) == before
        c.execute("call pgmem.run_job('access')")
        assert scalar(c, "select access_count from pgmem.memories where id = %s", (seeded["peanut"],)) == before + 1


def parse_sse(text: str) -> list[tuple[str, Any]]:
    out = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            code, _, value = block[6:].partition(":")
            out.append((code, json.loads(value)))
    return out


def test_chat_streams_the_layered_protocol(web, tokens, llm, seeded):
    st, hdrs, text = request(web.url + "/api/chat", "POST",
                             {"message": "What is the name of my dog?", "conversation_id": "c-stream", "stream": True},
                             tokens["maya"])
    assert st == 200 and hdrs["content-type"].startswith("text/event-stream")
    parts = parse_sse(text)
    codes = [c for c, _ in parts]
    # 8: classified, retrieved, generating; 0: tokens; 8: final; e:, d:
    assert codes[:3] == ["8", "8", "8"] and codes[-3:] == ["8", "e", "d"], codes
    assert set(codes[3:-3]) == {"0"}
    assert [p[0]["stage"] for _, p in parts[:3]] == ["classified", "retrieved", "generating"]
    assert isinstance(parts[0][1][0]["intent"], str) and 0 <= parts[0][1][0]["confidence"] <= 1
    assert set(parts[1][1][0]["retrieval_info"]) >= {"num_docs", "similar_queries"}
    tokens_text = "".join(v for c, v in parts if c == "0")
    assert tokens_text.startswith("From memory: My dog Pixel") and len([c for c in codes if c == "0"]) > 3
    final = parts[-3][1][0]
    assert final["stage"] == "complete" and final["memoryContext"]["activatedMemories"][0]["memoryId"] == seeded["dog"]
    assert final["persisted"] is True
    assert parts[-2] == ("e", {"finishReason": "stop"}) and parts[-1] == ("d", {"finishReason": "stop"})
    assert llm.requests[-1]["payload"]["stream"] is True
    # Accept: text/event-stream streams too
    st, hdrs, text = request(web.url + "/api/chat", "POST", {"message": "and the dog's breed?", "conversation_id": "c-stream"},
                             tokens["maya"], headers={"Accept": "text/event-stream"})
    assert hdrs["content-type"].startswith("text/event-stream") and parse_sse(text)[-1] == ("d", {"finishReason": "stop"})


def test_chat_errors_are_clear_and_store_nothing(web, tokens, llm, db, embedder):
    llm.status = 500
    try:
        st, _, got = request(web.url + "/api/chat", "POST", {"message": "will this work?", "conversation_id": "c-err"},
                             tokens["maya"])
        assert st == 502 and got["error"] == "llm_unavailable" and "HTTP 500" in got["message"] and llm.url in got["message"]
        st, _, text = request(web.url + "/api/chat", "POST", {"message": "and streamed?", "conversation_id": "c-err",
                                                              "stream": True}, tokens["maya"])
        parts = parse_sse(text)
        assert ("3", parts[-4][1]) == parts[-4] and "HTTP 500" in parts[-4][1]
        assert parts[-1] == ("d", {"finishReason": "error"}) and parts[-3][1][0]["persisted"] is False
    finally:
        llm.status = 200
    # a hosted API without any key: refused before anything is stored
    from pgmem.web.llm import ChatModel

    hosted = Running(make_app(db, tokens, embedder, llm, mcp=False,
                              model=ChatModel("https://api.openai.invalid/v1", "gpt-4o-mini")))
    try:
        st, _, got = request(hosted.url + "/api/chat", "POST", {"message": "no key here", "conversation_id": "c-nokey"},
                             tokens["maya"])
        assert st == 502 and "no API key" in got["message"] and "POST /api/config/apikey" in got["message"]
        with connect(db, tenant="acme") as c:
            assert scalar(c, "select count(*) from pgmem.messages where conversation_id = 'c-nokey'") == 0
    finally:
        hosted.stop()
    st, _, got = request(web.url + "/api/chat", "POST", {"message": ""}, tokens["maya"])
    assert st == 422 and got["error"] == "invalid_request"


def test_hooks_run_around_generation(web, tokens, llm, seeded, db):
    hooks = web.hooks
    seen = []
    hooks.policy_override(lambda t: (seen.append(("policy", dict(t.policy))), t.policy.update(inject_memories=False)))
    hooks.before_generation(lambda t: t.messages.insert(1, {"role": "system", "content": "HOUSE RULE: answer in French."}))
    hooks.after_generation(lambda t: setattr(t, "reply", t.reply + " [checked]"))
    hooks.before_persist(lambda t: setattr(t, "persist", False))
    try:
        st, _, got = request(web.url + "/api/chat", "POST", {"message": "Tell me about my dog", "conversation_id": "c-hooks"},
                             tokens["maya"])
        assert st == 200 and seen and seen[0][1]["inject_memories"] is True  # a profile turn
        system = llm.last_system_text()
        assert "HOUSE RULE: answer in French." in system and "HIGHLY RELEVANT" not in system  # the override dropped the block
        assert got["content"] == "I have no memory of that. [checked]"
        assert got["memoryContext"]["injected"] is False and got["memoryContext"]["usedMemoryIds"] == []
        assert got["replyMemoryId"] is None  # before_persist vetoed storing the reply
        with connect(db, tenant="acme") as c:
            assert [r["role"] for r in rows(c, "select role from pgmem.messages where conversation_id = 'c-hooks'")] == ["user"]
        # a failing hook is named, without a traceback
        hooks.before_generation(lambda t: 1 / 0)
        st, _, got = request(web.url + "/api/chat", "POST", {"message": "again", "conversation_id": "c-hooks"}, tokens["maya"])
        assert st == 500 and got["error"] == "hook_failed" and "before_generation hook" in got["message"]
        assert "Traceback" not in json.dumps(got)
    finally:
        for point in hooks._fns.values():
            point.clear()


def test_a_slow_chat_does_not_stall_another_tenant(web, tokens, llm, seeded):
    """The LLM takes 5 s for maya's chat; bob's calls meanwhile answer at once (no blocking
    work on the event loop)."""
    llm.delay = 5.0
    done: dict[str, float] = {}
    try:
        def slow():
            request(web.url + "/api/chat", "POST", {"message": "a slow question", "conversation_id": "c-slow"}, tokens["maya"])
            done["chat"] = time.monotonic()

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.8)  # the chat is waiting on the LLM now
        for path in ("/api/health", "/api/session", "/api/profile/bob"):
            assert request(web.url + path, token=tokens["bob"])[0] == 200
        assert request(web.url + "/api/search", "POST", {"query": "anything"}, tokens["bob"])[0] == 200
        done["others"] = time.monotonic()
        t.join(timeout=60)
    finally:
        llm.delay = 0.0
    assert done["others"] < done["chat"], "another tenant's calls waited for the slow chat"


# ------------------------------------------------------------------------------ the REST API
def test_rest_routes_call_the_sql_api(web, tokens, seeded, db):
    url, tok = web.url, tokens["maya"]
    st, _, got = request(url + "/api/search", "POST", {"query": "border collie", "k": 3}, tok)
    assert st == 200 and got["memories"][0]["id"] == seeded["dog"]
    assert {"semantic", "lexical", "recency"} <= set(got["memories"][0]["signals"])
    st, _, ex = request(url + "/api/search", "POST", {"query": "border collie", "k": 1, "explain": True}, tok)
    assert st == 200 and {r["signal"] for r in ex["explain"]} >= {"semantic", "lexical"}
    assert sum(r["contribution"] for r in ex["explain"]) == pytest.approx(ex["explain"][0]["score"], abs=1e-6)
    st, _, act = request(url + "/api/activate", "POST", {"query": "peanut allergy", "k": 4}, tok)
    assert act["memories"][0]["id"] == seeded["peanut"] and act["memories"][0]["activated"] is True
    assert request(url + "/api/recall", "POST", {"query": "peanut allergy", "k": 2}, tok)[2]["memories"][0]["id"] == seeded["peanut"]
    ctx = request(url + "/api/context", "POST", {"query": "peanut allergy", "token_budget": 40}, tok)[2]["memories"]
    assert any(r["selected"] for r in ctx) and sum(r["token_count"] for r in ctx if r["selected"]) <= 40
    doc = request(url + "/api/context_for", "POST", {"query": "I moved to Porto last week", "conversation_id": "c-rest"}, tok)[2]
    assert doc["intent"] == "profile" and [s["stage"] for s in doc["stages"]][0] == "classified"
    # a memory: 5W1H, bindings, history; forget, restore, revert
    m = request(url + f"/api/memories/{seeded['lisbon']}", token=tok)[2]
    assert m["content"].startswith("I moved to Lisbon") and {"who", "what", "happened_at", "location", "why", "how"} <= set(m)
    assert "embedding" not in m
    request(url + "/api/chat", "POST", {"message": "peanut allergy and Lisbon trams", "conversation_id": "c-bind"}, tok)
    b = request(url + f"/api/memories/{seeded['peanut']}/bindings", token=tok)[2]["bindings"]
    assert isinstance(b, list)
    f = request(url + f"/api/memories/{seeded['lisbon']}/forget", "POST", {"reason": "asked by the test"}, tok)[2]
    assert f["state"] == "deleted"
    assert request(url + "/api/search", "POST", {"query": "Lisbon tram rides"}, tok)[2]["memories"][0]["id"] != seeded["lisbon"]
    r = request(url + f"/api/memories/{seeded['lisbon']}/restore", "POST", None, tok)[2]
    assert r["state"] == "active"
    h = request(url + f"/api/memories/{seeded['lisbon']}/history", token=tok)[2]["history"]
    assert [x["op"] for x in h][-2:] == ["delete", "restore"]
    st, _, got = request(url + f"/api/history/{h[-1]['id']}/revert", "POST", None, tok)
    assert st == 403 and "whole tenant" in got["message"]
    st, _, got = request(url + f"/api/history/{h[-1]['id']}/revert", "POST", None, tokens["acme"])
    assert st == 200 and got["state"] == "deleted"  # back to before the restore
    request(url + f"/api/memories/{seeded['lisbon']}/restore", "POST", None, tok)
    # the profile: Porto superseded Lisbon (context_for's message above)
    facts = request(url + "/api/profile/maya/history", token=tok)[2]["facts"]
    loc = [x for x in facts if x["key"] == "location"]
    assert (loc[-1]["value"], loc[-1]["status"], loc[-1]["valid_to"]) == ("Porto", "current", None), loc
    assert any(x["value"] == "Lisbon" and x["status"] == "past" and x["valid_to"] for x in loc), loc  # superseded
    now = {f["key"]: f["value"] for f in request(url + "/api/profile/maya", token=tok)[2]["facts"]}
    assert now["location"] == "Porto"
    th = request(url + "/api/conversations/c-bind/threads", token=tok)[2]["threads"]
    assert th and th[0]["message_count"] >= 1
    msgs = request(url + f"/api/threads/{th[0]['thread_id']}/messages?conversation_id=c-bind", token=tok)[2]["messages"]
    assert msgs[0]["content"] == "peanut allergy and Lisbon trams"
    assert request(url + f"/api/threads/{th[0]['thread_id']}/messages", token=tok)[0] == 403  # which conversation?
    assert request(url + f"/api/threads/{th[0]['thread_id']}/messages", token=tokens["acme"])[0] == 200
    assert request(url + "/api/insights/search", "POST", {"query": "allergy"}, tok)[0] == 200
    # the tenant-wide routes are for a token of the whole tenant (issue 35, M4)
    whole = tokens["acme"]
    assert request(url + "/api/clusters", token=whole)[2] == {"clusters": []}
    assert request(url + "/api/jobs", token=whole)[0] == 200
    st, _, pts = request(url + "/api/map/project", "POST", {"method": "pca"}, whole)
    assert st == 200 and pts["points"] >= 4
    st, hdrs, page = request(url + "/api/map?method=pca", token=whole)
    assert st == 200 and hdrs["content-type"].startswith("text/html") and "plotly" in page.lower()
    # privacy: export, and erase only when confirmed
    exp = request(url + "/api/users/maya/export", token=tok)[2]
    assert exp["user_id"] == "maya" and len(exp["memories"]) >= 4
    st, _, got = request(url + "/api/users/zed/erase", "POST", {"confirm": False}, tokens["acme"])
    assert st == 422 and "confirm" in got["message"]
    request(url + "/api/remember", "POST", {"content": "zed was here once", "user_id": "zed"}, tokens["acme"])
    st, _, got = request(url + "/api/users/zed/erase", "POST", {"confirm": True}, tokens["acme"])
    assert st == 200 and got["memories"] == 1
    # errors of the SQL API keep their words; unknown ids are 404
    st, _, got = request(url + "/api/memories/999999999", token=tok)
    assert st == 404
    st, _, got = request(url + "/api/search", "POST", {"query": "x", "filters": {"colour": "red"}}, tokens["acme"])
    assert st == 422 and got["error"] == "invalid_input" and "colour" in got["message"]


def test_openapi_document_lists_every_route(web):
    st, _, doc = request(web.url + "/openapi.json")
    assert st == 200 and doc["info"]["title"] == "pgmem"
    paths = set(doc["paths"])
    assert {"/api/chat", "/api/stats", "/api/config/apikey", "/api/health", "/api/remember", "/api/search",
            "/api/activate", "/api/recall", "/api/context", "/api/context_for", "/api/memories/{memory_id}",
            "/api/memories/{memory_id}/history", "/api/memories/{memory_id}/forget", "/api/memories/{memory_id}/restore",
            "/api/history/{history_id}/revert", "/api/profile/{user_id}", "/api/profile/{user_id}/history",
            "/api/conversations/{conversation_id}/threads", "/api/insights/search", "/api/clusters", "/api/jobs",
            "/api/users/{user_id}/export", "/api/users/{user_id}/erase"} <= paths
    assert any(s.get("type") == "http" and s.get("scheme") == "bearer"
               for s in doc["components"]["securitySchemes"].values())


def test_mcp_is_mounted_on_the_same_app(web, tokens, seeded):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def go():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {tokens['maya']}"})
        async with http:
            async with Client(streamable_http_client(web.url + "/mcp", http_client=http)) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"remember", "search", "context", "forget", "history"} <= names
                res = await client.call_tool("search", {"query": "border collie", "k": 2})
                return json.loads(res.content[0].text)

    got = asyncio.run(go())
    assert got["memories"][0]["id"] == seeded["dog"]
    assert httpx2  # (the SDK's HTTP client)
    st, _, _ = request(web.url + "/mcp", "POST", {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                       headers={"Accept": "application/json, text/event-stream"})
    assert st == 401


def test_the_page_is_served(web):
    st, hdrs, page = request(web.url + "/")
    assert st == 200 and "<title>pgmem" in page and "/static/app.js" in page
    st, hdrs, js = request(web.url + "/static/app.js")
    assert st == 200 and "javascript" in hdrs["content-type"] and "api/chat" in js
    assert hdrs.get("x-content-type-options") == "nosniff"


# ------------------------------------------------------------------------------ an app login
def test_an_app_login_server_cannot_read_stored_keys(cluster, db, tokens, embedder, llm):
    """Served through an app login (pgmem_app, granted the tenant): the key it stores is
    write-only for it too, so chat uses the server's OPENAI_API_KEY."""
    from psycopg import sql

    from pgmem.web.llm import ChatModel

    name, pw = f"web_app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with connect(cluster.dsn("postgres"), tenant=None) as su:
        su.execute(sql.SQL("create role {} login password {}").format(sql.Identifier(name), sql.Literal(pw)))
        su.execute(sql.SQL("grant pgmem_app to {}").format(sql.Identifier(name)))
    with connect(db, tenant=None) as su:
        su.execute("select pgmem.grant_tenant(%s, 'acme')", (name,))
    dbname = db.rsplit("/", 1)[1].split("?")[0]
    app_dsn = f"postgresql://{name}:{pw}@127.0.0.1:{cluster.port}/{dbname}"
    srv = Running(make_app(app_dsn, tokens, embedder, llm, mcp=False, model=ChatModel(llm.url, "fake-model", ENV_KEY)))
    try:
        st, _, got = request(srv.url + "/api/config/apikey", "POST", {"apiKey": LLM_KEY}, tokens["acme"])
        assert st == 200 and got["success"] is True
        stats = request(srv.url + "/api/stats", token=tokens["acme"])[2]
        assert stats["hasStoredApiKey"] is True and stats["hasApiKey"] is True
        st, _, got = request(srv.url + "/api/chat", "POST", {"message": "hello from an app login"}, tokens["maya"])
        assert st == 200, got
        assert llm.requests[-1]["authorization"] == f"Bearer {ENV_KEY}"
        assert request(srv.url + "/api/session", token=tokens["bob"])[0] == 403  # not granted beta
    finally:
        srv.stop()
        with connect(db, tenant=None) as su:
            su.execute("delete from pgmem.api_keys where tenant = 'acme'")
            su.execute("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (name,))
            su.execute("delete from pgmem.tenant_grants where role_name = %s", (name,))
        with connect(cluster.dsn("postgres"), tenant=None) as su:
            su.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(name)))


# ------------------------------------------------------------------------------ the command
@pytest.mark.slow
def test_pgmem_serve_command(db, tokens, tmp_path):
    import os

    port = free_port()
    env = {**os.environ, "PGMEM_DSN": db, "PGMEM_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT / "python"),
           "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    args = [sys.executable, "-m", "pgmem.cli", "serve", "--port", str(port), "--tokens", str(tokens["path"]), "--no-embed"]
    out = subprocess.run(args + ["--detach"], env=env, capture_output=True, text=True, timeout=180)
    try:
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"http://127.0.0.1:{port}/" and "pgmem serve --stop" in out.stderr
        url = f"http://127.0.0.1:{port}"
        assert request(url + "/api/stats")[0] == 401
        st, _, h = request(url + "/api/health", token=tokens["acme"])
        assert st == 200 and h["server"]["embeddings"] is False and h["server"]["mcp"] is True
        assert "<title>pgmem" in request(url + "/")[2]
        again = subprocess.run(args + ["--detach"], env=env, capture_output=True, text=True, timeout=60)
        assert again.stdout.strip() == f"http://127.0.0.1:{port}/"  # already running: the same server
    finally:
        stop = subprocess.run([sys.executable, "-m", "pgmem.cli", "serve", "--stop"], env=env, capture_output=True,
                              text=True, timeout=60)
    assert "stopped" in stop.stderr
    assert not (tmp_path / "home" / "serve.pid").exists()
    # a bad option is a one-line error, not a traceback
    bad = subprocess.run([sys.executable, "-m", "pgmem.cli", "serve", "--hooks", "nonexistent_module:hooks", "--no-embed",
                          "--port", str(free_port())], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("pgmem: --hooks nonexistent_module:hooks") and "Traceback" not in bad.stderr


# ------------------------------------------------------------------------------ the wheel


@pytest.mark.slow
def test_wheel_carries_the_page_and_serve_names_its_extra(wheel, tmp_path):  # noqa: F811
    """The page's built assets ship in the wheel (a user needs no Node); without the [web]
    extra, `pgmem serve` names what to install."""
    import os
    import zipfile

    static = ROOT / "python" / "pgmem" / "web" / "static"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {f"pgmem/web/static/{p.name}" for p in static.iterdir()} <= names
    assert {"pgmem/web/static/index.html", "pgmem/web/static/app.js", "pgmem/web/static/app.css"} <= names
    assert "Provides-Extra: web" in meta and "fastapi" in meta and "uvicorn" in meta
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                   check=True, timeout=300, cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGMEM_", "PYTHON", "VIRTUAL_ENV"))}
    out = subprocess.run([str(venv / "bin" / "pgmem"), "serve"], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "pip install 'pgmem-agent[web]'" in out.stderr and "Traceback" not in out.stderr
    # the installed package finds its page without a checkout
    found = subprocess.run([str(venv / "bin" / "python"), "-c", "from pgmem.web.app import STATIC_DIR; "
                            "print((STATIC_DIR / 'index.html').is_file(), 'site-packages' in str(STATIC_DIR))"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert found.stdout.split() == ["True", "True"], found.stderr


# ------------------------------------------------------------------------------ make demo and the README
@pytest.mark.slow
def test_demo_ends_by_starting_the_server_detached(db, monkeypatch, tmp_path):
    """examples/demo.py's last step: `pgmem serve` in the background (make demo returns at once)
    and a link that signs the page in as the demo's user; run again, the same server and link."""
    import importlib.util
    import re

    from pgmem.web import running_server, stop_detached

    spec = importlib.util.spec_from_file_location("pgmem_demo_web", ROOT / "examples" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    monkeypatch.setenv("PGMEM_DSN", db)
    monkeypatch.setenv("PGMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PGMEM_MCP_TOKENS", str(tmp_path / "home" / "mcp-tokens.json"))
    monkeypatch.setattr(demo, "WEB_PORT", free_port())
    (tmp_path / "home").mkdir()
    t0 = time.monotonic()
    text = demo.web_hint()
    assert time.monotonic() - t0 < 5, "the demo waited for the server"
    try:
        url, token = re.search(r"open (http://127\.0\.0\.1:\d+/)#token=(pgm_\S+)", text).groups()
        assert "pgmem serve --stop" in text
        deadline = time.monotonic() + 120
        while True:
            try:
                st, _, me = request(url + "api/session", token=token)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and running_server(), (tmp_path / "home" / "serve.log").read_text()
                time.sleep(0.5)
        assert (st, me) == (200, {"tenant": "default", "user": "maya", "via": "token"})
        assert demo.web_hint() == text  # the kept token and the running server
        assert oct((tmp_path / "home" / "demo-web-token").stat().st_mode & 0o777) == "0o600"
    finally:
        assert stop_detached()
    assert running_server() is None


def test_readme_web_section_shows_the_screenshots():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Web: `pgmem serve` and the memory explorer", 1)[1].split("\n## ", 1)[0]
    images = re.findall(r"\(docs/images/(web-[a-z]+\.png)\)", section)
    assert sorted(set(images)) == ["web-chat.png", "web-health.png", "web-map.png", "web-memory.png", "web-profile.png",
                                   "web-search.png"]
    for name in images:
        assert (ROOT / "docs" / "images" / name).stat().st_size > 20000, name


def test_hooks_load_from_a_module(tmp_path, monkeypatch):
    """`pgmem serve --hooks module:attribute`: a Hooks object, or a function that makes one."""
    from pgmem.errors import ConfigError
    from pgmem.web import load_hooks
    from pgmem.web.chat import Hooks

    (tmp_path / "site_hooks.py").write_text(
        "from pgmem.web.chat import Hooks\n"
        "hooks = Hooks()\n"
        "hooks.before_generation(lambda turn: turn.messages.append({'role': 'system', 'content': 'x'}))\n"
        "def make():\n    return hooks\n"
        "not_hooks = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec in ("site_hooks:hooks", "site_hooks:make"):
        got = load_hooks(spec)
        assert isinstance(got, Hooks) and len(got) == 1
    for spec, words in (("site_hooks", "module:attribute"), ("site_hooks:missing", "has no attribute"),
                        ("site_hooks:not_hooks", "not a pgmem.web.chat.Hooks")):
        with pytest.raises(ConfigError, match=words):
            load_hooks(spec)
