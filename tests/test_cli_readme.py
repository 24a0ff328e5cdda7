"""The README's install, step by step, into an existing PostgreSQL (issue 26): each `# step`
block of "Step by step, into an existing PostgreSQL" runs as written, in order, on a fresh
cluster (pg_cron preloaded, as the README's postgresql.conf lines say), then the worker as
the README's systemd unit starts it. And the core install (no numpy, no model): lexical only,
said once."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv

import psycopg
import pytest

from conftest import ROOT
from scaleout_util import destroy, free_port

README = ROOT / "README.md"


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(title)
    nxt = re.search(r"^##+ ", text[start + len(title):], re.M)
    return text[start:start + len(title) + (nxt.start() if nxt else len(text))]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


@pytest.fixture
def fresh_cluster(tmp_path_factory):
    from pgmem.cluster import Cluster

    home = ROOT / ".pgmem" / f"readme-{os.getpid()}"
    shutil.rmtree(home, ignore_errors=True)
    c = Cluster(home=home, port=free_port(), dbname="postgres", cron_database="pgmem",
                settings={"shared_buffers": "'64MB'", "fsync": "off"})
    c.init()
    c.start()
    c.wait_ready()
    yield c
    destroy(c)


def shim(tmp_path) -> dict:
    """`pgmem` on PATH: this checkout's command."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pgmem").write_text(f'#!/bin/sh\nexec {sys.executable} -m pgmem.cli "$@"\n')
    (bin_dir / "pgmem").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT / "python")}


def test_the_readme_steps_on_a_fresh_cluster(fresh_cluster, tmp_path):
    from pgmem.cluster import SUPERUSER

    c = fresh_cluster
    steps = [b for b in blocks(section("### Step by step, into an existing PostgreSQL"), "sh") if b.startswith("# step")]
    assert [int(re.match(r"# step (\d+)", b).group(1)) for b in steps] == [1, 2, 3, 4, 5]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGMEM_", "PG"))}
    env.update(shim(tmp_path), PGHOST="127.0.0.1", PGPORT=str(c.port), PGUSER=SUPERUSER, PGPASSWORD=c.password,
               OWNER_PASSWORD="owner-pw-123", APP_PASSWORD="app-pw-456", PGMEM_EMBEDDER="onnx")
    outputs = []
    for b in steps:
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", b], capture_output=True, text=True, env=env, timeout=600)
        assert p.returncode == 0, (b, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr
        outputs.append(p.stdout)
    admin = f"host=127.0.0.1 port={c.port} user={SUPERUSER} password={c.password} dbname=pgmem"
    with psycopg.connect(admin, autocommit=True) as con:
        # step 3: every schedule is pgmem_owner's, none the superuser's
        owners = {r[0] for r in con.execute("select username from cron.job where jobname like 'pgmem-%'")}
        assert owners == {"pgmem_owner"}
        # step 4: the application login is bound to acme and not a superuser
        assert con.execute("select rolsuper from pg_roles where rolname = 'my_app'").fetchone()[0] is False
        # step 5: the memory is stored, waiting for the worker
        assert con.execute("select count(*) from pgmem.embedding_queue").fetchone()[0] == 1
    assert "Maya is allergic to peanuts" in outputs[4]  # found by lexical search at once
    # the worker, as the systemd unit starts it (its DSN and the password of EnvironmentFile)
    unit = next(b for b in blocks(section("### Step by step, into an existing PostgreSQL"), "ini"))
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1).split()
    unit_env = dict(line.split("=", 1)[1].split("=", 1) for line in unit.splitlines() if line.startswith("Environment="))
    assert exec_start[0].endswith("/pgmem") and exec_start[1:] == ["worker"]
    wenv = {**env, **unit_env, "PGPASSWORD": "owner-pw-123"}
    p = subprocess.run(["pgmem", *exec_start[1:], "--once"], capture_output=True, text=True, env=wenv, timeout=300)
    assert p.returncode == 0 and '"embedded": 1' in p.stdout, p.stderr
    with psycopg.connect(admin, autocommit=True) as con:
        assert con.execute("select count(*) from pgmem.memories where embedding is not null").fetchone()[0] == 1
    # scheduled again by the superuser, the jobs still go to pgmem_owner (it has a login now)
    su_env = {**env, "PGMEM_DSN": "dbname=pgmem"}
    for cmd in (["jobs", "unschedule"], ["jobs", "schedule"]):
        p = subprocess.run(["pgmem", *cmd], capture_output=True, text=True, env=su_env, timeout=120)
        assert p.returncode == 0, p.stderr
    assert "(scheduled by a superuser: the jobs run as pgmem_owner)" in p.stdout
    with psycopg.connect(admin, autocommit=True) as con:
        assert {r[0] for r in con.execute("select username from cron.job")} == {"pgmem_owner"}


def test_the_core_install_without_numpy_is_lexical_and_says_so_once(dsn, tmp_path):
    """A virtual environment with the core dependencies only (psycopg, pgvector; no numpy, no
    model): the CLI and the README's Python snippet store and search, lexically, with one line
    saying so."""
    env_dir = tmp_path / "core"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    p = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "psycopg[binary,pool]>=3.1",
                        "pgvector>=0.3"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert subprocess.run([str(py), "-c", "import numpy"], capture_output=True).returncode != 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGMEM_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(ROOT / "python"), PGMEM_DSN=dsn, PGMEM_TENANT="acme")
    p = subprocess.run([str(py), "-m", "pgmem.cli", "remember", "Maya is allergic to peanuts", "--who", "user"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgmem: no embedding model in this install (numpy is missing): "
                                                   "search is lexical only"), p.stderr
    p = subprocess.run([str(py), "-m", "pgmem.cli", "search", "peanuts", "--json"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Maya is allergic to peanuts" in p.stdout and len(p.stderr.strip().splitlines()) == 1
    snippet = (ROOT / "README.md").read_text().split("## Use it from Python", 1)[1]
    code = blocks(snippet, "python")[0]
    p = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and p.stderr.count("no embedding model in this install") == 1
    assert p.stdout.startswith("stored ")  # it stored; its question shares no word with the memory (lexical only)
    # numpy without a model package: the same, naming the extra to install
    p = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "numpy"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([str(py), "-m", "pgmem.cli", "remember", "Tom flies to Tokyo", "--who", "tom"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no embedding model in this install (onnxruntime is missing)" in lines[0], p.stderr
    assert "pip install 'pgmem-agent[embed]' (or [onnx], or [http])" in lines[0]


def test_jobs_scheduled_by_a_superuser_without_an_owner_login_warn(dsn, tmp_path):
    """The test cluster's pgmem_owner has no login: scheduled by a superuser the jobs would run as
    the superuser, and the command says so, naming the fix (with a login they go to pgmem_owner:
    test_the_readme_steps_on_a_fresh_cluster)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    env.update(shim(tmp_path), PGMEM_DSN=dsn)
    with psycopg.connect(dsn, autocommit=True) as su:  # (roles are the cluster's: put the state back after)
        could = su.execute("select rolcanlogin from pg_roles where rolname = 'pgmem_owner'").fetchone()[0]
        su.execute("alter role pgmem_owner nologin")
        try:
            p = subprocess.run(["pgmem", "jobs", "schedule"], capture_output=True, text=True, env=env, timeout=120)
            assert p.returncode == 0, p.stderr
            assert "give pgmem_owner a login" in p.stderr and "schedule them again as pgmem_owner" in p.stderr
        finally:
            subprocess.run(["pgmem", "jobs", "unschedule"], capture_output=True, env=env, timeout=120)
            if could:
                su.execute("alter role pgmem_owner login")
