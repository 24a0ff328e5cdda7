#!/usr/bin/env python
"""pgmem load test: `make load` (= `python bench/load.py --bench-data`), or

    python bench/load.py --n 100000 --clients 8 --seconds 60 [--dsn ...]

With --bench-data the data are the benchmark's N memories (bench/bench.py --n N --load-only:
binary COPY and index builds, about 3 minutes at 100,000 the first time, reused afterwards)
in the benchmark cluster (.pgmem/bench), tenant "bench"; without it, step 1 below.

1. data: if the tenant (--tenant, default "load") has fewer than N memories, the missing ones
   are loaded with INSERT ... SELECT FROM unnest(arrays) (binary parameters, 2,000 rows a
   statement, every trigger on: history, validation) with random unit vectors from a seeded
   numpy generator and varied synthetic texts. The database is the cache: a second run with
   the same N loads nothing.
2. load: --clients threads, each with its own connection, mix pgmem.remember (20%: new
   texts with a random vector; one in ten a near duplicate of the thread's previous vector,
   so the merge job finds work) and pgmem.search (80%: text + embedding) for --seconds;
   one more thread runs pgmem.merge_duplicates(batch => 500) in a loop meanwhile.
3. report: total ops, ops/s, p50/p95/p99 latency per kind (remember, search, merge), errors
   by SQLSTATE, deadlocks (must be 0: the exit status is 1 otherwise), as a table and as
   JSON in bench/results/load-<timestamp>.json.

Database: --dsn, else PGMEM_DSN, else the embedded cluster (pgmem.migrate.resolve_dsn); the
role must be allowed to run merge_duplicates (pgmem_admin or the owner). pgmem is installed
(migrated) first if the database does not have it.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "python"))

import numpy as np  # noqa: E402
import psycopg  # noqa: E402

from pgmem import migrate  # noqa: E402

RESULTS = HERE / "results"
T0 = time.perf_counter()

WHO = ["user", "assistant", "maya", "omar", "lena", "ivan", "sofia", "kenji", "tool", "system"]
VERBS = ["asked about", "booked", "cancelled", "mentioned", "prefers", "dislikes", "bought", "reviewed",
         "forgot", "scheduled", "discussed", "fixed", "reported", "recommended", "compared", "planned"]
ADJ = ["red", "quiet", "expensive", "late", "broken", "vegan", "weekly", "urgent", "remote", "spicy",
       "old", "new", "shared", "private", "noisy", "cheap", "blue", "long", "short", "digital"]
NOUNS = ["flight", "dentist appointment", "laptop", "invoice", "restaurant", "gym class", "report", "train ticket",
         "birthday party", "meeting", "book", "bicycle", "apartment", "insurance", "recipe", "concert", "password",
         "holiday", "car", "project deadline", "subscription", "doctor visit", "coffee machine", "garden"]
PLACES = ["berlin", "lisbon", "tokyo", "the office", "home", "the airport", "the station", "paris", "the gym",
          "the clinic", "the cafe", "madrid", "oslo", "the library", "the park"]
REASONS = ["because of the weather", "for the team", "to save money", "after a long week", "for the kids",
           "before the deadline", "on a friend's advice", "for health reasons", "as a surprise", "out of habit"]
CATEGORIES = ["episode", "fact", "preference", "skill", "context"]


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def texts(rng: np.random.Generator, n: int, tag: str) -> list[str]:
    w, v, a, o, p, r = (rng.integers(0, len(x), n) for x in (WHO, VERBS, ADJ, NOUNS, PLACES, REASONS))
    day = rng.integers(1, 366, n)
    return [f"{WHO[w[i]]} {VERBS[v[i]]} the {ADJ[a[i]]} {NOUNS[o[i]]} at {PLACES[p[i]]} {REASONS[r[i]]}, "
            f"day {day[i]} ({tag}{i})" for i in range(n)]


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def connect(dsn: str, tenant: str) -> psycopg.Connection:
    from pgvector.psycopg import register_vector

    c = psycopg.connect(dsn, autocommit=True, options=f"-c pgmem.tenant={tenant}")
    register_vector(c)
    return c


# ------------------------------------------------------------------------------ load
LOAD_SQL = """
insert into pgmem.memories (tenant, user_id, session_id, who, location, category, content, embedding,
                            embedding_model, importance, created_at, metadata)
select %(tenant)s, u, s, w, l, c, t, e, 'load-random', i, ts, jsonb_build_object('load', true, 'n', n)
  from unnest(%(u)b::text[], %(s)b::text[], %(w)b::text[], %(l)b::text[], %(c)b::text[], %(t)b::text[],
              %(e)b::vector[], %(i)b::real[], %(ts)b::timestamptz[], %(n)b::int[]) as x(u, s, w, l, c, t, e, i, ts, n)
"""


def ensure_loaded(dsn: str, tenant: str, n: int, dim: int, seed: int, chunk: int = 2000) -> dict:
    with connect(dsn, tenant) as c:
        have = c.execute("select count(*) from pgmem.memories where tenant = %s", (tenant,)).fetchone()[0]
        if have >= n:
            log(f"{have} memories of tenant {tenant!r} already loaded (>= {n}): reusing them")
            return {"had": have, "loaded": 0, "seconds": 0.0, "rows_per_s": None}
        log(f"loading {n - have} memories into tenant {tenant!r} ({have} there)")
        rng = np.random.default_rng(seed + have)  # deterministic for a given starting point
        now = datetime.now(timezone.utc)
        t_start = time.perf_counter()
        done = 0
        while have + done < n:
            m = min(chunk, n - have - done)
            base = have + done
            vecs = unit_vectors(rng, m, dim)
            ages = rng.exponential(30.0, m)  # days; a few memories are months old
            params = {
                "tenant": tenant,
                "u": [f"user{x}" for x in rng.integers(0, 50, m)],
                "s": [f"load-s{(base + i) // 25}" for i in range(m)],
                "w": [WHO[x] for x in rng.integers(0, len(WHO), m)],
                "l": [f"{PLACES[x]}/room{y}" for x, y in zip(rng.integers(0, len(PLACES), m), rng.integers(0, 9, m))],
                "c": [CATEGORIES[x] for x in rng.integers(0, len(CATEGORIES), m)],
                "t": texts(rng, m, f"L{base}-"),
                "e": list(vecs),
                "i": [float(x) for x in rng.uniform(0.05, 1.0, m)],
                "ts": [now - timedelta(days=float(a)) for a in np.minimum(ages, 365.0)],
                "n": list(range(base, base + m)),
            }
            with c.transaction():
                c.execute(LOAD_SQL, params)
            done += m
            el = time.perf_counter() - t_start
            log(f"  {have + done}/{n} ({done / el:.0f} rows/s)")
        c.execute("analyze pgmem.memories")
        el = time.perf_counter() - t_start
        return {"had": have, "loaded": done, "seconds": round(el, 1), "rows_per_s": round(done / el, 1)}


# ------------------------------------------------------------------------------ run
class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lat: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter = Counter()
        self.error_samples: dict[str, str] = {}
        self.decisions: Counter = Counter()
        self.merged = 0

    def ok(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.lat[kind].append(seconds)

    def error(self, kind: str, e: BaseException) -> None:
        code = getattr(e, "sqlstate", None) or type(e).__name__
        with self.lock:
            self.errors[f"{kind}:{code}"] += 1
            self.error_samples.setdefault(code, str(e).strip().splitlines()[0][:200] if str(e).strip() else repr(e))


def client(i: int, dsn: str, tenant: str, dim: int, seed: int, stop: threading.Event, stats: Stats,
           remember_share: float, k: int, run_tag: str) -> None:
    rng = np.random.default_rng(seed * 1000 + i)
    conn = connect(dsn, tenant)
    prev_vec, prev_user, prev_cat = None, "user0", "episode"
    n = 0
    while not stop.is_set():
        n += 1
        kind = "remember" if rng.random() < remember_share else "search"
        t = time.perf_counter()
        try:
            if kind == "remember":
                if prev_vec is not None and rng.random() < 0.1:  # a near duplicate: same user and category
                    v = prev_vec + 0.05 * unit_vectors(rng, 1, dim)[0]
                    v = (v / np.linalg.norm(v)).astype(np.float32)
                    user, cat = prev_user, prev_cat
                else:
                    v = unit_vectors(rng, 1, dim)[0]
                    user, cat = f"user{int(rng.integers(0, 50))}", CATEGORIES[int(rng.integers(0, len(CATEGORIES)))]
                text = texts(rng, 1, f"{run_tag}-C{i}-{n}-")[0]  # run_tag: new texts on every run
                row = conn.execute(
                    "select decision from pgmem.remember(%s, %s, who => %s, location => %s, category => %s,"
                    " user_id => %s, session_id => %s, embedding_model => 'load-random')",
                    (text, v, WHO[int(rng.integers(0, len(WHO)))], PLACES[int(rng.integers(0, len(PLACES)))],
                     cat, user, f"load-c{i}-s{n // 20}")).fetchone()
                with stats.lock:
                    stats.decisions[row[0]] += 1
                prev_vec, prev_user, prev_cat = v, user, cat
            else:
                words = " ".join([NOUNS[int(rng.integers(0, len(NOUNS)))], PLACES[int(rng.integers(0, len(PLACES)))],
                                  VERBS[int(rng.integers(0, len(VERBS)))]])
                conn.execute("select id, score from pgmem.search(%s, %s, k => %s)",
                             (words, unit_vectors(rng, 1, dim)[0], k)).fetchall()
            stats.ok(kind, time.perf_counter() - t)
        except psycopg.Error as e:
            stats.error(kind, e)
            if conn.closed or conn.broken:
                conn = connect(dsn, tenant)
    conn.close()


def merger(dsn: str, tenant: str, stop: threading.Event, stats: Stats, batch: int) -> None:
    conn = connect(dsn, tenant)
    while not stop.is_set():
        t = time.perf_counter()
        try:
            rows = conn.execute("select count(*) filter (where applied) from pgmem.merge_duplicates(batch => %s)",
                                (batch,)).fetchone()
            stats.ok("merge", time.perf_counter() - t)
            with stats.lock:
                stats.merged += rows[0]
        except psycopg.Error as e:
            stats.error("merge", e)
            if conn.closed or conn.broken:
                conn = connect(dsn, tenant)
            time.sleep(0.1)
    conn.close()


def pct(xs: list[float], p: float) -> float | None:
    return round(float(np.percentile(np.array(xs) * 1000.0, p)), 2) if xs else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="memories in the tenant before the run (loaded if fewer)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--dsn", help="database (default: PGMEM_DSN, else the embedded cluster)")
    ap.add_argument("--tenant", default="load")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--remember-share", type=float, default=0.2)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--merge-batch", type=int, default=500)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--bench-data", action="store_true",
                    help="run against the benchmark's data set of N memories (bench/bench.py --n N --load-only: "
                         "binary COPY and index builds, minutes instead of the INSERT path) in .pgmem/bench, tenant 'bench'")
    args = ap.parse_args(argv)

    bench_cluster = None
    if args.bench_data:
        import subprocess

        log(f"bench data: bench/bench.py --n {args.n} --load-only (loads only when the data set is missing)")
        subprocess.run([sys.executable, str(HERE / "bench.py"), "--n", str(args.n), "--load-only"], check=True)
        sys.path.insert(0, str(HERE))
        import bench as bench_mod

        bench_cluster = bench_mod.make_cluster(f"bench_n{args.n}")
        bench_cluster.start()
        bench_cluster.wait_ready()
        args.dsn, args.tenant = bench_cluster.dsn(f"bench_n{args.n}"), bench_mod.TENANT
    try:
        return _run(args)
    finally:
        if bench_cluster is not None:
            bench_cluster.stop()


def _run(args) -> int:
    dsn = migrate.resolve_dsn(args.dsn)
    where = migrate.describe_dsn(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        installed = c.execute("select to_regclass('pgmem.memories') is not null").fetchone()[0]
        server = c.execute("show server_version").fetchone()[0]
    if not installed:
        log(f"pgmem is not installed in {where}: migrating")
        migrate.upgrade(dsn)
    with connect(dsn, args.tenant) as c:
        dim = int(c.execute("select (pgmem._setting('embedding_dim'))::text::int").fetchone()[0])
    log(f"database {where} (PostgreSQL {server}), tenant {args.tenant!r}, dim {dim}")
    load = ensure_loaded(dsn, args.tenant, args.n, dim, args.seed)
    with connect(dsn, args.tenant) as c:
        n_before = c.execute("select count(*) from pgmem.memories where tenant = %s", (args.tenant,)).fetchone()[0]

    stats, stop = Stats(), threading.Event()
    run_tag = datetime.now(timezone.utc).strftime("R%Y%m%d%H%M%S")
    threads = [threading.Thread(target=client, name=f"client-{i}", daemon=True,
                                args=(i, dsn, args.tenant, dim, args.seed, stop, stats, args.remember_share, args.k,
                                      run_tag))
               for i in range(args.clients)]
    threads.append(threading.Thread(target=merger, name="merge", daemon=True,
                                    args=(dsn, args.tenant, stop, stats, args.merge_batch)))
    log(f"running {args.clients} clients ({args.remember_share:.0%} remember, {1 - args.remember_share:.0%} search)"
        f" + merge_duplicates(batch => {args.merge_batch}) for {args.seconds:.0f}s")
    started = datetime.now(timezone.utc)
    t_start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(args.seconds)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    wall = time.perf_counter() - t_start
    with connect(dsn, args.tenant) as c:
        n_after = c.execute("select count(*) from pgmem.memories where tenant = %s", (args.tenant,)).fetchone()[0]

    ops = {}
    for kind in ("remember", "search", "merge"):
        xs = stats.lat.get(kind, [])
        ops[kind] = {"count": len(xs), "ops_s": round(len(xs) / wall, 1), "p50_ms": pct(xs, 50), "p95_ms": pct(xs, 95),
                     "p99_ms": pct(xs, 99), "max_ms": pct(xs, 100),
                     "errors": sum(v for k, v in stats.errors.items() if k.startswith(kind + ":"))}
    client_ops = ops["remember"]["count"] + ops["search"]["count"]
    by_state: Counter = Counter()
    for k, v in stats.errors.items():
        by_state[k.split(":", 1)[1]] += v
    deadlocks = by_state.get("40P01", 0)
    result = {
        "kind": "load", "started_at": started.isoformat(), "database": where, "server_version": server,
        "tenant": args.tenant, "n": args.n, "memories_before": n_before, "memories_after": n_after,
        "clients": args.clients, "seconds": round(wall, 1), "remember_share": args.remember_share, "k": args.k,
        "merge_batch": args.merge_batch, "load": load,
        "total_ops": client_ops + ops["merge"]["count"], "client_ops": client_ops,
        "ops_s": round(client_ops / wall, 1), "ops": ops,
        "remember_decisions": dict(stats.decisions), "merged": stats.merged,
        "errors": dict(by_state), "error_samples": stats.error_samples, "deadlocks": deadlocks,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"load-{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")

    print(f"\npgmem load: {args.clients} clients + merge job, {wall:.1f}s, {n_before} -> {n_after} memories "
          f"({where}, tenant {args.tenant!r})")
    print(f"{'op':<9} {'count':>8} {'ops/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>9} {'errors':>7}")
    for kind, o in ops.items():
        f = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
        print(f"{kind:<9} {o['count']:>8} {o['ops_s']:>8.1f} {f(o['p50_ms']):>8} {f(o['p95_ms']):>8} "
              f"{f(o['p99_ms']):>8} {f(o['max_ms']):>9} {o['errors']:>7}")
    print(f"total ops {result['total_ops']} (clients {client_ops}, {result['ops_s']} ops/s); "
          f"remember decisions {dict(stats.decisions)}; merged {stats.merged}")
    print(f"errors by SQLSTATE: {dict(by_state) or 'none'}; deadlocks: {deadlocks}")
    for code, sample in stats.error_samples.items():
        print(f"  {code}: {sample}")
    print(f"written {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 1 if deadlocks else 0


if __name__ == "__main__":
    sys.exit(main())
