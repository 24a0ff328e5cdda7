"""The clustering engine module (python/pgmem/engine/clustering.py) outside the database:
JAM's formulas recomputed by hand (jam-journalistic-agent-memory.md, Clustering Pipeline and
Liquid Memory Clustering)."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from pgmem.engine import clustering as cl


def test_assignment_confidence_by_hand():
    # JAM Stage 4.2: nearest centre by Euclidean distance, confidence = 1 / (1 + distance)
    centers = np.array([[0.0, 0.0], [3.0, 4.0]])
    X = np.array([[0.0, 1.0], [3.0, 1.0], [6.0, 8.0]])
    idx, dist, conf = cl.assign(X, centers)
    assert idx.tolist() == [0, 1, 1]      # (3,1): 3.16 to (0,0), 3.0 to (3,4)
    assert dist == pytest.approx([1.0, 3.0, 5.0])
    assert conf == pytest.approx([1 / 2, 1 / 4, 1 / 6])


def test_fit_uses_jams_parameters():
    km = cl._kmeans(5, seed=0)
    assert (km.batch_size, km.n_init, km.max_no_improvement, km.n_clusters) == (100, 3, 10, 5)
    rng = np.random.default_rng(0)
    blobs = np.vstack([rng.normal(loc=c, scale=0.05, size=(40, 4)) for c in np.eye(4) * 3])
    centers, counts = cl.fit(blobs, 4)
    # every true centre is found (each blob's mean is within 0.1 of one fitted centre)
    for c in np.eye(4) * 3:
        assert np.min(np.linalg.norm(centers - c, axis=1)) < 0.1
    assert counts.sum() > 0


def test_partial_fit_is_sklearns_partial_fit_resumed():
    # the stored (centres, counts) go on as MiniBatchKMeans.partial_fit would from where the
    # estimator stopped, mini-batch by mini-batch of 100 (reassignment off in both)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(650, 8))
    km = cl._kmeans(6, seed=0, reassignment_ratio=0.0).fit(X[:300])
    live = copy.deepcopy(km)
    for s in range(300, 650, 100):
        live.partial_fit(X[s:s + 100])
    centers, counts = cl.partial_fit(km.cluster_centers_, km._counts, [X[300:500], X[500:650]])
    assert np.abs(centers - live.cluster_centers_).max() < 1e-9
    assert counts == pytest.approx(live._counts)
    # each point moves its centre by 1/count: a centre seen n times moves by (x - c) / (n + 1)
    c0 = np.array([[0.0, 0.0], [10.0, 10.0]])
    c1, n1 = cl.partial_fit(c0, np.array([3.0, 5.0]), [np.array([[1.0, 1.0]])])
    assert c1[0] == pytest.approx([0.25, 0.25]) and c1[1] == pytest.approx([10.0, 10.0])
    assert n1 == pytest.approx([4.0, 5.0])


def test_affinity_weights_by_hand():
    # JAM, Affinity Matrix Computation: .4 co-access + .3 temporal + .3 semantic
    assert cl.affinity(0.5, 0.25, 0.8) == pytest.approx(0.4 * 0.5 + 0.3 * 0.25 + 0.3 * 0.8)
    # temporal proximity: 2^(-|dt| / half-life); co-access: Jaccard of the uses
    assert cl.temporal_proximity([0, 24, -48], 24) == pytest.approx([1.0, 0.5, 0.25])
    assert cl.co_access(2, 4, 3) == pytest.approx(2 / 5)
    assert cl.co_access(0, 0, 0) == 0.0


def test_time_kernel_equals_the_sum_over_members():
    rng = np.random.default_rng(5)
    times = rng.uniform(0, 500, size=200)
    times[10:20] = times[5]  # ties
    k = cl.TimeKernel(times, half_life_hours=24)
    q = np.concatenate([rng.uniform(-100, 600, size=300), times[:20]])
    brute = np.array([np.sum(np.exp2(-np.abs(t - times) / 24)) for t in q])
    assert k.sums(q) == pytest.approx(brute, rel=1e-9)
    # far apart in time: no overflow, nothing lost
    far = cl.TimeKernel([0.0, 1e7, 2e7], 1.0)
    assert far.sums(np.array([1e7])) == pytest.approx([1.0])
    assert cl.TimeKernel([], 24).sums(np.array([1.0])) == pytest.approx([0.0])


def test_mean_affinity_equals_the_affinity_matrix_averaged_over_members():
    rng = np.random.default_rng(7)
    n, d, k = 40, 6, 3
    E = rng.normal(size=(n, d))
    hours = rng.uniform(0, 100, size=n)
    members = rng.integers(0, k, size=n)
    co = np.zeros((n, n))
    for _ in range(30):
        a, b = rng.integers(0, n, size=2)
        if a != b:
            co[a, b] = co[b, a] = rng.uniform()
    A = cl.affinity_matrix(E, hours, co, 12.0)
    U = cl.unit_rows(E)
    sums = np.vstack([U[members == c].sum(0) for c in range(k)])
    sizes = np.array([(members == c).sum() for c in range(k)])
    kernels = [cl.TimeKernel(hours[members == c], 12.0) for c in range(k)]
    co_sums = np.column_stack([co[:, members == c].sum(1) for c in range(k)])
    got = cl.mean_affinity(U, hours, members, sums, sizes, kernels, co_sums)
    for i in range(n):
        for c in range(k):
            others = [j for j in range(n) if members[j] == c and j != i]
            want = np.mean([A[i, j] for j in others]) if others else 0.0
            assert got[i, c] == pytest.approx(want, abs=1e-9)


def test_flow_moves_to_the_strongest_pull_above_the_flow_rate():
    # pull = mean affinity x energy; move when the strongest pull is another cluster's and > rate
    mean_aff = np.array([[0.5, 0.6], [0.5, 0.6], [0.5, 0.2], [0.1, 0.12]])
    energy = np.array([1.0, 0.9])
    target, pull = cl.flow(mean_aff, energy, np.array([0, 0, 1, 0]), flow_rate=0.15)
    # pulls: [.5, .54], [.5, .54], [.5, .18], [.1, .108]
    assert target.tolist() == [1, 1, 0, -1]  # the last: strongest .108 < .15 stays
    assert pull == pytest.approx([0.54, 0.54, 0.5, 0.108])
    target, _ = cl.flow(mean_aff, energy, np.array([1, 1, 0, 1]), flow_rate=0.15)
    assert target.tolist() == [-1, -1, -1, -1]  # already where they are pulled hardest (or below the rate)


def test_energy_step_by_hand():
    # JAM, Energy Dynamics: min(1, e + .05 x accesses), then x .99 per step
    assert cl.energy_step([0.5, 0.98, 0.2], [3, 2, 0], steps=1) == pytest.approx([0.65 * 0.99, 1.0 * 0.99, 0.2 * 0.99])
    assert cl.energy_step([0.5], [0], steps=3) == pytest.approx([0.5 * 0.99 ** 3])


def test_vector_bytes_round_trip():
    import struct

    v = [0.25, -1.5, 3.0]
    blob = struct.pack(">hh", 3, 0) + struct.pack(">3f", *v)
    assert cl.from_vector_bytes([blob, blob], 3).tolist() == [v, v]
    assert cl.to_vector_text([0.5, 1.0]) == "[0.5,1.0]"
    assert math.isclose(cl.unit_rows([[3.0, 4.0]])[0][0], 0.6)
