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
    warnings = migrate.upgrade(c.dsn())
    c.ensure_owner_login()
    for w in warnings:
        print(f"pgmem: warning: {w}", file=sys.stderr)
    what = "created and started" if created else ("started" if started else "already running")
    # passwords stay in .pgmem/ (mode 0600): `pgmem db status --show-password` prints them
    print(f"cluster {what}: {c.owner_dsn(mask=True)}")
    return 0


def cmd_db_down(args) -> int:
    c = _cluster()
    print("stopped" if c.stop() else "not running")
    return 0


def cmd_db_status(args) -> int:
    c = _cluster()
    info = c.info(show_password=args.show_password)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"home:    {info['home']}")
        print(f"running: {'yes' if info['running'] else 'no'}")
        print(f"port:    {info['port']}")
        print(f"log:     {info['log']}")
        if info["dsn"]:
            print(f"dsn:     {info['dsn']}  (owner role: the client, worker and jobs)")
        if info["admin_dsn"]:
            print(f"admin:   {info['admin_dsn']}  (superuser: migrations)")
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
    for w in migrate.upgrade(args.dsn, args.revision, embedding_dim=args.embedding_dim):
        print(f"pgmem: warning: {w}", file=sys.stderr)
    print(f"pgmem is at revision {migrate.current_revision(args.dsn)} in {migrate.describe_dsn(migrate.resolve_dsn(args.dsn))}")
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


# ----------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pgmem", description="Long-term memory for LLM agents, inside PostgreSQL.")
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

    mg = sub.add_parser("migrate", help="install or upgrade pgmem in the database (PGMEM_DSN or embedded)")
    mg.add_argument("--revision", default="head")
    mg.add_argument("--downgrade", metavar="REVISION", help="downgrade instead (e.g. 'base' removes pgmem)")
    mg.add_argument("--embedding-dim", type=int, help="dimension of the embedding column (first install only; default 384)")
    mg.set_defaults(func=cmd_migrate)

    from . import cli_memory

    cli_memory.register(sub)
    from . import mcp_server  # `pgmem mcp` (the MCP SDK is imported only when it runs)

    mcp_server.register(sub)
    _add_map_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
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
    try:
        return args.func(args) or 0
    except PgmemError as e:
        if os.environ.get("PGMEM_DEBUG"):
            raise
        print(f"pgmem: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pgmem: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # database errors from the SQL API carry a message for people
        import psycopg

        if isinstance(e, psycopg.Error) and not os.environ.get("PGMEM_DEBUG"):
            diag = getattr(e, "diag", None)
            msg = (diag.message_primary if diag and diag.message_primary else str(e)).strip()
            hint = diag.message_hint if diag else None
            print(f"pgmem: {msg}" + (f" (hint: {hint})" if hint else ""), file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
