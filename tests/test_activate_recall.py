"""pgmem.activate (Shadow activation), pgmem.recall (Engram ranking) and the memory_health view.

Expected values are computed here in Python from the designs:
* shadow-memory-system.md: activation = .6 embedding + .2 metadata + .15 summary + .05 temporal,
  thresholds by context type (query .75, task .8, conversation .3, document .6, mixed .65);
  relevance_type / confidence as documented at the top of sql/220_activate.sql.
* engram.md, Retrieval & Ranking: relevance (cosine clipped to [0,1], Jaccard of tokens
  without embeddings), decayed importance with access boost, linear 90-day recency,
  min(n/100, 1); weights .5/.3/.2/0 (Full Ranking Example).
"""
from __future__ import annotations

import math
import statistics
from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from conftest import connect
from shadow_fixture import (ACT, DIM, ENGRAM, LN2, Q_SUMMARY, Q_TEXT, Q_TOPICS, Q_VEC, SHADOW, T,  # noqa: F401
                            THRESHOLDS, act, activate, cos, exp_decay, jaccard, remember, tokens, unit)
from sqlhelpers import call, scalar



# ======================================================================== activate
def expected_activation(name: str, *, keys=None, summary_tokens=None, vec=Q_VEC, weights=SHADOW, as_of=T):
    content, v, topics, entities, summary, age = ACT[name]
    keys = {k.lower() for k in Q_TOPICS} if keys is None else keys
    summary_tokens = tokens(Q_SUMMARY) if summary_tokens is None else summary_tokens
    e = 0.0 if vec is None else min(1.0, max(0.0, cos(v, vec)))
    md = jaccard(keys, {x.lower() for x in topics + entities})
    su = jaccard(summary_tokens, tokens(summary if summary is not None else content))
    te = exp_decay(age + (as_of - T).total_seconds() / 86400)
    ce, cc, ct = weights["embedding"] * e, weights["metadata"] * md + weights["summary"] * su, weights["temporal"] * te
    score = ce + cc + ct
    if score == 0:
        rtype = "mixed"
    elif ce >= 0.5 * score:
        rtype = "semantic"
    elif cc >= 0.5 * score:
        rtype = "contextual"
    elif ct >= 0.5 * score:
        rtype = "temporal"
    else:
        rtype = "mixed"
    confidence = max(0.0, 1 - 2 * statistics.pstdev([e, md, su]))
    return dict(score=score, embedding_sim=e, metadata_sim=md, summary_sim=su, temporal=te,
                relevance_type=rtype, confidence=confidence)


def test_activation_score_by_hand(conn, act):
    rows = activate(conn, context_type="conversation")
    assert {r["id"] for r in rows} == set(act.values())  # every candidate, activated or not
    by = {r["id"]: r for r in rows}
    for name, mid in act.items():
        r, e = by[mid], expected_activation(name)
        for key in ("score", "embedding_sim", "metadata_sim", "summary_sim", "temporal", "confidence"):
            assert r[key] == pytest.approx(e[key], abs=1e-6), (name, key)
        assert r["relevance_type"] == e["relevance_type"], name
        assert r["activated"] == (r["score"] >= 0.3)
        assert r["threshold_used"] == pytest.approx(0.3)
    # the hand numbers of the fixture
    a, b, c, d, e_ = (by[act[n]] for n in "abcde")
    assert a["score"] == pytest.approx(0.705, abs=1e-6)
    assert (a["metadata_sim"], a["summary_sim"]) == (pytest.approx(0.5), pytest.approx(0.5))
    assert a["relevance_type"] == "semantic"
    assert a["confidence"] == pytest.approx(1 - 2 * math.sqrt(0.02), abs=1e-6)
    assert b["score"] == pytest.approx(0.2 + 0.15 + 0.05 * 0.5, abs=1e-6) and b["relevance_type"] == "contextual"
    assert c["score"] == pytest.approx(0.05, abs=1e-9) and c["relevance_type"] == "temporal"
    assert c["confidence"] == pytest.approx(1.0)
    assert d["score"] == pytest.approx(0.24 + 0.2 + 0.15 * 0.4 + 0.05, abs=1e-6) and d["relevance_type"] == "mixed"
    assert e_["embedding_sim"] == 0.0 and e_["relevance_type"] == "temporal"
    # ordered by score, activated first
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert [r["id"] for r in rows] == [act[n] for n in "adbce"]
    assert [r["activated"] for r in rows] == [True, True, True, False, False]
    # the memory fields come along
    assert a["content"] == ACT["a"][0] and a["memory_summary"] == ACT["a"][4]
    assert a["created_at"] == T and a["category"] == "episode"


@pytest.mark.parametrize("context_type, activated", [
    ("conversation", True), ("mixed", True), ("document", True), ("query", False), ("task", False)])
def test_thresholds_by_context_type(conn, act, context_type, activated):
    rows = activate(conn, context_type=context_type)
    a = next(r for r in rows if r["id"] == act["a"])
    assert a["score"] == pytest.approx(0.705, abs=1e-6)
    assert a["activated"] is activated
    assert a["threshold_used"] == pytest.approx(THRESHOLDS[context_type])
    for r in rows:
        assert r["activated"] == (r["score"] >= THRESHOLDS[context_type])
    assert len(rows) == 5  # not activated candidates are returned too
    assert scalar(conn, "select pgmem.context_threshold(%s)", (context_type,)) == pytest.approx(THRESHOLDS[context_type])


def test_default_context_type_is_conversation(conn, act):
    rows = call(conn, "activate", query_text=Q_TEXT, query_embedding=Q_VEC, topics=Q_TOPICS, summary=Q_SUMMARY, as_of=T)
    assert all(r["threshold_used"] == pytest.approx(0.3) for r in rows)


def test_explicit_threshold_overrides_the_context_type(conn, act):
    for thr, activated in ((0.71, False), (0.70, True), (0.0, True), (1.0, False)):
        rows = activate(conn, context_type="conversation", threshold=thr)
        a = next(r for r in rows if r["id"] == act["a"])
        assert a["activated"] is activated, thr
        assert all(r["threshold_used"] == pytest.approx(thr) for r in rows)
        assert all(r["activated"] == (r["score"] >= thr) for r in rows)
    rows = activate(conn, context_type="task", threshold=0.5)
    assert next(r for r in rows if r["id"] == act["a"])["activated"] is True


@pytest.mark.parametrize("thr", [1.5, -0.1])
def test_threshold_out_of_range(conn, thr):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="threshold must be between 0 and 1"):
        activate(conn, threshold=thr)


def test_unknown_context_type_lists_the_known_ones(conn, act):
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match='unknown context_type "chat": known types are conversation, document, mixed, query, task'):
        activate(conn, context_type="chat")


def test_activate_validation(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="activate needs a query_text, a query_embedding"):
        call(conn, "activate", topics=["x"])
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="k must be between 1 and 1000, got 0"):
        activate(conn, k=0)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="query_embedding has 2 dimensions"):
        activate(conn, query_embedding=np.array([1.0, 0.0], dtype=np.float32))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="must sum to 1"):
        activate(conn, weights={"embedding": 0.6})
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown weight "semantic"'):
        activate(conn, weights={"semantic": 1.0})


def test_activate_fallbacks_to_query_tokens(conn, act):
    # no topics/entities: the query's tokens are the metadata keys; no summary: its text is
    text = "lisbon wedding trip"
    rows = call(conn, "activate", query_text=text, query_embedding=Q_VEC, as_of=T)
    by = {r["id"]: r for r in rows}
    for name, mid in act.items():
        e = expected_activation(name, keys=tokens(text), summary_tokens=tokens(text))
        for key in ("score", "metadata_sim", "summary_sim", "confidence"):
            assert by[mid][key] == pytest.approx(e[key], abs=1e-6), (name, key)
        assert by[mid]["relevance_type"] == e["relevance_type"]
    assert by[act["b"]]["metadata_sim"] == pytest.approx(2 / 3)  # {lisbon, wedding} of {lisbon, wedding, trip}


def test_activate_entities_count_as_metadata(conn, act):
    rows = activate(conn, topics=None, entities=["INES"])
    a = next(r for r in rows if r["id"] == act["a"])
    assert a["metadata_sim"] == pytest.approx(1 / 4)  # {ines} of {lisbon, hotel, wedding, ines}


def test_activate_text_only_and_custom_weights(conn, act):
    rows = activate(conn, query_embedding=None)
    # candidates come from the full-text index alone (memories with "hotel", "lisbon" or "wed")
    assert act["c"] not in {r["id"] for r in rows} and act["e"] not in {r["id"] for r in rows}
    for r in rows:  # no query vector: the embedding weight is shared out over the other three
        assert r["embedding_sim"] is None
        assert r["score"] == pytest.approx((0.2 * r["metadata_sim"] + 0.15 * r["summary_sim"] + 0.05 * r["temporal"]) / 0.4)
    w = {"embedding": 0.0, "metadata": 0.5, "summary": 0.5, "temporal": 0.0}
    rows = activate(conn, weights=w)
    by = {r["id"]: r for r in rows}
    for name, mid in act.items():
        assert by[mid]["score"] == pytest.approx(expected_activation(name, weights=w)["score"], abs=1e-9)
    assert rows[0]["id"] == act["b"] and rows[0]["score"] == pytest.approx(1.0)


def test_activate_weights_may_leave_signals_out(conn, act):
    rows = activate(conn, weights={"summary": 1.0})
    by = {r["id"]: r for r in rows}
    for name, mid in act.items():
        w = {"embedding": 0.0, "metadata": 0.0, "summary": 1.0, "temporal": 0.0}
        assert by[mid]["score"] == pytest.approx(expected_activation(name, weights=w)["score"], abs=1e-9)
        assert by[mid]["activated"] is (by[mid]["score"] >= 0.3)


def test_activate_k_and_filters(conn, act):
    rows = activate(conn, k=2)
    assert [r["id"] for r in rows] == [act["a"], act["d"]]
    rows = activate(conn, filters={"ids": [act["c"], act["e"]]})
    assert {r["id"] for r in rows} == {act["c"], act["e"]}


def test_activate_as_of_ages_the_temporal_signal(conn, act):
    rows = activate(conn, as_of=T + timedelta(days=30))
    by = {r["id"]: r for r in rows}
    assert by[act["a"]]["temporal"] == pytest.approx(0.5)
    assert by[act["a"]]["score"] == pytest.approx(0.705 - 0.025, abs=1e-6)
    assert by[act["b"]]["temporal"] == pytest.approx(0.25)
    # memories created after as_of are no candidates
    rows = activate(conn, as_of=T - timedelta(days=1))
    assert {r["id"] for r in rows} == {act["b"], act["e"]}


def test_activate_decay_function_is_configurable(conn, act):
    """Shadow's decayFunction (8. Configuration; issue 36, S30) in an activate profile: exponential
    with its half-life (temporal_half_life_days), or JAM's power law 1/(1 + age)^α (decay 'power',
    decay_alpha). Memory b is 30 days old at T, a 0 days."""
    th = {"thresholds": THRESHOLDS}
    for name, params in (("hl10", {**th, "temporal_half_life_days": 10}),
                         ("power", {**th, "decay": "power", "decay_alpha": 1.5}),
                         ("power2", {**th, "decay": "power", "decay_alpha": 2.0})):
        conn.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values ('acme', %s, 'activate', %s, %s)",
                     (name, Jsonb(SHADOW), Jsonb(params)))
    temporal = lambda **kw: {r["id"]: r["temporal"] for r in activate(conn, **kw)}
    # the default: exponential, half-life 30 days (the design's "Age 30 days -> decay = 0.5")
    assert scalar(conn, "select params->>'decay' from pgmem.profiles where tenant = '*' and name = 'shadow'") == "exponential"
    assert temporal()[act["b"]] == pytest.approx(0.5)
    # half-life 10 days: 2^(-30/10) = .125; a, 10 days later, .5
    assert temporal(profile="hl10")[act["b"]] == pytest.approx(0.125)
    assert temporal(profile="hl10", as_of=T + timedelta(days=10))[act["a"]] == pytest.approx(0.5)
    # the power law: 1/(1 + 30)^1.5 = .00579, 1/(1 + 30)^2 = .00104; age 0: 1
    assert temporal(profile="power")[act["b"]] == pytest.approx(31 ** -1.5)
    assert temporal(profile="power2")[act["b"]] == pytest.approx(31 ** -2.0)
    assert temporal(profile="power")[act["a"]] == pytest.approx(1.0)
    # and the score carries it: .05 × temporal
    base = {r["id"]: r["score"] for r in activate(conn)}
    power = {r["id"]: r["score"] for r in activate(conn, profile="power")}
    assert power[act["b"]] - base[act["b"]] == pytest.approx(0.05 * (31 ** -1.5 - 0.5), abs=1e-6)


def test_activate_tenant_isolation(conn, dsn, act):
    with connect(dsn, tenant="other") as other:
        oid = remember(other, "Booked the Casa do Largo hotel for the wedding", embedding=Q_VEC, topics=["lisbon"],
                       created_at=T)
    assert oid not in {r["id"] for r in activate(conn)}


# ========================================================================== recall
R_VEC = unit((0, 1.0))
R_TEXT = "peanut allergy dinner"

# name: content, vector, importance, age (days), access_count
REC = {
    "r1": ("Dinner reservation at the Thai place", unit((0, 1.0)), 0.5, 10.0, 3),
    "r2": ("Maya likes spicy food", unit((0, 0.6), (1, 0.8)), 1.0, 0.0, 0),
    "r3": ("Quarterly tax documents", unit((0, -0.6), (2, 0.8)), 0.75, 100.0, 150),
    "r4": ("Maya has a peanut allergy", None, 0.25, 45.0, 10),
}


@pytest.fixture
def rec(conn):
    out = {}
    for name, (content, vec, imp, age, n) in REC.items():
        out[name] = remember(conn, content, embedding=vec, importance=imp, created_at=T - timedelta(days=age))
        conn.execute("update pgmem.memories set access_count = %s where id = %s", (n, out[name]))
    return out


def expected_recall(name, *, vec=R_VEC, text=R_TEXT, weights=ENGRAM, half_life=30.0, window=90.0, cap=100.0,
                    as_of=T):
    content, v, imp, age, n = REC[name]
    age = age + (as_of - T).total_seconds() / 86400
    if vec is not None and v is not None:
        rel = min(1.0, max(0.0, cos(v, vec)))
    else:
        rel = jaccard(tokens(text or ""), tokens(content))
    dec = imp * math.exp(-LN2 * age / half_life) * (1 + math.log2(1 + n) * 0.1)
    recency = max(0.0, 1 - age / window)
    acc = min(n / cap, 1.0)
    score = (weights["relevance"] * rel + weights["importance"] * dec + weights["recency"] * recency
             + weights["access_frequency"] * acc)
    return dict(score=score, relevance=rel, decayed_importance=dec, recency=recency, access_frequency=acc)


def check_recall(rows, rec, names, **kw):
    by = {r["id"]: r for r in rows}
    assert set(by) == {rec[n] for n in names}
    exp = {rec[n]: expected_recall(n, **kw) for n in names}
    for mid, e in exp.items():
        for key, val in e.items():
            assert by[mid][key] == pytest.approx(val, abs=1e-6), (mid, key)
    want = sorted(exp, key=lambda i: (-round(exp[i]["score"], 9), i))
    assert [r["id"] for r in rows] == want
    return by


def test_recall_by_hand(conn, rec):
    rows = call(conn, "recall", query_text=R_TEXT, query_embedding=R_VEC, as_of=T)
    by = check_recall(rows, rec, ["r1", "r2", "r3", "r4"])
    r1, r2, r3, r4 = (by[rec[n]] for n in ("r1", "r2", "r3", "r4"))
    # hand values
    assert r1["decayed_importance"] == pytest.approx(0.5 * 2 ** (-1 / 3) * 1.2, abs=1e-6)  # 3 accesses: +20 %
    assert r1["recency"] == pytest.approx(1 - 10 / 90) and r1["access_frequency"] == pytest.approx(0.03)
    assert r2["relevance"] == pytest.approx(0.6, abs=1e-6) and r2["decayed_importance"] == pytest.approx(1.0)
    assert r3["relevance"] == 0.0 and r3["recency"] == 0.0 and r3["access_frequency"] == 1.0  # clipped, capped
    assert r4["relevance"] == pytest.approx(2 / 6)  # no embedding: Jaccard {peanut, allergy} / 6 tokens
    assert r2["score"] == pytest.approx(0.5 * 0.6 + 0.3 * 1.0 + 0.2 * 1.0, abs=1e-6)
    assert [r["id"] for r in rows][:2] == [rec["r1"], rec["r2"]]
    # memory fields
    assert r4["content"] == REC["r4"][0] and r4["importance"] == pytest.approx(0.25) and r4["access_count"] == 10


def test_recall_explicit_weights(conn, rec):
    w = {"relevance": 0.1, "importance": 0.1, "recency": 0.1, "access_frequency": 0.7}
    rows = call(conn, "recall", query_text=R_TEXT, query_embedding=R_VEC, as_of=T, weights=w)
    check_recall(rows, rec, ["r1", "r2", "r3", "r4"], weights=w)
    assert rows[0]["id"] == rec["r3"]  # the most accessed wins now
    w = {"relevance": 0, "importance": 0, "recency": 1.0, "access_frequency": 0}
    rows = call(conn, "recall", query_text=R_TEXT, query_embedding=R_VEC, as_of=T, weights=w)
    assert [r["id"] for r in rows] == [rec["r2"], rec["r1"], rec["r4"], rec["r3"]]
    assert [r["score"] for r in rows] == pytest.approx([1.0, 1 - 10 / 90, 0.5, 0.0])


def test_recall_weights_may_leave_signals_out(conn, rec):
    rows = call(conn, "recall", query_text=R_TEXT, query_embedding=R_VEC, as_of=T, weights={"recency": 1.0})
    assert [r["id"] for r in rows] == [rec["r2"], rec["r1"], rec["r4"], rec["r3"]]
    assert [r["score"] for r in rows] == pytest.approx([1.0, 1 - 10 / 90, 0.5, 0.0])


def test_recall_without_embeddings_uses_jaccard(conn, rec):
    rows = call(conn, "recall", query_text="peanut allergy dinner reservation", as_of=T)
    # candidates: the full-text matches; relevance: Jaccard of tokens even for embedded memories
    by = {r["id"]: r for r in rows}
    assert set(by) == {rec["r1"], rec["r4"]}
    q = tokens("peanut allergy dinner reservation")
    assert by[rec["r1"]]["relevance"] == pytest.approx(jaccard(q, tokens(REC["r1"][0])))
    assert by[rec["r1"]]["relevance"] == pytest.approx(2 / 8)
    assert by[rec["r4"]]["relevance"] == pytest.approx(2 / 7)
    for name in ("r1", "r4"):
        e = expected_recall(name, vec=None, text="peanut allergy dinner reservation")
        assert by[rec[name]]["score"] == pytest.approx(e["score"], abs=1e-9)


def test_recall_as_of_and_k(conn, rec):
    rows = call(conn, "recall", query_text=R_TEXT, query_embedding=R_VEC, as_of=T + timedelta(days=20))
    check_recall(rows, rec, ["r1", "r2", "r3", "r4"], as_of=T + timedelta(days=20))
    rows = call(conn, "recall", query_text=R_TEXT, query_embedding=R_VEC, as_of=T - timedelta(days=20))
    assert {r["id"] for r in rows} == {rec["r3"], rec["r4"]}
    rows = call(conn, "recall", query_text=R_TEXT, query_embedding=R_VEC, as_of=T, k=1)
    assert [r["id"] for r in rows] == [rec["r1"]]


def test_recall_validation(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="recall needs a query_text, a query_embedding"):
        call(conn, "recall")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="k must be between 1 and 1000"):
        call(conn, "recall", query_text="x", k=1001)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="must sum to 1"):
        call(conn, "recall", query_text="x", weights={"relevance": 0.5, "importance": 0.3})
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown weight "semantic": known signals are '
                       "relevance, importance, recency, access_frequency"):
        call(conn, "recall", query_text="x", weights={"semantic": 1})
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='profile "jam" is a search profile, not a recall'):
        call(conn, "recall", query_text="x", profile="jam")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="known profiles for recall are engram"):
        call(conn, "recall", query_text="x", profile="nope")


def test_engram_full_ranking_example(conn):
    """engram.md, Full Ranking Example: A 0.766 > B 0.56 with weights .5/.3/.2/0.

    The design's component values (relevance .8/.2, decayed importance .7/.9, recency .78/.95)
    are produced by controlled memories: cosines of exactly .8 and .2; ages of 19.8 and 4.5
    days (linear recency 1 - age/90 = .78 and .95); and, since "decayed from 0.85, 20 days
    old" = 0.7 implies a half-life of about 71 days rather than 30, a custom recall profile
    with that half-life and the stored importances 0.85 and 0.9·2^(4.5/H)."""
    # the weighted sum of the design's component values
    assert 0.5 * 0.8 + 0.3 * 0.7 + 0.2 * 0.78 + 0.0 * 0 == pytest.approx(0.766)
    assert 0.5 * 0.2 + 0.3 * 0.9 + 0.2 * 0.95 == pytest.approx(0.56)

    age_a, age_b = 19.8, 4.5
    half_life = age_a / math.log2(0.85 / 0.7)
    imp_b = 0.9 * 2 ** (age_b / half_life)
    conn.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values "
                 "('acme', 'full_example', 'recall', %s, %s)",
                 (Jsonb(ENGRAM), Jsonb({"half_life_days": half_life, "recency_window_days": 90, "access_cap": 100})))
    q = unit((0, 1.0))
    a = remember(conn, "User prefers TypeScript", embedding=unit((0, 0.8), (1, 0.6)), importance=0.85,
                 category="preference", created_at=T - timedelta(days=age_a))
    b = remember(conn, "User lives in SF", embedding=unit((0, 0.2), (2, math.sqrt(0.96))), importance=imp_b,
                 category="fact", created_at=T - timedelta(days=age_b))
    rows = call(conn, "recall", query_text="user preferences", query_embedding=q, as_of=T, profile="full_example")
    assert [r["id"] for r in rows] == [a, b]
    ra, rb = rows
    assert ra["relevance"] == pytest.approx(0.8, abs=1e-6)
    assert ra["decayed_importance"] == pytest.approx(0.7, abs=1e-6)
    assert ra["recency"] == pytest.approx(0.78, abs=1e-9)
    assert ra["access_frequency"] == 0
    assert ra["score"] == pytest.approx(0.766, abs=1e-6)
    assert rb["relevance"] == pytest.approx(0.2, abs=1e-6)
    assert rb["decayed_importance"] == pytest.approx(0.9, abs=1e-6)
    assert rb["recency"] == pytest.approx(0.95, abs=1e-9)
    assert rb["score"] == pytest.approx(0.56, abs=1e-6)
    # the same memories under the default engram profile (30-day half-life) keep the order
    rows = call(conn, "recall", query_text="user preferences", query_embedding=q, as_of=T)
    assert [r["id"] for r in rows] == [a, b]
    assert rows[0]["decayed_importance"] == pytest.approx(0.85 * 2 ** (-age_a / 30), abs=1e-6)


def test_recall_custom_profile_without_params(conn, rec):
    conn.execute("insert into pgmem.profiles (tenant, name, method, weights) values ('acme', 'bare', 'recall', %s)",
                 (Jsonb(ENGRAM),))
    rows = call(conn, "recall", query_text=R_TEXT, query_embedding=R_VEC, as_of=T, profile="bare")
    check_recall(rows, rec, ["r1", "r2", "r3", "r4"])


def test_recall_tenant_isolation(conn, dsn, rec):
    with connect(dsn, tenant="other") as other:
        oid = remember(other, "Dinner reservation at the Thai place", embedding=R_VEC, created_at=T)
    rows = call(conn, "recall", query_text=R_TEXT, query_embedding=R_VEC, as_of=T)
    assert oid not in {r["id"] for r in rows} and len(rows) == 4


# ==================================================================== memory_health
def test_memory_health_formulas(conn, dsn):
    created = datetime.now(timezone.utc) - timedelta(days=10, hours=3)
    mid = remember(conn, "Maya's birthday is on 3 November", importance=0.75, category="fact", created_at=created,
                   embedding=unit((0, 1.0)))
    access_times = [created + timedelta(days=d) for d in (1, 5, 9.5)]
    for t in access_times:
        conn.execute("insert into pgmem.accesses (tenant, memory_id, accessed_at, kind) values ('acme', %s, %s, 'touch')",
                     (mid, t))
    conn.execute("update pgmem.memories set access_count = 3, last_accessed_at = %s where id = %s",
                 (access_times[-1], mid))
    other = remember(conn, "A memory that expired", created_at=created, embedding=None)
    conn.execute("update pgmem.memories set expires_at = now() - interval '1 hour' where id = %s", (other,))

    with connect(dsn, tenant="acme", autocommit=False) as c:  # one transaction: one now()
        cur = c.cursor(row_factory=dict_row)
        now = cur.execute("select now() as now").fetchone()["now"]
        h = cur.execute("select * from pgmem.memory_health where id = %s", (mid,)).fetchone()
        sql = cur.execute(
            "select pgmem.decayed_importance(m.importance, m.created_at, m.access_count) as di, "
            "pgmem.fragment_strength(m.salience, m.created_at, %s::timestamptz[]) as fs, m.salience "
            "from pgmem.memories m where id = %s", (access_times, mid)).fetchone()
        h2 = cur.execute("select * from pgmem.memory_health where id = %s", (other,)).fetchone()
        c.rollback()

    age = (now - created).total_seconds() / 86400
    assert float(h["age_days"]) == pytest.approx(round(age, 3), abs=1e-9)
    assert h["recency"] == pytest.approx(exp_decay(age), abs=1e-9)
    assert h["linear_recency"] == pytest.approx(1 - age / 90, abs=1e-9)
    di = 0.75 * exp_decay(age) * (1 + math.log2(4) * 0.1)
    assert h["decayed_importance"] == pytest.approx(di, abs=1e-9)
    assert h["decayed_importance"] == pytest.approx(sql["di"], abs=1e-12)
    salience = sql["salience"]
    strength = min(1.0, salience / (1 + math.sqrt(age * 24))
                   + sum(0.1 / (1 + ((now - t).total_seconds() / 3600) ** 0.3) for t in access_times))
    assert h["strength"] == pytest.approx(strength, abs=1e-6)
    assert h["strength"] == pytest.approx(sql["fs"], abs=1e-12)
    assert h["access_count"] == 3 and h["importance"] == pytest.approx(0.75)
    assert h["embedded"] is True and h["expired"] is False and h["state"] == "active"
    assert h["tenant"] == "acme" and h["category"] == "fact"
    assert h2["embedded"] is False and h2["expired"] is True and h2["strength"] == pytest.approx(
        min(1.0, h2["salience"] / (1 + math.sqrt(age * 24))), abs=1e-6)
