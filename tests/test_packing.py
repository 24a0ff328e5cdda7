"""The context-packing module (MMR + knapsack), as plain Python (it also runs in PL/Python)."""
import itertools
import random

import numpy as np
import pytest

from pgmem.engine.packing import knapsack, mmr, pack, token_budget


def brute_force(values, weights, budget):
    best = 0.0
    for r in range(len(values) + 1):
        for combo in itertools.combinations(range(len(values)), r):
            if sum(weights[i] for i in combo) <= budget:
                v = sum(values[i] for i in combo)
                if v > best + 1e-12:
                    best = v
    return best


@pytest.mark.parametrize("seed", range(30))
def test_knapsack_is_optimal(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 10)
    values = [rng.uniform(-0.2, 1.0) for _ in range(n)]
    weights = [rng.randint(0, 40) for _ in range(n)]
    budget = rng.randint(0, 80)
    chosen = knapsack(values, weights, budget)
    assert sum(weights[i] for i in chosen) <= budget
    assert all(values[i] > 0 for i in chosen)
    assert sum(values[i] for i in chosen) == pytest.approx(brute_force(values, weights, budget))


def test_token_budget_matches_jam_defaults():
    assert token_budget() == 8192 - 512 - 1024 == 6656
    assert token_budget(conversation_tokens=7000) == 0


def test_mmr_prefers_diverse_items():
    e = np.eye(3)
    near_dup = e[0] * 0.99 + e[1] * 0.141
    rel = [0.9, 0.85, 0.6]
    order, scores = mmr(rel, [e[0], near_dup, e[2]], lam=0.5)
    # first: the most relevant; then the unrelated one beats the near-duplicate
    assert order == [0, 2, 1]
    assert scores[0] == pytest.approx(0.9)
    assert scores[2] == pytest.approx(0.5 * 0.6 - 0.5 * 0.0)
    assert scores[1] == pytest.approx(0.5 * 0.85 - 0.5 * float(near_dup @ e[0] / np.linalg.norm(near_dup)))
    # lambda 1 = pure relevance order
    assert mmr(rel, [e[0], near_dup, e[2]], lam=1.0)[0] == [0, 1, 2]


def test_pack_respects_budget_and_keeps_mmr_order():
    e = np.eye(4)
    sel, scores, values = pack([0.9, 0.8, 0.7, 0.6], list(e), [100, 50, 60, 10], [1, 1, 1, 1], budget=120)
    assert sum([100, 50, 60, 10][i] for i in sel) <= 120
    # relevance is min-max scaled to 1, 2/3, 1/3, 0; JAM's MMR: the first pick scores its
    # relevance, later ones λ·rel − (1−λ)·max_sim: 1, 1/3, 1/6, 0 (the last is never worth taking)
    assert list(values) == pytest.approx([1.0, 1 / 3, 1 / 6, 0.0])
    assert sel == [0]  # {0} (100 tokens, value 1) beats {1, 2} (110 tokens, 0.5)


def test_normalise():
    from pgmem.engine.packing import normalise

    assert list(normalise([0.5, 0.7, 0.6])) == pytest.approx([0.0, 1.0, 0.5])
    assert list(normalise([0.3, 0.3])) == [1.0, 1.0]


# ------------------------------------------------------------------ in the database
def _unit(i, j=None, w=0.8, dim=384):
    v = np.zeros(dim)
    v[i] = w if j is not None else 1.0
    if j is not None:
        v[j] = (1 - w * w) ** 0.5
    return v


def test_engine_module_is_stored_and_matches_the_file(conn):
    import hashlib

    from pgmem.migrate import engine_modules

    src = engine_modules()["packing"]
    row = conn.execute("select source, sha256 from pgmem.py_modules where name = 'packing'").fetchone()
    assert row == (src, hashlib.sha256(src.encode()).hexdigest())


def test_build_context_in_sql_matches_the_module(conn):
    """build_context = search candidates -> MMR -> knapsack, computed in PL/Python; the same
    arrays through the Python module give the same selection."""
    texts = ["peanut allergy is severe", "allergic to peanuts, carries an epipen", "peanuts cause a reaction",
             "flight to lisbon on friday", "prefers neovim over vs code", "the deploy failed on tuesday"]
    vecs = [_unit(0, 1, 0.95), _unit(0, 2, 0.93), _unit(0, 3, 0.9), _unit(4), _unit(5), _unit(6)]
    for t, v in zip(texts, vecs):
        conn.execute("select pgmem.remember(%s, embedding => %s, force => true, importance => 0.8)", (t, v))
    q = _unit(0, 7, 0.9)
    rows = conn.execute("""select pick, id, selected, score, mmr_score, token_count, cumulative_tokens
                             from pgmem.build_context('peanut allergy', %s, token_budget => 12, candidates => 6,
                                                      lambda => 0.5)""", (q,)).fetchall()
    selected = [r for r in rows if r[2]]
    assert sum(r[5] for r in selected) <= 12
    assert selected[-1][6] == sum(r[5] for r in selected)  # cumulative tokens
    assert [r[0] for r in selected] == list(range(1, len(selected) + 1))
    # recompute with the module from the same candidate arrays
    cand = conn.execute("""select h.id, h.score, m.token_count, m.importance, m.embedding
                             from pgmem.search('peanut allergy', %s, 6) h
                             join pgmem.memories m on m.id = h.id order by h.score desc, h.id""", (q,)).fetchall()
    as_np = lambda v: np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=float)  # noqa: E731
    order, scores, values = pack([c[1] for c in cand], [as_np(c[4]) for c in cand], [c[2] for c in cand],
                                 [c[3] for c in cand], 12, 0.5)
    assert [cand[i][0] for i in order] == [r[1] for r in selected]
    # diversity: the three peanut near-duplicates are not all taken when a budget allows others
    assert sum(1 for r in selected if r[1] <= 3) < 3 or len(selected) == 3


def test_build_context_with_no_candidate_is_empty(conn):
    # nothing stored, then nothing matching: an empty context, not a PL/Python error
    assert conn.execute("select * from pgmem.build_context('peanut allergy')").fetchall() == []
    conn.execute("select pgmem.remember('prefers neovim over vs code', force => true)")
    assert conn.execute("select * from pgmem.build_context('zanzibar xylophone')").fetchall() == []


def test_build_context_rejects_bad_input(conn):
    import psycopg

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="lambda must be between 0 and 1"):
        conn.execute("select * from pgmem.build_context('x', lambda => 1.5)")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="candidates must be between 1 and 500"):
        conn.execute("select * from pgmem.build_context('x', candidates => 0)")


@pytest.mark.parametrize("seed", range(30))
def test_knapsack_on_a_grid_keeps_the_budget_and_its_bound(seed):
    """Beyond `grid` tokens the weights are rounded up onto the grid (packing.py, GRID): the
    packing never exceeds the budget, and it is at least as good as the exact optimum of the
    budget minus n·budget/grid tokens (every set that fits that also fits after rounding)."""
    rng = random.Random(1000 + seed)
    n = rng.randint(1, 9)
    grid = rng.choice([8, 16, 64])
    budget = rng.randint(grid + 1, 5000)
    values = [rng.uniform(-0.2, 1.0) for _ in range(n)]
    weights = [rng.randint(0, budget // 2) for _ in range(n)]
    chosen = knapsack(values, weights, budget, grid=grid)
    assert sum(weights[i] for i in chosen) <= budget
    assert all(values[i] > 0 for i in chosen)
    slack = -(-n * budget // grid)
    got = sum(values[i] for i in chosen)
    assert got >= brute_force(values, weights, max(0, budget - slack)) - 1e-9
    assert got <= brute_force(values, weights, budget) + 1e-9


@pytest.mark.parametrize("budget", [150_000_000, 2**31 - 1])
def test_knapsack_memory_is_bounded_for_any_budget(budget):
    """Issue 14: a budget of 150,000,000 took 1.3 GB. With 500 candidates (build_context's cap)
    the table stays within n·GRID bits whatever the budget."""
    import tracemalloc

    tracemalloc.start()
    try:
        chosen = knapsack([1.0] * 500, [budget // 600] * 500, budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(chosen) == 500  # they all fit (500 · budget/600 < budget)
    assert peak < 4 * 2**20, peak
