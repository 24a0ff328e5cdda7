"""Issue 14, L5b: `make demo` (examples/demo.py) never prints the cluster's passwords.

The demo takes about 80 s (it ingests and embeds a conversation), so these tests do not run it
whole: they check the two functions that print the cluster's DSNs with known passwords, and
read demo.py's syntax tree to make sure no other line prints a DSN or a password.
"""
from __future__ import annotations

import ast
import importlib.util
from urllib.parse import quote

import pytest

from conftest import ROOT

DEMO = ROOT / "examples" / "demo.py"
SUPERUSER_PW = "Su-per s3cret/pw@x%y"
OWNER_PW = "0wner:s3cret#pw"


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("pgmem_demo", DEMO)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # defines functions only: main() runs under __main__
    return mod


@pytest.fixture
def cluster(tmp_path):
    """A cluster home with known passwords (nothing started: the DSNs are built from the files)."""
    from pgmem.cluster import Cluster

    c = Cluster(tmp_path / "pgmem", port=54999)
    c.home.mkdir()
    c.password_file.write_text(SUPERUSER_PW + "\n")
    c.owner_password_file.write_text(OWNER_PW + "\n")
    return c


def secrets(text: str) -> list[str]:
    """Every form of either password that appears in text (raw or URL-quoted)."""
    return [s for pw in (SUPERUSER_PW, OWNER_PW) for s in {pw, quote(pw, safe=""), quote(pw)} if s in text]


def test_demo_output_names_the_cluster_without_its_passwords(demo, cluster):
    """Before (issue 14, L5b): the demo printed `running: postgresql://pgmem_owner:<password>@...`
    and a psql command line with the superuser's password. Now both DSNs are masked."""
    # the DSNs the demo connects with do hold the passwords (else this test proves nothing)
    assert secrets(cluster.dsn()) and secrets(cluster.owner_dsn())
    running = demo.running_line(cluster)
    assert running == "running: postgresql://pgmem_owner:****@127.0.0.1:54999/pgmem"
    hint = demo.explore_hint(cluster, 42)
    assert "psql 'postgresql://pgmem:****@127.0.0.1:54999/pgmem'" in hint and "pgmem history 42" in hint
    assert secrets(running + hint) == []


def test_demo_prints_no_other_dsn_or_password():
    """Before (issue 14, L5b): main() printed `c.owner_dsn()` unmasked. Now every DSN the demo
    builds is either masked (mask=True) or handed to the code that connects (migrate.upgrade,
    MemoryClient), and no line reads a password attribute or file."""
    tree = ast.parse(DEMO.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    connects = {"upgrade", "MemoryClient"}
    unmasked = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and ("password" in node.attr or node.attr in ("secret", "passwd")):
            unmasked.append((node.lineno, node.attr))
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("dsn", "owner_dsn")):
            continue
        masked = any(k.arg == "mask" and isinstance(k.value, ast.Constant) and k.value.value is True
                     for k in node.keywords)
        parent = parents[node]
        callee = parent.func if isinstance(parent, ast.Call) and node in parent.args else None
        name = getattr(callee, "attr", None) or getattr(callee, "id", None)
        if not masked and name not in connects:
            unmasked.append((node.lineno, ast.unparse(parent)))
    assert unmasked == []
    # and the check sees the demo's DSNs at all: two masked, two connecting
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("dsn", "owner_dsn")]
    assert len(calls) == 4
