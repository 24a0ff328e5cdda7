"""Read replicas and failover of the embedded cluster, on PostgreSQL's own streaming replication.

``pgmem db replica up`` takes a base backup of the embedded cluster (``pg_basebackup -X stream``)
into ``<home>/replica/`` and starts it as a hot standby streaming from the primary
(``standby.signal`` + ``primary_conninfo`` with ``application_name=pgmem_replica``). With
``--sync`` the primary waits for the standby before a commit returns
(``synchronous_standby_names``, set with ALTER SYSTEM so that it survives restarts): a
``remember`` that returned is then on the standby too, which is what failover without loss
needs (``promote``). A session that needs read-your-writes from the replica sets
``synchronous_commit = remote_apply`` for its writes (the client's ``read_your_writes=True``).

Nothing here is a replication layer of pgmem's own: it is pg_basebackup, streaming replication,
pg_ctl promote, and the views PostgreSQL already has (pg_stat_replication,
pg_last_wal_replay_lsn()), shown by ``pgmem.replication_status`` (sql/360_replication.sql).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

from .cluster import Cluster, bindir, port_in_use
from .errors import ClusterError

APPLICATION_NAME = "pgmem_replica"
DEFAULT_REPLICA_PORT = 54360  # any free port; `pgmem db replica up --port`


def replica_home(primary: Cluster, name: str = "replica") -> Path:
    return primary.home / name


def replica_cluster(primary: Cluster, port: int | None = None, name: str = "replica",
                    settings: dict[str, str] | None = None, home: Path | None = None) -> Cluster:
    """The standby's Cluster object: its own home, port and socket; the primary's passwords."""
    home = Path(home) if home is not None else replica_home(primary, name)
    if port is None:
        try:
            port = int(json.loads((home / "cluster.json").read_text())["port"])
        except (FileNotFoundError, ValueError, KeyError):
            port = DEFAULT_REPLICA_PORT
    conf = {
        "hot_standby": "on",
        "hot_standby_feedback": "on",  # no query conflicts cancelling searches on the standby
        # where writes go: read by pgmem._standby_refuses() to name the primary in its error
        "pgmem.primary": f"'host=127.0.0.1 port={primary.port} dbname={primary.dbname}'",
        "primary_conninfo": (f"'host={primary.socket_dir} port={primary.port} user=pgmem "
                             f"application_name={name if name != 'replica' else APPLICATION_NAME}'"),
    }
    conf.update(primary.settings)
    conf.update(settings or {})
    return Cluster(home, port=port, dbname=primary.dbname, cron_database=primary.cron_database, settings=conf)


def _copy_secret(src: Path, dst: Path) -> None:
    if src.exists():
        shutil.copy(src, dst)
        os.chmod(dst, 0o600)


def replica_up(primary: Cluster, port: int | None = None, *, sync: bool = False, name: str = "replica",
               settings: dict[str, str] | None = None, home: Path | None = None) -> tuple[Cluster, bool]:
    """Create (base backup, once) and start a hot standby of ``primary``. Returns the standby's
    Cluster and whether it was created now. ``sync``: the primary waits for it at commit."""
    if not primary.running():
        raise ClusterError(f"the primary (port {primary.port}) is not running: run 'pgmem db up' first")
    rep = replica_cluster(primary, port, name, settings, home)
    created = False
    if not rep.initialized():
        if port_in_use(rep.port):
            raise ClusterError(f"port {rep.port} is in use: choose another with --port")
        rep._prepare_dirs()
        if rep.data.exists() and any(rep.data.iterdir()):
            raise ClusterError(f"{rep.data} is not empty but holds no cluster: remove it first")
        # the replication connection: the superuser over the primary's private socket (trust)
        rep._run([bindir() / "pg_basebackup", "-D", rep.data, "-h", primary.socket_dir, "-p", primary.port,
                  "-U", "pgmem", "-X", "stream", "--checkpoint=fast", "--no-password"], timeout=600)
        rep._run(["chmod", "0700", rep.data])
        rep._run(["touch", rep.data / "standby.signal"])
        # the standby reads its own postgresql.auto.conf (copied): drop the primary's sync setting
        auto = rep.data / "postgresql.auto.conf"
        text = "".join(line for line in auto.read_text().splitlines(keepends=True)
                       if not line.startswith("synchronous_standby_names"))
        tmp = rep.home / "auto.conf.tmp"
        tmp.write_text(text)
        rep._run(["cp", tmp, auto])
        tmp.unlink()
        _copy_secret(primary.password_file, rep.password_file)
        _copy_secret(primary.owner_password_file, rep.owner_password_file)
        created = True
    rep.start()
    (rep.home / "cluster.json").write_text(json.dumps({"port": rep.port, "role": "standby",
                                                       "primary_port": primary.port}) + "\n")
    rep.wait_ready(60)
    if sync:
        set_synchronous(primary, [name if name != "replica" else APPLICATION_NAME])
    return rep, created


def set_synchronous(primary: Cluster, standby_names: list[str] | None) -> None:
    """Make commits on ``primary`` wait for the named standbys (None/[]: asynchronous again)."""
    import psycopg

    value = ", ".join(f'"{n}"' for n in standby_names) if standby_names else ""
    with psycopg.connect(primary.dsn(), autocommit=True) as conn:
        if value:
            conn.execute(f"alter system set synchronous_standby_names = '{value}'")
        else:
            conn.execute("alter system reset synchronous_standby_names")
        conn.execute("select pg_reload_conf()")


def wait_streaming(primary: Cluster, timeout: float = 60.0, application_name: str = APPLICATION_NAME) -> dict:
    """Wait until the standby streams from the primary (pg_stat_replication state 'streaming')."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(primary.dsn(), autocommit=True) as conn:
        while True:
            row = conn.execute("select state, sync_state from pg_stat_replication where application_name = %s",
                               (application_name,)).fetchone()
            if row and row[0] == "streaming":
                return {"state": row[0], "sync_state": row[1]}
            if time.monotonic() > deadline:
                raise ClusterError(f"standby {application_name!r} is not streaming from port {primary.port} "
                                   f"after {timeout:.0f}s (state {row[0] if row else 'absent'})")
            time.sleep(0.2)


def promote(standby: Cluster, timeout: float = 60.0) -> None:
    """Make the standby the primary (pg_ctl promote, waiting until it accepts writes)."""
    standby._run([bindir() / "pg_ctl", "promote", "-D", standby.data, "-w", "-t", str(int(timeout))], timeout=timeout + 30)
    state = json.loads((standby.home / "cluster.json").read_text()) if (standby.home / "cluster.json").exists() else {}
    state.update({"port": standby.port, "role": "primary"})
    (standby.home / "cluster.json").write_text(json.dumps(state) + "\n")


def kill_primary(primary: Cluster) -> int:
    """SIGKILL the primary's postmaster (a crash, not a shutdown); returns the pid killed. Its
    backends notice the postmaster's death and exit; the data directory is left as a crash leaves it."""
    pid = primary.postmaster_pid()
    if pid is None:
        raise ClusterError(f"no postmaster.pid in {primary.data}: the primary is not running")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        time.sleep(0.05)
    raise ClusterError(f"postmaster {pid} still alive 30 s after SIGKILL")


def status(primary: Cluster, name: str = "replica") -> dict:
    """Replication as both sides see it: the primary's pg_stat_replication rows and, when the
    standby runs, its replay position and delay (``pgmem.replication_status`` on each)."""
    import psycopg
    from psycopg.rows import dict_row

    out: dict = {"primary": None, "standby": None}
    rep = replica_cluster(primary, None, name)
    for key, c in (("primary", primary), ("standby", rep)):
        if not c.initialized() or not c.running():
            continue
        try:
            with psycopg.connect(c.dsn(), autocommit=True, connect_timeout=5, row_factory=dict_row) as conn:
                rows = conn.execute("select * from pgmem.replication_status").fetchall()
        except psycopg.Error as e:
            out[key] = {"port": c.port, "error": str(e).strip().splitlines()[0]}
            continue
        out[key] = {"port": c.port, "rows": [{k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
                                              for k, v in r.items()} for r in rows]}
    return out
