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
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pytest_postgresql.janitor import DatabaseJanitor

from pgmem import migrate
from pgmem.cluster import Cluster, SUPERUSER

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
