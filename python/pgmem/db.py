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

        ci.conninfo_to_dict(dsn)
        w = _where(dsn)  # libpq's defaults: PGHOST, PGPORT, PGDATABASE (not localhost:5432 regardless)
        return f"{w['host']}:{w['port']}/{w['dbname']}"
    except Exception:
        try:
            parts = urlsplit(dsn)
            if parts.scheme and parts.hostname:
                return f"{parts.hostname}:{parts.port}{parts.path}"
        except ValueError:
            pass
        return "(a malformed DSN)"


def describe_conn(conn: Any) -> str:
    """host:port/dbname of an open connection: where libpq really connected (a service file,
    PGHOST and PGPORT included), for messages such as migrate's."""
    info = conn.info
    host = info.host or "localhost"
    return f"{'socket ' if host.startswith('/') else ''}{host}:{info.port}/{info.dbname}"


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
        raise SetupError(connect_failure(dsn, e)) from None


def _where(dsn: str) -> dict[str, str]:
    """host, port, dbname and user of a DSN as libpq would use them (PGHOST etc. included)."""
    try:
        import psycopg.conninfo as ci

        d = ci.conninfo_to_dict(dsn)
    except Exception:
        d = {}
    libpq: dict[str, str] = {}
    try:  # libpq's own defaults: its environment variables (PGHOST, PGPORT, ...) and compiled-in values
        from psycopg import pq

        libpq = {o.keyword.decode(): o.val.decode() for o in pq.Conninfo.get_defaults() if o.val}
    except Exception:
        pass

    def get(key: str) -> str:
        return str(d.get(key) or libpq.get(key) or "")

    user = get("user")
    return {"host": get("host") or "localhost", "port": get("port") or "5432", "dbname": get("dbname") or user or "?",
            "user": user or "?"}


def connect_failure(dsn: str, e: BaseException) -> str:
    """One line for a connection that failed, naming the fix (issue 34): a database or a role
    that does not exist, a refused password, a pg_hba.conf refusal, nothing listening. Never
    the password; the server's own words where they say more."""
    import psycopg

    text = str(e).strip()
    last = text.splitlines()[-1] if text else type(e).__name__
    fatal = re.search(r"FATAL:\s+(.*)", text)
    failed = re.search(r"failed: (.*)", text.splitlines()[0]) if text else None
    said = " ".join((fatal.group(1) if fatal else failed.group(1) if failed else last).split())
    w = _where(dsn)
    at = f"{w['host']}:{w['port']}"
    if re.search(r'database ".*" does not exist', said):
        return (f"database {w['dbname']!r} does not exist on {at}: create it (createdb -h {w['host']} -p {w['port']} "
                f"{w['dbname']}), then pgmem migrate; or name another database in PGMEM_DSN")
    if re.search(r'role ".*" does not exist', said):
        return (f"role {w['user']!r} does not exist on {at}: create it (createuser --login -P {w['user']}) or name "
                "another user in PGMEM_DSN")
    if "password authentication failed" in said or "no password supplied" in said:
        return (f"{at} refused the password of user {w['user']!r} (or no such role): check the user and password in "
                "PGMEM_DSN (or ~/.pgpass)")
    if "pg_hba.conf" in said or "is not permitted to log in" in said or "does not have CONNECT privilege" in said:
        return (f"{at} refused user {w['user']!r} on database {w['dbname']!r}: {mask_password(said, dsn)}: check "
                "PGMEM_DSN or ask the server's administrator")
    if "the database system is starting up" in said or "shutting down" in said:
        return f"the server at {at} is {said.split(' is ')[-1]}: try again in a moment"
    if isinstance(e, psycopg.ProgrammingError):
        return f"malformed DSN ({mask_password(dsn, dsn)}): {mask_password(last, dsn)}"
    return (f"cannot connect to {describe_dsn(dsn)}: {mask_password(said, dsn)}: is PostgreSQL running there? check "
            "PGMEM_DSN (or start the embedded cluster: pgmem db up)")


def require_pgmem(conn: Any, dsn: str) -> None:
    """A one-line error when pgmem is not installed in the database of ``conn`` (rather than
    a pool retrying a connection it cannot set up, or a missing function later)."""
    row = conn.execute("select to_regnamespace('pgmem') is not null, to_regtype('vector') is not null").fetchone()
    if not (row[0] and row[1]):
        raise not_installed(dsn)


def not_installed(dsn: str) -> SetupError:
    w = _where(dsn)
    return SetupError(f"pgmem is not installed in database {w['dbname']!r} on {w['host']}:{w['port']}: install it "
                      "with pgmem migrate (PGMEM_DSN pointing there, as its owner or a superuser)")


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
