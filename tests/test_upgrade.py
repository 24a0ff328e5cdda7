"""Upgrade lanes (issue 18, after pgai's test_upgrades): a database installed by a release and
upgraded to head has exactly the schema of a fresh install of head.

The release is read from tests/fixtures/pgmem-<tag>.tar.gz (scripts/release_fixture.sh makes
it from the git tag): CI clones main afresh and may have neither tags nor history. The release
is installed by its own code (its migrate.upgrade, its revisions, its sql/), then upgraded by
today's; the two databases are compared with pg_dump --schema-only, and on the installation-wide
rows that the lanes write (settings, categories, profiles, py_modules). A difference means a
one-off change (a drop of an old signature, a data fix, a type) that only a revision can make.
"""
from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import connect
from pgmem import migrate
from pgmem.cluster import bindir

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RELEASES = sorted(p.name[len("pgmem-"):-len(".tar.gz")] for p in FIXTURES.glob("pgmem-v*.tar.gz"))
# rows every install writes (tenant '*'), compared after an upgrade
INSTALL_ROWS = {
    "settings": "select key, value from pgmem.settings where tenant = '*' order by key",
    "categories": "select category, weight from pgmem.categories where tenant = '*' order by category",
    "profiles": "select name, method, weights, params, builtin from pgmem.profiles where tenant = '*' order by name",
    "py_modules": "select name, sha256 from pgmem.py_modules order by name",
}


def _schema(dsn: str) -> list[str]:
    """pg_dump --schema-only, as a sorted list of statements without comments and SET lines."""
    out = subprocess.run([str(bindir() / "pg_dump"), "--schema-only", "--no-owner", f"--dbname={dsn}"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines()
             if line.strip() and not line.startswith(("--", "SET ", "SELECT pg_catalog.set_config", "\\restrict",
                                                      "\\unrestrict"))]
    statements = re.split(r";\n(?=\S)", "\n".join(lines) + "\n")
    return sorted(s.strip().rstrip(";") for s in statements if s.strip())


def _rows(dsn: str) -> dict[str, list[tuple]]:
    with connect(dsn, tenant=None) as c:
        return {name: c.execute(sql).fetchall() for name, sql in INSTALL_ROWS.items()}


def _install_release(tag: str, dsn: str, tmp_path: Path) -> str:
    """Install the release ``tag`` into ``dsn`` with the release's own code; its head revision."""
    with tarfile.open(FIXTURES / f"pgmem-{tag}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    root = tmp_path / f"pgmem-{tag}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    env.update(PYTHONPATH=str(root / "python"), PGMEM_ROOT=str(root), PGMEM_DSN=dsn)
    code = ("import pgmem, pgmem.migrate as m; assert pgmem.__file__.startswith(%r), pgmem.__file__; "
            "m.upgrade(); print(m.current_revision())" % str(root))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_a_release_fixture_exists():
    assert "v0.1.0" in RELEASES


@pytest.mark.parametrize("tag", RELEASES)
def test_upgrade_from_release_matches_a_fresh_install(tag, fresh_db, tmp_path):
    upgraded, fresh = fresh_db(None), fresh_db(None)  # empty databases
    old_head = _install_release(tag, upgraded, tmp_path)
    assert re.fullmatch(r"\d{4}", old_head), old_head
    with connect(upgraded, tenant="acme") as c:  # a memory written by the release's SQL API
        kept = c.execute("select memory_id from pgmem.remember('Maya is allergic to peanuts', who => 'user')").fetchone()[0]
    migrate.upgrade(upgraded)
    migrate.upgrade(fresh)
    assert migrate.current_revision(upgraded) == migrate.current_revision(fresh) != old_head
    a, b = _schema(upgraded), _schema(fresh)
    diff = list(difflib.unified_diff(a, b, f"{tag} upgraded", "fresh head", lineterm="", n=0))
    assert not diff, f"upgrading {tag} leaves a different schema than a fresh install:\n" + "\n".join(diff[:200])
    assert _rows(upgraded) == _rows(fresh)
    with connect(upgraded, tenant="acme") as c:  # the release's memory is still found
        assert c.execute("select id from pgmem.search('peanuts', k => 1)").fetchone()[0] == kept
    # the comparison sees what a forgotten drop leaves behind
    assert len(a) > 200 and any("CREATE FUNCTION pgmem.remember(" in x for x in a)
    with connect(upgraded, tenant=None) as c:
        c.execute("create function pgmem.activate(q text) returns int language sql return 1")
    assert set(_schema(upgraded)) - set(b) == {
        "CREATE FUNCTION pgmem.activate(q text) RETURNS integer\n    LANGUAGE sql\n    RETURN 1"}
