"""Test harness: a real PostgreSQL 15 cluster with pgvector, plpython3u and pg_cron.

The cluster lives under ``.pgmem/test`` on its own port (PGMEM_TEST_PORT, default 54330),
started as the ``postgres`` user when the tests run as root. pgmem is installed once into a
template database; every test that asks for ``dsn``/``conn`` gets a fresh database cloned
from it by pytest-postgresql's DatabaseJanitor (a file copy: fast). The ``pgmem`` database
of the test cluster is the one pg_cron lives in (cron.database_name).
"""
from __future__ import annotations

import fcntl
import math
import os
import secrets
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from pytest_postgresql.janitor import DatabaseJanitor

from pgmem import migrate
from pgmem.cluster import Cluster, SUPERUSER

# mem0ai (the [mem0] extra, imported by the drop-in's tests) sends telemetry unless told not to,
# and reads the switch when it is imported: no test may reach beyond 127.0.0.1
os.environ["MEM0_TELEMETRY"] = "False"

ROOT = Path(__file__).resolve().parent.parent
# One template per pytest process, so that concurrent runs against the same cluster (two
# terminals, parallel workers) never drop each other's template.
TEMPLATE = f"pgmem_template_{os.getpid()}"
CRON_DB = "pgmem"
DIM = 384  # the embedding dimension the test databases are installed with


def e(i: int) -> np.ndarray:
    """The unit vector along axis i."""
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


def at_cos(i: int, j: int, c: float) -> np.ndarray:
    """A unit vector with cosine c to e(i), in the plane of axes i and j."""
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = c
    v[j] = math.sqrt(1.0 - c * c)
    return v


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    c = Cluster(
        Path(os.environ.get("PGMEM_TEST_HOME", ROOT / ".pgmem" / "test")),
        port=int(os.environ.get("PGMEM_TEST_PORT", "54330")),
        dbname=CRON_DB,
        cron_database=CRON_DB,
        settings={"fsync": "off", "shared_buffers": "'256MB'", "max_connections": "200"},
    )
    c.home.mkdir(parents=True, exist_ok=True)
    # Every session holds a shared lock while it uses the cluster; the last one out stops it.
    lock = open(c.home / ".sessions.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_SH)
    with open(c.home / ".startup.lock", "w") as startup:
        fcntl.flock(startup, fcntl.LOCK_EX)  # one session at a time creates/starts/migrates
        c.init()
        c.start()
        c.wait_ready()
        c.ensure_database(CRON_DB, tenant=None)
        migrate.upgrade(c.dsn(CRON_DB))
    _build_template(c)
    yield c
    _janitor(c, TEMPLATE).drop()
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not os.environ.get("PGMEM_TEST_KEEP_CLUSTER"):
            c.stop()
    except BlockingIOError:
        pass  # another test session still uses the cluster
    finally:
        lock.close()


def _janitor(c: Cluster, dbname: str, template: str | None = None) -> DatabaseJanitor:
    return DatabaseJanitor(user=SUPERUSER, host="127.0.0.1", port=c.port, dbname=dbname,
                           template_dbname=template, password=c.password)


def _build_template(c: Cluster) -> None:
    j = _janitor(c, TEMPLATE)
    j.drop()
    j.init()
    migrate.upgrade(c.dsn(TEMPLATE))


@pytest.fixture
def fresh_db(cluster: Cluster):
    """A factory of empty-but-installed databases; each is dropped after the test."""
    made: list[DatabaseJanitor] = []

    def make(template: str | None = TEMPLATE) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        j = _janitor(cluster, name, template)
        j.init()
        made.append(j)
        return cluster.dsn(name)

    yield make
    for j in made:
        j.drop()


@pytest.fixture
def dsn(fresh_db) -> str:
    """DSN of a fresh database with pgmem installed."""
    return fresh_db()


@pytest.fixture
def conn(dsn):
    """An autocommit connection to a fresh pgmem database, tenant 'acme'."""
    with connect(dsn, tenant="acme") as c:
        yield c


def connect(dsn: str, tenant: str | None = "acme", **kw) -> psycopg.Connection:
    from pgvector.psycopg import register_vector

    options = f"-c pgmem.tenant={tenant}" if tenant else ""
    c = psycopg.connect(dsn, autocommit=kw.pop("autocommit", True), options=options, **kw)
    if c.execute("select to_regtype('vector')").fetchone()[0] is not None:
        register_vector(c)
    return c


# ------------------------------------------------------------------------------ login roles
# Real login roles over TCP, for the tests of tenancy and least privilege (test_tenancy.py and
# every module that runs its functions as another tenant): the module-scoped ``roles`` fixture
# gives app/bi/admin logins; ``role_connect`` connects as one of them.
def login_roles(cluster, prefix: str, grants: dict[str, str]):
    """Login roles (cluster-wide, so with unique names) granted pgmem's roles, kind -> pgmem
    role; yields {kind: (name, password)} and drops them afterwards (a fixture body)."""
    suffix = uuid.uuid4().hex[:10]
    made: dict[str, tuple[str, str]] = {}
    with connect(cluster.dsn("postgres"), tenant=None) as su:
        for kind, grant in grants.items():
            name, pw = f"{prefix}{kind}_{suffix}", secrets.token_urlsafe(18)
            su.execute(sql.SQL("create role {} login password {}").format(sql.Identifier(name), sql.Literal(pw)))
            su.execute(sql.SQL("grant {} to {}").format(sql.Identifier(grant), sql.Identifier(name)))
            made[kind] = (name, pw)
    yield made
    with connect(cluster.dsn("postgres"), tenant=None) as su:
        for name, _ in made.values():
            # sessions of the role in databases the test left behind would block the drop
            su.execute("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (name,))
            su.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def roles(cluster):
    """Login roles app/bi/admin (unique names), granted pgmem_app/pgmem_reader/pgmem_admin."""
    yield from login_roles(cluster, "user_", {"app": "pgmem_app", "bi": "pgmem_reader", "admin": "pgmem_admin"})


def grant_tenant(dsn: str, role: str, *tenants: str) -> None:
    """Bind a login to tenants in the database of ``dsn`` (pgmem.tenant_grants)."""
    with connect(dsn, tenant=None) as su:
        for t in tenants:
            su.execute("select pgmem.grant_tenant(%s, %s)", (role, t))


def role_connect(cluster, dsn: str, roles, kind: str, tenant: str | None, *, grant: bool = True) -> psycopg.Connection:
    """A TCP connection as one of the test's login roles to the database of ``dsn``; with
    ``grant``, the login is first granted the tenant it connects with."""
    from pgvector.psycopg import register_vector

    name, pw = roles[kind]
    dbname = conninfo_to_dict(dsn)["dbname"]
    if grant and tenant and kind != "admin":
        grant_tenant(dsn, name, tenant)
    # app and reader sessions must run with both timeouts on (015_limits.sql)
    opts = "-c statement_timeout=30s -c idle_in_transaction_session_timeout=60s"
    c = psycopg.connect(host="127.0.0.1", port=cluster.port, user=name, password=pw, dbname=dbname,
                        autocommit=True, options=opts + (f" -c pgmem.tenant={tenant}" if tenant else ""))
    register_vector(c)
    assert c.execute("select current_user").fetchone()[0] == name
    return c



# ------------------------------------------------------------------------------ the wheel
WHEEL_TREE = ("pyproject.toml", "README.md", "python", "sql", "migrations")


def run_checked(cmd: list, **kw) -> subprocess.CompletedProcess:
    """Run a command; its output is the assertion's message when it fails."""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 600), **kw)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """pgmem's wheel, built from a copy of the tree it is made of (the checkout stays clean)."""
    src = tmp_path_factory.mktemp("src")
    for item in WHEEL_TREE:
        (shutil.copytree if (ROOT / item).is_dir() else shutil.copy)(ROOT / item, src / item)
    out = tmp_path_factory.mktemp("dist")
    run_checked([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)])
    (whl,) = out.glob("pgmem_agent-*.whl")
    return whl


# ------------------------------------------------------------------------------ the suite in parts
#: modules that start PostgreSQL clusters of their own (standbys, failover, shards, a crash)
CLUSTER_MODULES = {"test_auto_failover", "test_crash", "test_failover", "test_replica", "test_shards"}
#: modules that run pgmem (or Node, or pip) as processes: the command line, the wheel, the images
PROCESS_MODULES = {"test_cli_embeddings", "test_cli_errors", "test_cli_ingest", "test_cli_readme", "test_cli_reembed",
                   "test_migrations_cli", "test_package", "test_node_example", "test_upgrade", "test_layered_cli",
                   "test_docker_static", "test_demo"}


def pytest_collection_modifyitems(config, items):
    """Marks by module (pyproject.toml declares the markers): `make test-fast` leaves out
    `cluster`, `process` and `slow`; `make test` runs everything."""
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if item.module else ""
        if module in CLUSTER_MODULES:
            item.add_marker(pytest.mark.cluster)
        if module in PROCESS_MODULES:
            item.add_marker(pytest.mark.process)
