"""Tenant isolation of the layered tiers, with real login roles over TCP (the roles of
tests/conftest.py): tenant b holds one of everything (profile facts, a conversation with
messages, state, threads, insights, concept mentions and links, a cached intent, its own
behaviour and policy rules); tenant a then calls every layered function aiming at b's ids,
conversation ids, user ids and texts, reads every layered table and view, and the test proves
that nothing of b comes back and no row of b changes (a superuser snapshot before and after).

The layered API functions are SECURITY DEFINER (sql/900_security.sql's audited list): they
filter every statement on the caller's tenant themselves, which is what this test checks.
"""
from __future__ import annotations

import json

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from conftest import at_cos, connect, e, role_connect
from registry import LAYERED_FUNCTIONS
from sqlhelpers import public_functions, rows, scalar

MARK = "quokkazebra"          # a word only tenant b's rows contain
USER = "shared-user"          # the same user id in both tenants
CONV = "shared-conv"          # the same conversation id in both tenants
TABLES = ("profile_facts", "conversations", "messages", "threads", "insights", "concept_mentions", "intent_cache",
          "behaviour_rules", "policy_rules")
VIEWS = ("profile_facts_current", "profile_facts_history", "thread_overview", "insights_by_type", "conversation_states")



def snapshot(su, tenant):
    return {t: sorted(json.dumps(r[0], sort_keys=True, default=str) for r in su.execute(
        sql.SQL("select to_jsonb(x) from pgmem.{} x where x.tenant = %s").format(sql.Identifier(t)), (tenant,)))
        for t in TABLES} | {"links": sorted(str(r) for r in su.execute(
            "select src_id, dst_id, kind, count, metadata from pgmem.links where tenant = %s and kind = 'concept'", (tenant,)))}


def no_b(result, what):
    text = json.dumps(result, default=str)
    assert MARK not in text, f"{what} returned text of tenant b: {text[:300]}"
    assert '"tenant": "b"' not in text, f"{what} returned a row of tenant b: {text[:300]}"


@pytest.fixture
def world(cluster, dsn, roles):  # noqa: F811
    su = connect(dsn, tenant=None)
    b = role_connect(cluster, dsn, roles, "app", "b")
    a = role_connect(cluster, dsn, roles, "app", "a")
    reader = role_connect(cluster, dsn, roles, "bi", "a")
    # ---- tenant b: one of everything, through the API
    for i, text in enumerate([f"My name is Bea and I moved to Quito. {MARK}",
                              f"We decided to use HNSW for the {MARK} index.",
                              f"Why does that HNSW {MARK} index need memory?"]):
        scalar(b, "select pgmem.context_for(%s, %s, %s, %s)", (text, at_cos(0, 1 + i, 0.9), CONV, USER))
        scalar(b, "select pgmem.observe_reply(%s, %s, %s)", (CONV, f"Observation: {MARK} HNSW works. We decided on m = 16.",
                                                             at_cos(0, 1 + i, 0.9)))
    scalar(b, "select pgmem.context_for(%s, %s, 'b-other', %s)", (f"Deploying the HNSW {MARK} index on Kubernetes?", e(7), USER))
    rows(b, "select * from pgmem.set_fact(%s, 'secret', %s)", (USER, Jsonb(MARK)))
    rows(b, "select * from pgmem.cache_intent(%s, 'privacy', 0.99, user_id => %s)", (f"{MARK} question", USER))
    b.execute("insert into pgmem.behaviour_rules (tenant, mode, priority, condition, retrieval_depth, personality_mode,"
              " response_length_hint, behaviour_context) values ('b', 'b_mode', 99, 'true', 50, 'playful', 'detailed', %s)", (MARK,))
    b.execute("insert into pgmem.policy_rules (tenant, name, priority, condition, flags, description)"
              " values ('b', 'b_rule', 99, 'true', '{\"privacy_mode\": true}', %s)", (MARK,))
    for t in TABLES:
        assert scalar(su, f"select count(*) from pgmem.{t} where tenant = 'b'") > 0, f"tenant b has no {t} row"
    assert scalar(su, "select count(*) from pgmem.links where tenant = 'b' and kind = 'concept'") > 0
    ids = {t: [r[0] for r in su.execute(f"select id from pgmem.{t} where tenant = 'b'")]
           for t in ("profile_facts", "threads", "messages", "insights")}
    yield dict(su=su, a=a, b=b, reader=reader, ids=ids)
    for c in (su, a, b, reader):
        c.close()


def test_every_layered_function_is_isolated(world):
    su, a, ids = world["su"], world["a"], world["ids"]
    before = snapshot(su, "b")
    v = at_cos(0, 1, 0.9)
    called = set()

    def call(name, q, params=(), expect=None, echoes_mark=False):
        """Call as tenant a; unless a's own input echoes b's word back, nothing of b may come back."""
        called.add(name)
        if expect:
            with pytest.raises(psycopg.Error) as ei:
                rows(a, q, params)
            assert ei.value.sqlstate == expect, (name, ei.value)
            return None
        res = rows(a, q, params)
        if echoes_mark:
            assert '"tenant": "b"' not in json.dumps(res, default=str), (name, res)
        else:
            no_b(res, name)
        return res

    # reads aiming at b's user, conversation, threads, texts
    assert call("profile", "select * from pgmem.profile(%s)", (USER,)) == []
    assert call("fact_history", "select * from pgmem.fact_history(%s)", (USER,)) == []
    assert call("conversation_state", "select pgmem.conversation_state(%s) as s", (CONV,)) == [{"s": None}]
    assert call("conversation_threads", "select * from pgmem.conversation_threads(%s, true)", (CONV,)) == []
    for tid in ids["threads"]:
        assert call("thread_messages", "select * from pgmem.thread_messages(%s)", (tid,)) == []
        call("set_thread_summary", "select * from pgmem.set_thread_summary(%s, 'a writes')", (tid,), expect="P0002")
        call("resolve_thread", "select * from pgmem.resolve_thread(%s, %s)", (CONV, v), expect="P0002")
    assert call("search_insights", "select * from pgmem.search_insights(%s, %s, k => 1000)", (f"{MARK} HNSW", v)) == []
    assert call("search_insights", "select * from pgmem.search_insights(%s, user_id => %s)", (MARK, USER)) == []
    r = call("research_context", "select pgmem.research_context(%s, %s, %s) as r", (f"{MARK} HNSW", v, USER))
    assert r[0]["r"] == {"insights": [], "concepts": []}
    s = call("user_data_summary", "select pgmem.user_data_summary(%s) as s", (USER,))[0]["s"]
    assert s["tiers"]["semantic"]["current"] == {} and s["tiers"]["conversational"]["conversations"] == 0
    assert s["tiers"]["episodic"]["memories"] == 0 and s["tiers"]["intent_cache"]["entries"] == 0
    c = call("classify_intent", "select * from pgmem.classify_intent(%s, %s)", (f"{MARK} question", CONV))[0]
    assert c["source"] == "heuristic" and c["intent"] != "privacy"          # b's cached answer is b's
    d = call("behaviour_decision", "select pgmem.behaviour_decision('{}') as d")[0]["d"]
    assert d["mode"] == "standard"                                          # b's rule b_mode is b's
    p = call("resolve_policy", "select pgmem.resolve_policy('{\"intent\": \"general\"}') as p")[0]["p"]
    assert p["privacy_mode"] is False and "b_rule" not in p["rules"]
    call("observe_reply", "select pgmem.observe_reply(%s, 'a replies')", (CONV,), expect="P0002")
    for fid in ids["insights"]:
        pass  # insights have no id-taking function; search_insights above covers them
    call("detect_facts", "select pgmem.detect_facts(%s) as f", (f"My name is Bea {MARK}",), echoes_mark=True)  # pure
    call("extract_insights", "select pgmem.extract_insights('We decided to go.') as x")
    call("extract_concepts", "select pgmem.extract_concepts('HNSW') as x")

    # writes with b's names: a's own rows, never b's
    assert call("set_fact", "select * from pgmem.set_fact(%s, 'secret', '\"a\"')", (USER,))[0]["decision"] == "added"
    assert call("end_fact", "select * from pgmem.end_fact(%s, 'secret')", (USER,))[0]["decision"] == "ended"
    call("apply_facts", "select * from pgmem.apply_facts(%s, %s)", (USER, Jsonb([{"key": "name", "value": "Ann"}])))
    got = call("cache_intent", "select * from pgmem.cache_intent(%s, 'general', 0.5)", (f"{MARK} question",), echoes_mark=True)
    assert got[0]["tenant"] == "a" and got[0]["hits"] == 0
    o = call("observe_turn", "select pgmem.observe_turn(%s, 'a talks', %s, %s) as o", (CONV, v, USER))[0]["o"]
    assert o["state"]["message_count"] == 1                                  # a's conversation, not b's (4 messages)
    t = call("resolve_thread", "select * from pgmem.resolve_thread(%s, %s, %s)", (CONV, v, o["message_id"]))[0]
    assert t["decision"] == "created" and t["thread_id"] not in ids["threads"]
    call("add_insight", "select pgmem.add_insight('decision', %s, 0.9, %s, %s, %s) as i", (f"a decides {USER}", USER, CONV, t["thread_id"]))
    doc = call("context_for", "select pgmem.context_for(%s, %s, %s, %s) as d", ("Why does that HNSW index need memory?", v, CONV, USER))[0]["d"]
    assert doc["context"]["memories"] == [] or all(m["id"] not in ids["messages"] for m in doc["context"]["memories"])
    assert all(h["message_id"] not in ids["messages"] for h in doc["context"]["history"])
    # a thread id of b named in an insight of a: the (tenant, thread) foreign key refuses it
    call("add_insight", "select pgmem.add_insight('decision', 'x', 0.9, thread_id => %s)", (ids["threads"][0],), expect="22023")  # issue 27, L4: named
    doc = call("context_for", "select pgmem.context_for('What do you know about me?', %s, 'a-2', %s) as d", (v, USER))[0]["d"]
    assert doc["context"]["privacy"]["tiers"]["conversational"]["conversations"] == 2  # a's two

    assert snapshot(su, "b") == before, "a layered function of tenant a changed rows of tenant b"
    layered = {f for f in public_functions(su) if f in LAYERED_FUNCTIONS}
    assert layered == LAYERED_FUNCTIONS, sorted(LAYERED_FUNCTIONS - layered)
    assert called == LAYERED_FUNCTIONS, f"not called as tenant a: {sorted(LAYERED_FUNCTIONS - called)}"


def test_tables_views_and_privacy_are_isolated(world):
    su, a, reader = world["su"], world["a"], world["reader"]
    before = snapshot(su, "b")
    rows(a, "select pgmem.context_for('My name is Ann', %s, 'a-conv', %s)", (e(3), USER))
    for t in TABLES:
        got = rows(a, f"select to_jsonb(x) as r from pgmem.{t} x")
        no_b(got, f"table {t} as the app role")
        assert all(r["r"]["tenant"] in ("a", "*") for r in got)
    for view in VIEWS:
        got = rows(reader, f"select * from pgmem.{view}")
        no_b(got, f"view {view} as the reader")
        assert {r["tenant"] for r in got} <= {"a"}
    assert {r["tenant"] for r in rows(reader, "select * from pgmem.conversation_states")} == {"a"}
    # the app role cannot write another tenant's rule, nor change the installation's
    for q in ("insert into pgmem.policy_rules (tenant, name, priority, condition, flags) values ('b', 'x', 1, 'true', '{}')",
              "update pgmem.behaviour_rules set retrieval_depth = 50 where tenant = '*'",
              "delete from pgmem.policy_rules where tenant = 'b'"):
        try:
            a.execute(q)
        except psycopg.Error:
            continue
        assert scalar(su, "select count(*) from pgmem.policy_rules where tenant = 'b' and name = 'x'") == 0
        assert scalar(su, "select max(retrieval_depth) from pgmem.behaviour_rules where tenant = '*'") == 8
    # export and erase of the shared user id: a's rows only
    doc = scalar(a, "select pgmem.export_user(%s)", (USER,))
    no_b(doc, "export_user")
    assert [f["value"] for f in doc["profile_facts"]] == ["Ann"] and len(doc["conversations"]) == 1
    rows(a, "select * from pgmem.erase_user(%s)", (USER,))
    for t in ("profile_facts", "conversations", "messages", "threads", "insights", "concept_mentions", "intent_cache"):
        assert scalar(su, f"select count(*) from pgmem.{t} where tenant = 'a'") == 0, t
    assert snapshot(su, "b") == before, "tenant a's reads, export and erase changed rows of tenant b"
