"""Install and upgrade pgmem in a database.

``upgrade(dsn)`` checks that the server has what pgmem needs (naming what is missing and
how to get it), runs the Alembic revisions in ``migrations/`` and then re-applies the
idempotent SQL in ``sql/`` (functions, views, triggers, grants), in file-name order.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import DISTRIBUTION, migrations_dir, sql_dir
# The DSN and connection helpers live in pgmem.db (the layer under the client); they stay
# importable from here for migrations/env.py and older callers.
from .db import (VERSION_TABLE, check_dsn, connect, describe_dsn, installed_revision,  # noqa: F401
                 mask_password, resolve_dsn)
from .errors import MigrationError, SetupError

log = logging.getLogger("pgmem.migrate")
MIN_PGVECTOR = (0, 8, 0)
#: pgvector's HNSW index on a vector column takes at most this many dimensions
MAX_INDEXED_DIM = 2000

INSTALL_HINTS = {
    "vector": "pgvector >= 0.8 (Debian 12: 'make setup' builds it from Debian's pgvector source "
              "package; elsewhere https://github.com/pgvector/pgvector#installation)",
    "plpython3u": "PL/Python 3 (Debian/Ubuntu: apt-get install postgresql-plpython3-15 python3-numpy)",
    "pg_cron": "pg_cron (Debian/Ubuntu: apt-get install postgresql-15-cron; then set "
               "shared_preload_libraries = 'pg_cron' and cron.database_name, and restart)",
}


def _alembic():
    """The alembic package, with SQLAlchemy; a clear error when the [install] extra is missing."""
    try:
        import alembic.command
        import alembic.config
        import sqlalchemy  # noqa: F401
    except ImportError as e:
        raise SetupError(
            f"installing pgmem into a database needs Alembic and SQLAlchemy ({e.name} is missing): "
            f"pip install '{DISTRIBUTION}[install]'"
        ) from None
    return alembic


def sqlalchemy_url(dsn: str) -> str:
    if dsn.startswith("postgresql+psycopg://"):
        return dsn
    if dsn.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + dsn.split("://", 1)[1]
    # key=value conninfo: psycopg understands it via the query string
    import psycopg.conninfo as ci
    from sqlalchemy.engine import URL

    d = {k: str(v) for k, v in ci.conninfo_to_dict(dsn).items() if v is not None}
    port = d.pop("port", None)
    url = URL.create("postgresql+psycopg", username=d.pop("user", None), password=d.pop("password", None),
                     host=d.pop("host", None), port=int(port) if port else None, database=d.pop("dbname", None),
                     query=d)
    return url.render_as_string(hide_password=False)


@dataclass
class Preflight:
    missing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def raise_if_missing(self, where: str) -> None:
        if self.missing:
            lines = [f"{where} cannot host pgmem; missing:"]
            lines += [f"  - extension '{m}': install {INSTALL_HINTS[m]}" for m in self.missing]
            raise MigrationError("\n".join(lines))


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def preflight(conn) -> Preflight:
    """What the server lacks for pgmem (missing extensions) and what it should fix (warnings)."""
    p = Preflight()
    rows = dict(conn.execute(
        "select name, coalesce(installed_version, default_version) from pg_available_extensions "
        "where name in ('vector', 'plpython3u', 'pg_cron')").fetchall())
    for ext in ("vector", "plpython3u"):
        if ext not in rows:
            p.missing.append(ext)
    if "vector" in rows and _version_tuple(rows["vector"]) < MIN_PGVECTOR:
        p.missing.append("vector")
        p.warnings.append(f"pgvector {rows['vector']} is too old: pgmem needs 0.8.0 (iterative index scans)")
    # pgmem's functions pin pgmem, pg_catalog, pg_temp and name pgvector's objects by schema, but
    # their signatures resolve `vector` in public at install: a role that may create objects in
    # public could plant one there (SECURITY.md). PostgreSQL 15 revokes it by default; clusters
    # upgraded from older versions keep the old grant.
    if conn.execute("select has_schema_privilege('public', 'public', 'CREATE')").fetchone()[0]:
        p.warnings.append("every role may create objects in schema public, where pgmem's functions look up names: "
                          "run REVOKE CREATE ON SCHEMA public FROM PUBLIC (PostgreSQL 15's default; SECURITY.md)")
    preload = conn.execute("select current_setting('shared_preload_libraries')").fetchone()[0]
    if "pg_cron" not in rows or "pg_cron" not in preload:
        p.warnings.append("pg_cron is not loaded (shared_preload_libraries): scheduled jobs are unavailable; "
                          "run them by hand or install " + INSTALL_HINTS["pg_cron"])
    return p


def alembic_config(connection=None):
    """Alembic's configuration for pgmem's revisions, without an ini file (the checkout's
    alembic.ini is for the ``alembic`` command; the wheel carries none)."""
    Config = _alembic().config.Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _engine(dsn: str):
    _alembic()
    from sqlalchemy import create_engine, pool

    return create_engine(sqlalchemy_url(dsn), poolclass=pool.NullPool)


def upgrade(dsn: str | None = None, revision: str = "head", *, embedding_dim: int | None = None) -> list[str]:
    """Check the server, run migrations up to ``revision``, re-apply the idempotent SQL.
    Returns warnings for the caller to show."""
    command = _alembic().command

    dsn = resolve_dsn(dsn, superuser=True)
    with connect(dsn, autocommit=True) as conn:
        pf = preflight(conn)
        installed = installed_dim(conn)
    pf.raise_if_missing(describe_dsn(dsn))
    if embedding_dim is not None:
        if not isinstance(embedding_dim, int) or not 1 <= embedding_dim <= MAX_INDEXED_DIM:
            raise MigrationError(
                f"--dimensions {embedding_dim} is outside 1..{MAX_INDEXED_DIM}: pgvector's HNSW index takes at most "
                f"{MAX_INDEXED_DIM:,} dimensions; a larger model can make shorter vectors (text-embedding-3-large: "
                "PGMEM_EMBED_DIMENSIONS=1536)")
        if installed is not None and installed != embedding_dim:
            raise MigrationError(
                f"{describe_dsn(dsn)} stores {installed}-dimensional embeddings since its install; --dimensions "
                f"{embedding_dim} applies to a new install only: use a model that makes {installed} dimensions, "
                f"or install pgmem into a new database with --dimensions {embedding_dim} and move the memories "
                "(pgmem.export_user, or pgmem reembed after the install)")
        os.environ["PGMEM_EMBEDDING_DIM"] = str(embedding_dim)
    engine = _engine(dsn)
    try:
        with engine.begin() as sa_conn:
            command.upgrade(alembic_config(sa_conn), revision)
    except Exception as e:  # alembic/SQLAlchemy wrap driver errors; show the server's words
        raise MigrationError(f"migration of {describe_dsn(dsn)} failed: {_root_cause(e)}") from e
    finally:
        engine.dispose()
    return pf.warnings


def installed_dim(conn) -> int | None:
    """The embedding dimension pgmem was installed with in this database (None: not installed)."""
    if conn.execute("select to_regclass('pgmem.settings')").fetchone()[0] is None:
        return None
    row = conn.execute("select value::text from pgmem.settings where tenant = '*' and key = 'embedding_dim'").fetchone()
    return int(row[0].strip('"')) if row else None


def dimensions_for_install(explicit: int | None = None) -> tuple[int, str]:
    """The dimension a first install uses, and where it came from: ``--dimensions``, else
    ``PGMEM_EMBEDDING_DIM``, else the configured embedder's (pgmem.embedding.configured_dim:
    known without loading a model for the defaults and OpenAI's models), else 384."""
    if explicit is not None:
        return explicit, "--dimensions"
    if os.environ.get("PGMEM_EMBEDDING_DIM", "").strip():
        from .config import embedding_dim

        return embedding_dim(), "PGMEM_EMBEDDING_DIM"
    try:
        from .embedding import configured_dim

        dim, model = configured_dim()
        return dim, f"the configured model {model}"
    except ImportError:  # the core install: no embedder here, the worker's decides
        return 384, "the default model all-MiniLM-L6-v2 (no embedder installed here; give --dimensions for another)"


def downgrade(dsn: str | None = None, revision: str = "base") -> None:
    command = _alembic().command

    dsn = resolve_dsn(dsn, superuser=True)
    engine = _engine(dsn)
    try:
        with engine.begin() as sa_conn:
            command.downgrade(alembic_config(sa_conn), revision)
    except Exception as e:
        raise MigrationError(f"downgrade of {describe_dsn(dsn)} failed: {_root_cause(e)}") from e
    finally:
        engine.dispose()


def current_revision(dsn: str | None = None) -> str | None:
    with connect(dsn, autocommit=True, superuser=True) as conn:
        return installed_revision(conn)


def run_sql(sql: str) -> None:
    """Execute a block of SQL in the running Alembic migration, verbatim: through the driver,
    so that neither SQLAlchemy (``:name``) nor psycopg (``%``) rewrites it."""
    _driver_connection().execute(sql)


def _driver_connection() -> Any:
    """The psycopg connection under the running Alembic migration."""
    from alembic import op

    raw = op.get_bind().connection.driver_connection
    if raw is None:
        raise MigrationError("no database connection under this migration: run it with `pgmem migrate`")
    return raw


# The views and functions of schema pgmem that depend on any of the given tables or columns:
# views reading them, functions taking or returning a table's row type or reading it in a
# SQL-standard body; then, transitively, what depends on those. Deepest first (drop order).
_DEPENDENTS = r"""
with recursive target as (
  select c.oid, coalesce(a.attnum, 0) as attnum
    from unnest(%(targets)s::text[]) t(name)
    join pg_class c on c.oid = to_regclass(case when t.name ~ '^\w+\.\w+\.\w+$'
                                                then regexp_replace(t.name, '\.\w+$', '') else t.name end)
    left join pg_attribute a on t.name ~ '^\w+\.\w+\.\w+$' and a.attrelid = c.oid
                            and a.attname = substring(t.name from '\.(\w+)$')),
-- dependencies between relations (a view's rule stands for the view; a row type for its relation)
-- and functions
edge as (
  select case when d.classid = 'pg_rewrite'::regclass then 'pg_class'::regclass else d.classid end as classid,
         coalesce(w.ev_class, d.objid) as objid,
         case when d.refclassid = 'pg_type'::regclass then 'pg_class'::regclass else d.refclassid end as refclassid,
         coalesce(rt.oid, d.refobjid) as refobjid,
         case when d.refclassid = 'pg_type'::regclass then 0 else d.refobjsubid end as refobjsubid
    from pg_depend d
    left join pg_rewrite w on d.classid = 'pg_rewrite'::regclass and w.oid = d.objid
    left join pg_class rt on d.refclassid = 'pg_type'::regclass and rt.reltype = d.refobjid
   where d.deptype = 'n' and d.classid in ('pg_rewrite'::regclass, 'pg_proc'::regclass)
     and d.refclassid in ('pg_class'::regclass, 'pg_type'::regclass, 'pg_proc'::regclass)
     and (d.refclassid <> 'pg_type'::regclass or rt.oid is not null)),
node(classid, objid, depth) as (
  select e.classid, e.objid, 1 from target t
    join edge e on e.refclassid = 'pg_class'::regclass and e.refobjid = t.oid
               and (t.attnum = 0 or e.refobjsubid = t.attnum)
  union
  select e.classid, e.objid, n.depth + 1 from node n
    join edge e on e.refclassid = n.classid and e.refobjid = n.objid
   where n.depth < 50)
select coalesce(c.oid::regclass::text, p.oid::regprocedure::text) as name,
       case when p.oid is not null then 'routine' when c.relkind = 'm' then 'materialized view' else 'view' end as kind
  from node n
  left join pg_class c on n.classid = 'pg_class'::regclass and c.oid = n.objid and c.relkind in ('v', 'm')
  left join pg_proc p on n.classid = 'pg_proc'::regclass and p.oid = n.objid
  join pg_namespace s on s.oid = coalesce(c.relnamespace, p.pronamespace) and s.nspname = 'pgmem'
 group by 1, 2 order by max(n.depth) desc, 1"""


def drop_dependents(*targets: str) -> list[str]:
    """In a downgrade, before dropping tables (``pgmem.t``) or columns (``pgmem.t.col``): drop
    the views and functions of schema pgmem that depend on them (see ``_DEPENDENTS``). They
    belong to the idempotent lane (sql/), which recreates them on the next upgrade. Objects of
    other schemas are left alone (the drop of the table then fails, naming them). Returns
    what was dropped."""
    raw = _driver_connection()
    found = raw.execute(_DEPENDENTS, {"targets": list(targets)}).fetchall()
    for name, kind in found:
        raw.execute(f"drop {kind} if exists {name}")
    return [name for name, _ in found]


def idempotent_files() -> list[Path]:
    return sorted(p for p in sql_dir().glob("*.sql"))


def engine_modules() -> dict[str, str]:
    """Source of the in-database Python modules (python/pgmem/engine/*.py, not __init__)."""
    from .config import PACKAGE_DIR

    return {p.stem: p.read_text() for p in sorted((PACKAGE_DIR / "engine").glob("*.py")) if p.stem != "__init__"}


def apply_idempotent(connection) -> None:
    """Store the engine modules in pgmem.py_modules, then run every sql/*.sql file
    (create-or-replace only), on a SQLAlchemy connection."""
    import hashlib

    raw = connection.connection.driver_connection
    if raw.execute("select to_regclass('pgmem.py_modules')").fetchone()[0] is not None:
        for name, src in engine_modules().items():
            raw.execute(
                "insert into pgmem.py_modules (name, source, sha256) values (%s, %s, %s) "
                "on conflict (name) do update set source = excluded.source, sha256 = excluded.sha256, updated_at = now() "
                "where pgmem.py_modules.sha256 <> excluded.sha256",
                (name, src, hashlib.sha256(src.encode()).hexdigest()))
    for path in idempotent_files():
        try:
            raw.execute(path.read_text())
        except Exception as e:
            raise MigrationError(f"{path.name}: {_root_cause(e)}") from e


def _root_cause(e: BaseException) -> str:
    while (orig := getattr(e, "orig", None)) is not None:
        e = orig
    while e.__cause__ is not None and not str(e):
        e = e.__cause__
    return str(e).strip()
