"""Read replicas (issue 19, part 1): `pgmem db replica up` makes a hot standby of a cluster by
base backup + streaming replication; the client sends read-only calls to read_dsn; remote_apply
gives read-your-writes; a write (touch) on the standby fails naming the primary; replication lag
shows in pgmem.replication_status and in `pgmem db status`.

One synchronous primary/standby pair for the module (private clusters under .pgmem/scale-*); the
standby is made by the command `pgmem db replica up --sync` (a subprocess), and `db replica
status` / `down` / `up` run as commands too.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from conftest import ROOT
from pgmem import replica
from pgmem.errors import ServerUnavailable
from pgmem.client import MemoryClient
from scaleout_util import destroy, new_cluster, scratch_home, vec


@pytest.fixture(scope="module")
def pair():
    primary = new_cluster(scratch_home("replica"))
    standby = None
    try:
        port = _port()
        out = pgmem_cli(primary, "db", "replica", "up", "--sync", "--port", str(port)).stdout
        assert f"hot standby created and started on port {port} (streaming, sync)" in out, out
        standby = replica.replica_cluster(primary, port)
        assert standby.running()
        with psycopg.connect(primary.dsn(), autocommit=True) as c:
            c.execute("select pgmem.grant_tenant('pgmem_owner', 'acme')")
        yield primary, standby
    finally:
        destroy(*(c for c in (standby, primary) if c is not None))


def pgmem_cli(primary, *args: str) -> subprocess.CompletedProcess:
    """`pgmem <args>` as a command, for the primary as the embedded cluster (PGMEM_HOME/PORT)."""
    env = {**os.environ, "PGMEM_HOME": str(primary.home), "PGMEM_PORT": str(primary.port),
           "PYTHONPATH": str(ROOT / "python"), "PGMEM_SHARED_BUFFERS": "128MB"}
    out = subprocess.run([sys.executable, "-m", "pgmem.cli", *args], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, f"pgmem {' '.join(args)}: {out.stderr}"
    return out


def _port() -> int:
    from scaleout_util import free_port

    return free_port()


def sql(cluster, q, params=(), tenant="acme"):
    with psycopg.connect(cluster.dsn(), autocommit=True) as c:
        c.execute("select set_config('pgmem.tenant', %s, false)", (tenant,))
        return c.execute(q, params).fetchall()


def client(pair, **kw) -> MemoryClient:
    primary, standby = pair
    return MemoryClient(primary.owner_dsn(), tenant="acme", embedder=None, read_dsn=standby.owner_dsn(), **kw)


def wait_until(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_standby_is_a_streaming_hot_standby(pair):
    primary, standby = pair
    assert sql(standby, "select pg_is_in_recovery()")[0][0] is True
    assert sql(primary, "select pg_is_in_recovery()")[0][0] is False
    rows = sql(primary, "select application_name, state, sync_state from pg_stat_replication")
    assert rows == [("pgmem_replica", "streaming", "sync")]


def test_memory_found_on_standby_after_replay_and_reads_go_there(pair):
    primary, standby = pair
    with client(pair) as mem:
        # replay paused: the standby has the WAL (synchronous commit waited for its flush) but
        # has not applied it; a read routed to the standby cannot see the new memory yet
        sql(standby, "select pg_wal_replay_pause()")
        try:
            r = mem.remember("the lighthouse keeper paints the rail blue", embedding=vec(1), who="user")
            assert r.decision == "stored"
            assert [h.id for h in mem.search("lighthouse rail", embedding=vec(1), k=5)] == []
            assert mem.get(r.id) is None
            # the primary has it: the write went there
            assert sql(primary, "select count(*) from pgmem.memories where id = %s", (r.id,))[0][0] == 1
        finally:
            sql(standby, "select pg_wal_replay_resume()")
        assert wait_until(lambda: any(h.id == r.id for h in mem.search("lighthouse rail", embedding=vec(1), k=5)))
        assert mem.get(r.id)["content"] == "the lighthouse keeper paints the rail blue"
        with mem.connection(read=True) as c:
            assert c.execute("select pg_is_in_recovery()").fetchone()[0] is True
        with mem.connection() as c:
            assert c.execute("select pg_is_in_recovery()").fetchone()[0] is False


def test_remote_apply_gives_read_your_writes(pair):
    primary, standby = pair
    with client(pair, read_your_writes=True) as mem:
        with mem.connection() as c:
            assert c.execute("show synchronous_commit").fetchone()[0] == "remote_apply"
        # the commit waits for the standby to APPLY it: with replay paused it does not return
        sql(standby, "select pg_wal_replay_pause()")
        done = {}
        t = threading.Thread(target=lambda: done.setdefault("r", mem.remember("ryw: the ferry leaves at nine",
                                                                              embedding=vec(2))))
        try:
            t.start()
            t.join(1.5)
            assert t.is_alive(), "remote_apply returned while the standby's replay was paused"
        finally:
            sql(standby, "select pg_wal_replay_resume()")
        t.join(20)
        assert done["r"].decision == "stored"
        # ... and once it returned, the very next read on the standby sees it, every time
        for i in range(10):
            r = mem.remember(f"ryw memory number {i} about kites", embedding=vec(100 + i))
            assert mem.get(r.id) is not None, f"write {i} not visible on the standby right after commit"


def test_touch_on_standby_names_the_primary(pair):
    primary, standby = pair
    with client(pair) as mem:
        r = mem.remember("the orchard gate squeaks in the wind", embedding=vec(3))
        assert wait_until(lambda: mem.get(r.id) is not None)
        with psycopg.connect(standby.owner_dsn(), autocommit=True) as c:
            c.execute("set pgmem.tenant = 'acme'")
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as ei:
                c.execute("select * from pgmem.search('orchard gate', touch => true)")
            msg = ei.value.diag.message_primary
            assert "read-only hot standby" in msg and f"port={primary.port}" in msg, msg
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction, match="send it to the primary"):
                c.execute("select pgmem.touch(array[%s]::bigint[])", (r.id,))
            # without touch the same read works on the standby
            assert c.execute("select count(*) from pgmem.search('orchard gate')").fetchone()[0] >= 1
        # the client sends search(touch=True) to the primary: it works and counts the access
        hits = mem.search("orchard gate", embedding=vec(3), k=3, touch=True)
        assert r.id in [h.id for h in hits]
        assert sql(primary, "select access_count from pgmem.memories where id = %s", (r.id,))[0][0] == 1


def test_replication_lag_in_view_and_db_status(pair):
    primary, standby = pair
    rows = sql(primary, "select role, standby, state, sync_state, lag_bytes from pgmem.replication_status")
    assert rows and rows[0][:4] == ("primary", "pgmem_replica", "streaming", "sync")
    sql(standby, "select pg_wal_replay_pause()")
    try:
        with client(pair) as mem:
            mem.remember("lag: the baker opens at six " + "x" * 2000, embedding=vec(4))
        lag = sql(standby, "select role, lag_bytes, replay_lag_s from pgmem.replication_status")
        assert lag[0][0] == "standby" and lag[0][1] > 0 and lag[0][2] > 0, lag
        out = pgmem_cli(primary, "db", "status")
        assert "standby: pgmem_replica streaming (sync), behind by" in out.stdout, out.stdout
        out = pgmem_cli(primary, "db", "replica", "status")
        assert "received but not replayed" in out.stdout, out.stdout
    finally:
        sql(standby, "select pg_wal_replay_resume()")
    assert wait_until(lambda: sql(standby, "select lag_bytes from pgmem.replication_status")[0][0] == 0)


def test_async_client_reads_on_the_standby_too(pair):
    import asyncio

    from pgmem.client import AsyncMemoryClient

    primary, standby = pair

    async def go():
        async with AsyncMemoryClient(primary.owner_dsn(), tenant="acme", embedder=None,
                                     read_dsn=standby.owner_dsn(), read_your_writes=True) as mem:
            r = await mem.remember("async: the canal boat is green", embedding=vec(5))
            assert r.decision == "stored"
            assert (await mem.get(r.id))["content"] == "async: the canal boat is green"  # remote_apply: at once
            pool = await mem._get_read_pool()
            async with pool.connection() as c:
                assert (await (await c.execute("select pg_is_in_recovery()")).fetchone())[0] is True
            wpool = await mem._get_pool()
            async with wpool.connection() as c:
                assert (await (await c.execute("show synchronous_commit")).fetchone())[0] == "remote_apply"

    asyncio.run(go())


def test_layered_reads_go_to_the_standby(pair):
    """profile, fact_history, conversation_state, conversation_threads, thread_messages and
    search_insights are read-only (sql/6xx: STABLE SQL, no touch): the client sends them to
    read_dsn. Proof 1: with replay paused, profile() shows the standby's (older) facts, not the
    primary's. Proof 2: a client whose primary is unreachable still answers all six."""
    from pgmem.client import READ_ONLY_CALLS

    primary, standby = pair
    layered = {"profile", "fact_history", "conversation_state", "conversation_threads", "thread_messages",
               "search_insights"}
    assert layered <= READ_ONLY_CALLS
    # none of them may write: every one is declared non-volatile (a STABLE SQL function cannot INSERT/UPDATE)
    vol = dict(sql(primary, "select proname, provolatile from pg_proc where pronamespace = 'pgmem'::regnamespace"
                            " and proname = any(%s)", (sorted(layered),)))
    assert set(vol) == layered and set(vol.values()) == {"s"}, vol
    with client(pair) as mem:
        mem.set_fact("ulla", "city", "Oslo")
        assert wait_until(lambda: mem.profile("ulla") == {"city": "Oslo"})
        sql(standby, "select pg_wal_replay_pause()")
        try:
            mem.set_fact("ulla", "city", "Bergen")  # committed on the primary, not applied on the standby
            assert sql(primary, "select value from pgmem.profile('ulla')")[0][0] == "Bergen"
            assert mem.profile("ulla") == {"city": "Oslo"}  # the standby answered
            assert [h["value"] for h in mem.fact_history("ulla", "city")] == ["Oslo"]
        finally:
            sql(standby, "select pg_wal_replay_resume()")
        assert wait_until(lambda: mem.profile("ulla") == {"city": "Bergen"})
    dead = primary.owner_dsn().replace(f":{primary.port}/", f":{_port()}/")  # nothing listens there
    assert dead != primary.owner_dsn()
    with MemoryClient(dead, tenant="acme", embedder=None, read_dsn=standby.owner_dsn(), retries=0, timeout=5) as mem:
        assert mem.profile("ulla") == {"city": "Bergen"}
        assert {h["value"] for h in mem.fact_history("ulla", "city")} == {"Oslo", "Bergen"}
        assert mem.conversation_state("no-such-conversation") is None
        assert mem.conversation_threads("no-such-conversation") == []
        assert mem.call("thread_messages", thread_id=0) == []
        assert mem.search_insights("lighthouse", embedding=vec(9)) == []
        with pytest.raises(ServerUnavailable):  # ... while a write has nowhere to go
            mem.remember("nowhere to go", embedding=vec(10))


def test_db_replica_down_and_up_as_commands(pair):
    """`pgmem db replica down` stops the standby and makes the primary asynchronous again (its
    commits would wait for a stopped synchronous standby); `db replica up --sync` starts the same
    standby again (no new base backup), which catches up with what was written meanwhile."""
    primary, standby = pair
    out = pgmem_cli(primary, "db", "replica", "down").stdout
    assert out.strip() == "stopped" and not standby.running(), out
    assert sql(primary, "show synchronous_standby_names") == [("",)]
    out = pgmem_cli(primary, "db", "replica", "status").stdout
    assert "standby: not running" in out and "primary (port" in out, out
    with client(pair) as mem:  # a write does not hang without the standby
        r = mem.remember("written while the standby was down", embedding=vec(11))
    out = pgmem_cli(primary, "db", "replica", "up", "--sync").stdout
    assert f"hot standby running on port {standby.port} (streaming, sync)" in out, out
    assert sql(primary, "select sync_state from pg_stat_replication") == [("sync",)]
    assert wait_until(lambda: sql(standby, "select count(*) from pgmem.memories where id = %s", (r.id,))[0][0] == 1)
