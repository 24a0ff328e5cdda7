"""Development probes of the read path, on a database the benchmark kept (`bench.py --keep`) or a
copy of one. They measure one thing each, quickly, where `make bench` measures everything:

    .venv/bin/python bench/probe.py time DB [N] [--extra "profile => 'jam'"]   # search vs kNN, interleaved: wall and backend CPU
    .venv/bin/python bench/probe.py overlap DB [N] [--extra "candidates => 300"]  # overlap@10 of search vs search_exact
    .venv/bin/python bench/probe.py explain DB [I]                             # auto_explain of every statement of one search
    .venv/bin/python bench/probe.py record DB [N] [--app]                      # the recording of retrievals: on vs off, interleaved

DB is a database of the benchmark's cluster (.pgmem/bench, port 54340; start it with
`bench.py`'s make_cluster, e.g. a run with --keep leaves it stopped: `python -c "import bench;
c = bench.make_cluster('postgres'); c.start()"` from bench/). The queries are the benchmark
corpus's. Backend CPU comes from /proc/<pid>/schedstat (Linux), which a loaded machine does not
inflate as it does wall time. search_exact's answers are cached in bench/.cache/exact-DB.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python"))

import numpy as np  # noqa: E402

import bench as B  # noqa: E402
import corpus as C  # noqa: E402

SEARCH = ("select id from pgmem.search(query_text => %s, query_embedding => %s, k => 10, actor => %s, location => %s{extra})")
EXACT = "select id from pgmem.search_exact(query_text => %s, query_embedding => %s, k => 10, actor => %s, location => %s)"
KNN = "select memory_id from pgmem.memory_vectors where tenant = 'bench' order by embedding <=> %s limit 10"


def pct(xs, p) -> float:
    return round(float(np.percentile(xs, p)), 2)


def backend_cpu_ms(pid: int) -> float:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e6


def args_of(q, v):
    return q["text"], v, q["actor"], q["location"]


def cmd_time(conn, corpus, n: int, extra: str) -> dict:
    cur = conn.cursor()
    pid = cur.execute("select pg_backend_pid()").fetchone()[0]
    cur.execute("set hnsw.ef_search = 40")
    sql = SEARCH.format(extra=", " + extra if extra else "")
    fl, kl, fc, kc = [], [], [], []
    for rnd in range(2):  # the first round warms the caches and plans
        for q, v in zip(corpus.queries[:n], corpus.query_vecs[:n]):
            c0 = backend_cpu_ms(pid)
            t = time.perf_counter()
            cur.execute(sql, args_of(q, v), prepare=True).fetchall()
            f = (time.perf_counter() - t) * 1000
            c1 = backend_cpu_ms(pid)
            t = time.perf_counter()
            cur.execute(KNN, (v,), prepare=True).fetchall()
            k = (time.perf_counter() - t) * 1000
            c2 = backend_cpu_ms(pid)
            if rnd:
                fl.append(f), kl.append(k), fc.append(c1 - c0), kc.append(c2 - c1)
    return {"search_p50": pct(fl, 50), "search_p95": pct(fl, 95), "knn_p50": pct(kl, 50), "knn_p95": pct(kl, 95),
            "ratio_p95": round(pct(fl, 95) / pct(kl, 95), 1), "cpu_search_p50": pct(fc, 50), "cpu_knn_p50": pct(kc, 50),
            "cpu_ratio_mean": round(float(np.mean(fc) / np.mean(kc)), 1)}


def cmd_overlap(conn, corpus, n: int, extra: str, db: str) -> dict:
    cur = conn.cursor()
    cache_p = HERE / ".cache" / f"exact-{db}.json"
    cache = json.loads(cache_p.read_text()) if cache_p.exists() else {}
    sql = SEARCH.format(extra=", " + extra if extra else "")
    ov, lat = [], []
    for i, (q, v) in enumerate(zip(corpus.queries[:n], corpus.query_vecs[:n])):
        if str(i) not in cache:
            cache[str(i)] = [r[0] for r in cur.execute(EXACT, args_of(q, v)).fetchall()]
            cache_p.parent.mkdir(exist_ok=True)
            cache_p.write_text(json.dumps(cache))
        t = time.perf_counter()
        got = [r[0] for r in cur.execute(sql, args_of(q, v)).fetchall()]
        lat.append((time.perf_counter() - t) * 1000)
        want = cache[str(i)]
        ov.append(len(set(got) & set(want)) / max(1, min(10, len(want))))
    return {"overlap_at_10": round(float(np.mean(ov)), 4), "queries": len(ov), "worst": sorted(ov)[:5],
            "search_p50": pct(lat, 50)}


def cmd_explain(conn, corpus, i: int) -> list[str]:
    q, v = corpus.queries[i], corpus.query_vecs[i]
    sql = SEARCH.format(extra="")
    for _ in range(8):
        conn.execute(sql, args_of(q, v)).fetchall()
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    conn.execute("load 'auto_explain'")
    conn.execute("set auto_explain.log_min_duration = 0; set auto_explain.log_nested_statements = on; "
                 "set auto_explain.log_analyze = on; set auto_explain.log_timing = on; "
                 "set auto_explain.log_level = 'notice'; set client_min_messages = notice")
    conn.execute(sql, args_of(q, v)).fetchall()
    return notices


def cmd_record(dsn: str, corpus, n: int) -> dict:
    import psycopg
    from pgvector.psycopg import register_vector

    def open_conn():
        c = psycopg.connect(dsn, autocommit=True)
        register_vector(c)
        c.execute("select set_config('pgmem.tenant', 'bench', false)")
        c.execute("set statement_timeout = '30s'")
        c.execute("set idle_in_transaction_session_timeout = '60s'")
        return c

    on, off = open_conn(), open_conn()
    off.execute("set pgmem.record_retrievals = off")
    pid = {id(c): c.execute("select pg_backend_pid()").fetchone()[0] for c in (on, off)}
    sql = SEARCH.format(extra="")
    wall: dict[int, list[float]] = {id(on): [], id(off): []}
    cpu: dict[int, list[float]] = {id(on): [], id(off): []}
    for rnd in range(2):
        for i, (q, v) in enumerate(zip(corpus.queries[:n], corpus.query_vecs[:n])):
            for c in ((on, off) if i % 2 == 0 else (off, on)):
                c0, t = backend_cpu_ms(pid[id(c)]), time.perf_counter()
                c.execute(sql, args_of(q, v), prepare=True).fetchall()
                if rnd:
                    wall[id(c)].append((time.perf_counter() - t) * 1000)
                    cpu[id(c)].append(backend_cpu_ms(pid[id(c)]) - c0)
    a, b = id(on), id(off)
    return {"wall_on_p50": pct(wall[a], 50), "wall_off_p50": pct(wall[b], 50),
            "wall_cost_mean": round(float(np.mean(wall[a]) - np.mean(wall[b])), 3),
            "cpu_cost_mean": round(float(np.mean(cpu[a]) - np.mean(cpu[b])), 3),
            "cpu_cost_p50": round(pct(cpu[a], 50) - pct(cpu[b], 50), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["time", "overlap", "explain", "record"])
    ap.add_argument("db")
    ap.add_argument("n", type=int, nargs="?", default=None, help="queries (explain: the query's index)")
    ap.add_argument("--extra", default="", help="more arguments of pgmem.search, as SQL")
    ap.add_argument("--app", action="store_true", help="record: as the benchmark's login bench_app (PGMEM_PROBE_APP_PASSWORD)")
    a = ap.parse_args()
    corpus = C.Corpus.load(embedder=None, log=lambda m: None)
    cluster = B.make_cluster(a.db)
    if a.what == "record":
        dsn = cluster.dsn(a.db)
        if a.app:
            dsn = f"postgresql://bench_app:{os.environ['PGMEM_PROBE_APP_PASSWORD']}@127.0.0.1:{cluster.port}/{a.db}"
        out: object = cmd_record(dsn, corpus, a.n or 100)
    else:
        conn = B.connect(cluster.dsn(a.db))
        if a.what == "time":
            out = cmd_time(conn, corpus, a.n or 100, a.extra)
        elif a.what == "overlap":
            out = cmd_overlap(conn, corpus, a.n or 20, a.extra, a.db)
        else:
            for note in cmd_explain(conn, corpus, a.n or 0):
                print(note, "\n-----")
            return 0
    out = {**out, "loadavg": round(os.getloadavg()[0], 2)} if isinstance(out, dict) else out
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
