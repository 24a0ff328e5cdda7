"""pg_auto_failover on one machine (issue 19, part 3): a monitor, a primary and a synchronous
secondary made by `pg_autoctl` (Debian's postgresql-15-auto-failover), pgmem installed on the
primary (pg_cron preloaded on both), a client on the formation's multi-host URI
(target_session_attrs=read-write). The primary's pg_autoctl and postmaster are SIGKILLed; the
monitor promotes the secondary by itself; the same client, retrying its events with their
event_key, finds every memory that was acknowledged and stores nothing twice.

The monitor's health-check timeouts are shortened (pgautofailover.* settings) so that the
failover takes seconds, not the default ~50 s. README, "Scaling out", has the same recipe.
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time

import psycopg
import pytest

from pgmem import migrate
from pgmem.client import MemoryClient
from scaleout_util import free_port, scratch_home, vec

PG_AUTOCTL = shutil.which("pg_autoctl") or "/usr/bin/pg_autoctl"
BIN = "/usr/lib/postgresql/15/bin"


class Formation:
    def __init__(self, home):
        self.home = home
        self.ports = {"monitor": free_port(), "node1": free_port(), "node2": free_port()}
        self.procs: dict[str, subprocess.Popen] = {}

    def env(self, node: str) -> dict:
        h = str(self.home)
        return {"PATH": f"{BIN}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": h, "LANG": "C.UTF-8",
                "XDG_CONFIG_HOME": f"{h}/cfg-{node}", "XDG_DATA_HOME": f"{h}/data-{node}",
                "XDG_RUNTIME_DIR": f"{h}/run-{node}"}

    def _cmd(self, args: list[str]) -> list[str]:
        return (["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []) + args

    def autoctl(self, node: str, *args: str, check: bool = True) -> str:
        p = subprocess.run(self._cmd([PG_AUTOCTL, *args]), env=self.env(node), capture_output=True, text=True,
                           timeout=180, cwd="/")
        if check and p.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args)}: {p.stderr[-1500:]}")
        return p.stdout

    def start(self, node: str, *args: str) -> None:
        log = open(self.home / f"{node}.log", "a")
        self.procs[node] = subprocess.Popen(self._cmd([PG_AUTOCTL, *args]), env=self.env(node), stdout=log,
                                            stderr=subprocess.STDOUT, cwd="/", start_new_session=True)

    def pgdata(self, node: str) -> str:
        return str(self.home / node)

    def monitor_uri(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.ports['monitor']}/pg_auto_failover?sslmode=disable"

    def dsn(self, node: str, db: str = "pgmem") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.ports[node]}/{db}"

    def uri(self) -> str:
        return (f"postgresql://postgres@127.0.0.1:{self.ports['node1']},127.0.0.1:{self.ports['node2']}/pgmem"
                f"?target_session_attrs=read-write&connect_timeout=3")

    def state(self) -> dict[str, tuple[str, str]]:
        with psycopg.connect(self.dsn("monitor", "pg_auto_failover"), autocommit=True) as c:
            return {r[0]: (r[1], r[2]) for r in c.execute(
                "select nodename, reportedstate::text, goalstate::text from pgautofailover.node")}

    def wait(self, pred, what: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if pred(self.state()):
                    return
            except psycopg.Error:
                pass
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}: {self.state()}")

    def create_node(self, node: str) -> None:
        self.start(node, "create", "postgres", "--pgdata", self.pgdata(node), "--pgport", str(self.ports[node]),
                   "--hostname", "127.0.0.1", "--name", node, "--auth", "trust", "--no-ssl", "--dbname", "pgmem",
                   "--monitor", self.monitor_uri(), "--run")

    def kill_tree(self, node: str) -> None:
        """SIGKILL the node's pg_autoctl processes and its postmaster (a machine dying)."""
        pm = int((self.home / node / "postmaster.pid").read_text().splitlines()[0])
        os.killpg(self.procs[node].pid, signal.SIGKILL)
        try:
            os.kill(pm, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stop_all(self) -> None:
        for p in self.procs.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        for node in ("node1", "node2", "monitor"):  # a postmaster its supervisor left behind
            pidfile = self.home / node / "postmaster.pid"
            if pidfile.exists():
                try:
                    os.kill(int(pidfile.read_text().splitlines()[0]), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass


def _restart_with_pg_cron(f: "Formation") -> None:
    """Restart node1 so that shared_preload_libraries takes effect. pg_autoctl supervises the
    server and may start it again itself while pg_ctl restarts it, and then pg_ctl's start
    fails (the port is taken): what counts is a server running with pg_cron preloaded, so each
    attempt ends by asking the server, and a failed pg_ctl is tried again (the CI run of
    2026-12-07 at 998af87 met the race once)."""
    for _ in range(3):
        # (output to a file: the server started by pg_ctl would keep a pipe open)
        subprocess.run(f._cmd([f"{BIN}/pg_ctl", "restart", "-D", f.pgdata("node1"), "-m", "fast", "-w",
                               "-l", str(f.home / "node1-restart.log")]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", timeout=120)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(f.dsn("node1", "postgres"), autocommit=True, connect_timeout=2) as c:
                    preloaded = c.execute("show shared_preload_libraries").fetchone()[0]
                if "pg_cron" in preloaded:
                    return
                break  # up, but from before the restart: restart again
            except psycopg.OperationalError:
                time.sleep(0.5)
    log = (f.home / "node1-restart.log")
    raise AssertionError("node1 did not come back with pg_cron preloaded: "
                         + (log.read_text()[-1500:] if log.exists() else "no pg_ctl log"))


@pytest.fixture(scope="module")
def formation():
    home = scratch_home("autofailover")
    home.mkdir(parents=True)
    if os.geteuid() == 0:
        pg = pwd.getpwnam("postgres")
        os.chown(home, pg.pw_uid, pg.pw_gid)
    f = Formation(home)
    try:
        f.autoctl("monitor", "create", "monitor", "--pgdata", f.pgdata("monitor"), "--pgport", str(f.ports["monitor"]),
                  "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl")
        f.start("monitor", "run", "--pgdata", f.pgdata("monitor"))
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(f.dsn("monitor", "pg_auto_failover"), autocommit=True, connect_timeout=2) as c:
                    # seconds, not the default ~50 s from failure to promotion
                    for k, v in (("health_check_period", "1000"), ("health_check_timeout", "1000"),
                                 ("health_check_retry_delay", "500"), ("node_considered_unhealthy_timeout", "3000"),
                                 ("primary_demote_timeout", "3000")):
                        c.execute(f"alter system set pgautofailover.{k} = {v}")
                    c.execute("select pg_reload_conf()")
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        f.create_node("node1")
        f.wait(lambda s: s.get("node1", ("",))[0] in ("single", "wait_primary", "primary"), "node1 to run as primary")
        # pgmem's requirements on every node (the secondary's base backup copies postgresql.conf)
        with open(f.home / "node1" / "postgresql.conf", "a") as conf:
            conf.write("\n# pgmem\nshared_preload_libraries = 'pg_cron'\ncron.database_name = 'pgmem'\n")
        _restart_with_pg_cron(f)
        migrate.upgrade(f.dsn("node1"))
        f.create_node("node2")
        # pg_basebackup waits for a spread checkpoint: make it immediate
        deadline = time.monotonic() + 120
        while f.state().get("node2", ("",))[0] != "secondary":
            with psycopg.connect(f.dsn("node1"), autocommit=True) as c:
                c.execute("checkpoint")
            assert time.monotonic() < deadline, f.state()
            time.sleep(1)
        f.wait(lambda s: s["node1"] == ("primary", "primary") and s["node2"] == ("secondary", "secondary"),
               "primary + secondary")
        yield f
    finally:
        f.stop_all()
        shutil.rmtree(home, ignore_errors=True)


def test_pg_auto_failover_promotes_the_secondary_nothing_lost(formation):
    f = formation
    with psycopg.connect(f.dsn("node1"), autocommit=True) as c:
        assert c.execute("show synchronous_standby_names").fetchone()[0].startswith("ANY 1")
        assert c.execute("show shared_preload_libraries").fetchone()[0] == "pg_cron"
    mem = MemoryClient(f.uri(), tenant="acme", embedder=None, retries=0, timeout=5)
    acked = {}
    for i in range(30):
        r = mem.remember(f"auto failover event {i}: crate {i} on pallet {i % 7}", embedding=vec(500 + i),
                         event_key=f"af-{i}")
        acked[f"af-{i}"] = r.id
    mem.close()
    f.kill_tree("node1")
    t0 = time.monotonic()
    f.wait(lambda s: s["node2"][0] in ("wait_primary", "primary"), "node2 to be promoted", timeout=120)
    took = time.monotonic() - t0
    # the same multi-host URI now reaches node2, the new primary
    with MemoryClient(f.uri(), tenant="acme", embedder=None) as mem2:
        with mem2.connection() as c:
            assert c.execute("select inet_server_port(), pg_is_in_recovery()").fetchone() == (f.ports["node2"], False)
        again = {f"af-{i}": mem2.remember(f"auto failover event {i}: crate {i} on pallet {i % 7}",
                                          embedding=vec(500 + i), event_key=f"af-{i}") for i in range(30)}
        assert {k: r.id for k, r in again.items()} == acked
        assert {r.decision for r in again.values()} == {"replayed"}
        assert mem2.remember("after the failover: pallet 9 is empty", embedding=vec(999)).decision == "stored"
    with psycopg.connect(f.dsn("node2"), autocommit=True) as c:
        assert c.execute("select count(*), count(distinct event_key) from pgmem.memories "
                         "where event_key like 'af-%%'").fetchone() == (30, 30)
    print(f"pg_auto_failover promoted node2 {took:.1f} s after the primary was killed")
