"""Batch-ingest measurement (issue 3): N events through MemoryClient.remember_many, half with
CPU embedding (MiniLM) and half without (queued for the worker), into a fresh database on
the embedded cluster. Events are the bundled eval conversations with varied users, sessions
and a reference number (so the surprise gate stores them).

    .venv/bin/python bench/ingest.py [--n 10000] [--batch-size 256]
"""
from __future__ import annotations

import argparse
import glob
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

import psycopg  # noqa: E402

from pgmem import MemoryClient, migrate  # noqa: E402
from pgmem.cluster import default_cluster  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--db", default="pgmem_ingest")
    a = ap.parse_args()
    c = default_cluster()
    c.init()
    c.start()
    c.wait_ready()
    with psycopg.connect(c.dsn("postgres"), autocommit=True) as admin:
        admin.execute(f'drop database if exists "{a.db}" with (force)')
        admin.execute(f'create database "{a.db}"')
    dsn = c.dsn(a.db)
    migrate.upgrade(dsn)
    src = [json.loads(line) for f in sorted(glob.glob(str(ROOT / "bench/data/conversations/*.jsonl")))
           for line in open(f) if line.strip()]
    rng = random.Random(11)
    events = []
    for i in range(a.n):
        e = dict(rng.choice(src))
        e.pop("metadata", None)
        e.update(event_id=f"ing-{i}", session_id=f"s{i // 50}", user_id=f"u{i % 20}",
                 content=e["content"] + f" (ref {rng.randint(1000, 999999)})")
        events.append(e)
    mem = MemoryClient(dsn, tenant="ingest")
    mem.embedder.embed("warm up")
    half = a.n // 2
    out = {}
    for label, chunk, embed in (("with_embedding", events[:half], True), ("without_embedding", events[half:], False)):
        t = time.monotonic()
        res = mem.remember_many(chunk, batch_size=a.batch_size, progress=True, embed=embed)
        s = time.monotonic() - t
        out[label] = {"n": len(chunk), "seconds": round(s, 1), "per_s": round(len(chunk) / s, 1),
                      "decisions": dict(Counter(r.decision for r in res))}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
