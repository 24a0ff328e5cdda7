"""Tier B, profile facts (layered-memory-architecture.md, "Four Memory Tiers", B): the newest
fact wins without losing the old one.

pgmem.set_fact supersedes: the old row is retired (recorded_to), a copy with its validity
closed takes its place, nothing is deleted, and each call is one row of pgmem.history.
pgmem.profile(user, as_of, known_at) reads both times. remember()/remember_many() write the
facts their extractor put in metadata.facts, and a repeated statement that the surprise gate
keeps out (duplicate, rejected) still makes its value current again.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pgmem.engine.profile_facts import detect_facts
from scripted_llm import completion, llm  # noqa: F401  (the scripted OpenAI-compatible server fixture)
from sqlhelpers import call, one, rows, scalar

DAY = timedelta(days=1)


def set_fact(conn, user, key, value, **kw):
    return call(conn, "set_fact", user, key, Jsonb(value), **kw)[0]


def profile(conn, user, as_of=None, known_at=None) -> dict:
    return {r["key"]: r["value"] for r in rows(conn, "select * from pgmem.profile(%s, %s, %s)", (user, as_of, known_at))}


def test_newest_fact_wins_and_the_old_one_is_answerable_with_as_of(conn):
    now = scalar(conn, "select now()")
    t0, t1 = now - 10 * DAY, now - 2 * DAY
    a = set_fact(conn, "alex", "location", "Lisbon", valid_from=t0)
    assert a["decision"] == "added" and a["retired"] == [] and a["previous_value"] is None
    between = scalar(conn, "select clock_timestamp()")
    b = set_fact(conn, "alex", "location", "Berlin", valid_from=t1, statement="I moved to Berlin")
    assert b["decision"] == "superseded" and b["previous_value"] == "Lisbon" and b["retired"] == [a["fact_id"]]

    assert profile(conn, "alex") == {"location": "Berlin"}
    assert profile(conn, "alex", as_of=now - 5 * DAY) == {"location": "Lisbon"}
    assert profile(conn, "alex", as_of=now - 11 * DAY) == {}
    # what pgmem believed between the two calls: Lisbon, open-ended
    assert profile(conn, "alex", known_at=between) == {"location": "Lisbon"}

    hist = rows(conn, "select * from pgmem.fact_history('alex', 'location')")
    assert [(h["value"], h["status"], h["valid_from"], h["valid_to"]) for h in hist] == [
        ("Lisbon", "retired", t0, None),   # the row as first recorded, superseded knowledge
        ("Lisbon", "past", t0, t1),        # its validity closed where Berlin starts
        ("Berlin", "current", t1, None)]
    retired, closed, current = hist
    assert closed["replaces"] == retired["fact_id"] and current["statement"] == "I moved to Berlin"
    assert retired["recorded_to"] == closed["recorded_from"] == current["recorded_from"]  # no gap in transaction time
    # nothing was deleted; each call is one history row
    assert scalar(conn, "select count(*) from pgmem.profile_facts where user_id = 'alex'") == 3
    h = rows(conn, "select op, memory_id, before, after, details from pgmem.history"
                   " where details->>'table' = 'profile_facts' order by id")
    assert [(x["op"], x["memory_id"], x["details"]["decision"]) for x in h] == [("add", None, "added"), ("update", None, "superseded")]
    assert h[1]["before"]["value"] == "Lisbon" and h[1]["after"]["value"] == "Berlin" and h[1]["after"]["user_id"] == "alex"
    assert h[1]["details"]["retired"] == [a["fact_id"]]


def test_a_statement_that_arrives_late_keeps_its_place_in_time(conn):
    now = scalar(conn, "select now()")
    set_fact(conn, "u", "location", "Berlin", valid_from=now - 2 * DAY)
    r = set_fact(conn, "u", "location", "Lisbon", valid_from=now - 10 * DAY)  # older, told later
    assert r["decision"] == "added" and r["retired"] == []
    assert profile(conn, "u") == {"location": "Berlin"}
    assert profile(conn, "u", as_of=now - 5 * DAY) == {"location": "Lisbon"}
    hist = rows(conn, "select value, status, valid_to from pgmem.fact_history('u')")
    assert [(h["value"], h["status"], h["valid_to"]) for h in hist] == [("Lisbon", "past", now - 2 * DAY), ("Berlin", "current", None)]
    # a value inside an earlier span splits it: Porto from day 7 to day 4 (Lisbon before and after)
    r = set_fact(conn, "u", "location", "Porto", valid_from=now - 7 * DAY, valid_to=now - 4 * DAY)
    assert r["decision"] == "superseded"
    spans = [(h["value"], (now - h["valid_from"]).days, h["valid_to"] and (now - h["valid_to"]).days)
             for h in rows(conn, "select * from pgmem.fact_history('u') where status <> 'retired'")]
    assert spans == [("Lisbon", 10, 7), ("Porto", 7, 4), ("Lisbon", 4, 2), ("Berlin", 2, None)]


def test_the_same_value_again_changes_nothing_and_end_fact_closes(conn):
    a = set_fact(conn, "u", "diet", "vegetarian")
    assert set_fact(conn, "u", "diet", "vegetarian")["decision"] == "unchanged"
    assert scalar(conn, "select count(*) from pgmem.profile_facts") == 1
    e = one(conn, "select * from pgmem.end_fact('u', 'diet', statement => 'I eat fish again')")
    assert e["decision"] == "ended"
    assert profile(conn, "u") == {}
    assert profile(conn, "u", as_of=scalar(conn, "select now() - interval '1 microsecond'")) == {}
    hist = rows(conn, "select * from pgmem.fact_history('u')")
    assert [(h["status"], h["replaces"]) for h in hist] == [("retired", None), ("past", a["fact_id"])]
    assert one(conn, "select * from pgmem.end_fact('u', 'diet')")["decision"] == "not_in_force"


@pytest.mark.parametrize("call, message", [
    ("select * from pgmem.set_fact('u', 'Home City!', '\"x\"')", "fact key 'Home City!' is not valid"),
    ("select * from pgmem.set_fact('u', 'city', 'null')", 'the value of fact "city" is null'),
    ("select * from pgmem.set_fact(null, 'city', '\"x\"')", "set_fact needs a user_id"),
    ("select * from pgmem.set_fact('u', 'city', '\"x\"', valid_from => now(), valid_to => now() - interval '1 day')",
     "is not after valid_from"),
    ("select * from pgmem.set_fact('u', 'city', '\"x\"', confidence => 2)", "confidence must be between 0 and 1"),
    ("select * from pgmem.apply_facts('u', '{\"key\": \"x\"}')", "facts must be a JSON array"),
    ("select * from pgmem.apply_facts('u', '[{\"key\": \"x\"}]')", 'a fact must be an object with "key" and "value"'),
])
def test_bad_input_is_named(conn, call, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue) as ei:
        conn.execute(call)
    assert message in str(ei.value)


def test_detect_facts_in_sql_is_the_engines(conn):
    for text in ("My name is Alex", "I switched from VS Code to Neovim", "I'm allergic to peanuts", "I moved to Berlin",
                 "nothing personal here"):
        assert scalar(conn, "select pgmem.detect_facts(%s)", (text,)) == detect_facts(text)
    assert scalar(conn, "select pgmem.detect_facts('My name is Alex', 'assistant')") == []


def test_apply_facts_switch_supersedes_the_value_it_names(conn):
    set_fact(conn, "u", "keyboard_layout", "Dvorak")
    facts = detect_facts("I switched from Dvorak to Colemak")
    assert facts[0]["key"] == "switched.dvorak"   # no category word: the key comes from the fact in force
    got = rows(conn, "select * from pgmem.apply_facts('u', %s)", (Jsonb(facts),))
    assert [(g["key"], g["value"], g["decision"]) for g in got] == [("keyboard_layout", "Colemak", "superseded")]
    assert profile(conn, "u") == {"keyboard_layout": "Colemak"}
    # without a fact holding the old value, the fallback key stays
    got = rows(conn, "select * from pgmem.apply_facts('v', %s)", (Jsonb(facts),))
    assert got[0]["key"] == "switched.dvorak"


def remember(conn, content, **kw):
    return call(conn, "remember", content, **kw)[0]


def meta(text):
    return json.dumps({"facts": detect_facts(text), "extracted_by": "heuristic"})


def test_remember_writes_the_facts_the_extractor_found(conn):
    now = scalar(conn, "select now()")
    r = remember(conn, "I moved to Lisbon", user_id="maya", metadata=meta("I moved to Lisbon"), created_at=now - 30 * DAY)
    assert r["decision"] == "stored"
    f = one(conn, "select * from pgmem.profile('maya')")
    assert (f["key"], f["value"], f["source_memory_id"], f["valid_from"], f["source"]) == (
        "location", "Lisbon", r["memory_id"], now - 30 * DAY, "heuristic")
    assert f["statement"] == "I moved to Lisbon" and f["confidence"] == pytest.approx(0.9)
    # remember_many, several facts in one batch
    items = [{"content": t, "user_id": "maya", "metadata": json.loads(meta(t)), "created_at": (now - d * DAY).isoformat()}
             for t, d in (("I switched from VS Code to Neovim", 20), ("I'm allergic to peanuts and shellfish", 19),
                          ("I moved to Berlin", 10), ("The weather was nice today", 9))]
    res = rows(conn, "select * from pgmem.remember_many(%s)", (Jsonb(items),))
    assert [x["decision"] for x in res] == ["stored"] * 4
    assert profile(conn, "maya") == {"location": "Berlin", "editor": "Neovim", "allergies.peanuts": True,
                                     "allergies.shellfish": True}
    assert profile(conn, "maya", as_of=now - 15 * DAY)["location"] == "Lisbon"
    # a memory without a user has nobody to describe; a memory without facts writes none
    remember(conn, "I moved to Oslo", metadata=meta("I moved to Oslo"))
    assert scalar(conn, "select count(*) from pgmem.profile_facts where user_id is distinct from 'maya'") == 0


def test_a_repeated_statement_the_gate_keeps_out_is_still_current(conn):
    now = scalar(conn, "select now()")
    remember(conn, "I live in Lisbon", user_id="maya", metadata=meta("I live in Lisbon"), created_at=now - 30 * DAY)
    remember(conn, "I moved to Berlin", user_id="maya", metadata=meta("I moved to Berlin"), created_at=now - 10 * DAY)
    assert profile(conn, "maya") == {"location": "Berlin"}
    # the exact words again: a duplicate (nothing stored), but Lisbon is where she lives now
    r = remember(conn, "I live in Lisbon", user_id="maya", metadata=meta("I live in Lisbon"), created_at=now - DAY)
    assert r["decision"] == "duplicate"
    assert profile(conn, "maya") == {"location": "Lisbon"}
    assert profile(conn, "maya", as_of=now - 5 * DAY) == {"location": "Berlin"}
    # a near-repeat the gate rejects (the same tokens as the stored "I moved to Berlin": keyword
    # novelty 0, surprise .2 x rarity < .15): Berlin is current again, from the facts of the memory it repeats
    rej = remember(conn, "I moved to Berlin!", user_id="maya", metadata=meta("I moved to Berlin!"), created_at=now - DAY / 2)
    assert rej["decision"] == "rejected", rej
    assert profile(conn, "maya") == {"location": "Berlin"}
    assert profile(conn, "maya", as_of=now - 0.75 * DAY) == {"location": "Lisbon"}
    # the same without metadata (a plain SQL caller): the repeated memory's facts are used
    set_fact(conn, "maya", "location", "Porto")
    assert remember(conn, "i moved to berlin...", user_id="maya")["decision"] == "rejected"
    assert profile(conn, "maya") == {"location": "Berlin"}


def test_a_rejected_statement_never_reapplies_a_different_value(conn):
    remember(conn, "I moved to Berlin", user_id="maya", metadata=meta("I moved to Berlin"))
    set_fact(conn, "maya", "location", "Porto")
    # "I moved to Berlin again" is near "I moved to Berlin"; suppose the gate rejected a statement whose
    # text does not name Berlin: the history trigger checks the value is in the new text
    mid = scalar(conn, "select id from pgmem.memories where content = 'I moved to Berlin'")
    conn.execute("insert into pgmem.history (tenant, memory_id, op, after) values ('acme', %s, 'reject', %s)",
                 (mid, Jsonb({"content": "I moved back home", "user_id": "maya", "created_at": datetime.now(timezone.utc).isoformat()})))
    assert profile(conn, "maya") == {"location": "Porto"}


def test_the_client_extractor_finds_profile_statements(dsn, conn, monkeypatch):
    from pgmem import MemoryClient

    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)
    with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
        res = mem.remember_many([
            {"content": "Hi! I'm Maya. I live in Lisbon and I'm allergic to peanuts.", "actor": "user", "user_id": "maya",
             "ts": "2026-09-01T07:00:00Z"},
            {"content": "Noted: you live in Oslo.", "actor": "assistant", "user_id": "maya", "ts": "2026-09-01T07:01:00Z"},
            {"content": "I moved to Berlin last week", "actor": "user", "user_id": "maya", "ts": "2026-10-01T07:00:00Z"}])
        assert [r.decision for r in res] == ["stored"] * 3
        assert res[0].id and mem.get(res[0].id)["metadata"]["facts"][0]["key"] == "name"
        assert "facts" not in mem.get(res[1].id)["metadata"]  # an assistant's words state nothing about the user
        assert mem.profile("maya") == {"name": "Maya", "location": "Berlin", "allergies.peanuts": True}
        assert mem.profile("maya", as_of="2026-09-15T00:00:00Z")["location"] == "Lisbon"
        mem.remember("I switched from VS Code to Neovim", user_id="maya", who="user", extract=True)
        assert mem.profile("maya")["editor"] == "Neovim"
        mem.remember("I use Emacs now", user_id="maya", who="user")  # extract=False: the caller's fields only
        assert mem.profile("maya")["editor"] == "Neovim"


def test_the_llm_extractor_states_profile_facts(dsn, monkeypatch, llm):  # noqa: F811
    """With an LLM configured, the extractor asks it for the facts too (LLM_FIELD in the prompt):
    the LLM's facts first, the heuristic's for the keys it does not state, none from an
    assistant; a real OpenAI-compatible HTTP server on 127.0.0.1 answers."""
    from pgmem import MemoryClient
    from pgmem.extraction import LLMExtractor

    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)
    for facts in ([{"key": "Primary Language", "value": "Rust", "confidence": 0.85},  # no heuristic rule says this
                   {"key": "location", "value": "Lisbon", "confidence": 0.8, "statement": "I am based in Lisbon"}],  # over the heuristic's .9
                  [],                                                                  # the heuristic's Berlin stands
                  [{"key": "primary_language", "value": "Go", "confidence": 0.9}]):   # an assistant's words: dropped
        llm.answer(200, completion(json.dumps({"what": "a message", "category": "fact", "facts": facts})))
    ext = LLMExtractor(llm.base_url, "test-model", timeout=5, backoff=0.01)
    with MemoryClient(dsn, tenant="acme", embedder=None, extractor=ext) as mem:
        res = mem.remember_many([
            {"content": "These days I write mostly Rust, and I am based in Lisbon.", "actor": "user", "user_id": "maya",
             "ts": "2026-09-01T07:00:00Z"},
            {"content": "I moved to Berlin last week", "actor": "user", "user_id": "maya", "ts": "2026-10-01T07:00:00Z"},
            {"content": "Noted: you write Go.", "actor": "assistant", "user_id": "maya", "ts": "2026-10-01T07:01:00Z"}])
        assert [r.decision for r in res] == ["stored"] * 3
        assert len(llm.requests) == 3 and '"facts": array of profile facts' in llm.requests[0]["body"]["messages"][0]["content"]
        first, moved, said = (mem.get(r.id)["metadata"] for r in res)
        assert [(f["key"], f["value"], f["confidence"], f["rule"]) for f in first["facts"]] == [
            ("primary_language", "Rust", 0.85, "llm"), ("location", "Lisbon", 0.8, "llm")]
        assert [(f["key"], f["value"], f["rule"]) for f in moved["facts"]] == [("location", "Berlin", "location")]
        assert "facts" not in said
        assert mem.profile("maya") == {"primary_language": "Rust", "location": "Berlin"}
        assert mem.profile("maya", as_of="2026-09-15T00:00:00Z") == {"primary_language": "Rust", "location": "Lisbon"}
        lisbon = [h for h in mem.fact_history("maya", "location") if h["value"] == "Lisbon" and h["status"] == "past"]
        assert lisbon and lisbon[0]["source"] == "llm" and lisbon[0]["statement"] == "I am based in Lisbon"
