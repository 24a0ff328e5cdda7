#!/usr/bin/env python
"""Clustering at scale (issue 17, item 7; jam-journalistic-agent-memory.md, Clustering
Pipeline and Liquid Memory Clustering): the `cluster` job over the benchmark's N memories.

    python bench/cluster_bench.py --n 100000            # needs: bench/bench.py --n 100000 --load-only
    python bench/cluster_bench.py --n 1000000 --batch 50000

The data set is the one bench/bench.py loads (cluster .pgmem/bench, PGMEM_BENCH_PORT,
database bench_n<N>, tenant "bench": real MiniLM vectors of the benchmark corpus, loaded by COPY
with the triggers off, so no memory has a cluster yet). Each run works on a copy of that
database (CREATE DATABASE ... TEMPLATE), dropped at the end, so runs are repeatable.

1. full run: CALL pgmem.run_job('cluster', {"tenant": "bench", "batch": B}) from nothing:
   fit on a sample (MiniBatchKMeans, adaptive k), partial_fit streamed over every memory,
   assignment of every memory, the first liquid step (energy, flow), merges, labels. Time per
   phase from pgmem.job_runs, the backend's peak resident memory (VmHWM of the process that
   ran the job) and the server's peak memory (PSS over all its processes, sampled).
2. second run with nothing new (the idempotent case: nothing may change).
3. write-time assignment: INSERT of --inserts memories with embeddings (every trigger on),
   into the clustered tenant and into a tenant without clusters: the trigger's cost per row.
4. incremental run an hour later: partial_fit on the new memories, a liquid step.

Results: bench/results/cluster-<timestamp>.json and a table. bench/bench.py runs it after its
jobs phase (skip with --skip cluster).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "python"))

import numpy as np  # noqa: E402
import psycopg  # noqa: E402

RESULTS = HERE / "results"
TENANT = "bench"
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def private_bytes(pid: int) -> int:
    """A process's own memory (Private_Clean + Private_Dirty): not the shared buffers it touched,
    which its RSS and VmHWM count (shared_buffers is 4 GB in the bench cluster)."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1]) * 1024
    except OSError:
        pass
    return total


class PeakPss(threading.Thread):
    """The server's memory: PSS summed over the postmaster and its children, sampled; and the
    private memory of one backend (the one running the job)."""

    def __init__(self, postmaster: int, period: float = 0.5):
        super().__init__(daemon=True)
        self.postmaster, self.period, self.peak = postmaster, period, 0
        self.backend: int | None = None
        self.backend_peak = 0
        self._stop = threading.Event()

    def _pids(self) -> list[int]:
        out = [self.postmaster]
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == self.postmaster:
                            out.append(int(d))
                except (OSError, IndexError, ValueError):
                    pass
        return out

    def run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in self._pids():
                try:
                    with open(f"/proc/{pid}/smaps_rollup") as f:
                        total += sum(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
                except OSError:
                    pass
            self.peak = max(self.peak, total)
            if self.backend:
                self.backend_peak = max(self.backend_peak, private_bytes(self.backend))
            self._stop.wait(self.period)

    def stop(self) -> int:
        self._stop.set()
        return self.peak


def vm_hwm(pid: int) -> int:
    """Peak resident memory of a process (bytes)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def phases(conn, since_id: int) -> tuple[dict, list]:
    """Seconds and calls per phase of the cluster job runs after job_runs.id since_id."""
    rows = conn.execute(
        "select id, status, extract(epoch from finished_at - started_at), details, error from pgmem.job_runs "
        "where job = 'cluster' and id > %s order by id", (since_id,)).fetchall()
    out: dict = {}
    for _id, status, secs, details, err in rows:
        if status != "ok":
            raise RuntimeError(f"cluster job {status}: {err}")
        t = (details.get("tenants") or {}).get(TENANT) or {}
        ph = t.get("phase", "?")
        p = out.setdefault(ph, {"calls": 0, "seconds": 0.0, "examined": 0, "changed": 0})
        p["calls"] += 1
        p["seconds"] = round(p["seconds"] + float(secs or 0), 2)
        p["examined"] += int(t.get("examined") or 0)
        p["changed"] += int(t.get("changed") or 0)
        for k in ("k", "moved", "merged", "steps"):
            if k in t:
                p[k] = t[k]
    return out, rows


def run_job(conn, params: dict) -> tuple[float, dict]:
    """CALL pgmem.run_job('cluster') until the tenant's cycle is done: a run stops after
    cluster_run_seconds and the next goes on (as pg_cron's next runs would). Returns the total
    seconds and the phases, with the number of runs and the longest."""
    since = conn.execute("select coalesce(max(id), 0) from pgmem.job_runs").fetchone()[0]
    t = time.perf_counter()
    runs = []
    while True:
        t1 = time.perf_counter()
        conn.execute("call pgmem.run_job('cluster', %s)", (json.dumps(params),))
        runs.append(round(time.perf_counter() - t1, 1))
        if conn.execute("select phase from pgmem.cluster_state where tenant = %s", (TENANT,)).fetchone()[0] == "idle":
            break
    wall = time.perf_counter() - t
    ph, _ = phases(conn, since)
    ph["runs"] = {"count": len(runs), "longest_s": max(runs), "seconds": runs}
    return wall, ph


def insert_memories(conn, tenant: str, vecs: np.ndarray) -> float:
    """INSERT ... SELECT FROM unnest of n memories with embeddings, every trigger on; seconds."""
    from pgvector.psycopg import register_vector

    register_vector(conn)
    t = time.perf_counter()
    with conn.transaction():
        conn.execute("select set_config('pgmem.tenant', %s, true)", (tenant,))
        conn.execute("insert into pgmem.memories (tenant, content, embedding) "
                     "select %s, 'new memory ' || i, e::vector from unnest(%s::text[]) with ordinality u(e, i)",
                     (tenant, ["[" + ",".join(f"{x:.6f}" for x in v) + "]" for v in vecs]))
    return time.perf_counter() - t


def run(admin_dsn_of, source_db: str, n: int, batch: int, inserts: int, postmaster: int | None = None,
        drop_memories_hnsw: bool = False) -> dict:
    """The measurement on a copy of source_db; admin_dsn_of(dbname) gives a superuser DSN."""
    db = f"{source_db}_cluster"
    with psycopg.connect(admin_dsn_of("postgres"), autocommit=True) as pc:
        pc.execute(f'drop database if exists "{db}" with (force)')
        t = time.perf_counter()
        pc.execute(f'create database "{db}" template "{source_db}"')
        log(f"copied {source_db} to {db} in {time.perf_counter() - t:.1f} s")
    from pgmem import migrate

    migrate.upgrade(admin_dsn_of(db))  # this checkout's SQL and engine modules, not the loader's
    R: dict = {"n": n, "batch": batch, "database": db}
    sampler = PeakPss(postmaster) if postmaster else None
    try:
        with psycopg.connect(admin_dsn_of(db), autocommit=True) as conn:
            hnsw = [r[0] for r in conn.execute("select indexname from pg_indexes where schemaname = 'pgmem' "
                                               "and tablename = 'memories' and indexdef ilike '%%using hnsw%%'")]
            R["memories_hnsw"] = hnsw
            if hnsw and drop_memories_hnsw:
                # Every update of an active memories row re-inserts its vector into an HNSW index
                # on memories (no HOT update fits a ~2.3 KB row): ~93% of an update's cost. The
                # storage decision (/work/coord/STORAGE.md) moves the HNSW index to its own table;
                # until that lands, this emulates it on the copy.
                for name in hnsw:
                    conn.execute(f"drop index pgmem.{name}")
                R["memories_hnsw_dropped_on_the_copy"] = True
                log(f"dropped {', '.join(hnsw)} on the copy (emulates the vectors' own table)")
            count = conn.execute("select count(*) from pgmem.memories where tenant = %s and state = 'active' "
                                 "and embedding is not null", (TENANT,)).fetchone()[0]
            R["memories"] = count
            R["settings"] = dict(conn.execute("select key, value from pgmem.settings where tenant = '*' "
                                              "and key like 'cluster%%' order by key").fetchall())
            pid = conn.execute("select pg_backend_pid()").fetchone()[0]
            if sampler:
                sampler.backend = pid
                sampler.start()
            log(f"full run over {count} memories (batch {batch})")
            wall, ph = run_job(conn, {"tenant": TENANT, "batch": batch})
            R["full"] = {"seconds": round(wall, 1), "phases": ph,
                         "backend_peak_private_mb": round(sampler.backend_peak / 2 ** 20, 1) if sampler else None}
            log(f"full run: {wall:.1f} s; " + ", ".join(f"{k} {v['seconds']} s" for k, v in ph.items() if k != "runs")
                + f"; {ph['runs']['count']} run(s)")
            st = conn.execute("select count(*), min(size), max(size), sum(size) from pgmem.clusters "
                              "where tenant = %s and state = 'active'", (TENANT,)).fetchone()
            R["clusters"] = {"active": st[0], "min_size": st[1], "max_size": st[2], "members": st[3],
                             "unassigned": conn.execute("select count(*) from pgmem.memories where tenant = %s and "
                                                        "state = 'active' and embedding is not null and cluster_id is null",
                                                        (TENANT,)).fetchone()[0],
                             "labels": [r[0] for r in conn.execute(
                                 "select label from pgmem.clusters where tenant = %s and state = 'active' "
                                 "order by size desc limit 8", (TENANT,))]}
            hist = conn.execute("select count(*) from pgmem.history where tenant = %s and op = 'update' "
                                "and details->>'job' = 'cluster'", (TENANT,)).fetchone()[0]
            R["history_rows"] = hist

            before = conn.execute("select md5(string_agg(id || ':' || coalesce(cluster_id, 0), ',' order by id)) "
                                  "from pgmem.memories where tenant = %s", (TENANT,)).fetchone()[0]
            wall, ph = run_job(conn, {"tenant": TENANT, "batch": batch})
            after = conn.execute("select md5(string_agg(id || ':' || coalesce(cluster_id, 0), ',' order by id)) "
                                 "from pgmem.memories where tenant = %s", (TENANT,)).fetchone()[0]
            R["second"] = {"seconds": round(wall, 1), "phases": ph, "unchanged": before == after}
            log(f"second run (nothing new): {wall:.1f} s, assignments unchanged: {before == after}")

            # write-time assignment: the trigger's cost per row
            rng = np.random.default_rng(7)
            base = np.array([r[0] for r in conn.execute("select embedding::real[] from pgmem.memories where tenant = %s "
                                                        "order by id limit %s", (TENANT, inserts))], dtype=np.float64)
            vecs = base + rng.normal(scale=0.02, size=base.shape)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            with_c = insert_memories(conn, TENANT, vecs)
            without = insert_memories(conn, "bench_unclustered", vecs)
            assigned = conn.execute("select count(*) from pgmem.memories where tenant = %s and content like 'new memory %%' "
                                    "and cluster_id is not null", (TENANT,)).fetchone()[0]
            # the trigger's look-up alone (nearest of <= 64 centroids), per row
            t = time.perf_counter()
            conn.execute("select count(n.cluster_id) from (select embedding from pgmem.memories where tenant = %s "
                         "order by id limit %s) m cross join lateral pgmem._nearest_cluster(%s, m.embedding) n",
                         (TENANT, inserts, TENANT))
            lookup = time.perf_counter() - t
            R["write_time_assignment"] = {"lookup_us_per_row": round(lookup / inserts * 1e6, 1),
                                          "rows": inserts, "with_clusters_s": round(with_c, 2),
                                          "without_clusters_s": round(without, 2),
                                          "us_per_row_added": round((with_c - without) / inserts * 1e6, 1),
                                          "assigned": assigned}
            log(f"INSERT of {inserts} with embeddings: {with_c:.2f} s with clusters, {without:.2f} s without "
                f"({R['write_time_assignment']['us_per_row_added']} µs/row); {assigned} assigned at write time")

            step = conn.execute("select step_at + interval '1 hour 1 minute' from pgmem.cluster_state where tenant = %s",
                                (TENANT,)).fetchone()[0]
            wall, ph = run_job(conn, {"tenant": TENANT, "batch": batch, "as_of": step.isoformat()})
            R["incremental"] = {"seconds": round(wall, 1), "phases": ph}
            log(f"incremental run an hour later: {wall:.1f} s; " + ", ".join(f"{k} {v['seconds']} s" for k, v in ph.items() if k != "runs"))
            R["backend_peak_rss_mb"] = round(vm_hwm(pid) / 2 ** 20, 1)  # counts the shared buffers it touched
    finally:
        if sampler:
            R["server_peak_pss_mb"] = round(sampler.stop() / 2 ** 20, 1)
            R["backend_peak_private_mb"] = round(sampler.backend_peak / 2 ** 20, 1)
        with psycopg.connect(admin_dsn_of("postgres"), autocommit=True) as pc:
            pc.execute(f'drop database if exists "{db}" with (force)')
    return R


def table(R: dict) -> str:
    lines = [f"cluster job over N={R['memories']} (batch {R['batch']})", "",
             "| run | seconds | phases |", "|---|---|---|"]
    for key in ("full", "second", "incremental"):
        ph = dict(R[key]["phases"])
        runs = ph.pop("runs")
        lines.append(f"| {key} | {R[key]['seconds']} | " + ", ".join(
            f"{k}: {v['seconds']} s / {v['calls']} calls" for k, v in ph.items())
            + f"; {runs['count']} run(s), the longest {runs['longest_s']} s |")
    w = R["write_time_assignment"]
    lines += ["", f"clusters: {R['clusters']['active']} active, sizes {R['clusters']['min_size']}..{R['clusters']['max_size']}, "
              f"unassigned {R['clusters']['unassigned']}",
              f"peak memory: the job's backend {R.get('backend_peak_private_mb')} MB private "
              f"({R['backend_peak_rss_mb']} MB RSS with the shared buffers it touched), server {R.get('server_peak_pss_mb')} MB PSS",
              f"write-time assignment: the nearest-centroid look-up {w['lookup_us_per_row']} µs per row; INSERT with "
              f"clusters vs without: {w['us_per_row_added']:+} µs per row ({w['rows']} rows)"]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="the data set bench/bench.py --n N --load-only loaded")
    ap.add_argument("--batch", type=int, default=20_000, help="rows per call of the job (default 20000)")
    ap.add_argument("--inserts", type=int, default=2_000, help="memories inserted to time the write-time assignment")
    ap.add_argument("--drop-memories-hnsw", action="store_true",
                    help="drop the HNSW index of pgmem.memories on the copy (emulates the vectors in their own table)")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    import bench  # the benchmark's cluster

    c = bench.make_cluster(f"bench_n{args.n}")
    c.start()
    c.wait_ready()
    R = run(lambda db: c.dsn(db), f"bench_n{args.n}", args.n, args.batch, args.inserts, c.postmaster_pid(),
            args.drop_memories_hnsw)
    R["finished_at"] = datetime.now(timezone.utc).isoformat()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"cluster-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(R, indent=2, default=str))
    print(table(R))
    log(f"results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
