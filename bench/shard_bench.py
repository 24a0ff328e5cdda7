#!/usr/bin/env python
"""Search through the PL/Proxy proxy: what the extra hop costs, and per-shard throughput
(issue 19). Part of `make bench`; on its own:

    PGMEM_HOME=.pgmem .venv/bin/python bench/shard_bench.py --n 6000 --tenants 12

It starts (or reuses) its own proxy + 2 shard clusters under <PGMEM_HOME>/bench-shards on free
ports from 54374 (PGMEM_SHARD_BENCH_PORT to choose the first), loads N memories spread over T
tenants (each tenant's memories written on its partition directly with pgmem.remember_many:
synthetic texts, random unit vectors around a few topic centres per tenant), then measures,
interleaved so that load on the shared machine hits both alike:

  hop      pgmem.current_tenant() through the proxy vs on the tenant's shard: the pure cost of
           the proxy (PL/pgSQL wrapper + PL/Proxy remote call over a unix socket);
  search   pgmem.search(k=10) through the proxy vs on the shard, same queries;
  qps      8 clients for --seconds: on one shard directly (its tenants), and through the proxy
           (all tenants, both shards). On this machine every cluster shares the same 2 cores,
           so the second figure cannot show scaling: bench/README.md projects throughput for
           more shards from the per-shard figure, labelled as a projection.

Writes bench/results/<ts>-shards.json and bench/results/shards-latest.json, and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from pgmem import shards  # noqa: E402
from pgmem.cluster import port_in_use  # noqa: E402

DIM = 384
SETTINGS = {"shared_buffers": "'256MB'", "max_connections": "60", "max_worker_processes": "8"}
WORDS = ("door window garden kettle ferry lighthouse orchard bakery courier parcel meeting deploy "
         "invoice ticket flight hotel dentist piano violin marathon recipe allergy peanut lisbon "
         "tokyo berlin report budget server outage backup laptop charger umbrella bicycle").split()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict:
    return {"p50_ms": round(pct(xs, 50), 3), "p95_ms": round(pct(xs, 95), 3), "mean_ms": round(statistics.mean(xs), 3),
            "n": len(xs)}


def free_ports(n: int, start: int) -> list[int]:
    out, p = [], start
    while len(out) < n:
        if not port_in_use(p):
            out.append(p)
        p += 1
    return out


def connect(dsn: str, tenant: str) -> psycopg.Connection:
    c = psycopg.connect(dsn, autocommit=True)
    c.execute("select set_config('pgmem.tenant', %s, false)", (tenant,))
    return c


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def load(parts, proxy, tenants: list[str], per_tenant: int, rng) -> tuple[dict, float]:
    """Each tenant's memories on its partition; returns the topic centres per tenant."""
    centres = {}
    t0 = time.perf_counter()
    with psycopg.connect(proxy.dsn(), autocommit=True) as pc:
        part_of = {t: pc.execute("select pgmem_proxy.partition_of(%s)", (t,)).fetchone()[0] for t in tenants}
    for t in tenants:
        p = parts[part_of[t]]
        c = unit(rng.standard_normal((8, DIM)))
        centres[t] = c
        with connect(p.cluster.dsn(p.dbname), t) as conn:
            if conn.execute("select count(*) from pgmem.memories where tenant = %s", (t,)).fetchone()[0] >= per_tenant:
                continue
            for lo in range(0, per_tenant, 500):
                items = []
                for i in range(lo, min(per_tenant, lo + 500)):
                    k = i % 8
                    v = unit(c[k] + 0.45 * rng.standard_normal(DIM) / np.sqrt(DIM) * 6)
                    words = " ".join(rng.choice(WORDS, 7))
                    items.append({"content": f"{t} note {i}: {words}", "embedding": v.astype(np.float32).tolist(),
                                  "who": "user", "user_id": f"u{i % 5}"})
                # a bulk load, not the surprise gate (its cost is measured by bench/bench.py)
                conn.execute("insert into pgmem.memories (tenant, content, who, user_id, embedding) "
                             "select %s, x.content, x.who, x.user_id, x.embedding::vector "
                             "from jsonb_to_recordset(%s::jsonb) x(content text, who text, user_id text, embedding text)",
                             (t, json.dumps([{**it, "embedding": str(it["embedding"])} for it in items])))
    return {"centres": centres, "part_of": part_of}, time.perf_counter() - t0


def queries(centres: dict, tenants: list[str], n: int, rng) -> list[tuple[str, str, str]]:
    out = []
    for i in range(n):
        t = tenants[i % len(tenants)]
        v = unit(centres[t][rng.integers(8)] + 0.3 * rng.standard_normal(DIM) / np.sqrt(DIM) * 6)
        out.append((t, " ".join(rng.choice(WORDS, 3)), str(v.astype(np.float32).tolist())))
    return out


SEARCH = "select id from pgmem.search(%s, %s::vector, k => 10)"


def interleaved(proxy, parts, info, qs) -> dict:
    """Same query through the proxy and on the shard, alternating which goes first."""
    conns_p = {t: connect(proxy.dsn(), t) for t in info["part_of"]}
    conns_s = {t: connect(parts[p].cluster.dsn(parts[p].dbname), t) for t, p in info["part_of"].items()}
    res = {"hop_proxy": [], "hop_shard": [], "search_proxy": [], "search_shard": []}
    same = 0
    try:
        for i, (t, text, vec) in enumerate(qs[:50]):  # warm both paths and every connection
            conns_p[t].execute(SEARCH, (text, vec)).fetchall()
            conns_s[t].execute(SEARCH, (text, vec)).fetchall()
        for i, (t, text, vec) in enumerate(qs):
            order = (("proxy", conns_p[t]), ("shard", conns_s[t]))
            if i % 2:
                order = order[::-1]
            ids = {}
            for name, c in order:
                s = time.perf_counter()
                c.execute("select pgmem.current_tenant()").fetchone()
                res[f"hop_{name}"].append((time.perf_counter() - s) * 1000)
                s = time.perf_counter()
                ids[name] = [r[0] for r in c.execute(SEARCH, (text, vec)).fetchall()]
                res[f"search_{name}"].append((time.perf_counter() - s) * 1000)
            same += ids["proxy"] == ids["shard"]
    finally:
        for c in list(conns_p.values()) + list(conns_s.values()):
            c.close()
    out = {k: summary(v) for k, v in res.items()}
    out["hop_extra_ms_p50"] = round(out["hop_proxy"]["p50_ms"] - out["hop_shard"]["p50_ms"], 3)
    out["search_extra_ms_p50"] = round(out["search_proxy"]["p50_ms"] - out["search_shard"]["p50_ms"], 3)
    out["search_extra_ms_p95"] = round(out["search_proxy"]["p95_ms"] - out["search_shard"]["p95_ms"], 3)
    out["same_results"] = f"{same}/{len(qs)}"
    return out


def throughput(dsn_of, qs, clients: int, seconds: float) -> dict:
    stop = time.monotonic() + seconds
    counts = [0] * clients
    lat: list[list[float]] = [[] for _ in range(clients)]

    def worker(i: int):
        conns = {}
        try:
            j = i
            while time.monotonic() < stop:
                t, text, vec = qs[j % len(qs)]
                j += clients
                if t not in conns:
                    conns[t] = connect(dsn_of(t), t)
                s = time.perf_counter()
                conns[t].execute(SEARCH, (text, vec)).fetchall()
                lat[i].append((time.perf_counter() - s) * 1000)
                counts[i] += 1
        finally:
            for c in conns.values():
                c.close()

    th = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for x in th:
        x.start()
    for x in th:
        x.join()
    el = time.monotonic() - t0
    return {"qps": round(sum(counts) / el, 1), "clients": clients, "seconds": round(el, 1),
            **summary([x for l in lat for x in l])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=6000, help="memories in all (default 6000)")
    ap.add_argument("--tenants", type=int, default=12)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--keep", action="store_true", help="leave the clusters running (next run reuses the data)")
    args = ap.parse_args()
    from pgmem.config import home

    bhome = home() / "bench-shards"
    rng = np.random.default_rng(19)
    first = int(os.environ.get("PGMEM_SHARD_BENCH_PORT", "54374"))
    state = shards.load_state(bhome)
    ports = [] if state else free_ports(3, first)
    proxy, parts = shards.shards_up(bhome, 2, ports, settings=SETTINGS)
    tenants = [f"bench{i:03d}" for i in range(args.tenants)]
    info, load_s = load(parts, proxy, tenants, args.n // args.tenants, rng)
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        for p in parts:
            c.execute("select 1")
    for p in parts:
        with psycopg.connect(p.cluster.dsn(p.dbname), autocommit=True) as c:
            c.execute("vacuum analyze pgmem.memories")
    qs = queries(info["centres"], tenants, args.queries, rng)
    R: dict = {"n": args.n, "tenants": args.tenants, "partitions": len(parts),
               "tenants_per_partition": {str(p.part): sum(1 for t in tenants if info["part_of"][t] == p.part) for p in parts},
               "load_seconds": round(load_s, 1), "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "loadavg_start": os.getloadavg()[0]}
    R["latency"] = interleaved(proxy, parts, info, qs)
    shard0 = [q for q in qs if info["part_of"][q[0]] == 0]
    R["qps_one_shard_direct"] = throughput(lambda t: parts[0].cluster.dsn(parts[0].dbname), shard0, args.clients, args.seconds)
    R["qps_through_proxy"] = throughput(lambda t: proxy.dsn(), qs, args.clients, args.seconds)
    R["loadavg_end"] = os.getloadavg()[0]
    ts = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{ts}-shards.json").write_text(json.dumps(R, indent=2) + "\n")
    (out / "shards-latest.json").write_text(json.dumps(R, indent=2) + "\n")
    L = R["latency"]
    print(f"shards: N={args.n}, {args.tenants} tenants over {len(parts)} partitions {R['tenants_per_partition']}, "
          f"load {R['load_seconds']} s, loadavg {R['loadavg_start']:.1f}-{R['loadavg_end']:.1f}")
    print(f"{'':28}{'p50 ms':>10}{'p95 ms':>10}")
    for k in ("hop_shard", "hop_proxy", "search_shard", "search_proxy"):
        print(f"{k:28}{L[k]['p50_ms']:>10.3f}{L[k]['p95_ms']:>10.3f}")
    print(f"extra hop: {L['hop_extra_ms_p50']} ms (p50, trivial call); search +{L['search_extra_ms_p50']} ms p50, "
          f"+{L['search_extra_ms_p95']} ms p95; same top-10 {L['same_results']}")
    print(f"{args.clients} clients: one shard direct {R['qps_one_shard_direct']['qps']} searches/s, "
          f"through the proxy (2 shards, same 2 cores) {R['qps_through_proxy']['qps']} searches/s")
    if not args.keep:
        shards.remove(bhome)
    return 0


if __name__ == "__main__":
    sys.exit(main())
