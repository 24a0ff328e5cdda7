"""Concept clusters and liquid clusters (jam-journalistic-agent-memory.md, Clustering
Pipeline and Liquid Memory Clustering).

Runs inside PostgreSQL (PL/Python, Debian's python3 with python3-numpy and python3-sklearn)
and in the venv: numpy, and scikit-learn for the k-means itself (imported where it is used).
Nothing here touches the database: sql/470_cluster.sql feeds it arrays and writes the
results back.

Choices where the design is vague are written next to the code (search for "Choice").
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from pgmem.engine.guard import cancellable, tick

# jam-journalistic-agent-memory.md, Stage 4.1: MiniBatchKMeans(batch_size=100, n_init=3,
# max_no_improvement=10). (k itself, JAM's Adaptive Clustering, is pgmem.cluster_k in SQL.)
BATCH_SIZE = 100
N_INIT = 3
MAX_NO_IMPROVEMENT = 10
# Liquid Memory Clustering, Affinity Matrix Computation: .4 co-access + .3 temporal + .3 semantic.
W_CO_ACCESS, W_TEMPORAL, W_SEMANTIC = 0.4, 0.3, 0.3
# Energy Dynamics: energy = min(1, energy + .05 * access_count); energy *= .99 per step;
# clusters merge when the cosine of their centroids exceeds .85.
ENERGY_PER_ACCESS = 0.05
ENERGY_DECAY = 0.99
MERGE_COSINE = 0.85


def unit_rows(X) -> np.ndarray:
    """Rows scaled to length 1 (zero rows stay zero)."""
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)


def from_vector_bytes(blobs, dim: int) -> np.ndarray:
    """pgvector's binary form (vector_send: int16 dim, int16 unused, dim big-endian float4)
    of each row, as one float64 matrix."""
    out = np.empty((len(blobs), dim), dtype=np.float64)
    for i, b in enumerate(blobs):
        out[i] = np.frombuffer(b, dtype=">f4", count=dim, offset=4)
    return out


def to_vector_text(v) -> str:
    """pgvector's text form of a vector."""
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


# ---------------------------------------------------------------- concept clusters (k-means)

def _kmeans(k: int, seed: int, reassignment_ratio: float = 0.01, init="k-means++", n_init: int = N_INIT):
    from sklearn.cluster import MiniBatchKMeans

    return MiniBatchKMeans(n_clusters=k, batch_size=BATCH_SIZE, n_init=n_init, max_no_improvement=MAX_NO_IMPROVEMENT,
                           random_state=seed, reassignment_ratio=reassignment_ratio, init=init)


def fit(X, k: int, seed: int = 0):
    """JAM Stage 4.1, initial fit: MiniBatchKMeans(k, batch_size 100, n_init 3,
    max_no_improvement 10) on X. Returns (centers, counts): counts are the weights k-means
    has seen per centre, which partial_fit goes on from."""
    X = np.asarray(X, dtype=np.float64)
    # (under guard.cancellable(): a cancel or timeout ends it between two of its mini-batch steps)
    with warnings.catch_warnings(), cancellable():  # (duplicate points: fewer distinct clusters than k) -> not the server log
        warnings.simplefilter("ignore")
        km = _kmeans(k, seed).fit(X)
    return km.cluster_centers_.copy(), np.asarray(km._counts, dtype=np.float64).copy()


def partial_fit(centers, counts, batches):
    """JAM Stage 4.1, "Partial fit for new data": MiniBatchKMeans.partial_fit over each batch
    in mini-batches of 100 rows, resumed from stored centres and counts.

    This is scikit-learn's mini-batch step written out in numpy (tests/test_clusters_engine.py
    holds it equal to sklearn's own partial_fit): each row goes to its nearest centre, and a
    centre that received rows becomes the weighted mean of what it had seen and the new rows,
    c <- (c * n + sum(x)) / (n + m), n <- n + m. Written out because sklearn's partial_fit
    spends ~50 ms per call on checks and thread-pool set-up, 10,000 calls for a million rows.
    Choice: no random reassignment of near-empty centres (sklearn's reassignment_ratio) here, so
    that a stored cluster (which has members, a label and an energy) never jumps to a random
    point; it runs in the initial fit only."""
    C = np.array(centers, dtype=np.float64)
    n = np.array(counts, dtype=np.float64)
    k = C.shape[0]
    for X in batches:
        X = np.asarray(X, dtype=np.float64)
        for s in range(0, X.shape[0], BATCH_SIZE):
            tick()
            B = X[s:s + BATCH_SIZE]
            if B.shape[0] == 0:
                continue
            d2 = (C * C).sum(1)[None, :] - 2.0 * B @ C.T
            labels = np.argmin(d2, axis=1)
            onehot = np.zeros((B.shape[0], k))
            onehot[np.arange(B.shape[0]), labels] = 1.0
            m = onehot.sum(0)
            sums = onehot.T @ B
            hit = m > 0
            C[hit] = (C[hit] * n[hit, None] + sums[hit]) / (n[hit] + m[hit])[:, None]
            n += m
    return C, n


def assign(X, centers):
    """JAM Stage 4.2, concept assignment: the nearest centre by Euclidean distance, with
    confidence = 1 / (1 + distance). Returns (index, distance, confidence) arrays."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(centers, dtype=np.float64)
    d2 = (X * X).sum(1)[:, None] - 2.0 * X @ C.T + (C * C).sum(1)[None, :]
    idx = np.argmin(d2, axis=1)
    dist = np.sqrt(np.maximum(d2[np.arange(X.shape[0]), idx], 0.0))
    return idx, dist, 1.0 / (1.0 + dist)


# ---------------------------------------------------------------- liquid clusters

def temporal_proximity(dt_hours, half_life_hours: float):
    """Time-based closeness of two memories |dt| hours apart. Choice (JAM names the signal
    only): 2^(-|dt| / half_life), 1 at the same moment, 1/2 one half-life apart; the
    half-life is the setting cluster_temporal_half_life_hours (default 24)."""
    return np.exp2(-np.abs(np.asarray(dt_hours, dtype=np.float64)) / float(half_life_hours))


def co_access(together, count_a, count_b):
    """How often two memories are used together. Choice (JAM names the signal only): the
    Jaccard ratio of their uses, together / (uses of a + uses of b - together), from the
    co_access links that pgmem.touch() counts and the memories' access counts; in [0, 1]."""
    together = np.asarray(together, dtype=np.float64)
    union = np.asarray(count_a, dtype=np.float64) + np.asarray(count_b, dtype=np.float64) - together
    return np.clip(np.divide(together, union, out=np.zeros_like(together), where=union > 0), 0.0, 1.0)


def affinity(co, temporal, semantic):
    """JAM, Affinity Matrix Computation: .4 co-access + .3 temporal proximity + .3 semantic
    similarity (semantic = the cosine of the two embeddings)."""
    return W_CO_ACCESS * np.asarray(co) + W_TEMPORAL * np.asarray(temporal) + W_SEMANTIC * np.asarray(semantic)


def affinity_matrix(embeddings, hours, co, half_life_hours: float):
    """The full n x n affinity matrix (the design's literal form, O(n^2)): the reference the
    tests hold the job's per-cluster sums to. ``co`` is the n x n co-access matrix."""
    U = unit_rows(embeddings)
    t = np.asarray(hours, dtype=np.float64)
    return affinity(np.asarray(co, dtype=np.float64), temporal_proximity(t[:, None] - t[None, :], half_life_hours), U @ U.T)


class TimeKernel:
    """Σ_j 2^(-|t - t_j| / h) over one cluster's member times t_j, for any t, without
    visiting every member: with the times sorted, L_j = Σ_{i<=j} w(t_j - t_i) and
    R_j = Σ_{i>=j} w(t_i - t_j) follow from one pass each (L_j = 1 + w(t_j - t_{j-1}) L_{j-1}),
    and the sum at t is w(t - t_p) L_p + w(t_{p+1} - t) R_{p+1} where t_p <= t < t_{p+1}.
    Exact, and never exponentiates a large number (every factor is <= 1)."""

    def __init__(self, hours, half_life_hours: float):
        self.lam = math.log(2.0) / float(half_life_hours)
        t = np.sort(np.asarray(hours, dtype=np.float64))
        self.t = t
        m = t.shape[0]
        L = np.ones(m)
        R = np.ones(m)
        if m > 1:
            step = np.exp(-self.lam * np.diff(t)).tolist()
            Ll, Rl = [1.0] * m, [1.0] * m
            for j in range(1, m):
                Ll[j] = 1.0 + step[j - 1] * Ll[j - 1]
            for j in range(m - 2, -1, -1):
                Rl[j] = 1.0 + step[j] * Rl[j + 1]
            L, R = np.asarray(Ll), np.asarray(Rl)
        self.L, self.R = L, R

    def sums(self, hours) -> np.ndarray:
        q = np.asarray(hours, dtype=np.float64)
        m = self.t.shape[0]
        if m == 0:
            return np.zeros(q.shape[0])
        p = np.searchsorted(self.t, q, side="right")  # members with t_j <= q are [0, p)
        left = np.zeros(q.shape[0])
        has_left = p > 0
        i = p[has_left] - 1
        left[has_left] = np.exp(-self.lam * (q[has_left] - self.t[i])) * self.L[i]
        right = np.zeros(q.shape[0])
        has_right = p < m
        j = p[has_right]
        right[has_right] = np.exp(-self.lam * (self.t[j] - q[has_right])) * self.R[j]
        return left + right


def mean_affinity(U, hours, current, vec_sums, sizes, kernels, co_sums):
    """Mean affinity of each memory to the members of each cluster (JAM, Gradient Flow:
    "avg_affinity_to_cluster_members"), a memory's own row left out of its own cluster.

    U: the memories' unit embeddings (n x d); hours: their times; current: the index of
    each one's cluster (-1 for none); vec_sums: per cluster, the sum of its members' unit
    embeddings (k x d), so that the mean cosine is u . sum / size; sizes: members per
    cluster; kernels: a TimeKernel per cluster; co_sums: n x k sums of co-access scores to
    each cluster's members. Where a cluster has no member but the memory itself, the mean
    is 0 (nothing to be pulled by)."""
    U = np.asarray(U, dtype=np.float64)
    n, k = U.shape[0], len(sizes)
    own = np.zeros((n, k))
    cur = np.asarray(current)
    has = cur >= 0
    own[np.nonzero(has)[0], cur[has]] = 1.0
    sem = U @ np.asarray(vec_sums, dtype=np.float64).T - own * (U * U).sum(1)[:, None]
    tem = np.column_stack([kern.sums(hours) for kern in kernels]) - own if k else np.zeros((n, 0))
    den = np.asarray(sizes, dtype=np.float64)[None, :] - own
    total = affinity(np.asarray(co_sums, dtype=np.float64), tem, sem)
    return np.divide(total, den, out=np.zeros((n, k)), where=den > 0)


def flow(mean_aff, energy, current, flow_rate: float):
    """JAM, Gradient Flow Dynamics: pull = mean affinity to a cluster's members x the
    cluster's energy; a memory flows to its strongest pull when that exceeds the flow rate.
    Returns (target, pull): target[i] is the cluster index memory i moves to, or -1 if it
    stays (its strongest pull is its own cluster, or not above the flow rate); pull[i] is
    its strongest pull. Ties go to the lower index. Choice: every memory of a batch is
    weighed against the membership at the start of the batch (the design's loop would let
    earlier moves of the same pass change later pulls: order-dependent)."""
    pulls = np.asarray(mean_aff, dtype=np.float64) * np.asarray(energy, dtype=np.float64)[None, :]
    n = pulls.shape[0]
    if pulls.shape[1] == 0:
        return np.full(n, -1), np.zeros(n)
    best = np.argmax(pulls, axis=1)
    strongest = pulls[np.arange(n), best]
    moves = (strongest > flow_rate) & (best != np.asarray(current))
    return np.where(moves, best, -1), strongest


def energy_step(energy, accesses, steps: int = 1):
    """JAM, Energy Dynamics: energy = min(1, energy + .05 x accesses), then x .99 per step."""
    e = np.minimum(1.0, np.asarray(energy, dtype=np.float64) + ENERGY_PER_ACCESS * np.asarray(accesses, dtype=np.float64))
    return e * ENERGY_DECAY ** int(steps)
