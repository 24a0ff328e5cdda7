"""The agent loop (issue 32): what context_for gives an agent is what search finds, with no echo.

Real MiniLM embeddings (the client's Embedder), a real cluster: the chat's own questions and
answers never come back as memories, a message never ranks against itself, search steps the
chat's turns back (conversation_factor) unless the question asks about the conversation, the
token budget decides how many memories a context carries, greetings and fillers are no
memories, a profile question gets the turn that stated each fact, and threads follow the
conversation (a calibrated attach threshold, continuations).
"""
from __future__ import annotations

import pytest

from pgmem import MemoryClient

from conftest import connect

FACTS = ["I am allergic to peanuts.", "I live in Berlin.", "Tom is flying to Tokyo on Friday."]


@pytest.fixture(scope="module")
def embedder():
    from pgmem.embedding import Embedder

    return Embedder()


@pytest.fixture
def mem(dsn, embedder):
    m = MemoryClient(dsn, tenant="acme", embedder=embedder)
    yield m
    m.close()


def ask(mem, text, conv="chat", user="maya", **kw):
    return mem.context_for(text, conversation_id=conv, user_id=user, **kw)


def memory_ids(r) -> list[int]:
    return [m["id"] for m in r.context["memories"]]


def test_no_echo_the_chat_questions_never_come_back_as_memories(mem, dsn):
    facts = [mem.remember(f, who="user", user_id="maya").id for f in FACTS]
    first = ask(mem, "What am I allergic to?")
    assert first.doc["memory"]["kind"] == "question"
    q1 = first.doc["memory"]["id"]
    assert q1 not in memory_ids(first)  # never against itself
    assert facts[0] == memory_ids(first)[0]  # the allergy, first
    later = ask(mem, "When is Tom flying to Tokyo?")
    ids = memory_ids(later)
    assert q1 not in ids and later.doc["memory"]["id"] not in ids  # neither the earlier question nor itself
    assert ids[0] == facts[2]
    assert set(facts) <= set(ids)  # the budget, not a fixed 5, decides: every fact fits
    # the same question twice: the facts both times, never the question
    again = ask(mem, "What am I allergic to?")
    assert memory_ids(again)[0] == facts[0] and q1 not in memory_ids(again)
    with connect(dsn) as c:
        cat = dict(c.execute("select id, category from pgmem.memories where id = any(%s)", ([q1],)).fetchall())
    assert cat == {q1: "question"}


def test_search_steps_the_chat_turns_back_unless_asked_about_the_conversation(mem, dsn):
    allergy = mem.remember("Maya is allergic to peanuts.", who="user", user_id="maya").id
    q = ask(mem, "what is maya allergic to?").doc["memory"]["id"]
    hits = mem.search("what is maya allergic to", k=5)
    ids = [h.id for h in hits]
    assert ids.index(allergy) < ids.index(q)  # the statement outranks the stored question
    with connect(dsn) as c:
        rows = c.execute("select id, signal, value from pgmem.explain_search('what is maya allergic to') "
                         "where signal = 'conversation'").fetchall()
        assert {(r[0], r[2]) for r in rows} == {(q, 0.5)}  # the step, shown by explain_search
        # a question about the conversation itself: the chat's turns keep their whole score
        assert c.execute("select pgmem._asks_about_conversation('what did you tell me about peanuts')").fetchone()[0]
        assert not c.execute("select pgmem._asks_about_conversation('what is maya allergic to')").fetchone()[0]
        assert c.execute("select count(*) from pgmem.explain_search('what did I ask you about peanuts') "
                         "where signal = 'conversation'").fetchone()[0] == 0


def test_a_reply_is_an_answer_and_recall_of_the_conversation_finds_it(mem, dsn):
    ask(mem, "Can you suggest a dinner place?")
    reply = mem.observe_reply("chat", "Try Cafe Luna on Oranienstrasse, it has peanut-free dishes.")
    with connect(dsn) as c:
        assert c.execute("select category from pgmem.memories where id = %s",
                         (reply["memory_id"],)).fetchone()[0] == "answer"
    # an ordinary question does not get the agent's own reply as a memory...
    assert reply["memory_id"] not in memory_ids(ask(mem, "Where is Cafe Luna?", conv="other"))
    # ...a question about what was said does
    assert reply["memory_id"] in memory_ids(ask(mem, "What did you recommend about dinner?", conv="other"))


def test_history_window_turns_do_not_compete_as_memories(mem):
    ask(mem, "I adopted a dog called Rex.")
    said = ask(mem, "Rex loves the park near my flat.")
    r = ask(mem, "Tell me about Rex")
    window = {h["memory_id"] for h in r.context["history"] if h.get("memory_id")}
    assert said.doc["memory"]["id"] in window
    assert not window & set(memory_ids(r))
    assert r.stage("retrieved")["budget"]["excluded"] >= len(window)


def test_greetings_and_fillers_are_conversation_not_memories(mem, dsn):
    for text, why in [("Hi again!", "greeting"), ("ok thanks", "greeting"), ("sounds good", "filler"), ("lol", "filler")]:
        r = ask(mem, text)
        assert r.doc["memory"]["decision"] == "skipped" and r.doc["memory"]["skipped"] == why, (text, r.doc["memory"])
    with connect(dsn) as c:
        assert c.execute("select count(*) from pgmem.memories").fetchone()[0] == 0
        assert c.execute("select count(*) from pgmem.messages where role = 'user'").fetchone()[0] == 4


def test_the_token_budget_decides_how_many_memories(mem, dsn):
    for i in range(40):
        mem.remember(f"Note {i}: the garden project needs compost, seeds and a watering plan for bed {i}.",
                     who="user", user_id="maya")
    r = ask(mem, "What does the garden project need?")
    info = r.stage("retrieved")["budget"]
    n = len(r.context["memories"])
    assert n > 5  # not a fixed 5
    assert info["tokens"] <= info["token_budget"] and n <= info["max_memories"]
    # a smaller budget carries fewer
    with connect(dsn) as c:
        c.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'context_memory_tokens', '60')")
    small = ask(mem, "What does the garden project need?", conv="c2")
    assert 1 <= len(small.context["memories"]) < n
    assert small.stage("retrieved")["budget"]["tokens"] <= 60 or len(small.context["memories"]) == 1
    # an explicit k caps the count
    assert len(ask(mem, "What does the garden project need?", conv="c3", k=3).context["memories"]) == 3


def test_a_profile_question_gets_the_profile_and_the_turn_that_stated_each_fact(mem):
    said = ask(mem, "My name is Maya and I live in Lisbon.")
    r = ask(mem, "Where do I live?", conv="later")
    assert r.intent == "profile"
    assert r.context["profile"].get("location") in ("Lisbon", "lisbon") or "Lisbon" in str(r.context["profile"])
    sources = r.context["profile_sources"]
    assert sources and all(s["memory_id"] == said.doc["memory"]["id"] for s in sources)
    assert said.doc["memory"]["id"] in memory_ids(r)  # and search's memories too


def test_threads_follow_the_conversation(mem, dsn):
    # unrelated memories, so that the threshold is calibrated on this model's spread (30 pairs)
    subjects = ["The invoice", "My cat", "The train to Porto", "The museum", "Our router", "The garden",
                "The tax form", "My violin", "The database index", "The bakery", "The marathon", "The printer"]
    ends = ["is due on the third.", "sleeps in the sun all day.", "leaves at nine from platform two.",
            "opens at ten on Sundays.", "needs a firmware update.", "needs water twice a week."]
    mem.remember_many([{"content": f"{s} {e}", "who": "user", "user_id": "someone-else"}
                       for i, s in enumerate(subjects) for e in ends[i % 6: i % 6 + 6:1]][:64], progress=False)
    turns = ["I'm planning a trip to Lisbon in May.", "Which neighbourhood in Lisbon should I stay in for the trip?",
             "Tell me more about it", "What are good day trips from Lisbon during my visit?"]
    threads = [ask(mem, t, conv="trip").stage("thread") for t in turns]
    assert len({t["thread_id"] for t in threads}) == 1, threads
    assert threads[2]["decision"] == "continued"
    other = ask(mem, "How do I reset my router's admin password?", conv="trip").stage("thread")
    assert other["decision"] == "created" and other["thread_id"] != threads[0]["thread_id"]
    with connect(dsn) as c:
        cal = c.execute("select value from pgmem.settings where key = 'thread_attach_threshold_calibrated'").fetchone()[0]
    assert 0.15 <= cal["value"] <= 0.9 and cal["pairs"] >= 2
    assert cal["value"] == pytest.approx(min(0.9, max(0.15, cal["mean"] + 2 * cal["sd"])), abs=2e-4)


def test_use_is_the_one_verb_and_a_retrieval_is_no_use(mem, dsn):
    a = mem.remember("Maya's sister lives in Porto.", who="user", user_id="maya").id
    b = mem.remember("Maya's sister is a nurse.", who="user", user_id="maya").id
    mem.search("maya's sister", k=5)  # a retrieval: logged, but no use
    with connect(dsn) as c:
        assert c.execute("select sum(access_count) from pgmem.memories").fetchone()[0] == 0
    assert mem.use([a, b], source="cited") == 2  # the caller says they were used
    with connect(dsn) as c:
        assert dict(c.execute("select id, access_count from pgmem.memories").fetchall()) == {a: 1, b: 1}
        assert c.execute("select kind from pgmem.accesses where memory_id = %s", (a,)).fetchone()[0] == "cited"
        assert c.execute("select count(*) from pgmem.links where kind = 'co_access'").fetchone()[0] == 1


def test_activate_and_recall_step_the_chat_turns_back_too(mem, dsn):
    """The chat's own question does not outrank the statement in Shadow's activation and
    Engram's recall either (conversation_factor in every ranking; the demo's activation
    section showed an earlier run's question first)."""
    allergy = mem.remember("Maya is allergic to peanuts.", who="user", user_id="maya").id
    q = ask(mem, "what is maya allergic to?").doc["memory"]["id"]
    for fn in ("activate", "recall"):
        with connect(dsn) as c:
            ids = [r[0] for r in c.execute(f"select id from pgmem.{fn}('what is maya allergic to', %s)",
                                           (mem.embedder.embed_query("what is maya allergic to"),)).fetchall()]
        assert allergy in ids and (q not in ids or ids.index(allergy) < ids.index(q)), (fn, ids)
