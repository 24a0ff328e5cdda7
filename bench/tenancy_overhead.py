"""What the tenant binding costs (issue 14, SECURITY.md): pgmem.current_tenant() per call, how
often one fused search calls it, and search latency as the superuser, as an app login bound by
a grant, and as an app login with a signed claim, interleaved.

    PYTHONPATH=python PGMEM_PORT=... python bench/tenancy_overhead.py [--n 20000] [--rounds 8]

Runs in a scratch database of the embedded cluster (``pgmem db up``), dropped at the end.
"""
from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from pgvector.psycopg import register_vector  # noqa: E402

from pgmem import migrate  # noqa: E402
from pgmem.claims import sign_tenant_claim  # noqa: E402
from pgmem.cluster import default_cluster  # noqa: E402

WORDS = "kite boat train river mountain coffee milk bread window garden music paper light stone".split()
LIMITS = "-c statement_timeout=60s -c idle_in_transaction_session_timeout=60s"


def per_call_us(conn, expr: str, n: int = 20000) -> float:
    t = time.perf_counter()
    conn.execute(f"do $$ begin for i in 1..{n} loop perform {expr}; end loop; end $$")
    return (time.perf_counter() - t) / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000, help="memories in the scratch database")
    ap.add_argument("--rounds", type=int, default=8, help="interleaved rounds of 10 searches per session")
    args = ap.parse_args()
    c = default_cluster()
    db, login, pw = f"pgmem_tenancy_{uuid.uuid4().hex[:8]}", f"tenancy_bench_{uuid.uuid4().hex[:6]}", secrets.token_hex(12)
    with psycopg.connect(c.dsn("postgres"), autocommit=True) as su:
        su.execute(sql.SQL("create database {}").format(sql.Identifier(db)))
        su.execute(sql.SQL("create role {} login password {}").format(sql.Identifier(login), sql.Literal(pw)))
        su.execute(sql.SQL("grant pgmem_app to {}").format(sql.Identifier(login)))
    conns: dict[str, psycopg.Connection] = {}
    try:
        dsn = c.dsn(db)
        migrate.upgrade(dsn)
        rng = np.random.default_rng(1)
        vecs = rng.normal(size=(args.n, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        with psycopg.connect(dsn, autocommit=True, options="-c pgmem.tenant=acme") as s:
            register_vector(s)
            s.execute("select pgmem.grant_tenant(%s, 'acme')", (login,))
            key = bytes(s.execute("select pgmem.add_claim_key('default')").fetchone()[0])
            with s.cursor().copy("copy pgmem.memories (tenant, content, embedding) from stdin") as cp:
                for i in range(args.n):
                    cp.write_row(("acme", " ".join(rng.choice(WORDS, 8)) + f" note {i}", vecs[i]))
            s.execute("vacuum analyze pgmem.memories")
        app = f"postgresql://{login}:{pw}@127.0.0.1:{c.port}/{db}"
        conns = {"superuser": psycopg.connect(dsn, autocommit=True, options="-c pgmem.tenant=acme"),
                 "app_grant": psycopg.connect(app, autocommit=True, options=LIMITS + " -c pgmem.tenant=acme"),
                 "app_claim": psycopg.connect(app, autocommit=True, options=LIMITS)}
        conns["app_claim"].execute("select set_config('pgmem.tenant_claim', %s, false)",
                                   (sign_tenant_claim(key, "acme", ttl=3600),))
        out: dict = {"n": args.n, "current_tenant_us": {}, "guc_read_us": {}, "search_ms": {}}
        for name, conn in conns.items():
            register_vector(conn)
            out["current_tenant_us"][name] = round(per_call_us(conn, "pgmem.current_tenant()"), 1)
            out["guc_read_us"][name] = round(per_call_us(conn, "nullif(current_setting('pgmem.tenant', true), '')"), 1)
        # calls of the tenancy functions in one search, per kind of session (function statistics
        # on for this database; the app's policies call current_tenant() too)
        with psycopg.connect(c.dsn("postgres"), autocommit=True) as su:
            su.execute(sql.SQL("alter database {} set track_functions = 'all'").format(sql.Identifier(db)))
        out["calls_per_search"] = {}
        for name, extra in (("superuser", {}), ("app_grant", {"user": login}), ("app_claim", {"user": login})):
            opts = ("-c pgmem.tenant=acme" if name != "app_claim" else "") + (" " + LIMITS if extra else "")
            with psycopg.connect(dsn if not extra else app, autocommit=True, options=opts) as s, \
                    psycopg.connect(dsn, autocommit=True) as st:
                register_vector(s)
                if name == "app_claim":
                    s.execute("select set_config('pgmem.tenant_claim', %s, false)", (sign_tenant_claim(key, "acme", ttl=3600),))
                st.execute("select pg_stat_reset()")
                time.sleep(0.2)
                for i in range(10):
                    s.execute("select * from pgmem.search('kite boat river', %s::vector, k => 10)", (vecs[i],)).fetchall()
            time.sleep(1.5)  # function statistics are flushed when the session ends
            with psycopg.connect(dsn, autocommit=True) as st:
                out["calls_per_search"][name] = {r[0]: r[1] / 10 for r in st.execute(
                    "select funcname, calls from pg_stat_user_functions where schemaname = 'pgmem'"
                    " and funcname in ('current_tenant', '_require_tenant', '_setting', '_claim_tenant')")}
        q = ("do $$ declare v vector := (select embedding from pgmem.memories where id = 7); "
             "begin for i in 1..10 loop perform count(*) from pgmem.search('kite boat river', v, k => 10); end loop; end $$")
        lat: dict[str, list[float]] = {k: [] for k in conns}
        for rnd in range(args.rounds):
            order = list(conns.items()) if rnd % 2 == 0 else list(reversed(conns.items()))
            for name, conn in order:
                t = time.perf_counter()
                conn.execute(q)
                lat[name].append((time.perf_counter() - t) / 10 * 1000)
        out["search_ms"] = {k: {"median": round(statistics.median(v), 2), "rounds": [round(x, 1) for x in v]}
                            for k, v in lat.items()}
        print(json.dumps(out, indent=2))
        return 0
    finally:
        for conn in conns.values():
            conn.close()
        with psycopg.connect(c.dsn("postgres"), autocommit=True) as su:
            su.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(db)))
            su.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(login)))


if __name__ == "__main__":
    sys.exit(main())
