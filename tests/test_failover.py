"""Failover without loss (issue 19, part 3): a primary with a synchronous standby is killed with
SIGKILL in the middle of a stream of `remember` calls; the standby is promoted (pg_ctl promote);
every remember that returned before the kill is on the new primary with the same id, a retry of
every event with its event_key stores nothing twice, and the embedding queue, the job state
(job_runs, job_state) and the pg_cron schedule carry on there.

One primary/standby pair for the module (private clusters under .pgmem/scale-*).
"""
from __future__ import annotations

import threading
import time

import psycopg
import pytest

from pgmem import replica
from pgmem.client import MemoryClient
from pgmem.worker import EmbeddingWorker
from scaleout_util import HashEmbedder, destroy, free_port, new_cluster, scratch_home, vec

TENANT = "acme"


@pytest.fixture(scope="module")
def pair():
    primary = new_cluster(scratch_home("failover"))
    standby = None
    try:
        standby, _ = replica.replica_up(primary, port=free_port(), sync=True)
        replica.wait_streaming(primary)
        yield primary, standby
    finally:
        destroy(*(c for c in (standby, primary) if c is not None))


def rows(dsn, q, params=()):
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as c:
        c.execute("select set_config('pgmem.tenant', %s, false)", (TENANT,))
        return c.execute(q, params).fetchall()


def event(i: int) -> dict:
    # every 4th event without an embedding: it waits in the embedding queue for the worker
    return {"content": f"failover event {i}: the courier {i * 7919 % 10007} left parcel {i} at dock {i % 13}",
            "embedding": None if i % 4 == 0 else vec(10_000 + i), "event_key": f"ev-{i:05d}"}


def remember(mem: MemoryClient, i: int):
    ev = event(i)
    return mem.remember(ev["content"], embedding=ev["embedding"], embed=False, event_key=ev["event_key"], who="user")


def test_sigkill_primary_promote_standby_nothing_lost_nothing_twice(pair):
    primary, standby = pair
    assert rows(primary.dsn(), "show synchronous_standby_names")[0][0] == '"pgmem_replica"'
    # job state before the crash: a schedule in pg_cron, a finished merge run, a job_state cursor
    rows(primary.dsn(), "select count(*) from pgmem.schedule_jobs()")
    mem = MemoryClient(primary.owner_dsn(), tenant=TENANT, embedder=None, retries=0, timeout=5)
    for i in range(40):
        remember(mem, i)
    with psycopg.connect(primary.dsn(), autocommit=True) as c:
        c.execute("set pgmem.tenant = 'acme'")
        c.execute("call pgmem.run_job('merge', '{\"batch\": 10}', 1)")  # one batch: leaves a cursor
    before_jobs = rows(primary.dsn(), "select id, job, status from pgmem.job_runs order by id")
    before_state = rows(primary.dsn(), "select tenant, job, cursor_at, cursor_id from pgmem.job_state order by 1, 2")
    before_cron = rows(primary.dsn(), "select jobname, schedule, command from cron.job order by jobname")
    assert before_jobs and before_cron

    # a writer remembers events 40, 41, ... until the server disappears under it
    returned: dict[str, int] = {f"ev-{i:05d}": None for i in range(40)}
    for k in list(returned):
        returned[k] = rows(primary.dsn(), "select id from pgmem.memories where event_key = %s", (k,))[0][0]
    failed: list[int] = []
    stop = threading.Event()

    def writer():
        i = 40
        while not stop.is_set():
            try:
                r = remember(mem, i)
                returned[f"ev-{i:05d}"] = r.id
            except Exception:
                failed.append(i)  # the call in flight when the primary died
                return
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    deadline = time.monotonic() + 60
    while len(returned) < 140 and time.monotonic() < deadline and t.is_alive():
        time.sleep(0.01)
    killed = replica.kill_primary(primary)  # SIGKILL the postmaster mid-stream
    t.join(30)
    stop.set()
    mem.close()
    assert killed and not t.is_alive()
    assert len(returned) >= 140, f"only {len(returned)} remembers returned before the kill"

    replica.promote(standby)
    assert rows(standby.dsn(), "select pg_is_in_recovery()")[0][0] is False
    new = standby.owner_dsn()

    # 1. every remember that returned is on the new primary, with the id it returned
    found = dict(rows(new, "select event_key, id from pgmem.memories where event_key = any(%s)", (list(returned),)))
    missing = sorted(k for k in returned if k not in found)
    assert not missing, f"{len(missing)} acknowledged memories lost: {missing[:5]}"
    assert found == returned

    # 2. the client retries everything (acknowledged or not) with its event_key: nothing twice
    last = max(int(k[3:]) for k in returned) + (1 if failed else 0)
    with MemoryClient(new, tenant=TENANT, embedder=None) as mem2:
        decisions = [remember(mem2, i).decision for i in range(last + 1)]
    assert decisions[: len(returned)] == ["replayed"] * len(returned)
    dup = rows(new, "select event_key, count(*) from pgmem.memories where event_key like 'ev-%%' "
                    "group by 1 having count(*) > 1")
    assert dup == []
    assert rows(new, "select count(*) from pgmem.memories where event_key like 'ev-%%'")[0][0] == last + 1

    # 3. the embedding queue continues: the queued memories (every 4th) are embedded now
    queued = rows(new, "select count(*) from pgmem.embedding_queue")[0][0]
    assert queued == len([i for i in range(last + 1) if i % 4 == 0])
    w = EmbeddingWorker(standby.dsn(), embedder=HashEmbedder(), batch=16)
    assert w.run(until_empty=True) == queued
    assert rows(new, "select count(*) from pgmem.embedding_queue")[0][0] == 0
    assert rows(new, "select count(*) from pgmem.memories where event_key like 'ev-%%' and embedding is null")[0][0] == 0

    # 4. job state continues: the runs, the cursor and the schedule are there, and jobs run
    assert rows(new, "select id, job, status from pgmem.job_runs order by id")[: len(before_jobs)] == before_jobs
    assert rows(new, "select tenant, job, cursor_at, cursor_id from pgmem.job_state order by 1, 2") == before_state
    assert rows(standby.dsn(), "select jobname, schedule, command from cron.job order by jobname") == before_cron
    with psycopg.connect(standby.dsn(), autocommit=True) as c:
        c.execute("set pgmem.tenant = 'acme'")
        c.execute("call pgmem.run_job('merge', '{}')")
    after = rows(new, "select id, job, status from pgmem.job_runs order by id")
    assert len(after) > len(before_jobs) and after[-1][1:] == ("merge", "ok")
    assert after[-1][0] > before_jobs[-1][0]  # identity values go on past the old primary's
