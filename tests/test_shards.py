"""Tenant shards on PL/Proxy (issue 19, part 2): a proxy database with pgmem's public functions
and views (same names and signatures, generated from a shard's catalog), routed by
hashtext(tenant) to shard clusters that are normal pgmem installs.

- every public function gives through the proxy what it gives on a single server, for the same
  data: the examples of docs/reference.md (scripts/gen_reference.py: one for every public
  function and view, enforced by tests/test_reference.py) run on both and are compared;
- a tenant's rows live on exactly one shard, the one PL/Proxy's mapping names;
- a missing or malformed tenant is refused at the proxy, an unknown one (not granted, or existing
  on no shard) by the shard's own check, relayed with its SQLSTATE; nothing is written anywhere;
- the map grows 2 -> 4 partitions by splitting (shards.split) and every tenant's answers stay;
- the clusters are made by the command `pgmem db shards up --shards 2` (run as a subprocess),
  and `db shards status` / `down` / `up` (a restart) are run as commands too.

One proxy + 2 shards + 1 single server for the module (private clusters under .pgmem/scale-*);
the split adds 2 clusters.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import psycopg
import pytest

from conftest import ROOT
from pgmem import shards
from scaleout_util import destroy, free_port, new_cluster, scratch_home, vec

spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
genref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(genref)

# where a sharded installation answers differently from one server, by design (README, Scaling out)
EXPECTED_DIFFERENCES = {
    # installation-wide: every partition (un)schedules its own jobs; the proxy returns every
    # partition's rows (schedule_jobs) and the total (unschedule_jobs)
    "schedule_jobs": lambda single, proxy: sorted(_rows(proxy)) == sorted(_rows(single) * 2),
    "unschedule_jobs": lambda single, proxy: int(proxy.split()[2]) == 2 * int(single.split()[2]),
    # strength decays with the time since the last access, and the proxy's fixture ran seconds
    # after the single server's: the same rows, numbers within .01
    "memory_health": lambda single, proxy: _close(single, proxy, 0.01),
}


def _close(single: str, proxy: str, tol: float) -> bool:
    a, b = _rows(single), _rows(proxy)
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        for x, y in zip(ra.split("|"), rb.split("|"), strict=True):
            x, y = x.strip(), y.strip()
            try:
                if abs(float(x) - float(y)) > tol:
                    return False
            except ValueError:
                if x != y:
                    return False
    return True


def _rows(rendered: str) -> list[str]:
    return rendered.splitlines()[2:-1]

APP = "shard_app"
APP_PW = "shard-app-pw-1"
APP_OPTS = "-c statement_timeout=30s -c idle_in_transaction_session_timeout=60s"


# the settings `pgmem db shards up` gives its clusters (with PGMEM_SHARED_BUFFERS=128MB, below):
# the split's copies are hot standbys first, which need max_connections etc. no lower than theirs
CLI_SETTINGS = {"shared_buffers": "'128MB'"}


def pgmem_cli(base, *args: str) -> subprocess.CompletedProcess:
    """`pgmem <args>` as a command, with PGMEM_HOME=base (the shards live in base/shards)."""
    env = {**os.environ, "PGMEM_HOME": str(base), "PYTHONPATH": str(ROOT / "python"), "PGMEM_SHARED_BUFFERS": "128MB"}
    out = subprocess.run([sys.executable, "-m", "pgmem.cli", *args], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, f"pgmem {' '.join(args)}: {out.stderr}"
    return out


@pytest.fixture(scope="module")
def sharded():
    base = scratch_home("shards")
    home = shards.shards_home(base)
    single = None
    try:
        ports = [free_port(), free_port(), free_port()]
        out = pgmem_cli(base, "db", "shards", "up", "--shards", "2", "--ports", ",".join(map(str, ports))).stdout
        assert f"proxy on port {ports[0]}" in out and f"partition 0: port {ports[1]}" in out \
            and f"partition 1: port {ports[2]}" in out, out
        proxy, parts = shards.topology(home, CLI_SETTINGS)
        assert [proxy.port] + [p.cluster.port for p in parts] == ports and all(p.cluster.running() for p in parts)
        single = new_cluster(scratch_home("single"))
        yield home, proxy, parts, single
    finally:
        shards.remove(home)
        shutil.rmtree(base, ignore_errors=True)
        if single is not None:
            destroy(single)


def render_all(single, proxy, shard, tables: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Run the reference fixture and every example on the single server and through the proxy,
    one example after the other (outputs that depend on now() see nearly the same clock). On the
    proxy side, what is not an API call is done on the tenant's shard, as a user of a sharded
    installation would: subqueries that read tables (a proxy has none) are evaluated there and
    passed as literals, a top-level table read runs there, and CALL pgmem.run_job runs there
    (a procedure that commits cannot run through PL/Proxy: the proxy's run_job says so)."""
    on_single, on_proxy = {}, {}
    cs, cp, csh = single.cursor(), proxy.cursor(), shard.cursor()
    cs.execute(genref.FIXTURE)
    cp.execute(genref.FIXTURE)
    csh.execute("set pgmem.tenant = 'acme'")
    names = "|".join(sorted(tables))
    # (a subquery reading pgmem's tables, or the installed revision, which a proxy does not have)
    sub_re = re.compile(r"\(select [^()]*\bfrom (?:pgmem\.(?:%s)|public\.pgmem_alembic_version)\b[^()]*\)" % names)
    for name, q in genref.EXAMPLES:
        pq, target = q, cp
        if re.search(r"\bfrom pgmem\.(%s)\b" % names, sub_re.sub("", q)) or re.match(r"\s*call pgmem\.run_job", q, re.I):
            target = csh
        else:
            pq = sub_re.sub(lambda m: _literal(shard, m.group(0)), q)
        for cur, sql, out in ((cs, q, on_single), (target, pq, on_proxy)):
            try:
                cur.execute(sql)
                out[name] = genref.render(cur)
            except psycopg.Error as e:
                out[name] = f"ERROR {e.sqlstate} {e.diag.message_primary}"
    return on_single, on_proxy


def _literal(conn, subquery: str) -> str:
    v = conn.execute("select " + subquery).fetchone()[0]
    if v is None:
        return "null"
    return str(int(v)) if isinstance(v, int) else "'" + str(v).replace("'", "''") + "'"


def test_every_public_function_same_as_on_a_single_server(sharded):
    home, proxy, parts, single = sharded
    with psycopg.connect(single.dsn(), autocommit=True) as c:
        tables = {r[0] for r in c.execute("select relname from pg_class where relnamespace = 'pgmem'::regnamespace "
                                          "and relkind in ('r', 'p')")}
        public = {r[0] for r in c.execute("select proname from pg_proc where pronamespace = 'pgmem'::regnamespace "
                                          "and proname !~ '^_' union select relname from pg_class "
                                          "where relnamespace = 'pgmem'::regnamespace and relkind = 'v'")}
    examples = {name for name, _ in genref.EXAMPLES}
    assert public - examples == set(), "public objects without an example (tests/test_reference.py enforces it)"
    acme = parts[shards_partition(proxy, "acme")]
    with psycopg.connect(single.dsn(), autocommit=True) as cs, psycopg.connect(proxy.dsn(), autocommit=True) as cp, \
            psycopg.connect(acme.cluster.dsn(), autocommit=True) as csh:
        on_single, on_proxy = render_all(cs, cp, csh, tables)
        cp.execute("set pgmem.tenant = 'acme'")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="cannot run through the PL/Proxy proxy"):
            cp.execute("call pgmem.run_job('merge')")
    differ = {k for k in on_single if on_single[k] != on_proxy[k]}
    unexpected = {k: (on_single[k], on_proxy[k]) for k in differ - set(EXPECTED_DIFFERENCES)}
    assert not unexpected, unexpected
    for k, ok in EXPECTED_DIFFERENCES.items():
        assert ok(on_single[k], on_proxy[k]), (k, on_single[k], on_proxy[k])
    # the comparison compared something: most examples return rows
    assert sum("row" in v and "(0 rows)" not in v for v in on_single.values()) > 60
    # and the proxy really is a proxy: no pgmem table there
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        assert c.execute("select count(*) from pg_class where relnamespace = 'pgmem'::regnamespace "
                         "and relkind in ('r', 'p')").fetchone()[0] == 0


def shards_partition(proxy, tenant: str) -> int:
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        return c.execute("select pgmem_proxy.partition_of(%s)", (tenant,)).fetchone()[0]


TENANTS = [f"t{i:02d}" for i in range(16)]


def load_tenants(proxy) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        for i, t in enumerate(TENANTS):
            c.execute("select set_config('pgmem.tenant', %s, false)", (t,))
            for j in range(3):
                c.execute("select * from pgmem.remember(%s, who => 'user', user_id => 'u1', embedding => %s::vector, "
                          "event_key => %s)", (f"{t} fact {j}: the {['red', 'green', 'blue'][j]} door of house {i}",
                                              str(vec(1000 * i + j)), f"{t}-{j}"))


def tenants_by_partition(parts) -> dict[str, set[int]]:
    where: dict[str, set[int]] = {}
    for p in parts:
        with psycopg.connect(p.cluster.dsn(p.dbname), autocommit=True) as c:
            # every table with a tenant column, not only memories (history, queue, links...)
            tables = [r[0] for r in c.execute(
                "select c.oid::regclass::text from pg_class c join pg_attribute a on a.attrelid = c.oid "
                "and a.attname = 'tenant' where c.relnamespace = 'pgmem'::regnamespace and c.relkind = 'r' "
                "and c.relname not in ('tenant_grants', 'tenants')")]
            for t in tables:
                for (tenant,) in c.execute(f"select distinct tenant from {t} where tenant like 't__'"):
                    where.setdefault(tenant, set()).add(p.part)
    return where


def test_a_tenants_rows_live_on_exactly_one_shard(sharded):
    home, proxy, parts, single = sharded
    load_tenants(proxy)
    where = tenants_by_partition(parts)
    assert set(where) == set(TENANTS)
    for t in TENANTS:
        assert where[t] == {shards_partition(proxy, t)}, (t, where[t])
    assert {next(iter(v)) for v in where.values()} == {0, 1}, "16 tenants should use both shards"
    # cross-tenant views run on all shards and merge: tenant "*" sees every tenant once
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        c.execute("set pgmem.tenant = '*'")
        stats = dict(c.execute("select tenant, memories from pgmem.tenant_stats where tenant like 't__'").fetchall())
    assert stats == {t: 3 for t in TENANTS}


def test_missing_malformed_and_unknown_tenants_are_refused(sharded):
    home, proxy, parts, single = sharded
    shards.ensure_role_everywhere(proxy, parts, APP, password=APP_PW)
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        c.execute("set pgmem.tenant = '*'")
        assert c.execute("select pgmem.grant_tenant(%s, 't01')", (APP,)).fetchone()[0] is True
    dsn = f"postgresql://{APP}:{APP_PW}@127.0.0.1:{proxy.port}/pgmem"
    before = count_everywhere(parts)
    with psycopg.connect(dsn, autocommit=True, options=APP_OPTS) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as ei:
            c.execute("select * from pgmem.search('door')")
        assert "pgmem.tenant is not set" in str(ei.value) and "no shard was contacted" in ei.value.diag.message_hint
        c.execute("set pgmem.tenant = 'no tenant!'")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="invalid tenant name"):
            c.execute("select * from pgmem.remember('x')")
        c.execute("set pgmem.tenant = 't02'")  # exists, but this login was not granted it
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match='may not act for tenant "t02"'):
            c.execute("select * from pgmem.remember('a memory for somebody else')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("select * from pgmem.search('door')")
        # a well-formed tenant that exists nowhere: no grant, no row on any shard. Refused by the
        # shard PL/Proxy routes it to, relayed with its SQLSTATE, message naming login and tenant
        # and hint naming the fix
        assert all(not rows_of_tenant(p, "ghost-co") for p in parts)
        c.execute("set pgmem.tenant = 'ghost-co'")
        for q in ("select * from pgmem.search('door')", "select * from pgmem.profile('u1')",
                  "select * from pgmem.remember('a memory for nobody')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as ei:
                c.execute(q)
            assert f'login "{APP}" may not act for tenant "ghost-co"' in ei.value.diag.message_primary, q
            assert f"pgmem.grant_tenant('{APP}', 'ghost-co')" in (ei.value.diag.message_hint or ""), ei.value.diag
        c.execute("set pgmem.tenant = '*'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="only pgmem_admin"):
            c.execute("select * from pgmem.search('door')")  # '*' runs on every shard: each refuses
        c.execute("set pgmem.tenant = 't01'")  # granted: works
        hits = c.execute("select content from pgmem.search('green door', query_embedding => %s::vector, k => 1)",
                         (str(vec(1000 * 1 + 1)),)).fetchall()
        assert hits == [("t01 fact 1: the green door of house 1",)]
    assert count_everywhere(parts) == before, "a refused call wrote something"


def rows_of_tenant(p, tenant: str) -> int:
    """Rows of a tenant in the shard's tenant_grants and memories (as superuser: no RLS)."""
    with psycopg.connect(p.cluster.dsn(p.dbname), autocommit=True) as c:
        return c.execute("select (select count(*) from pgmem.tenant_grants where tenant = %(t)s)"
                         " + (select count(*) from pgmem.memories where tenant = %(t)s)", {"t": tenant}).fetchone()[0]


def count_everywhere(parts) -> list[int]:
    out = []
    for p in parts:
        with psycopg.connect(p.cluster.dsn(p.dbname), autocommit=True) as c:
            out.append(c.execute("select (select count(*) from pgmem.memories) + (select count(*) from pgmem.history)")
                       .fetchone()[0])
    return out


def answers(proxy) -> dict[str, list]:
    out = {}
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        for i, t in enumerate(TENANTS):
            c.execute("select set_config('pgmem.tenant', %s, false)", (t,))
            out[t] = c.execute("select id, content, round(score::numeric, 6) from pgmem.search('door', "
                               "query_embedding => %s::vector, k => 5, as_of => '2027-01-01')", (str(vec(1000 * i + 2)),)).fetchall()
    return out


def test_db_shards_status_down_up_as_commands(sharded):
    home, proxy, parts, single = sharded
    base = home.parent
    before = answers(proxy)
    out = pgmem_cli(base, "db", "shards", "status").stdout
    assert f"proxy:       port {proxy.port} (running)" in out, out
    tenants = [int(re.search(rf"partition {p.part}: port {p.cluster.port} \(running\), (\d+) tenants", out).group(1))
               for p in parts]
    assert sum(tenants) == count_tenants(parts) > 0, out
    out = pgmem_cli(base, "db", "shards", "down").stdout
    assert out.strip() == f"stopped ports {', '.join(str(c.port) for c in [proxy] + [p.cluster for p in parts])}", out
    assert not proxy.running() and not any(p.cluster.running() for p in parts)
    out = pgmem_cli(base, "db", "shards", "status").stdout
    assert "(stopped)" in out and "running" not in out, out
    out = pgmem_cli(base, "db", "shards", "up", "--shards", "2").stdout  # a restart: nothing is created again
    assert f"proxy on port {proxy.port}" in out and proxy.running() and all(p.cluster.running() for p in parts)
    assert answers(proxy) == before  # the proxy's connections to the shards are new ones


def count_tenants(parts) -> int:
    n = 0
    for p in parts:
        with psycopg.connect(p.cluster.dsn(p.dbname), autocommit=True) as c:
            n += c.execute("select count(distinct tenant) from pgmem.memories").fetchone()[0]
    return n


def test_split_two_partitions_into_four(sharded):
    home, proxy, parts, single = sharded
    before = answers(proxy)
    assert all(len(v) == 3 for v in before.values())
    new = shards.split(home, [free_port(), free_port()], settings=CLI_SETTINGS, log=lambda *_: None)
    assert [p.part for p in new] == [0, 1, 2, 3]
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        assert c.execute("select count(*) from pgmem_proxy.partitions").fetchone()[0] == 4
    where = tenants_by_partition(new)
    for t in TENANTS:
        assert where[t] == {shards_partition(proxy, t)}, (t, where[t])
    assert {next(iter(v)) for v in where.values()} == {0, 1, 2, 3}, "16 tenants should use all four partitions"
    assert answers(proxy) == before
    # writes after the split go to the tenant's new partition, and only there
    moved = next(t for t in TENANTS if shards_partition(proxy, t) >= 2)
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        c.execute("select set_config('pgmem.tenant', %s, false)", (moved,))
        r = c.execute("select memory_id, decision from pgmem.remember('after the split: the yellow door', "
                      "embedding => %s::vector)", (str(vec(77)),)).fetchone()
        assert r[1] == "stored"
    assert tenants_by_partition(new)[moved] == {shards_partition(proxy, moved)}
