"""pgmem.search / search_exact / explain_search with profile jam: JAM's six-signal fused search.

Every expected number is computed here in Python from the formulas of
jam-journalistic-agent-memory.md (Retrieval Pipeline, Score Fusion, Time Decay):

    semantic = 1 - cosine_distance / 2              recency = e^(-ln2 * age / 30 d)
    lexical  = share of the query's lexemes the memory contains (profile jam, "lexical": "coverage")
             = ts_rank(tsv, q, 1) / max(candidates) (JAM's literal reading, profile param "lexical": "rank")
    actor    = 1.0 if who = actor else 0.3          spatial = |common path parts| / max(#parts)
    usage    = n / max_n(tenant) * e^(-ln2 * days since access / 30)
    score    = .55 semantic + .20 lexical + .10 recency + .07 actor + .03 spatial + .05 usage

(lexemes and ranks come from PostgreSQL's own to_tsvector/ts_rank, the rest is Python). The last part builds 5,000
memories with real MiniLM embeddings to compare the index path with the exhaustive one and
to check the plans of the candidate queries.
"""
from __future__ import annotations

import json
import random
import time
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

from conftest import TEMPLATE, _janitor, connect
from searchhelpers import (DIM, JAM, JAM_PARAMS, LN2, SIGNALS, T, call, cos, decay, ids, path_overlap,  # noqa: F401
                           plan_nodes, plans_of, remember, scalar, search, unit)


# ---------------------------------------------------------------- the hand-computed fixture
Q_TEXT = "Which restaurant in Berlin is safe for a peanut allergy?"
Q_VEC = unit((0, 1.0))
Q_ACTOR = "maya"
Q_LOC = "chat/web/maya"

# content, vector, age (days before T), who, location, access_count, days since last access
FIXTURE = [
    ("Maya has a severe peanut allergy", unit((0, 1.0)), 0.5, "maya", "chat/web/maya", 4, 1.0),
    ("Tom booked a restaurant in Berlin for Friday", unit((0, 0.8), (1, 0.6)), 10.0, "tom", "chat/web/tom", 2, 5.0),
    ("The deploy failed on connection exhaustion", unit((0, 0.6), (2, 0.8)), 30.0, "maya", "slack/infra", 0, None),
    ("Peanut butter restaurants near Berlin Kreuzberg", unit((3, 1.0)), 60.0, "assistant", "chat/mobile/maya", 10, 30.0),
    ("Berlin weather is rainy this week", unit((0, -0.6), (4, 0.8)), 2.0, "maya", None, 1, 2.0),
    ("Maya prefers Neovim over VS Code", unit((0, 0.28), (5, 0.96)), 90.0, None, "/home/maya/work", 0, None),
]


@pytest.fixture
def fx(conn):
    """The six memories of FIXTURE; returns (ids, expected signals computed by hand)."""
    mids = []
    for content, vec, age, who, loc, n, last in FIXTURE:
        mid = remember(conn, content, embedding=vec, who=who, location=loc, created_at=T - timedelta(days=age))
        conn.execute("update pgmem.memories set access_count = %s, last_accessed_at = %s where id = %s",
                     (n, None if last is None else T - timedelta(days=last), mid))
        mids.append(mid)
    return mids


def lexical_ranks(conn, mids, text) -> dict[int, float]:
    """ts_rank(tsv, query_tsquery(q), 1) for the matching memories, 0 for the others (SQL)."""
    rows = conn.execute(
        "select id, case when tsv @@ pgmem.query_tsquery(%s) then ts_rank(tsv, pgmem.query_tsquery(%s), 1) else 0 end "
        "from pgmem.memories where id = any(%s)", (text, text, mids)).fetchall()
    return {i: float(r) for i, r in rows}


def lexical_coverage(conn, mids, text) -> dict[int, float]:
    """Share of the query's English lexemes (to_tsvector of the text) found in the memory's tsv."""
    terms = set(scalar(conn, "select tsvector_to_array(to_tsvector('english', %s))", (text,)))
    rows = conn.execute("select id, tsvector_to_array(tsv) from pgmem.memories where id = any(%s)", (mids,)).fetchall()
    return {i: len(terms & set(lex)) / len(terms) for i, lex in rows}


def expected_signals(conn, mids, *, text=Q_TEXT, vec=Q_VEC, actor=Q_ACTOR, loc=Q_LOC, as_of=T, lexical="coverage"):
    raw = None
    if text:
        raw = lexical_ranks(conn, mids, text) if lexical == "rank" else lexical_coverage(conn, mids, text)
    max_access = max(f[5] for f in FIXTURE)
    out = {}
    for mid, (content, v, age, who, mloc, n, last) in zip(mids, FIXTURE):
        age_at = age + (as_of - T).total_seconds() / 86400
        s = {
            "semantic": None if vec is None else 1 - (1 - cos(v, vec)) / 2,
            "lexical": None if raw is None else (raw[mid] / max(raw.values()) if lexical == "rank" else raw[mid]),
            "recency": decay(age_at),
            "actor": None if actor is None else (1.0 if who == actor else 0.3),
            "spatial": None if loc is None else path_overlap(mloc, loc),
            "usage": n / max_access * decay((last if last is not None else age) + (as_of - T).total_seconds() / 86400),
        }
        out[mid] = s
    return out


def fuse(sig: dict, weights: dict) -> float:
    present = {k: w for k, w in weights.items() if sig.get(k) is not None}
    total = sum(present.values())
    return sum(w / total * sig[k] for k, w in present.items())


def check_rows(rows, expected, weights=JAM, tol=1e-6):
    for r in rows:
        e = expected[r["id"]]
        for s in SIGNALS:
            if e[s] is None:
                assert r[s] is None, (r["id"], s, r[s])
            else:
                assert r[s] == pytest.approx(e[s], abs=tol), (r["id"], s)
        assert r["score"] == pytest.approx(fuse(e, weights), abs=tol), r["id"]
    want = sorted(expected, key=lambda i: (-round(fuse(expected[i], weights), 9), i))
    return want


# ------------------------------------------------------------------------- signals
def test_fixture_vectors_have_the_intended_cosines():
    assert [round(cos(f[1], Q_VEC), 6) for f in FIXTURE] == [1.0, 0.8, 0.6, 0.0, -0.6, 0.28]


def test_every_signal_of_every_row_by_hand(conn, fx):
    rows = search(conn, query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC, as_of=T)
    assert len(rows) == 6
    exp = expected_signals(conn, fx)
    want = check_rows(rows, exp)
    assert ids(rows) == want
    # spot checks of the hand formulas on specific rows
    by = {r["id"]: r for r in rows}
    m1, m2, m3, m4, m5, m6 = fx
    assert by[m1]["semantic"] == pytest.approx(1.0, abs=1e-6)
    assert by[m4]["semantic"] == pytest.approx(0.5, abs=1e-6)      # orthogonal: distance 1
    assert by[m5]["semantic"] == pytest.approx(0.2, abs=1e-6)      # cos -0.6: distance 1.6
    assert by[m3]["recency"] == pytest.approx(0.5, abs=1e-9)       # one half-life
    assert by[m4]["recency"] == pytest.approx(0.25, abs=1e-9)
    assert by[m6]["recency"] == pytest.approx(0.125, abs=1e-9)
    assert by[m2]["actor"] == pytest.approx(0.3) and by[m6]["actor"] == pytest.approx(0.3)  # who NULL = mismatch
    assert by[m2]["spatial"] == pytest.approx(2 / 3) and by[m6]["spatial"] == pytest.approx(1 / 3)
    assert by[m5]["spatial"] == 0
    assert by[m4]["usage"] == pytest.approx(0.5, abs=1e-9)          # max count, accessed 30 days ago
    assert by[m3]["usage"] == 0 and by[m6]["usage"] == 0
    # lexemes of the query: restaur, berlin, safe, peanut, allergi ("which", "in", "is", "for", "a": stop words)
    assert [by[m]["lexical"] for m in fx] == pytest.approx([2 / 5, 2 / 5, 0, 3 / 5, 1 / 5, 0])
    # the weights of jam are the design's, and they sum to 1
    assert sum(JAM.values()) == pytest.approx(1.0)
    # search_exact agrees row by row on a fixture this small
    exact = call(conn, "search_exact", query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR,
                 location=Q_LOC, as_of=T)
    assert ids(exact) == ids(rows)
    for a, b in zip(rows, exact):
        for s in ("score",) + SIGNALS:
            assert a[s] == pytest.approx(b[s], abs=1e-9)


def test_jam_profile_is_the_design(conn):
    w, params = conn.execute("select weights, params from pgmem.profiles where tenant = '*' and name = 'jam'").fetchone()
    assert w == pytest.approx(JAM)
    assert {k: params[k] for k in JAM_PARAMS} == JAM_PARAMS
    assert params.get("lexical", "coverage") == "coverage"


def test_lexical_rank_mode_by_hand(conn, fx):
    """JAM's literal lexical signal, ts_rank / the best ts_rank of the candidates (profile param lexical=rank)."""
    conn.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values "
                 "('acme', 'jam_rank', 'search', %s, %s)", (Jsonb(JAM), Jsonb({**JAM_PARAMS, "lexical": "rank"})))
    for fn in ("search", "search_exact"):
        rows = call(conn, fn, query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC, as_of=T,
                    profile="jam_rank")
        assert len(rows) == 6
        exp = expected_signals(conn, fx, lexical="rank")
        assert ids(rows) == check_rows(rows, exp)
        by = {r["id"]: r for r in rows}
        assert max(r["lexical"] for r in rows) == pytest.approx(1.0)
        assert by[fx[2]]["lexical"] == 0 and by[fx[5]]["lexical"] == 0
    # text only: the candidates are the lexical matches, normalised by the best of them
    rows = search(conn, query_text=Q_TEXT, as_of=T, profile="jam_rank")
    raw = lexical_ranks(conn, ids(rows), Q_TEXT)
    for r in rows:
        assert r["lexical"] == pytest.approx(raw[r["id"]] / max(raw.values()), abs=1e-6)


def test_lexical_coverage_is_absolute(conn, fx):
    """Coverage does not depend on the other candidates: a memory keeps its lexical value
    whether or not better matches are among the candidates (unlike rank / max)."""
    m4 = fx[3]
    alone = search(conn, query_text=Q_TEXT, as_of=T, filters={"ids": [m4]})
    assert alone[0]["lexical"] == pytest.approx(3 / 5)
    conn.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values "
                 "('acme', 'jam_rank', 'search', %s, %s)", (Jsonb(JAM), Jsonb({**JAM_PARAMS, "lexical": "rank"})))
    alone = search(conn, query_text=Q_TEXT, as_of=T, filters={"ids": [m4]}, profile="jam_rank")
    assert alone[0]["lexical"] == pytest.approx(1.0)  # relative: the best of one candidate


@pytest.mark.parametrize("url", ["https://en.wikipedia.org/wiki/Special:Search", "https://example.com/a:b"])
def test_query_text_with_a_url(conn, url):
    mid = remember(conn, f"The docs are at {url}", created_at=T - timedelta(days=1))
    rows = search(conn, query_text=url, as_of=T)
    assert ids(rows) == [mid]
    assert rows[0]["lexical"] == pytest.approx(1.0)  # the memory contains every lexeme of the query


def test_returned_memory_fields(conn, fx):
    rows = search(conn, query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC, as_of=T, k=6)
    by = {r["id"]: r for r in rows}
    for mid, f in zip(fx, FIXTURE):
        r = by[mid]
        assert r["content"] == f[0] and r["who"] == f[3] and r["location"] == f[4]
        assert r["access_count"] == f[5]
        assert r["created_at"] == T - timedelta(days=f[2])
        assert r["category"] == "episode" and r["tier"] == "episodic"


def test_k_limits_the_rows(conn, fx):
    full = search(conn, query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC, as_of=T)
    top2 = search(conn, query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC, as_of=T, k=2)
    assert ids(top2) == ids(full)[:2]


# ------------------------------------------------------------------- missing signals
def test_no_actor_renormalises_the_weights(conn, fx):
    rows = search(conn, query_text=Q_TEXT, query_embedding=Q_VEC, location=Q_LOC, as_of=T)
    exp = expected_signals(conn, fx, actor=None)
    want = check_rows(rows, exp)
    assert ids(rows) == want
    assert all(r["actor"] is None for r in rows)
    # by hand for the first memory: every weight divided by 1 - 0.07
    m1 = next(r for r in rows if r["id"] == fx[0])
    e = exp[fx[0]]
    by_hand = (0.55 * e["semantic"] + 0.20 * e["lexical"] + 0.10 * e["recency"] + 0.03 * e["spatial"]
               + 0.05 * e["usage"]) / 0.93
    assert m1["score"] == pytest.approx(by_hand, abs=1e-6)
    # scores stay within [0, 1]
    assert all(0 <= r["score"] <= 1 for r in rows)


def test_no_actor_no_location(conn, fx):
    rows = search(conn, query_text=Q_TEXT, query_embedding=Q_VEC, as_of=T)
    exp = expected_signals(conn, fx, actor=None, loc=None)
    assert ids(rows) == check_rows(rows, exp)
    assert all(r["actor"] is None and r["spatial"] is None for r in rows)


def test_text_only(conn, fx):
    rows = search(conn, query_text=Q_TEXT, actor=Q_ACTOR, location=Q_LOC, as_of=T)
    # candidates come from the full-text index alone: the four memories with a query lexeme
    m1, m2, m3, m4, m5, m6 = fx
    assert set(ids(rows)) == {m1, m2, m4, m5}
    assert all(r["semantic"] is None for r in rows)
    exp = expected_signals(conn, fx, vec=None)
    exp = {i: exp[i] for i in ids(rows)}
    assert ids(rows) == check_rows(rows, exp)


def test_embedding_only(conn, fx):
    rows = search(conn, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC, as_of=T)
    assert len(rows) == 6
    assert all(r["lexical"] is None for r in rows)
    exp = expected_signals(conn, fx, text=None)
    assert ids(rows) == check_rows(rows, exp)


def test_stop_words_only_text_counts_as_no_text(conn, fx):
    rows = search(conn, query_text="which is the", query_embedding=Q_VEC, as_of=T)
    assert len(rows) == 6 and all(r["lexical"] is None for r in rows)


def test_neither_text_nor_embedding_is_an_error(conn, fx):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="needs a query_text, a query_embedding"):
        search(conn, actor="maya")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="needs a query_text, a query_embedding"):
        search(conn, query_text="   ")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="needs a query_text, a query_embedding"):
        call(conn, "search_exact", query_text=None)


# --------------------------------------------------------- custom weights and profiles
def test_custom_weights_change_the_ranking(conn, fx):
    m1, m2, m3, m4, m5, m6 = fx
    base = dict(query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC, as_of=T)
    # recency alone: newest first
    rows = search(conn, **base, weights={"recency": 1.0})
    assert ids(rows) == [m1, m5, m2, m3, m4, m6]
    # usage alone: the most used memory first
    rows = search(conn, **base, weights={"usage": 1.0})
    assert ids(rows)[0] == m4
    assert rows[0]["score"] == pytest.approx(0.5, abs=1e-9)
    # lexical alone: the best full-text match first (memory 4 has three of the five lexemes)
    rows = search(conn, **base, weights={"lexical": 1.0})
    assert ids(rows)[0] == m4 and rows[0]["score"] == pytest.approx(0.6)
    # a half/half mix is scored with exactly those weights
    w = {"semantic": 0.5, "spatial": 0.5}
    rows = search(conn, **base, weights=w)
    exp = expected_signals(conn, fx)
    assert ids(rows) == check_rows(rows, exp, weights=w)


def test_custom_profile_changes_the_ranking(conn, dsn, fx):
    m1, m2, m3, m4, m5, m6 = fx
    conn.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values "
                 "('acme', 'usage_first', 'search', %s, %s)",
                 (Jsonb({"usage": 0.9, "semantic": 0.1}), Jsonb(JAM_PARAMS)))
    base = dict(query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC, as_of=T)
    jam = search(conn, **base)
    prof = search(conn, **base, profile="usage_first")
    assert ids(jam)[0] == m1
    exp = expected_signals(conn, fx)
    assert ids(prof) == check_rows(prof, exp, weights={"usage": 0.9, "semantic": 0.1})
    assert ids(prof) != ids(jam)
    assert ids(prof)[0] == m4  # 0.9*0.5 + 0.1*0.5 = 0.5 beats memory 1's 0.9*0.4*e^(-ln2/30) + 0.1 = 0.452
    # explicit weights win over the profile's
    both = search(conn, **base, profile="usage_first", weights={"recency": 1.0})
    assert ids(both) == [m1, m5, m2, m3, m4, m6]
    # the profile belongs to tenant acme: another tenant does not see it
    with connect(dsn, tenant="other") as other:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown profile "usage_first"'):
            search(other, query_text="x", profile="usage_first")


def test_custom_profile_with_different_params(conn, fx):
    m1, m2, m3, m4, m5, m6 = fx
    conn.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values "
                 "('acme', 'slow_decay', 'search', %s, %s)",
                 (Jsonb({"recency": 0.5, "actor": 0.5}),
                  Jsonb({"recency_half_life_days": 60, "actor_mismatch": 0.0, "usage_half_life_days": 10})))
    rows = search(conn, query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, as_of=T, profile="slow_decay")
    for r, mid in ((r, r["id"]) for r in rows):
        f = FIXTURE[fx.index(mid)]
        assert r["recency"] == pytest.approx(decay(f[2], 60), abs=1e-9)
        assert r["actor"] == pytest.approx(1.0 if f[3] == "maya" else 0.0)
        last = f[6] if f[6] is not None else f[2]
        assert r["usage"] == pytest.approx(f[5] / 10 * decay(last, 10), abs=1e-9)
        assert r["score"] == pytest.approx(0.5 * r["recency"] + 0.5 * r["actor"], abs=1e-9)


def test_custom_profile_without_params_uses_default_params(conn, fx):
    conn.execute("insert into pgmem.profiles (tenant, name, method, weights) values ('acme', 'bare', 'search', %s)",
                 (Jsonb({"semantic": 0.5, "recency": 0.5}),))
    rows = search(conn, query_embedding=Q_VEC, actor=Q_ACTOR, as_of=T, profile="bare")
    for r in rows:
        f = FIXTURE[fx.index(r["id"])]
        assert r["recency"] == pytest.approx(decay(f[2]), abs=1e-9)
        assert r["actor"] == pytest.approx(1.0 if f[3] == "maya" else 0.3)
        assert r["score"] == pytest.approx(0.5 * r["semantic"] + 0.5 * r["recency"], abs=1e-9)


def test_explain_search_contributions_add_up(conn, fx):
    base = dict(query_text=Q_TEXT, query_embedding=Q_VEC, location=Q_LOC, as_of=T)
    hits = search(conn, **base)
    ex = call(conn, "explain_search", **base)
    assert len(ex) == 10 * len(hits)  # JAM's six, and time, session, neighbour, context (weight 0 in jam)
    by_id: dict[int, list[dict]] = {}
    for r in ex:
        by_id.setdefault(r["id"], []).append(r)
    for rank, h in enumerate(hits, start=1):
        rows = by_id[h["id"]]
        assert {r["signal"] for r in rows} == set(SIGNALS) | {"time", "session", "neighbour", "context"}
        assert all(r["rank"] == rank and r["score"] == pytest.approx(h["score"]) for r in rows)
        assert sum(r["contribution"] for r in rows) == pytest.approx(h["score"], abs=1e-9)
        for r in rows:
            # effective weights: no actor given, so .07 is shared out over the others; jam has
            # no time window, session or neighbour signal
            want_w = 0.0 if r["signal"] not in JAM or r["signal"] == "actor" else JAM[r["signal"]] / 0.93
            assert r["weight"] == pytest.approx(want_w, abs=1e-9)
            assert r["value"] == (None if r["signal"] in ("actor", "time", "session", "neighbour")
                                  else pytest.approx(h[r["signal"]]))
            assert r["contribution"] == pytest.approx((r["value"] or 0) * r["weight"], abs=1e-12)
        # rows of one memory come largest contribution first
        contribs = [r["contribution"] for r in rows]
        assert contribs == sorted(contribs, reverse=True)
    # with custom weights too
    w = {"semantic": 0.25, "lexical": 0.25, "recency": 0.25, "usage": 0.25}
    hits = search(conn, **base, weights=w)
    ex = call(conn, "explain_search", **base, weights=w)
    for h in hits:
        assert sum(r["contribution"] for r in ex if r["id"] == h["id"]) == pytest.approx(h["score"], abs=1e-9)
        sql_sum = scalar(conn, "select sum(contribution) from pgmem.explain_search(query_text => %s, "
                         "query_embedding => %s, location => %s, as_of => %s, weights => %s, profile => 'jam') where id = %s",
                         (Q_TEXT, Q_VEC, Q_LOC, T, Jsonb(w), h["id"]))
        assert sql_sum == pytest.approx(h["score"], abs=1e-9)


def test_explain_search_weight_of_an_omitted_signal_is_zero(conn, fx):
    # a signal an explicit weights object leaves out weighs 0 (as in search()), not NULL
    w = {"semantic": 0.5, "lexical": 0.5}
    ex = call(conn, "explain_search", query_text=Q_TEXT, query_embedding=Q_VEC, location=Q_LOC, as_of=T, weights=w)
    spatial = [r for r in ex if r["signal"] == "spatial"]
    assert spatial and all(r["value"] is not None for r in spatial)
    assert all(r["weight"] == 0 and r["contribution"] == 0 for r in spatial)


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize("weights, message", [
    ({"semantic": 0.5, "lexical": 0.2}, "must sum to 1"),
    ({"semantic": 0.6, "lexical": 0.6}, "must sum to 1"),
    ({"semantic": 1.2, "lexical": -0.2}, 'weight "lexical" is negative'),
    ({"semantic": 0.5, "novelty": 0.5}, 'unknown weight "novelty": known signals are semantic, lexical, recency'),
    ({"semantic": "1"}, 'weight "semantic" must be a number'),
    ([0.5, 0.5], "weights must be a JSON object"),
])
def test_weights_validation(conn, weights, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        search(conn, query_text="peanut", weights=weights)


def test_check_weights_directly(conn):
    ok = {"a": 0.25, "b": 0.75}
    assert scalar(conn, "select pgmem.check_weights(%s, array['a','b'])", (Jsonb(ok),)) == ok
    assert scalar(conn, "select pgmem.check_weights(%s, array['a','b'])", (Jsonb({"a": 0.3333333, "b": 0.6666667}),))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="they sum to 1.1"):
        conn.execute("select pgmem.check_weights(%s, array['a','b'])", (Jsonb({"a": 0.5, "b": 0.6}),))


def test_zero_weight_on_every_present_signal_is_an_error(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="nothing to rank by"):
        search(conn, query_text="peanut", weights={"semantic": 0.5, "actor": 0.5})


def test_unknown_profile_lists_the_known_ones(conn):
    conn.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values "
                 "('acme', 'mine', 'search', %s, %s)", (Jsonb(JAM), Jsonb(JAM_PARAMS)))
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match='unknown profile "nope": known profiles for search are jam, mine'):
        search(conn, query_text="peanut", profile="nope")


@pytest.mark.parametrize("profile, method", [("shadow", "activate"), ("engram", "recall")])
def test_profile_of_the_wrong_method(conn, profile, method):
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match=f'profile "{profile}" is a {method} profile, not a search profile'):
        search(conn, query_text="peanut", profile=profile)


@pytest.mark.parametrize("k", [0, -1, 1001, 1000000])
def test_k_out_of_range(conn, k):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"k must be between 1 and 1000, got {k}"):
        search(conn, query_text="peanut", k=k)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="k must be between 1 and 1000"):
        call(conn, "search_exact", query_text="peanut", k=k)


def test_k_bounds_are_inclusive(conn, fx):
    assert len(search(conn, query_text=Q_TEXT, k=1)) == 1
    assert len(search(conn, query_text=Q_TEXT, k=1000)) == 4


@pytest.mark.parametrize("candidates", [0, 10001])
def test_candidates_out_of_range(conn, candidates):
    # at most the setting max_candidates (10000; tests/test_read_limits.py changes it)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="candidates must be between 1 and 10000"):
        search(conn, query_text="peanut", candidates=candidates)


def test_candidates_above_ef_search_limit(conn, fx):
    # hnsw.ef_search is capped at pgvector's 1000; the iterative scan supplies the rest
    rows = search(conn, query_text=Q_TEXT, query_embedding=Q_VEC, as_of=T, candidates=2000)
    assert len(rows) == 6
    rows = search(conn, query_embedding=Q_VEC, as_of=T, candidates=10000, k=1000)
    assert len(rows) == 6


def test_candidates_small_pool_still_returns_k(conn, fx):
    # candidates is raised to at least k
    rows = search(conn, query_embedding=Q_VEC, as_of=T, k=5, candidates=1)
    assert len(rows) == 5


@pytest.mark.parametrize("filters, message", [
    ({"colour": "red"}, 'unknown filter "colour"'),
    ({"user_id": 5}, 'filter "user_id" must be a string or an array of strings'),
    ({"category": ["fact", 3]}, 'filter "category" must be a string or an array of strings'),
    ({"metadata": "x"}, 'filter "metadata" must be a JSON object'),
    ({"ids": ["1"]}, 'filter "ids" must be an array of memory ids'),
    ({"ids": 1}, 'filter "ids" must be an array of memory ids'),
    ({"created_after": 20250101}, 'filter "created_after" must be a timestamp string'),
    ([{"user_id": "x"}], "filters must be a JSON object"),
])
def test_filter_validation(conn, filters, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        search(conn, query_text="peanut", filters=filters)


def test_malformed_created_after(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='filter "created_after" is not a timestamp: next tuesday-ish'):
        search(conn, query_text="peanut", filters={"created_after": "next tuesday-ish"})


def test_query_embedding_validation(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match="query_embedding has 3 dimensions, but this pgmem installation stores 384"):
        search(conn, query_embedding=np.array([1, 0, 0], dtype=np.float32))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="query_embedding is all zeros"):
        search(conn, query_embedding=np.zeros(DIM, dtype=np.float32))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="query_embedding is all zeros"):
        call(conn, "search_exact", query_text="peanut", query_embedding=np.zeros(DIM, dtype=np.float32))


def test_no_tenant_is_an_error(dsn):
    with connect(dsn, tenant=None) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="pgmem.tenant is not set"):
            search(c, query_text="peanut")


# ------------------------------------------------------------------------- filters
@pytest.fixture
def zoo(conn):
    """Memories that all contain "zebra", with different scopes and fields."""
    spec = {
        "a": dict(user_id="maya", session_id="s1", category="fact", metadata={"tag": "x", "n": 1}, days=1),
        "b": dict(user_id="maya", session_id="s2", category="preference", metadata={"tag": "y"}, days=5),
        "c": dict(user_id="tom", session_id="s1", category="episode", metadata={"tag": "x", "n": 2}, days=10),
        "d": dict(user_id="tom", session_id="s3", category="skill", metadata={}, days=20),
        "e": dict(user_id=None, session_id=None, category="context", metadata={"tag": "x"}, days=40),
    }
    out = {}
    for i, (name, s) in enumerate(spec.items()):
        out[name] = remember(conn, f"zebra note {name} number {i}", user_id=s["user_id"], session_id=s["session_id"],
                             category=s["category"], metadata=s["metadata"],
                             created_at=T - timedelta(days=s["days"]), embedding=unit((i, 1.0)))
    return out


def _found(conn, filters, **kw) -> set[int]:
    kw.setdefault("query_text", "zebra")
    kw.setdefault("as_of", T)
    a = set(ids(search(conn, filters=filters, **kw)))
    b = set(ids(call(conn, "search_exact", filters=filters, **kw)))
    assert a == b, (filters, a, b)
    return a


@pytest.mark.parametrize("filters, names", [
    ({}, "abcde"),
    ({"user_id": "maya"}, "ab"),
    ({"user_id": ["tom", "nobody"]}, "cd"),
    ({"session_id": "s1"}, "ac"),
    ({"session_id": "s1", "user_id": "tom"}, "c"),
    ({"category": "fact"}, "a"),
    ({"category": ["fact", "skill", "context"]}, "ade"),
    ({"metadata": {"tag": "x"}}, "ace"),
    ({"metadata": {"tag": "x", "n": 2}}, "c"),
    ({"metadata": {}}, "abcde"),
    ({"created_after": (T - timedelta(days=10)).isoformat()}, "abc"),
    ({"created_before": (T - timedelta(days=10)).isoformat()}, "de"),
    ({"created_after": (T - timedelta(days=21)).isoformat(), "created_before": (T - timedelta(days=2)).isoformat()}, "bcd"),
    ({"category": []}, ""),
])
def test_filters(conn, zoo, filters, names):
    want = {zoo[n] for n in names}
    assert _found(conn, filters) == want
    # the same with an embedding-only query (HNSW candidates, filtered)
    assert _found(conn, filters, query_text=None, query_embedding=unit((0, 1.0), (1, 1.0), (2, 1.0))) == want


def test_ids_filter(conn, zoo):
    assert _found(conn, {"ids": [zoo["b"], zoo["d"]]}) == {zoo["b"], zoo["d"]}
    assert _found(conn, {"ids": []}) == set()


def test_state_filter(conn, zoo):
    conn.execute("update pgmem.memories set state = 'archived' where id = %s", (zoo["a"],))
    conn.execute("select pgmem.forget(%s)", (zoo["b"],))
    everything = set(zoo.values())
    assert _found(conn, {}) == everything - {zoo["a"], zoo["b"]}  # active only by default
    assert _found(conn, {"state": ["active", "archived"]}) == everything - {zoo["b"]}
    assert _found(conn, {"state": "archived"}) == {zoo["a"]}
    assert _found(conn, {"state": "deleted"}) == {zoo["b"]}
    assert _found(conn, {"state": ["active", "archived"], "user_id": "maya"}) == {zoo["a"]}


def test_tenant_isolation(conn, dsn, zoo):
    with connect(dsn, tenant="other") as other:
        oid = remember(other, "zebra note of the other tenant", embedding=unit((0, 1.0)), created_at=T - timedelta(days=1))
        other.execute("update pgmem.memories set access_count = 1000 where id = %s", (oid,))
        # the other tenant sees only its own memory
        assert ids(search(other, query_text="zebra", as_of=T)) == [oid]
    q = dict(query_text="zebra", query_embedding=unit((0, 1.0)), as_of=T)
    for fn in ("search", "search_exact"):
        rows = call(conn, fn, **q)
        assert oid not in ids(rows) and set(ids(rows)) == set(zoo.values())
        assert call(conn, fn, **q, filters={"ids": [oid]}) == []
        assert call(conn, fn, **q, filters={"state": ["active", "archived", "deleted", "merged"]}) != []
        assert oid not in ids(call(conn, fn, **q, filters={"state": ["active", "archived", "deleted", "merged"]}))
    # the other tenant's access count does not enter acme's usage normalisation
    conn.execute("update pgmem.memories set access_count = 4, last_accessed_at = %s where id = %s", (T, zoo["a"]))
    rows = search(conn, **q)
    assert next(r for r in rows if r["id"] == zoo["a"])["usage"] == pytest.approx(1.0)


# -------------------------------------------------------------------------- as_of
def test_as_of(conn, fx):
    late = remember(conn, "Maya found a new peanut-free restaurant in Berlin", embedding=unit((0, 1.0)),
                    who="maya", created_at=T + timedelta(days=1))
    base = dict(query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC)
    for fn in ("search", "search_exact"):
        assert late not in ids(call(conn, fn, **base, as_of=T))
        assert late in ids(call(conn, fn, **base, as_of=T + timedelta(days=1)))   # created_at <= as_of
        rows = call(conn, fn, **base, as_of=T + timedelta(days=16))
        r = next(r for r in rows if r["id"] == late)
        assert r["recency"] == pytest.approx(decay(15), abs=1e-9)
    # every other memory's recency and usage are computed at as_of too
    as_of = T + timedelta(days=7)
    rows = search(conn, **base, as_of=as_of)
    for r in rows:
        if r["id"] == late:
            continue
        f = FIXTURE[fx.index(r["id"])]
        assert r["recency"] == pytest.approx(decay(f[2] + 7), abs=1e-9)
        last = f[6] if f[6] is not None else f[2]
        assert r["usage"] == pytest.approx(f[5] / 10 * decay(last + 7), abs=1e-9)


def test_as_of_validation(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="as_of .* is out of range"):
        search(conn, query_text="peanut", as_of=datetime(1800, 1, 1, tzinfo=timezone.utc))


# -------------------------------------------------------------------------- touch
def test_touch_records_usage(conn, fx):
    base = dict(query_text=Q_TEXT, query_embedding=Q_VEC, as_of=T)
    before = dict(conn.execute("select id, access_count from pgmem.memories").fetchall())
    rows = search(conn, **base, k=3)  # touch => false by default
    assert dict(conn.execute("select id, access_count from pgmem.memories").fetchall()) == before
    assert scalar(conn, "select count(*) from pgmem.accesses") == 0
    assert scalar(conn, "select count(*) from pgmem.links where kind = 'co_access'") == 0
    search(conn, **base, k=3, touch=False)
    assert scalar(conn, "select count(*) from pgmem.accesses") == 0

    rows = search(conn, **base, k=3, touch=True)
    got = ids(rows)
    after = dict(conn.execute("select id, access_count from pgmem.memories").fetchall())
    for mid in fx:
        assert after[mid] == before[mid] + (1 if mid in got else 0)
    acc = conn.execute("select memory_id, kind, rank, tenant from pgmem.accesses order by rank").fetchall()
    assert acc == [(mid, "search", i + 1, "acme") for i, mid in enumerate(got)]
    # last_accessed_at moved to the time of the search
    fresh = conn.execute("select count(*) from pgmem.memories where id = any(%s) "
                         "and last_accessed_at > now() - interval '1 minute'", (got,)).fetchone()[0]
    assert fresh == 3
    links = conn.execute("select src_id, dst_id, weight, count from pgmem.links where kind = 'co_access' "
                         "order by 1, 2").fetchall()
    pairs = sorted((a, b) for a in got for b in got if a < b)
    assert [(s, d) for s, d, *_ in links] == pairs
    assert all(w == 1 and c == 1 for *_, w, c in links)
    # a second touching search strengthens the same links
    again = search(conn, **base, k=3, touch=True)
    assert set(ids(again)) == set(got)
    links = conn.execute("select weight, count from pgmem.links where kind = 'co_access'").fetchall()
    assert links == [(2, 2)] * 3
    assert scalar(conn, "select count(*) from pgmem.accesses") == 6
    # no history rows for bookkeeping
    assert scalar(conn, "select count(*) from pgmem.history where op <> 'add'") == 0


def test_touch_directly(conn, fx):
    m1, m2, *_ = fx
    assert scalar(conn, "select pgmem.touch(%s)", ([m1, m2, 999999],)) == 2  # unknown ids are skipped
    assert dict(conn.execute("select id, access_count from pgmem.memories where id = any(%s)", ([m1, m2],)).fetchall()) \
        == {m1: 5, m2: 3}
    assert scalar(conn, "select count(*) from pgmem.accesses where kind = 'touch'") == 2  # once each: as access_count
    assert scalar(conn, "select pgmem.touch('{}'::bigint[])") == 0


# ====================================================================== 5,000 memories
SUBJECTS = [
    "Maya", "Tom", "Priya", "the on-call engineer", "my sister Lena", "the assistant", "our landlord",
    "the product manager", "Grandma Rose", "the new intern", "Dr. Okafor", "the football coach", "Uncle Sam",
    "the tax advisor", "the barista downstairs", "my neighbour Ines", "the database admin", "the wedding planner",
    "the piano teacher", "Coach Miller", "the vet", "the airline agent", "our CTO", "the security team",
    "the hiking club", "Professor Chen", "the dentist", "the plumber", "my flatmate Jonas", "the travel agent",
    "the kindergarten teacher", "the bakery owner", "the mechanic", "the marathon group", "Aunt Clara",
    "the recruiter", "the yoga instructor", "the support bot", "the chess club", "the sales lead",
]
PREDICATES = [
    "fixed the broken database migration", "booked a flight to Lisbon", "cooked a vegetarian lasagna",
    "lost the keys to the garage", "adopted a grey kitten", "started learning Rust",
    "complained about the noisy heating", "renewed the passport", "ran a half marathon",
    "rolled back the failed deployment", "planted tomatoes on the balcony", "sold the old bicycle",
    "paid the electricity bill", "wrote the postmortem report", "painted the kitchen blue",
    "forgot the dentist appointment", "ordered a new laptop", "moved to a flat in Kreuzberg",
    "found a peanut-free restaurant", "swapped the on-call rotation", "upgraded Postgres to version 15",
    "bought tickets for the opera", "repaired the leaking faucet", "baked sourdough bread",
    "switched from VS Code to Neovim", "cancelled the gym membership", "reviewed the pull request",
    "lost a chess tournament", "scheduled a vaccination for the dog", "organised a birthday party",
    "translated the contract into German", "set up a VPN for the team", "visited the museum of modern art",
    "broke a leg while skiing", "returned the rental car late", "installed solar panels on the roof",
    "rescued a bird from the chimney", "learned to play the ukulele", "filed the tax return",
    "rebooked the hotel in Kyoto",
]
PLACES = ["in Berlin", "at the office", "in Tokyo", "near the train station", "at home", "in Amsterdam",
          "in a small village", "at the airport", "in the cloud console", "at the university"]
TIMES = ["on Monday morning", "last week", "yesterday evening", "during the holidays", "at midnight",
         "two days ago", "after lunch", "in early spring", "on Friday", "before the deadline"]
ACTORS = ["user", "assistant", "tool:shell", "tool:web_search", "tool:calendar"]
LOCS = ["chat/web/maya", "chat/mobile/tom", "slack/infra", "slack/random", "/home/maya/work/orders",
        "/home/tom/uni/raft", "calendar/maya", "https:/example.com/docs"]
N_BIG = 5000
N_QUERIES = 50


def _sentences():
    rnd = random.Random(7)
    combos = [(s, p, pl, t) for s in SUBJECTS for p in PREDICATES for pl in PLACES for t in TIMES]
    picked = rnd.sample(combos, N_BIG + N_QUERIES)
    docs = [f"{s[0].upper()}{s[1:]} {p} {pl} {t}." for s, p, pl, t in picked[:N_BIG]]
    queries = [f"Did {s} {p} {pl}?" for s, p, pl, t in picked[N_BIG:]]
    meta = [(rnd.choice(ACTORS), rnd.choice(LOCS), rnd.uniform(0, 400), rnd.choice([0, 0, 0, 1, 2, 5, 9]))
            for _ in range(N_BIG)]
    qmeta = [(rnd.choice(ACTORS + [None]), rnd.choice(LOCS + [None])) for _ in range(N_QUERIES)]
    return docs, meta, queries, qmeta


@pytest.fixture(scope="module")
def embedder():
    from pgmem.embedding import Embedder

    e = Embedder()
    assert e.dim == DIM
    return e


@pytest.fixture(scope="module")
def big(cluster, embedder):
    """A database of 5,000 memories with real MiniLM embeddings (built once for the module)."""
    docs, meta, queries, qmeta = _sentences()
    t0 = time.perf_counter()
    doc_vecs = embedder.embed_many(docs, batch_size=128)
    q_vecs = embedder.embed_many(queries, batch_size=128)
    t_embed = time.perf_counter() - t0
    name = f"t_big_{uuid.uuid4().hex[:10]}"
    j = _janitor(cluster, name, TEMPLATE)
    j.init()
    dsn = cluster.dsn(name)
    try:
        with connect(dsn, tenant="acme") as c:
            t1 = time.perf_counter()
            with c.cursor() as cur:
                with cur.copy("copy pgmem.memories (tenant, content, who, location, created_at, access_count, "
                              "last_accessed_at, embedding, embedding_model) from stdin") as cp:
                    for text, v, (who, loc, age, n) in zip(docs, doc_vecs, meta):
                        created = T - timedelta(days=age)
                        cp.write_row(("acme", text, who, loc, created, n,
                                      created + timedelta(days=age / 2) if n else None,
                                      "[" + ",".join(f"{x:.7g}" for x in v) + "]", "all-MiniLM-L6-v2"))
            # the index job puts them under the HNSW index (pgmem.memory_vectors; STORAGE decision)
            c.execute("select * from pgmem.index_vectors(100000)")
            c.execute("analyze pgmem.memories")
            c.execute("analyze pgmem.memory_vectors")
            c.execute("analyze pgmem.vector_queue")
            t_load = time.perf_counter() - t1
            assert scalar(c, "select count(*) from pgmem.memories where embedding is not null") == N_BIG
            assert scalar(c, "select count(*) from pgmem.embedding_queue") == 0
        print(f"\n[big fixture] embedded {N_BIG + N_QUERIES} texts in {t_embed:.1f}s, loaded in {t_load:.1f}s")
        yield dsn, list(zip(queries, q_vecs, qmeta))
    finally:
        j.drop()


@pytest.mark.timeout(1800)  # includes building the module's 5,000-memory fixture (embedding on a busy CPU)
@pytest.mark.slow
def test_search_agrees_with_search_exact_on_5000_real_memories(big):
    dsn, queries = big
    overlaps, overlaps_plain, overlaps_small = [], [], []
    t_search = t_exact = 0.0
    with connect(dsn, tenant="acme") as c:
        for text, vec, (actor, loc) in queries:
            kw = dict(query_text=text, query_embedding=vec, k=10, actor=actor, location=loc, as_of=T)
            t0 = time.perf_counter()
            a = ids(search(c, **kw))
            t1 = time.perf_counter()
            b = ids(call(c, "search_exact", **kw))
            t2 = time.perf_counter()
            t_search += t1 - t0
            t_exact += t2 - t1
            assert len(a) == len(b) == 10
            overlaps.append(len(set(a) & set(b)) / 10)
            # the semantic + lexical core, without actor/location
            a = ids(search(c, query_text=text, query_embedding=vec, k=10, as_of=T))
            b = ids(call(c, "search_exact", query_text=text, query_embedding=vec, k=10, as_of=T))
            overlaps_plain.append(len(set(a) & set(b)) / 10)
            # for information: the smallest candidate pool (k per index)
            a = ids(search(c, query_text=text, query_embedding=vec, k=10, as_of=T, candidates=10))
            overlaps_small.append(len(set(a) & set(b)) / 10)
    mean = sum(overlaps) / len(overlaps)
    mean_plain = sum(overlaps_plain) / len(overlaps_plain)
    print(f"\n[overlap@10] search vs search_exact over {len(queries)} queries: {mean:.3f} "
          f"(text+embedding only: {mean_plain:.3f}; min {min(overlaps):.1f}; with candidates => 10: "
          f"{sum(overlaps_small) / len(overlaps_small):.3f}); "
          f"mean time search {1000 * t_search / len(queries):.1f} ms, exact {1000 * t_exact / len(queries):.1f} ms")
    assert mean >= 0.9
    assert mean_plain >= 0.9


def test_scores_of_search_equal_exact_scores_for_shared_ids(big):
    dsn, queries = big
    with connect(dsn, tenant="acme") as c:
        for text, vec, (actor, loc) in queries[:10]:
            kw = dict(query_text=text, query_embedding=vec, k=20, actor=actor, location=loc, as_of=T)
            a = {r["id"]: r for r in search(c, **kw)}
            b = {r["id"]: r for r in call(c, "search_exact", **kw)}
            for i in set(a) & set(b):
                for s in ("score",) + SIGNALS:
                    if a[i][s] is None:
                        assert b[i][s] is None
                    else:
                        assert a[i][s] == pytest.approx(b[i][s], abs=1e-9), (i, s)
            scores = [r["score"] for r in a.values()]
            assert scores == sorted(scores, reverse=True)


def ranking_plans(c, sql: str, params=()) -> tuple[list[dict], str]:
    """The plans of the statements a ranking runs on memories or their vectors (the candidate
    branches of sql/203_candidates.sql and the scoring statement): all their nodes, and the plans
    alone (without the query texts) as a string."""
    plans = [p for p in plans_of(c, sql, params)
             if any(t in p["Query Text"] for t in ("pgmem.memories", "pgmem.memory_vectors", "pgmem.recent_vectors"))]
    assert plans, "no statement of the ranking read memories"
    nodes = [n for p in plans for n in plan_nodes(p)]
    return nodes, json.dumps([p["Plan"] for p in plans])


def scans(nodes: list[dict]) -> set[tuple[str, str]]:
    """(node type, index name) of every scan of pgmem.memories or pgmem.memory_vectors (the vectors
    under the HNSW index) or of one of their indexes. (The queue of vectors not indexed yet is
    small by design, and read whole.)"""
    return {(n["Node Type"], n.get("Index Name", "")) for n in nodes
            if n.get("Relation Name") in ("memories", "memory_vectors", "recent_vectors")
            or n.get("Index Name", "").startswith(("memories_", "memory_vectors_", "recent_vectors_"))}


RANKINGS = {
    "search": "select * from pgmem.search(%s, %s::vector, k => 10, actor => 'user', location => 'chat/web/maya', "
              "as_of => %s::timestamptz, filters => %s::jsonb)",
    "activate": "select * from pgmem.activate(%s, %s::vector, k => 10, as_of => %s::timestamptz, filters => %s::jsonb)",
    "recall": "select * from pgmem.recall(%s, %s::vector, k => 10, as_of => %s::timestamptz, filters => %s::jsonb)",
}
HNSW = ("Index Scan", "memory_vectors_hnsw")
GIN = ("Bitmap Index Scan", "memories_tsv_gin")


@pytest.mark.parametrize("ranking", list(RANKINGS))
def test_rankings_take_the_hnsw_and_gin_paths(big, ranking):
    """EXPLAIN of every statement each ranking runs (captured from inside the functions, on the
    5,000-memory set: over exact_scan_rows, so the candidates come from the indexes): its
    candidates come from the HNSW index and the GIN index, never from a scan of the table, with
    and without filters; a branch a query does not use is not run at all."""
    dsn, queries = big
    with connect(dsn, tenant="acme") as c:
        gin = 0
        for i, (text, vec, _) in enumerate(queries[:3]):
            nodes, plan = ranking_plans(c, RANKINGS[ranking], (text, vec, T, Jsonb({})))
            if i == 0:
                print(f"\n[scans of {ranking} for {text!r}] {sorted(scans(nodes))}")
            assert HNSW in scans(nodes), scans(nodes)
            gin += GIN in scans(nodes)
            assert not any(t == "Seq Scan" for t, _ in scans(nodes)), scans(nodes)
        assert gin >= 2, gin  # (a question whose every word is common has no lexical probe)
        # a filter is tested on the memory joined to each vector the (iterative) HNSW scan yields
        text, vec, _ = queries[0]
        nodes, plan = ranking_plans(c, RANKINGS[ranking], (text, vec, T, Jsonb({"who": ["user", "tool:shell"]})))
        assert HNSW in scans(nodes), scans(nodes)
        assert any("who = ANY" in n.get("Filter", "") for n in nodes), plan
        assert not any(t == "Seq Scan" for t, _ in scans(nodes)), scans(nodes)
        # text only: the lexical branch alone
        nodes, _ = ranking_plans(c, RANKINGS[ranking], (text, None, T, Jsonb({})))
        assert GIN in scans(nodes) and HNSW not in scans(nodes), scans(nodes)
        assert not any(t == "Seq Scan" for t, _ in scans(nodes)), scans(nodes)
    if ranking == "search":  # search_exact is the scan it is meant to be
        with connect(dsn, tenant="acme") as c:
            text, vec, _ = queries[0]
            nodes, _ = ranking_plans(c, "select * from pgmem.search_exact(%s, %s::vector, as_of => %s::timestamptz)",
                                     (text, vec, T))
            assert HNSW not in scans(nodes) and GIN not in scans(nodes), scans(nodes)


def test_search_plans_are_cached_for_the_session(big):
    """The ranking statements are planned once per session, not per call (plan_cache_mode =
    force_generic_plan on the ranking functions and the candidate set: 11.6 ms of planning per
    search when each call was planned with its record, bench/README.md R3): after many calls in
    one session the plans hold parameters, and still take the index paths."""
    dsn, queries = big
    with connect(dsn, tenant="acme") as c:
        for text, vec, _ in queries[:8]:
            search(c, query_text=text, query_embedding=vec, as_of=T)
        text, vec, _ = queries[9]
        nodes, plan = ranking_plans(c, RANKINGS["search"], (text, vec, T, Jsonb({})))
        assert "($" in plan and HNSW in scans(nodes), plan  # a generic plan: the record's fields are parameters
        for fn in ("_search", "_candidate_ids", "_activate", "recall"):
            assert "plan_cache_mode=force_generic_plan" in scalar(
                c, "select proconfig from pg_proc where proname = %s and pronamespace = 'pgmem'::regnamespace", (fn,)), fn


def test_big_filters_and_text_only_on_real_data(big):
    dsn, queries = big
    with connect(dsn, tenant="acme") as c:
        text, vec, _ = queries[3]
        f = {"who": "tool:shell", "created_after": (T - timedelta(days=100)).isoformat()}
        a = search(c, query_text=text, query_embedding=vec, filters=f, as_of=T)
        b = call(c, "search_exact", query_text=text, query_embedding=vec, filters=f, as_of=T)
        assert a and all(r["who"] == "tool:shell" and r["created_at"] >= T - timedelta(days=100) for r in a)
        assert len(set(ids(a)) & set(ids(b))) >= 9
        # text only: lexical candidates; every hit contains a query lexeme
        rows = search(c, query_text="sourdough bread", as_of=T)
        assert rows and all("sourdough" in r["content"].lower() or "bread" in r["content"].lower() for r in rows)
        # lexical = the share of {sourdough, bread} in the memory
        n_match = scalar(c, "select count(*) from pgmem.memories where tsv @@ pgmem.query_tsquery('sourdough bread')")
        assert n_match > 10
        for r in rows:
            words = set(r["content"].lower().replace(".", "").split())
            assert r["lexical"] == pytest.approx(len(words & {"sourdough", "bread"}) / 2)
            assert r["semantic"] is None and r["actor"] is None and r["spatial"] is None
        # JAM's relative reading: ts_rank / the best ts_rank of the candidates (every matching memory here)
        c.execute("insert into pgmem.profiles (tenant, name, method, weights, params) "
                  "select 'acme', 'jam_rank', 'search', weights, params || '{\"lexical\": \"rank\"}' "
                  "from pgmem.profiles where name = 'jam' on conflict do nothing")
        rows = search(c, query_text="sourdough bread", as_of=T, profile="jam_rank", k=50)
        ranks = dict(c.execute("select id, ts_rank(tsv, pgmem.query_tsquery('sourdough bread'), 1) from pgmem.memories "
                               "where tsv @@ pgmem.query_tsquery('sourdough bread')").fetchall())
        best = max(ranks.values())
        for r in rows:
            assert r["lexical"] == pytest.approx(ranks[r["id"]] / best, abs=1e-6)


def _lexemes(c, q: str) -> list[str]:
    return [r[0] for r in c.execute("select unnest(tsvector_to_array(to_tsvector('english', %s)))", (q,))]


def _probe_lexemes(probe: str) -> set[str]:
    return {t.strip().strip("'") for t in probe.replace("&", "|").split("|")}


def test_lexical_probe_takes_the_rarest_lexemes(big):
    """The lexical candidate query holds the query's rarest lexemes, within the row budget
    (sql/201_lexical.sql, lexical_probe: the tenant's own document frequencies); the whole OR
    query below the budget."""
    dsn, queries = big
    with connect(dsn, tenant="acme") as c:
        texts = [q[0] for q in queries[:40]]
        # 5,000 rows <= a budget of 5,000: the probe is the whole OR query
        def same_or(a: str, b: str) -> bool:  # the same OR of lexemes, in any order
            return "&" not in a and _probe_lexemes(a) == _probe_lexemes(b)
        for t in texts[:10]:
            assert same_or(scalar(c, "select pgmem.lexical_probe(%s, 5000)::text", (t,)),
                           scalar(c, "select pgmem.query_tsquery(%s)::text", (t,)))
        # the default budget (setting lexical_probe_rows, 1,000) narrows it
        assert scalar(c, "select pgmem._setting_num('lexical_probe_rows')") == 1000
        assert scalar(c, "select pgmem.lexical_probe('the of and')") is None  # stop words only
        assert same_or(scalar(c, "select pgmem.lexical_probe(%s, 0)::text", (texts[0],)),
                       scalar(c, "select pgmem.query_tsquery(%s)::text", (texts[0],)))
        narrowed = 0
        for t in texts:
            lex = _lexemes(c, t)
            if len(lex) < 2:
                continue
            count = {x: scalar(c, "select count(*) from pgmem.memories where tsv @@ %s::tsquery",
                               ("'" + x.replace("'", "''") + "'",)) for x in lex}
            probe = scalar(c, "select pgmem.lexical_probe(%s, 200)::text", (t,))
            full_n = scalar(c, "select count(*) from pgmem.memories where tsv @@ pgmem.query_tsquery(%s)", (t,))
            if probe is None:
                # no probe only when even the AND of every lexeme is estimated over budget: each
                # lexeme is common, and together they still match more than 200 memories
                n_all = scalar(c, "select count(*) from pgmem.memories where tsv @@ plainto_tsquery('english', %s)", (t,))
                assert min(count.values()) > 200 and n_all > 100, (t, count, n_all)
                continue
            probe_n = scalar(c, "select count(*) from pgmem.memories where tsv @@ pgmem.lexical_probe(%s, 200)", (t,))
            p = _probe_lexemes(probe)
            assert p <= set(lex), (t, probe)
            # the rarest lexeme is always searched (ties: one of the rarest)
            assert min(count[x] for x in p) == min(count.values()), (t, probe, count)
            assert probe_n <= full_n
            if "&" not in probe and len(p) > 1:
                # an OR of several lexemes only while the estimate fits: the statistics of 5,000
                # rows are exact for frequent lexemes, so the real matches stay near the budget
                assert probe_n <= 2 * 200, (t, probe, probe_n)
            if "&" in probe:  # only when even the rarest lexeme is over budget
                assert min(count.values()) > 100, (t, probe, count)
            narrowed += probe_n < full_n
        assert narrowed >= 10, narrowed  # the budget does narrow most of these questions


@pytest.mark.slow
def test_search_with_a_small_lexical_budget_still_agrees_with_search_exact(big):
    dsn, queries = big
    with connect(dsn, tenant="acme") as c:
        res = {}
        for budget in ("0", "200"):  # 0: every lexeme (the plain OR query)
            c.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'lexical_probe_rows', %s) "
                      "on conflict (tenant, key) do update set value = excluded.value", (budget,))
            overlaps, text_only = [], []
            for text, vec, (actor, loc) in queries[:40]:
                kw = dict(query_text=text, query_embedding=vec, k=10, actor=actor, location=loc, as_of=T)
                a, b = search(c, **kw), call(c, "search_exact", **kw)
                overlaps.append(len(set(ids(a)) & set(ids(b))) / 10)
                # text only: the lexical branch alone, over every lexeme
                t = search(c, query_text=text, k=10, as_of=T)
                e = call(c, "search_exact", query_text=text, k=10, as_of=T)
                text_only.append(len(set(ids(t)) & set(ids(e))) / 10)
            res[budget] = (float(np.mean(overlaps)), float(np.mean(text_only)))
        print(f"\n[lexical budget: overlap@10 fused, text only] every lexeme {res['0']}, 200 rows {res['200']}")
        assert res["200"][0] >= 0.9
        assert res["200"][0] >= res["0"][0] - 0.03
        # a query without an embedding searches every lexeme whatever the budget
        assert res["200"][1] == res["0"][1]


def test_power_law_decay_is_selectable_in_a_profile(conn, fx):
    """JAM, Time Decay Models: the power law 1/(1+t)^α as the alternative to exponential decay,
    chosen by a profile's params.decay = 'power' (α = params.decay_alpha, 1.5 by default);
    recomputed by hand for every row, the fused score with it; a bad model is refused."""
    conn.execute("""insert into pgmem.profiles (tenant, name, method, weights, params)
                    select 'acme', 'jam_power', method, weights, params || '{"decay": "power"}'
                      from pgmem.profiles where tenant = '*' and name = 'jam'""")
    conn.execute("""insert into pgmem.profiles (tenant, name, method, weights, params)
                    select 'acme', 'jam_power3', method, weights, params || '{"decay": "power", "decay_alpha": 3}'
                      from pgmem.profiles where tenant = '*' and name = 'jam'""")
    exp = expected_signals(conn, fx)
    for profile, alpha in (("jam_power", 1.5), ("jam_power3", 3.0)):
        rows = search(conn, query_text=Q_TEXT, query_embedding=Q_VEC, actor=Q_ACTOR, location=Q_LOC, as_of=T,
                      profile=profile)
        assert len(rows) == 6
        want = {}
        for mid, f in zip(fx, FIXTURE):
            want[mid] = dict(exp[mid], recency=1.0 / (1.0 + f[2]) ** alpha)
        assert ids(rows) == check_rows(rows, want)
    by = {r["id"]: r for r in rows}
    assert by[fx[5]]["recency"] == pytest.approx(1 / 91 ** 3, rel=1e-9)  # 90 days, alpha 3
    for bad in ('{"decay": "hyperbolic"}', '{"decay_alpha": 0}'):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="params.decay"):
            conn.execute("update pgmem.profiles set params = params || %s::jsonb where tenant = 'acme' and name = 'jam_power'",
                         (bad,))
