"""Migrations built at head vs step by step, and the embedded-cluster CLI end to end."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from pgmem import migrate
from pgmem.cluster import bindir

from conftest import ROOT, connect

PGMEM = [sys.executable, "-m", "pgmem.cli"]


def _revisions() -> list[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config())
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def _schema_dump(dsn: str) -> str:
    out = subprocess.run([str(bindir() / "pg_dump"), "--schema-only", "--no-owner", "--no-privileges", dsn],
                         capture_output=True, text=True, check=True).stdout
    # pg_dump prints the database's own name nowhere in objects; drop comments/blank lines and SETs
    # (\restrict/\unrestrict carry a random key per dump: not schema)
    lines = [l for l in out.splitlines() if l.strip() and not l.startswith("--") and not l.startswith("SET ")
             and not l.startswith("SELECT pg_catalog.set_config") and not l.startswith(("\\restrict", "\\unrestrict"))]
    return "\n".join(lines)


def test_there_are_at_least_two_revisions():
    assert len(_revisions()) >= 2


def test_head_equals_step_by_step(fresh_db):
    at_head = fresh_db(template=None)
    stepwise = fresh_db(template=None)
    migrate.upgrade(at_head, "head")
    for rev in _revisions():
        migrate.upgrade(stepwise, rev)
    a, b = _schema_dump(at_head), _schema_dump(stepwise)
    assert "CREATE TABLE pgmem.memories" in a
    assert a == b


def test_downgrade_one_step_and_back(fresh_db):
    dsn = fresh_db(template=None)
    revs = _revisions()
    migrate.upgrade(dsn, "head")
    migrate.downgrade(dsn, revs[0])
    with connect(dsn, tenant=None) as c:
        assert c.execute("select to_regclass('pgmem.feedback')").fetchone()[0] is None
        assert c.execute("select to_regclass('pgmem.py_modules')").fetchone()[0] is None
        assert c.execute("select to_regclass('pgmem.memories')").fetchone()[0] is not None
    migrate.upgrade(dsn, "head")
    with connect(dsn, tenant=None) as c:
        assert c.execute("select to_regclass('pgmem.feedback')").fetchone()[0] is not None
        assert c.execute("select to_regprocedure('pgmem.tune_thresholds(integer, float8, float8, text)')").fetchone()[0]


# --- downgrades drop the sql/ lane's dependents of what they drop (migrate.drop_dependents) ---

def test_downgrade_drops_the_lanes_views_and_functions_but_never_a_users_view(dsn):
    # the database of `dsn` is at head; 0008 -> 0007 drops identity_traits, which the views of
    # sql/ do not read but identity_update_trait returns the row of
    with connect(dsn, tenant=None) as c:
        c.execute("create view public.my_clusters as select id, label from pgmem.clusters")
    with pytest.raises(migrate.MigrationError, match="my_clusters"):
        migrate.downgrade(dsn, "0008")  # another schema's view is the user's: left alone, the downgrade fails
    with connect(dsn, tenant=None) as c:
        # the failed downgrade rolled back whole: the lane's views are still there
        assert c.execute("select to_regclass('pgmem.cluster_flow')").fetchone()[0] is not None
        c.execute("drop view public.my_clusters")
    migrate.downgrade(dsn, "0007")
    with connect(dsn, tenant=None) as c:
        gone = ["pgmem.cluster_flow", "pgmem.cluster_members", "pgmem.eval_by_day", "pgmem.work_queue_status",
                "pgmem.clusters", "pgmem.identity_traits", "pgmem.work_queue"]
        assert [n for n in gone if c.execute("select to_regclass(%s)", (n,)).fetchone()[0] is not None] == []
        assert c.execute("select count(*) from pg_proc where proname = 'identity_update_trait'").fetchone()[0] == 0
        # views that read nothing the downgrade dropped stay (memory_health reads accesses.count,
        # which 0016 added: its downgrade drops it, and the next upgrade's lane recreates it)
        assert c.execute("select to_regclass('pgmem.category_stats')").fetchone()[0] is not None
    migrate.upgrade(dsn, "head")
    with connect(dsn, tenant=None) as c:
        assert c.execute("select to_regclass('pgmem.cluster_flow')").fetchone()[0] is not None
        assert c.execute("select to_regclass('pgmem.work_queue_status')").fetchone()[0] is not None
        assert c.execute("select count(*) from pg_proc where proname = 'identity_update_trait'").fetchone()[0] == 1


def test_every_public_function_and_view_has_a_comment(conn):
    missing = conn.execute("""
        select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname = 'pgmem' and p.proname !~ '^_' and obj_description(p.oid, 'pg_proc') is null
        union all
        select c.oid::regclass::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
         where n.nspname = 'pgmem' and c.relkind = 'v' and obj_description(c.oid, 'pg_class') is null""").fetchall()
    assert missing == []


def test_api_functions_pin_search_path(conn):
    """plpgsql API functions pin search_path; unpinned ones are pure SQL helpers (inlinable)."""
    rows = conn.execute("""
        select p.proname, l.lanname, p.prosecdef, p.proconfig from pg_proc p
          join pg_namespace n on n.oid = p.pronamespace join pg_language l on l.oid = p.prolang
         where n.nspname = 'pgmem' and p.prokind = 'f'""").fetchall()
    unpinned = [(name, lang, sd) for name, lang, sd, cfg in rows
                if not any(c.startswith("search_path=") for c in (cfg or []))]
    for name, lang, secdef in unpinned:
        assert not secdef, f"{name} is SECURITY DEFINER without a pinned search_path"
    assert all(lang in ("sql", "plpgsql") for _, lang, _ in unpinned)
    # (that every SECURITY DEFINER function is in the audited list of sql/900_security.sql is
    # tests/test_tenancy.py::test_search_path_pinned's check)


@pytest.fixture
def embedded_env(cluster):
    """An embedded cluster of its own (PGMEM_HOME under .pgmem/, a free port)."""
    import socket

    home = ROOT / ".pgmem" / f"cli-{os.getpid()}"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PGMEM_HOME": str(home), "PGMEM_PORT": str(port), "PGMEM_SHARED_BUFFERS": "'128MB'"}
    env.pop("PGMEM_DSN", None)
    yield env, home, port
    subprocess.run(PGMEM + ["db", "down"], env=env, capture_output=True)
    shutil.rmtree(home, ignore_errors=True)


def test_db_up_status_psql_down(embedded_env):
    env, home, port = embedded_env
    up = subprocess.run(PGMEM + ["db", "up"], env=env, capture_output=True, text=True, cwd=ROOT)
    assert up.returncode == 0, up.stderr
    assert "cluster created and started" in up.stdout
    st = subprocess.run(PGMEM + ["db", "status", "--json"], env=env, capture_output=True, text=True)
    info = json.loads(st.stdout)
    assert info["running"] and info["port"] == port and str(home) in info["data"]
    # passwords are masked unless asked for (issue 14)
    assert info["dsn"] == f"postgresql://pgmem_owner:****@127.0.0.1:{port}/pgmem"
    assert info["admin_dsn"] == f"postgresql://pgmem:****@127.0.0.1:{port}/pgmem"
    secrets_ = {(home / f).read_text().strip() for f in ("password", "owner_password")}
    for out in (up.stdout + up.stderr, st.stdout, subprocess.run(PGMEM + ["db", "status"], env=env, capture_output=True,
                                                                 text=True).stdout):
        assert not any(pw in out for pw in secrets_), out
    st = subprocess.run(PGMEM + ["db", "status", "--json", "--show-password"], env=env, capture_output=True, text=True)
    dsn = json.loads(st.stdout)["dsn"]
    assert re.match(rf"postgresql://pgmem_owner:[^@*]+@127\.0\.0\.1:{port}/pgmem$", dsn)
    # the client's role is not a superuser
    out = subprocess.run(["psql", dsn, "-Atc", "select rolsuper from pg_roles where rolname = current_user"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "f"
    # the printed DSN works with psql, and the three extensions are there
    out = subprocess.run(["psql", dsn, "-Atc", "select extname from pg_extension order by 1"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert {"vector", "plpython3u", "pg_cron"} <= set(out)
    # the jobs are scheduled with pg_cron, as the owner (issue 32: uses folded, clusters formed)
    assert "jobs scheduled with pg_cron" in up.stdout
    jobs = subprocess.run(["psql", dsn, "-Atc", "select count(*), bool_and(username = 'pgmem_owner') from cron.job "
                                                "where command like '%pgmem.%' and database = current_database()"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert jobs.split("|")[1] == "t" and int(jobs.split("|")[0]) >= 10, jobs
    # pgmem db psql passes its arguments through
    out = subprocess.run(PGMEM + ["db", "psql", "-Atc", "select pgmem.current_tenant()"], env=env,
                         capture_output=True, text=True)
    assert out.stdout.strip() == "default"
    # up again: idempotent
    again = subprocess.run(PGMEM + ["db", "up"], env=env, capture_output=True, text=True, cwd=ROOT)
    assert again.returncode == 0 and "already running" in again.stdout
    assert "jobs scheduled" not in again.stdout  # (once: they are there)
    down = subprocess.run(PGMEM + ["db", "down"], env=env, capture_output=True, text=True)
    assert down.stdout.strip() == "stopped"
    st = subprocess.run(PGMEM + ["db", "status"], env=env, capture_output=True, text=True)
    assert st.returncode == 3 and "running: no" in st.stdout


def test_db_up_port_in_use_is_one_line(embedded_env, cluster):
    env, home, port = embedded_env
    env = {**env, "PGMEM_PORT": str(cluster.port)}  # the test cluster holds this port
    p = subprocess.run(PGMEM + ["db", "up"], env=env, capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [
        f"pgmem: port {cluster.port} on 127.0.0.1 is in use by another process; set PGMEM_PORT to a free port (or stop that process)"]
