"""JAM energy propagation between clusters, its default chosen by a simulated week (issue 36, J31;
sql/470_cluster.sql `_cluster_energy`, docs/formulas.md).

A real tenant's clusters: make demo's conversation (examples/demo_conversation.jsonl), embedded
with the default model and clustered by the cluster job. A week of use is simulated: 168 hourly
liquid steps; in each, with a seeded generator, the user uses memories of a few topics (a Zipf
law over the clusters: a handful are hot, most are never touched). Each share s of
cluster_energy_spread runs the same week from the same energies, through the real
pgmem._cluster_energy. What each share does, at the end of the week:

* order: do the clusters the week used still outrank the ones it did not (every used cluster
  above every unused one, and Spearman's correlation of energy with the week's uses)?
* warmth: among the clusters the week did not use, are the ones whose centroids are closest to
  the used clusters warmer than the others (the point of propagation: a topic next to what is in
  use is about to be needed)? Without propagation every unused cluster decays alike.

The default is the largest share of the grid that keeps the order (every used cluster above
every unused one): .01; the figures are in docs/formulas.md.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sqlhelpers import rows, scalar

pytestmark = pytest.mark.slow  # the demo conversation embedded (about 30 s)

ROOT = Path(__file__).resolve().parents[1]
SHARES = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
HOURS = 168


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def week_of_use(conn, clusters: list[int], members: dict[int, list[int]], seed: int = 36) -> dict[int, int]:
    """The week's uses, hour by hour: [(cluster, memory, count)] per hour; returns uses per cluster."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(clusters)
    p = 1.0 / np.arange(1, len(order) + 1) ** 1.5  # Zipf: a few hot topics
    p /= p.sum()
    hours = []
    for _ in range(HOURS):
        uses = []
        if rng.random() < 0.5:  # half the hours see the user
            for c in rng.choice(order, size=int(rng.integers(1, 4)), p=p):
                uses.append((int(c), int(rng.choice(members[int(c)])), int(rng.integers(1, 3))))
        hours.append(uses)
    return hours


def run_week(conn, share: float, e0: dict[int, float], hours) -> dict[int, float]:
    for cid, e in e0.items():
        conn.execute("update pgmem.clusters set energy = %s where id = %s", (e, cid))
    conn.execute("delete from pgmem.settings where tenant = 'acme' and key = 'cluster_energy_spread'")
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'cluster_energy_spread', %s)",
                 (json.dumps(share),))
    for uses in hours:
        before = scalar(conn, "select coalesce(max(id), 0) from pgmem.accesses")
        for _, mid, n in uses:
            conn.execute("insert into pgmem.accesses (tenant, memory_id, kind, count) values ('acme', %s, 'use', %s)", (mid, n))
        after = scalar(conn, "select coalesce(max(id), 0) from pgmem.accesses")
        conn.execute("select pgmem._cluster_energy('acme', 1, %s, %s)", (before, after))
    return {r["id"]: r["energy"] for r in rows(conn, "select id, energy from pgmem.clusters where tenant = 'acme' and state = 'active'")}


def test_a_week_of_use_chooses_the_energy_share(conn, dsn):
    from pgmem.client import MemoryClient

    events = [json.loads(x) for x in (ROOT / "examples" / "demo_conversation.jsonl").read_text().splitlines() if x.strip()]
    with MemoryClient(dsn, tenant="acme") as mc:
        mc.remember_many(events, progress=False)
    conn.execute("select * from pgmem.index_vectors(100000)")
    conn.execute("call pgmem.run_job('cluster')")
    cl = rows(conn, "select id, energy, centroid from pgmem.clusters where tenant = 'acme' and state = 'active' order by id")
    assert len(cl) >= 8
    clusters = [r["id"] for r in cl]
    members = {c: [r["id"] for r in rows(conn, "select id from pgmem.memories where cluster_id = %s", (c,))] for c in clusters}
    clusters = [c for c in clusters if members[c]]
    e0 = {r["id"]: r["energy"] for r in cl if r["id"] in clusters}
    cent = {r["id"]: np.asarray(r["centroid"].to_numpy(), dtype=np.float64) for r in cl}
    hours = week_of_use(conn, clusters, members)
    used = {}
    for uses in hours:
        for c, _, n in uses:
            used[c] = used.get(c, 0) + n
    unused = [c for c in clusters if c not in used]
    assert used and unused
    # each unused cluster's nearness to what the week used: its largest centroid cosine to a used cluster
    def cos(a, b):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    near = {c: max(cos(cent[c], cent[u]) for u in used) for c in unused}
    median = float(np.median(list(near.values())))
    close, far = [c for c in unused if near[c] >= median], [c for c in unused if near[c] < median]

    table = []
    for s in SHARES:
        e = run_week(conn, s, e0, hours)
        order_kept = min(e[c] for c in used) > max(e[c] for c in unused)
        rho = spearman(np.array([e[c] for c in clusters]), np.array([used.get(c, 0) for c in clusters]))
        warmth = float(np.mean([e[c] for c in close]) - np.mean([e[c] for c in far]))
        table.append({"share": s, "order_kept": order_kept, "spearman": round(rho, 3), "warmth": round(warmth, 4),
                      "used_mean": round(float(np.mean([e[c] for c in used])), 3),
                      "unused_mean": round(float(np.mean([e[c] for c in unused])), 3)})
    print(f"\n{len(clusters)} clusters, {len(used)} used in the week ({sum(used.values())} uses), {len(unused)} unused")
    for t in table:
        print(t)
    print(f"nearness of the unused clusters to the used ones (largest centroid cosine): {min(near.values()):.3f}..{max(near.values()):.3f}")
    by = {t["share"]: t for t in table}
    # no propagation: the unused clusters decay alike (no warmth)
    assert abs(by[0.0]["warmth"]) < 1e-9
    # the default (sql/020_defaults.sql) is the largest share of the grid that keeps the order of
    # use: every used cluster above every unused one, Spearman's rho at least .9
    default = float(scalar(conn, "select value::text::float8 from pgmem.settings where tenant = '*' and key = 'cluster_energy_spread'"))
    assert default == max(t["share"] for t in table if t["order_kept"]) > 0
    assert by[default]["spearman"] >= 0.9 and not by[2 * default]["order_kept"]
    # what it does: the unused clusters keep more of their energy (a floor under the topics not in
    # use this week), the used ones lose little
    assert by[default]["unused_mean"] > by[0.0]["unused_mean"] and by[default]["used_mean"] > 0.95 * by[0.0]["used_mean"]
    # what it does not do on this tenant: warm the unused clusters nearest to the used ones more
    # than the others (one person's conversation: the centroids' cosines are alike, so the
    # weighted mean is nearly the plain mean)
    assert abs(by[default]["warmth"]) < 0.01
