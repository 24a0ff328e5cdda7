"""Context packing (jam-journalistic-agent-memory.md, Context Building Pipeline):
Maximal Marginal Relevance for diversity, then 0/1 knapsack under a token budget.

Runs inside PostgreSQL (PL/Python) and in the venv: standard library + numpy only.
"""
from __future__ import annotations

import numpy as np


def token_budget(context_window: int = 8192, reserve_system: int = 512, reserve_output: int = 1024,
                 conversation_tokens: int = 0) -> int:
    """JAM Stage 3.1: available = window - system reserve - output reserve - current chat."""
    return max(0, int(context_window) - int(reserve_system) - int(reserve_output) - int(conversation_tokens))


def mmr(relevance, embeddings, lam: float = 0.5):
    """JAM Stage 3.2, greedy MMR: repeatedly take the candidate maximising
    λ·relevance − (1−λ)·max cosine similarity to those already taken.
    Returns (order, mmr_scores): candidate indexes in selection order and, per candidate,
    its MMR score at the moment it was taken. Embeddings may contain None rows (no vector):
    such a candidate has similarity 0 to everything."""
    rel = np.asarray(relevance, dtype=np.float64)
    n = rel.shape[0]
    if n == 0:
        return [], np.zeros(0)
    dim = next((len(e) for e in embeddings if e is not None), 1)
    E = np.zeros((n, dim))
    for i, e in enumerate(embeddings):
        if e is not None:
            v = np.asarray(e, dtype=np.float64)
            norm = np.linalg.norm(v)
            if norm > 0:
                E[i] = v / norm
    sims = E @ E.T
    chosen: list[int] = []
    scores = np.zeros(n)
    max_sim = np.full(n, -np.inf)
    remaining = set(range(n))
    while remaining:
        idx = np.array(sorted(remaining))
        penalty = np.where(np.isfinite(max_sim[idx]), max_sim[idx], 0.0) if chosen else np.zeros(len(idx))
        vals = lam * rel[idx] - (1.0 - lam) * penalty if chosen else rel[idx]
        best = int(idx[int(np.argmax(vals))])  # ties: lowest index (argmax takes the first)
        scores[best] = float(np.max(vals))
        chosen.append(best)
        remaining.discard(best)
        max_sim = np.maximum(max_sim, sims[best])
    return chosen, scores


# The knapsack's table has one cell per token of the budget and item: budgets beyond GRID
# tokens are packed on a grid of GRID cells instead (issue 14: a budget of 150,000,000 took
# 1.3 GB). Memory is then at most n · (GRID + 1) bits (0.5 MiB for build_context's 500
# candidates) and time O(n · GRID), whatever the budget.
GRID = 8192


def knapsack(values, weights, budget: int, grid: int = GRID):
    """JAM Stage 3.3, 0/1 knapsack by dynamic programming: maximise Σ value·x subject to
    Σ weight·x ≤ budget. Items with value ≤ 0 or weight > budget are never taken. Returns the
    chosen indexes in ascending order.

    Exact when budget ≤ grid: O(n·budget) time and bits of memory. Beyond that the weights are
    scaled to `grid` cells and rounded up (w' = ceil(w·grid/budget)), so memory and time stay
    O(n·grid) for any budget. Rounding up only makes items heavier: every set that fits the
    grid fits the budget (the packing never exceeds it), and the result is optimal among the
    sets whose weights, each rounded up by less than budget/grid tokens, fit; compared with the
    exact optimum it can only lose what that rounding (< n·budget/grid tokens in all) pushes out.
    Items left out that still fit the real budget are then added, best value per token first."""
    v = [float(x) for x in values]
    w = [max(0, int(x)) for x in weights]
    budget = max(0, int(budget))
    # every item worth taking fits: that is the optimum, no table needed (the usual case: 50
    # memories of a few dozen tokens under a budget of thousands)
    worth = [i for i in range(len(v)) if v[i] > 0]
    if sum(w[i] for i in worth) <= budget:
        return worth
    if budget > grid > 0:
        chosen = knapsack(v, [-(-x * grid // budget) if x <= budget else grid + 1 for x in w], grid, grid)
        room = budget - sum(w[i] for i in chosen)
        for i in sorted(set(range(len(v))) - set(chosen), key=lambda i: (-v[i] / max(w[i], 1), i)):
            if v[i] > 0 and w[i] <= room:
                chosen.append(i)
                room -= w[i]
        return sorted(chosen)
    n = len(v)
    dp = np.zeros(budget + 1)
    take = []  # per item, which capacities take it: budget + 1 bits, packed
    for i in range(n):
        row = np.zeros(budget + 1, dtype=bool)
        if v[i] > 0 and w[i] <= budget:
            if w[i] == 0:
                dp += v[i]
                row[:] = True
            else:
                cand = dp[: budget + 1 - w[i]] + v[i]
                better = cand > dp[w[i]:] + 1e-12
                new = dp.copy()
                new[w[i]:][better] = cand[better]
                row[w[i]:] = better
                dp = new
        take.append(np.packbits(row))
    chosen, cap = [], budget
    for i in range(n - 1, -1, -1):
        if (take[i][cap >> 3] >> (7 - (cap & 7))) & 1:
            chosen.append(i)
            cap -= w[i]
    return sorted(chosen)


def normalise(relevance):
    """Min-max scale to [0, 1] (all equal -> all 1). Fused scores of the top candidates differ
    by hundredths while cosine similarities between memories span [0, 1]: without this, MMR's
    diversity term would decide the order alone (bench/EVAL.md measured NDCG@10 .42 -> .57)."""
    r = np.asarray(relevance, dtype=np.float64)
    if r.size == 0:
        return r
    lo, hi = float(r.min()), float(r.max())
    return np.ones_like(r) if hi - lo < 1e-12 else (r - lo) / (hi - lo)


def pack(relevance, embeddings, tokens, importance, budget: int, lam: float = 0.5, min_weight: float = 0.05):
    """MMR over min-max normalised relevance, then knapsack with value = mmr_score ×
    importance weight (JAM Stage 3.3: value_i = mmr_score_i · importance_weight_i; the
    importance weight is the memory's importance, floored at min_weight so that an
    unimportant but relevant memory still counts). Returns (selected in MMR order,
    mmr_scores, values)."""
    order, scores = mmr(normalise(relevance), embeddings, lam)
    imp = np.maximum(np.asarray(importance, dtype=np.float64), min_weight)
    values = scores * imp
    chosen = set(knapsack(values, tokens, budget))
    return [i for i in order if i in chosen], scores, values
