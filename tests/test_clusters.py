"""Concept clusters and liquid clusters in a real database (jam-journalistic-agent-memory.md,
Clustering Pipeline and Liquid Memory Clustering; issue 17): the `cluster` job, write-time
assignment, energy, flow and merge rules recomputed by hand."""
from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pytest

from conftest import DIM, at_cos, e
from sqlhelpers import rows, scalar

WORDS = {0: "coffee espresso beans", 1: "hiking mountain trail", 2: "python code bug"}


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return (v / np.linalg.norm(v)).astype(np.float32)


def noisy(rng, axis: int, noise: float = 0.05):
    v = np.zeros(DIM)
    v[axis] = 1.0
    return unit(v + rng.normal(scale=noise, size=DIM) / np.sqrt(DIM))


def add(conn, content, emb=None, **kw):
    cols = ["content"] + (["embedding"] if emb is not None else []) + list(kw)
    vals = [content] + ([emb] if emb is not None else []) + list(kw.values())
    return scalar(conn, f"insert into pgmem.memories ({', '.join(cols)}) values ({', '.join(['%s'] * len(vals))}) returning id",
                  vals)


def run_cluster(conn, **params):
    conn.execute("call pgmem.run_job('cluster', %s)", (json.dumps(params, default=str),))
    r = rows(conn, "select * from pgmem.job_runs where job = 'cluster' order by id desc limit 1")[0]
    assert r["status"] == "ok", r
    return r


def three_groups(conn, rng, per_group: int = 10, days_apart: int = 10):
    """Three tight groups of memories along axes 0, 1, 2, each group on its own day."""
    base = scalar(conn, "select now() - interval '60 days'")
    ids = {}
    for axis in (0, 1, 2):
        ids[axis] = [add(conn, f"{WORDS[axis]} note {i}", noisy(rng, axis),
                         happened_at=base + timedelta(days=days_apart * axis, minutes=i)) for i in range(per_group)]
    return ids


def centroid(conn, cid):
    return np.array(scalar(conn, "select centroid::real[] from pgmem.clusters where id = %s", (cid,)), dtype=np.float64)


def vec(conn, mid):
    return np.array(scalar(conn, "select embedding::real[] from pgmem.memories where id = %s", (mid,)), dtype=np.float64)


# ------------------------------------------------------------------ k, fit, assignment

def test_cluster_k_is_jams_adaptive_formula(conn):
    # JAM, Adaptive Clustering: min(max(8, n // 10), 64); never more clusters than memories
    for n in (0, 1, 5, 8, 9, 50, 79, 80, 81, 99, 100, 101, 500, 639, 640, 641, 10_000, 1_000_000):
        want = 0 if n == 0 else min(min(max(8, n // 10), 64), n)
        assert scalar(conn, "select pgmem.cluster_k(%s)", (n,)) == want, n
        # JAM's Clustering Parameters: a fixed 50 (setting cluster_k)
        assert scalar(conn, "select pgmem.cluster_k(%s, 50)", (n,)) == (0 if n == 0 else min(50, n)), n


def test_job_finds_the_groups_and_assigns_every_memory(conn):
    rng = np.random.default_rng(1)
    ids = three_groups(conn, rng)
    first = rows(conn, "select pgmem.cluster_k(count(*)) k from pgmem.memories")[0]["k"]
    assert first == 8  # 30 memories: max(8, 3)
    run = run_cluster(conn)
    runs = rows(conn, "select details from pgmem.job_runs where job = 'cluster' and status = 'ok' order by id")
    assert runs[0]["details"]["tenants"]["acme"]["phase"] == "fit" and runs[0]["details"]["tenants"]["acme"]["k"] == 8
    # 8 k-means clusters over 3 tight groups: the clusters inside one group have centroids at
    # cosine > .85 and merge (JAM, Energy Dynamics), leaving one cluster per group
    assert run["details"]["tenants"]["acme"]["merged"] == 5
    active = rows(conn, "select * from pgmem.clusters where state = 'active' order by id")
    assert len(active) == 3
    assert scalar(conn, "select count(*) from pgmem.clusters where state = 'merged' and merged_into_cluster is not null") == 5
    by_cluster = {}
    for axis, mids in ids.items():
        cids = {scalar(conn, "select cluster_id from pgmem.memories where id = %s", (m,)) for m in mids}
        assert len(cids) == 1, (axis, cids)
        by_cluster[axis] = cids.pop()
    assert len(set(by_cluster.values())) == 3
    for axis, cid in by_cluster.items():
        c = rows(conn, "select * from pgmem.clusters where id = %s", (cid,))[0]
        assert c["size"] == 10 and c["state"] == "active"
        assert c["label"] == " · ".join(sorted(WORDS[axis].split())), c  # each word in every member, unique to it
        assert set(c["top_terms"][:3]) == set(WORDS[axis].split())
        # confidence by hand: 1 / (1 + Euclidean distance to the centroid) (JAM Stage 4.2)
        cen = centroid(conn, cid)
        for m in ids[axis]:
            conf = scalar(conn, "select confidence from pgmem.cluster_members where memory_id = %s", (m,))
            assert conf == pytest.approx(1 / (1 + np.linalg.norm(vec(conn, m) - cen)), abs=1e-5)


def test_every_cluster_change_is_in_history(conn):
    rng = np.random.default_rng(2)
    ids = three_groups(conn, rng, per_group=5)
    run_cluster(conn)
    m = ids[1][0]
    h = rows(conn, "select op, before->>'cluster_id' b, after->>'cluster_id' a, details from pgmem.history "
                   "where memory_id = %s order by id", (m,))
    assert h[0]["op"] == "add" and h[0]["a"] is None
    changes = h[1:]
    assert changes and all(x["op"] == "update" and x["details"]["job"] == "cluster" for x in changes)
    assert changes[0]["b"] is None and changes[0]["details"]["reason"] == "assign"
    assert changes[-1]["a"] == str(scalar(conn, "select cluster_id from pgmem.memories where id = %s", (m,)))
    for x, y in zip(changes, changes[1:]):
        assert x["a"] == y["b"]  # a chain: each change starts where the previous ended
    # moves between clusters are rows of cluster_moves too, matching history
    moves = rows(conn, "select * from pgmem.cluster_moves where memory_id = %s order by id", (m,))
    assert [(str(x["from_cluster"]), str(x["to_cluster"]), x["reason"]) for x in moves] == \
           [(x["b"], x["a"], x["details"]["reason"]) for x in changes if x["b"] is not None]


def test_write_time_assignment_by_hand(conn):
    rng = np.random.default_rng(3)
    ids = three_groups(conn, rng)
    run_cluster(conn)
    hiking = scalar(conn, "select cluster_id from pgmem.memories where id = %s", (ids[1][0],))
    v = noisy(rng, 1, noise=0.3)
    new = add(conn, "a new hike", v)
    assert scalar(conn, "select cluster_id from pgmem.memories where id = %s", (new,)) == hiking
    want = 1 / (1 + np.linalg.norm(v - centroid(conn, hiking)))
    a = rows(conn, "select * from pgmem.assign_cluster(%s)", (v,))[0]
    assert a["cluster_id"] == hiking and a["confidence"] == pytest.approx(want, abs=1e-5)
    assert scalar(conn, "select confidence from pgmem.cluster_members where memory_id = %s", (new,)) == pytest.approx(want, abs=1e-5)
    assert a["label"] == "hiking · mountain · trail"
    # embedded later (the worker's path): assigned when the vector arrives
    later = add(conn, "python bug found later")
    assert scalar(conn, "select cluster_id from pgmem.memories where id = %s", (later,)) is None
    conn.execute("update pgmem.memories set embedding = %s where id = %s", (noisy(rng, 2), later))
    assert scalar(conn, "select cluster_id from pgmem.memories where id = %s", (later,)) == \
        scalar(conn, "select cluster_id from pgmem.memories where id = %s", (ids[2][0],))
    # the job's partial_fit then moves the centroid towards the new memories (JAM "partial fit")
    before = centroid(conn, hiking)
    run_cluster(conn)
    after = centroid(conn, hiking)
    n_seen = scalar(conn, "select n_seen from pgmem.clusters where id = %s", (hiking,))
    assert not np.allclose(before, after)
    # one new point seen by a centre with count n moves it by (x - c) / (n + 1)
    assert after == pytest.approx(before + (v - before) / n_seen, abs=1e-5)


def test_cluster_id_of_another_tenant_is_refused(conn, dsn):
    from conftest import connect

    rng = np.random.default_rng(4)
    three_groups(conn, rng, per_group=3)
    run_cluster(conn)
    theirs = scalar(conn, "select id from pgmem.clusters where state = 'active' limit 1")
    with connect(dsn, tenant="other") as other:
        mid = add(other, "memory of another tenant")
        with pytest.raises(Exception) as ei:
            other.execute("update pgmem.memories set cluster_id = %s where id = %s", (theirs, mid))
        assert "does not belong to tenant \"other\"" in str(ei.value)


def test_the_job_is_idempotent(conn):
    rng = np.random.default_rng(5)
    three_groups(conn, rng)
    conn.execute("select pgmem.touch(array(select id from pgmem.memories order by id limit 4))")
    run_cluster(conn)

    def state():
        return (rows(conn, "select id, state, centroid::text, n_seen, size, energy, label, top_terms, merged_into_cluster "
                           "from pgmem.clusters order by id"),
                rows(conn, "select id, cluster_id from pgmem.memories order by id"),
                scalar(conn, "select count(*) from pgmem.history"), scalar(conn, "select count(*) from pgmem.cluster_moves"),
                scalar(conn, "select count(*) from pgmem.cluster_steps"))

    before = state()
    again = run_cluster(conn)
    assert again["changed"] == 0
    assert state() == before
    # a third run, still within the same liquid step: nothing either
    run_cluster(conn)
    assert state() == before


# ------------------------------------------------------------------ energy

def test_energy_from_the_access_log_by_hand(conn):
    rng = np.random.default_rng(6)
    ids = three_groups(conn, rng)
    run_cluster(conn)
    st = rows(conn, "select * from pgmem.cluster_state")[0]
    e0 = {r["id"]: r["energy"] for r in rows(conn, "select id, energy from pgmem.clusters where state = 'active'")}
    assert list(e0.values()) == [pytest.approx(0.5 * 0.99)] * 3  # initial .5, one step of decay, no access
    coffee = scalar(conn, "select cluster_id from pgmem.memories where id = %s", (ids[0][0],))
    # 3 uses of two coffee memories = 6 accesses; 1 use of one hiking memory
    for _ in range(3):
        conn.execute("select pgmem.touch(%s::bigint[])", (ids[0][:2],))
    conn.execute("select pgmem.touch(%s::bigint[])", (ids[1][:1],))
    hiking = scalar(conn, "select cluster_id from pgmem.memories where id = %s", (ids[1][0],))
    t1 = st["step_at"] + timedelta(hours=1, minutes=5)
    run_cluster(conn, as_of=t1.isoformat())
    e1 = {r["id"]: r["energy"] for r in rows(conn, "select id, energy from pgmem.clusters where state = 'active'")}
    for cid in e0:
        n = {coffee: 6, hiking: 1}.get(cid, 0)
        # JAM, Energy Dynamics: min(1, e + .05 x accesses), then x .99 per step
        assert e1[cid] == pytest.approx(min(1.0, e0[cid] + 0.05 * n) * 0.99, abs=1e-6), cid
    # two more steps, no access: x .99^2; the step grid stays on the hour
    run_cluster(conn, as_of=(st["step_at"] + timedelta(hours=3, minutes=1)).isoformat())
    e3 = {r["id"]: r["energy"] for r in rows(conn, "select id, energy from pgmem.clusters where state = 'active'")}
    for cid in e0:
        assert e3[cid] == pytest.approx(e1[cid] * 0.99 ** 2, abs=1e-6)
    assert scalar(conn, "select step_at from pgmem.cluster_state") == st["step_at"] + timedelta(hours=3)
    # the steps are recorded per cluster (cluster flow over time)
    steps = rows(conn, "select at, energy, accesses from pgmem.cluster_steps where cluster_id = %s order by at", (coffee,))
    assert [s["accesses"] for s in steps] == [0, 6, 0]
    assert steps[-1]["energy"] == pytest.approx(e3[coffee], abs=1e-6)


# ------------------------------------------------------------------ flow by hand


def test_energy_propagates_between_similar_clusters_by_hand(conn):
    """JAM, Real-time Updates, "energy propagation through the cluster network" (setting
    cluster_energy_spread s, 0 by default): after a step's access and decay, each cluster moves
    s of its energy toward the other active clusters' mean energy weighted by the positive
    cosine of the centroids, all at once. Recomputed by hand from the stored centroids."""
    rng = np.random.default_rng(7)
    # three tight groups that share a direction (axis 5): centroid cosines about .2, positive,
    # and below the .85 at which clusters merge
    base = scalar(conn, "select now() - interval '60 days'")
    ids = {}
    for g in (0, 1, 2):
        ids[g] = []
        for i in range(10):
            v = np.zeros(DIM)
            v[g], v[5] = 1.0, 0.5
            ids[g].append(add(conn, f"{WORDS[g]} note {i}", unit(v + rng.normal(scale=0.05, size=DIM) / np.sqrt(DIM)),
                              happened_at=base + timedelta(days=10 * g, minutes=i)))
    run_cluster(conn)
    st = rows(conn, "select * from pgmem.cluster_state")[0]
    assert scalar(conn, "select count(*) from pgmem.clusters where state = 'active'") == 3
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'cluster_energy_spread', '0.2')")
    e0 = {r["id"]: r["energy"] for r in rows(conn, "select id, energy from pgmem.clusters where state = 'active'")}
    for _ in range(3):
        conn.execute("select pgmem.touch(%s::bigint[])", (ids[0][:2],))
    coffee = scalar(conn, "select cluster_id from pgmem.memories where id = %s", (ids[0][0],))
    cent = {r["id"]: np.asarray(r["c"].to_numpy(), dtype=np.float64)
            for r in rows(conn, "select id, centroid as c from pgmem.clusters where state = 'active'")}
    run_cluster(conn, as_of=(st["step_at"] + timedelta(hours=1, minutes=5)).isoformat())
    e1 = {r["id"]: r["energy"] for r in rows(conn, "select id, energy from pgmem.clusters where state = 'active'")}
    # the step without propagation, then the propagation from those energies
    mid = {cid: min(1.0, e0[cid] + 0.05 * (6 if cid == coffee else 0)) * 0.99 for cid in e0}

    def cosine(a, b):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    for cid in e0:
        w = {j: max(0.0, cosine(cent[cid], cent[j])) for j in e0 if j != cid}
        spread = sum(w[j] * mid[j] for j in w) / sum(w.values()) if sum(w.values()) > 0 else mid[cid]
        want = 0.8 * mid[cid] + 0.2 * spread if sum(w.values()) > 0 else mid[cid]
        assert e1[cid] == pytest.approx(want, abs=1e-5), cid
    # the accessed cluster gave some of its energy to the others, which gained
    assert e1[coffee] < mid[coffee] and all(e1[c] > mid[c] for c in e0 if c != coffee)

def _flow_fixture(conn):
    """Two clusters made by hand: A (energy .5) around axis 0, B (energy 1) around axis 1,
    far apart in time. m2 is semantically A's but used together with B's m3."""
    conn.execute("insert into pgmem.clusters (tenant, centroid, n_seen, energy) values "
                 "('acme', %s, 1, 0.5), ('acme', %s, 1, 1.0)", (e(0), e(1)))
    a, b = [r[0] for r in conn.execute("select id from pgmem.clusters order by id")]
    t0 = scalar(conn, "select now() - interval '30 days'")
    v = {"m1": e(0), "m2": at_cos(0, 1, 0.75), "m3": e(1), "m4": at_cos(1, 2, 0.9)}
    t = {"m1": 0.0, "m2": 0.0, "m3": 100.0, "m4": 101.0}  # hours after t0
    ids = {k: add(conn, f"memory {k}", v[k], happened_at=t0 + timedelta(hours=t[k])) for k in v}
    assert [scalar(conn, "select cluster_id from pgmem.memories where id = %s", (ids[k],)) for k in v] == [a, a, b, b]
    for _ in range(2):
        conn.execute("select pgmem.touch(%s::bigint[])", ([ids["m2"], ids["m3"]],))
    return a, b, ids, v, t


def _expected_pulls(v, t, ids, members, energy, co_pairs, access, half_life=24.0):
    """JAM, Gradient Flow: pull(i, c) = mean over c's other members j of
    (.4 co-access + .3 temporal + .3 semantic)(i, j) x energy(c), written out."""
    out = {}
    for i in v:
        for c, ms in members.items():
            others = [j for j in ms if j != i]
            if not others:
                out[i, c] = 0.0
                continue
            total = 0.0
            for j in others:
                together = co_pairs.get(frozenset((i, j)), 0)
                co = together / (access[i] + access[j] - together) if together else 0.0
                temporal = 2 ** (-abs(t[i] - t[j]) / half_life)
                cos = float(np.dot(v[i], v[j]) / np.linalg.norm(v[i]) / np.linalg.norm(v[j]))
                total += 0.4 * co + 0.3 * temporal + 0.3 * cos
            out[i, c] = total / len(others) * energy[c]
    return out


def test_flow_by_hand(conn):
    a, b, ids, v, t = _flow_fixture(conn)
    members = {a: ["m1", "m2"], b: ["m3", "m4"]}
    pulls = _expected_pulls(v, t, ids, members, {a: 0.5, b: 1.0}, {frozenset(("m2", "m3")): 2},
                            {"m1": 0, "m2": 2, "m3": 2, "m4": 0})
    # m2: A .2625 (m1: .3 temporal + .3 x .75), B .4049 (m3 co-access 2/(2+2-2) = 1): it flows to B
    assert pulls["m2", a] == pytest.approx(0.2625, abs=1e-4)
    assert pulls["m2", b] == pytest.approx(0.4049, abs=1e-3)
    moves = rows(conn, "select * from pgmem._cluster_flow('acme', %s, 24, 0.15)", (list(ids.values()),))
    assert [(m["memory_id"], m["from_cluster"], m["to_cluster"]) for m in moves] == [(ids["m2"], a, b)]
    assert moves[0]["pull"] == pytest.approx(pulls["m2", b], abs=1e-6)
    for k in ("m1", "m3", "m4"):  # each stays: its strongest pull is its own cluster
        own = a if k in members[a] else b
        assert max(pulls[k, a], pulls[k, b]) == pulls[k, own]
    # a flow rate above the strongest pull: nothing moves
    assert rows(conn, "select * from pgmem._cluster_flow('acme', %s, 24, 0.41)", (list(ids.values()),)) == []


def test_flow_through_the_job_by_hand(conn):
    a, b, ids, v, t = _flow_fixture(conn)
    # (the energies by hand without propagation, on by default since issue 36:
    # test_energy_propagates_between_similar_clusters_by_hand recomputes it)
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'cluster_energy_spread', '0')")
    # the job's step first adds the accesses to the energies (A: m2 used twice, B: m3 twice)
    # and decays them (x .99), then flows with those energies
    energy = {a: min(1, 0.5 + 0.05 * 2) * 0.99, b: min(1, 1.0 + 0.05 * 2) * 0.99}
    members = {a: ["m1", "m2"], b: ["m3", "m4"]}
    pulls = _expected_pulls(v, t, ids, members, energy, {frozenset(("m2", "m3")): 2}, {"m1": 0, "m2": 2, "m3": 2, "m4": 0})
    run = run_cluster(conn)
    assert rows(conn, "select id, energy from pgmem.clusters order by id") == \
        [{"id": a, "energy": pytest.approx(energy[a], abs=1e-6)}, {"id": b, "energy": pytest.approx(energy[b], abs=1e-6)}]
    assert run["details"]["tenants"]["acme"]["moved"] == 1
    mv = rows(conn, "select * from pgmem.cluster_moves")
    assert [(m["memory_id"], m["from_cluster"], m["to_cluster"], m["reason"]) for m in mv] == [(ids["m2"], a, b, "flow")]
    assert mv[0]["pull"] == pytest.approx(pulls["m2", b], abs=1e-5)
    h = rows(conn, "select * from pgmem.history where memory_id = %s and op = 'update'", (ids["m2"],))
    assert [(x["before"]["cluster_id"], x["after"]["cluster_id"], x["details"]["reason"]) for x in h] == [(a, b, "flow")]
    assert h[0]["details"]["job_run_id"] == run["id"]
    # the confidence follows the memory to its new cluster
    assert scalar(conn, "select confidence from pgmem.cluster_members where memory_id = %s", (ids["m2"],)) == \
        pytest.approx(1 / (1 + np.linalg.norm(vec(conn, ids["m2"]) - centroid(conn, b))), abs=1e-5)


# ------------------------------------------------------------------ merge by hand

def test_merge_rule_by_hand(conn):
    p_c, q_c, r_c = e(0), at_cos(0, 1, 0.86), at_cos(0, 2, 0.84)
    conn.execute("insert into pgmem.clusters (tenant, centroid, n_seen, energy) values "
                 "('acme', %s, 3, 0.3), ('acme', %s, 1, 0.7), ('acme', %s, 2, 0.4)", (p_c, q_c, r_c))
    p, q, r = [x[0] for x in conn.execute("select id from pgmem.clusters order by id")]
    mp = [add(conn, "p one", e(0)), add(conn, "p two", at_cos(0, 3, 0.99))]
    mq = add(conn, "q one", q_c)
    mr = add(conn, "r one", r_c)
    assert [scalar(conn, "select cluster_id from pgmem.memories where id = %s", (m,)) for m in mp + [mq, mr]] == [p, p, q, r]
    # cos(P, Q) = .86 > .85 merge; cos(P, R) = .84 does not; after the merge the new centroid
    # (3 P + 1 Q) / 4 has cosine .833 with R: still no merge
    assert scalar(conn, "select pgmem._cluster_merge('acme', 0.85, null)") == 1
    cl = {x["id"]: x for x in rows(conn, "select id, state, merged_into_cluster, n_seen, energy, centroid::real[] c from pgmem.clusters")}
    assert cl[q]["state"] == "merged" and cl[q]["merged_into_cluster"] == p  # P has more members
    assert cl[r]["state"] == "active" and cl[p]["state"] == "active"
    assert np.array(cl[p]["c"]) == pytest.approx((3 * p_c + 1 * q_c) / 4, abs=1e-6)
    assert cl[p]["n_seen"] == 4 and cl[p]["energy"] == pytest.approx(0.7)  # counts add up; the larger energy
    assert scalar(conn, "select cluster_id from pgmem.memories where id = %s", (mq,)) == p
    mv = rows(conn, "select * from pgmem.cluster_moves")
    assert [(m["memory_id"], m["from_cluster"], m["to_cluster"], m["reason"]) for m in mv] == [(mq, q, p, "merge")]
    assert mv[0]["pull"] == pytest.approx(0.86, abs=1e-5)  # merges record the centroids' cosine
    h = rows(conn, "select details from pgmem.history where memory_id = %s and op = 'update'", (mq,))
    assert [x["details"]["reason"] for x in h] == ["merge"]
    # threshold is strict (> .85) and the job reads it from the settings
    assert scalar(conn, "select pgmem._cluster_merge('acme', 0.9, null)") == 0


# ------------------------------------------------------------------ refit, privacy

def test_k_grows_with_the_memories_by_refits(conn):
    rng = np.random.default_rng(8)
    three_groups(conn, rng, per_group=7)  # 21 memories: k = 8
    run_cluster(conn)
    assert rows(conn, "select generation, k, fitted_n from pgmem.cluster_state")[0] == {"generation": 1, "k": 8, "fitted_n": 21}
    first = {r[0] for r in conn.execute("select id from pgmem.clusters")}
    # 48 more (n = 69: k = max(8, 6) = 8): k does not change, no refit; the new ones were
    # assigned at write time and moved the centroids by partial_fit
    three_groups(conn, rng, per_group=16)
    run_cluster(conn)
    assert rows(conn, "select generation, k from pgmem.cluster_state")[0] == {"generation": 1, "k": 8}
    assert scalar(conn, "select count(*) from pgmem.memories where cluster_id is null") == 0
    # 90 more (n = 159 >= 2 x 21, k = 15 > 8): a refit with 15 clusters; the old ones are retired
    three_groups(conn, rng, per_group=30)
    run_cluster(conn)
    st = rows(conn, "select generation, k, fitted_n from pgmem.cluster_state")[0]
    assert st == {"generation": 2, "k": 15, "fitted_n": 159}
    assert {r[0] for r in conn.execute("select id from pgmem.clusters where state = 'retired'")} == \
        {r[0] for r in conn.execute("select id from pgmem.clusters where id = any(%s) and state <> 'merged'", (list(first),))}
    live = {r[0] for r in conn.execute("select id from pgmem.clusters where state = 'active'")}
    assert live and not live & first
    assert scalar(conn, "select count(*) from pgmem.memories where cluster_id <> all(%s)", (list(live),)) == 0
    # refit => true fits again whatever k says
    run_cluster(conn, refit=True)
    assert rows(conn, "select generation from pgmem.cluster_state")[0]["generation"] == 3


def test_export_and_erase_cover_clusters(conn):
    rng = np.random.default_rng(9)
    ids = [add(conn, f"secret zanzibar plan {i}", noisy(rng, 7), user_id="maya") for i in range(4)]
    ids += [add(conn, f"other coffee note {i}", noisy(rng, 0), user_id="tom") for i in range(4)]
    run_cluster(conn)
    conn.execute("select pgmem.project('pca')")
    conn.execute("select pgmem.judge('zanzibar', %s, 1)", (ids[0],))
    conn.execute("select pgmem.judge('shared plan', %s, 1)", (ids[1],))
    conn.execute("select pgmem.judge('shared plan', %s, 1)", (ids[4],))
    conn.execute("select pgmem.judge('coffee', %s, 1)", (ids[5],))
    conn.execute("select count(*) from pgmem.evaluate(k => 10, method => 'search_exact')")
    conn.execute("insert into pgmem.eval_runs (tenant, query, method, k, retrieved, relevant, judged, precision_at_k, ndcg) "
                 "values ('acme', 'coffee', 'hand', 2, %s, 0, 1, 0, 0), ('acme', 'coffee', 'hand', 1, %s, 1, 1, 1, 1)",
                 ([ids[2], ids[5]], [ids[5]]))
    runs = rows(conn, "select id, query, retrieved from pgmem.eval_runs")
    naming = {r["id"] for r in runs if set(r["retrieved"]) & set(ids[:4]) or r["query"] in ("zanzibar", "shared plan")}
    assert naming and len(naming) < len(runs)  # the hand-made run retrieving only tom's memory stays
    doc = scalar(conn, "select pgmem.export_user('maya')")
    mine = scalar(conn, "select cluster_id from pgmem.memories where id = %s", (ids[0],))
    assert [c["id"] for c in doc["clusters"]] == [mine] and "zanzibar" in doc["clusters"][0]["label"]
    assert {c["memory_id"] for c in doc["memory_coords"]} == set(ids[:4])
    assert sorted(j["memory_id"] for j in doc["eval_judgements"]) == [ids[0], ids[1]]
    assert [q["query"] for q in doc["eval_queries"]] == ["shared plan", "zanzibar"]
    assert {r["id"] for r in doc["eval_runs"]} == naming
    conn.execute("select * from pgmem.erase_user('maya')")
    # judgements naming maya's memories and the runs naming them or their queries are gone; a query
    # left without judgements goes, one still judged on tom's memory stays
    assert {r["id"] for r in rows(conn, "select id from pgmem.eval_runs")} == {r["id"] for r in runs} - naming
    assert sorted(scalar(conn, "select array_agg(query) from pgmem.eval_queries")) == ["coffee", "shared plan"]
    assert rows(conn, "select query, memory_id from pgmem.eval_judgements order by query") == [
        {"query": "coffee", "memory_id": ids[5]}, {"query": "shared plan", "memory_id": ids[4]}]
    # the label quoted maya's words: gone until the job names the cluster from who is left
    assert rows(conn, "select label, top_terms from pgmem.clusters where id = %s", (mine,))[0] == {"label": None, "top_terms": []}
    assert scalar(conn, "select count(*) from pgmem.memory_coords where memory_id = any(%s)", (ids[:4],)) == 0
    run_cluster(conn)
    assert "zanzibar" not in json.dumps(rows(conn, "select label, top_terms from pgmem.clusters"))


def test_a_run_stops_at_its_time_budget_and_the_next_goes_on(conn, dsn):
    from conftest import connect

    rng = np.random.default_rng(10)
    ids = three_groups(conn, rng, per_group=12)
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'cluster_run_seconds', '0')")
    runs = 0
    while True:
        runs += 1
        r = run_cluster(conn, batch=100)
        if scalar(conn, "select phase from pgmem.cluster_state") == "idle":
            break
        assert "paused" in r["details"] and r["details"]["more"] is False
        assert runs < 20
    # fit, assign, liquid: one batch per run (batch 100 > 36 memories: no stream, one assign batch)
    assert runs == 3
    paused = {m: scalar(conn, "select cluster_id from pgmem.memories where id = %s", (m,)) for axis in ids for m in ids[axis]}
    # the same data in one uninterrupted run ends in the same clusters (same k-means seed)
    with connect(dsn, tenant="acme2") as other:
        rng = np.random.default_rng(10)
        ids2 = three_groups(other, rng, per_group=12)
        run_cluster(other, batch=100)
        whole = {m: scalar(other, "select cluster_id from pgmem.memories where id = %s", (m,)) for axis in ids2 for m in ids2[axis]}
    groups = lambda a: sorted(sorted(m2 for m2, c2 in a.items() if c2 == c) for c in set(a.values()))
    offset = {m2: m for m, m2 in zip([m for a in ids for m in ids[a]], [m for a in ids2 for m in ids2[a]])}
    assert groups(paused) == groups({offset[m]: c for m, c in whole.items()})


def test_jobs_command_runs_a_cluster_batch(conn, dsn, monkeypatch, capsys):
    from pgmem import cli

    rng = np.random.default_rng(12)
    three_groups(conn, rng, per_group=4)
    monkeypatch.setenv("PGMEM_DSN", dsn)
    assert cli.main(["jobs", "run", "cluster", "--tenant", "acme"]) == 0
    out = capsys.readouterr().out
    assert "fit" in out and "acme" in out
    assert scalar(conn, "select count(*) from pgmem.clusters where state = 'active'") > 0
