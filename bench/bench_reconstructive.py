#!/usr/bin/env python
"""The reconstructive parts at scale (issue 16): how fast bindings are written (the ENCODE
work), spread / reconstruct / search_spread latency, a hub's bounded fan-out, and what the
ENCODE triggers cost the write path.

Runs against the data set bench/bench.py loads (`bench/bench.py --n N --load-only --keep`):
database bench_n<N> on the bench cluster (PGMEM_BENCH_PORT, home .pgmem/bench). The bindings
it writes stay (links only: memories are untouched, so bench.py still reuses the data set);
the hub's links and the ingest runs are rolled back.

    PGMEM_BENCH_PORT=... .venv/bin/python bench/bench_reconstructive.py --n 100000

Phases, each interleaved where two things are compared:
  1. bindings: pgmem.refresh_bindings over every memory (or --bind of them), batches of 1,000,
     as the work queue's bind items do: memories/s, links per kind.
  2. latency (p50/p95 over --queries corpus queries, one client, warm): search (k 10);
     spread from its 10 hits (3 iterations); reconstruct (k 10, 10 seeds); search_spread.
  3. a hub: one memory with --hub-links co_access bindings; spread from it, fan-out 20
     (the default) and 1000.
  4. write path: remember_many (precomputed embeddings, batches of 256) with the ENCODE
     triggers on and off, alternating, rolled back: memories/s.
Writes bench/results/reconstructive-<ts>-<N>.json.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench as B  # noqa: E402  (cluster, connection and corpus helpers of the main benchmark)
import corpus as C  # noqa: E402


def pct(xs, p):
    return round(float(np.percentile(np.asarray(xs) * 1000, p)), 2)


def timed(conn, sql, params=()):
    t = time.perf_counter()
    conn.execute(sql, params).fetchall()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--bind", type=int, default=None, help="memories to bind (default: all)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--hub-links", type=int, default=100_000)
    ap.add_argument("--ingest-rounds", type=int, default=4)
    args = ap.parse_args()

    from pgmem import migrate

    db = f"bench_n{args.n}"
    c = B.make_cluster(db)
    c.start()
    c.wait_ready()
    dsn = c.dsn(db)
    meta = B.read_meta(dsn)
    if not meta or not meta.get("complete") or meta.get("n") != args.n:
        raise SystemExit(f"no loaded data set of N={args.n}: run bench/bench.py --n {args.n} --load-only --keep first")
    migrate.upgrade(dsn)
    corpus = C.Corpus.load(embedder=None, log=B.log)
    R: dict = {"n": args.n, "started_at": datetime.now(timezone.utc).isoformat(),
               "loadavg_start": [round(x, 2) for x in __import__("os").getloadavg()]}
    conn = B.connect(dsn)
    conn.execute("select set_config('pgmem.tenant', %s, false)", (B.TENANT,))

    # 1. bindings ------------------------------------------------------------------
    ids = [r[0] for r in conn.execute("select id from pgmem.memories where tenant = %s and state = 'active' order by id",
                                      (B.TENANT,))]
    todo = ids[: args.bind] if args.bind else ids
    have = conn.execute("select count(*) from pgmem.links where tenant = %s and kind = 'semantic'", (B.TENANT,)).fetchone()[0]
    if have == 0:
        B.log(f"binding {len(todo)} memories (batches of 1000)")
        t = time.perf_counter()
        per_batch = []
        for i in range(0, len(todo), 1000):
            tb = time.perf_counter()
            conn.execute("select * from pgmem.refresh_bindings(%s::bigint[])", (todo[i:i + 1000],)).fetchall()
            per_batch.append(time.perf_counter() - tb)
            if i and i % 10000 == 0:
                B.log(f"  {i} bound, {i / (time.perf_counter() - t):.0f}/s")
        el = time.perf_counter() - t
        conn.execute("delete from pgmem.work_queue where tenant = %s and task = 'bind'", (B.TENANT,))
        R["bind"] = {"memories": len(todo), "seconds": round(el, 1), "per_s": round(len(todo) / el, 1),
                     "batch_p50_s": round(float(np.median(per_batch)), 3)}
    else:
        R["bind"] = {"reused": True}
    R["links"] = dict(conn.execute("select kind, count(*) from pgmem.links where tenant = %s group by kind order by kind",
                                   (B.TENANT,)).fetchall())
    B.log(f"bindings: {R['bind']}; links {R['links']}")

    # 2. latency ------------------------------------------------------------------------
    rng = random.Random(11)
    qs = [corpus.queries[rng.randrange(len(corpus.queries))] for _ in range(args.queries)]
    qv = {id(q): corpus.query_vecs[corpus.queries.index(q)] for q in qs}
    lat = {k: [] for k in ("search", "spread", "reconstruct", "search_spread")}
    fan = []
    for q in qs:
        text, vec = q["text"], qv[id(q)]
        t = time.perf_counter()
        seeds = [r[0] for r in conn.execute("select id from pgmem.search(%s, %s::vector, k => 10)", (text, vec))]
        lat["search"].append(time.perf_counter() - t)
        t = time.perf_counter()
        n = conn.execute("select count(*) from pgmem.spread(%s::bigint[])", (seeds,)).fetchone()[0]
        lat["spread"].append(time.perf_counter() - t)
        fan.append(n)
        lat["reconstruct"].append(timed(conn, "select pgmem.reconstruct(%s, %s::vector, k => 10, log => false)", (text, vec)))
        lat["search_spread"].append(timed(conn, "select * from pgmem.search_spread(%s, %s::vector, k => 10)", (text, vec)))
    R["latency_ms"] = {k: {"p50": pct(v, 50), "p95": pct(v, 95)} for k, v in lat.items()}
    R["spread_reached"] = {"p50": float(np.median(fan)), "max": int(max(fan))}
    B.log(f"latency: {R['latency_ms']}; spread reached {R['spread_reached']}")

    # 3. a hub ---------------------------------------------------------------------------
    hub = ids[len(ids) // 2]
    others = random.Random(3).sample([i for i in ids if i != hub], min(args.hub_links, len(ids) - 1))
    conn.execute("begin")
    conn.execute("""insert into pgmem.links (tenant, src_id, dst_id, kind, weight, count)
                    select %s, least(%s, o), greatest(%s, o), 'co_access', 1 + (o %% 7), 1 from unnest(%s::bigint[]) o
                    on conflict do nothing""", (B.TENANT, hub, hub, others))
    hubl = {}
    for fanout in (20, 1000):
        xs = [timed(conn, "select count(*) from pgmem.spread(array[%s]::bigint[], iterations => 2, fanout => %s)", (hub, fanout))
              for _ in range(5)]
        reached = conn.execute("select count(*) from pgmem.spread(array[%s]::bigint[], iterations => 2, fanout => %s)",
                               (hub, fanout)).fetchone()[0]
        hubl[f"fanout_{fanout}"] = {"p50_ms": pct(xs, 50), "reached": reached}
    conn.execute("rollback")
    R["hub"] = {"links": len(others), **hubl}
    B.log(f"hub with {len(others)} co_access bindings: {hubl}")

    # 4. write path with and without the ENCODE triggers ---------------------------------
    from pgmem.client import MemoryClient
    from pgmem.embedding import embedding_text

    now = datetime.now(timezone.utc)
    events, vecs = C.fresh_events(corpus, 256 * args.ingest_rounds * 2, B.SEED + 17, now)
    table = {embedding_text(content=e["content"], who=e["who"], where=e["where"], why=e["why"], how=e["how"]): v
             for e, v in zip(events, vecs)}
    mc = MemoryClient(dsn, tenant=B.TENANT, embedder=B.PrecomputedEmbedder(table), max_size=1)
    rates = {"on": [], "off": []}
    for r in range(args.ingest_rounds * 2):
        mode = "on" if r % 2 == 0 else "off"
        batch = events[r * 256:(r + 1) * 256]
        w = B.connect(dsn, autocommit=False)
        if mode == "off":
            w.execute("alter table pgmem.memories disable trigger memories_encode_insert")
        t = time.perf_counter()
        mc.remember_many(batch, batch_size=256, extract=False, embed=True, progress=False, conn=w)
        rates[mode].append(len(batch) / (time.perf_counter() - t))
        queued = w.execute("select count(*) from pgmem.work_queue where tenant = %s", (B.TENANT,)).fetchone()[0]
        w.rollback()
        w.close()
        if mode == "on":
            assert queued > 0, "the ENCODE trigger queued nothing"
    mc.close()
    R["ingest_per_s"] = {k: round(float(np.median(v)), 1) for k, v in rates.items()}
    R["ingest_rounds"] = {k: [round(x, 1) for x in v] for k, v in rates.items()}
    B.log(f"remember_many with the ENCODE trigger {R['ingest_per_s']['on']}/s, without {R['ingest_per_s']['off']}/s")

    R["loadavg_end"] = [round(x, 2) for x in __import__("os").getloadavg()]
    out = B.RESULTS / f"reconstructive-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{args.n}.json"
    out.write_text(json.dumps(R, indent=1) + "\n")
    print(json.dumps(R, indent=1))
    print(f"results in {out}")
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
