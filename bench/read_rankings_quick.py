"""Quick read-path latencies (bench/README.md, 1M): activate, recall, build_context and search as
pgmem_app (SET ROLE in a superuser session; row-level security applies) and the raw HNSW kNN over
pgmem.memory_vectors as the owner, interleaved per question, on a bench database. Questions: the
first words of random memories, with their stored embeddings.

    PYTHONPATH=$PWD/python .venv/bin/python bench/read_rankings_quick.py <dsn of bench_n1000000> 60
"""
import sys, time, json, psycopg, numpy as np
dsn, n = sys.argv[1], int(sys.argv[2])
c = psycopg.connect(dsn, autocommit=True)
c.execute("set pgmem.tenant = 'bench'")
c.execute("set statement_timeout = '30s'; set idle_in_transaction_session_timeout = '60s'")
rows = c.execute("select content, embedding::text from pgmem.memories tablesample system (0.1) limit %s", (n,)).fetchall()
k = psycopg.connect(dsn, autocommit=True)  # the raw kNN floor as the owner (memory_vectors)
c.execute("set role pgmem_app")
fns = {"activate": "select count(*) from pgmem.activate(%s, %s::vector, k => 10)",
       "recall": "select count(*) from pgmem.recall(%s, %s::vector, k => 10)",
       "build_context": "select count(*) from pgmem.build_context(%s, %s::vector)",
       "search": "select count(*) from pgmem.search(%s, %s::vector, 10)",
       "knn": "select count(*) from (select memory_id from pgmem.memory_vectors where tenant = 'bench' order by embedding <=> %s::vector limit 10) x"}
lat = {k: [] for k in fns}
for i, (t, e) in enumerate(rows):
    q = " ".join(t.split()[:9]) + "?"
    order = list(fns)[i % 5:] + list(fns)[:i % 5]
    for f in order:
        t0 = time.perf_counter()
        if f == "knn":
            k.execute(fns[f], (e,)).fetchall()
        else:
            c.execute(fns[f], (q, e)).fetchall()
        lat[f].append((time.perf_counter() - t0) * 1000)
out = {f: {"p50_ms": round(float(np.median(v)), 1), "p95_ms": round(float(np.percentile(v, 95)), 1), "n": len(v)} for f, v in lat.items()}
print(json.dumps(out))
with open("/proc/loadavg") as f: print("loadavg", f.read().split()[:3])
