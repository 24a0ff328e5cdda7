"""Issue 35, M1: a tenant's row lock does not stall the every-minute ``work`` and ``index``
jobs of every tenant. Tenant a holds FOR UPDATE on two of its memories and keeps its
transaction open; run_job('work') and run_job('index') for all tenants finish promptly, do
tenant b's work, and report what they skipped (job_runs.details: skipped_locked).
"""
from __future__ import annotations

import time
import uuid

import pytest

from conftest import TEMPLATE, _janitor, connect, e
from sqlhelpers import scalar


@pytest.fixture()
def db(cluster):
    j = _janitor(cluster, f"t_advjobs_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


def _store(dsn: str, tenant: str, n: int, offset: int) -> list[int]:
    with connect(dsn, tenant=tenant) as c:
        ids = [scalar(c, "select memory_id from pgmem.remember(%s, embedding => %s::vector, force => true)",
                      (f"{tenant} note {i} about topic {offset + i}", e(offset + i))) for i in range(n)]
        c.execute("select pgmem.enqueue('touch', %s, '{\"kind\": \"used\"}')", (ids,))  # updates the rows
        return ids


@pytest.mark.parametrize("job", ["work", "index"])
def test_m1_a_held_row_lock_does_not_stall_work_or_index(db, job):
    a_ids = _store(db, "a", 2, 0)
    b_ids = _store(db, "b", 2, 10)
    holder = connect(db, tenant="a")
    holder.autocommit = False
    try:
        holder.execute("select id from pgmem.memories where id = any(%s) for update", (a_ids,)).fetchall()
        with connect(db, tenant=None) as c:
            c.execute("set statement_timeout = '20s'")
            t0 = time.monotonic()
            c.execute("call pgmem.run_job(%s, '{\"tenant\": \"*\"}')", (job,))
            took = time.monotonic() - t0
            details = scalar(c, "select details from pgmem.job_runs where job = %s order by id desc limit 1", (job,))
            if job == "index":
                indexed = {r[0] for r in c.execute("select memory_id from pgmem.memory_vectors").fetchall()}
                assert set(b_ids) <= indexed and not (set(a_ids) & indexed), indexed
                queued = {r[0] for r in c.execute("select memory_id from pgmem.vector_queue").fetchall()}
                assert set(a_ids) <= queued  # left for the next run
            else:
                done = scalar(c, "select count(*) from pgmem.work_queue where tenant = 'b'")
                assert done == 0  # b's work was done
                left = scalar(c, "select count(*) from pgmem.work_queue where tenant = 'a' and task = 'touch'")
                assert left >= 1  # a's is left for the next run
        assert took < 5, f"run_job({job}) took {took:.1f} s behind a held row lock"
        assert details.get("skipped_locked", 0) >= 1, (took, details)
    finally:
        holder.rollback()
        holder.close()
    # once the lock is gone, the next run does what was skipped
    with connect(db, tenant=None) as c:
        c.execute("call pgmem.run_job(%s, '{\"tenant\": \"*\"}')", (job,))
        if job == "index":
            assert scalar(c, "select count(*) from pgmem.vector_queue") == 0
        else:
            c.execute("update pgmem.work_queue set not_before = now()")  # the skipped item's short back-off
            c.execute("call pgmem.run_job(%s, '{\"tenant\": \"*\"}')", (job,))
            assert scalar(c, "select count(*) from pgmem.work_queue") == 0


def test_l6_system_stats_counts_interrupted_runs_apart(db):
    """A batch left 'running' by a backend that is gone (a crash) is interrupted, not running."""
    with connect(db, tenant="a") as c:
        c.execute("insert into pgmem.job_runs (tenant, job, params, pid) values ('a', 'merge', '{}', 999999)")
        c.execute("insert into pgmem.job_runs (tenant, job, params, pid) values ('a', 'prune', '{}', pg_backend_pid())")
        jobs = scalar(c, "select pgmem.system_stats()")["jobs"]
        assert jobs["running"] == 1 and jobs["interrupted"] == 1, jobs
        status = dict(c.execute("select job, last_status from pgmem.list_jobs()").fetchall())
        assert status["merge"] == "interrupted" and status["prune"] == "running", status


def test_l3_a_tenant_never_sees_installation_wide_runs(db):
    """pgmem serve's login may be an administrator: acting for tenant a, it shows a's runs
    only, not the runs over all tenants (with their last_error); acting for '*' it shows them."""
    with connect(db, tenant=None) as c:
        c.execute("insert into pgmem.job_runs (tenant, job, params, status, error, finished_at) values "
                  "(null, 'merge', '{}', 'failed', 'secret of another tenant', now()), "
                  "('a', 'prune', '{}', 'ok', null, now())")
    with connect(db, tenant="a") as c:
        assert "secret" not in str(scalar(c, "select pgmem.system_stats()")["jobs"])
        assert [r[0] for r in c.execute("select job from pgmem.list_jobs()").fetchall()] == ["prune"]
    with connect(db, tenant="*") as c:
        assert "merge" in [r[0] for r in c.execute("select job from pgmem.list_jobs()").fetchall()]
