#!/usr/bin/env python
"""Does hash partitioning of memories by tenant make nearest-neighbour search faster? (issue 19,
part 4). Not part of `make bench` (it builds two HNSW indexes over the whole set):

    PGMEM_BENCH_PORT=54348 .venv/bin/python bench/partition_bench.py --n 1000000 --tenants 100 --partitions 16

In the bench cluster (.pgmem/bench, its own database `partition_probe`) it loads the same N
vectors (384-d, unit length, 8 topic centres per tenant plus noise; what pgmem's candidate
query filters on: tenant, state) twice, into

  plain        one table, one HNSW index (cosine, m 16, ef_construction 64), the tenant as a
               filter: pgvector 0.8 iterative index scan (hnsw.iterative_scan = relaxed_order),
               as pgmem's candidate query runs;
  partitioned  PARTITION BY HASH (tenant) into P partitions, one HNSW index each (smaller
               graphs), the tenant prunes to one partition (and filters within it);

then runs the same queries on both, interleaved: top-10 of a tenant's active rows by cosine
distance. Reports p50/p95 (client-side, planning included), planning time, recall@10 against
the exact answer, build times and sizes. bench/results/<ts>-partitioning.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg
import psycopg.sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from pgmem.cluster import Cluster  # noqa: E402

DIM = 384
# noise per dimension: |noise| ~ 0.8, a memory's cosine to its topic centre ~ 0.78 (topic structure,
# as sentence embeddings have; nearly random vectors would make every HNSW graph look bad)
NOISE = 0.8 / np.sqrt(DIM)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def cluster() -> Cluster:
    from pgmem.config import home

    c = Cluster(home() / "bench", port=int(os.environ.get("PGMEM_BENCH_PORT", "54340")), dbname="partition_probe",
                settings={"shared_buffers": "'2GB'", "maintenance_work_mem": "'2GB'",
                          "max_parallel_maintenance_workers": "2"})
    c.init()
    c.start()
    c.wait_ready()
    c.ensure_database("partition_probe", tenant=None)
    return c


def log(msg):
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", flush=True)


def topic_centres(tenants: int, shared: bool) -> np.ndarray:
    """8 topics per tenant: its own (tenants far apart) or drawn from 64 topics all tenants share
    (agents of different tenants talk about the same things: the tenant filter then removes
    most of a query's nearest neighbours in one big graph)."""
    r = np.random.default_rng(19)
    if not shared:
        return unit(r.standard_normal((tenants, 8, DIM))).astype(np.float32)
    pool = unit(r.standard_normal((64, DIM))).astype(np.float32)
    return np.stack([pool[r.choice(64, 8, replace=False)] for _ in range(tenants)])


def load(conn, n: int, tenants: int, parts: int, rng, shared: bool) -> dict:
    from pgvector.psycopg import register_vector

    conn.execute("create extension if not exists vector")
    register_vector(conn)
    have = False
    if conn.execute("select to_regclass('probe_plain') is not null and to_regclass('probe_part') is not null").fetchone()[0]:
        have = conn.execute("select (select count(*) from probe_plain) = %s and (select count(*) from pg_inherits "
                            "where inhparent = 'probe_part'::regclass) = %s and "
                            "(obj_description('probe_plain'::regclass)::jsonb ->> 'shared_topics')::boolean = %s",
                            (n, parts, shared)).fetchone()[0]
    meta = {}
    if have:
        log("reusing the loaded tables")
        return json.loads(conn.execute("select obj_description('probe_plain'::regclass)").fetchone()[0])
    conn.execute("drop table if exists probe_plain, probe_part cascade")
    conn.execute("create table probe_plain (id bigint primary key, tenant text not null, state text not null, "
                 "embedding vector(384) not null)")
    conn.execute("create table probe_part (id bigint, tenant text not null, state text not null, "
                 "embedding vector(384) not null, primary key (tenant, id)) partition by hash (tenant)")
    for i in range(parts):
        conn.execute(f"create table probe_part_{i} partition of probe_part for values with (modulus {parts}, remainder {i})")
    centres = topic_centres(tenants, shared)
    t0 = time.perf_counter()
    per = n // tenants
    with conn.cursor().copy("copy probe_plain (id, tenant, state, embedding) from stdin with (format binary)") as cp:
        cp.set_types(["int8", "text", "text", "vector"])
        i = 0
        for t in range(tenants):
            noise = rng.standard_normal((per, DIM)).astype(np.float32) * NOISE
            vecs = unit(centres[t][np.arange(per) % 8] + noise)
            for j in range(per):
                i += 1
                cp.write_row((i, f"tenant{t:03d}", "active" if j % 10 else "archived", vecs[j]))
    meta["copy_s"] = round(time.perf_counter() - t0, 1)
    conn.execute("insert into probe_part select * from probe_plain")
    conn.execute("analyze probe_plain")
    conn.execute("analyze probe_part")
    log(f"loaded {n} rows ({meta['copy_s']} s)")
    conn.execute("set maintenance_work_mem = '2GB'")
    t0 = time.perf_counter()
    conn.execute("create index on probe_plain using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
    meta["build_plain_s"] = round(time.perf_counter() - t0, 1)
    log(f"plain HNSW built in {meta['build_plain_s']} s")
    t0 = time.perf_counter()
    conn.execute("create index on probe_part using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
    meta["build_partitioned_s"] = round(time.perf_counter() - t0, 1)
    log(f"partitioned HNSW built in {meta['build_partitioned_s']} s")
    meta["centres_seed"] = 19
    meta["shared_topics"] = shared
    conn.execute(psycopg.sql.SQL("comment on table probe_plain is {}").format(psycopg.sql.Literal(json.dumps(meta))))
    return meta


Q = "select id from {t} where tenant = %s and state = 'active' order by embedding <=> %s limit 10"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--tenants", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--part-ef", default="40,100,200",
                    help="hnsw.ef_search values for the partitioned table (the plain one runs at 40): equal recall")
    ap.add_argument("--iterative", default="strict_order", choices=["off", "relaxed_order", "strict_order"],
                    help="hnsw.iterative_scan (pgmem's candidate query needs the filter: an iterative scan)")
    ap.add_argument("--own-topics", action="store_true", help="each tenant its own 8 topics (default: 64 shared topics)")
    args = ap.parse_args()
    rng = np.random.default_rng(19)
    c = cluster()
    from pgvector.psycopg import register_vector

    with psycopg.connect(c.dsn("partition_probe"), autocommit=True) as conn:
        meta = load(conn, args.n, args.tenants, args.partitions, rng, not args.own_topics)
        register_vector(conn)
        conn.execute("set hnsw.ef_search = 40")
        conn.execute(f"set hnsw.iterative_scan = {args.iterative}")
        conn.execute("set jit = off")
        rng2 = np.random.default_rng(7)
        centres = topic_centres(args.tenants, not args.own_topics)
        qs = []
        for i in range(args.queries):
            t = int(rng2.integers(args.tenants))
            v = unit(centres[t][rng2.integers(8)] + rng2.standard_normal(DIM).astype(np.float32) * NOISE)
            qs.append((f"tenant{t:03d}", v.astype(np.float32)))
        efs = [int(x) for x in args.part_ef.split(",")]
        tables = {"plain": ("probe_plain", 40), **{f"partitioned_ef{e}": ("probe_part", e) for e in efs}}
        lat = {k: [] for k in tables}
        plan = {k: [] for k in tables}
        recall = {k: [] for k in tables}
        for t, v in qs[:30]:  # warm
            for name in tables:
                conn.execute(Q.format(t=tables[name][0]), (t, v)).fetchall()
        for i, (t, v) in enumerate(qs):
            conn.execute("set enable_indexscan = off")  # the exact answer: the tenant's rows, sorted
            exact = {r[0] for r in conn.execute(Q.format(t="probe_plain"), (t, v)).fetchall()}
            conn.execute("reset enable_indexscan")
            order = list(tables) if i % 2 == 0 else list(tables)[::-1]
            for name in order:
                conn.execute(f"set hnsw.ef_search = {tables[name][1]}")
                s = time.perf_counter()
                ids = [r[0] for r in conn.execute(Q.format(t=tables[name][0]), (t, v)).fetchall()]
                lat[name].append((time.perf_counter() - s) * 1000)
                recall[name].append(len(exact & set(ids)) / 10)
                if i % 10 == 0:
                    ex = conn.execute("explain (analyze, summary, format json) " + Q.format(t=tables[name][0]), (t, v)).fetchone()[0][0]
                    plan[name].append(ex["Planning Time"])
        R = {"n": args.n, "tenants": args.tenants, "partitions": args.partitions, "queries": args.queries,
             "ef_search_plain": 40, "ef_search_partitioned": efs, "iterative_scan": args.iterative, **meta,
             "loadavg": os.getloadavg()[0]}
        for name in tables:
            R[name] = {"p50_ms": round(pct(lat[name], 50), 3), "p95_ms": round(pct(lat[name], 95), 3),
                       "planning_ms_mean": round(statistics.mean(plan[name]), 3),
                       "recall_at_10": round(statistics.mean(recall[name]), 4)}
        R["sizes"] = {name: conn.execute("select pg_size_pretty(sum(pg_relation_size(i.indexrelid))) from pg_index i "
                                         "join pg_class c on c.oid = i.indexrelid where c.relam = "
                                         "(select oid from pg_am where amname = 'hnsw') and i.indrelid in "
                                         "(select %s::regclass union select inhrelid from pg_inherits where inhparent = %s::regclass)",
                                         (tbl, tbl)).fetchone()[0] for name, tbl in (("plain", "probe_plain"),
                                                                                      ("partitioned", "probe_part"))}
    ts = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "bench" / "results" / f"{ts}-partitioning.json"
    out.write_text(json.dumps(R, indent=2) + "\n")
    print(json.dumps(R, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
