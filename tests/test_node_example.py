"""examples/node/: pgmem's SQL API from Node with npm's `pg` (no Python on that side).

The example remembers a text-only memory and one with an embedding, then searches by text
and by vector. `make setup` installs node, npm and the example's packages (npm ci)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from conftest import connect

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "node"


def _run_example(dsn: str) -> dict[str, dict]:
    node = shutil.which("node")
    assert node, "node is not installed: run `make setup` (Debian's nodejs and npm)"
    assert (EXAMPLE / "node_modules" / "pg").is_dir(), "the example's packages are missing: run `make setup` (npm ci)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    env.update(PGMEM_DSN=dsn, PGMEM_TENANT="acme", PGMEM_USER="maya")
    out = subprocess.run([node, "remember_and_search.mjs"], cwd=EXAMPLE, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    steps = [json.loads(line) for line in out.stdout.splitlines()]
    return {s.pop("step"): s for s in steps}


def test_node_example_remembers_and_searches(dsn):
    steps = _run_example(dsn)
    text_only, with_vector = steps["remember text-only"], steps["remember with a vector"]
    assert text_only["decision"] == with_vector["decision"] == "stored"
    # text-only: found by the lexical signal at once (pg returns bigint as a string)
    by_text = steps["search by text"]["hits"]
    assert by_text[0]["id"] == text_only["memory_id"] and float(by_text[0]["lexical"]) > 0
    # with a vector: the query vector is the memory's own, so its semantic signal is 1
    by_vector = steps["search by vector"]["hits"]
    assert by_vector[0]["id"] == with_vector["memory_id"] and float(by_vector[0]["semantic"]) == 1.0
    assert steps["embedding queue"] == {"queued": 1}
    assert steps["session limits"] == {"statement_timeout": "30s", "idle_in_transaction_session_timeout": "1min"}
    with connect(dsn, tenant="acme") as c:
        rows = c.execute("select id, tenant, user_id, embedding is not null from pgmem.memories order by id").fetchall()
    assert rows == [(int(text_only["memory_id"]), "acme", "maya", False),
                    (int(with_vector["memory_id"]), "acme", "maya", True)]


def test_node_example_without_dsn_says_what_to_set():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    out = subprocess.run([shutil.which("node") or "node", "remember_and_search.mjs"], cwd=EXAMPLE, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "set PGMEM_DSN" in out.stderr


def test_node_example_without_tenant_is_one_line():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    env["PGMEM_DSN"] = "postgresql://nobody@127.0.0.1:1/none"
    out = subprocess.run([shutil.which("node") or "node", "remember_and_search.mjs"], cwd=EXAMPLE, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "remember_and_search: set PGMEM_TENANT to the tenant this login acts for (an administrator grants it: "
        "select pgmem.grant_tenant('<login>', '<tenant>'))"]


def test_node_example_database_errors_are_one_line(dsn):
    """A tenant the login is not granted, or a server that is down: the server's words, one line."""
    node = shutil.which("node") or "node"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    env.update(PGMEM_DSN=dsn, PGMEM_TENANT="no tenant!")
    out = subprocess.run([node, "remember_and_search.mjs"], cwd=EXAMPLE, env=env, capture_output=True, text=True,
                         timeout=60)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and "invalid tenant name" in lines[0], out.stderr
    env["PGMEM_DSN"] = "postgresql://nobody:pw@127.0.0.1:1/none"
    out = subprocess.run([node, "remember_and_search.mjs"], cwd=EXAMPLE, env=env, capture_output=True, text=True,
                         timeout=60)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and "ECONNREFUSED" in lines[0], out.stderr
