"""The shards' SQL generator (python/pgmem/shard_sql.py) on the test cluster, without clusters
of its own: a one-partition proxy in one database, routed by PL/Proxy to a shard in another.

tests/test_shards.py runs the whole scale-out (two shards and a split, as commands, every
reference example compared with a single server); this module checks the generator alone in
seconds, so that `make test-fast` covers it:

- every public function and view of the shard's catalog gets a call target on the shard and a
  wrapper of the same name and signature on the proxy;
- a call through the proxy reaches the shard as the session's tenant, and another tenant's
  memory is not found there (the shard's error, relayed with its SQLSTATE);
- a session without a tenant is refused at the proxy, naming the fix.
"""
from __future__ import annotations

import psycopg
import pytest

from conftest import connect
from pgmem import shard_sql, shards


@pytest.fixture
def shard_and_proxy(cluster, fresh_db):
    shard = fresh_db()
    proxy = fresh_db(template=None)  # an empty database: install_proxy makes its pgmem schema
    cat = shards.install_shard(shard)
    name = shard.rsplit("/", 1)[1].split("?")[0]
    shards.install_proxy(proxy, cat, [shards.Partition(0, cluster, dbname=name)])
    return shard, proxy, cat


def test_every_public_function_and_view_has_a_target_and_a_wrapper(shard_and_proxy):
    shard, proxy, cat = shard_and_proxy
    assert len(cat.functions) > 100 and {v.name for v in cat.views} >= {"memory_health", "tenant_stats"}
    with connect(shard, tenant=None) as c:
        targets = {r[0] for r in c.execute("select proname from pg_proc where pronamespace = %s::regnamespace",
                                           (shard_sql.SHARD_SCHEMA,))}
    with connect(proxy, tenant=None) as c:
        c.execute("set search_path = pg_catalog")  # types spelled as read_catalog spells them (public.vector)
        wrappers = {r[0] for r in c.execute("select distinct pg_get_function_identity_arguments(oid) || proname"
                                            " from pg_proc where pronamespace = 'pgmem'::regnamespace")}
        views = {r[0] for r in c.execute("select relname from pg_class where relnamespace = 'pgmem'::regnamespace"
                                         " and relkind = 'v'")}
    missing_targets = {f.name for f in cat.functions} - targets
    missing_wrappers = {f.identity + f.name for f in cat.functions} - wrappers
    assert not missing_targets and not missing_wrappers, (missing_targets, missing_wrappers)
    assert {v.name for v in cat.views} <= views and {"view__" + v.name for v in cat.views} <= targets


def test_a_call_through_the_proxy_runs_on_the_shard_as_the_sessions_tenant(shard_and_proxy):
    shard, proxy, _ = shard_and_proxy
    with connect(shard, tenant="acme") as s:
        mid = s.execute("select memory_id from pgmem.remember('Maya is allergic to peanuts')").fetchone()[0]
    with connect(proxy, tenant="acme") as p:
        assert p.execute("select content from pgmem.get_memory(%s)", (mid,)).fetchone()[0] == \
            "Maya is allergic to peanuts"
        assert p.execute("select memories from pgmem.tenant_stats").fetchone()[0] == 1
    with connect(proxy, tenant="other") as p:
        assert p.execute("select * from pgmem.get_memory(%s)", (mid,)).fetchall() == []
        with pytest.raises(psycopg.Error, match=f"memory {mid} does not exist") as ei:
            p.execute("select * from pgmem.forget(%s)", (mid,))
        assert ei.value.sqlstate == "P0002"  # the shard's own error, relayed with its SQLSTATE
    with connect(proxy, tenant=None) as p:
        with pytest.raises(psycopg.Error, match="pgmem.tenant") as ei:
            p.execute("select * from pgmem.get_memory(%s)", (mid,))
        assert ei.value.sqlstate == "42501"


def test_the_generator_imports_nothing_of_pgmem():
    """shard_sql writes SQL text from a catalog; the clusters are shards.py's (issue 28: one concern each)."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(shard_sql.__file__).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
        {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m.startswith(("pgmem", ".")) or m == ""}, imported
