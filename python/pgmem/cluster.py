"""The embedded default: a private PostgreSQL cluster under ``.pgmem/``.

``pgmem db up`` creates (once) and starts a cluster with its own port and a unix socket
inside the project, with pg_cron preloaded, pgvector and plpython3u available, a ``pgmem``
database and the migrations applied. PostgreSQL refuses to run as root, so when uid is 0
every server command runs as the ``postgres`` user (``runuser -u postgres``).

Authentication: unix socket = trust (the socket directory is private), TCP on 127.0.0.1 =
scram-sha-256 with generated passwords kept in ``.pgmem/password`` (the superuser ``pgmem``,
for migrations and ``pgmem db psql``) and ``.pgmem/owner_password`` (``pgmem_owner``, the
non-superuser owner of pgmem's objects: the client, the CLI, the worker and pg_cron jobs
connect as it). Both files are mode 0600; passwords are shown only when asked for
(``pgmem db status --show-password``).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from .errors import ClusterError

PG_MAJOR = os.environ.get("PGMEM_PG_MAJOR", "15")
DEFAULT_PORT = 54329
SUPERUSER = "pgmem"
OWNER = "pgmem_owner"  # created by migration 0004; the embedded cluster gives it a login


def bindir() -> Path:
    """Directory of initdb/pg_ctl/postgres for the PostgreSQL major version pgmem uses."""
    env = os.environ.get("PGMEM_PG_BINDIR")
    candidates = [Path(env)] if env else []
    candidates.append(Path(f"/usr/lib/postgresql/{PG_MAJOR}/bin"))
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    for c in candidates:
        if (c / "initdb").exists() and (c / "pg_ctl").exists():
            return c
    raise ClusterError(
        f"PostgreSQL {PG_MAJOR} server binaries not found (looked in "
        f"{', '.join(str(c) for c in candidates)}); run 'make setup' or install postgresql-{PG_MAJOR}"
    )


def _running_as_root() -> bool:
    return os.geteuid() == 0


def _postgres_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise ClusterError(
            "running as root, but there is no 'postgres' user to run the server as "
            "(initdb refuses root); install postgresql-15 or run pgmem as a normal user"
        ) from None


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


@dataclass
class Cluster:
    """A private cluster rooted at ``home`` (``home/data``, ``home/run``, ``home/log``)."""

    home: Path
    port: int = DEFAULT_PORT
    dbname: str = "pgmem"
    cron_database: str = "pgmem"
    settings: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = Path(self.home).resolve()

    # ------------------------------------------------------------------ paths
    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def logfile(self) -> Path:
        return self.home / "log" / "postgres.log"

    @property
    def password_file(self) -> Path:
        return self.home / "password"

    @property
    def socket_dir(self) -> Path:
        """``home/run`` unless the socket path would exceed the 107-byte unix limit."""
        run = self.home / "run"
        if len(str(run / f".s.PGSQL.{self.port}")) < 100:
            return run
        digest = hashlib.sha1(str(self.home).encode()).hexdigest()[:10]
        return Path(f"/tmp/pgmem-{digest}")

    @property
    def owner_password_file(self) -> Path:
        return self.home / "owner_password"

    @property
    def password(self) -> str:
        try:
            return self.password_file.read_text().strip()
        except FileNotFoundError:
            raise ClusterError(f"no cluster at {self.home}: run 'pgmem db up' first") from None

    def dsn(self, dbname: str | None = None, *, tcp: bool = True, mask: bool = False) -> str:
        """The superuser's DSN (migrations, administration)."""
        db = dbname or self.dbname
        if tcp:
            pw = "****" if mask else quote(self.password, safe="")
            return f"postgresql://{SUPERUSER}:{pw}@127.0.0.1:{self.port}/{db}"
        return f"postgresql://{SUPERUSER}@/{db}?host={quote(str(self.socket_dir), safe='')}&port={self.port}"

    def has_owner_login(self) -> bool:
        return self.owner_password_file.exists()

    def owner_dsn(self, dbname: str | None = None, *, mask: bool = False) -> str:
        """The owner role's DSN: what the client, the worker and the jobs use (not a superuser)."""
        try:
            pw = self.owner_password_file.read_text().strip()
        except FileNotFoundError:
            raise ClusterError(f"the cluster at {self.home} has no owner login yet: run 'pgmem db up'") from None
        return f"postgresql://{OWNER}:{'****' if mask else quote(pw, safe='')}@127.0.0.1:{self.port}/{dbname or self.dbname}"

    def ensure_owner_login(self, dbname: str | None = None) -> None:
        """Give pgmem_owner (made by the migrations) a login with its own password, and what
        scheduling pg_cron jobs as it needs (cron.database_name is a superuser-only setting)."""
        import psycopg
        from psycopg import sql

        if not self.owner_password_file.exists():
            self.owner_password_file.write_text(secrets.token_urlsafe(24) + "\n")
        os.chmod(self.owner_password_file, 0o600)
        pw = self.owner_password_file.read_text().strip()
        with psycopg.connect(self.dsn(dbname), autocommit=True) as conn:
            conn.execute(sql.SQL("alter role {} login password {}").format(sql.Identifier(OWNER), sql.Literal(pw)))
            conn.execute(sql.SQL("grant pg_read_all_settings to {}").format(sql.Identifier(OWNER)))
            cron = conn.execute("select to_regnamespace('cron') is not null").fetchone()
            if cron and cron[0]:
                # pg_cron runs the jobs as the role that scheduled them: the owner, not the superuser
                conn.execute(sql.SQL("grant usage on schema cron to {}").format(sql.Identifier(OWNER)))
                conn.execute(sql.SQL("grant execute on all functions in schema cron to {}").format(sql.Identifier(OWNER)))

    def ensure_jobs_scheduled(self, dbname: str | None = None) -> int:
        """Schedule pgmem's jobs with pg_cron for the cluster's database (as the owner: pg_cron
        runs a job as the role that scheduled it) when none is scheduled yet (issue 32: without
        them uses are not folded and clusters never form). Returns how many were scheduled (0
        when some already are, or pg_cron is not in that database)."""
        import psycopg

        db = dbname or self.dbname
        if db != self.cron_database:
            return 0
        with psycopg.connect(self.owner_dsn(db), autocommit=True) as conn:
            if not conn.execute("select to_regnamespace('cron') is not null").fetchone()[0]:
                return 0
            n = conn.execute("select count(*) from cron.job where command like '%pgmem.%' "
                             "and database = current_database()").fetchone()[0]
            if n:
                return 0
            return len(conn.execute("select * from pgmem.schedule_jobs()").fetchall())

    # -------------------------------------------------------------- commands
    def _run(self, args: Sequence[str | os.PathLike[str] | int], *, check: bool = True,
             timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [str(a) for a in args]
        if _running_as_root():
            _postgres_user()
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd="/", timeout=timeout)
        if check and proc.returncode != 0:
            raise ClusterError(
                f"{Path(str(args[0])).name} failed (exit {proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()[-1500:]}"
            )
        return proc

    def _prepare_dirs(self) -> None:
        for d in (self.home, self.data.parent, self.logfile.parent, self.socket_dir):
            d.mkdir(parents=True, exist_ok=True)
        if _running_as_root():
            pg = _postgres_user()
            for d in (self.data, self.logfile.parent, self.socket_dir):
                d.mkdir(parents=True, exist_ok=True)
                os.chown(d, pg.pw_uid, pg.pw_gid)
            if self.logfile.exists():
                os.chown(self.logfile, pg.pw_uid, pg.pw_gid)
            probe = self._run(["test", "-w", self.data], check=False)
            if probe.returncode != 0:
                raise ClusterError(
                    f"the postgres user cannot write {self.data} (a parent directory is not "
                    f"traversable by it); set PGMEM_HOME to a directory such as /var/lib/pgmem"
                )
        os.chmod(self.socket_dir, 0o700)

    def initialized(self) -> bool:
        return (self.data / "PG_VERSION").exists()

    def init(self) -> bool:
        """Create the cluster if it does not exist. Returns True if it was created."""
        self._prepare_dirs()
        if self.initialized():
            self._write_conf()
            return False
        if not self.password_file.exists():
            self.password_file.write_text(secrets.token_urlsafe(24) + "\n")
        os.chmod(self.password_file, 0o600)
        pwfile = self.home / "run-initdb-pw"
        shutil.copy(self.password_file, pwfile)
        if _running_as_root():
            pg = _postgres_user()
            os.chown(pwfile, pg.pw_uid, pg.pw_gid)
        try:
            self._run(
                [bindir() / "initdb", "-D", self.data, "-U", SUPERUSER, f"--pwfile={pwfile}",
                 "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
                 "--locale=C.UTF-8", "--no-instructions"],
                timeout=300,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        self._write_conf()
        return True

    def conf(self) -> dict[str, str]:
        base = {
            "port": str(self.port),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.socket_dir}'",
            "shared_preload_libraries": "'pg_cron'",
            "cron.database_name": f"'{self.cron_database}'",
            # run jobs in background workers: no libpq connection, so no password needed
            "cron.use_background_workers": "on",
            "max_worker_processes": "32",
            "shared_buffers": os.environ.get("PGMEM_SHARED_BUFFERS", "1GB"),
            "work_mem": "'64MB'",
            "maintenance_work_mem": "'1GB'",
            "max_parallel_maintenance_workers": "2",
            "effective_cache_size": "'8GB'",
            "random_page_cost": "1.1",
            "jit": "off",
            "log_line_prefix": "'%m [%p] %q%u@%d '",
        }
        base.update(self.settings)
        return base

    def _write_conf(self) -> None:
        text = "# written by pgmem (pgmem/cluster.py) on every start; edit PGMEM_* settings instead\n"
        text += "".join(f"{k} = {v}\n" for k, v in self.conf().items())
        target = self.data / "pgmem.conf"
        tmp = self.home / "pgmem.conf.tmp"
        tmp.write_text(text)
        main = self.data / "postgresql.conf"
        if _running_as_root():
            pg = _postgres_user()
            os.chown(tmp, pg.pw_uid, pg.pw_gid)
        shutil.move(tmp, target)
        if "include 'pgmem.conf'" not in main.read_text():
            with main.open("a") as f:
                f.write("\ninclude 'pgmem.conf'\n")

    def running(self) -> bool:
        if not self.initialized():
            return False
        return self._run([bindir() / "pg_ctl", "status", "-D", self.data], check=False).returncode == 0

    def start(self) -> bool:
        """Start the server if it is not running. Returns True if it was started."""
        if not self.initialized():
            raise ClusterError(f"no cluster at {self.data}: run 'pgmem db up'")
        self._prepare_dirs()
        self._write_conf()
        if self.running():
            return False
        if port_in_use(self.port):
            raise ClusterError(
                f"port {self.port} on 127.0.0.1 is in use by another process; "
                f"set PGMEM_PORT to a free port (or stop that process)"
            )
        proc = self._run(
            [bindir() / "pg_ctl", "start", "-D", self.data, "-l", self.logfile, "-w", "-t", "60"],
            check=False, timeout=90,
        )
        if proc.returncode != 0:
            raise ClusterError(
                f"the server did not start (port {self.port}, data {self.data}); "
                f"last lines of {self.logfile}:\n{self.tail_log(15)}"
            )
        return True

    def stop(self, mode: str = "fast") -> bool:
        if not self.running():
            return False
        self._run([bindir() / "pg_ctl", "stop", "-D", self.data, "-m", mode, "-w", "-t", "60"])
        return True

    def tail_log(self, n: int = 20) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return "(no log)"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None

    def ensure_database(self, dbname: str | None = None, *, tenant: str | None = "default") -> bool:
        """Create ``dbname`` if missing. The embedded database defaults ``pgmem.tenant`` so
        that psql sessions work without a SET; see "Tenancy" in the README."""
        import psycopg

        db = dbname or self.dbname
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            exists = conn.execute("select 1 from pg_database where datname = %s", (db,)).fetchone()
            if not exists:
                conn.execute(f'create database "{db}"')
            if tenant is not None:
                conn.execute(f"alter database \"{db}\" set pgmem.tenant = '{tenant}'")
        return not exists

    def wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=3):
                    return
            except psycopg.OperationalError as e:
                if time.monotonic() > deadline:
                    raise ClusterError(f"server on port {self.port} not accepting connections: {e}") from None
                time.sleep(0.2)

    def info(self, *, show_password: bool = False) -> dict:
        """Where the cluster is and how to connect; passwords masked unless ``show_password``."""
        mask = not show_password
        return {
            "home": str(self.home), "data": str(self.data), "port": self.port,
            "socket_dir": str(self.socket_dir), "running": self.running(),
            "dsn": self.owner_dsn(mask=mask) if self.has_owner_login() else None,
            "admin_dsn": self.dsn(mask=mask) if self.password_file.exists() else None,
            "log": str(self.logfile),
        }


def default_cluster() -> Cluster:
    """The embedded cluster: ``PGMEM_HOME`` (default ``.pgmem``), port ``PGMEM_PORT``, else the
    port it was created with (``.pgmem/cluster.json``), else 54329."""
    from .config import home, int_env

    h = home()
    port = DEFAULT_PORT
    try:
        port = int(json.loads((h / "cluster.json").read_text())["port"])
    except (FileNotFoundError, ValueError, KeyError):
        pass
    c = Cluster(h, port=int_env("PGMEM_PORT", port))
    return c


def save_state(c: Cluster) -> None:
    (c.home / "cluster.json").write_text(json.dumps({"port": c.port, "dbname": c.dbname}) + "\n")
