"""The CLI for people (issue 26): every expected failure is one line on stderr that names the
fix, with exit code 2, never a traceback: a server that is down (within 5 s), bad JSON, a
missing file, a tenant the login is not granted, a malformed token, an expired claim (28000),
a read-only server (25006). The library maps each SQLSTATE to its own class."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from conftest import ROOT, connect

PGMEM = [sys.executable, "-m", "pgmem.cli"]


def run(*args, dsn: str | None = None, env: dict | None = None, timeout: float = 120):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    e.update({"PYTHONPATH": str(ROOT / "python"), "PGMEM_EMBEDDER": "onnx", **(env or {})})
    if dsn:
        e["PGMEM_DSN"] = dsn
    t = time.monotonic()
    p = subprocess.run(PGMEM + list(args), capture_output=True, text=True, env=e, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    p.seconds = time.monotonic() - t
    return p


def one_line(p, *fragments: str) -> str:
    """The failure is exit code 2 and exactly one line on stderr, holding every fragment."""
    assert "Traceback" not in p.stderr, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    assert lines[0].startswith("pgmem: ")
    return lines[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_down_is_one_line_within_5_seconds(tmp_path):
    dead = f"postgresql://app:secret-pw@127.0.0.1:{_free_port()}/pgmem"
    f = tmp_path / "events.jsonl"
    f.write_text('{"content": "hello"}\n')
    for args in (["search", "where is the trip"], ["remember", "Maya likes tea", "--no-extract"], ["ingest", str(f)],
                 ["get", "1"], ["worker", "--once"], ["jobs", "status"], ["migrate"], ["reembed", "--status"]):
        p = run(*args, dsn=dead)
        line = one_line(p, "cannot connect to 127.0.0.1:", "check PGMEM_DSN")
        assert "secret-pw" not in line  # never the password
        assert p.seconds < 5, (args, p.seconds)


def test_bad_json_and_missing_file(dsn, tmp_path):
    one_line(run("search", "x", "--filters", "{user_id: maya}", dsn=dsn),
             "--filters is not JSON", "give an object, e.g. --filters '{\"user_id\": \"maya\"}'")
    one_line(run("search", "x", "--filters", "[1, 2]", dsn=dsn), "--filters must be a JSON object, not list")
    one_line(run("remember", "x", "--metadata", "{", "--no-embed", dsn=dsn), "--metadata is not JSON")
    one_line(run("ingest", str(tmp_path / "nope.jsonl"), dsn=dsn), "nope.jsonl: no such file: check the path")
    one_line(run("ingest", str(tmp_path), dsn=dsn), "is a directory")


def _login(cluster, dsn, roles, kind="app"):  # noqa: F811
    name, pw = roles[kind]
    d = conninfo_to_dict(dsn)
    return make_conninfo(host="127.0.0.1", port=cluster.port, user=name, password=pw, dbname=d["dbname"],
                         options="-c statement_timeout=30s -c idle_in_transaction_session_timeout=60s")


def test_tenant_not_granted_bad_token_and_expired_claim(cluster, dsn, roles):  # noqa: F811
    from pgmem.claims import sign_tenant_claim

    app = _login(cluster, dsn, roles)
    one_line(run("search", "x", "--tenant", "acme", dsn=app), "pgmem.tenant", "acme")
    one_line(run("search", "x", dsn=app, env={"PGMEM_TENANT_CLAIM": "not-a-token"}),
             "tenant_claim is not a signed tenant claim")
    with connect(dsn, tenant=None) as su:
        key = bytes(su.execute("select pgmem.add_claim_key('default')").fetchone()[0])
    expired = sign_tenant_claim(key, "acme", ttl=60, now=time.time() - 3600)
    one_line(run("search", "x", dsn=app, env={"PGMEM_TENANT_CLAIM": expired}),
             "pgmem.tenant_claim expired at", "get a fresh claim from the auth service")
    good = sign_tenant_claim(key, "acme", ttl=300)
    p = run("remember", "Maya likes tea", "--no-embed", "--no-extract", dsn=app, env={"PGMEM_TENANT_CLAIM": good})
    assert p.returncode == 0, p.stderr


def test_read_only_server_refuses_writes_in_one_line(dsn):
    """25006 (read_only_sql_transaction), as a hot standby raises it (tests/test_replica.py
    runs the real standby): here a database whose sessions are read-only."""
    dbname = conninfo_to_dict(dsn)["dbname"]
    with connect(dsn, tenant=None) as su:
        su.execute(f'alter database "{dbname}" set default_transaction_read_only = on')
    try:
        one_line(run("remember", "Maya likes tea", "--no-embed", "--no-extract", "--tenant", "acme", dsn=dsn),
                 "read-only transaction")
        p = run("search", "tea", "--tenant", "acme", dsn=dsn)  # reads still work
        assert p.returncode == 0, p.stderr
    finally:
        with psycopg.connect(dsn, autocommit=True, options="-c default_transaction_read_only=off") as su:
            su.execute(f'alter database "{dbname}" reset default_transaction_read_only')


def test_bad_argument_and_unknown_memory(dsn):
    one_line(run("search", "x", "--k", "0", "--tenant", "acme", dsn=dsn), "k must be between 1 and 1000")
    one_line(run("history", "424242", "--tenant", "acme", dsn=dsn), "no history for memory 424242")
    one_line(run("forget", "424242", "--tenant", "acme", dsn=dsn))


def test_every_sqlstate_has_its_class(dsn):
    """The library side: the client raises pgmem's class of each SQLSTATE, with the server's words."""
    from pgmem import MemoryClient
    from pgmem.errors import (ClaimError, DatabaseError, InvalidInput, NotFound, PgmemError, ReadOnlyError,
                              ServerUnavailable, StatementTimeout, TenantError, error_class)

    with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
        with pytest.raises(InvalidInput, match="k must be between 1 and 1000"):
            mem.search("x", k=0)
        with pytest.raises(NotFound):
            mem.forget(424242)
    with MemoryClient(dsn, tenant="acme", embedder=None, statement_timeout_ms=50, retries=0) as mem:
        with pytest.raises(StatementTimeout, match="statement timeout") as ei:
            mem._rows("select pg_sleep(1)", {})
        assert ei.value.sqlstate == "57014" and isinstance(ei.value.__cause__, psycopg.errors.QueryCanceled)
    with pytest.raises(PgmemError, match="not a signed tenant claim"):
        MemoryClient(dsn, tenant_claim="a.b.c", embedder=None)
    assert error_class("28000") is ClaimError and error_class("25006") is ReadOnlyError
    assert error_class("42501") is TenantError and error_class("22P02").__name__ == "DataError"
    assert error_class("XX000").__name__ == "InternalError" and error_class("ZZ999") is DatabaseError
    with pytest.raises(ServerUnavailable, match="cannot connect to 127.0.0.1"):
        MemoryClient(f"postgresql://x@127.0.0.1:{_free_port()}/db", tenant="acme", embedder=None).search("x")
