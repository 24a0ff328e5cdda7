"""The foundation: a real server with pgvector, PL/Python (+numpy) and pg_cron, pgmem's
migrations (up, down, idempotent re-apply) and the embedded cluster's error messages."""
from __future__ import annotations

import subprocess
import sys

import pytest

from pgmem import migrate
from pgmem.cluster import Cluster, port_in_use
from pgmem.errors import ClusterError, MigrationError, SetupError

from conftest import CRON_DB, ROOT, connect


def test_smoke_vector_plpython_cron(conn, cluster):
    """All three extensions work inside a fresh test database."""
    exts = {r[0] for r in conn.execute("select extname from pg_extension")}
    assert {"vector", "plpython3u"} <= exts
    # vector: HNSW index + <=> (cosine distance), and the planner uses the index
    conn.execute("create temp table v (id int, e vector(3))")
    conn.execute("insert into v select i, array[cos(i), sin(i), 1]::vector from generate_series(1, 500) i")
    conn.execute("create index on v using hnsw (e vector_cosine_ops)")
    conn.execute("analyze v")
    conn.execute("set enable_seqscan = off")
    plan = "\n".join(r[0] for r in conn.execute(
        "explain select id from v order by e <=> '[1,0,1]' limit 3"))
    assert "Index Scan using" in plan and "hnsw" in plan.lower() or "v_e_idx" in plan
    top = conn.execute("select id, e <=> '[1,0,1]' from v order by e <=> '[1,0,1]' limit 1").fetchone()
    assert top[1] < 0.01
    # plpython3u runs Debian's system Python and imports numpy
    conn.execute("""create function pg_temp.np_norm(x float8[]) returns float8 language plpython3u as $$
import numpy
return float(numpy.linalg.norm(numpy.array(x)))
$$""")
    assert conn.execute("select pg_temp.np_norm(array[3,4]::float8[])").fetchone()[0] == pytest.approx(5.0)
    # pg_cron lives in the cluster's cron database and schedules jobs into this one
    dbname = conn.info.dbname
    with connect(cluster.dsn(CRON_DB), tenant=None) as cron:
        assert cron.execute("select current_setting('cron.database_name')").fetchone()[0] == CRON_DB
        jobid = cron.execute(
            "select cron.schedule_in_database('smoke', '*/5 * * * *', 'select 1', %s)", (dbname,)
        ).fetchone()[0]
        assert cron.execute("select database, command from cron.job where jobid = %s", (jobid,)).fetchone() == (dbname, "select 1")
        cron.execute("select cron.unschedule(%s)", (jobid,))
        assert cron.execute("select count(*) from cron.job where jobid = %s", (jobid,)).fetchone()[0] == 0
    print(f"\nsmoke: server {conn.info.server_version}, extensions {sorted(exts)} + pg_cron in {CRON_DB!r}")


def test_schema_tables_and_roles(conn):
    tables = {r[0] for r in conn.execute("select tablename from pg_tables where schemaname = 'pgmem'")}
    assert {"memories", "links", "accesses", "history", "embedding_queue", "job_runs",
            "profiles", "categories", "settings", "tenants"} <= tables
    roles = {r[0] for r in conn.execute("select rolname from pg_roles where rolname like 'pgmem\\_%'")}
    assert {"pgmem_app", "pgmem_reader", "pgmem_admin"} <= roles
    dim = conn.execute("select atttypmod from pg_attribute where attrelid = 'pgmem.memories'::regclass and attname = 'embedding'").fetchone()[0]
    assert dim == 384


def test_downgrade_base_removes_everything_and_upgrade_restores(fresh_db):
    dsn = fresh_db(template=None)  # a plain database, no pgmem
    with connect(dsn, tenant=None) as c:
        before_ext = {r[0] for r in c.execute("select extname from pg_extension")}
    migrate.upgrade(dsn)
    assert migrate.current_revision(dsn) is not None
    migrate.downgrade(dsn, "base")
    with connect(dsn, tenant=None) as c:
        assert c.execute("select count(*) from pg_namespace where nspname = 'pgmem'").fetchone()[0] == 0
        assert {r[0] for r in c.execute("select extname from pg_extension")} == before_ext
        assert c.execute("select to_regclass('public.pgmem_alembic_version')").fetchone()[0] is None
    migrate.upgrade(dsn)
    with connect(dsn, tenant=None) as c:
        assert c.execute("select count(*) from pgmem.memories").fetchone()[0] == 0


def test_upgrade_is_idempotent(dsn):
    migrate.upgrade(dsn)
    migrate.upgrade(dsn)
    assert migrate.current_revision(dsn) == _head()


def _head() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()


def test_migrate_names_missing_extension(cluster, fresh_db, monkeypatch):
    """A server without pgvector: the error names the extension and how to install it."""
    dsn = fresh_db(template=None)
    # Our server has pgvector. A server without it lists no 'vector' in
    # pg_available_extensions; that catalog view is found through search_path, so put a
    # filtered view in front of it for this database.
    with connect(dsn, tenant=None) as c:
        c.execute("create schema shadow")
        c.execute("create view shadow.pg_available_extensions as select * from pg_catalog.pg_available_extensions where name <> 'vector'")
        c.execute(f"alter database {c.info.dbname} set search_path = shadow, pg_catalog, public")
    with pytest.raises(MigrationError) as e:
        migrate.upgrade(dsn)
    msg = str(e.value)
    assert "missing" in msg and "'vector'" in msg and "pgvector" in msg and "make setup" in msg
    with connect(dsn, tenant=None) as c:
        assert c.execute("select count(*) from pg_namespace where nspname = 'pgmem'").fetchone()[0] == 0


def test_unreachable_dsn_is_one_line(monkeypatch):
    with pytest.raises(SetupError) as e:
        migrate.upgrade("postgresql://nobody:x@127.0.0.1:1/nowhere")
    assert str(e.value).startswith("cannot connect to 127.0.0.1:1/nowhere:")
    assert "\n" not in str(e.value)


def test_cli_unreachable_dsn_no_traceback():
    env = {"PGMEM_DSN": "postgresql://nobody:x@127.0.0.1:1/nowhere", "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-m", "pgmem.cli", "migrate"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("pgmem: cannot connect to 127.0.0.1:1/nowhere")


def test_port_in_use_is_a_clear_error(cluster):
    other = Cluster(cluster.home.parent / "port-clash", port=cluster.port)  # that port is taken
    other.init()
    assert port_in_use(cluster.port)
    with pytest.raises(ClusterError) as e:
        other.start()
    assert f"port {cluster.port}" in str(e.value) and "PGMEM_PORT" in str(e.value)
