"""Tenant shards on PL/Proxy (issue 19, part 2): the orchestration.

A proxy database routes every call of pgmem's API to the partition (a normal pgmem install,
a *shard*) that holds the session's tenant; the SQL of both sides is generated from a shard's
catalog by :mod:`pgmem.shard_sql`, which explains how a call runs as the caller's tenant. This
module installs that SQL, keeps the partition map, and runs the local clusters of
``pgmem db shards`` (up, down, split).

The partition map is ``pgmem_proxy.partitions`` (read by plproxy.get_cluster_partitions); its
size is a power of two (PL/Proxy's bitmask mapping: partition = hashtext(tenant) & (n - 1)).
``split`` doubles it: partition i + n starts as a physical copy of partition i (a streaming
standby made with pg_basebackup, promoted at the cut-over), then each of the two deletes the
tenants that now map to the other one.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .cluster import Cluster
from .db import scalar
from .errors import ClusterError, PgmemError
from .shard_sql import (APP_ROLES, CLUSTER_NAME, KEEP_ON_SPLIT, PROXY_SCHEMA, RUN_ON_ALL, SESSION_ARGS,  # noqa: F401
                        SHARD_SCHEMA, Catalog, Fn, View, proxy_sql, read_catalog, shard_sql)


# --------------------------------------------------------------------------- topology
@dataclass
class Partition:
    part: int
    cluster: Cluster
    dbname: str = "pgmem"

    def connstr(self) -> str:
        # the shard's private unix socket (trust): PL/Proxy adds user=<the caller's login>
        return f"host={self.cluster.socket_dir} port={self.cluster.port} dbname={self.dbname}"


def install_shard(dsn: str, cat: Catalog | None = None) -> Catalog:
    """(Re)create the pgmem_shard call targets in a shard (a normal pgmem install)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        if scalar(conn, "select to_regnamespace('pgmem') is null"):
            raise PgmemError("pgmem is not installed in the shard database: run 'pgmem migrate' on it first")
        cat = cat or read_catalog(conn)
        conn.execute(shard_sql(cat))
    return cat


def install_proxy(proxy_dsn: str, cat: Catalog, partitions: list[Partition]) -> None:
    """(Re)create the proxy database's objects and its partition map."""
    import psycopg

    n = len(partitions)
    if n < 1 or n & (n - 1):
        raise PgmemError(f"the number of partitions must be a power of two (PL/Proxy maps hashtext & (n-1)), got {n}")
    with psycopg.connect(proxy_dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(proxy_sql(cat))
            set_partition_map(conn, partitions)


def set_partition_map(conn, partitions: list[Partition]) -> None:
    """Replace the partition map and bump its version (PL/Proxy reloads it on the next call)."""
    conn.execute(f"delete from {PROXY_SCHEMA}.partitions")
    for p in partitions:
        conn.execute(f"insert into {PROXY_SCHEMA}.partitions (part, connstr) values (%s, %s)", (p.part, p.connstr()))
    conn.execute(f"update {PROXY_SCHEMA}.map_version set version = version + 1 where cluster = %s", (CLUSTER_NAME,))


# --------------------------------------------------------------------------- local set-up
def shards_home(base: Path) -> Path:
    return Path(base) / "shards"


def _state_file(home: Path) -> Path:
    return home / "shards.json"


def load_state(home: Path) -> dict | None:
    try:
        return json.loads(_state_file(home).read_text())
    except FileNotFoundError:
        return None


def _save_state(home: Path, proxy: Cluster, partitions: list[Partition]) -> None:
    _state_file(home).write_text(json.dumps({
        "proxy": {"home": str(proxy.home), "port": proxy.port},
        "partitions": [{"part": p.part, "home": str(p.cluster.home), "port": p.cluster.port, "dbname": p.dbname}
                       for p in partitions]}, indent=2) + "\n")


def _cluster_of(home: str, port: int, settings: dict | None = None) -> Cluster:
    return Cluster(Path(home), port=port, dbname="pgmem", cron_database="pgmem", settings=dict(settings or {}))


def topology(home: Path, settings: dict | None = None) -> tuple[Cluster, list[Partition]]:
    st = load_state(home)
    if st is None:
        raise ClusterError(f"no shards under {home}: run 'pgmem db shards up' first")
    proxy = _cluster_of(st["proxy"]["home"], st["proxy"]["port"], settings)
    parts = [Partition(p["part"], _cluster_of(p["home"], p["port"], settings), p.get("dbname", "pgmem"))
             for p in st["partitions"]]
    return proxy, parts


def _start(c: Cluster, *, install: bool) -> None:
    from . import migrate

    c.init()
    c.start()
    c.wait_ready()
    c.ensure_database(c.dbname, tenant=None)
    if install:
        migrate.upgrade(c.dsn())
        c.ensure_owner_login()


def shards_up(home: Path, n: int, ports: list[int], settings: dict | None = None) -> tuple[Cluster, list[Partition]]:
    """Start (creating once) a proxy cluster and ``n`` shard clusters under ``home``; install
    pgmem on the shards, the call targets, and the proxy's generated wrappers. ``ports``: the
    proxy's, then one per shard."""
    import psycopg

    home = Path(home)
    existing = load_state(home)
    if existing is not None:
        proxy, parts = topology(home, settings)
        if len(parts) != n and n:
            raise ClusterError(f"{home} already holds {len(parts)} partitions; grow it with 'pgmem db shards split'")
    else:
        if n < 1 or n & (n - 1):
            raise PgmemError(f"--shards must be a power of two (PL/Proxy's hash mapping), got {n}")
        if len(ports) < n + 1:
            raise PgmemError(f"need {n + 1} ports (proxy + {n} shards), got {len(ports)}")
        proxy = _cluster_of(str(home / "proxy"), ports[0], settings)
        parts = [Partition(i, _cluster_of(str(home / f"shard{i}"), ports[1 + i], settings)) for i in range(n)]
    home.mkdir(parents=True, exist_ok=True)
    cat: Catalog | None = None
    for p in parts:
        _start(p.cluster, install=True)
        cat = install_shard(p.cluster.dsn(p.dbname), cat)
    if cat is None:
        raise PgmemError(f"{home} holds no partition: remove it (pgmem db shards down --remove) and run up again")
    _start(proxy, install=False)
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        # the proxy's owner login: what `pgmem db shards status` shows as the DSN to use
        from .cluster import OWNER
        import secrets

        if not proxy.owner_password_file.exists():
            proxy.owner_password_file.write_text(secrets.token_urlsafe(24) + "\n")
        pw = proxy.owner_password_file.read_text().strip()
        exists = conn.execute("select 1 from pg_roles where rolname = %s", (OWNER,)).fetchone()
        from psycopg import sql

        conn.execute(sql.SQL("{} role {} login password {}").format(
            sql.SQL("alter" if exists else "create"), sql.Identifier(OWNER), sql.Literal(pw)))
    install_proxy(proxy.dsn(), cat, parts)
    _save_state(home, proxy, parts)
    return proxy, parts


def shards_down(home: Path) -> list[str]:
    proxy, parts = topology(home)
    done = []
    for c in [proxy] + [p.cluster for p in parts]:
        if c.stop():
            done.append(str(c.port))
    return done


def ensure_role_everywhere(proxy: Cluster, parts: list[Partition], role: str, *, member_of: str = "pgmem_app",
                           password: str | None = None) -> None:
    """A login that exists on the proxy and on every shard (PL/Proxy connects as the same login)."""
    import psycopg
    from psycopg import sql

    for c, db, grant in [(proxy, proxy.dbname, False)] + [(p.cluster, p.dbname, True) for p in parts]:
        with psycopg.connect(c.dsn(db), autocommit=True) as conn:
            if not conn.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone():
                conn.execute(sql.SQL("create role {} login").format(sql.Identifier(role)))
            if password:
                conn.execute(sql.SQL("alter role {} password {}").format(sql.Identifier(role), sql.Literal(password)))
            if grant:
                conn.execute(sql.SQL("grant {} to {}").format(sql.Identifier(member_of), sql.Identifier(role)))


# --------------------------------------------------------------------------- split 2 -> 4
def split(home: Path, ports: list[int], settings: dict | None = None, *, log=print) -> list[Partition]:
    """Double the partitions: partition i + n becomes a copy of partition i (pg_basebackup +
    streaming until the cut-over, then promoted), the map doubles, and each partition deletes
    the tenants that now map elsewhere. Writers must be paused during the cut-over (step 3)."""
    import psycopg

    from . import replica

    proxy, parts = topology(home, settings)
    n = len(parts)
    if len(ports) < n:
        raise PgmemError(f"splitting {n} partitions needs {n} new ports, got {len(ports)}")
    new_parts: list[Partition] = []
    # 1. a streaming copy of every partition (online: the old partitions keep serving)
    for i, p in enumerate(parts):
        name = f"split{n + i}"
        standby, _ = replica.replica_up(p.cluster, ports[i], name=name, settings=settings,
                                        home=Path(home) / f"shard{n + i}")
        replica.wait_streaming(p.cluster, application_name=name)
        new_parts.append(Partition(n + i, standby, p.dbname))
        log(f"partition {n + i}: streaming copy of partition {i} on port {standby.port}")
    # 2. cut-over: the copies catch up with their sources, then are promoted
    for p, q in zip(parts, new_parts):
        with psycopg.connect(p.cluster.dsn(), autocommit=True) as src:
            lsn = scalar(src, "select pg_current_wal_lsn()")
        with psycopg.connect(q.cluster.dsn(), autocommit=True) as dst:
            deadline = time.monotonic() + 120
            while scalar(dst, "select pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)) is not True:
                if time.monotonic() > deadline:
                    raise ClusterError(f"partition {q.part} did not catch up with partition {p.part}")
                time.sleep(0.05)
        replica.promote(q.cluster)
        # it was a copy of a primary: it keeps the source's settings but not its standby's name
        q.cluster.settings.pop("primary_conninfo", None)
        log(f"partition {q.part}: promoted")
    all_parts = parts + new_parts
    # 3. the map doubles: partition i's tenants now map to i or i + n
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        with conn.transaction():
            set_partition_map(conn, all_parts)
    _save_state(home, proxy, all_parts)
    # 4. each partition keeps only its own tenants (installation-wide '*' rows and grants stay)
    for p in all_parts:
        removed = cleanup_partition(p.cluster.dsn(p.dbname), p.part, len(all_parts))
        log(f"partition {p.part}: removed {removed} rows of tenants that moved")
    return all_parts


def cleanup_partition(dsn: str, part: int, nparts: int) -> int:
    """Delete the rows of every tenant that does not map to ``part`` among ``nparts``."""
    import psycopg

    total = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("""
            select c.oid::regclass::text from pg_class c
              join pg_attribute a on a.attrelid = c.oid and a.attname = 'tenant' and not a.attisdropped
             where c.relnamespace = 'pgmem'::regnamespace and c.relkind in ('r', 'p')
               and c.relname <> all(%s) order by 1""", (sorted(KEEP_ON_SPLIT),)).fetchall()]
        with conn.transaction():
            # the rows leave as a whole tenant at a time: no history, no queue, no FK checks
            conn.execute("set local session_replication_role = replica")
            for t in tables:
                cur = conn.execute(f"delete from {t} where tenant is not null and tenant <> '*' "
                                   f"and (hashtext(tenant) & %s) <> %s", (nparts - 1, part))
                total += cur.rowcount
    return total


def remove(home: Path) -> None:
    """Stop and delete a local shard set (tests, `pgmem db shards down --remove`): every cluster
    under ``home``, listed in shards.json or not (a split stopped half-way leaves copies that
    are not listed yet)."""
    home = Path(home)
    for pidfile in sorted(home.glob("*/data/postmaster.pid")):
        c = Cluster(pidfile.parent.parent)
        try:
            c.stop("immediate")
        except Exception:
            pass
    shutil.rmtree(home, ignore_errors=True)
