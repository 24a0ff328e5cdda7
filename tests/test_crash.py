"""Crashes: the server killed with SIGKILL in the middle of an ingest, and an embedding worker
killed with SIGKILL in the middle of a batch.

The postmaster test runs on a private cluster of its own (under .pgmem/, on a free port):
killing the postmaster of the shared test cluster would break every other test running
against it. The worker test only kills a client, so it uses a fresh database of the shared
test cluster.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, connect
from pgmem import migrate
from pgmem.cluster import Cluster, port_in_use

EVENTS = 3000
BATCH = 50
PGMEM = ROOT / ".venv" / "bin" / "pgmem"


def pgmem_cmd(*args: str) -> list[str]:
    return [str(PGMEM), *args] if PGMEM.exists() else [sys.executable, "-m", "pgmem.cli", *args]


def env_for(dsn: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "PGMEM_DSN": dsn, "PYTHONPATH": str(ROOT / "python"), **extra}


def free_port(start: int = 54360, stop: int = 54460) -> int:
    for port in range(start, stop):
        if not port_in_use(port):
            return port
    raise RuntimeError(f"no free port in {start}..{stop}")


def pids_alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        try:  # a zombie is dead for our purposes
            if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
                continue
        except (FileNotFoundError, IndexError):
            continue
        alive.append(pid)
    return alive


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


@pytest.fixture(scope="module")
def private_cluster():
    home = ROOT / ".pgmem" / f"crash-{uuid.uuid4().hex[:8]}"
    c = Cluster(home=home, port=free_port(), dbname="pgmem", cron_database="pgmem",
                settings={"shared_buffers": "'128MB'", "max_connections": "40", "max_worker_processes": "8"})
    try:
        c.init()
        c.start()
        c.wait_ready()
        c.ensure_database("pgmem", tenant=None)
        migrate.upgrade(c.dsn("pgmem"))
        yield c
    finally:
        try:
            if c.running():
                c.stop("immediate")
        finally:
            shutil.rmtree(home, ignore_errors=True)


def write_events(path: Path, n: int) -> list[str]:
    """n events, one per line, each with an event_id and a text that is novel for the gate."""
    rng = np.random.default_rng(3000)
    syll = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "xe", "bo", "di", "fu", "gh"]
    vocab = sorted({"".join(rng.choice(syll, 3)) for _ in range(4000)})
    ids = []
    with path.open("w") as f:
        for i in range(n):
            eid = f"crash-{i:05d}"
            words = " ".join(rng.choice(vocab, 6))
            # no word common to all lines: the gate compares with memories sharing a lexeme
            f.write(json.dumps({"event_id": eid, "content": f"{words} ref{i}z{(i * 7919) % 10007}",
                                "who": "user", "session_id": f"s{i // 200}"}) + "\n")
            ids.append(eid)
    return ids


def batch_of(event_id: str) -> int:
    return int(event_id.split("-")[1]) // BATCH


@pytest.mark.timeout(1200)
def test_postmaster_sigkill_during_ingest(private_cluster, tmp_path):
    c = private_cluster
    dsn = c.dsn("pgmem")
    tenant = "crash"
    path = tmp_path / "events.jsonl"
    all_ids = write_events(path, EVENTS)
    out, err = (tmp_path / "ingest1.out").open("w"), (tmp_path / "ingest1.err").open("w")
    ingest = subprocess.Popen(pgmem_cmd("ingest", str(path), "--batch-size", str(BATCH), "--no-embed", "--no-extract",
                                        "--tenant", tenant), stdout=out, stderr=err, env=env_for(dsn))
    committed_before: set[str] = set()
    try:
        with connect(dsn, tenant=None) as probe:
            deadline = time.monotonic() + 300
            while True:
                n = probe.execute("select count(*) from pgmem.memories where tenant = %s", (tenant,)).fetchone()[0]
                if n > 500:
                    break
                assert ingest.poll() is None, f"ingest ended before 500 memories were committed: {(tmp_path / 'ingest1.err').read_text()}"
                assert time.monotonic() < deadline, "ingest too slow"
                time.sleep(0.01)
            committed_before = {r[0] for r in probe.execute(
                "select event_key from pgmem.memories where tenant = %s", (tenant,))}
            postmaster = c.postmaster_pid()
            children = children_of(postmaster)
            os.kill(postmaster, signal.SIGKILL)
        killed_at = time.monotonic()
        assert len(committed_before) < EVENTS, "the ingest finished before the kill"
        # the ingest fails (it retries a lost connection, then gives up); only then may the
        # server come back, or the retry would succeed
        rc = ingest.wait(timeout=600)
        print(f"\ningest exited {rc} {time.monotonic() - killed_at:.1f}s after the kill: "
              f"{(tmp_path / 'ingest1.err').read_text().strip()[-300:]}")
        assert rc != 0
    finally:
        if ingest.poll() is None:
            ingest.kill()
            ingest.wait()
        out.close()
        err.close()

    # orphaned server processes notice the postmaster's death and exit; the shared memory
    # segment must be free before a new postmaster may start
    deadline = time.monotonic() + 120
    while pids_alive(children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pids_alive(children), f"server processes still alive: {pids_alive(children)}"
    assert (c.data / "postmaster.pid").exists(), "a SIGKILLed postmaster leaves its pid file behind"
    assert not c.running()  # pg_ctl status: the pid in the stale file is dead
    for attempt in range(30):  # Cluster.start -> pg_ctl start; the server removes the stale pid file itself
        try:
            c.start()
            break
        except Exception as e:  # noqa: BLE001
            if attempt == 29:
                raise
            print(f"start attempt {attempt + 1} failed: {e}")
            time.sleep(1)
    c.wait_ready()
    print(f"server back {time.monotonic() - killed_at:.1f}s after the kill")
    assert c.postmaster_pid() != postmaster
    assert "was not properly shut down; automatic recovery in progress" in c.tail_log(200)

    with connect(dsn, tenant=None) as su:
        present = [r[0] for r in su.execute("select event_key from pgmem.memories where tenant = %s", (tenant,))]
        assert len(present) == len(set(present))
        present_set = set(present)
        # everything committed before the kill survived it
        assert committed_before <= present_set, f"lost after the crash: {sorted(committed_before - present_set)[:10]}"
        # each batch is one transaction: all of its 50 events or none, and batches commit in order
        per_batch: dict[int, int] = {}
        for e in present:
            per_batch[batch_of(e)] = per_batch.get(batch_of(e), 0) + 1
        half = {b: k for b, k in per_batch.items() if k != BATCH}
        assert not half, f"half-present batches: {half}"
        assert sorted(per_batch) == list(range(len(per_batch))), f"batches not a prefix: {sorted(per_batch)[:5]}..."
        assert present_set == set(all_ids[:len(per_batch) * BATCH])
        recovered = len(present_set)
        # what the crash left is consistent: every memory has its history row and is queued
        assert su.execute("select count(*) from pgmem.history where tenant = %s and op = 'add'", (tenant,)).fetchone()[0] == recovered
        assert su.execute("select count(*) from pgmem.embedding_queue where tenant = %s", (tenant,)).fetchone()[0] == recovered

    # the re-run completes: old events are replayed (event_id), new ones stored, no duplicates
    p = subprocess.run(pgmem_cmd("ingest", str(path), "--batch-size", str(BATCH), "--no-embed", "--no-extract",
                                 "--tenant", tenant), capture_output=True, text=True, env=env_for(dsn), timeout=900)
    assert p.returncode == 0, p.stderr
    counts = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"re-run done {time.monotonic() - killed_at:.1f}s after the kill: {counts}")
    assert counts == {"stored": EVENTS - recovered, "duplicate": 0, "rejected": 0, "replayed": recovered, "bad": 0}, counts
    with connect(dsn, tenant=None) as su:
        n, distinct = su.execute("select count(*), count(distinct event_key) from pgmem.memories where tenant = %s",
                                 (tenant,)).fetchone()
        assert n == distinct == EVENTS

    # the worker embeds everything that was queued, including what the crashed run wrote
    t0 = time.monotonic()
    # (--batch 1000: at most 5 claims per session, see test_worker_all_tenants_more_than_five_batches)
    w = subprocess.run(pgmem_cmd("worker", "--once", "--batch", "1000"), capture_output=True, text=True,
                       env=env_for(dsn), timeout=1200)
    assert w.returncode == 0, w.stderr
    assert json.loads(w.stdout.strip().splitlines()[-1]) == {"embedded": EVENTS, "reembedded": 0, "failed": 0}, w.stdout
    with connect(dsn, tenant=None) as su:
        assert su.execute("select count(*) from pgmem.embedding_queue").fetchone()[0] == 0
        assert su.execute("select count(*) from pgmem.memories where tenant = %s and embedding is not null"
                          " and embedded_at is not null", (tenant,)).fetchone()[0] == EVENTS
    print(f"crash figures: committed before the kill {len(committed_before)}, recovered {recovered} "
          f"({recovered // BATCH} whole batches), replayed {counts['replayed']}, stored by the re-run {counts['stored']}, "
          f"embedded by the worker {EVENTS} in {time.monotonic() - t0:.1f}s")


@pytest.mark.timeout(900)
def test_worker_sigkill_mid_batch(dsn, tmp_path):
    n_mem, batch = 300, 64
    with connect(dsn, tenant="wk") as c:
        c.execute("insert into pgmem.memories (content, who) select 'worker fault memory ' || i || ': '"
                  " || md5(i::text) || ' ' || md5((i * 31)::text), 'user' from generate_series(1, %s) i", (n_mem,))
        assert c.execute("select count(*) from pgmem.embedding_queue").fetchone()[0] == n_mem
    app = f"pgmem-worker-{uuid.uuid4().hex[:8]}"
    log = (tmp_path / "worker.err").open("w")
    worker = subprocess.Popen(pgmem_cmd("worker", "--batch", str(batch)), stdout=subprocess.DEVNULL, stderr=log,
                              env=env_for(dsn, PGAPPNAME=app))
    try:
        with connect(dsn, tenant=None) as probe:
            deadline = time.monotonic() + 300
            backend = None
            while True:  # the first batch has committed and the worker has claimed the next one
                done = probe.execute("select count(*) from pgmem.memories where embedding is not null").fetchone()[0]
                row = probe.execute(
                    "select a.pid, (select count(*) from pg_locks l where l.pid = a.pid"
                    "               and l.relation = 'pgmem.embedding_queue'::regclass)"
                    "  from pg_stat_activity a where a.application_name = %s", (app,)).fetchone()
                if row:
                    backend = row[0]
                if done >= batch and row and row[1] > 0:
                    break
                assert worker.poll() is None, (tmp_path / "worker.err").read_text()
                assert done < n_mem, "the worker finished before it could be killed"
                assert time.monotonic() < deadline, "worker too slow"
                time.sleep(0.005)
            locks_at_kill = probe.execute(
                "select count(*) from pg_locks where pid = %s and relation = 'pgmem.embedding_queue'::regclass",
                (backend,)).fetchone()[0]
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()
            # the server notices the dead client: its backend goes, and the transaction with it
            deadline = time.monotonic() + 60
            while probe.execute("select count(*) from pg_stat_activity where pid = %s", (backend,)).fetchone()[0]:
                assert time.monotonic() < deadline, "the dead worker's backend is still there"
                time.sleep(0.05)
            assert probe.execute("select count(*) from pg_locks where pid = %s", (backend,)).fetchone()[0] == 0
            assert probe.execute(
                "select count(*) from pg_locks l where l.relation = 'pgmem.embedding_queue'::regclass"
                " and l.pid is distinct from pg_backend_pid()"
                " and not exists (select 1 from pg_stat_activity a where a.pid = l.pid)").fetchone()[0] == 0
            # no row of the queue is still locked by anyone
            with probe.transaction():
                locked = probe.execute("select count(*) from (select 1 from pgmem.embedding_queue for update nowait) q").fetchone()[0]
            done = probe.execute("select count(*) from pgmem.memories where embedding is not null").fetchone()[0]
            queued = probe.execute("select count(*) from pgmem.embedding_queue").fetchone()[0]
            half = probe.execute("""
                select count(*) from pgmem.memories m
                 where not ((m.embedding is null and m.embedded_at is null
                             and exists (select 1 from pgmem.embedding_queue q where q.memory_id = m.id))
                         or (m.embedding is not null and m.embedded_at is not null and m.embedding_model is not null
                             and not exists (select 1 from pgmem.embedding_queue q where q.memory_id = m.id)))""").fetchone()[0]
            assert locks_at_kill > 0, "the worker was not inside a batch when it was killed"
            assert half == 0, f"{half} memories half-written"
            assert done % batch == 0 and batch <= done < n_mem, f"{done} embedded: batches are all or nothing"
            assert queued == locked == n_mem - done
            # the killed batch left no embed history either
            assert probe.execute("select count(*) from pgmem.history where op = 'embed'").fetchone()[0] == done
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        log.close()
    # a second worker completes the rest
    w = subprocess.run(pgmem_cmd("worker", "--once", "--batch", "128"), capture_output=True, text=True,
                       env=env_for(dsn), timeout=600)
    assert w.returncode == 0, w.stderr
    assert json.loads(w.stdout.strip().splitlines()[-1]) == {"embedded": n_mem - done, "reembedded": 0, "failed": 0}
    with connect(dsn, tenant=None) as c:
        assert c.execute("select count(*) from pgmem.embedding_queue").fetchone()[0] == 0
        assert c.execute("select count(*) from pgmem.memories where embedding is not null and embedded_at is not null"
                         ).fetchone()[0] == n_mem
    print(f"\nworker fault: killed with {done} of {n_mem} embedded ({done // batch} batches committed), "
          f"{locks_at_kill} lock(s) on pgmem.embedding_queue held at the kill and none after; the second worker "
          f"embedded {n_mem - done}")


@pytest.mark.timeout(600)
def test_worker_all_tenants_more_than_five_batches(dsn):
    with connect(dsn, tenant="t6") as c:
        c.execute("insert into pgmem.memories (content) select 'six batches ' || i || ' ' || md5(i::text)"
                  " from generate_series(1, 8) i")
    w = subprocess.run(pgmem_cmd("worker", "--once", "--batch", "1"), capture_output=True, text=True,
                       env=env_for(dsn), timeout=600)
    assert w.returncode == 0, w.stderr[-500:]
    assert json.loads(w.stdout.strip().splitlines()[-1]) == {"embedded": 8, "reembedded": 0, "failed": 0}
