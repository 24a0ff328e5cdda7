"""Backend CPU per item of the write path and the jobs on a loaded bench data set (issue 13).

Wall times on a shared machine say little; the CPU time of the server backend that does the
work is the floor an idle core would see. Every measurement runs in a transaction that is
rolled back, so the data set stays as loaded.

    python bench/bench.py --n 1000000 --load-only --keep     # once
    python bench/write_floor.py --n 1000000

Prints one JSON object: ms of backend CPU (and wall) per item for
* the gate's nearest-neighbour lookup (pgmem._neighbours, top 10) at ef_search 100 and 40, a
  bare HNSW top 10, and _neighbours with 4,096 memories waiting in pgmem.vector_queue;
* remember_many through the surprise gate (MemoryClient, precomputed embeddings);
* one merge_duplicates batch (dry run and real), one prune batch (normal).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench as B  # noqa: E402
import corpus as C  # noqa: E402


def backend_cpu(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=512)
    ap.add_argument("--ingest", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    c = B.make_cluster(f"bench_n{args.n}")
    c.start()
    c.wait_ready()
    dsn = c.dsn(f"bench_n{args.n}")
    out: dict = {"n": args.n, "loadavg_start": os.getloadavg()}
    conn = B.connect(dsn, autocommit=False)
    pid = conn.info.backend_pid

    def run(label: str, sql: str, items: int, params=()) -> None:
        c0, t = backend_cpu(pid), time.perf_counter()
        conn.execute(sql, params).fetchall()
        out[label] = {"items": items, "cpu_ms_per_item": round(1000 * (backend_cpu(pid) - c0) / items, 3),
                      "wall_ms_per_item": round(1000 * (time.perf_counter() - t) / items, 3)}
        print(label, out[label], file=sys.stderr, flush=True)

    k = args.lookups
    lookups = ("select (select count(*) from pgmem._neighbours(m.tenant, m.embedding, 10, '')) from pgmem.memories m "
               f"where m.id > {args.n // 2} order by m.id limit %s")
    conn.execute(lookups, (64,)).fetchall()  # warm the graph's upper layers
    for ef in (100, 40):
        conn.execute(f"set hnsw.ef_search = {ef}")
        run(f"neighbours_top10_ef{ef}", lookups, k, (k,))
    conn.execute("set hnsw.ef_search = 100")
    run("bare_hnsw_top10_ef100", "select (select count(*) from (select v.memory_id from pgmem.memory_vectors v "
        "where v.tenant = m.tenant and v.user_scope = '' order by v.embedding <=> m.embedding limit 10) x) "
        f"from pgmem.memories m where m.id > {args.n // 2} order by m.id limit %s", k, (k,))
    conn.execute("insert into pgmem.vector_queue (memory_id, tenant) select id, tenant from pgmem.memories "
                 "where id <= 4096 on conflict do nothing")
    run("neighbours_top10_ef100_4096_queued", lookups, k, (k,))
    conn.rollback()

    # remember_many through the gate, as bench.py's write path does
    from pgmem.client import MemoryClient
    from pgmem.embedding import embedding_text

    events, vecs = C.fresh_events(C.Corpus.load(embedder=None, log=lambda m: None), args.ingest, B.SEED,
                                  datetime.now(timezone.utc))
    table = {embedding_text(content=e["content"], who=e["who"], where=e["where"], why=e["why"], how=e["how"]): v
             for e, v in zip(events, vecs)}
    mc = MemoryClient(dsn, tenant=B.TENANT, embedder=B.PrecomputedEmbedder(table), max_size=1,
                      statement_timeout_ms=600_000)
    c0, t, done, dec = backend_cpu(pid), time.perf_counter(), 0, {}
    while done < len(events):
        res = mc.remember_many(events[done:done + args.batch], batch_size=args.batch, extract=False, embed=True,
                               progress=False, conn=conn)
        for r in res:
            dec[r.decision] = dec.get(r.decision, 0) + 1
        done += len(res)
    out["remember_many"] = {"items": done, "batch": args.batch, "decisions": dec,
                            "cpu_ms_per_item": round(1000 * (backend_cpu(pid) - c0) / done, 3),
                            "wall_ms_per_item": round(1000 * (time.perf_counter() - t) / done, 3),
                            "per_s": round(done / (time.perf_counter() - t), 1)}
    print("remember_many", out["remember_many"], file=sys.stderr, flush=True)
    conn.rollback()
    mc.close()

    for dry in (True, False):
        run(f"merge_batch_1000{'_dry_run' if dry else ''}",
            "select * from pgmem.merge_duplicates(batch => 1000, dry_run => %s)", 1000, (dry,))
        conn.rollback()
    run("prune_normal_batch_10000", "select * from pgmem.prune(mode => 'normal', batch => 10000)", 10000)
    conn.rollback()
    out["loadavg_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
