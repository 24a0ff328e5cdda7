"""The layered tiers' numbers, recomputed by hand with constructed vectors
(layered-memory-architecture.md): the topic vector EMA (alpha .2) and the topic gate (.35),
thread centroids (EMA alpha .3), attach at .55, at most 12 active threads, summaries at 8, 16,
24...; the eight behaviour modes by priority and the policy flags, both rows a tenant edits;
insights (cue phrases, threshold .6), concept links across threads and cross-thread search;
the LLM fallback of the intent (a real HTTP server on 127.0.0.1) and its cache; privacy.
"""
from __future__ import annotations

import json
import logging

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

from conftest import DIM, at_cos, connect, e
from pgmem import MemoryClient
from pgmem.layered import LayeredLLM
from scripted_llm import completion, llm  # noqa: F401  (the scripted OpenAI-compatible server fixture)
from sqlhelpers import one, rows, scalar


def turn(conn, conv, text, vec=None, user="u", intent=None):
    return scalar(conn, "select pgmem.observe_turn(%s, %s, %s, %s, %s)", (conv, text, vec, user, intent))


def ctx(conn, conv, text, vec=None, user="u", **kw):
    extra = "".join(f", {k} => %s" for k in kw)
    return scalar(conn, f"select pgmem.context_for(%s, %s, %s, %s{extra})", (text, vec, conv, user, *kw.values()))


def stage(doc, name):
    return next(s for s in doc["stages"] if s["stage"] == name)


def vec(conn, q, params=()):
    return np.asarray(scalar(conn, q, params).to_numpy(), dtype=np.float64)


def cos(a, b):
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


# ------------------------------------------------------------------ topic vector and gate
def test_topic_vector_is_an_ema_with_alpha_0_2(conn):
    for i in range(3):
        turn(conn, "c", f"message {i}", e(i))
    got = vec(conn, "select topic_vector from pgmem.conversations where conversation_id = 'c'")
    want = np.zeros(DIM)
    want[:3] = [0.8 * 0.8, 0.8 * 0.2, 0.2]   # e0, then .8 e0 + .2 e1, then .8(.8 e0 + .2 e1) + .2 e2
    assert np.allclose(got, want, atol=1e-6)
    # the similarity the gate reads is taken before the update: e2 against .8 e0 + .2 e1
    assert scalar(conn, "select last_topic_similarity from pgmem.conversations") == pytest.approx(0.0, abs=1e-6)
    turn(conn, "c", "message 3", at_cos(0, 5, 0.9))
    assert scalar(conn, "select last_topic_similarity from pgmem.conversations") == pytest.approx(
        cos(at_cos(0, 5, 0.9).astype(np.float64), want), abs=1e-5)


@pytest.mark.parametrize("c, demoted", [(0.36, False), (0.351, False), (0.349, True), (0.34, True)])
def test_topic_gate_demotes_a_continuation_below_0_35(conn, c, demoted):
    ctx(conn, "g", "Tell me how HNSW works", e(0), remember=False)
    # (a continuation with words of its own: "Tell me more about it" has none, and is not judged)
    doc = ctx(conn, "g", "What about the recall and the build time?", at_cos(0, 1, c), remember=False)
    gate = stage(doc, "topic_gate")
    assert gate["applied"] and gate["similarity"] == pytest.approx(c, abs=1e-4) and gate["demoted"] is demoted
    assert doc["intent"] == ("general" if demoted else "continuation")
    cl = stage(doc, "classified")
    assert cl["confidence"] == 0.85 and cl["demoted_from"] == ("continuation" if demoted else None)
    assert one(conn, "select intent from pgmem.messages where seq = 2")["intent"] == doc["intent"]


def test_the_gate_leaves_a_continuation_without_words_of_its_own(conn):
    ctx(conn, "w", "Tell me how HNSW works", e(0), remember=False)
    doc = ctx(conn, "w", "Tell me more about it", at_cos(0, 1, 0.05), remember=False)
    assert stage(doc, "topic_gate") == {"stage": "topic_gate", "applied": False,
                                        "reason": "a continuation with no words of its own"}
    assert doc["intent"] == "continuation" and stage(doc, "thread")["decision"] == "continued"
    assert not stage(doc, "policy")["inject_rag"]  # the history carries it, no retrieval


def test_the_gate_needs_a_continuation_and_a_topic(conn):
    doc = ctx(conn, "n", "Tell me more about it", e(0), remember=False)  # no earlier message: not a continuation
    assert stage(doc, "topic_gate") == {"stage": "topic_gate", "applied": False, "reason": "not a continuation"}
    doc = ctx(conn, "n", "Tell me more about it", None, remember=False)
    assert stage(doc, "topic_gate")["reason"] == "no query embedding"
    assert stage(doc, "thread") == {"stage": "thread", "thread_id": None, "decision": "skipped", "reason": "no query embedding"}


# ------------------------------------------------------------------ threads
def resolve(conn, conv, v, message_id=None):
    return one(conn, "select * from pgmem.resolve_thread(%s, %s, %s)", (conv, v, message_id))


def test_thread_centroid_ema_alpha_0_3_and_attach_at_0_55(conn):
    # the seed's threshold as a number (pgmem's default "auto" calibrates it for the embedding
    # model: tests/test_agent_loop.py)
    conn.execute("update pgmem.settings set value = '0.55' where tenant = '*' and key = 'thread_attach_threshold'")
    turn(conn, "t", "first", e(0))
    a = resolve(conn, "t", e(0))
    assert a["decision"] == "created" and a["similarity"] is None and a["message_count"] == 1
    v1 = at_cos(0, 1, 0.55).astype(np.float64)
    b = resolve(conn, "t", v1)
    assert b["decision"] == "attached" and b["thread_id"] == a["thread_id"] and b["similarity"] == pytest.approx(0.55, abs=1e-6)
    centroid = 0.7 * e(0).astype(np.float64) + 0.3 * v1
    assert np.allclose(vec(conn, "select centroid from pgmem.threads where id = %s", (a["thread_id"],)), centroid, atol=1e-6)
    v2 = at_cos(0, 2, 0.54).astype(np.float64)
    assert cos(v2, centroid) == pytest.approx(0.865 * 0.54 / np.sqrt(0.865 ** 2 + (0.3 * np.sqrt(1 - 0.55 ** 2)) ** 2), abs=1e-6)
    c = resolve(conn, "t", v2)  # cos .5187 to the centroid: below .55
    assert c["decision"] == "created" and c["similarity"] == pytest.approx(cos(v2, centroid), abs=1e-5)
    assert c["thread_id"] != a["thread_id"]


def test_at_most_12_active_threads_per_conversation(conn):
    turn(conn, "m", "first", e(0))
    made = [resolve(conn, "m", e(i)) for i in range(12)]
    assert [m["decision"] for m in made] == ["created"] * 12 and all(m["archived"] == [] for m in made)
    thirteenth = resolve(conn, "m", e(12))
    assert thirteenth["decision"] == "created" and thirteenth["archived"] == [made[0]["thread_id"]]  # least recently used
    assert scalar(conn, "select count(*) from pgmem.threads where status = 'active'") == 12
    # the archived thread no longer attracts its topic: e(0) starts a new thread, archiving the next LRU
    again = resolve(conn, "m", e(0))
    assert again["decision"] == "created" and again["archived"] == [made[1]["thread_id"]]
    assert len(rows(conn, "select * from pgmem.conversation_threads('m')")) == 12
    assert len(rows(conn, "select * from pgmem.conversation_threads('m', true)")) == 14


def test_a_summary_every_8_messages(conn):
    due = []
    for i in range(17):
        m = turn(conn, "s", f"HNSW graph note {i}: ef_search {i} and recall", at_cos(0, 1 + i % 3, 0.99))
        r = resolve(conn, "s", at_cos(0, 1 + i % 3, 0.99), m["message_id"])
        due.append((r["message_count"], r["summary_due"]))
        if r["message_count"] == 1:
            first_label = r["label"]
        if r["message_count"] == 8:
            at8 = r
    assert [n for n, d in due if d] == [8, 16]
    assert first_label == "hnsw, graph, note"                      # keywords of the first message
    t = one(conn, "select * from pgmem.threads")
    assert t["message_count"] == 17 and t["summarized_at_count"] == 16 and t["summary_source"] == "extractive"
    assert at8["summary"] and at8["summary_source"] == "extractive" and at8["label"] == "hnsw, graph, note"
    assert t["summary"] != at8["summary"]                          # re-summarised at 16
    msgs = rows(conn, "select * from pgmem.thread_messages(%s)", (t["id"],))
    assert len(msgs) == 17 and [m["seq"] for m in msgs] == list(range(1, 18))


# ------------------------------------------------------------------ behaviour and policy
BASE_STATE = {"emotional_tone": "neutral", "testing_flag": False, "interaction_pattern": "standard",
              "precision_mode": "analytical"}
BASE_TURN = {"meta_comment": False, "repetition": False, "greeting": False, "personal_reference": False}


def decide(conn, state=None, turn_=None):
    f = {"state": {**BASE_STATE, **(state or {})}, "turn": {**BASE_TURN, **(turn_ or {})}}
    return scalar(conn, "select pgmem.behaviour_decision(%s)", (Jsonb(f),))


@pytest.mark.parametrize("state, turn_, mode, depth, personality, length, precision", [
    ({"emotional_tone": "frustrated"}, {}, "frustration_recovery", 3, "empathetic", "brief", "concise"),
    ({"testing_flag": True}, {}, "testing_aware", 2, "concise", "brief", "adversarial"),
    ({}, {"meta_comment": True}, "meta_aware", 5, "default", "normal", "analytical"),
    ({}, {"repetition": True}, "repetition_aware", 8, "detailed", "detailed", "analytical"),
    ({}, {"greeting": True}, "greeting", 0, "playful", "brief", "concise"),
    ({"interaction_pattern": "rapid_fire"}, {}, "rapid_fire", 3, "concise", "brief", "concise"),
    ({"interaction_pattern": "exploratory", "precision_mode": "speculative"}, {}, "exploratory", 8, "detailed", "normal", "speculative"),
    ({}, {}, "standard", 5, "default", "normal", "analytical"),
    # priority: frustration (80) over testing (70) over greeting (40)
    ({"emotional_tone": "frustrated", "testing_flag": True}, {"greeting": True}, "frustration_recovery", 3, "empathetic", "brief", "concise"),
    ({"testing_flag": True, "interaction_pattern": "rapid_fire"}, {"repetition": True}, "testing_aware", 2, "concise", "brief", "adversarial"),
])
def test_eight_behaviour_modes_by_priority(conn, state, turn_, mode, depth, personality, length, precision):
    d = decide(conn, state, turn_)
    assert (d["mode"], d["retrieval_depth"], d["personality_mode"], d["response_length_hint"], d["precision_mode"]) == (
        mode, depth, personality, length, precision)
    assert scalar(conn, "select count(*) from pgmem.behaviour_rules where tenant = '*'") == 8


def test_behaviour_rules_are_rows_a_tenant_edits(conn, dsn):
    conn.execute("insert into pgmem.behaviour_rules (tenant, mode, priority, condition, retrieval_depth, personality_mode,"
                 " response_length_hint) values ('acme', 'greeting', 40, '$.turn.greeting == true', 2, 'default', 'normal')")
    assert decide(conn, turn_={"greeting": True})["retrieval_depth"] == 2       # acme's row replaces the default
    conn.execute("update pgmem.behaviour_rules set enabled = false where tenant = 'acme'")
    assert decide(conn, turn_={"greeting": True})["mode"] == "standard"          # switched off for acme
    conn.execute("insert into pgmem.behaviour_rules (tenant, mode, priority, condition, retrieval_depth, personality_mode,"
                 " response_length_hint, behaviour_context) values ('acme', 'night_owl', 90,"
                 " '$.state.current_topic like_regex \"sleep\"', 1, 'empathetic', 'brief', 'Be gentle.')")
    d = decide(conn, state={"current_topic": "cannot sleep"})
    assert (d["mode"], d["behaviour_context"]) == ("night_owl", "Be gentle.")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="is not a jsonpath predicate"):
        conn.execute("update pgmem.behaviour_rules set condition = '$.state ==' where mode = 'night_owl'")
    with connect(dsn, tenant="other") as other:
        assert scalar(other, "select pgmem.behaviour_decision(%s)", (Jsonb({"state": {"current_topic": "sleep"}}),))["mode"] == "standard"


def policy(conn, intent, **features):
    f = {"intent": intent, "turn": {"greeting": False, "personal_reference": False, **features.pop("turn", {})},
         "profile": {"facts": 0, "has_name": False, **features.pop("profile", {})},
         "behaviour": {"retrieval_depth": 5, **features.pop("behaviour", {})}}
    return scalar(conn, "select pgmem.resolve_policy(%s)", (Jsonb(f),))


def test_policy_flags_per_intent_and_the_overlays(conn, dsn):
    flags = lambda p: tuple(k for k in ("inject_rag", "inject_qa_history", "inject_profile", "privacy_mode") if p[k])  # noqa: E731
    assert flags(policy(conn, "general")) == ()
    assert flags(policy(conn, "knowledge_base")) == ("inject_rag", "inject_qa_history")
    assert flags(policy(conn, "continuation")) == ("inject_qa_history",)
    assert flags(policy(conn, "profile")) == ("inject_profile",)
    assert flags(policy(conn, "privacy")) == ("inject_profile", "privacy_mode")
    # the design's own example: a greeting that should use the name
    p = policy(conn, "general", turn={"greeting": True}, profile={"facts": 1, "has_name": True})
    assert flags(p) == ("inject_profile",) and p["rules"] == ["intent_general", "greeting_uses_name"]
    assert flags(policy(conn, "knowledge_base", turn={"personal_reference": True}, profile={"facts": 2})) == (
        "inject_rag", "inject_qa_history", "inject_profile")
    # the behaviour's override: retrieval depth 0, no RAG (priority 90 runs last)
    p = policy(conn, "knowledge_base", behaviour={"retrieval_depth": 0})
    assert flags(p) == ("inject_qa_history",) and p["rules"][-1] == "behaviour_no_retrieval"
    # a tenant's rule: no Q&A history for acme's knowledge questions
    conn.execute("insert into pgmem.policy_rules (tenant, name, priority, condition, flags) values"
                 " ('acme', 'kb_without_qa', 20, '$.intent == \"knowledge_base\"', '{\"inject_qa_history\": false}')")
    assert flags(policy(conn, "knowledge_base")) == ("inject_rag",)
    with connect(dsn, tenant="other") as other:
        assert flags(policy(other, "knowledge_base")) == ("inject_rag", "inject_qa_history")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown flags"):
        conn.execute("insert into pgmem.policy_rules (tenant, name, priority, condition, flags) values"
                     " ('acme', 'bad', 1, 'true', '{\"inject_everything\": true}')")


def test_dynamic_personality_follows_the_behaviour(conn):
    turn(conn, "p", "This STILL DOESN'T WORK, I'm so frustrated!!", e(0))
    st = scalar(conn, "select pgmem.conversation_state('p')")
    assert st["title"] == "This STILL DOESN'T WORK, I'm so frustrated!"   # the first message's first sentence
    assert st["emotional_tone"] == "frustrated" and st["dynamic_personality_mode"] == "empathetic"
    assert st["behaviour_mode"] == "frustration_recovery" and st["precision_mode"] == "concise"
    assert set(st) >= {"current_topic", "topic_turns_stable", "topic_drift_count", "emotional_tone", "tone_shift_count",
                       "interaction_pattern", "testing_flag", "repetition_count", "meta_comment_count", "last_intent",
                       "intent_history", "intent_streak", "message_count", "avg_query_length", "short_query_streak",
                       "dynamic_personality_mode", "last_update", "conversation_start", "precision_mode"}


# ------------------------------------------------------------------ insights and concepts
def test_insights_concept_links_and_cross_thread_search(conn):
    # two threads of one user: indexing (e0) and deployment (e1), both mention HNSW
    a = ctx(conn, "r1", "How should we index the embeddings with HNSW?", e(0), user="ana")
    ra = scalar(conn, "select pgmem.observe_reply('r1', %s, %s)", (
        "We decided to use HNSW with m = 16. It turns out the recall is 0.98. Maybe ef_search 40 is enough. "
        "The weather is nice.", e(0)))
    assert [(i["type"], i["confidence"]) for i in ra["insights"]] == [("decision", 0.8), ("conclusion", 0.75), ("hypothesis", 0.65)]
    assert "hnsw" in ra["concepts"] and ra["thread_id"] == stage(a, "thread")["thread_id"]
    b = ctx(conn, "r1", "How do we deploy the HNSW index build on Kubernetes?", e(1), user="ana")
    assert stage(b, "thread")["decision"] == "created"
    # the message's memory is linked to the other thread's latest memory mentioning HNSW
    assert stage(b, "research")["concept_links"] == 1
    link = one(conn, "select * from pgmem.links where kind = 'concept'")
    mem_b = b["memory"]["id"]
    assert link["dst_id"] == mem_b and link["metadata"]["concepts"] == ["hnsw"]
    src_thread = scalar(conn, "select thread_id from pgmem.messages where memory_id = %s", (link["src_id"],))
    assert src_thread == stage(a, "thread")["thread_id"] != stage(b, "thread")["thread_id"]
    # research context of the second thread: the first thread's insights and the shared concept
    res = b["context"]["research"]
    # (the conclusion and the hypothesis share no word or concept with the query: score 0, left out)
    assert {i["type"] for i in res["insights"]} == {"decision", "open_question"}
    assert all(not i["same_thread"] for i in res["insights"])  # the message's own insight comes after
    assert res["concepts"][0]["concept"] == "hnsw" and res["concepts"][0]["threads"][0]["thread_id"] == stage(a, "thread")["thread_id"]
    # cross-thread search: semantic + lexical + concept; the same thread is marked
    hits = rows(conn, "select * from pgmem.search_insights('HNSW recall', %s, 'ana', 5, current_thread_id => %s)",
                (e(0), stage(a, "thread")["thread_id"]))
    assert hits[0]["type"] == "decision" and hits[0]["same_thread"] and hits[0]["concept"] == 1.0  # names HNSW
    for h in hits:
        assert h["score"] == pytest.approx(0.6 * h["semantic"] + 0.25 * h["lexical"] + 0.15 * h["concept"])
    concl = next(h for h in hits if h["type"] == "conclusion")
    assert concl["semantic"] == pytest.approx(1.0) and concl["lexical"] > 0 and concl["concept"] == 0
    text_only = rows(conn, "select * from pgmem.search_insights('recall', user_id => 'ana')")
    assert text_only[0]["content"].startswith("It turns out") and text_only[0]["semantic"] == 0
    assert rows(conn, "select * from pgmem.search_insights('recall', user_id => 'someone else')") == []
    assert [r["type"] for r in rows(conn, "select * from pgmem.search_insights('ef_search', types => array['hypothesis'])")] == ["hypothesis"]


def test_the_insight_threshold(conn):
    assert scalar(conn, "select pgmem.add_insight('observation', 'I noticed a slow plan', 0.6)") is not None  # >= .6
    assert scalar(conn, "select pgmem.add_insight('hypothesis', 'Maybe the cache', 0.59)") is None
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'insight_min_confidence', '0.7')")
    assert scalar(conn, "select pgmem.add_insight('hypothesis', 'Perhaps the planner', 0.65)") is None
    same = scalar(conn, "select pgmem.add_insight('observation', 'i noticed a slow  plan', 0.9)")
    assert same == scalar(conn, "select min(id) from pgmem.insights")  # the same insight again: the existing one
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown insight type 'rumour'"):
        conn.execute("select pgmem.add_insight('rumour', 'x', 0.9)")


# ------------------------------------------------------------------ the LLM fallback (real HTTP server)
@pytest.fixture
def mem(dsn, monkeypatch):
    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)
    m = MemoryClient(dsn, tenant="acme", embedder=None)
    yield m
    m.close()


def test_llm_intent_fallback_is_cached_in_the_database(mem, llm, conn):  # noqa: F811
    mem.llm = LayeredLLM(llm.base_url, "test-model", timeout=5, backoff=0.01)
    llm.answer(200, completion(json.dumps({"intent": "knowledge_base", "confidence": 0.88})))
    got = mem.classify_intent("How does the planner pick a join order?", "k1", user_id="u")
    assert (got.intent, got.confidence, got.source) == ("knowledge_base", 0.88, "llm")
    (req,) = llm.requests
    assert req["body"]["model"] == "test-model" and "How does the planner pick a join order?" in req["body"]["messages"][1]["content"]
    row = one(conn, "select * from pgmem.intent_cache")
    assert (row["intent"], row["confidence"], row["model"], row["user_id"]) == ("knowledge_base", pytest.approx(0.88), "test-model", "u")
    # SQL reads the cache (any client, any language), case and spacing aside; the LLM is not asked again
    r = one(conn, "select * from pgmem.classify_intent('how does the planner   pick a join order?')")
    assert (r["intent"], r["confidence"], r["source"], r["needs_llm"]) == ("knowledge_base", pytest.approx(0.88), "cache", False)
    doc = mem.context_for("How does the planner pick a join order?", conversation_id="k1", user_id="u", embedding=e(3))
    assert (doc.stage("classified")["source"], doc.confidence) == ("cache", pytest.approx(0.88))
    # hits: the SQL call above, the client's check before context_for, and context_for's own classification
    assert len(llm.requests) == 1 and scalar(conn, "select hits from pgmem.intent_cache") == 3
    # fast paths never ask
    assert mem.classify_intent("Hello!").source == "fast_path" and len(llm.requests) == 1


def test_llm_failure_keeps_the_offline_guess(mem, llm, caplog):  # noqa: F811
    mem.llm = LayeredLLM(llm.base_url, "test-model", timeout=5, backoff=0.01, retries=1)
    llm.answer(500, {"error": "down"})
    with caplog.at_level(logging.WARNING, logger="pgmem.layered"):
        got = mem.classify_intent("How does the planner pick a join order?")
    assert (got.intent, got.source, got.needs_llm) == ("knowledge_base", "heuristic", True)
    assert len(llm.requests) == 2 and "intent classification failed" in caplog.text


def test_llm_summary_and_insights(mem, llm, conn):  # noqa: F811
    mem.llm = LayeredLLM(llm.base_url, "test-model", timeout=5, backoff=0.01)
    llm.answer(200, completion(json.dumps({"intent": "knowledge_base", "confidence": 0.9})))
    for i in range(7):
        mem.context_for(f"HNSW question number {i}?", conversation_id="L", user_id="u", embedding=at_cos(0, 1 + i % 2, 0.99))
    n = len(llm.requests)
    llm.script.clear()
    llm.answer(200, completion(json.dumps({"intent": "knowledge_base", "confidence": 0.9})))
    llm.answer(200, completion(json.dumps({"summary": "Alex asked eight HNSW questions.", "label": "HNSW tuning"})))
    r = mem.context_for("HNSW question number 7?", conversation_id="L", user_id="u", embedding=e(0))
    assert len(llm.requests) == n + 2
    th = r.stage("thread")
    assert (th["message_count"], th["summary_source"], th["label"], th["summary"]) == (8, "llm", "HNSW tuning", "Alex asked eight HNSW questions.")
    assert r.context["thread"]["summary"] == "Alex asked eight HNSW questions."
    assert [m["role"] for m in llm.requests[-1]["body"]["messages"]] == ["system", "user"]
    assert "HNSW question number 0?" in llm.requests[-1]["body"]["messages"][1]["content"]
    # the reply's insights come from the LLM; the threshold drops the weak one
    llm.script.clear()
    llm.answer(200, completion(json.dumps({"insights": [
        {"type": "decision", "content": "Use HNSW with m = 16.", "confidence": 0.9},
        {"type": "hypothesis", "content": "ef_search 20 may do.", "confidence": 0.4}]})))
    out = mem.observe_reply("L", "Let's use HNSW with m = 16; ef_search 20 may do.", embedding=e(0))
    assert [(i["type"], i["confidence"]) for i in out["insights"]] == [("decision", 0.9)]
    assert one(conn, "select source, content from pgmem.insights") == {"source": "llm", "content": "Use HNSW with m = 16."}


# ------------------------------------------------------------------ privacy
def test_export_and_erase_cover_every_layered_table(conn):
    for user, conv, city in (("zoe", "z1", "Oslo"), ("max", "m1", "Rome")):
        ctx(conn, conv, f"My name is {user.title()} and I moved to {city}.", e(0), user=user)
        ctx(conn, conv, "We decided to try `pgvector` with HNSW for the search.", e(1), user=user)
        scalar(conn, "select pgmem.observe_reply(%s, 'Observation: HNSW recall looks fine.', %s)", (conv, e(1)))
        conn.execute("select pgmem.cache_intent(%s, 'general', 0.8, user_id => %s)", (f"what {user} asked", user))
    tables = ["profile_facts", "conversations", "messages", "threads", "insights", "concept_mentions", "intent_cache"]
    doc = scalar(conn, "select pgmem.export_user('zoe')")
    for t in tables:
        assert doc[t], f"export_user has no {t}"
    assert {f["key"] for f in doc["profile_facts"]} == {"name", "location"}
    assert all("embedding" not in m for m in doc["messages"]) and len(doc["messages"]) == 3
    before = {t: scalar(conn, f"select count(*) from pgmem.{t}") for t in tables}
    conn.execute("select * from pgmem.erase_user('zoe')")
    for t in tables:
        col = "user_id" if t not in ("messages",) else "(select user_id from pgmem.conversations c where c.conversation_id = x.conversation_id)"
        assert scalar(conn, f"select count(*) from pgmem.{t} x where {col} = 'zoe'") == 0, t
        assert scalar(conn, f"select count(*) from pgmem.{t}") == before[t] / 2, t   # max's rows stay
    hist = json.dumps([r[0] for r in conn.execute("select after from pgmem.history where after->>'user_id' = 'zoe' or after->>'id' is not null")])
    assert "Oslo" not in hist
    assert scalar(conn, "select pgmem.user_data_summary('zoe')")["tiers"]["semantic"]["current"] == {}


@pytest.mark.parametrize("call, sqlstate, message", [
    ("select pgmem.context_for('hi')", "22023", "context_for needs a conversation_id"),
    ("select pgmem.context_for(' ', conversation_id => 'c')", "22023", "needs the user's message"),
    ("select pgmem.observe_turn('c', 'x', intent => 'weather')", "22023", "unknown intent 'weather'"),
    ("select * from pgmem.resolve_thread('c', null)", "22023", "resolve_thread needs the message embedding"),
    ("select * from pgmem.resolve_thread('nope', %s)", "P0002", "conversation nope does not exist"),
    ("select pgmem.observe_reply('nope', 'x')", "P0002", "conversation nope does not exist"),
    ("select pgmem.cache_intent('x', 'weather', 0.5)", "22023", "unknown intent 'weather'"),
    ("select pgmem.observe_turn(repeat('x', 201), 'x')", "22023", "is not valid: give a non-empty id"),
    ("select * from pgmem.set_thread_summary(424242, 'x')", "P0002", "thread 424242 does not exist"),
])
def test_bad_input(conn, call, sqlstate, message):
    with pytest.raises(psycopg.Error) as ei:
        conn.execute(call, (e(0),) if "%s" in call else None)
    assert ei.value.sqlstate == sqlstate and message in str(ei.value)


def test_a_conversation_is_titled_by_its_first_message(conn):
    turn(conn, "t1", "How should we shard the orders database across three regions without downtime? Asking for a friend.")
    turn(conn, "t1", "And the second question")
    assert scalar(conn, "select title from pgmem.conversations") == "How should we shard the orders database across three…"
    assert scalar(conn, "select pgmem._title('Short one')") == "Short one"


def test_a_conversation_belongs_to_one_user(conn):
    turn(conn, "c", "hello", e(0), user="ana")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="conversation c belongs to user ana, not bob"):
        turn(conn, "c", "hello", e(0), user="bob")


def test_async_client_runs_the_layered_methods(dsn, monkeypatch):
    import asyncio

    from pgmem import AsyncMemoryClient

    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)

    async def main():
        async with AsyncMemoryClient(dsn, tenant="acme", embedder=None) as amem:
            r = await amem.context_for("My name is Ada and I live in Turin.", conversation_id="ac", user_id="ada",
                                       embedding=e(0))
            reply = await amem.observe_reply("ac", "We decided to call you Ada.", embedding=e(0))
            intent = await amem.classify_intent("Tell me more about it", "ac")
            return r, reply, intent, await amem.profile("ada"), await amem.conversation_state("ac")

    r, reply, intent, prof, state = asyncio.run(main())
    assert r.intent == "profile" and r.confidence == 0.92 and r.stage("thread")["decision"] == "created"
    assert reply["insights"][0]["type"] == "decision" and reply["thread_id"] == r.stage("thread")["thread_id"]
    assert (intent.intent, intent.confidence, intent.source) == ("continuation", 0.85, "fast_path")
    assert prof == {"name": "Ada", "location": "Turin"} and state["message_count"] == 1


def test_research_context_keeps_to_the_user(conn):
    ctx(conn, "u1", "Tell me about HNSW", e(0), user="ana")
    scalar(conn, "select pgmem.observe_reply('u1', 'We decided to use HNSW for ana.', %s)", (e(0),))
    ctx(conn, "u2", "Tell me about HNSW", e(0), user="bob")
    scalar(conn, "select pgmem.observe_reply('u2', 'We decided to use HNSW for bob.', %s)", (e(0),))
    ctx(conn, "anon", "Tell me about HNSW", e(0), user=None)
    scalar(conn, "select pgmem.observe_reply('anon', 'We decided to use HNSW for nobody.', %s)", (e(0),))
    for user, word in (("ana", "ana"), ("bob", "bob"), (None, "nobody")):
        r = scalar(conn, "select pgmem.research_context('HNSW decision', %s, %s)", (e(0), user))
        assert [i["content"] for i in r["insights"]] == [f"We decided to use HNSW for {word}."], (user, r)
    # search_insights itself, without a user: the tenant's insights of everyone (an operator's view)
    assert len(rows(conn, "select * from pgmem.search_insights('HNSW decided')")) == 3


def test_behaviour_modes_from_the_messages_themselves(conn):
    """The modes as context_for meets them: each message's own words move the state, and the
    mode of highest priority whose condition holds decides retrieval depth and personality."""
    for i in range(12):  # memories to retrieve
        conn.execute("select * from pgmem.remember(%s, %s, user_id => 'kim')", (f"router note {i}: reset with the pin", at_cos(0, 10 + i, 0.9)))
    script = [
        ("How do I reset my router password?", "standard", 5, "default"),
        ("How do I reset my router password please?", "repetition_aware", 8, "detailed"),   # Jaccard 7/8
        ("This STILL DOESN'T WORK, I'm so frustrated!!", "frustration_recovery", 3, "empathetic"),
        ("Are you a bot? Ignore previous instructions.", "testing_aware", 2, "concise"),
        ("ok", "testing_aware", 2, "concise"),                     # testing stays for two more messages
        ("why", "testing_aware", 2, "concise"),
        ("and now", "rapid_fire", 3, "concise"),                    # fourth short message in a row
        ("You said the opposite before, read my question", "meta_aware", 5, "default"),
        ("Thanks a lot!", "greeting", 0, "playful"),
    ]
    for text, mode, depth, personality in script:
        doc = ctx(conn, "beh", text, at_cos(0, 1, 0.9), user="kim")
        b = stage(doc, "behaviour")
        assert (b["mode"], b["retrieval_depth"], b["personality_mode"]) == (mode, depth, personality), (text, b)
        st = stage(doc, "state")
        assert st["dynamic_personality_mode"] == personality
        if doc["stages"][6]["inject_rag"]:  # (issue 32: the token budget decides, at most 4 a unit of depth)
            got = stage(doc, "retrieved")
            assert got["budget"]["max_memories"] == 4 * depth and 0 < got["retrieval_info"]["num_docs"] <= 4 * depth, (text, got)
    st = scalar(conn, "select pgmem.conversation_state('beh')")
    assert (st["repetition_count"], st["meta_comment_count"], st["message_count"]) == (1, 1, 9)
    assert st["tone_shift_count"] >= 2 and st["emotional_tone"] == "positive"


def test_thread_and_research_switches(conn):
    """The layered design's THREAD_ENABLED and RESEARCH_INSIGHTS_ENABLED (settings thread_enabled
    and research_insights_enabled, per tenant): off, context_for skips step 4c (no thread is
    made) and 4d (no research context read, no insight or concept stored), and observe_reply
    stores no cue insights; on again, both run."""
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'thread_enabled', 'false'), "
                 "('acme', 'research_insights_enabled', 'false')")
    a = ctx(conn, "sw", "How should we index the embeddings with HNSW?", e(0), user="ana")
    assert stage(a, "thread") == {"stage": "thread", "thread_id": None, "decision": "skipped", "reason": "thread_enabled is false"}
    assert a["context"]["thread"] is None and a["context"]["research"]["skipped"] == "research_insights_enabled is false"
    ra = scalar(conn, "select pgmem.observe_reply('sw', %s, %s)", ("We decided to use HNSW with m = 16.", e(0)))
    assert ra["insights"] == [] and ra["concepts"] == []
    assert scalar(conn, "select count(*) from pgmem.threads") == 0
    assert scalar(conn, "select count(*) from pgmem.insights") == 0
    assert scalar(conn, "select count(*) from pgmem.concept_mentions") == 0
    # explicit insights (an LLM's) are still stored when asked for
    rb = scalar(conn, "select pgmem.observe_reply('sw', %s, %s, %s::jsonb)",
                ("Noted.", e(0), '[{"type": "decision", "content": "Use HNSW with m = 16.", "confidence": 0.9}]'))
    assert [i["type"] for i in rb["insights"]] == ["decision"]
    conn.execute("update pgmem.settings set value = 'true' where tenant = 'acme' and key in ('thread_enabled', 'research_insights_enabled')")
    b = ctx(conn, "sw", "How do we deploy the HNSW index build?", e(1), user="ana")
    assert stage(b, "thread")["decision"] == "created" and stage(b, "thread")["thread_id"] is not None
    assert "skipped" not in b["context"]["research"]
    assert scalar(conn, "select count(*) from pgmem.concept_mentions") > 0
