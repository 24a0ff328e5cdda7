"""The ``pgmem`` command. Every failure prints one line, ``pgmem: <what failed, what to do>``,
and exits non-zero; set PGMEM_DEBUG=1 for a traceback."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .errors import PgmemError


def _cluster():
    from .cluster import default_cluster

    return default_cluster()


# ---------------------------------------------------------------------------- db
def cmd_db_up(args) -> int:
    from . import migrate

    from .cluster import save_state

    c = _cluster()
    created = c.init()
    started = c.start()
    save_state(c)
    c.wait_ready()
    c.ensure_database()
    dim = None
    with migrate.connect(c.dsn(), autocommit=True) as conn:
        if migrate.installed_dim(conn) is None:  # a first install: the configured model's dimension
            dim, origin = migrate.dimensions_for_install(None)
            print(f"installing pgmem for {dim}-dimensional embeddings ({origin})", file=sys.stderr)
    warnings = migrate.upgrade(c.dsn(), embedding_dim=dim)
    c.ensure_owner_login()
    # (issue 32: the jobs fold uses, form clusters, merge and archive: without them memory does
    # not live; scheduled once, with pg_cron, when none is)
    scheduled = c.ensure_jobs_scheduled()
    for w in warnings:
        print(f"pgmem: warning: {w}", file=sys.stderr)
    what = "created and started" if created else ("started" if started else "already running")
    # passwords stay in .pgmem/ (mode 0600): `pgmem db status --show-password` prints them
    print(f"cluster {what}: {c.owner_dsn(mask=True)}"
          + (f"; {scheduled} jobs scheduled with pg_cron (pgmem jobs list)" if scheduled else ""))
    return 0


def cmd_db_down(args) -> int:
    c = _cluster()
    print("stopped" if c.stop() else "not running")
    return 0


def cmd_db_status(args) -> int:
    c = _cluster()
    info = c.info(show_password=args.show_password)
    info["replication"] = _replication_info(c) if info["running"] else None  # scaleout (issue 19)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        print(f"home:    {info['home']}")
        print(f"running: {'yes' if info['running'] else 'no'}")
        print(f"port:    {info['port']}")
        print(f"log:     {info['log']}")
        if info["dsn"]:
            print(f"dsn:     {info['dsn']}  (owner role: the client, worker and jobs)")
        if info["admin_dsn"]:
            print(f"admin:   {info['admin_dsn']}  (superuser: migrations)")
        _print_replication(info["replication"])
    return 0 if info["running"] else 3


def cmd_db_psql(args) -> int:
    c = _cluster()
    if not c.running():
        raise PgmemError("the embedded cluster is not running: run 'pgmem db up'")
    # the password through the environment, not the command line (ps shows arguments)
    env = {**os.environ, "PGPASSWORD": c.password}
    os.execvpe("psql", ["psql", c.dsn(mask=True).replace(":****@", "@"), *args.psql_args], env)
    return 0


def cmd_migrate(args) -> int:
    from . import migrate

    if args.downgrade:
        migrate.downgrade(args.dsn, args.downgrade)
        print(f"downgraded to {args.downgrade}")
        return 0
    migrate._alembic()  # the [install] extra first: without it nothing below can run
    dim = args.dimensions
    from .db import describe_conn

    with migrate.connect(args.dsn, autocommit=True, superuser=True) as c:
        installed = migrate.installed_dim(c)
        where = describe_conn(c)  # where libpq connected (PGHOST, PGPORT, a service file): not a default
    if installed is None:  # a first install fixes the dimension: from --dimensions or the configured model
        dim, origin = migrate.dimensions_for_install(dim)
        print(f"installing pgmem for {dim}-dimensional embeddings ({origin})", file=sys.stderr)
    for w in migrate.upgrade(args.dsn, args.revision, embedding_dim=dim):
        print(f"pgmem: warning: {w}", file=sys.stderr)
    print(f"pgmem is at revision {migrate.current_revision(args.dsn)} in {where}")
    return 0


# ----------------------------------------------------------------------- map (issue 17: the 3-D memory map)
def cmd_map(args) -> int:
    from .client import MemoryClient
    from .map import build_map

    with MemoryClient(args.dsn, tenant=args.tenant, embedder=None) as client:
        r = build_map(client, args.output, method=args.method, color=args.color, max_points=args.max_points,
                      compute=not args.no_compute)
    print(f"wrote {r.path}: {r.points} memories, {r.clusters} clusters ({r.method}); open it in a browser (works offline)")
    return 0


def _add_map_parser(sub) -> None:
    mp = sub.add_parser("map", help="write the 3-D memory map: one self-contained HTML page")
    mp.add_argument("-o", "--output", default="pgmem-map.html", help="the page to write (default: pgmem-map.html)")
    mp.add_argument("--method", choices=["pca", "tsne", "umap"], default="pca",
                    help="projection: pca (deterministic, default), tsne (in the database), umap (here; needs umap-learn)")
    mp.add_argument("--color", choices=["cluster", "energy", "recency", "usage"], default="cluster",
                    help="initial colouring (the page has a menu for the others)")
    mp.add_argument("--max-points", type=int, default=5000, help="the most recent N memories (default 5000)")
    mp.add_argument("--no-compute", action="store_true", help="draw the stored coordinates, do not project again")
    mp.add_argument("--tenant", default=None, help="tenant (default: PGMEM_TENANT or 'default')")
    mp.set_defaults(func=cmd_map)


# ------------------------------------------------- scale-out (issue 19): `db replica ...`, `db shards ...`
def _replication_info(c) -> list[dict] | None:
    """pgmem.replication_status on the embedded cluster (None when pgmem is not installed)."""
    import psycopg
    from psycopg.rows import dict_row

    try:
        with psycopg.connect(c.dsn(), autocommit=True, connect_timeout=5, row_factory=dict_row) as conn:
            return conn.execute("select * from pgmem.replication_status").fetchall()
    except psycopg.Error:
        return None


def _print_replication(rows: list[dict] | None) -> None:
    for r in rows or []:
        lag = "?" if r["lag_bytes"] is None else f"{r['lag_bytes']} bytes"
        secs = "" if r["replay_lag_s"] is None else f", replay lag {r['replay_lag_s']:.3f} s"
        if r["role"] == "primary":
            print(f"standby: {r['standby']} {r['state']} ({r['sync_state']}), behind by {lag}{secs}")
        else:
            print(f"role:    hot standby ({r['state']}), {lag} received but not replayed{secs}")


def _replica_port(args) -> int | None:
    return args.port or (int(os.environ["PGMEM_REPLICA_PORT"]) if os.environ.get("PGMEM_REPLICA_PORT") else None)


def cmd_db_replica_up(args) -> int:
    from . import replica

    rep, created = replica.replica_up(_cluster(), _replica_port(args), sync=args.sync)
    st = replica.wait_streaming(_cluster())
    print(f"hot standby {'created and started' if created else 'running'} on port {rep.port} "
          f"({st['state']}, {st['sync_state']}): {rep.owner_dsn(mask=True)}")
    print("use it for reads: MemoryClient(read_dsn=...) or PGMEM_READ_DSN")
    return 0


def cmd_db_replica_down(args) -> int:
    from . import replica

    rep = replica.replica_cluster(_cluster(), _replica_port(args))
    c = _cluster()
    if c.running():  # a primary waiting for a stopped synchronous standby would hang its commits
        replica.set_synchronous(c, None)
    print("stopped" if rep.stop() else "not running")
    return 0


def cmd_db_replica_status(args) -> int:
    from . import replica

    st = replica.status(_cluster())
    if args.json:
        print(json.dumps(st, indent=2, default=str))
        return 0
    for side in ("primary", "standby"):
        s = st[side]
        if s is None:
            print(f"{side}: not running")
        elif "error" in s:
            print(f"{side} (port {s['port']}): {s['error']}")
        else:
            print(f"{side} (port {s['port']}):")
            _print_replication(s["rows"])
    return 0


def cmd_db_replica_promote(args) -> int:
    from . import replica

    rep = replica.replica_cluster(_cluster(), _replica_port(args))
    replica.promote(rep)
    print(f"promoted: port {rep.port} is now a primary ({rep.owner_dsn(mask=True)}); point PGMEM_DSN at it")
    return 0


def _shards_home():
    from .config import home

    from .shards import shards_home

    return shards_home(home())


def _ports(text: str | None, n: int, default_start: int) -> list[int]:
    if text:
        return [int(x) for x in text.split(",")]
    from .cluster import port_in_use

    out: list[int] = []
    port = default_start
    while len(out) < n:
        if not port_in_use(port):
            out.append(port)
        port += 1
    return out


def cmd_db_shards_up(args) -> int:
    from . import shards

    proxy, parts = shards.shards_up(_shards_home(), args.shards, _ports(args.ports, args.shards + 1, 54370))
    print(f"proxy on port {proxy.port}: {proxy.owner_dsn(mask=True)}  (pgmem's functions, routed by tenant)")
    for p in parts:
        print(f"partition {p.part}: port {p.cluster.port} ({p.connstr()})")
    return 0


def cmd_db_shards_down(args) -> int:
    from . import shards

    if args.remove:
        shards.remove(_shards_home())
        print("removed")
        return 0
    stopped = shards.shards_down(_shards_home())
    print(f"stopped ports {', '.join(stopped)}" if stopped else "not running")
    return 0


def cmd_db_shards_status(args) -> int:
    import psycopg

    from . import shards
    from .db import scalar

    proxy, parts = shards.topology(_shards_home())
    print(f"proxy:       port {proxy.port} ({'running' if proxy.running() else 'stopped'})")
    for p in parts:
        n = "?"
        if p.cluster.running():
            with psycopg.connect(p.cluster.dsn(p.dbname), autocommit=True) as c:
                n = scalar(c, "select count(distinct tenant) from pgmem.memories")
        print(f"partition {p.part}: port {p.cluster.port} ({'running' if p.cluster.running() else 'stopped'}), {n} tenants")
    return 0


def cmd_db_shards_split(args) -> int:
    from . import shards

    _, parts = shards.topology(_shards_home())
    shards.split(_shards_home(), _ports(args.ports, len(parts), 54370 + 1 + len(parts)))
    return 0


def cmd_db_shards_refresh(args) -> int:
    """Re-generate the shard targets and the proxy's wrappers (after an upgrade added functions)."""
    from . import migrate, shards

    proxy, parts = shards.topology(_shards_home())
    cat = None
    for p in parts:
        migrate.upgrade(p.cluster.dsn(p.dbname))
        cat = shards.install_shard(p.cluster.dsn(p.dbname), cat)
    if cat is None:
        raise PgmemError("the shards' state names no partition: run 'pgmem db shards up' first")
    shards.install_proxy(proxy.dsn(), cat, parts)
    print(f"proxy refreshed: {len(cat.functions)} functions, {len(cat.views)} views over {len(parts)} partitions")
    return 0


def _add_scaleout_parsers(dbs) -> None:
    sh = dbs.add_parser("shards", help="tenant shards on PL/Proxy: a proxy database and N pgmem clusters")
    shs = sh.add_subparsers(dest="shards_command", required=True)
    up = shs.add_parser("up", help="start (creating once) a proxy and N shard clusters under .pgmem/shards")
    up.add_argument("--shards", type=int, default=2, help="number of shards, a power of two (default 2)")
    up.add_argument("--ports", help="comma-separated ports: the proxy's, then one per shard (default: free ports from 54370)")
    up.set_defaults(func=cmd_db_shards_up)
    dn = shs.add_parser("down", help="stop the proxy and the shards")
    dn.add_argument("--remove", action="store_true", help="and delete them")
    dn.set_defaults(func=cmd_db_shards_down)
    shs.add_parser("status", help="the partition map and the tenants of each partition").set_defaults(func=cmd_db_shards_status)
    sp = shs.add_parser("split", help="double the partitions (pause writers for the cut-over)")
    sp.add_argument("--ports", help="comma-separated ports of the new partitions")
    sp.set_defaults(func=cmd_db_shards_split)
    shs.add_parser("refresh", help="upgrade the shards and re-generate the proxy from their catalog").set_defaults(
        func=cmd_db_shards_refresh)

    rp = dbs.add_parser("replica", help="a hot standby of the embedded cluster (streaming replication)")
    rps = rp.add_subparsers(dest="replica_command", required=True)
    up = rps.add_parser("up", help="base backup (once) and start a hot standby streaming from the embedded cluster")
    up.add_argument("--port", type=int, help="its port (default PGMEM_REPLICA_PORT, else 54360)")
    up.add_argument("--sync", action="store_true", help="synchronous: commits on the primary wait for it (no loss on failover)")
    up.set_defaults(func=cmd_db_replica_up)
    dn = rps.add_parser("down", help="stop the standby (and make the primary asynchronous again)")
    dn.add_argument("--port", type=int)
    dn.set_defaults(func=cmd_db_replica_down, sync_off=True)
    st = rps.add_parser("status", help="replication as the primary and the standby see it (pgmem.replication_status)")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_db_replica_status)
    pr = rps.add_parser("promote", help="make the standby a primary (after the primary failed)")
    pr.add_argument("--port", type=int)
    pr.set_defaults(func=cmd_db_replica_promote)


# ----------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(prog="pgmem", description="Long-term memory for LLM agents, inside PostgreSQL.")
    p.add_argument("--version", action="version", version=f"pgmem {__version__}")
    p.add_argument("--dsn", help="database (default: PGMEM_DSN, else the embedded cluster)")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)

    db = sub.add_parser("db", help="the embedded PostgreSQL cluster under ./.pgmem")
    dbs = db.add_subparsers(dest="db_command", required=True)
    dbs.add_parser("up", help="create (once), start, and migrate the embedded cluster").set_defaults(func=cmd_db_up)
    dbs.add_parser("down", help="stop the embedded cluster").set_defaults(func=cmd_db_down)
    st = dbs.add_parser("status", help="show whether it runs, and its DSNs (passwords masked)")
    st.add_argument("--json", action="store_true")
    st.add_argument("--show-password", action="store_true", help="print the DSNs with their passwords")
    st.set_defaults(func=cmd_db_status)
    ps = dbs.add_parser("psql", help="open psql on the embedded database")
    ps.add_argument("psql_args", nargs="*", help="arguments for psql (e.g. -c 'select ...')")
    ps.set_defaults(func=cmd_db_psql)
    _add_scaleout_parsers(dbs)  # scaleout (issue 19)

    mg = sub.add_parser("migrate", help="install or upgrade pgmem in the database (PGMEM_DSN or embedded)")
    mg.add_argument("--revision", default="head")
    mg.add_argument("--downgrade", metavar="REVISION", help="downgrade instead (e.g. 'base' removes pgmem)")
    mg.add_argument("--dimensions", "--embedding-dim", dest="dimensions", type=int, metavar="N",
                    help="dimension of the embeddings (first install only; default: PGMEM_EMBEDDING_DIM, else the "
                         "configured model's: 384 for all-MiniLM-L6-v2, 1536 for text-embedding-3-small)")
    mg.set_defaults(func=cmd_migrate)

    from . import cli_memory

    cli_memory.register(sub)
    from . import mcp_server  # `pgmem mcp` (the MCP SDK is imported only when it runs)

    mcp_server.register(sub)
    from . import web  # `pgmem serve` (FastAPI is imported only when it runs)

    web.register(sub)
    _add_map_parser(sub)
    return p


#: exit code of every expected failure (one line on stderr naming the fix); argparse uses it too
EXIT_FAILURE = 2


def report(e: BaseException) -> int:
    """Print one line for a failure and return the exit code: 2 for everything a user can fix
    (pgmem's errors, the database's, a file, the network), 1 for a bug (asking for a report)."""
    import psycopg

    from .errors import from_database

    def say(text: str) -> None:
        text = " ".join(str(text).split())  # one line, whatever the message held
        print(f"pgmem: {text}", file=sys.stderr)

    if isinstance(e, psycopg.Error):
        mapped = from_database(e)
        if mapped is not e:
            e = mapped
        else:
            diag = getattr(e, "diag", None)
            msg = (diag.message_primary if diag and diag.message_primary else str(e).strip().splitlines()[-1]
                   if str(e).strip() else type(e).__name__)
            say(msg + (f" (hint: {diag.message_hint})" if diag and diag.message_hint else ""))
            return EXIT_FAILURE
    if isinstance(e, PgmemError):
        say(str(e))
        return EXIT_FAILURE
    if type(e).__name__ == "PoolTimeout":
        say(f"no database connection: {e}: is PostgreSQL running? check PGMEM_DSN")
        return EXIT_FAILURE
    if isinstance(e, FileNotFoundError):
        say(f"{e.filename}: no such file: check the path")
        return EXIT_FAILURE
    if isinstance(e, IsADirectoryError):
        say(f"{e.filename}: is a directory: give a file")
        return EXIT_FAILURE
    if isinstance(e, PermissionError) and getattr(e, "filename", None):
        say(f"{e.filename}: permission denied: check the file's permissions")
        return EXIT_FAILURE
    if isinstance(e, (OSError, ValueError, ImportError)):
        say(f"{type(e).__name__}: {e}")
        return EXIT_FAILURE
    say(f"internal error: {type(e).__name__}: {e} (this is a bug: run again with PGMEM_DEBUG=1 for the traceback "
        "and report it)")
    return 1


def _quiet_warnings() -> None:
    """No library's warning before a command's output (issue 34): Python warnings raised
    outside pgmem are shown only with -v, PGMEM_DEBUG or PYTHONWARNINGS."""
    import warnings

    if not os.environ.get("PGMEM_DEBUG") and not sys.warnoptions:  # (PYTHONWARNINGS fills sys.warnoptions)
        warnings.filterwarnings("ignore")
        warnings.filterwarnings("default", module=r"pgmem(\.|$)")


def main(argv: list[str] | None = None) -> int:
    _quiet_warnings()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "psql" in argv and argv[max(0, argv.index("psql") - 1)] == "db":
        i = argv.index("psql")  # everything after `db psql` goes to psql untouched
        argv, extra = argv[: i + 1], argv[i + 1:]
    args = parser.parse_args(argv)
    if extra:
        args.psql_args = extra
    if getattr(args, "tenant", "unset") is None:
        args.tenant = os.environ.get("PGMEM_TENANT", "default")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="pgmem: %(message)s")
    if args.verbose:
        import warnings

        warnings.resetwarnings()
    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        print("pgmem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `pgmem search ... | head`
        return 0
    except Exception as e:  # every failure is one line (PGMEM_DEBUG=1: the traceback)
        if os.environ.get("PGMEM_DEBUG"):
            raise
        return report(e)


if __name__ == "__main__":
    sys.exit(main())
