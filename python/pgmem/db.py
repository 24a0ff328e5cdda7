"""Where the database is and how to reach it: DSN resolution and connections.

This is the layer under both the client (client.py, worker.py, models.py) and the installer
(migrate.py, the CLI): it imports psycopg and nothing of pgmem's installer. Precedence for the
DSN: an explicit argument > ``PGMEM_DSN`` > the embedded cluster (``pgmem db up``; only then is
``pgmem.cluster`` imported, to read that cluster's address).
"""
from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from .errors import SetupError

#: The table (schema public) where Alembic records the installed pgmem revision.
VERSION_TABLE = "pgmem_alembic_version"


def resolve_dsn(dsn: str | None = None) -> str:
    """Explicit DSN > PGMEM_DSN > the embedded cluster."""
    if dsn:
        return dsn
    env = os.environ.get("PGMEM_DSN")
    if env:
        return env
    embedded = _embedded_dsn()
    if embedded:
        return embedded
    raise SetupError("no database configured: set PGMEM_DSN (e.g. postgresql://user@host/db), "
                     "or run 'pgmem db up' for the embedded cluster")


def _embedded_dsn() -> str | None:
    """The DSN of the embedded cluster under PGMEM_HOME, or None when there is none."""
    from .cluster import default_cluster

    c = default_cluster()
    return c.dsn() if c.initialized() else None


def describe_dsn(dsn: str) -> str:
    """host:port/dbname of a DSN without its password, for messages."""
    try:
        import psycopg.conninfo as ci

        d = ci.conninfo_to_dict(dsn)
        return f"{d.get('host', 'localhost')}:{d.get('port', 5432)}/{d.get('dbname', d.get('user', '?'))}"
    except Exception:
        parts = urlsplit(dsn)
        return f"{parts.hostname}:{parts.port}{parts.path}"


def connect_timeout() -> int:
    """Seconds to wait for the server when connecting (PGMEM_CONNECT_TIMEOUT, default 10)."""
    from .config import int_env

    return int_env("PGMEM_CONNECT_TIMEOUT", 10)


def connect(dsn: str | None = None, **kw: Any):
    """A psycopg connection with a one-line error when the server cannot be reached."""
    import psycopg

    dsn = resolve_dsn(dsn)
    kw.setdefault("connect_timeout", connect_timeout())
    try:
        return psycopg.connect(dsn, **kw)
    except psycopg.OperationalError as e:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise SetupError(f"cannot connect to {describe_dsn(dsn)}: {reason}") from None


def installed_revision(conn) -> str | None:
    """The pgmem revision installed in the database of ``conn`` (None: not installed)."""
    if conn.execute("select to_regclass(%s)", (f"public.{VERSION_TABLE}",)).fetchone()[0] is None:
        return None
    row = conn.execute(f"select version_num from public.{VERSION_TABLE}").fetchone()
    return row[0] if row else None
