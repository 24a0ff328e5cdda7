"""Retrieval metrics in SQL and JAM attention (jam-journalistic-agent-memory.md, Diversity
Metrics, Performance Metrics, Attention Mechanism; issue 17 items 4 and 5), recomputed by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import DIM, at_cos, e
from sqlhelpers import rows, scalar



def add(conn, content, emb=None):
    if emb is None:
        return scalar(conn, "insert into pgmem.memories (content) values (%s) returning id", (content,))
    return scalar(conn, "insert into pgmem.memories (content, embedding) values (%s, %s) returning id", (content, emb))


def dcg(rels):
    return sum((2 ** r - 1) / math.log2(i + 2) for i, r in enumerate(rels))


def test_precision_at_k_by_hand(conn):
    # JAM: |retrieved[:k] ∩ relevant| / k
    q = "select pgmem.precision_at_k(%s::bigint[], %s::bigint[], %s)"
    assert scalar(conn, q, ([1, 2, 3, 4, 5], [2, 5, 9], 5)) == pytest.approx(2 / 5)
    assert scalar(conn, q, ([1, 2, 3, 4, 5], [2, 5, 9], 3)) == pytest.approx(1 / 3)
    assert scalar(conn, q, ([2], [2, 5], 5)) == pytest.approx(1 / 5)  # k, not the list's length
    assert scalar(conn, q, ([], [2], 5)) == 0
    assert scalar(conn, q, ([2, 2, 2], [2], 3)) == pytest.approx(1 / 3)  # an id counts once


def test_ndcg_by_hand(conn):
    q = "select pgmem.ndcg(%s::float8[], %s, %s::float8[])"
    rels = [0, 1, 0, 2]
    # JAM's code: ideal = the same list sorted
    assert scalar(conn, q, (rels, 4, None)) == pytest.approx(dcg(rels) / dcg([2, 1, 0, 0]))
    assert scalar(conn, q, (rels, 4, None)) == pytest.approx((1 / math.log2(3) + 3 / math.log2(5)) / (3 + 1 / math.log2(3)))
    # standard: the ideal from every judged relevance (a relevant item with grade 3 was missed)
    assert scalar(conn, q, (rels, 4, [2, 1, 3])) == pytest.approx(dcg(rels) / dcg([3, 2, 1]))
    assert scalar(conn, q, (rels, 2, [2, 1, 3])) == pytest.approx(dcg([0, 1]) / dcg([3, 2]))
    assert scalar(conn, q, ([0, 0], 2, None)) == 0
    assert scalar(conn, q, ([3, 2, 1], 3, None)) == pytest.approx(1.0)


def test_ild_by_hand(conn):
    # JAM: mean pairwise 1 - cosine
    v = [e(0), e(1), at_cos(0, 1, 0.6)]
    got = scalar(conn, "select pgmem.ild(%s::vector[])", (v,))
    assert got == pytest.approx(((1 - 0) + (1 - 0.6) + (1 - 0.8)) / 3, abs=1e-6)
    assert scalar(conn, "select pgmem.ild(%s::vector[])", ([e(0)],)) == 0


def _judged_world(conn):
    ids = {}
    ids["coffee1"] = add(conn, "espresso coffee in the morning", at_cos(0, 1, 0.95))
    ids["coffee2"] = add(conn, "the coffee beans came from Ethiopia", at_cos(0, 2, 0.9))
    ids["tea"] = add(conn, "green tea in the afternoon", at_cos(0, 3, 0.7))
    ids["bike"] = add(conn, "the bicycle has a flat tyre", e(4))
    ids["hike"] = add(conn, "hiking the mountain trail", e(5))
    conn.execute("select pgmem.judge('coffee', %s, 2, %s)", (ids["coffee1"], e(0)))
    conn.execute("select pgmem.judge('coffee', %s, 1)", (ids["coffee2"],))
    conn.execute("select pgmem.judge('coffee', %s, 0)", (ids["bike"],))
    conn.execute("select pgmem.judge('flat tyre', %s, 1)", (ids["bike"],))
    return ids


def test_evaluate_recomputed_by_hand(conn):
    ids = _judged_world(conn)
    res = {r["query"]: r for r in rows(conn, "select * from pgmem.evaluate(3)")}
    assert set(res) == {"coffee", "flat tyre"}
    judged = {"coffee": {ids["coffee1"]: 2, ids["coffee2"]: 1, ids["bike"]: 0}, "flat tyre": {ids["bike"]: 1}}
    for q, r in res.items():
        # the same ranking, called directly
        want = [x[0] for x in conn.execute("select id from pgmem.search(%s, %s, 3)",
                                           (q, e(0) if q == "coffee" else None))]
        assert r["retrieved"] == want
        rel = [judged[q].get(i, 0) for i in r["retrieved"]]
        relevant = [i for i, g in judged[q].items() if g > 0]
        assert r["precision_at_k"] == pytest.approx(len(set(r["retrieved"]) & set(relevant)) / 3)
        assert r["ndcg"] == pytest.approx(dcg(rel) / dcg(sorted(judged[q].values(), reverse=True)[:3]))
        assert r["relevant"] == sum(1 for x in rel if x > 0) and r["judged"] == len(relevant)
        embs = [np.array(scalar(conn, "select embedding::real[] from pgmem.memories where id = %s", (i,)))
                for i in r["retrieved"]]
        pairs = [1 - float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) for i, a in enumerate(embs) for b in embs[i + 1:]]
        assert r["ild"] == pytest.approx(np.mean(pairs) if pairs else 0, abs=1e-5)
    # the coffee query finds both coffee memories first: P@3 = 2/3, NDCG = 1
    assert res["coffee"]["retrieved"][:2] == [ids["coffee1"], ids["coffee2"]]
    assert res["coffee"]["ndcg"] == pytest.approx(1.0)
    # recorded, and by day for BI tools
    assert scalar(conn, "select count(*) from pgmem.eval_runs") == 2
    day = rows(conn, "select * from pgmem.eval_by_day")
    assert len(day) == 1 and day[0]["queries"] == 2 and day[0]["method"] == "search" and day[0]["k"] == 3
    assert day[0]["ndcg"] == pytest.approx(np.mean([r["ndcg"] for r in res.values()]))
    assert day[0]["precision_at_k"] == pytest.approx(np.mean([r["precision_at_k"] for r in res.values()]))
    rows(conn, "select * from pgmem.evaluate(3, 'recall', save => false)")
    assert scalar(conn, "select count(*) from pgmem.eval_runs") == 2


def test_judge_and_evaluate_reject_bad_input(conn):
    mid = add(conn, "x", e(0))
    with pytest.raises(Exception, match="relevance must be between 0 and 10"):
        conn.execute("select pgmem.judge('q', %s, 11)", (mid,))
    with pytest.raises(Exception, match="does not exist for tenant"):
        conn.execute("select pgmem.judge('q', %s, 1)", (mid + 1000,))
    with pytest.raises(Exception, match='unknown method "nope"'):
        conn.execute("select * from pgmem.evaluate(5, 'nope')")


# ------------------------------------------------------------------ attention

def test_attention_by_hand(conn):
    # JAM: softmax(q · k / √d), the maximum subtracted first
    ids = [add(conn, "same", e(0)), add(conn, "half", at_cos(0, 1, 0.5)), add(conn, "orthogonal", e(1)),
           add(conn, "no vector yet")]
    got = {r["memory_id"]: r for r in rows(conn, "select * from pgmem.attention(%s, %s)", (e(0), ids))}
    assert set(got) == set(ids[:3])
    scores = np.array([1.0, 0.5, 0.0]) / math.sqrt(DIM)
    w = np.exp(scores - scores.max())
    w /= w.sum()
    for i, mid in enumerate(ids[:3]):
        assert got[mid]["score"] == pytest.approx(scores[i], abs=1e-6)
        assert got[mid]["weight"] == pytest.approx(w[i], abs=1e-6)
    # nearly uniform at JAM's scale: at most e^(1/√384) ≈ 1.05 between these three
    assert got[ids[0]]["weight"] / got[ids[2]]["weight"] == pytest.approx(math.exp(1 / math.sqrt(DIM)), abs=1e-6)
    # a larger scale sharpens it
    sharp = {r["memory_id"]: r["weight"] for r in rows(conn, "select * from pgmem.attention(%s, %s, 10)", (e(0), ids))}
    w10 = np.exp(10 * np.array([1.0, 0.5, 0.0]) - 10)
    assert [sharp[m] for m in ids[:3]] == pytest.approx(list(w10 / w10.sum()), abs=1e-6)


def test_search_attention_blends_the_weights_into_the_fused_score(conn):
    ids = [add(conn, f"coffee note {i}", at_cos(0, i + 1, c)) for i, c in enumerate((0.9, 0.8, 0.6, 0.3))]
    # search_attention reranks the candidates of the profile it is given (default: the tenant's, as
    # search's: issue 24)
    plain = rows(conn, "select id, score from pgmem.search('coffee', %s, 4)", (e(0),))
    blended = rows(conn, "select * from pgmem.search_attention('coffee', %s, 4, weight => 0.3)", (e(0),))
    att = {r["memory_id"]: r["weight"] for r in rows(conn, "select * from pgmem.attention(%s, %s)", (e(0), ids))}
    top = max(att.values())
    fused = {r["id"]: r["score"] for r in plain}
    for r in blended:
        assert r["fused"] == pytest.approx(fused[r["id"]], abs=1e-6)
        assert r["attention"] == pytest.approx(att[r["id"]] / top, abs=1e-6)
        assert r["score"] == pytest.approx(0.7 * fused[r["id"]] + 0.3 * att[r["id"]] / top, abs=1e-6)
    assert [r["rank"] for r in blended] == [1, 2, 3, 4]
    assert [r["score"] for r in blended] == sorted((r["score"] for r in blended), reverse=True)
    # weight 0: search's own order
    zero = rows(conn, "select id from pgmem.search_attention('coffee', %s, 4, weight => 0)", (e(0),))
    assert [r["id"] for r in zero] == [r["id"] for r in plain]
