"""The surprise gate's engine (python/pgmem/engine/gate.py) against a plain reference.

decide() computes what an item finds among the earlier items of its batch with matrix
products (cosines from one Gram matrix, shared tokens from one sparse product) instead of one
call per pair (issue 23). These tests hold it to the straightforward pair-by-pair rules of
engram.md (Surprise Detection), written out below, on random batches with duplicates,
near-duplicates, scopes, sessions and items without embeddings. No database needed.
"""
from __future__ import annotations

import builtins
import math
import random

import numpy as np
import pytest

from pgmem.engine import gate

W = {"semantic": 0.6, "keyword": 0.3, "rarity": 0.1}
W0 = {"keyword": 0.8, "rarity": 0.2}


def _cos(a, b) -> float:
    return gate.cosine_similarity(a, b)


def reference(items: list[dict], tokens: dict, threshold: float = 0.15, cap: int = 1024) -> list[tuple]:
    """Engram's gate, one item after the other, every comparison written out."""
    kept: list[int] = []
    out = []
    for i, it in enumerate(items):
        if it["replay_id"] is not None:
            out.append(("replayed", ("id", it["replay_id"])))
            continue
        prior_key = [j for j in kept if it["event_key"] is not None and items[j]["event_key"] == it["event_key"]]
        if prior_key:
            out.append(("replayed", ("ord", prior_key[-1])))
            continue
        mine = [j for j in kept if items[j]["scope"] == it["scope"]]
        dup = ("id", it["dup_id"]) if it["dup_id"] is not None else next(
            (("ord", j) for j in mine if items[j]["hash"] == it["hash"]), None)
        if dup is not None and not it["force"]:
            out.append(("duplicate", dup))
            continue
        if dup is not None:
            kept.append(i)
            out.append(("stored", dup, 0.0))
            continue
        anym = it["any"] or bool(mine)
        ti = set(it["tokens"])
        near, near_sim, sem = None, None, None
        if it["vector"] is not None:
            if anym:
                if it["sem"]:
                    near, near_sim = ("id", it["sem"][0][0]), 1 - it["sem"][0][1]
                for j in mine:
                    if items[j]["vector"] is not None:
                        s = _cos(it["vector"], items[j]["vector"])
                        if near_sim is None or s > near_sim:
                            near, near_sim = ("ord", j), s
                sem = 1.0 if near is None else 1 - max(0.0, min(1.0, near_sim))
            else:
                sem = 1.0
        if anym:
            best, ref = None, None
            cands = ([c[0] for c in it["sem"]] if it["vector"] is not None else []) + it["kw_ids"]
            for cid in sorted(set(cands)):
                tc = set(tokens[cid])
                s = len(ti & tc) / len(ti | tc) if (ti or tc) else 0.0
                if best is None or s > best:
                    best, ref = s, ("id", cid)
            for j in mine:
                tj = set(items[j]["tokens"])
                s = len(ti & tj) / len(ti | tj) if (ti or tj) else 0.0
                if best is None or s > best:
                    best, ref = s, ("ord", j)
            kw = 1 - (best or 0.0)
            if near is None:
                near, near_sim = ref, best
        else:
            kw = 1.0
        count = min(cap, it["cat_count"] + sum(1 for j in mine if items[j]["category"] == it["category"]))
        rar = 1 / math.log2(2 + count)
        if it["vector"] is not None:
            s = W["semantic"] * sem + W["keyword"] * kw + W["rarity"] * rar
        else:
            s = W0["keyword"] * kw + W0["rarity"] * rar
        s = max(0.0, min(1.0, s))
        if s < threshold and not it["force"]:
            near_toks = set(items[near[1]]["tokens"]) if near and near[0] == "ord" else set(tokens.get(near[1], ())) if near else set()
            if not [t for t in it["tokens"] if any(c.isdigit() for c in t) and t not in near_toks]:
                out.append(("rejected", near, s))
                continue
        kept.append(i)
        out.append(("stored", near, s))
    return out


def _as_tuple(d: gate.Decision) -> tuple:
    ref = lambda r: None if r is None else (("id", r.id) if r.id is not None else ("ord", r.ord))  # noqa: E731
    if d.decision in ("replayed", "duplicate"):
        return (d.decision, ref(d.memory))
    if d.decision == "stored" and d.forced and d.surprise == 0.0 and d.memory is not None:
        return ("stored", ref(d.memory), 0.0)
    return (d.decision, ref(d.nearest), d.surprise)


def random_batch(rng: random.Random, n: int) -> tuple[list[dict], dict]:
    nrng = np.random.default_rng(rng.randrange(1 << 30))
    words = [f"w{k}" for k in range(40)] + ["the", "a", "of", "2024", "7pm"]
    base = nrng.standard_normal((6, 16)).astype(np.float32)
    tokens = {100 + k: sorted(set(rng.choices(words, k=rng.randint(0, 8)))) for k in range(30)}
    items = []
    for i in range(n):
        scope = rng.choice(["", "", "ola"])
        if i and rng.random() < 0.3:  # a near-repeat of an earlier item
            src = items[rng.randrange(i)]
            toks = sorted(set(src["tokens"]) | set(rng.choices(words, k=rng.randint(0, 1))))
            vec = None if src["vector"] is None else (src["vector"] + 0.05 * nrng.standard_normal(16)).astype(np.float32)
            h = src["hash"] if rng.random() < 0.3 else f"h{i}"
        else:
            toks = sorted(set(rng.choices(words, k=rng.randint(0, 9))))
            vec = None if rng.random() < 0.2 else (base[rng.randrange(6)] + 0.6 * nrng.standard_normal(16)).astype(np.float32)
            h = f"h{i}"
        sem = sorted(((100 + rng.randrange(30), rng.uniform(0.02, 0.9)) for _ in range(rng.randint(0, 3))),
                     key=lambda x: (x[1], x[0])) if vec is not None else []
        sem = list({c[0]: c for c in sem}.values())
        sem.sort(key=lambda x: (x[1], x[0]))
        items.append(dict(scope=scope, hash=h, event_key=rng.choice([None, None, None, "k1", "k2"]),
                          category=rng.choice(["fact", "episode"]), force=rng.random() < 0.1, vector=vec, tokens=toks,
                          session=rng.choice([None, "s1", "s2"]), created_at=float(rng.randrange(5)),
                          replay_id=1 if rng.random() < 0.03 else None, dup_id=2 if rng.random() < 0.05 else None,
                          any=rng.random() < 0.7, sem=sem, kw_ids=rng.sample(range(100, 130), rng.randint(0, 4)),
                          cat_count=rng.randrange(5), prev_id=None, prev_seq=None, prev_at=None))
    return items, tokens


@pytest.mark.parametrize("seed", range(40))
def test_decide_matches_the_pair_by_pair_reference(seed):
    rng = random.Random(seed)
    items, tokens = random_batch(rng, rng.randint(1, 60))
    got = gate.decide(items, tokens=tokens, threshold=0.15, weights=W, weights_no_embedding=W0, rarity_cap=1024)
    want = reference(items, tokens)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        gt = _as_tuple(g)
        assert gt[:2] == w[:2], (k, gt, w)
        if len(w) > 2:
            assert gt[2] == pytest.approx(w[2], abs=1e-6), (k, gt, w)


def test_decide_without_scipy_gives_the_same(monkeypatch):
    """Shared tokens fall back to a dense product when scipy is missing."""
    rng = random.Random(7)
    items, tokens = random_batch(rng, 50)
    with_scipy = [_as_tuple(d) for d in gate.decide(items, tokens=tokens, threshold=0.15, weights=W,
                                                     weights_no_embedding=W0, rarity_cap=1024)]
    real_import = builtins.__import__

    def no_scipy(name, *a, **kw):
        if name == "scipy" or name.startswith("scipy."):
            raise ImportError(name)
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    without = [_as_tuple(d) for d in gate.decide(items, tokens=tokens, threshold=0.15, weights=W,
                                                  weights_no_embedding=W0, rarity_cap=1024)]
    assert with_scipy == without


def test_nearest_queued_takes_the_nearest_of_each_scope():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((50, 16)).astype(np.float32)
    q_scope = ["" if k % 3 else "ola" for k in range(50)]
    items = [q[4] + 0.01, q[10] * 2, None, q[3]]         # item 3 is in scope ola
    scopes = ["", "", "", "ola"]
    pairs = gate.nearest_queued(scopes, items, list(range(1000, 1050)), q_scope, list(q), 2)
    by_item: dict = {}
    for i, m in pairs:
        by_item.setdefault(i, []).append(m)
    assert 2 not in by_item                                 # no vector: nothing to compare
    assert 1004 in by_item[0] and 1010 in by_item[1] and 1003 in by_item[3]
    assert all(q_scope[m - 1000] == scopes[i] for i, ms in by_item.items() for m in ms)
    assert all(len(ms) <= 4 for ms in by_item.values())     # k + 2 (a margin the database re-ranks)


def test_ascii_tokens_are_the_database_tokens(conn):
    """gate.py tokenizes ASCII texts itself (the database sends them as they are): the same
    tokens as pgmem.tokens, on texts with every ASCII character."""
    rng = random.Random(11)
    alphabet = "".join(chr(c) for c in range(1, 128))
    texts = ["Lunch menu: kale, salad, soup, bread.", "Release 4.2 shipped on Friday!!", "", "   ", "A_b-C d\te\nF",
             "MIXED case WORDS and 7PM and 10:30"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))) for _ in range(200)]
    got = conn.execute("select t, pgmem.tokens(t) from unnest(%s::text[]) t", (texts,)).fetchall()
    for text, want in got:
        assert gate.ascii_tokens(text) == sorted(want), repr(text)
