"""Where the database is and how to reach it: DSN resolution and connections.

This is the layer under both the client (client.py, worker.py, models.py) and the installer
(migrate.py, the CLI): it imports psycopg and nothing of pgmem's installer. Precedence for the
DSN: an explicit argument > ``PGMEM_DSN`` > the embedded cluster (``pgmem db up``; only then is
``pgmem.cluster`` imported, to read that cluster's address).
"""
from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

from .errors import PgmemError, SetupError

#: The table (schema public) where Alembic records the installed pgmem revision.
VERSION_TABLE = "pgmem_alembic_version"


def resolve_dsn(dsn: str | None = None, *, superuser: bool = False) -> str:
    """Explicit DSN > PGMEM_DSN > the embedded cluster: as its owner role pgmem_owner (not a
    superuser) for using pgmem, as its superuser for migrations (``superuser=True``)."""
    if dsn:
        return dsn
    env = os.environ.get("PGMEM_DSN")
    if env:
        return env
    embedded = _embedded_dsn(superuser)
    if embedded:
        return embedded
    raise SetupError("no database configured: set PGMEM_DSN (e.g. postgresql://user@host/db), "
                     "or run 'pgmem db up' for the embedded cluster")


def _embedded_dsn(superuser: bool = False) -> str | None:
    """The DSN of the embedded cluster under PGMEM_HOME, or None when there is none."""
    from .cluster import default_cluster

    c = default_cluster()
    if not c.initialized():
        return None
    return c.owner_dsn() if not superuser and c.has_owner_login() else c.dsn()


_PASSWORD_RE = re.compile(r"(://[^:/@\s]*:)[^@\s]*(@)|(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.I)


def mask_password(text: str, dsn: str | None = None) -> str:
    """``text`` (a DSN, or a message quoting one) with every password replaced by ****; with
    ``dsn``, also every appearance of that DSN's password (libpq quotes the part it could not
    parse, e.g. 'unexpected spaces found in "<password>"')."""
    out = text
    for pw in sorted(_dsn_passwords(dsn or ""), key=len, reverse=True):
        out = out.replace(pw, "****")
    return _PASSWORD_RE.sub(lambda m: f"{m.group(1)}****{m.group(2)}" if m.group(1) else f"{m.group(3)}****", out)


def _dsn_passwords(dsn: str) -> list[str]:
    """The password(s) a DSN holds, however malformed it is (URI or key=value)."""
    found = []
    m = re.match(r"^[a-z][a-z0-9+.-]*://[^:/@?#]*:(.*)@[^@]*$", dsn, re.I | re.S)
    if m:
        found.append(m.group(1))
    for m in re.finditer(r"password\s*=\s*('(?:[^'\\]|\\.)*'?|\S+)", dsn, re.I):
        found += [m.group(1), m.group(1).strip("'")]
    return [p for p in found if len(p) >= 2]


def check_dsn(dsn: str) -> str:
    """The DSN if libpq can parse it, else a SetupError that does not show its password."""
    import psycopg.conninfo as ci
    from psycopg import ProgrammingError

    try:
        ci.conninfo_to_dict(dsn)
    except ProgrammingError as e:
        raise SetupError(f"malformed DSN ({mask_password(dsn, dsn)}): {mask_password(str(e).strip(), dsn)}") from None
    return dsn


def describe_dsn(dsn: str) -> str:
    """host:port/dbname of a DSN without its password, for messages."""
    try:
        import psycopg.conninfo as ci

        d = ci.conninfo_to_dict(dsn)
        return f"{d.get('host', 'localhost')}:{d.get('port', 5432)}/{d.get('dbname', d.get('user', '?'))}"
    except Exception:
        try:
            parts = urlsplit(dsn)
            if parts.scheme and parts.hostname:
                return f"{parts.hostname}:{parts.port}{parts.path}"
        except ValueError:
            pass
        return "(a malformed DSN)"


def connect_timeout() -> int:
    """Seconds to wait for the server when connecting (PGMEM_CONNECT_TIMEOUT, default 10)."""
    from .config import int_env

    return int_env("PGMEM_CONNECT_TIMEOUT", 10)


def connect(dsn: str | None = None, *, superuser: bool = False, **kw: Any):
    """A psycopg connection with a one-line error (never showing a password) when the server
    cannot be reached or the DSN is malformed."""
    import psycopg

    dsn = resolve_dsn(dsn, superuser=superuser)
    kw.setdefault("connect_timeout", connect_timeout())
    try:
        return psycopg.connect(dsn, **kw)
    except (psycopg.OperationalError, psycopg.ProgrammingError) as e:
        # a malformed DSN's message quotes the DSN, password included
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise SetupError(f"cannot connect to {describe_dsn(dsn)}: {mask_password(reason, dsn)}: check PGMEM_DSN "
                         "(or start the embedded cluster: pgmem db up)") from None


def scalar(conn: Any, sql: Any, params: Any = ()) -> Any:
    """The first column of the first row of a statement that always returns one (a count, an
    exists, a to_regclass(...)); a statement that returns none is an error naming it."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise PgmemError(f"no row from the statement {str(sql).split(chr(10))[0][:100]!r}")
    return row[0]


def installed_revision(conn) -> str | None:
    """The pgmem revision installed in the database of ``conn`` (None: not installed)."""
    if conn.execute("select to_regclass(%s)", (f"public.{VERSION_TABLE}",)).fetchone()[0] is None:
        return None
    row = conn.execute(f"select version_num from public.{VERSION_TABLE}").fetchone()
    return row[0] if row else None
