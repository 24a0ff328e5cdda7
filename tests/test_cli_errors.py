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


# ------------------------------------------------------------------------------ issue 34, item 5
def _with(dsn: str, **parts) -> str:
    d = conninfo_to_dict(dsn)
    d.update(parts)
    return make_conninfo(**d)


@pytest.fixture
def bare_db(cluster, dsn):
    """A database of the test cluster without pgmem (no extension, no schema)."""
    name = f"bare_{os.getpid()}_{int(time.monotonic() * 1000) % 100000}"
    with connect(dsn, tenant=None) as su:
        su.execute(f'create database "{name}"')
    yield _with(dsn, dbname=name)
    with connect(dsn, tenant=None) as su:
        su.execute(f'drop database if exists "{name}" with (force)')


def test_a_database_without_pgmem_is_one_line_within_5_seconds(bare_db, tmp_path):
    """Issue 34: it retried for 2 minutes and printed 21 lines."""
    f = tmp_path / "events.jsonl"
    f.write_text('{"content": "hello"}\n')
    for args in (["search", "where is the trip"], ["remember", "Maya likes tea", "--no-extract"], ["ingest", str(f)],
                 ["get", "1"], ["worker", "--once"], ["profile", "maya"]):
        p = run(*args, "--tenant", "acme", dsn=bare_db) if args[0] not in ("worker",) else run(*args, dsn=bare_db)
        line = one_line(p, "pgmem is not installed in database 'bare_", "pgmem migrate")
        assert f"127.0.0.1:{conninfo_to_dict(bare_db)['port']}" in line
        assert p.seconds < 5, (args, p.seconds)
    one_line(run("jobs", "status", dsn=bare_db), "pgmem migrate")
    p = run("serve", "--port", str(_free_port()), "--no-mcp", dsn=bare_db)
    one_line(p, "pgmem is not installed in database 'bare_", "pgmem migrate")
    assert p.seconds < 5


def test_a_missing_database_role_or_password_is_one_line_naming_the_fix(cluster, dsn):
    port = conninfo_to_dict(dsn)["port"]
    cases = [
        (_with(dsn, dbname="no_such_db"), ["database 'no_such_db' does not exist on 127.0.0.1:" + port,
                                            "createdb", "PGMEM_DSN"]),
        (_with(dsn, user="no_such_role", password="x"), ["refused the password of user 'no_such_role'",
                                                          "check the user and password in PGMEM_DSN"]),
        (_with(dsn, password="wrong-password"), ["refused the password of user", "PGMEM_DSN"]),
        (_with(dsn, port=str(_free_port())), ["cannot connect to 127.0.0.1:", "Connection refused",
                                              "is PostgreSQL running there?"]),
    ]
    for bad, fragments in cases:
        for args in (["search", "x", "--tenant", "acme"], ["worker", "--once"]):
            p = run(*args, dsn=bad)
            line = one_line(p, *fragments)
            assert "wrong-password" not in line  # never the password
            if "Connection refused" not in fragments:
                assert "is PostgreSQL running there" not in line, line  # it is: that was not the problem
            assert p.seconds < 5, (bad, args, p.seconds)


def test_the_connect_failure_of_a_role_that_does_not_exist():
    """With trust or peer authentication the server says so (no password is asked)."""
    from pgmem.db import connect_failure

    e = psycopg.OperationalError('connection failed: connection to server at "db", port 6543 failed: FATAL:  role '
                                 '"maya" does not exist')
    assert connect_failure("postgresql://maya:pw@db:6543/mem", e) == (
        "role 'maya' does not exist on db:6543: create it (createuser --login -P maya) or name another user in "
        "PGMEM_DSN")


def test_no_warning_before_a_commands_output(dsn):
    for args in (["search", "tea", "--tenant", "acme"], ["remember", "Maya likes tea", "--tenant", "acme",
                                                          "--no-extract"], ["profile", "maya", "--tenant", "acme"]):
        p = run(*args, dsn=dsn, env={"PGMEM_EMBEDDER": "auto"})
        assert p.returncode == 0 and p.stderr == "", (args, p.stderr)


def test_version_and_true_help():
    import tomllib

    from pgmem import __version__

    p = run("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"pgmem {__version__}"
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == __version__
    helptext = run("--help").stdout
    search = " ".join(helptext.split())
    assert "six-signal" not in search and "fused search over ten signals" in search
    # the ten named in the help are the ten of the default ranking (sql/205_search.sql's header)
    header = (ROOT / "sql" / "205_search.sql").read_text().split("comment on")[0]
    named = search.split("fused search over ten signals (")[1].split(")")[0].split(", ")
    assert len(named) == 10 and all(n in header for n in named), named


def test_migrate_says_where_it_installed(cluster, tmp_path):
    """With the address in PGHOST/PGPORT (not in the DSN), migrate names it, not localhost:5432."""
    from conftest import _janitor

    name = f"mig_{os.getpid()}_{int(time.monotonic() * 1000) % 100000}"
    j = _janitor(cluster, name)
    j.init()
    try:
        p = run("migrate", env={"PGMEM_DSN": f"dbname={name} user=pgmem", "PGHOST": "127.0.0.1",
                                "PGPORT": str(cluster.port), "PGPASSWORD": cluster.password}, timeout=300)
        assert p.returncode == 0, p.stderr
        assert f"in 127.0.0.1:{cluster.port}/{name}" in p.stdout, p.stdout
    finally:
        j.drop()


def test_the_readme_lists_every_command():
    from pgmem.cli import build_parser

    commands = set(build_parser()._subparsers._group_actions[0].choices)
    readme = (ROOT / "README.md").read_text()
    listed = readme.split("`pgmem --help` lists the commands: ")[1].split(". Each")[0]
    assert {c.strip(" `\n") for c in listed.replace("\n", " ").split(",")} == commands
