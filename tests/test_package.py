"""pgmem as a package (issue 18): layers of the Python code, SQLSTATE mapping, the wheel.

* Layers: the client, the worker and the models import neither the installer (migrate,
  Alembic) nor the embedded cluster; ``pgmem.db`` resolves the DSN and connects.
* errors.py maps SQLSTATEs raised by the SQL API to client exceptions: 22023 -> InvalidInput,
  P0002 -> NotFound, 42501 (no tenant, or a tenant the login may not use) -> TenantError.
"""
from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import secrets
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from conftest import connect, run_checked as _run
from pgmem import db
from pgmem.client import AsyncMemoryClient, MemoryClient
from pgmem.errors import (
    DatabaseError,
    InvalidInput,
    NotFound,
    PgmemError,
    SetupError,
    TenantError,
    from_database,
)

PYTHONPATH = os.environ.get("PYTHONPATH", "")


def _modules_after(code: str) -> set[str]:
    """The pgmem/alembic/sqlalchemy/torch modules loaded by ``code`` in a fresh interpreter."""
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in " \
                   "('pgmem', 'alembic', 'sqlalchemy', 'torch', 'sentence_transformers', 'tqdm'))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": PYTHONPATH, "PGMEM_DSN": "postgresql://nobody@127.0.0.1:1/x"})
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


# ----------------------------------------------------------------------------- layers
@pytest.mark.parametrize("code", [
    "import pgmem.client",
    "import pgmem.worker",
    "from pgmem import MemoryClient, AsyncMemoryClient",
    # constructing a client with a DSN resolves it through pgmem.db only
    "from pgmem import MemoryClient; MemoryClient(tenant='acme', embedder=None)",
    "import pgmem.extraction; pgmem.extraction.make_extractor('heuristic').extract('hi')",
])
def test_client_does_not_import_installer_or_cluster(code):
    loaded = _modules_after(code)
    assert "pgmem.migrate" not in loaded and "pgmem.cluster" not in loaded, loaded
    assert not {m for m in loaded if m.split(".")[0] in ("alembic", "sqlalchemy", "torch", "tqdm")}, loaded
    if "MemoryClient(" in code:
        assert "pgmem.db" in loaded


def test_models_import_no_installer():
    loaded = _modules_after("import pgmem.models")
    assert "pgmem.migrate" not in loaded and "pgmem.cluster" not in loaded and "alembic" not in loaded
    assert "sqlalchemy" in loaded  # models are SQLAlchemy models, that import is theirs


def test_extraction_split_keeps_public_names():
    import pgmem.extraction as ex
    from pgmem.extraction import heuristic, llm

    for name in ex.__all__:
        assert getattr(ex, name) is not None
    assert ex.HeuristicExtractor is heuristic.HeuristicExtractor and ex.LLMExtractor is llm.LLMExtractor
    # the heuristic module knows nothing of HTTP; the LLM module falls back on the heuristic one
    assert "urllib" not in heuristic.__dict__ and "http" not in heuristic.__dict__
    assert isinstance(llm.LLMExtractor(base_url="http://127.0.0.1:9/v1", model="m").fallback,
                      heuristic.HeuristicExtractor)


def test_resolve_dsn_precedence(monkeypatch):
    monkeypatch.setenv("PGMEM_DSN", "postgresql://env@h/db")
    assert db.resolve_dsn("postgresql://arg@h/db") == "postgresql://arg@h/db"
    assert db.resolve_dsn(None) == "postgresql://env@h/db"
    assert db.describe_dsn("postgresql://u:secret@db.example:6543/mem") == "db.example:6543/mem"


def test_resolve_dsn_without_any_database_names_both_fixes(monkeypatch, tmp_path):
    monkeypatch.delenv("PGMEM_DSN", raising=False)
    monkeypatch.setenv("PGMEM_HOME", str(tmp_path / "nothing-here"))
    with pytest.raises(SetupError, match="set PGMEM_DSN .*'pgmem db up'"):
        db.resolve_dsn(None)


def test_connect_error_is_one_line_without_password():
    with pytest.raises(SetupError) as ei:
        db.connect("postgresql://u:hunter2@127.0.0.1:1/x", connect_timeout=2)
    msg = str(ei.value)
    assert msg.startswith("cannot connect to 127.0.0.1:1/x:") and "hunter2" not in msg and "\n" not in msg


# ----------------------------------------------------------------------------- SQLSTATEs
def _server_error(dsn: str, sql: str, tenant: str | None = "acme") -> psycopg.Error:
    with connect(dsn, tenant=tenant) as c:
        with pytest.raises(psycopg.Error) as ei:
            c.execute(sql)
    return ei.value


@pytest.mark.parametrize(("sql", "tenant", "cls", "state"), [
    ("select pgmem._bad_input('k must be positive', 'pass k >= 1')", "acme", InvalidInput, "22023"),
    ("select pgmem.forget(123456789)", "acme", NotFound, "P0002"),
    ("select pgmem._require_tenant()", None, TenantError, "42501"),
])
def test_from_database_maps_sqlstates(dsn, sql, tenant, cls, state):
    err = _server_error(dsn, sql, tenant)
    assert err.sqlstate == state
    mapped = from_database(err)
    assert type(mapped) is cls and isinstance(mapped, DatabaseError) and isinstance(mapped, PgmemError)
    assert mapped.sqlstate == state
    assert mapped.message == err.diag.message_primary and mapped.hint == err.diag.message_hint
    if mapped.hint:
        assert str(mapped) == f"{mapped.message} (hint: {mapped.hint})"


def test_from_database_maps_other_errors_by_their_class(dsn):
    """Issue 26: every SQLSTATE has a class; one without its own takes its SQLSTATE class's."""
    from pgmem.errors import DataError

    err = _server_error(dsn, "select 1/0")
    mapped = from_database(err)
    assert type(mapped) is DataError and mapped.sqlstate == "22012" and "division by zero" in str(mapped)
    plain = ValueError("not from the server")
    assert from_database(plain) is plain


def test_mapped_errors_are_builtin_kinds_too():
    assert issubclass(InvalidInput, ValueError) and issubclass(NotFound, LookupError)
    assert issubclass(TenantError, PermissionError)


def test_client_raises_mapped_errors(dsn):
    with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
        with pytest.raises(InvalidInput, match='unknown category "gossip"') as ei:
            mem.remember("a fact", category="gossip")
        assert ei.value.sqlstate == "22023" and isinstance(ei.value.__cause__, psycopg.errors.InvalidParameterValue)
        with pytest.raises(NotFound, match="does not exist"):
            mem.restore(987654321)


@pytest.fixture
def reader_dsn(cluster, dsn):
    """The DSN of a login role granted only pgmem_reader (dropped after the test)."""
    name, pw = f"reader_{uuid.uuid4().hex[:10]}", secrets.token_urlsafe(18)
    with connect(cluster.dsn("postgres"), tenant=None) as su:
        su.execute(sql.SQL("create role {} login password {} in role pgmem_reader").format(
            sql.Identifier(name), sql.Literal(pw)))
    yield make_conninfo(dsn, user=name, password=pw)
    with connect(cluster.dsn("postgres"), tenant=None) as su:
        su.execute("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (name,))
        su.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


def test_client_maps_insufficient_privilege_to_tenant_error(reader_dsn):
    # a BI login may read but not write: the server's 42501 reaches the caller as TenantError
    with MemoryClient(reader_dsn, tenant="acme", embedder=None) as mem:
        with pytest.raises(TenantError) as ei:
            mem.remember("a fact")
        assert ei.value.sqlstate == "42501" and isinstance(ei.value.__cause__, psycopg.errors.InsufficientPrivilege)


def test_async_client_raises_mapped_errors(dsn):
    async def go():
        async with AsyncMemoryClient(dsn, tenant="acme", embedder=None) as mem:
            with pytest.raises(NotFound, match="does not exist"):
                await mem.forget(987654321)
            with pytest.raises(InvalidInput, match="unknown category"):
                await mem.remember("a fact", category="gossip")

    asyncio.run(go())


# ----------------------------------------------------------------------------- the wheel
REPO = Path(__file__).resolve().parent.parent

USE_THE_WHEEL = r"""
import json, sys
import pgmem
from pgmem import MemoryClient

assert "site-packages" in pgmem.__file__, pgmem.__file__
dim = 384
def unit(i):
    v = [0.0] * dim
    v[i] = 1.0
    return v

with MemoryClient(tenant="wheel", embedder=None) as mem:  # PGMEM_DSN
    stored = [mem.remember(text, embedding=unit(i), who="user") for i, text in enumerate(
        ["Maya is allergic to peanuts", "The deploy runs on Fridays", "Maya prefers tea to coffee"])]
    text_only = mem.remember("Zanzibar trip booked for March", who="user", embed=False)
    # bulk ingest: heuristic 5W1H extraction and a progress bar, without tqdm in the venv
    many = mem.remember_many([{"content": "Kofi moved the standup to 9:30", "embedding": unit(7)}], progress=True)
    by_vector = mem.search("allergy", embedding=unit(0), k=3)
    by_text = mem.search("Zanzibar", k=3)
print(json.dumps({"file": pgmem.__file__, "decisions": [r.decision for r in stored + [text_only] + many],
                  "ids": [r.id for r in stored], "text_only": text_only.id,
                  "by_vector": [h.id for h in by_vector], "by_text": [h.id for h in by_text],
                  "lexical": [h.signals.get("lexical") for h in by_text]}))
"""


def test_wheel_carries_the_package_and_both_sql_lanes(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    want = {f"pgmem/{p.relative_to(REPO / 'python' / 'pgmem')}" for p in (REPO / "python" / "pgmem").rglob("*.py")}
    want |= {f"pgmem/sql/{p.name}" for p in (REPO / "sql").glob("*.sql")}
    want |= {f"pgmem/migrations/versions/{p.name}" for p in (REPO / "migrations" / "versions").glob("*.py")}
    want |= {"pgmem/migrations/env.py", "pgmem/migrations/script.py.mako", "pgmem/py.typed"}
    assert want - names == set()
    assert "Name: pgmem-agent" in meta
    core = [line.split(":", 1)[1].strip() for line in meta.splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert sorted(c.split("[")[0].split(">")[0].strip() for c in core) == ["pgvector", "psycopg"]
    extras = {line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Provides-Extra:")}
    assert {"embed", "extract", "install", "mcp", "bench", "dev"} <= extras


def test_wheel_installs_into_any_postgresql_outside_the_checkout(wheel, fresh_db, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{wheel}[install]"], cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGMEM_", "PYTHON", "VIRTUAL_ENV"))}
    env["PGMEM_DSN"] = fresh_db(None)  # an empty database: nothing of pgmem in it
    env["PGMEM_HOME"] = str(tmp_path / "home")
    work = tmp_path / "elsewhere"
    work.mkdir()
    with connect(env["PGMEM_DSN"], tenant=None) as c:
        assert c.execute("select to_regnamespace('pgmem')").fetchone()[0] is None
    # only what the wheel and its [install] extra bring: no torch, no sentence-transformers
    mods = _run([str(py), "-c", "import importlib.util as u; print([m for m in ('torch', 'sentence_transformers', "
                 "'tqdm', 'alembic') if u.find_spec(m)])"], env=env, cwd=work).stdout
    assert mods.strip() == "['alembic']"
    migrated = _run([str(venv / "bin" / "pgmem"), "migrate"], env=env, cwd=work)
    head = sorted(p.name for p in (REPO / "migrations" / "versions").glob("0*.py"))[-1].split("_")[0]
    assert f"pgmem is at revision {head}" in migrated.stdout
    out = json.loads(_run([str(py), "-c", USE_THE_WHEEL], env=env, cwd=work).stdout.strip().splitlines()[-1])
    assert out["file"].startswith(str(venv))
    assert out["decisions"] == ["stored"] * 5
    assert out["by_vector"][0] == out["ids"][0]  # the vector search finds the memory along e(0)
    assert out["by_text"] == [out["text_only"]] and out["lexical"][0] > 0  # text only: lexical at once
    # the idempotent lane came from the wheel: the installed functions carry the wheel's SQL
    with connect(env["PGMEM_DSN"], tenant=None) as c:
        n = c.execute("select count(*) from pg_proc where pronamespace = 'pgmem'::regnamespace").fetchone()[0]
        assert n > 50


def test_without_an_extra_the_command_says_what_to_install(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
         cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGMEM_", "PYTHON", "VIRTUAL_ENV"))}
    env["PGMEM_DSN"] = "postgresql://nobody@127.0.0.1:1/none"
    out = subprocess.run([str(venv / "bin" / "pgmem"), "migrate"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 2
    assert "pip install 'pgmem-agent[install]'" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([str(venv / "bin" / "pgmem"), "mcp", "--tenant", "acme"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert "pip install 'pgmem-agent[mcp]'" in out.stderr and "Traceback" not in out.stderr


# ----------------------------------------------------------------------------- async types
def _api_methods() -> list[str]:
    """The methods of pgmem.client._Api: each returns a plan (a Call or a Pipeline of
    pgmem._transport) that each client runs."""
    from pgmem.client import _Api

    return sorted(n for n, v in vars(_Api).items() if inspect.isfunction(v))


def test_every_api_method_runs_in_both_clients_with_one_signature():
    """One line per method in each client (pgmem.client: _sync, _coroutine): a method of _Api
    that one of them lacks would be missing from that client."""
    from pgmem.client import _Api, _Base

    names = _api_methods()
    assert {"remember", "remember_many", "search", "build_context", "forget", "history", "call",
            "context_for"} <= set(names)
    for name in names:
        assert re.match(r"(Plan|Call|Pipeline)\[", str(inspect.signature(getattr(_Api, name)).return_annotation)), \
            f"_Api.{name} must return a plan (Call, Pipeline or Plan), annotated"
    # the clients get the API from _Api's wrapped methods only, and _Base has no public method of I/O
    assert not issubclass(MemoryClient, _Api) and not issubclass(AsyncMemoryClient, _Api)
    assert {n for n in vars(_Base) if not n.startswith("_") and inspect.isfunction(vars(_Base)[n])} == \
        {"set_tenant_claim"}
    for name in names:
        sync, coro = vars(MemoryClient).get(name), vars(AsyncMemoryClient).get(name)
        assert sync is not None and coro is not None, f"{name}: add `{name} = _sync(_Api.{name})` to MemoryClient " \
            f"and `{name} = _coroutine(_Api.{name})` to AsyncMemoryClient"
        assert not inspect.iscoroutinefunction(sync), f"MemoryClient.{name} is a coroutine function"
        assert inspect.iscoroutinefunction(coro), f"AsyncMemoryClient.{name} is not a coroutine function"
        base = inspect.signature(getattr(_Api, name))
        for method in (sync, coro):
            sig = inspect.signature(method)
            assert sig.parameters == base.parameters and method.__doc__ == getattr(_Api, name).__doc__
            # the annotation of the run method is the plan's result: list[Hit], not Plan[list[Hit]]
            ret = sig.return_annotation
            assert base.return_annotation in (f"Plan[{ret}]", f"Call[{ret}]", f"Pipeline[{ret}]"), (name, ret)
    for name in ("close", "__aenter__", "__aexit__"):
        assert inspect.iscoroutinefunction(getattr(AsyncMemoryClient, name)), f"AsyncMemoryClient.{name}"


def test_async_client_end_to_end(dsn):
    def unit(i: int) -> list[float]:
        v = [0.0] * 384
        v[i] = 1.0
        return v

    async def go():
        async with AsyncMemoryClient(dsn, tenant="acme", embedder=None) as mem:
            r = await mem.remember("Maya is allergic to peanuts", embedding=unit(3), who="user")
            other = await mem.remember("The deploy runs on Fridays", embedding=unit(4), who="ops")
            hits = await mem.search("peanuts", embedding=unit(3), k=2)
            got = await mem.get(r.id)
            ctx = await mem.build_context("peanuts", embedding=unit(3), token_budget=200)
            await mem.forget(other.id, reason="test")
            await mem.restore(other.id)
            hist = await mem.history(other.id)
            many = await mem.remember_many([{"content": "Kofi likes green tea", "embedding": unit(5)}])
            return r, hits, got, ctx, hist, many

    r, hits, got, ctx, hist, many = asyncio.run(go())
    assert r.stored and hits[0].id == r.id and hits[0].signals["semantic"] == pytest.approx(1.0)
    assert got["content"] == "Maya is allergic to peanuts"
    assert ctx[0]["id"] == r.id
    assert [h["op"] for h in hist] == ["add", "delete", "restore"]
    assert [m.decision for m in many] == ["stored"]
