#!/usr/bin/env python
"""Layered tiers benchmark (issue 15): what the profile-fact trigger costs remember_many, and
how long one chat turn's pgmem.context_for takes, with where the time goes.

    PYTHONPATH=python .venv/bin/python bench/layered.py [--base 20000] [--batch 1000] [--rounds 5] [--turns 200]

Uses PGMEM_DSN or the embedded cluster (`pgmem db up`); creates and drops a scratch database.
Vectors are random unit vectors (the database's work does not depend on their meaning).

1. remember_many of --batch items with precomputed embeddings over --base memories, in
   interleaved rounds: the trigger memories_profile_facts enabled, disabled, and enabled with
   10% of the items carrying metadata.facts (a profile statement each); and plain multi-row
   INSERTs of 5 x --batch rows with the trigger enabled and disabled; the trigger's WHEN test
   alone (200,000 rows into a scratch table with the same WHEN clause, fastest of 7 rounds,
   on minus off, per row);
   one set_fact (200 calls in one statement).
2. context_for over one conversation of --turns user messages (ten topics, so threads form
   and the topic gate works), after the base memories: p50/p95 per call, and the parts timed
   alone (classify_intent, observe_turn, resolve_thread, research_context, pgmem.search).
Writes bench/results/layered-<ts>.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
import psycopg.conninfo as ci  # noqa: E402
from pgvector.psycopg import register_vector  # noqa: E402

from pgmem import migrate  # noqa: E402
from pgmem.engine.profile_facts import detect_facts  # noqa: E402

DIM = 384
TOPICS = ["postgres index tuning", "sourdough baking", "marathon training", "kubernetes deploys", "tax returns",
          "guitar chords", "garden tomatoes", "rust lifetimes", "travel to japan", "home network"]


def unit(rng, base=None, noise=0.35):
    v = rng.normal(size=DIM) if base is None else base + noise * rng.normal(size=DIM) / np.sqrt(DIM) * 8
    return (v / np.linalg.norm(v)).astype(np.float32)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def items(rng, n, start, facts_share=0.0):
    out = []
    for i in range(n):
        text = f"note {start + i}: {TOPICS[i % 10]} detail {rng.integers(1e9)}"
        it = {"content": text, "user_id": "u", "embedding": unit(rng).tolist(), "who": "user"}
        if facts_share and i % int(1 / facts_share) == 0:
            stmt = f"I moved to City{start + i}"
            it["content"] = stmt
            it["metadata"] = {"facts": detect_facts(stmt), "extracted_by": "heuristic"}
        out.append(it)
    return json.dumps(out)


def timed(conn, sql, params=()):
    t = time.perf_counter()
    cur = conn.execute(sql, params)
    if cur.description:
        cur.fetchall()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--turns", type=int, default=200)
    a = ap.parse_args()
    rng = np.random.default_rng(7)
    dsn = migrate.resolve_dsn(None, superuser=True)  # it creates a scratch database
    params = ci.conninfo_to_dict(dsn)
    name = f"pgmem_layered_bench_{uuid.uuid4().hex[:8]}"
    admin_dsn = ci.make_conninfo(**{**params, "dbname": "postgres"})
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'create database "{name}"')
    target = ci.make_conninfo(**{**params, "dbname": name})
    import os

    res: dict = {"at": datetime.now(timezone.utc).isoformat(), "args": vars(a), "cpus": os.cpu_count(),
                 "loadavg_start": os.getloadavg()}
    try:
        migrate.upgrade(target)
        with psycopg.connect(target, autocommit=True, options="-c pgmem.tenant=bench") as c:
            register_vector(c)
            t = time.perf_counter()
            for s in range(0, a.base, 2000):
                c.execute("select count(*) from pgmem.remember_many(%s::jsonb)", (items(rng, min(2000, a.base - s), s),))
            res["base_load_s"] = round(time.perf_counter() - t, 1)
            c.execute("analyze pgmem.memories")
            print(f"base: {a.base} memories in {res['base_load_s']} s", file=sys.stderr)

            # 1. the trigger's cost on remember_many
            rates = {"trigger_on": [], "trigger_off": [], "trigger_on_10pct_facts": []}
            n = a.base
            for r in range(a.rounds):
                for mode in rates:
                    c.execute(f"alter table pgmem.memories {'disable' if mode == 'trigger_off' else 'enable'} trigger memories_profile_facts")
                    payload = items(rng, a.batch, n, 0.1 if mode.endswith("facts") else 0.0)
                    n += a.batch
                    rates[mode].append(a.batch / timed(c, "select count(*) from pgmem.remember_many(%s::jsonb)", (payload,)))
            c.execute("alter table pgmem.memories enable trigger memories_profile_facts")
            res["remember_many_per_s"] = {k: {"median": round(statistics.median(v)), "all": [round(x) for x in v]}
                                          for k, v in rates.items()}
            res["profile_facts_written"] = c.execute("select count(*) from pgmem.profile_facts").fetchone()[0]
            # the trigger alone: plain multi-row INSERTs (every memories trigger fires; the surprise gate does not)
            ins = {"trigger_on": [], "trigger_off": []}
            sql = ("insert into pgmem.memories (tenant, user_id, content, embedding) select 'bench', 'u', 'row ' || g || ' ' || %s,"
                   " %s from generate_series(1, %s) g")
            for r in range(a.rounds):
                for mode in ins:
                    c.execute(f"alter table pgmem.memories {'disable' if mode == 'trigger_off' else 'enable'} trigger memories_profile_facts")
                    with c.transaction():
                        ins[mode].append(a.batch * 5 / timed(c, sql, (f"{mode}{r}", unit(rng), a.batch * 5)))
                        c.execute("delete from pgmem.embedding_queue")
            c.execute("alter table pgmem.memories enable trigger memories_profile_facts")
            res["insert_rows_per_s"] = {k: {"median": round(statistics.median(v)), "all": [round(x) for x in v]}
                                        for k, v in ins.items()}
            # the WHEN test alone: the trigger's own WHEN clause on a scratch table of the same two
            # columns (a memory without facts never calls the trigger function), 100,000 rows a round
            c.execute("create temp table when_bench (user_id text, metadata jsonb)")
            c.execute("create function pg_temp.noop() returns trigger language plpgsql as 'begin return null; end'")
            c.execute("create trigger t after insert on when_bench for each row"
                      " when (new.user_id is not null and jsonb_typeof(new.metadata->'facts') = 'array')"
                      " execute function pg_temp.noop()")
            n_rows = 200000
            fill = ("insert into when_bench select 'u', jsonb_build_object('source', 'chat', 'n', g)"
                    f" from generate_series(1, {n_rows}) g")
            when = {"trigger_on": [], "trigger_off": []}
            for r in range(max(a.rounds, 7)):
                for mode in when:
                    c.execute(f"alter table when_bench {'disable' if mode == 'trigger_off' else 'enable'} trigger t")
                    c.execute("truncate when_bench")
                    when[mode].append(timed(c, fill))
            # the fastest round of each (the least disturbed by the other processes of a shared machine)
            res["insert_us_per_row"] = {k: round(1e6 * min(v) / n_rows, 3) for k, v in when.items()}
            res["when_test_us_per_row"] = round(res["insert_us_per_row"]["trigger_on"] - res["insert_us_per_row"]["trigger_off"], 3)
            # one set_fact (what a memory with one fact costs the trigger): 200 calls in one statement
            t_sf = timed(c, "select count(*) from generate_series(1, 200) g,"
                            " lateral pgmem.set_fact('sf' || (g %% 50), 'location', to_jsonb('City ' || g))")
            res["set_fact_ms"] = round(1000 * t_sf / 200, 3)
            print(json.dumps({k: res[k] for k in ("remember_many_per_s", "insert_rows_per_s", "insert_us_per_row", "when_test_us_per_row",
                                                  "set_fact_ms")}), file=sys.stderr)

            # 2. context_for per turn, and its parts alone
            centers = [unit(rng) for _ in TOPICS]
            texts = ["Hi there!", "My name is Pat and I live in Lyon."]
            vecs = [unit(rng), unit(rng)]
            for i in range(a.turns - 2):
                k = (i // 4) % 10  # four turns per topic, then the next
                texts.append(["How does", "Tell me more about it", "What about", "Why is that"][i % 4] + f" {TOPICS[k]} {i}?")
                vecs.append(unit(rng, centers[k]))
            lat = []
            for tx, v in zip(texts, vecs):
                lat.append(timed(c, "select pgmem.context_for(%s, %s, 'bench-conv', 'u')", (tx, v)))
            steady = lat[20:]
            res["context_for_ms"] = {"p50": round(1000 * pct(steady, 50), 2), "p95": round(1000 * pct(steady, 95), 2),
                                     "turns": len(lat), "measured": len(steady)}
            parts = {}
            q, v = texts[-1], vecs[-1]
            for label, sql, p in (
                    ("classify_intent", "select * from pgmem.classify_intent(%s, 'bench-conv')", (q,)),
                    ("observe_turn", "select pgmem.observe_turn('bench-parts', %s, %s, 'u')", (q, v)),
                    ("resolve_thread", "select * from pgmem.resolve_thread('bench-conv', %s)", (v,)),
                    ("research_context", "select pgmem.research_context(%s, %s, 'u')", (q, v)),
                    ("search_k6", "select * from pgmem.search(%s, %s, 6, filters => '{\"user_id\": \"u\"}')", (q, v)),
                    ("remember", "select * from pgmem.remember(%s || clock_timestamp()::text, %s, user_id => 'u')", (q, v))):
                xs = [timed(c, sql, p) for _ in range(30)]
                parts[label] = round(1000 * statistics.median(xs), 2)
            res["context_for_parts_median_ms"] = parts
            res["threads"] = c.execute("select count(*), count(*) filter (where status = 'active') from pgmem.threads").fetchone()
            print(json.dumps({k: res[k] for k in ("context_for_ms", "context_for_parts_median_ms", "threads")}), file=sys.stderr)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'drop database if exists "{name}" with (force)')
    res["loadavg_end"] = os.getloadavg()
    out = HERE / "results" / f"layered-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
