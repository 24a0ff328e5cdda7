"""The layered pipeline end to end (layered-memory-architecture.md, "The Pipeline (12 Steps)"):
a scripted multi-session conversation through MemoryClient.context_for with the real
all-MiniLM-L6-v2 embedder and no LLM, asserting message by message the intent and its
confidence, the topic-gate demotion, thread attach or new thread, the summary at a thread's
8th message, a profile update superseding the old value (the old one answerable with as_of),
and the privacy answer listing every tier.

The cosines that decide the gate (.35) and the threads (.55) come from MiniLM; the comments
give the values measured for these messages (topic similarity t, nearest-thread cosine c),
so a change of model that moves them shows up here first.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from pgmem import MemoryClient
from pgmem.engine import insights as engine_insights

T0 = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=3)

# (message, intent, confidence, source, thread, demoted from) -- thread: a letter per thread,
# a new letter = a new thread. t / c: topic similarity / cosine to the nearest thread (MiniLM).
SESSION_1 = [
    ("Hi there!", "general", 0.97, "fast_path", None, None),                                      # a greeting: no thread
    ("My name is Alex and I live in Lisbon.", "profile", 0.92, "fast_path", "B", None),           # t .23  c .23
    ("How does HNSW indexing work in pgvector?", "knowledge_base", 0.6, "heuristic", "C", None),  # t .08  c .08
    ("What ef_search value gives good recall for an HNSW index in pgvector?", "knowledge_base", 0.6, "heuristic", "C", None),  # c .74
    ("Does building the HNSW index in pgvector take long on a million vectors?", "knowledge_base", 0.6, "heuristic", "C", None),  # t .44 c .83
    ("How much memory does a pgvector HNSW index need for a million vectors?", "knowledge_base", 0.6, "heuristic", "C", None),  # t .61 c .82
    ("Why does that HNSW index need so much memory?", "continuation", 0.85, "fast_path", "C", None),  # t .59 >= .35: kept
    ("And what about my sourdough bread, does it need more water?", "general", 0.85, "fast_path", "D", "continuation"),  # t .08 < .35
    ("Can the HNSW index in pgvector be built concurrently?", "knowledge_base", 0.6, "heuristic", "C", None),  # c .81
    ("What m and ef_construction should I use for the pgvector HNSW index?", "knowledge_base", 0.6, "heuristic", "C", None),  # c .73
    ("Is an HNSW index in pgvector faster to query than IVFFlat?", "knowledge_base", 0.6, "heuristic", "C", None),  # c .79: thread C's 8th
]
SESSION_2 = [
    ("I moved to Berlin last month.", "profile", 0.92, "fast_path", "E", None),
    ("What do you know about me?", "privacy", 0.95, "fast_path", "F", None),
    ("Where do I live now?", "profile", 0.75, "heuristic", "E", None),  # the move's thread (the calibrated threshold)
]


@pytest.fixture(scope="module")
def embedder():
    from pgmem.embedding import Embedder

    e = Embedder()
    e.embed("warm up")
    return e


@pytest.fixture
def mem(dsn, embedder, monkeypatch):
    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)
    m = MemoryClient(dsn, tenant="acme", embedder=embedder)
    yield m
    m.close()


def test_scripted_multi_session_conversation(mem):
    threads: dict[str, int] = {}
    results = []
    for session, (conv, script, start) in enumerate((("s1", SESSION_1, T0), ("s2", SESSION_2, T0 + timedelta(days=2)))):
        for i, (text, intent, conf, source, thread, demoted) in enumerate(script):
            r = mem.context_for(text, conversation_id=conv, user_id="alex", created_at=start + timedelta(minutes=i))
            results.append(r)
            c = r.stage("classified")
            assert (c["intent"], c["confidence"], c["source"], c["demoted_from"]) == (intent, conf, source, demoted), (text, c)
            th = r.stage("thread")
            if thread is None:
                assert (th["decision"], th["reason"]) == ("skipped", "a greeting"), (text, th)
            elif thread in threads:
                assert (th["decision"], th["thread_id"]) in {("attached", threads[thread]), ("continued", threads[thread])}, (text, th)
                assert th["decision"] == "continued" or th["similarity"] >= th["threshold"]
            else:
                assert th["decision"] == "created", (text, th)
                assert th["similarity"] is None or th["similarity"] < th["threshold"]
                threads[thread] = th["thread_id"]
            # the streamed annotations: classified first, retrieved second, then generating
            ann = r.annotations()
            assert ann[0] == f'8:[{{"stage":"classified","intent":"{intent}","confidence":{conf}}}]'
            assert ann[1].startswith('8:[{"stage":"retrieved","retrieval_info":{"num_docs":') and ann[2] == '8:[{"stage":"generating"}]'
            assert [s["stage"] for s in r.stages] == ["classified", "topic_gate", "state", "behaviour", "thread", "research",
                                                      "policy", "history", "retrieved"]

    by_text = {text: r for (text, *_), r in zip(SESSION_1 + SESSION_2, results)}
    # the topic gate: applied to the two continuations only; one kept, one demoted
    kept = by_text["Why does that HNSW index need so much memory?"].stage("topic_gate")
    demoted = by_text["And what about my sourdough bread, does it need more water?"].stage("topic_gate")
    assert kept["applied"] and kept["similarity"] >= 0.35 and not kept["demoted"]
    assert demoted["applied"] and demoted["similarity"] < 0.35 and demoted["demoted"]
    assert [r.stage("topic_gate")["applied"] for r in results].count(True) == 2
    # a demoted continuation is general: no retrieval, no Q&A history
    assert demoted["threshold"] == 0.35
    assert by_text["And what about my sourdough bread, does it need more water?"].policy["inject_qa_history"] is False

    # the greeting: behaviour mode greeting, retrieval depth 0
    hi = results[0]
    assert hi.stage("behaviour")["mode"] == "greeting" and hi.stage("behaviour")["retrieval_depth"] == 0
    assert hi.stage("retrieved")["retrieval_info"] == {"num_docs": 0, "similar_queries": 0}

    # knowledge_base: RAG and Q&A history. The chat's earlier HNSW questions come back as Q&A
    # history and history, never as memories (issue 32: no echo; never the message itself)
    kb = by_text["Can the HNSW index in pgvector be built concurrently?"]
    assert kb.policy["inject_rag"] and kb.policy["inject_qa_history"] and kb.policy["rules"] == ["intent_knowledge_base", "question_retrieves"]
    docs = kb.context["memories"]
    assert all(d["category"] not in ("question", "answer") for d in docs)
    assert kb.doc["memory"]["id"] not in {d["id"] for d in docs}
    assert kb.context["qa_history"]
    assert kb.stage("retrieved")["retrieval_info"]["num_docs"] == len(docs) <= 4 * kb.stage("behaviour")["retrieval_depth"]
    assert {q["question"] for q in kb.context["qa_history"]} <= {t for t, *_ in SESSION_1[2:8]}

    # history pruning at message 11: the last 6 messages and the 3 older ones most like the query
    last = by_text["Is an HNSW index in pgvector faster to query than IVFFlat?"]
    hist = last.context["history"]
    assert [h["seq"] for h in hist if h["why"] == "recent"] == [5, 6, 7, 8, 9, 10]
    older = [h for h in hist if h["why"] == "semantic"]
    assert len(older) == 3 and {h["seq"] for h in older} <= {1, 2, 3, 4}
    assert {h["seq"] for h in older} == {3, 4, 2} or {h["seq"] for h in older} == {3, 4, 1}
    assert [h["seq"] for h in hist] == sorted(h["seq"] for h in hist)  # in conversation order, no duplicate
    assert last.stage("history") == {"stage": "history", "recent": 6, "semantic": 3}

    # the summary at thread C's 8th message, extractive (no LLM), with a label from its words
    th = last.stage("thread")
    assert th["message_count"] == 8 and th["summary_due"] and th["summary_source"] == "extractive"
    assert [r.stage("thread").get("summary_due") for r in results].count(True) == 1
    c_msgs = mem.call("thread_messages", thread_id=threads["C"])
    assert [m["content"] for m in c_msgs] == [t for t, *_, thread, _ in SESSION_1 if thread == "C"]
    assert th["label"] == engine_insights.label([m["content"] for m in c_msgs])
    assert "hnsw" in th["label"] and th["summary"] and last.context["thread"]["summary"] == th["summary"]

    # conversation state after session 1 (drifts at messages 2, 3, 4 and 8; 9-11 stable)
    st = mem.conversation_state("s1")
    assert st["message_count"] == 11 and st["topic_drift_count"] == 4 and st["topic_turns_stable"] == 3
    assert st["interaction_pattern"] == "deep_dive" and st["last_intent"] == "knowledge_base"
    assert st["intent_history"][-4:] == ["general", "knowledge_base", "knowledge_base", "knowledge_base"]
    assert st["intent_streak"] == 3
    assert by_text["What ef_search value gives good recall for an HNSW index in pgvector?"].stage("state")["interaction_pattern"] == "exploratory"

    # the profile update: Berlin supersedes Lisbon, and Lisbon is still the answer for session 1's time
    assert mem.profile("alex") == {"name": "Alex", "location": "Berlin"}
    assert mem.profile("alex", as_of=T0 + timedelta(days=1)) == {"name": "Alex", "location": "Lisbon"}
    assert [(h["value"], h["status"]) for h in mem.fact_history("alex", "location")] == [
        ("Lisbon", "retired"), ("Lisbon", "past"), ("Berlin", "current")]
    moved = by_text["I moved to Berlin last month."]
    assert moved.policy["inject_profile"] and moved.context["profile"] == {"name": "Alex", "location": "Berlin"}

    # the privacy answer lists what is stored in every tier
    priv = by_text["What do you know about me?"]
    assert priv.policy["privacy_mode"] and priv.policy["inject_profile"]
    tiers = priv.context["privacy"]["tiers"]
    assert set(tiers) == {"episodic", "semantic", "conversational", "threads", "research", "intent_cache"}
    assert tiers["semantic"]["current"] == {"name": "Alex", "location": "Berlin"} and tiers["semantic"]["superseded_rows"] == 1
    assert tiers["episodic"]["memories"] == mem.call("user_data_summary", user_id="alex")[0]["user_data_summary"]["tiers"]["episodic"]["memories"] - 1
    assert tiers["conversational"]["conversations"] == 2 and tiers["conversational"]["messages"] == 13
    assert tiers["threads"]["threads"] == 5 and "hnsw" in " ".join(tiers["threads"]["labels"])
    assert priv.context["privacy"]["rights"]["erase"] == "select * from pgmem.erase_user('alex')"

    # a personal question without a fast path: the offline guess (profile .75), and the profile answers it
    where = by_text["Where do I live now?"]
    assert where.stage("classified")["needs_llm"] and where.context["profile"]["location"] == "Berlin"
