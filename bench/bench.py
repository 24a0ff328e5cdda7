#!/usr/bin/env python
"""pgmem benchmark: `make bench` (BENCH_N=100000 by default).

One run, against its own cluster (.pgmem/bench, port 54340, one database per N):

  1. data: N synthetic agent memories (bench/corpus.py: real MiniLM vectors of a cached
     sentence pool, derived memories; see that file for how) loaded with binary COPY
     into pgmem.memories; load strategies are measured on calibration chunks and the
     fastest correct one loads the rest; secondary indexes are (re)built after the load.
  2. read path, same queries, warm cache, one client: pgmem.search (fused, k=10), raw
     pgvector HNSW kNN (the floor), pgmem.search_exact (the exhaustive reference), and the
     naive JAM approach (flat exact index in the client + full-text matches + numpy fusion);
     overlap@10 of search vs search_exact; 8 concurrent clients.
  3. write path: remember_many through MemoryClient with precomputed embeddings, and with
     CPU embedding (Embedder) end to end.
  4. jobs: merge_duplicates (incremental from an empty cursor = the whole table), prune,
     archive_stale; each in a transaction that is rolled back, so the data set stays as
     loaded and `--keep` can reuse it.
  5. peak memory (server: PSS and RSS of the postgres processes sampled from /proc; client:
     ru_maxrss), machine load, and bench/results/<ts>-<N>.json, latest.json, a table, and
     bench/results/latency_vs_n.png.

`--tune` adds the parameter sweeps recorded in bench/README.md.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import re
import resource
import secrets
import shutil
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from psycopg.adapt import Dumper  # noqa: E402
from psycopg.pq import Format  # noqa: E402

import corpus as C  # noqa: E402

RESULTS = HERE / "results"
TENANT = "bench"
PORT = int(os.environ.get("PGMEM_BENCH_PORT", "54340"))  # another port for a second bench cluster
SEED = 20240601
T_START = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T_START:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- sampling
class Sampler(threading.Thread):
    """Samples the server's memory (sum of PSS and of RSS over the postgres processes) and
    the machine load every `period` seconds; keeps the peak overall and per phase."""

    def __init__(self, period: float = 0.5):
        super().__init__(daemon=True)
        self.period = period
        self.postmaster: int | None = None
        self.phase = "setup"
        self.peak_pss = self.peak_rss = 0
        self.phase_peak: dict[str, int] = {}
        self.load_max = 0.0
        self.load_samples: list[float] = []
        self._stop = threading.Event()

    @staticmethod
    def _children(ppid: int) -> list[int]:
        out = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    parts = f.read().rsplit(")", 1)[1].split()
                if int(parts[1]) == ppid:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
        return out

    def sample(self) -> tuple[int, int]:
        if not self.postmaster:
            return 0, 0
        pss = rss = 0
        for pid in [self.postmaster, *self._children(self.postmaster)]:
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Rss:"):
                            rss += int(line.split()[1]) * 1024
                        elif line.startswith("Pss:"):
                            pss += int(line.split()[1]) * 1024
            except OSError:
                pass
        return pss, rss

    def run(self) -> None:
        while not self._stop.is_set():
            pss, rss = self.sample()
            self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)
            self.phase_peak[self.phase] = max(self.phase_peak.get(self.phase, 0), pss)
            la = os.getloadavg()[0]
            self.load_max = max(self.load_max, la)
            self.load_samples.append(la)
            self._stop.wait(self.period)

    def stop(self) -> None:
        self._stop.set()


SAMPLER = Sampler()


def phase(name: str) -> None:
    SAMPLER.phase = name
    log(f"== {name}")


def pct(xs, p) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), p)) if len(xs) else float("nan")


def lat_summary(xs: list[float]) -> dict:
    return {"p50_ms": round(pct(xs, 50), 3), "p95_ms": round(pct(xs, 95), 3), "p99_ms": round(pct(xs, 99), 3),
            "mean_ms": round(float(np.mean(xs)), 3) if xs else None, "count": len(xs)}


# ----------------------------------------------------------------------------- cluster
SETTINGS = {
    "shared_buffers": "4GB",
    "maintenance_work_mem": "'2GB'",
    "max_parallel_maintenance_workers": "2",
    "work_mem": "'64MB'",
    "fsync": "on",
    "effective_cache_size": "'16GB'",
    # a bulk load writes GBs of WAL: fewer forced checkpoints (see README, decision L4)
    "max_wal_size": "'8GB'",
    "checkpoint_timeout": "'30min'",
    "max_connections": "50",
}


def make_cluster(dbname: str):
    from pgmem.cluster import Cluster

    return Cluster(ROOT / ".pgmem" / "bench", port=PORT, dbname=dbname, cron_database="postgres",
                   settings=dict(SETTINGS))


def connect(dsn: str, *, autocommit: bool = True, tenant: str | None = TENANT) -> psycopg.Connection:
    from pgvector.psycopg import register_vector

    opts = f"-c pgmem.tenant={tenant}" if tenant else ""
    conn = psycopg.connect(dsn, autocommit=autocommit, options=opts)
    register_vector(conn)
    return conn


class VectorBytesDumper(Dumper):
    """COPY BINARY of a vector from bytes already in pgvector's wire format (one numpy
    conversion for a whole chunk instead of one per row)."""
    format = Format.BINARY

    def dump(self, obj):
        return obj


COPY_COLS = [
    ("id", "int8"), ("tenant", "text"), ("user_id", "text"), ("agent_id", "text"), ("session_id", "text"),
    ("tier", "text"), ("category", "text"), ("content", "text"), ("who", "text"), ("what", "text"),
    ("happened_at", "timestamptz"), ("location", "text"), ("why", "text"), ("how", "text"),
    ("topics", "text[]"), ("entities", "text[]"), ("importance", "float4"), ("salience", "float4"),
    ("surprise", "float4"), ("embedding", "vector"), ("embedding_model", "text"), ("embedded_at", "timestamptz"),
    ("metadata", "jsonb"), ("token_count", "int4"), ("access_count", "int4"), ("last_accessed_at", "timestamptz"),
    ("created_at", "timestamptz"), ("updated_at", "timestamptz"), ("seq", "int4"),
]
COPY_SQL = f"copy pgmem.memories ({', '.join(c for c, _ in COPY_COLS)}) from stdin (format binary)"
# The set-based equivalent of the AFTER INSERT trigger's history row (040_memory_triggers.sql)
HISTORY_SQL = """insert into pgmem.history (tenant, memory_id, op, after, details)
select m.tenant, m.id, 'add', pgmem._snapshot(m), '{}' from pgmem.memories m where m.id between %s and %s order by m.id"""


def vec_bytes(vecs: np.ndarray) -> list[bytes]:
    head = struct.pack(">HH", vecs.shape[1], 0)
    be = np.ascontiguousarray(vecs, dtype=">f4")
    return [head + be[i].tobytes() for i in range(be.shape[0])]


# The data set's version: a kept data set of another version is reloaded. 2 (issue 23): the
# temporal links remember() writes for every turn (the neighbour signal reads them), and the
# recent memories' own index (pgmem.recent_vectors).
DATASET_VERSION = 2
# Multi-tenant runs (--tenants T): each session of the corpus (SESSION rows) belongs to one tenant,
# drawn with Zipf weights 1/rank (bench_tenants), so that every tenant's memories are whole
# sessions spread over the year, like the single tenant's.
SESSION = 40
TENANTS: list[str] | None = None
SESSION_TENANT: np.ndarray | None = None


def tenant_of(r: dict) -> str:
    i = (r["id"] - 1) // SESSION
    if SESSION_TENANT is None or i >= len(SESSION_TENANT):  # (the rows of the marginal-cost probe: rolled back)
        return TENANT
    return TENANTS[int(SESSION_TENANT[i])]


def bench_tenants(n: int, t: int, exponent: float = 1.0, seed: int = SEED) -> tuple[list[str], np.ndarray]:
    """T tenant names (t0001 = the largest) and, per session of SESSION rows, its tenant: drawn with
    weights 1/rank^exponent (Zipf). With T = 1,000 and N = 1,000,000 the largest holds ~13% of the
    memories, the median ~270, the smallest ~130."""
    names = [f"t{i:04d}" for i in range(1, t + 1)]
    w = 1.0 / np.arange(1, t + 1) ** exponent
    rng = np.random.default_rng([seed, t])
    sessions = -(-n // SESSION)
    # every tenant gets at least one session, the rest are drawn by weight
    draw = rng.choice(t, size=max(0, sessions - t), p=w / w.sum())
    per = np.concatenate([np.arange(t), draw])
    rng.shuffle(per)
    return names, per


def copy_rows(conn, rows: list[dict], vecs: np.ndarray, *, replica: bool, commit: bool = True) -> float:
    """COPY one chunk in one transaction; replica = skip triggers and write history set-based.
    Returns seconds (COPY + history + commit)."""
    vb = vec_bytes(vecs)
    now = datetime.now(timezone.utc)
    t = time.perf_counter()
    tx = conn.transaction(force_rollback=not commit)
    with tx:
        with conn.cursor() as cur:
            if replica:
                cur.execute("set local session_replication_role = replica")
            with cur.copy(COPY_SQL) as cp:
                cp.set_types([t_ for _, t_ in COPY_COLS])
                for r, v in zip(rows, vb):
                    cp.write_row((r["id"], tenant_of(r), r["user_id"], r["agent_id"], r["session_id"], r["tier"],
                                  r["category"], r["content"], r["who"], r["what"], r["happened_at"], r["location"],
                                  r["why"], r["how"], r["topics"], r["entities"], r["importance"], r["salience"],
                                  r["surprise"], v, C.MODEL_ID, now, r["metadata"], r["token_count"],
                                  r["access_count"], r["last_accessed_at"], r["created_at"], r["created_at"], r["seq"]))
            if replica:
                # what the BEFORE trigger would have refused: check the chunk set-based
                bad = cur.execute(
                    "select count(*) from pgmem.memories m where m.id between %s and %s and not exists "
                    "(select 1 from pgmem.categories c where c.category = m.category and c.tenant in ('*', m.tenant))",
                    (rows[0]["id"], rows[-1]["id"])).fetchone()[0]
                if bad:
                    raise RuntimeError(f"{bad} rows with an unknown category")
                cur.execute(HISTORY_SQL, (rows[0]["id"], rows[-1]["id"]))
    return time.perf_counter() - t


# ----------------------------------------------------------------------------- load
def load_dataset(c, admin_dsn: str, corpus: C.Corpus, n: int, now: datetime, meta: dict) -> dict:
    phase("load")
    conn = connect(admin_dsn, autocommit=True)
    vec_oid = conn.execute("select 'vector'::regtype::oid").fetchone()[0]
    conn.adapters.register_dumper(bytes, type("VB", (VectorBytesDumper,), {"oid": vec_oid}))
    info: dict = {"strategies": {}}
    calib = max(1000, min(10000, n // 20))
    chunk = 20000
    gen_s = 0.0

    def rows_for(lo: int, hi: int):
        nonlocal gen_s
        t = time.perf_counter()
        out_rows, out_vecs = [], []
        for b in range(lo // C.BLOCK, (hi - 1) // C.BLOCK + 1):
            r, v = C.derive_block(corpus, n, b, SEED, now, start=max(lo, b * C.BLOCK), stop=min(hi, (b + 1) * C.BLOCK))
            out_rows += r
            out_vecs.append(v)
        gen_s += time.perf_counter() - t
        return out_rows, np.concatenate(out_vecs)

    pos = 0
    copy_s = 0.0

    def run(strategy: str, lo: int, hi: int, replica: bool) -> float:
        nonlocal copy_s
        rows, vecs = rows_for(lo, hi)
        s = copy_rows(conn, rows, vecs, replica=replica)
        copy_s += s
        st = info["strategies"].setdefault(strategy, {"rows": 0, "seconds": 0.0})
        st["rows"] += hi - lo
        st["seconds"] += s
        st["per_s"] = round(st["rows"] / st["seconds"], 1)
        return s

    # S1: COPY as a user would, triggers and every index of the migration in place
    run("S1_triggers_all_indexes", 0, calib, False)
    pos = calib
    log(f"S1 (triggers, all indexes; HNSW insertion deferred to the index job): "
        f"{info['strategies']['S1_triggers_all_indexes']['per_s']}/s")
    # the secondary indexes of memories and the HNSW index of memory_vectors (STORAGE.md)
    defs = conn.execute("select indexname, indexdef from pg_indexes where schemaname = 'pgmem' and "
                        "tablename in ('memories', 'memory_vectors', 'recent_vectors') and indexname not in "
                        "('memories_pkey', 'memory_vectors_pkey', 'recent_vectors_pkey') order by indexname").fetchall()
    meta["index_defs"] = defs
    save_meta(conn, meta)
    for name, _ in defs:
        conn.execute(f"drop index pgmem.{name}")
    # S2: triggers, secondary indexes dropped (rebuilt after the load)
    if pos < n:
        hi = min(n, pos + calib)
        run("S2_triggers_no_indexes", pos, hi, False)
        pos = hi
    # S3: session_replication_role = replica (no triggers) + the same history rows set-based
    if pos < n:
        hi = min(n, pos + calib)
        run("S3_replica_sethistory_no_indexes", pos, hi, True)
        pos = hi
    s2 = info["strategies"].get("S2_triggers_no_indexes", {}).get("per_s", 0)
    s3 = info["strategies"].get("S3_replica_sethistory_no_indexes", {}).get("per_s", 0)
    best_replica = s3 > s2
    best = "S3_replica_sethistory_no_indexes" if best_replica else "S2_triggers_no_indexes"
    info["chosen"] = best
    log(f"S2 (triggers, no indexes): {s2}/s; S3 (replica + set-based history): {s3}/s -> {best}")
    last = time.perf_counter()
    while pos < n:
        hi = min(n, pos + chunk)
        run(best, pos, hi, best_replica)
        pos = hi
        if time.perf_counter() - last > 15:
            last = time.perf_counter()
            st = info["strategies"][best]
            log(f"  loaded {pos}/{n} ({st['per_s']}/s)")
    conn.execute("select setval(pg_get_serial_sequence('pgmem.memories', 'id'), %s)", (n,))
    info["copy_s"] = round(copy_s, 2)
    info["generate_s"] = round(gen_s, 2)
    # every active embedded memory under the HNSW index at once (what the index job would do
    # row by row): the vectors table filled before its index is built
    phase("vectors")
    t = time.perf_counter()
    conn.execute("truncate pgmem.vector_queue")
    conn.execute("insert into pgmem.memory_vectors (memory_id, tenant, user_scope, embedding) "
                 "select m.id, m.tenant, coalesce(m.user_id, ''), m.embedding from pgmem.memories m "
                 "where m.state = 'active' and m.embedding is not null "
                 "on conflict (memory_id) do nothing")
    # ... and the recent ones under the recent memories' own index (revision 0012; the index job
    # keeps it from then on)
    conn.execute("set pgmem.tenant = '*'")
    info["recent_vectors"] = conn.execute("select pgmem.rebuild_recent_vectors()").fetchone()[0]
    conn.execute(f"set pgmem.tenant = '{TENANT}'")
    info["vectors_copy_s"] = round(time.perf_counter() - t, 2)
    log(f"memory_vectors filled in {info['vectors_copy_s']} s ({info['recent_vectors']} of them recent)")

    # indexes back, exactly as the migration defined them
    phase("index build")
    idx_s = {}
    est = n * (384 * 4 + 16 * 2 * 8 + 64)
    mwm_mb = int(max(2048, min(8192, 1.5 * est / 2**20)))
    info["hnsw_maintenance_work_mem_mb"] = mwm_mb
    conn.execute(f"set maintenance_work_mem = '{mwm_mb}MB'")
    conn.execute("set max_parallel_maintenance_workers = 2")
    for name, ddl in sorted(defs, key=lambda d: "hnsw" in d[1]):  # HNSW last
        t = time.perf_counter()
        conn.execute(ddl)
        idx_s[name] = round(time.perf_counter() - t, 2)
        log(f"  {name}: {idx_s[name]} s")
    info["index_build_s"] = idx_s
    info["hnsw_build_s"] = idx_s.get("memory_vectors_hnsw")
    info["index_build_total_s"] = round(sum(idx_s.values()), 2)

    # the marginal cost of COPY into the live, fully indexed table (2000 rows, rolled back)
    extra = min(2000, max(200, n // 50))
    rows, vecs = C.derive_block(corpus, C.BLOCK, 0, SEED + 77, now)
    rows, vecs = rows[:extra], vecs[:extra]
    for i, r in enumerate(rows):
        r["id"] = n + 1 + i
    with conn.transaction(force_rollback=True):
        s = copy_rows(conn, rows, vecs, replica=False)
        # ... and what the index job then pays to put them under the HNSW index
        t = time.perf_counter()
        indexed = conn.execute("select indexed from pgmem.index_vectors(batch => %s)", (extra,)).fetchone()[0]
        s_idx = time.perf_counter() - t
    info["strategies"]["S1_triggers_all_indexes_at_full_size"] = {"rows": extra, "seconds": round(s, 3),
                                                                   "per_s": round(extra / s, 1)}
    info["indexer_at_full_size"] = {"rows": indexed, "seconds": round(s_idx, 3), "per_s": round(indexed / s_idx, 1)}
    log(f"S1 at full size (triggers + all indexes, {extra} rows, rolled back): {extra / s:.0f}/s; "
        f"then the index job: {indexed / s_idx:.0f}/s")

    # the temporal bindings remember() writes for every turn (the previous memory of its session,
    # sql/130_bindings.sql), set-based: the neighbour signal of the default profile reads them
    phase("links")
    t = time.perf_counter()
    conn.execute("""insert into pgmem.links (tenant, src_id, dst_id, kind, weight)
                    select x.tenant, x.prev, x.id, 'temporal', 1.0
                      from (select m.tenant, m.id, lag(m.id) over (partition by m.tenant, m.session_id
                                                                   order by m.created_at, m.id) as prev
                              from pgmem.memories m where m.session_id is not null and m.state = 'active') x
                     where x.prev is not null
                    on conflict do nothing""")
    info["links_s"] = round(time.perf_counter() - t, 2)
    info["links"] = conn.execute("select count(*) from pgmem.links").fetchone()[0]
    log(f"  temporal links: {info['links']} in {info['links_s']} s")

    # the read path's lexical statistics (sql/201_lexical.sql): the replica-mode chunks skipped
    # the triggers that keep them, so they are recounted from the loaded rows
    phase("lexicon")
    t = time.perf_counter()
    conn.execute("set pgmem.tenant = '*'")  # every tenant's (one in a single-tenant run)
    info["lexicon_rows"] = conn.execute("select pgmem.rebuild_lexicon()").fetchone()[0]
    conn.execute(f"set pgmem.tenant = '{TENANT}'")
    info["lexicon_s"] = round(time.perf_counter() - t, 2)
    log(f"  lexicon: {info['lexicon_rows']} rows in {info['lexicon_s']} s")

    phase("vacuum analyze")
    t = time.perf_counter()
    conn.execute("vacuum (analyze) pgmem.memories")
    conn.execute("vacuum (analyze) pgmem.memory_vectors")
    conn.execute("vacuum (analyze) pgmem.recent_vectors")
    conn.execute("vacuum (analyze) pgmem.history")
    conn.execute("vacuum (analyze) pgmem.links")
    info["vacuum_analyze_s"] = round(time.perf_counter() - t, 2)
    info["load_total_s"] = round(copy_s + info["vectors_copy_s"] + info["index_build_total_s"] + info["vacuum_analyze_s"], 2)
    info["load_rate_per_s"] = round(n / (copy_s + info["vectors_copy_s"] + info["index_build_total_s"]), 1)
    hist = conn.execute("select count(*) from pgmem.history where op = 'add'").fetchone()[0]
    info["history_rows"] = hist
    if hist != n:
        raise RuntimeError(f"history has {hist} add rows for {n} memories")
    conn.close()
    return info


def save_meta(conn, meta: dict) -> None:
    conn.execute("create table if not exists public.bench_meta (key text primary key, value jsonb)")
    conn.execute("insert into public.bench_meta values ('dataset', %s) on conflict (key) do update set value = excluded.value",
                 (json.dumps(meta, default=str),))


def read_meta(dsn: str) -> dict | None:
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            if conn.execute("select to_regclass('public.bench_meta')").fetchone()[0] is None:
                return None
            row = conn.execute("select value from public.bench_meta where key = 'dataset'").fetchone()
            return row[0] if row else None
    except psycopg.OperationalError:
        return None


# ----------------------------------------------------------------------------- queries
FUSED_SQL = ("select * from pgmem.search(query_text => %s, query_embedding => %s, k => 10, actor => %s, "
             "location => %s, candidates => %s)")
EXACT_SQL = ("select * from pgmem.search_exact(query_text => %s, query_embedding => %s, k => 10, actor => %s, "
             "location => %s)")
# the raw kNN floor: pgvector's HNSW over the vectors table (STORAGE decision: the HNSW index is on
# pgmem.memory_vectors since revision 0006; on memories this was a scan of every vector)
KNN_SQL = ("select memory_id from pgmem.memory_vectors where tenant = %s "
           "order by embedding <=> %s limit 10")


def run_fused(cur, q, vec, candidates=None):
    cur.execute(FUSED_SQL, (q["text"], vec, q["actor"], q["location"], candidates), prepare=True)
    return [r[0] for r in cur.fetchall()]


def run_exact(cur, q, vec):
    cur.execute(EXACT_SQL, (q["text"], vec, q["actor"], q["location"]), prepare=True)
    return [r[0] for r in cur.fetchall()]


RANKINGS_SQL = {
    "activate": "select id from pgmem.activate(query_text => %s, query_embedding => %s, k => 10)",
    "recall": "select id from pgmem.recall(query_text => %s, query_embedding => %s, k => 10)",
    "build_context": "select id from pgmem.build_context(query_text => %s, query_embedding => %s)",
    # the layered pipeline for one message (it writes the message and the conversation state; not
    # the memory: remember => false), retrieval at the behaviour's depth
    "context_for": "select pgmem.context_for(query_text => %s, query_embedding => %s, conversation_id => 'bench-conv', "
                   "user_id => 'bench-user', remember => false)",
}


def run_ranking(cur, name, q, vec):
    cur.execute(RANKINGS_SQL[name], (q["text"], vec), prepare=True)
    return [r[0] for r in cur.fetchall()] if name != "context_for" else []


def run_knn(cur, q, vec):
    cur.execute(KNN_SQL, (TENANT, vec), prepare=True)
    return [r[0] for r in cur.fetchall()]


def timed(fn, *a):
    t = time.perf_counter()
    out = fn(*a)
    return (time.perf_counter() - t) * 1000, out


def measure(cur, fn, queries, vecs, *, warm: bool = True, extra=()) -> tuple[list[float], list[list[int]]]:
    if warm:
        for q, v in zip(queries, vecs):
            fn(cur, q, v, *extra)
    lat, ids = [], []
    for q, v in zip(queries, vecs):
        ms, out = timed(fn, cur, q, v, *extra)
        lat.append(ms)
        ids.append(out)
    return lat, ids


def overlap(a: list[list[int]], b: list[list[int]], k: int = 10) -> float:
    vals = [len(set(x[:k]) & set(y[:k])) / max(1, min(k, len(y))) for x, y in zip(a, b)]
    return float(np.mean(vals)) if vals else float("nan")


def interleaved(fns: dict, queries, vecs, *, limits: dict | None = None, warm: dict | None = None) -> dict:
    """Run every fn on every query, rotating their order per query; returns {name: (latencies, ids)}.
    limits: name -> (max queries, [time budget in ms]) (stops that fn after at least 20 queries
    once its summed time exceeds the budget). warm: name -> warm-up queries (default: all)."""
    limits, warm = limits or {}, warm or {}
    names = list(fns)
    for name in names:
        nw = warm.get(name, len(queries))
        for q, v in list(zip(queries, vecs))[:nw]:
            fns[name](q, v)
    out = {name: ([], []) for name in names}
    spent = {name: 0.0 for name in names}
    for i, (q, v) in enumerate(zip(queries, vecs)):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            if name in limits:
                mx, bud = limits[name]
                if len(out[name][0]) >= mx or (len(out[name][0]) >= 20 and spent[name] > bud[0]):
                    continue
            ms, ids = timed(fns[name], q, v)
            spent[name] += ms
            out[name][0].append(ms)
            out[name][1].append(ids)
    return out


# ----------------------------------------------------------------------------- naive (JAM)
class NaiveJAM:
    """The source design's way (jam-journalistic-agent-memory.md): a flat exact vector index
    held by the application (FAISS IndexFlat = every vector in memory, scored exhaustively),
    the full-text engine for lexical matches (FTS5 there; the same tsvector + ts_rank here,
    every match returned, as JAM's FTS query has no LIMIT), and the six signals computed and
    fused in Python/numpy over every memory. Loaded once (not per query)."""

    ROW = 2 + 4 + 8 + 4 + 4 + 384 * 4

    def __init__(self, dsn: str, dim: int = 384):
        t = time.perf_counter()
        self.conn = connect(dsn, autocommit=True)
        cur = self.conn.cursor()
        n = cur.execute("select count(*) from pgmem.memories where tenant = %s and state = 'active' "
                        "and embedding is not null", (TENANT,)).fetchone()[0]
        self.n = n
        self.ids = np.empty(n, dtype=np.int64)
        self.M = np.empty((n, dim), dtype=np.float32)
        row_dt = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"), ("dim", ">i2"),
                           ("unused", ">i2"), ("v", ">f4", (dim,))])
        assert row_dt.itemsize == self.ROW
        buf = bytearray()
        got = 0
        header_done = False
        with cur.copy("copy (select id, embedding from pgmem.memories where tenant = %s and state = 'active' "
                      "and embedding is not null order by id) to stdout (format binary)", (TENANT,)) as cp:
            for data in cp:
                buf += data
                if not header_done and len(buf) >= 19:
                    ext = struct.unpack(">i", buf[15:19])[0]
                    del buf[:19 + ext]
                    header_done = True
                whole = min(len(buf) // self.ROW, n - got)
                if whole:
                    arr = np.frombuffer(bytes(buf[:whole * self.ROW]), dtype=row_dt)
                    self.ids[got:got + whole] = arr["id"]
                    self.M[got:got + whole] = arr["v"]
                    got += whole
                    del buf[:whole * self.ROW]
        assert got == n, (got, n)
        # the metadata JAM keeps next to the index (SQLite there): time, actor, place, usage
        self.created = np.empty(n)
        self.last = np.empty(n)
        self.access = np.empty(n)
        who_codes, loc_codes = {}, {}
        self.who = np.empty(n, dtype=np.int32)
        self.loc = np.empty(n, dtype=np.int32)
        i = 0
        with self.conn.transaction(), self.conn.cursor(name="naive_meta") as sc:
            sc.itersize = 50000
            sc.execute("select extract(epoch from created_at), extract(epoch from coalesce(last_accessed_at, created_at)), "
                       "access_count, who, location from pgmem.memories where tenant = %s and state = 'active' "
                       "and embedding is not null order by id", (TENANT,))
            for cr, la, ac, who, loc in sc:
                self.created[i], self.last[i], self.access[i] = cr, la, ac
                self.who[i] = who_codes.setdefault(who, len(who_codes))
                self.loc[i] = loc_codes.setdefault(loc, len(loc_codes))
                i += 1
        self.who_codes, self.loc_codes = who_codes, loc_codes
        self.max_access = float(self.access.max()) if n else 0.0
        # the profile search uses by default: weights and parameters as stored
        self.weights, self.params = self.conn.execute(
            "select weights, params from pgmem.profiles where name = 'jam' and tenant = '*'").fetchone()
        self.load_s = time.perf_counter() - t
        self.mem_bytes = self.M.nbytes + self.ids.nbytes + 3 * self.created.nbytes + 2 * self.who.nbytes

    @staticmethod
    def path_overlap(a: str | None, b: str | None) -> float:
        if a is None or b is None:
            return 0.0
        ca, cb = [x for x in a.split("/") if x], [x for x in b.split("/") if x]
        return len(set(ca) & set(cb)) / max(len(ca), len(cb), 1)

    def search(self, q: dict, vec: np.ndarray, k: int = 10) -> list[int]:
        """The six JAM signals over every memory, as pgmem defines them (200_search.sql), in numpy."""
        now = time.time()
        p = self.params
        rank_mode = p.get("lexical", "coverage") == "rank"
        if rank_mode:
            rows = self.conn.execute(
                "select id, ts_rank(tsv, pgmem.query_tsquery(%s), 1) from pgmem.memories where tenant = %s "
                "and state = 'active' and tsv @@ pgmem.query_tsquery(%s)", (q["text"], TENANT, q["text"])).fetchall()
            has_lex = self.conn.execute("select pgmem.query_tsquery(%s) is not null", (q["text"],)).fetchone()[0]
        else:
            # share of the query's lexemes each matching memory contains
            nterms, has_lex = self.conn.execute(
                "select greatest(cardinality(pgmem.query_terms(%s)), 1), pgmem.query_tsquery(%s) is not null",
                (q["text"], q["text"])).fetchone()
            rows = self.conn.execute(
                "select id, (select count(*) from unnest(pgmem.query_terms(%s)) t where tsv @@ t) from pgmem.memories "
                "where tenant = %s and state = 'active' and tsv @@ pgmem.query_tsquery(%s)",
                (q["text"], TENANT, q["text"])).fetchall()
        w = {a: float(b) for a, b in self.weights.items()}
        missing = {"actor"} if q["actor"] is None else set()
        if q["location"] is None:
            missing.add("spatial")
        if not has_lex:
            missing.add("lexical")
        tot = sum(b for a, b in w.items() if a not in missing)
        w = {a: (0.0 if a in missing else b / tot) for a, b in w.items()}
        score = w.get("semantic", 0) * (1 + self.M @ vec.astype(np.float32)) / 2  # flat exact index
        if rows and w.get("lexical"):
            lid = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            lr = np.fromiter((float(r[1]) for r in rows), dtype=np.float64, count=len(rows))
            pos = np.searchsorted(self.ids, lid)
            ok = (pos < self.n) & (self.ids[np.minimum(pos, self.n - 1)] == lid)
            norm = lr.max() if rank_mode else float(nterms)
            if norm > 0:
                score[pos[ok]] += w["lexical"] * lr[ok] / norm
        hl_r = float(p.get("recency_half_life_days", 30))
        hl_u = float(p.get("usage_half_life_days", 30))
        score += w.get("recency", 0) * np.exp(-math.log(2) * np.maximum(now - self.created, 0) / 86400 / hl_r)
        if w.get("actor"):
            code = self.who_codes.get(q["actor"], -1)
            score += w["actor"] * np.where(self.who == code, 1.0, float(p.get("actor_mismatch", 0.3)))
        if w.get("spatial"):
            table = np.array([self.path_overlap(loc, q["location"]) for loc in self.loc_codes])
            score += w["spatial"] * table[self.loc]
        if self.max_access > 0 and w.get("usage"):
            score += w["usage"] * np.minimum(1.0, self.access / self.max_access) * \
                np.exp(-math.log(2) * np.maximum(now - self.last, 0) / 86400 / hl_u)
        top = np.argpartition(-score, k)[:k]
        top = top[np.lexsort((self.ids[top], -score[top]))]
        return self.ids[top].tolist()

    def knn(self, vec: np.ndarray, k: int = 10) -> list[int]:
        s = self.M @ vec.astype(np.float32)
        top = np.argpartition(-s, k)[:k]
        return self.ids[top[np.argsort(-s[top])]].tolist()


# ----------------------------------------------------------------------------- phases
def read_path(app_dsn: str, admin_dsn: str, corpus: C.Corpus, n: int, args, R: dict) -> dict:
    phase("read path: single client")
    qs, qv = corpus.queries[:args.queries], corpus.query_vecs[:args.queries]
    conn = connect(app_dsn)
    cur = conn.cursor()
    cur.execute("set hnsw.ef_search = %s" % int(args.knn_ef))
    cur.execute("set hnsw.iterative_scan = relaxed_order")
    with connect(admin_dsn) as kc:  # the owner: see run_knn
        R["knn_plan"] = "\n".join(r[0] for r in kc.execute("explain " + KNN_SQL, (TENANT, qv[0])).fetchall())
    phase("read path: naive JAM index load")
    naive = NaiveJAM(app_dsn)
    log(f"naive: flat index of {naive.n} vectors loaded in {naive.load_s:.1f} s ({naive.mem_bytes / 2**20:.0f} MiB)")
    phase("read path: single client")
    # every method on every query, interleaved (rotating order per query), so that a change of
    # machine load during the run (other sessions share these 2 cores) hits all of them alike
    n_exact = min(args.exact_queries or len(qs), len(qs))
    budget = [args.exact_seconds * 1000.0]

    owner = connect(admin_dsn)  # the table owner: row-level security does not apply to it
    ocur = owner.cursor()
    # search_exact, the reference, runs as the owner with a timeout of its own: as pgmem_app it hit
    # the app role's 30 s statement timeout at 1,000,000 (bench/README.md), so overlap@10 was never
    # measured there
    exact_conn = connect(admin_dsn)
    exact_conn.execute(f"set statement_timeout = '{int(args.exact_timeout)}s'")
    ecur = exact_conn.cursor()

    def exact_fn(q, v):
        return run_exact(ecur, q, v)

    # JAM's full-text engine (FTS5) is in process: no row-level security. The naive method runs its
    # full-text query as the owner (as pgmem's SECURITY DEFINER read functions do); the same
    # flat index with the query under RLS (pgmem_app) is reported as naive_app_role.
    naive_app = copy.copy(naive)
    naive.conn = owner
    # the raw kNN floor as the owner: pgmem_app has no rights on pgmem.memory_vectors (search reads
    # it inside its SECURITY DEFINER ranking functions)
    # the same search with the recording of retrievals off for the session (issue 24: its cost per
    # search, asked at most 1 ms at p50)
    norec = connect(app_dsn)
    norec.execute("set pgmem.record_retrievals = off")
    nrcur = norec.cursor()
    res = interleaved({"fused": lambda q, v: run_fused(cur, q, v), "knn": lambda q, v: run_knn(ocur, q, v),
                       "fused_norecord": lambda q, v: run_fused(nrcur, q, v),
                       **{name: (lambda name: lambda q, v: run_ranking(cur, name, q, v))(name) for name in RANKINGS_SQL},
                       "naive": naive.search, "exact": exact_fn,
                       "fused_owner": lambda q, v: run_fused(ocur, q, v), "naive_app_role": naive_app.search}, qs, qv,
                      limits={"exact": (n_exact, budget)}, warm={"exact": 2})
    naive.conn = naive_app.conn
    owner.close()
    exact_conn.close()
    norec.close()
    (fused_lat, fused_ids), (knn_lat, knn_ids) = res["fused"], res["knn"]
    (naive_lat, naive_ids), (exact_lat, exact_ids) = res["naive"], res["exact"]
    n_exact = len(exact_lat)
    for name, (lat, _) in res.items():
        log(f"{name:6s}: p50 {pct(lat, 50):8.2f} ms, p95 {pct(lat, 95):8.2f} ms over {len(lat)} queries")
    if n_exact < len(qs):
        log(f"search_exact: time budget of {args.exact_seconds:.0f} s reached after {n_exact} queries")
    true_knn = [naive.knn(v) for v in qv]
    out = {
        "queries": len(qs), "exact_queries": n_exact,
        "fused": lat_summary(fused_lat), "knn": lat_summary(knn_lat), "exact": lat_summary(exact_lat),
        "naive": lat_summary(naive_lat), "fused_owner": lat_summary(res["fused_owner"][0]),
        "naive_app_role": lat_summary(res["naive_app_role"][0]),
        "fused_norecord": lat_summary(res["fused_norecord"][0]),
        **{name: lat_summary(res[name][0]) for name in RANKINGS_SQL},
        "record_cost_p50_ms": round(pct(res["fused"][0], 50) - pct(res["fused_norecord"][0], 50), 3),
        "fused_owner_same_ids": round(overlap(res["fused_owner"][1], fused_ids), 4),
        "overlap_at_10": round(overlap(fused_ids[:n_exact], exact_ids), 4),
        "overlap_naive_vs_exact": round(overlap(naive_ids[:n_exact], exact_ids), 4),
        "knn_recall_at_10": round(overlap(knn_ids, true_knn), 4),
        "naive_load_s": round(naive.load_s, 2), "naive_index_mib": round(naive.mem_bytes / 2**20, 1),
    }
    # the most naive version: fetch every memory's vector and fields for each query
    nf = args.fetchall_queries if args.fetchall_queries is not None else (5 if n <= 200_000 else 2)
    fa = []
    for q, v in zip(qs[:nf], qv[:nf]):
        t = time.perf_counter()
        nv = NaiveJAM(app_dsn)
        nv.search(q, v)
        nv.conn.close()
        del nv
        fa.append((time.perf_counter() - t) * 1000)
    out["naive_fetch_all"] = lat_summary(fa)
    log(f"naive fetch-all-per-query: mean {np.mean(fa):.0f} ms over {nf} queries")
    R["_ids"] = {"fused": fused_ids, "exact": exact_ids, "knn": knn_ids, "true_knn": true_knn}
    R["_naive"] = naive
    conn.close()
    return out


def multitenant(app_dsn: str, admin_dsn: str, corpus: C.Corpus, args) -> dict:
    """Issue 23, multi-tenant scale: search in the largest, a median and the smallest tenant of the
    Zipf-sized tenants, each against the raw kNN over that tenant's own rows (pgvector's HNSW with
    the tenant filter, or the b-tree on memory_vectors(tenant) and a sort, whichever the planner
    takes for the tenant: the best a client could do), interleaved, as pgmem_app."""
    phase("multi-tenant read path")
    qs, qv = corpus.queries[:args.queries], corpus.query_vecs[:args.queries]
    with connect(admin_dsn, tenant=None) as ac:
        sizes = ac.execute("select tenant, count(*) from pgmem.memories where state = 'active' "
                           "group by 1 order by 2 desc, 1").fetchall()
        counts = np.array([c for _, c in sizes])
        picked = {"largest": sizes[0], "median": sizes[len(sizes) // 2], "smallest": sizes[-1]}
        for _, (t, _) in picked.items():
            ac.execute("select pgmem.grant_tenant('bench_app', %s)", (t,))
    out: dict = {"tenants": len(sizes), "size_max": int(counts.max()), "size_median": int(np.median(counts)),
                 "size_min": int(counts.min()), "size_p90": int(np.percentile(counts, 90))}
    for label, (t, size) in picked.items():
        conn = connect(app_dsn, tenant=t)
        cur = conn.cursor()
        owner = connect(admin_dsn, tenant=t)
        ocur = owner.cursor()
        ocur.execute("set hnsw.ef_search = %s" % int(args.knn_ef))
        ocur.execute("set hnsw.iterative_scan = relaxed_order")
        # the plan made for this tenant (a prepared statement's generic plan, made for any
        # tenant, would sort the largest one's vectors through the tenant b-tree)
        ocur.execute("set plan_cache_mode = force_custom_plan")
        res = interleaved({"fused": lambda q, v: run_fused(cur, q, v),
                           "knn": lambda q, v: [r[0] for r in ocur.execute(KNN_SQL, (t, v), prepare=True).fetchall()]},
                          qs, qv)
        plan = "\n".join(r[0] for r in ocur.execute("explain " + KNN_SQL, (t, qv[0])).fetchall())
        f, k = lat_summary(res["fused"][0]), lat_summary(res["knn"][0])
        out[label] = {"tenant": t, "memories": int(size), "fused": f, "knn": k, "knn_plan": plan,
                      "fused_knn_p95_ratio": round(f["p95_ms"] / k["p95_ms"], 2)}
        log(f"{label} tenant {t} ({size} memories): search p50 {f['p50_ms']:.2f} / p95 {f['p95_ms']:.2f} ms, "
            f"kNN p50 {k['p50_ms']:.2f} / p95 {k['p95_ms']:.2f} ms, ratio {out[label]['fused_knn_p95_ratio']}")
        conn.close()
        owner.close()
    return out


def concurrent(app_dsn: str, corpus: C.Corpus, args, which: str) -> dict:
    phase(f"read path: {args.clients} clients ({which})")
    qs, qv = corpus.queries[:args.queries], corpus.query_vecs[:args.queries]
    fn = run_fused if which == "fused" else run_knn
    barrier = threading.Barrier(args.clients + 1)
    go = threading.Event()
    stop_at = [0.0]
    lats: list[list[float]] = [[] for _ in range(args.clients)]

    def worker(i: int):
        conn = connect(app_dsn)
        cur = conn.cursor()
        cur.execute("set hnsw.ef_search = %s" % int(args.knn_ef))
        cur.execute("set hnsw.iterative_scan = relaxed_order")
        for j in range(5):
            fn(cur, qs[(i * 31 + j) % len(qs)], qv[(i * 31 + j) % len(qs)])
        barrier.wait()
        go.wait()
        j = i * 31
        while time.perf_counter() < stop_at[0]:
            ms, _ = timed(fn, cur, qs[j % len(qs)], qv[j % len(qs)])
            lats[i].append(ms)
            j += 1
        conn.close()

    with ThreadPoolExecutor(args.clients) as ex:
        futs = [ex.submit(worker, i) for i in range(args.clients)]
        barrier.wait()
        t0 = time.perf_counter()
        stop_at[0] = t0 + args.duration
        go.set()
        for f in futs:
            f.result()
        el = time.perf_counter() - t0
    allx = [x for l in lats for x in l]
    log(f"{which} x{args.clients}: {len(allx) / el:.1f} qps, p95 {pct(allx, 95):.1f} ms")
    return {"qps": round(len(allx) / el, 2), "seconds": round(el, 2), **lat_summary(allx)}


class PrecomputedEmbedder:
    """An Embedder stand-in that returns vectors computed beforehand (looked up by the exact
    text the client would embed), so remember_many runs its normal path with the embedding
    given and no model time."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table
        self.model_name = C.MODEL_ID

    def embed(self, text):
        return self.table[text]

    def embed_many(self, texts, batch_size=None, show_progress=False):
        return np.stack([self.table[t] for t in texts])


def write_path(app_dsn: str, corpus: C.Corpus, args, now: datetime) -> dict:
    from pgmem.client import MemoryClient
    from pgmem.embedding import Embedder, embedding_text

    phase("write path: remember_many, precomputed embeddings")
    events, vecs = C.fresh_events(corpus, args.ingest_max, SEED, now)
    table = {embedding_text(content=e["content"], who=e["who"], where=e["where"], why=e["why"], how=e["how"]): v
             for e, v in zip(events, vecs)}
    out: dict = {}
    mc = MemoryClient(app_dsn, tenant=TENANT, embedder=PrecomputedEmbedder(table), max_size=1)
    conn = connect(app_dsn, autocommit=False)
    decisions: dict[str, int] = {}
    done = 0
    t = time.perf_counter()
    bs = 256
    while done < len(events) and time.perf_counter() - t < args.ingest_seconds:
        res = mc.remember_many(events[done:done + bs], batch_size=bs, extract=False, embed=True, progress=False, conn=conn)
        for r in res:
            decisions[r.decision] = decisions.get(r.decision, 0) + 1
        done += len(res)
    el = time.perf_counter() - t
    conn.rollback()
    conn.close()
    out["precomputed"] = {"memories": done, "seconds": round(el, 2), "per_s": round(done / el, 1),
                          "batch_size": bs, "decisions": decisions, "rolled_back": True}
    log(f"remember_many (precomputed): {done / el:.1f}/s over {done} ({decisions})")

    phase("write path: remember_many, CPU embedding")
    emb = Embedder()
    emb.embed("warm up the model")
    ev2, _ = C.fresh_events(corpus, args.embed_n + args.ingest_max, SEED + 5, now)
    ev2 = ev2[args.ingest_max:]  # not the texts above
    mc2 = MemoryClient(app_dsn, tenant=TENANT, embedder=emb, max_size=1)
    conn = connect(app_dsn, autocommit=False)
    t = time.perf_counter()
    res = mc2.remember_many(ev2, batch_size=64, extract=False, embed=True, progress=False, conn=conn)
    el = time.perf_counter() - t
    conn.rollback()
    conn.close()
    emb.cache_clear()
    texts = [embedding_text(content=e["content"], who=e["who"], where=e["where"], why=e["why"], how=e["how"]) for e in ev2]
    t2 = time.perf_counter()
    emb.embed_many(texts)
    el2 = time.perf_counter() - t2
    out["embedded"] = {"memories": len(res), "seconds": round(el, 2), "per_s": round(len(res) / el, 1),
                       "embed_only_per_s": round(len(texts) / el2, 1), "batch_size": 64, "rolled_back": True}
    log(f"remember_many (CPU embedding): {len(res) / el:.1f}/s end to end; MiniLM alone {len(texts) / el2:.1f}/s")
    mc.close()
    mc2.close()
    return out


class BusyCore:
    """One core kept busy inside PostgreSQL, as the embedded default always has it next to the
    client: a backend counting through a long series until stop() cancels it (issue 23: the
    client's embedder collapsed from 13 ms to 466-500 ms a query when the other core was busy)."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.pid = self.conn.info.backend_pid
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()
        time.sleep(0.3)

    def _spin(self):
        try:
            self.conn.execute("select count(*) from generate_series(1, 100000000000)")
        except psycopg.Error:
            pass

    def stop(self):
        with psycopg.connect(self.dsn, autocommit=True) as c2:
            c2.execute("select pg_cancel_backend(%s)", (self.pid,))
        self.thread.join(10)
        self.conn.close()


def embedding_phase(admin_dsn: str, app_dsn: str, corpus: C.Corpus, args) -> dict:
    """Issue 23, the embedding lever: one query embedding with the other core busy (p95 <= 20 ms
    asked), a batch's throughput on one thread, for every embedder this install can run
    (pgmem.embedding.available_kinds: the int8 ONNX build of MiniLM, sentence-transformers); then
    MemoryClient.search end to end, embedding included, on a tenant of 680 memories (a LoCoMo
    conversation's size) with the other core busy (p95 <= 40 ms asked)."""
    from pgmem.client import MemoryClient
    try:
        from pgmem.embedding import benchmark_embedders
    except ImportError:  # (an install from before the embedding package)
        from pgmem.embedding import Embedder

        def benchmark_embedders():
            return {"local": Embedder(cache_size=0)}

    phase("embedding: one query with the other core busy")
    qtexts = [q["text"] for q in corpus.queries[:args.embed_queries]]
    batch = [it.text for it in corpus.pool[:256]] if hasattr(corpus, "pool") else qtexts * 2
    out: dict = {}
    for kind, emb in benchmark_embedders().items():
        emb.embed("warm up the model")
        quiet = [timed(emb.embed, t)[0] for t in qtexts[:20]]
        busy = BusyCore(admin_dsn)
        try:
            lat = [timed(emb.embed, t)[0] for t in qtexts]
        finally:
            busy.stop()
        t = time.perf_counter()
        emb.embed_many(batch)
        per_s = len(batch) / (time.perf_counter() - t)
        out[kind] = {"query_busy": lat_summary(lat), "query_quiet_p50_ms": round(pct(quiet, 50), 2),
                     "batch_per_s": round(per_s, 1), "batch": len(batch),
                     "describe": emb.describe() if hasattr(emb, "describe") else kind}
        log(f"embedder {kind}: one query with the other core busy p50 {pct(lat, 50):.1f} / p95 {pct(lat, 95):.1f} ms; "
            f"batch {per_s:.0f}/s")

    phase("client: MemoryClient.search end to end, 680 memories, the other core busy")
    with connect(admin_dsn, tenant="client680") as c:
        have = c.execute("select count(*) from pgmem.memories where tenant = 'client680'").fetchone()[0]
        if have != 680:
            c.execute("delete from pgmem.memories where tenant = 'client680'")
            c.execute("""insert into pgmem.memories (tenant, user_id, session_id, category, content, who, what, location,
                                                   topics, entities, importance, salience, embedding, embedding_model,
                                                   created_at, access_count)
                         select 'client680', m.user_id, m.session_id, m.category, m.content, m.who, m.what, m.location,
                                m.topics, m.entities, m.importance, m.salience, m.embedding, m.embedding_model,
                                m.created_at, m.access_count
                           from pgmem.memories m where m.tenant = %s order by m.id limit 680""", (TENANT,))
            c.execute("select * from pgmem.index_vectors(10000, 'client680')")
    with connect(admin_dsn, tenant=None) as c:
        c.execute("select pgmem.grant_tenant('bench_app', 'client680')")
    mc = MemoryClient(app_dsn, tenant="client680", max_size=1)
    for q in qtexts[:5]:
        mc.search(q, k=10)
    busy = BusyCore(admin_dsn)
    try:
        lat = [timed(lambda q: mc.search(q, k=10), q)[0] for q in qtexts]
    finally:
        busy.stop()
    mc.close()
    out["client_search_680_busy"] = lat_summary(lat)
    log(f"MemoryClient.search on 680 memories, the other core busy: p50 {pct(lat, 50):.1f} / p95 {pct(lat, 95):.1f} ms")
    return out


def jobs(admin_dsn: str, n: int, args, corpus: C.Corpus) -> dict:
    out: dict = {}
    conn = connect(admin_dsn, autocommit=False)
    cur = conn.cursor()

    def batches_until_done(job: str, call: str, batch: int) -> tuple:
        """Repeat one job call (= what run_job does) in a transaction that is rolled back, until
        job_runs says there is no more or job_seconds are spent: (seconds, examined, changed,
        batches, complete, seconds of the first batch)."""
        with conn.transaction(force_rollback=True):
            t = time.perf_counter()
            examined = changed = batches = 0
            first_batch_s = None
            while True:
                tb = time.perf_counter()
                cur.execute(call, (batch,))
                ex, ch, more = cur.execute(
                    "select examined, changed, coalesce((details->>'more')::boolean, false) from pgmem.job_runs "
                    "where job = %s order by id desc limit 1", (job,)).fetchone()
                if first_batch_s is None:
                    first_batch_s = time.perf_counter() - tb
                examined += ex
                changed += ch
                batches += 1
                if not more or time.perf_counter() - t > args.job_seconds:
                    break
            el = time.perf_counter() - t
        return el, examined, changed, batches, not more, first_batch_s

    # the incremental merge, the default (issue 23: at most 3x one kNN lookup per new memory): 1,024
    # new memories stored through remember_many and put under the HNSW index by the index job (the
    # merge job finds them indexed), then one merge over what is new since the cursors; against
    # one kNN lookup (top 10, ef_search 40: the floor of the read path) of each new memory; all in
    # one transaction, rolled back
    phase("jobs: incremental merge")
    events, vecs = C.fresh_events(corpus, 1024, SEED + 7, datetime.now(timezone.utc))
    items = [{**{k: v for k, v in e.items() if k not in ("where",)}, "location": e["where"],
              "embedding": "[" + ",".join(f"{x:.7g}" for x in v) + "]"} for e, v in zip(events, vecs)]
    with conn.transaction(force_rollback=True):
        cur.execute("select set_config('pgmem.tenant', %s, true)", (TENANT,))
        cur.execute("insert into pgmem.job_state (tenant, job, cursor_at, cursor_id) "
                    "select m.tenant, 'merge', max(m.embedded_at), max(m.id) from pgmem.memories m "
                    "where m.tenant = %s group by m.tenant "
                    "on conflict (tenant, job) do update set cursor_at = excluded.cursor_at, cursor_id = excluded.cursor_id",
                    (TENANT,))
        for i in range(0, len(items), 256):
            cur.execute("select count(*) from pgmem.remember_many(%s::jsonb)", (json.dumps(items[i:i + 256]),))
        cur.execute("select * from pgmem.index_vectors(batch => 5000)")
        # (merge looks at what was embedded before the oldest open transaction: these rows are made
        # a minute older, as if an earlier transaction had stored them)
        cur.execute("update pgmem.memories m set embedded_at = m.embedded_at - interval '1 minute' "
                    "where m.tenant = %s and m.id > (select cursor_id from pgmem.job_state where tenant = %s "
                    "and job = 'merge')", (TENANT, TENANT))
        new_ids = [r[0] for r in cur.execute(
            "select m.id from pgmem.memories m where m.tenant = %s and m.state = 'active' and m.id > "
            "(select cursor_id from pgmem.job_state where tenant = %s and job = 'merge') order by m.id", (TENANT, TENANT))]
        cur.execute("set local hnsw.ef_search = 40")
        cur.execute("set local hnsw.iterative_scan = relaxed_order")
        t = time.perf_counter()
        for mid in new_ids[:512]:
            cur.execute("select v.memory_id from pgmem.memory_vectors v where v.tenant = %s order by v.embedding <=> "
                        "(select embedding from pgmem.memories where id = %s) limit 10", (TENANT, mid)).fetchall()
        knn_ms = (time.perf_counter() - t) * 1000 / max(1, min(512, len(new_ids)))
        t = time.perf_counter()
        merged = cur.execute("select count(*) from pgmem.merge_duplicates(batch => 2000)").fetchone()[0]
        merge_ms = (time.perf_counter() - t) * 1000 / max(1, len(new_ids))
    out["merge_incremental"] = {"new": len(new_ids), "merged": merged, "ms_per_new": round(merge_ms, 3),
                                "knn_ms_per_lookup": round(knn_ms, 3), "x_knn": round(merge_ms / knn_ms, 2),
                                "rolled_back": True}
    log(f"incremental merge: {merge_ms:.2f} ms per new memory ({len(new_ids)} new, {merged} merged), "
        f"{merge_ms / knn_ms:.2f}x one kNN lookup ({knn_ms:.2f} ms)")

    phase("jobs: merge (a full pass)")
    total = n
    el, examined, merged, batches, complete, _ = batches_until_done(
        "merge", "select count(*) from pgmem.merge_duplicates(batch => %s)", args.merge_batch)
    out["merge"] = {"seconds": round(el, 2), "examined": examined, "merged": merged, "batches": batches,
                    "batch": args.merge_batch, "complete": complete,
                    "seconds_full": round(el if complete else el * total / max(examined, 1), 1),
                    "how": ("merge_duplicates(batch) repeated from an empty cursor until nothing is left "
                            "(= run_job('merge') on a fresh data set), in one transaction, rolled back"
                            if complete else
                            f"stopped after {el:.0f} s ({examined} of {total} memories examined); "
                            "seconds_full extrapolates linearly"),
                    "per_s": round(examined / el, 1)}
    log(f"merge: {examined} examined, {merged} merged in {el:.1f} s "
        f"({'complete' if complete else 'extrapolated: %.0f s' % out['merge']['seconds_full']})")

    for job, call, count_sql in (
        ("prune", "select count(*) from pgmem.prune(mode => 'normal', batch => %s)",
         "select count(*) from pgmem.memories m where m.tenant = 'bench' and m.state = 'active' and "
         "((m.expires_at is not null and m.expires_at < now()) or "
         "pgmem.decayed_importance(m.importance, m.created_at, m.access_count, now()) < 0.01)"),
        ("archive", "select count(*) from pgmem.archive_stale(retention => '90 days', batch => %s)",
         "select count(*) from pgmem.memories m where m.tenant = 'bench' and m.state = 'active' and "
         "m.created_at < now() - interval '90 days' and (m.last_accessed_at is null or "
         "m.last_accessed_at < now() - interval '90 days')"),
    ):
        phase(f"jobs: {job}")
        todo = cur.execute(count_sql).fetchone()[0]
        conn.rollback()
        el, _, changed, batches, complete, first_batch_s = batches_until_done(job, call, args.job_batch)
        out[job] = {"seconds": round(el, 2), "changed": changed, "eligible": todo, "batches": batches,
                    "batch": args.job_batch, "complete": complete, "first_batch_s": round(first_batch_s, 2),
                    "seconds_full": round(el if complete else el * todo / max(changed, 1), 1),
                    "per_s": round(changed / el, 1) if el else None, "rolled_back": True}
        log(f"{job}: {changed} of {todo} eligible in {el:.1f} s "
            f"({'complete' if complete else 'extrapolated: %.0f s' % out[job]['seconds_full']})")
    conn.close()
    phase("vacuum after jobs")
    with connect(admin_dsn) as c2:
        t = time.perf_counter()
        c2.execute("vacuum (analyze) pgmem.memories")
        out["vacuum_after_jobs_s"] = round(time.perf_counter() - t, 2)
    log(f"vacuum after the rolled-back jobs: {out['vacuum_after_jobs_s']} s")
    return out


def db_facts(admin_dsn: str) -> dict:
    with connect(admin_dsn) as conn:
        sizes = {r[0]: r[1] for r in conn.execute(
            "select c.relname, pg_relation_size(c.oid) from pg_class c join pg_namespace n on n.oid = c.relnamespace "
            "where n.nspname = 'pgmem' and c.relname in ('memories', 'history', 'memories_embedding_hnsw', "
            "'memories_tsv_gin', 'memories_pkey', 'memory_vectors', 'memory_vectors_hnsw')").fetchall()}
        sizes["memories_total"] = conn.execute("select pg_total_relation_size('pgmem.memories')").fetchone()[0]
        sizes["history_total"] = conn.execute("select pg_total_relation_size('pgmem.history')").fetchone()[0]
        sizes["database"] = conn.execute("select pg_database_size(current_database())").fetchone()[0]
        ver = conn.execute("select version()").fetchone()[0]
        vec = conn.execute("select extversion from pg_extension where extname = 'vector'").fetchone()[0]
        st = {r[0]: r[1] for r in conn.execute(
            "select name, current_setting(name) from pg_settings where name in ('shared_buffers', 'work_mem', "
            "'maintenance_work_mem', 'max_parallel_maintenance_workers', 'fsync', 'max_wal_size', "
            "'effective_cache_size', 'max_parallel_workers_per_gather', 'jit')").fetchall()}
        pgm = {r[0]: r[1] for r in conn.execute(
            "select key, value from pgmem.settings where tenant = '*' and key in ('candidate_pool', 'hnsw_ef_search')")}
    return {"sizes_mib": {k: round(v / 2**20, 1) for k, v in sizes.items()}, "postgres": ver, "pgvector": vec,
            "server_settings": st, "pgmem_settings": pgm}


# ----------------------------------------------------------------------------- tuning
def _knn_sweep(cur, sql, qv, true_knn, cast=""):
    lat, ids = [], []
    for v in qv[:10]:
        cur.execute(sql, (TENANT, v), prepare=True)
        cur.fetchall()
    for v in qv:
        t = time.perf_counter()
        cur.execute(sql, (TENANT, v), prepare=True)
        ids.append([r[0] for r in cur.fetchall()])
        lat.append((time.perf_counter() - t) * 1000)
    return {**lat_summary(lat), "recall_at_10": round(overlap(ids, true_knn), 4)}


def tune(app_dsn: str, admin_dsn: str, corpus: C.Corpus, n: int, args, ids: dict, naive) -> dict:
    """The sweeps behind the decisions in bench/README.md. Nothing here changes the product:
    experiments on the schema run on a copy table or inside transactions that roll back."""
    T: dict = {}
    qs, qv = corpus.queries[:args.queries], corpus.query_vecs[:args.queries]
    n_exact = len(ids["exact"])
    true_knn = ids["true_knn"]
    conn = connect(app_dsn)
    cur = conn.cursor()

    phase("tune: ef_search and iterative scan of raw kNN (interleaved)")
    conns = {}
    fns = {}
    for label, ef, mode in [(f"ef{e}", e, "relaxed_order") for e in (40, 64, 100, 200, 400)] + \
            [("ef40_iterative_off", 40, "off"), ("ef40_strict_order", 40, "strict_order")]:
        cx = connect(app_dsn)
        cx.execute(f"set hnsw.ef_search = {ef}")
        cx.execute(f"set hnsw.iterative_scan = {mode}")
        conns[label] = cx
        fns[label] = (lambda cc: (lambda q, v: run_knn(cc.cursor(), q, v)))(cx)
    res = interleaved(fns, qs, qv)
    T["knn_ef_search"] = {k: {**lat_summary(lat), "recall_at_10": round(overlap(got, true_knn), 4)}
                          for k, (lat, got) in res.items()}
    for k, v_ in T["knn_ef_search"].items():
        log(f"  {k}: p50 {v_['p50_ms']} p95 {v_['p95_ms']} recall@10 {v_['recall_at_10']}")
    for cx in conns.values():
        cx.close()

    phase("tune: candidates of pgmem.search (interleaved)")
    fns = {c_: (lambda cc: (lambda q, v: run_fused(cur, q, v, cc)))(c_) for c_ in (10, 25, 50, 100, 200, 400)}
    res = interleaved(fns, qs, qv)
    T["fused_candidates"] = {k: {**lat_summary(lat), "overlap_at_10": round(overlap(got[:n_exact], ids["exact"]), 4)}
                             for k, (lat, got) in res.items()}
    for k, v_ in T["fused_candidates"].items():
        log(f"  candidates {k}: p50 {v_['p50_ms']} p95 {v_['p95_ms']} overlap@10 {v_['overlap_at_10']}")

    phase("tune: where the fused time goes")
    # the two index branches alone, as pgmem._candidates runs them (200 each, ef_search 200)
    hn = ("select m.id from pgmem.memories m where m.embedding is not null and m.state = 'active' and m.tenant = %s "
          "order by m.embedding <=> %s limit 200")
    lx = ("select m.id from pgmem.memories m where m.tsv @@ %s::tsquery and m.state = 'active' and "
          "m.tenant = %s order by ts_rank(m.tsv, %s::tsquery, 1) desc, m.id limit 200")
    # as the table owner: _search runs as its owner (SECURITY DEFINER), so RLS does not apply there
    oconn = connect(admin_dsn)
    ocur = oconn.cursor()
    ocur.execute("set hnsw.ef_search = 200")
    ocur.execute("set hnsw.iterative_scan = relaxed_order")
    matches = []
    # the tsquery as a value, as _search passes it ($5)
    tq = {q["text"]: ocur.execute("select pgmem.query_tsquery(%s)::text", (q["text"],)).fetchone()[0] for q in qs}
    res = interleaved({"hnsw": lambda q, v: ocur.execute(hn, (TENANT, v)).fetchall(),
                       "lexical": lambda q, v: ocur.execute(lx, (tq[q["text"]], TENANT, tq[q["text"]])).fetchall()},
                      qs, qv)
    oconn.close()
    h_lat, l_lat = res["hnsw"][0], res["lexical"][0]
    for q in qs[:50]:
        matches.append(cur.execute("select count(*) from pgmem.memories m where m.tsv @@ pgmem.query_tsquery(%s) "
                                   "and m.tenant = %s", (q["text"], TENANT)).fetchone()[0])
    cur.execute("set hnsw.ef_search = 40")
    T["branch_hnsw_200"] = lat_summary(h_lat)
    T["branch_lexical_200"] = lat_summary(l_lat)
    T["lexical_matches_per_query"] = {"mean": round(float(np.mean(matches)), 1), "p95": pct(matches, 95),
                                      "max": int(max(matches)), "fraction_of_n_mean": round(float(np.mean(matches)) / n, 4)}
    log(f"  HNSW branch p95 {pct(h_lat, 95):.2f} ms, lexical branch p95 {pct(l_lat, 95):.2f} ms, "
        f"lexical matches mean {np.mean(matches):.0f}")
    # the ranking statement of _search() as a prepared statement with the query record as its
    # parameter: planned with each call's values (what _search does, plan_cache_mode =
    # force_custom_plan) or one cached generic plan; planning time read from EXPLAIN
    src = conn.execute("select prosrc from pg_proc where proname = '_search'").fetchone()[0]
    stmt = src[src.index("return query") + len("return query"):src.rindex("end")].strip().rstrip(";")
    stmt = re.sub(r"\bq\.", "($1).", stmt).replace("_candidates(q)", "_candidates($1)").replace("(m, q)", "(m, $1)")
    aconn = connect(admin_dsn)
    aconn.execute(f"prepare ranking(pgmem.query) as {stmt}")
    res = {}
    for mode in ("force_custom_plan", "force_generic_plan"):
        aconn.execute(f"set plan_cache_mode = {mode}")
        plan_ms, exec_ms, got = [], [], []
        for q, v in list(zip(qs, qv))[:50]:
            with aconn.transaction():
                rec = aconn.execute("select pgmem._query('search', %s, %s, 10, null, %s, %s, null, null, null, null)::text",
                                    (q["text"], v, q["actor"], q["location"])).fetchone()[0]
                t0 = time.perf_counter()
                got.append([r[0] for r in aconn.execute("execute ranking(%s::pgmem.query)", (rec,)).fetchall()])
                exec_ms.append((time.perf_counter() - t0) * 1000)
                for (line,) in psycopg.ClientCursor(aconn).execute(
                        "explain (analyze, summary, timing off) execute ranking(%s::pgmem.query)", (rec,)).fetchall():
                    if line.startswith("Planning Time"):
                        plan_ms.append(float(line.split()[2]))
        res[mode] = {**lat_summary(exec_ms), "planning_p50_ms": round(float(np.median(plan_ms)), 3),
                     "same_ids_as_search": round(overlap(got, ids["fused"][:len(got)]), 4)}
        log(f"  ranking statement, {mode}: {res[mode]}")
    aconn.close()
    T["ranking_statement_plans"] = res
    conn.close()

    phase("tune: cost of a non-HOT update (touch, prune) with and without the HNSW index")
    with connect(admin_dsn, autocommit=False) as ac:
        cur2 = ac.cursor()
        res = {}
        for label, drop in (("with_hnsw", False), ("without_hnsw", True)):
            with ac.transaction(force_rollback=True):
                if drop:
                    cur2.execute("drop index pgmem.memories_embedding_hnsw")
                rng = np.random.default_rng(5)
                t = time.perf_counter()
                for _ in range(100):
                    cur2.execute("select pgmem.touch(%s::bigint[])", ([int(x) for x in rng.integers(1, n + 1, 10)],))
                touch_ms = (time.perf_counter() - t) * 1000 / 1000
                t = time.perf_counter()
                cur2.execute("select count(*) from pgmem.prune(mode => 'normal', batch => 2000)")
                prune_ms = (time.perf_counter() - t) * 1000 / 2000
            res[label] = {"touch_ms_per_memory": round(touch_ms, 3), "prune_ms_per_memory": round(prune_ms, 3)}
            log(f"  {label}: {res[label]}")
        T["non_hot_update_cost"] = res

    phase("tune: partial HNSW index (where state = 'active'): state changes without a graph insert")
    with connect(admin_dsn, autocommit=False) as ac:
        cur2 = ac.cursor()
        lo = max(1, n // 2)
        with ac.transaction(force_rollback=True):
            ms, _ = timed(lambda: cur2.execute("update pgmem.memories set state = 'archived' where id between %s and %s",
                                               (lo, lo + 999)))
        part = {"update_1000_states_full_hnsw_ms": round(ms, 1)}
        with ac.transaction(force_rollback=True):
            cur2.execute("drop index pgmem.memories_embedding_hnsw")
            cur2.execute("set local maintenance_work_mem = '%sMB'" % max(2048, int(1.5 * n * 1900 / 2**20)))
            ms_b, _ = timed(lambda: cur2.execute(
                "create index memories_embedding_hnsw on pgmem.memories using hnsw (embedding vector_cosine_ops) "
                "with (m = 16, ef_construction = 64) where state = 'active'"))
            cur2.execute("set local hnsw.ef_search = 40")
            cur2.execute("set local hnsw.iterative_scan = relaxed_order")
            part["knn_partial"] = _knn_sweep(cur2, KNN_SQL, qv, true_knn)
            lat, got = measure(cur2, run_fused, qs, qv)
            part["fused_partial"] = {**lat_summary(lat), "same_ids_as_search": round(overlap(got, ids["fused"]), 4)}
            ms, _ = timed(lambda: cur2.execute("update pgmem.memories set state = 'archived' where id between %s and %s",
                                               (lo + 1000, lo + 1999)))
            part.update(partial_build_s=round(ms_b / 1000, 1), update_1000_states_partial_hnsw_ms=round(ms, 1))
        T["partial_hnsw"] = part
        log(f"  {part}")

    phase("tune: remember_many with a smaller keyword-novelty pool (setting surprise_lexical_pool)")
    from pgmem.client import MemoryClient
    from pgmem.embedding import embedding_text

    events, vecs = C.fresh_events(corpus, 512, SEED + 9, datetime.now(timezone.utc))
    table = {embedding_text(content=e["content"], who=e["who"], where=e["where"], why=e["why"], how=e["how"]): v
             for e, v in zip(events, vecs)}
    mc = MemoryClient(app_dsn, tenant=TENANT, embedder=PrecomputedEmbedder(table), max_size=1)
    T["remember_lexical_pool"] = {}
    for pool in (200, 20, 0):
        with connect(admin_dsn, autocommit=False) as ac:
            with ac.transaction(force_rollback=True):
                ac.execute("insert into pgmem.settings (tenant, key, value) values ('bench', 'surprise_lexical_pool', %s) "
                           "on conflict (tenant, key) do update set value = excluded.value", (json.dumps(pool),))
                t = time.perf_counter()
                res = mc.remember_many(events, batch_size=256, extract=False, embed=True, progress=False, conn=ac)
                el = time.perf_counter() - t
        dec: dict = {}
        for r in res:
            dec[r.decision] = dec.get(r.decision, 0) + 1
        T["remember_lexical_pool"][pool] = {"per_s": round(len(res) / el, 1), "decisions": dec}
        log(f"  surprise_lexical_pool {pool}: {len(res) / el:.1f}/s {dec}")
    mc.close()

    phase("tune: HNSW build parameters, parallel build, halfvec (on a copy table)")
    with connect(admin_dsn) as ac:
        ac.execute("drop table if exists public.tune_vec")
        ac.execute("create table public.tune_vec as select id, tenant, state, embedding, embedding::halfvec(384) as h "
                   "from pgmem.memories where tenant = %s", (TENANT,))
        ac.execute("vacuum analyze public.tune_vec")
        builds = {}
        variants = [("m16_efc64_w2", 16, 64, 2, None, "embedding", "vector_cosine_ops"),
                    ("m16_efc64_w0", 16, 64, 0, None, "embedding", "vector_cosine_ops"),
                    ("m16_efc64_w2_mwm128MB", 16, 64, 2, "128MB", "embedding", "vector_cosine_ops"),
                    ("m16_efc128_w2", 16, 128, 2, None, "embedding", "vector_cosine_ops"),
                    ("m24_efc64_w2", 24, 64, 2, None, "embedding", "vector_cosine_ops"),
                    ("halfvec_m16_efc64_w2", 16, 64, 2, None, "h", "halfvec_cosine_ops")]
        sql_v = ("select id from public.tune_vec where tenant = %s and state = 'active' "
                 "order by embedding <=> %s limit 10")
        sql_h = ("select id from public.tune_vec where tenant = %s and state = 'active' "
                 "order by h <=> %s::vector::halfvec(384) limit 10")
        for name, m, efc, workers, mwm, col, ops in variants:
            ac.execute("set max_parallel_maintenance_workers = %s" % workers)
            ac.execute("set maintenance_work_mem = '%s'" % (mwm or f"{max(2048, int(1.5 * n * 1900 / 2**20))}MB"))
            t = time.perf_counter()
            ac.execute(f"create index tune_idx on public.tune_vec using hnsw ({col} {ops}) with (m = {m}, ef_construction = {efc})")
            bs = time.perf_counter() - t
            size = ac.execute("select pg_relation_size('public.tune_idx')").fetchone()[0]
            b = {"build_s": round(bs, 2), "index_mib": round(size / 2**20, 1)}
            c2 = ac.cursor()
            c2.execute("set hnsw.iterative_scan = relaxed_order")
            for ef in (40, 100):
                c2.execute(f"set hnsw.ef_search = {ef}")
                b[f"ef{ef}"] = _knn_sweep(c2, sql_h if col == "h" else sql_v, qv, true_knn)
            builds[name] = b
            log(f"  {name}: {b}")
            ac.execute("drop index public.tune_idx")
        T["hnsw_builds"] = builds
        T["table_mib_vector_vs_halfvec"] = {
            "vector_column_mib": round(ac.execute("select sum(pg_column_size(embedding)) from public.tune_vec").fetchone()[0] / 2**20, 1),
            "halfvec_column_mib": round(ac.execute("select sum(pg_column_size(h)) from public.tune_vec").fetchone()[0] / 2**20, 1)}
        ac.execute("drop table public.tune_vec")
    return T


# ----------------------------------------------------------------------------- output
KEYS = ["n", "fused_p50_ms", "fused_p95_ms", "fused_p99_ms", "fused_owner_p50_ms", "fused_owner_p95_ms", "knn_p50_ms", "knn_p95_ms", "knn_p99_ms",
        "exact_p50_ms", "exact_p95_ms", "exact_p99_ms", "naive_p50_ms", "naive_p95_ms", "naive_app_role_p95_ms", "overlap_at_10",
        "fused_knn_p95_ratio", "naive_fused_p95_ratio", "fused_qps_8_clients", "knn_qps_8_clients",
        "ingest_precomputed_per_s", "ingest_embedded_per_s", "load_rate_per_s", "hnsw_build_s", "merge_s",
        "prune_s", "archive_s", "server_peak_pss_mib", "client_peak_rss_mib"]


def table(R: dict) -> str:
    rows = [(k, R.get(k)) for k in KEYS]
    w = max(len(k) for k, _ in rows)
    lines = [f"{'metric':<{w}}  value", f"{'-' * w}  {'-' * 12}"]
    for k, v in rows:
        lines.append(f"{k:<{w}}  {v:,.3f}" if isinstance(v, float) else f"{k:<{w}}  {v}")
    return "\n".join(lines)


def plot(results_dir: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is missing: no plot (pip install matplotlib)")
        return None
    runs: dict[int, dict] = {}
    tenant_run: dict | None = None
    for f in sorted(results_dir.glob("*-*.json")):
        # (a partial run with the read path counts: e.g. --skip cluster at 1M)
        if f.name == "latest.json" or f.name.startswith("eval") or f.stem.endswith("-tune"):
            continue
        try:
            d = json.loads(f.read_text())
        except ValueError:
            continue
        if "n" in d and "fused_p95_ms" in d and d.get("corpus") == C._cache_key(C.POOL_SIZE, C.N_QUERIES):
            runs[int(d["n"])] = d  # the latest run of each N (files sort by timestamp)
        if isinstance(d.get("multitenant"), dict):
            tenant_run = d  # the latest multi-tenant run (--tenants)
    if not runs:
        return None
    ns = sorted(runs)
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, label, style in (("fused_p50_ms", "pgmem.search p50", "o-"), ("fused_p95_ms", "pgmem.search p95", "o--"),
                              ("fused_owner_p95_ms", "pgmem.search p95, as table owner (no RLS)", "o:"),
                              ("knn_p95_ms", "pgvector HNSW kNN p95 (floor)", "s-"),
                              ("exact_p95_ms", "pgmem.search_exact p95", "^-"),
                              ("naive_p95_ms", "naive JAM (flat index + numpy) p95", "v-")):
        xs = [x for x in ns if runs[x].get(key) is not None]
        ax.plot(xs, [runs[x][key] for x in xs], style, label=label)
    if tenant_run is not None:
        # the multi-tenant run: each tenant measured at its own size (x = its memories)
        mt = tenant_run["multitenant"]
        pts = [mt[k] for k in ("largest", "median", "smallest") if isinstance(mt.get(k), dict)]
        total = tenant_run.get("n")
        ax.plot([p["memories"] for p in pts], [p["fused"]["p95_ms"] for p in pts], "*", ms=11,
                label=f"pgmem.search p95, one tenant of {mt.get('tenants')} ({total:,} memories in all)")
        ax.plot([p["memories"] for p in pts], [p["knn"]["p95_ms"] for p in pts], "x", ms=9,
                label="kNN over that tenant's rows p95")
    ax.axhline(25, color="grey", lw=0.8, ls=":", label="target: fused p95 < 25 ms at 1M")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories (N)")
    ax.set_ylabel("latency, ms (k=10, one client, warm)")
    ax.set_title("pgmem read path latency vs N (2 cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    out = results_dir / "latency_vs_n.png"
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# ----------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="memories to load (default 100000)")
    ap.add_argument("--keep", action="store_true", help="keep the cluster and the loaded data for the next run")
    ap.add_argument("--reload", action="store_true", help="reload even if the data set of this N is present")
    ap.add_argument("--queries", type=int, default=200, help="queries for every latency measurement (>= 200)")
    ap.add_argument("--exact-queries", type=int, default=None, help="queries for search_exact (default: all of --queries ...)")
    ap.add_argument("--exact-seconds", type=float, default=150.0,
                    help="... but stop after this many seconds (at least 20 queries); overlap@10 uses those queries")
    ap.add_argument("--exact-timeout", type=float, default=600.0, help="statement timeout of one search_exact (s), as the owner")
    ap.add_argument("--fetchall-queries", type=int, default=None)
    ap.add_argument("--knn-ef", type=int, default=40, help="hnsw.ef_search of the raw kNN floor (pgvector's default)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=float, default=15.0, help="seconds of the concurrent runs")
    ap.add_argument("--ingest-max", type=int, default=4096)
    ap.add_argument("--ingest-seconds", type=float, default=30.0)
    ap.add_argument("--embed-n", type=int, default=200, help="texts for the CPU-embedding ingest")
    ap.add_argument("--embed-queries", type=int, default=100, help="questions embedded one at a time (the embedding phase)")
    ap.add_argument("--merge-batch", type=int, default=1000)
    ap.add_argument("--job-batch", type=int, default=10000)
    ap.add_argument("--job-seconds", type=float, default=90.0, help="time cap of each job (then extrapolate)")
    ap.add_argument("--skip", default="", help="comma list of phases to skip: read,naive,concurrent,embed,write,jobs,cluster")
    ap.add_argument("--cluster-batch", type=int, default=20000, help="rows per call of the cluster job (bench/cluster_bench.py)")
    ap.add_argument("--tune", action="store_true", help="also run the parameter sweeps behind bench/README.md")
    ap.add_argument("--tenants", type=int, default=None,
                    help="the multi-tenant scenario: N memories over this many tenants with Zipf sizes (issue 23); "
                         "measures search against the raw kNN of the largest, a median and the smallest tenant")
    ap.add_argument("--load-only", action="store_true",
                    help="load the data set of this N (if not present), keep it and stop: no measurement, no result file")
    args = ap.parse_args()
    if args.load_only:
        args.keep = True
    skip = set(filter(None, args.skip.split(",")))
    n = args.n
    started = datetime.now(timezone.utc)
    load_start = os.getloadavg()
    SAMPLER.start()
    R: dict = {"n": n, "corpus": C._cache_key(C.POOL_SIZE, C.N_QUERIES), "started_at": started.isoformat(), "host": platform.node(), "cpus": os.cpu_count(),
               "loadavg_start": [round(x, 2) for x in load_start]}

    from pgmem import migrate

    phase("corpus")
    corpus = C.Corpus.load(embedder=None, log=log)
    if corpus.embed_seconds:
        R["pool_embed_s"] = round(corpus.embed_seconds, 1)

    global TENANTS, SESSION_TENANT
    if args.tenants:
        TENANTS, SESSION_TENANT = bench_tenants(n, args.tenants)
        R["tenants"] = args.tenants
    phase("cluster")
    db = f"bench_n{n}" + (f"_t{args.tenants}" if args.tenants else "")
    c = make_cluster(db)
    c.init()
    c.start()
    c.wait_ready()
    SAMPLER.postmaster = c.postmaster_pid()
    admin_dsn = c.dsn(db)
    meta = read_meta(admin_dsn)
    fresh = (meta is None or not meta.get("complete") or meta.get("n") != n or meta.get("corpus") != C._cache_key(
        C.POOL_SIZE, C.N_QUERIES) or meta.get("seed") != SEED or meta.get("version") != DATASET_VERSION
        or meta.get("tenants") != args.tenants or args.reload)
    if not fresh:
        with connect(admin_dsn) as mc:
            active = mc.execute("select count(*) from pgmem.memories where state = 'active'").fetchone()[0]
        if active != n:  # e.g. `make load` wrote into it (remember, merge): measure a clean data set
            log(f"the data set of N={n} was changed since it was loaded ({active} active memories): reloading")
            fresh = True
    if fresh:
        with psycopg.connect(c.dsn("postgres"), autocommit=True) as pc:
            pc.execute(f'drop database if exists "{db}" with (force)')
    c.ensure_database(db, tenant=None)
    t = time.perf_counter()
    migrate.upgrade(admin_dsn)
    R["migrate_s"] = round(time.perf_counter() - t, 2)
    app_pw = secrets.token_urlsafe(18)
    with psycopg.connect(admin_dsn, autocommit=True) as pc:
        if not pc.execute("select 1 from pg_roles where rolname = 'bench_app'").fetchone():
            pc.execute("create role bench_app login")
        pc.execute(f"alter role bench_app password '{app_pw}'")
        pc.execute("grant pgmem_app to bench_app")
        # security (RULES.md 10, 11): the login may act for the bench tenant; grant_tenant also sets
        # the role's statement and idle-in-transaction timeouts its sessions must run with
        pc.execute("select pgmem.grant_tenant('bench_app', %s)", (TENANT,))
    app_dsn = f"postgresql://bench_app:{app_pw}@127.0.0.1:{PORT}/{db}"

    now = datetime.now(timezone.utc)
    if fresh:
        meta = {"n": n, "seed": SEED, "corpus": C._cache_key(C.POOL_SIZE, C.N_QUERIES), "complete": False,
                "version": DATASET_VERSION, "tenants": args.tenants,
                "generated_at": now.isoformat()}
        with connect(admin_dsn) as mc:
            save_meta(mc, meta)
        load = load_dataset(c, admin_dsn, corpus, n, now, meta)
        meta.update(complete=True, load=load)
        with connect(admin_dsn) as mc:
            save_meta(mc, meta)
        R["load_reused"] = False
    else:
        load = meta["load"]
        R["load_reused"] = True
        log(f"reusing the loaded data set of N={n} (loaded {meta.get('generated_at')}); load figures are from then")
        with connect(admin_dsn) as mc:
            mc.execute("vacuum (analyze) pgmem.memories")
    R["load"] = load
    R["load_rate_per_s"] = load["load_rate_per_s"]
    R["hnsw_build_s"] = load.get("hnsw_build_s")
    with connect(admin_dsn) as mc:
        cnt = mc.execute("select count(*) from pgmem.memories where state = 'active'").fetchone()[0]
    if cnt != n:
        raise SystemExit(f"expected {n} active memories, found {cnt}: rerun with --reload")
    if args.load_only:
        SAMPLER.stop()
        c.stop()
        log(f"--load-only: database {db} in {c.home} (port {PORT}) is loaded; load figures: "
            + json.dumps({k: load.get(k) for k in ('load_rate_per_s', 'hnsw_build_s')}))
        return 0

    if args.tenants:  # the multi-tenant scenario: its own read phase, nothing else
        R["multitenant"] = multitenant(app_dsn, admin_dsn, corpus, args)
        skip |= {"read", "write", "jobs", "cluster"}
    if "read" not in skip:  # (--skip read: only the write path and the jobs, e.g. to measure those at 1M)
        rp = read_path(app_dsn, admin_dsn, corpus, n, args, R)
        ids = R.pop("_ids")
        naive = R.pop("_naive")
        R["read"] = rp
        for k in ("fused", "knn", "exact", "naive"):
            for p in ("p50", "p95", "p99"):
                R[f"{k}_{p}_ms"] = rp[k][f"{p}_ms"]
        R["overlap_at_10"] = rp["overlap_at_10"]
        R["fused_owner_p50_ms"], R["fused_owner_p95_ms"] = rp["fused_owner"]["p50_ms"], rp["fused_owner"]["p95_ms"]
        R["naive_app_role_p95_ms"] = rp["naive_app_role"]["p95_ms"]
        R["fused_knn_p95_ratio"] = round(R["fused_p95_ms"] / R["knn_p95_ms"], 2)
        R["record_cost_p50_ms"] = rp["record_cost_p50_ms"]
        for name in RANKINGS_SQL:  # issue 23: each p95 at most 4x the kNN p95 of the same run
            R[f"{name}_p95_ms"] = rp[name]["p95_ms"]
            R[f"{name}_knn_p95_ratio"] = round(rp[name]["p95_ms"] / R["knn_p95_ms"], 2)
        R["naive_fused_p95_ratio"] = round(R["naive_p95_ms"] / R["fused_p95_ms"], 2)
        if "concurrent" not in skip:
            R["concurrent_fused"] = concurrent(app_dsn, corpus, args, "fused")
            R["concurrent_knn"] = concurrent(admin_dsn, corpus, args, "knn")  # owner: see run_knn
            R["fused_qps_8_clients"] = R["concurrent_fused"]["qps"]
            R["knn_qps_8_clients"] = R["concurrent_knn"]["qps"]
        if args.tune:
            R["tuning"] = tune(app_dsn, admin_dsn, corpus, n, args, ids, naive)
        naive.conn.close()
        del naive
    if "embed" not in skip:
        R["embedding"] = embedding_phase(admin_dsn, app_dsn, corpus, args)
        for kind, e in R["embedding"].items():
            if kind != "client_search_680_busy":
                R[f"embed_{kind}_query_busy_p95_ms"] = e["query_busy"]["p95_ms"]
        R["client_search_680_busy_p95_ms"] = R["embedding"]["client_search_680_busy"]["p95_ms"]
    if "write" not in skip:
        w = write_path(app_dsn, corpus, args, now)
        R["ingest"] = w
        R["ingest_precomputed_per_s"] = w["precomputed"]["per_s"]
        R["ingest_embedded_per_s"] = w["embedded"]["per_s"]
        # STORAGE.md 5: the gate writes without the HNSW insertion, which the index job pays later;
        # a writer and the indexer on one core each sustain min(ingest, indexer); sharing one core,
        # 1 / (1/ingest + 1/indexer)
        ix = (R["load"] or {}).get("indexer_at_full_size") or {}
        if ix.get("per_s"):
            w["indexer_per_s"] = ix["per_s"]
            w["sustained_one_core_per_s"] = round(1 / (1 / w["precomputed"]["per_s"] + 1 / ix["per_s"]), 1)
            log(f"index job at full size {ix['per_s']}/s: ingest and indexing sharing one core sustain "
                f"{w['sustained_one_core_per_s']}/s")
    if "jobs" not in skip:
        j = jobs(admin_dsn, n, args, corpus)
        R["jobs"] = j
        R["merge_s"] = j["merge"]["seconds_full"]
        R["merge_incremental_x_knn"] = j["merge_incremental"]["x_knn"]
        R["merge_complete"] = j["merge"]["complete"]
        R["prune_s"] = j["prune"]["seconds_full"]
        R["archive_s"] = j["archive"]["seconds_full"]
    if "cluster" not in skip:  # the cluster job at scale (bench/cluster_bench.py; issue 17)
        phase("cluster")
        import cluster_bench

        R["cluster"] = cluster_bench.run(c.dsn, db, n, args.cluster_batch, 2000, c.postmaster_pid())
    R["db"] = db_facts(admin_dsn)

    phase("finish")
    SAMPLER.stop()
    R["server_peak_pss_mib"] = round(SAMPLER.peak_pss / 2**20, 1)
    R["server_peak_rss_sum_mib"] = round(SAMPLER.peak_rss / 2**20, 1)
    R["server_peak_pss_by_phase_mib"] = {k: round(v / 2**20, 1) for k, v in SAMPLER.phase_peak.items()}
    R["client_peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    R["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    R["loadavg_max"] = round(SAMPLER.load_max, 2)
    R["loadavg_mean"] = round(float(np.mean(SAMPLER.load_samples)), 2) if SAMPLER.load_samples else None
    R["wall_s"] = round(time.perf_counter() - T_START, 1)
    R["settings"] = {"cluster": SETTINGS, "knn_ef_search": args.knn_ef, "clients": args.clients,
                     "duration_s": args.duration, "queries": args.queries}

    if args.keep:
        log(f"--keep: cluster {c.home} (port {PORT}) keeps database {db}; stopped")
        c.stop()
    else:
        with psycopg.connect(c.dsn("postgres"), autocommit=True) as pc:
            pc.execute(f'drop database if exists "{db}" with (force)')
            others = pc.execute("select count(*) from pg_database where datname like 'bench_n%'").fetchone()[0]
        c.stop()
        if not others:
            shutil.rmtree(c.home, ignore_errors=True)
        log("dropped the data set (use --keep to reuse it)")

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    body = json.dumps(R, indent=2, default=str)
    if args.tenants:  # the multi-tenant scenario (its points are in the plot)
        (RESULTS / f"{stamp}-{n}-t{args.tenants}.json").write_text(body + "\n")
    elif args.tune or skip:  # a partial run: kept apart from the full runs (latest.json)
        (RESULTS / f"{stamp}-{n}-{'tune' if args.tune else 'partial'}.json").write_text(body + "\n")
    else:
        (RESULTS / f"{stamp}-{n}.json").write_text(body + "\n")
        (RESULTS / "latest.json").write_text(body + "\n")
    png = plot(RESULTS)
    print(table(R))
    print(f"\nwall time {R['wall_s']:.0f} s; results in {RESULTS}/{stamp}-{n}*.json"
          + (f"; plot {png}" if png else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
