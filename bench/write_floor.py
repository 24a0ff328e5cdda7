"""Backend CPU per item of the write path and the jobs (issues 13, 23), on a database of its own.

Wall times on a shared machine say little; the CPU time of the server backend that does the
work is the floor an idle core would see. Every measurement runs in a transaction that is
rolled back, so the data set stays as loaded.

    # a synthetic data set (random unit vectors, words drawn from a Zipf vocabulary, the
    # bench corpus's shape of ages, importances and access counts) into a database of yours:
    python bench/write_floor.py --dsn postgresql://... --load 100000
    # the figures:
    python bench/write_floor.py --dsn postgresql://... [--skip lookups,ingest,jobs,triggers]

Random vectors are fine for timing the write path and the jobs (every item is novel to the
gate, so every item is stored: the dearest path); 1% of the rows are near-duplicates of an
earlier row (cosine about .9), so merge has pairs to apply. Real MiniLM vectors matter only for
the decisions, not for the time.

Prints one JSON object: ms of backend CPU (and wall) per item for
* the gate's nearest-neighbour lookup (pgmem._neighbours, top 10 and top 1) at ef_search 100
  and 40, a bare HNSW top 10;
* remember_many through the surprise gate (MemoryClient, precomputed embeddings), and the
  per-function breakdown of its server time (pg_stat_user_functions, track_functions = all);
* one merge batch, one prune batch and one archive batch (each rolled back).
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

TENANT = "bench"
DIM = 384
SEED = 20261126
CATEGORIES = [("fact", 0.8), ("preference", 0.9), ("skill", 0.7), ("episode", 0.6), ("context", 0.5)]


def backend_cpu(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def connect(dsn: str, *, autocommit: bool = True, tenant: str | None = TENANT) -> psycopg.Connection:
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(dsn, autocommit=autocommit)
    if tenant:
        conn.execute("select set_config('pgmem.tenant', %s, false)", (tenant,))
    register_vector(conn)
    return conn


class _VectorBytes(Dumper):
    format = Format.BINARY

    def dump(self, obj):
        return obj


def _vec_bytes(v: np.ndarray) -> bytes:
    return struct.pack(">HH", v.shape[0], 0) + np.ascontiguousarray(v, dtype=">f4").tobytes()


class Synth:
    """Deterministic synthetic memories: text of 8-24 words from a Zipf vocabulary, a random
    unit vector (1% near-duplicates of an earlier row), the bench corpus's shape of the rest."""

    def __init__(self, seed: int = SEED, vocab: int = 5000):
        rng = np.random.default_rng(seed)
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        self.words = ["".join(rng.choice(letters, size=int(rng.integers(4, 10)))) for _ in range(vocab)]
        p = 1.0 / np.arange(1, vocab + 1) ** 1.05
        self.p = p / p.sum()

    def block(self, lo: int, hi: int, now: datetime, n_total: int, seed: int = SEED):
        rng = np.random.default_rng([seed, lo])
        k = hi - lo
        vecs = rng.standard_normal((k, DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        dup = rng.random(k) < 0.01
        j_of = {}
        for i in np.nonzero(dup)[0]:
            if i > 0:
                j = j_of[i] = int(rng.integers(0, i))
                v = vecs[j] + 0.48 * vecs[i]  # cosine ~ .9 to row j (vecs[i] is nearly orthogonal to it)
                vecs[i] = v / np.linalg.norm(v)
        rows = []
        for i in range(k):
            rid = lo + i + 1
            nw = int(rng.integers(8, 25))
            words = rng.choice(len(self.words), size=nw, p=self.p)
            text = " ".join(self.words[w] for w in words)
            if dup[i] and i > 0:  # a restatement: most of row j's words
                text = " ".join(rows[j_of[i]]["content"].split()[:-2] + [self.words[w] for w in words[:2]])
            cat, w = CATEGORIES[int(rng.integers(0, len(CATEGORIES)))]
            age = (1.0 - rid / (n_total + 1)) * 365.0  # oldest first, in id order, over a year
            created = now - timedelta(days=float(age))
            acc = 0 if rng.random() < 0.65 else int(min(5000, rng.pareto(1.16) + 1))
            last = created + (now - created) * float(rng.random()) if acc else None
            rows.append(dict(id=rid, content=text, category=cat, importance=float(w * rng.uniform(0.2, 1.0)),
                             user_id=None, session_id=f"s{rid // 40}", who=f"person{int(rng.integers(0, 60))}",
                             created_at=created, access_count=acc, last_accessed_at=last, seq=rid % 40 + 1,
                             token_count=nw))
        return rows, vecs


COPY_COLS = ["id", "tenant", "user_id", "session_id", "category", "content", "who", "importance", "embedding",
             "embedding_model", "embedded_at", "access_count", "last_accessed_at", "created_at", "updated_at", "seq",
             "token_count"]
COPY_TYPES = ["int8", "text", "text", "text", "text", "text", "text", "float4", "vector", "text", "timestamptz",
              "int4", "timestamptz", "timestamptz", "timestamptz", "int4", "int4"]


def load(dsn: str, n: int, log=print, corpus: bool = False) -> dict:
    """n synthetic memories of tenant `bench` (COPY without triggers, history set-based as
    bench.py does, vectors and indexes built after), unless the database already holds them.
    corpus: bench.py's data set (bench/corpus.py: real MiniLM vectors of its sentence pool,
    which must be in bench/.cache) instead of random vectors."""
    conn = connect(dsn, tenant=None)
    have = conn.execute("select count(*) from pgmem.memories where tenant = %s", (TENANT,)).fetchone()[0]
    if have >= n:
        log(f"{have} memories already loaded")
        return {"loaded": 0, "have": have}
    if have:
        raise SystemExit(f"the database holds {have} memories of {TENANT}, fewer than {n}: use a fresh database")
    conn.execute("insert into pgmem.tenants (tenant) values (%s) on conflict do nothing", (TENANT,))
    vec_oid = conn.execute("select 'vector'::regtype::oid").fetchone()[0]
    conn.adapters.register_dumper(bytes, type("VB", (_VectorBytes,), {"oid": vec_oid}))
    defs = conn.execute("select indexname, indexdef from pg_indexes where schemaname = 'pgmem' and "
                        "tablename in ('memories', 'memory_vectors') and indexname not in ('memories_pkey', "
                        "'memory_vectors_pkey') order by indexname").fetchall()
    for name, _ in defs:
        conn.execute(f"drop index pgmem.{name}")
    s = Synth()
    now = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    if corpus:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench as B
        import corpus as C

        cp_ = C.Corpus.load(embedder=None, log=log)
        conn.adapters.register_dumper(bytes, type("VB2", (B.VectorBytesDumper,), {"oid": vec_oid}))
    for lo in range(0, n, 10000):
        hi = min(n, lo + 10000)
        if corpus:
            rows, vecs = C.derive_block(cp_, n, lo // C.BLOCK, B.SEED, now)
            B.copy_rows(conn, rows, vecs, replica=True)
            log(f"  {hi}/{n} rows ({time.perf_counter() - t0:.0f} s)")
            continue
        rows, vecs = s.block(lo, hi, now, n)
        with conn.transaction():
            with conn.cursor() as cur:
                cur.execute("set local session_replication_role = replica")
                with cur.copy(f"copy pgmem.memories ({', '.join(COPY_COLS)}) from stdin (format binary)") as cp:
                    cp.set_types(COPY_TYPES)
                    for r, v in zip(rows, vecs):
                        cp.write_row((r["id"], TENANT, r["user_id"], r["session_id"], r["category"], r["content"],
                                      r["who"], r["importance"], _vec_bytes(v), "synthetic", now, r["access_count"],
                                      r["last_accessed_at"], r["created_at"], r["created_at"], r["seq"],
                                      r["token_count"]))
                cur.execute("insert into pgmem.history (tenant, memory_id, op, after, details) "
                            "select m.tenant, m.id, 'add', pgmem._snapshot(m), '{}' from pgmem.memories m "
                            "where m.id between %s and %s order by m.id", (lo + 1, hi))
        log(f"  {hi}/{n} rows ({time.perf_counter() - t0:.0f} s)")
    conn.execute("select setval(pg_get_serial_sequence('pgmem.memories', 'id'), %s)", (n,))
    conn.execute("insert into pgmem.memory_vectors (memory_id, tenant, user_scope, embedding) "
                 "select m.id, m.tenant, coalesce(m.user_id, ''), m.embedding from pgmem.memories m "
                 "where m.state = 'active' and m.embedding is not null on conflict do nothing")
    conn.execute("set maintenance_work_mem = '1GB'")
    for name, ddl in sorted(defs, key=lambda d: "hnsw" in d[1]):
        t = time.perf_counter()
        conn.execute(ddl)
        log(f"  {name}: {time.perf_counter() - t:.1f} s")
    conn.execute("select set_config('pgmem.tenant', %s, false)", (TENANT,))
    conn.execute("select pgmem.rebuild_lexicon()")
    for tbl in ("memories", "memory_vectors", "history"):
        conn.execute(f"vacuum (analyze) pgmem.{tbl}")
    took = round(time.perf_counter() - t0, 1)
    log(f"loaded {n} in {took} s")
    return {"loaded": n, "seconds": took}


def fresh_events(n: int, now: datetime, seed: int = SEED + 1, corpus: bool = False):
    """n new events (content, precomputed embedding) for remember_many: novel to the gate
    (random vectors), or bench.py's ingest events (corpus)."""
    if corpus:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench as B
        import corpus as C

        events, vecs = C.fresh_events(C.Corpus.load(embedder=None, log=lambda m: None), n, B.SEED, now)
        for e, v in zip(events, vecs):
            e["embedding"] = v.tolist()
            e["embedding_model"] = C.MODEL_ID
        return events
    s = Synth()
    rows, vecs = s.block(0, n, now, n, seed=seed)
    return [{"content": r["content"] + f" ({seed}-{i})", "who": r["who"], "category": r["category"],
             "session_id": f"w{i // 40}", "embedding": vecs[i].tolist(), "embedding_model": "synthetic"}
            for i, r in enumerate(rows)]


FUNC_STATS = ("select funcname, calls, round(total_time::numeric, 1) as total_ms, round(self_time::numeric, 1) as self_ms "
              "from pg_stat_user_functions where schemaname = 'pgmem'")


def function_breakdown(conn, before: dict, items: int) -> list[dict]:
    after = {r[0]: r for r in conn.execute(FUNC_STATS).fetchall()}
    out = []
    for name, r in after.items():
        b = before.get(name, (name, 0, 0, 0))
        calls, total, self_ = r[1] - b[1], float(r[2] - b[2]), float(r[3] - b[3])
        if calls:
            out.append({"function": name, "calls": calls, "total_ms_per_item": round(total / items, 3),
                        "self_ms_per_item": round(self_ / items, 3)})
    return sorted(out, key=lambda x: -x["total_ms_per_item"])[:25]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default=os.environ.get("PGMEM_DSN"), help="a database with pgmem installed (superuser)")
    ap.add_argument("--load", type=int, default=0, help="load this many synthetic memories first (fresh database)")
    ap.add_argument("--lookups", type=int, default=512)
    ap.add_argument("--ingest", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--corpus", action="store_true",
                    help="bench.py's corpus (real MiniLM vectors, bench/.cache) instead of random vectors")
    ap.add_argument("--no-track", action="store_true",
                    help="set track_functions = none for the measuring session (no per-function breakdown, no overhead)")
    ap.add_argument("--skip", default="", help="comma-separated: lookups, ingest, jobs")
    args = ap.parse_args()
    if not args.dsn:
        raise SystemExit("--dsn (or PGMEM_DSN) is needed")
    if args.load:
        load(args.dsn, args.load, log=lambda m: print(m, file=sys.stderr, flush=True), corpus=args.corpus)
    skip = set(filter(None, args.skip.split(",")))
    conn = connect(args.dsn, autocommit=False)
    n = conn.execute("select count(*) from pgmem.memories where tenant = %s", (TENANT,)).fetchone()[0]
    conn.rollback()
    out: dict = {"n": n, "loadavg_start": os.getloadavg()}
    pid = conn.info.backend_pid
    if args.no_track:
        conn.execute("set track_functions = none")
        conn.commit()

    def run(label: str, sql: str, items: int, params=()) -> None:
        c0, t = backend_cpu(pid), time.perf_counter()
        got = conn.execute(sql, params).fetchall()
        out[label] = {"items": items, "rows": len(got), "cpu_ms_per_item": round(1000 * (backend_cpu(pid) - c0) / items, 3),
                      "wall_ms_per_item": round(1000 * (time.perf_counter() - t) / items, 3)}
        print(label, out[label], file=sys.stderr, flush=True)

    if "lookups" not in skip:
        k = args.lookups
        for top in (10, 1):
            lookups = (f"select (select count(*) from pgmem._neighbours(m.tenant, m.embedding, {top}, '')) "
                       f"from pgmem.memories m where m.id > {n // 2} order by m.id limit %s")
            conn.execute(lookups, (64,)).fetchall()  # warm the graph's upper layers
            for ef in (100, 40, 10):
                conn.execute(f"set hnsw.ef_search = {ef}")
                run(f"neighbours_top{top}_ef{ef}", lookups, k, (k,))
        conn.execute("set hnsw.ef_search = 100")
        run("bare_hnsw_top10_ef100", "select (select count(*) from (select v.memory_id from pgmem.memory_vectors v "
            "where v.tenant = m.tenant and v.user_scope = '' order by v.embedding <=> m.embedding limit 10) x) "
            f"from pgmem.memories m where m.id > {n // 2} order by m.id limit %s", k, (k,))
        conn.rollback()

    if "ingest" not in skip:
        from pgmem.client import MemoryClient

        events = fresh_events(args.ingest, datetime.now(timezone.utc), corpus=args.corpus)
        mc = MemoryClient(args.dsn, tenant=TENANT, embedder=None, max_size=1, statement_timeout_ms=600_000)
        before = {r[0]: r for r in conn.execute(FUNC_STATS).fetchall()}
        conn.rollback()
        c0, t, done, dec = backend_cpu(pid), time.perf_counter(), 0, {}
        while done < len(events):
            res = mc.remember_many(events[done:done + args.batch], batch_size=args.batch, extract=False, embed=False,
                                   progress=False, conn=conn)
            for r in res:
                dec[r.decision] = dec.get(r.decision, 0) + 1
            done += len(res)
        wall = time.perf_counter() - t
        out["remember_many"] = {"items": done, "batch": args.batch, "decisions": dec,
                                "cpu_ms_per_item": round(1000 * (backend_cpu(pid) - c0) / done, 3),
                                "wall_ms_per_item": round(1000 * wall / done, 3), "per_s": round(done / wall, 1)}
        print("remember_many", out["remember_many"], file=sys.stderr, flush=True)
        conn.rollback()
        time.sleep(0.6)  # the statistics collector
        out["remember_many_functions"] = function_breakdown(conn, before, done)
        conn.rollback()
        mc.close()

    if "jobs" not in skip:
        conn.execute("select set_config('pgmem.tenant', '', false)")
        conn.rollback()
        # the floor the incremental merge is held to: one kNN lookup (bench.py's knn_*: top 10,
        # pgvector's default ef_search 40, relaxed_order) of a memory's vector
        conn.execute("set hnsw.ef_search = 40")
        conn.execute("set hnsw.iterative_scan = relaxed_order")
        run("knn_top10_ef40", "select (select count(*) from (select v.memory_id from pgmem.memory_vectors v "
            "where v.tenant = m.tenant order by v.embedding <=> m.embedding limit 10) x) "
            f"from pgmem.memories m where m.id > {n // 2} order by m.id limit 512", 512)
        conn.rollback()
        # the incremental merge (the default): the memories embedded since the cursors, here 1,024
        # new ones stored through remember_many and put under the HNSW index by the index job
        # (which runs every minute; the hourly merge finds them indexed)
        new = fresh_events(1024, datetime.now(timezone.utc), seed=SEED + 7, corpus=args.corpus)
        conn.execute("select set_config('pgmem.tenant', %s, false)", (TENANT,))
        conn.execute("insert into pgmem.job_state (tenant, job, cursor_at, cursor_id) "
                     "select m.tenant, 'merge', max(m.embedded_at), max(m.id) from pgmem.memories m group by m.tenant "
                     "on conflict (tenant, job) do update set cursor_at = excluded.cursor_at, cursor_id = excluded.cursor_id")
        for i in range(0, len(new), 256):
            conn.execute("select count(*) from pgmem.remember_many(%s::jsonb)", (json.dumps(new[i:i + 256]),)).fetchall()
        conn.execute("select set_config('pgmem.tenant', '', false)")
        conn.execute("select * from pgmem.index_vectors(batch => 5000)").fetchall()
        # (merge looks at what was embedded before the oldest open transaction: this one's rows
        # are made a minute older, as if stored by an earlier transaction)
        conn.execute("update pgmem.memories m set embedded_at = m.embedded_at - interval '1 minute' "
                     "where m.tenant = %s and m.id > (select cursor_id from pgmem.job_state where tenant = %s "
                     "and job = 'merge')", (TENANT, TENANT))
        queued = conn.execute("select count(*) from pgmem.memories m where m.tenant = %s and m.state = 'active' and "
                              "(m.embedded_at, m.id) > (select cursor_at, cursor_id from pgmem.job_state "
                              "where tenant = %s and job = 'merge')", (TENANT, TENANT)).fetchone()[0]
        run("merge_incremental", "select * from pgmem.merge_duplicates(batch => 2000)", queued)
        out["merge_incremental"]["x_knn"] = round(out["merge_incremental"]["cpu_ms_per_item"]
                                                  / out["knn_top10_ef40"]["cpu_ms_per_item"], 2)
        conn.rollback()
        conn.execute("select set_config('pgmem.tenant', '', false)")
        for dry in (True, False):
            run(f"merge_full_batch_1000{'_dry_run' if dry else ''}",
                "select * from pgmem.merge_duplicates(batch => 1000, dry_run => %s, full_scan => true)", 1000, (dry,))
            conn.rollback()
        run("prune_normal_batch_10000", "select * from pgmem.prune(mode => 'normal', batch => 10000)", 10000)
        conn.rollback()
        run("archive_batch_10000", "select * from pgmem.archive_stale(retention => '90 days', batch => 10000)", 10000)
        conn.rollback()
        # full passes (what bench.py's prune_s, archive_s time), each in one transaction, rolled
        # back: the calls of one run until job_runs.details says there is no more
        for label, call, job in (("prune_full_pass", "select count(*) from pgmem.prune(mode => 'normal', batch => 10000)", "prune"),
                                 ("archive_full_pass", "select count(*) from pgmem.archive_stale(retention => '90 days', "
                                  "batch => 10000)", "archive")):
            c0, t, calls, changed = backend_cpu(pid), time.perf_counter(), 0, 0
            while True:
                changed += conn.execute(call).fetchone()[0]
                calls += 1
                more = conn.execute("select coalesce((details->>'more')::boolean, false) from pgmem.job_runs "
                                    "where job = %s order by id desc limit 1", (job,)).fetchone()[0]
                if not more or calls >= 200:
                    break
            out[label] = {"calls": calls, "changed": changed, "cpu_s": round(backend_cpu(pid) - c0, 2),
                          "wall_s": round(time.perf_counter() - t, 2)}
            print(label, out[label], file=sys.stderr, flush=True)
            conn.rollback()
    out["loadavg_end"] = os.getloadavg()
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
