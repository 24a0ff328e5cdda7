"""The work queue (fragment-reconstructive-memory.md, Engine Goal Queue: QUERY 0, ENCODE 1,
REFLECT 2, MAINTENANCE 3, IDLE 4), its runner pgmem.work(), reflection, run_job and pg_cron.
"""
from __future__ import annotations

import time

import psycopg
import pytest

from conftest import CRON_DB, at_cos, connect, e
from sqlhelpers import rows


def mems(conn, n, **kw):
    return [r[0] for r in conn.execute(
        "insert into pgmem.memories (content) select 'plain memory ' || g from generate_series(1, %s) g returning id", (n,))]


def test_priorities(conn):
    assert conn.execute("select pgmem.work_priority('QUERY'), pgmem.work_priority('encode'), pgmem.work_priority('REFLECT'),"
                        " pgmem.work_priority('MAINTENANCE'), pgmem.work_priority('IDLE'), pgmem.work_priority('nap')"
                        ).fetchone() == (0, 1, 2, 3, 4, None)
    tasks = {r["task"]: (r["priority"], r["priority_name"]) for r in rows(conn, "select * from pgmem.work_tasks()")}
    assert tasks == {"touch": (0, "QUERY"), "bind": (1, "ENCODE"), "reflect": (2, "REFLECT"), "salience": (2, "REFLECT"),
                     "merge": (3, "MAINTENANCE"), "prune": (3, "MAINTENANCE"), "archive": (3, "MAINTENANCE"),
                     "idle": (4, "IDLE")}


def test_the_runner_takes_the_highest_priority_first(conn):
    ids = mems(conn, 4)
    # queued lowest priority first; within a priority, oldest first
    queued = [
        conn.execute("select pgmem.enqueue('idle', params => '{\"batch\": 10}')").fetchone()[0],
        conn.execute("select pgmem.enqueue('prune', params => '{\"mode\": \"gentle\"}')").fetchone()[0],
        conn.execute("select pgmem.enqueue('reflect')").fetchone()[0],
        conn.execute("select pgmem.enqueue('salience')").fetchone()[0],
        conn.execute("select pgmem.enqueue('bind', %s::bigint[])", (ids[:2],)).fetchone()[0],
        conn.execute("select pgmem.enqueue('touch', %s::bigint[])", (ids[2:],)).fetchone()[0],
        conn.execute("select pgmem.enqueue('touch', %s::bigint[])", (ids[:1],)).fetchone()[0],
        conn.execute("select pgmem.enqueue('salience', priority => 0)").fetchone()[0],  # a caller may raise one
    ]
    order = []
    for _ in range(len(queued)):
        done = rows(conn, "select * from pgmem.work(max_items => 1)")
        assert len(done) == 1 and done[0]["status"] == "ok", done
        order.append((done[0]["item_id"], done[0]["task"], done[0]["priority"]))
    assert order == [(queued[5], "touch", 0), (queued[6], "touch", 0), (queued[7], "salience", 0), (queued[4], "bind", 1),
                     (queued[2], "reflect", 2), (queued[3], "salience", 2), (queued[1], "prune", 3), (queued[0], "idle", 4)]
    assert rows(conn, "select * from pgmem.work()") == []
    # the QUERY items did their work: accesses recorded
    assert conn.execute("select count(*) from pgmem.accesses").fetchone()[0] == 3
    # every call is a run in job_runs, with its items
    runs = rows(conn, "select * from pgmem.job_runs where job = 'work' order by id")
    assert len(runs) == 9 and all(r["status"] == "ok" for r in runs)
    assert [r["details"]["items"][0]["task"] for r in runs[:8]] == [o[1] for o in order]
    assert runs[-1]["examined"] == 0 and runs[-1]["details"]["more"] is False
    # (the reflect item ran pgmem.reflect: its own run)
    assert conn.execute("select count(*) from pgmem.job_runs where job = 'reflect'").fetchone()[0] == 1


def test_items_not_ready_wait_and_failures_are_retried_then_dropped(conn):
    later = conn.execute("select pgmem.enqueue('reflect', not_before => now() + interval '1 hour')").fetchone()[0]
    bad = conn.execute("select pgmem.enqueue('prune', params => '{\"mode\": \"savage\"}')").fetchone()[0]
    done = rows(conn, "select * from pgmem.work()")
    assert [(d["item_id"], d["status"]) for d in done] == [(bad, "retry")]
    assert "mode" in done[0]["error"]
    q = rows(conn, "select * from pgmem.work_queue where id = %s", (bad,))[0]
    assert q["attempts"] == 1 and q["last_error"] == done[0]["error"]
    # back-off 2^attempts seconds: not ready yet
    assert rows(conn, "select * from pgmem.work()") == []
    for attempts in range(1, 5):
        conn.execute("update pgmem.work_queue set not_before = now() where id = %s", (bad,))
        status = rows(conn, "select * from pgmem.work()")[0]["status"]
        assert status == ("dropped" if attempts == 4 else "retry")
    assert [r[0] for r in conn.execute("select id from pgmem.work_queue")] == [later]
    status = rows(conn, "select * from pgmem.work_queue_status")
    assert [(s["priority_name"], s["task"], s["items"], s["ready"]) for s in status] == [("REFLECT", "reflect", 1, 0)]
    runs = rows(conn, "select details from pgmem.job_runs where job = 'work' order by id")
    assert [i["status"] for r in runs for i in r["details"]["items"]] == ["retry"] * 4 + ["dropped"]


def test_enqueue_rules(conn, dsn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown task "sleep": tasks are touch, bind'):
        conn.execute("select pgmem.enqueue('sleep')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="priority must be between 0 and 4"):
        conn.execute("select pgmem.enqueue('reflect', priority => 7)")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="memory_ids is 10001 items, more than max_items"):  # issue 27
        conn.execute("select pgmem.enqueue('bind', array(select generate_series(1, 10001))::bigint[])")


@pytest.mark.slow
def test_bind_items_of_a_batch_are_coalesced(conn):
    conn.execute("insert into pgmem.memories (content, embedding, session_id, created_at) "
                 "select 'turn ' || g, %s::vector, 's', now() - (3000 - g) * interval '1 second' from generate_series(1, 2500) g",
                 (e(1),))
    q = conn.execute("select cardinality(memory_ids) from pgmem.work_queue order by id").fetchall()
    assert [r[0] for r in q] == [1000, 1000, 500]  # one statement: items of at most 1,000 ids
    conn.execute("""insert into pgmem.settings (tenant, key, value) values ('acme', 'work_bind_coalesce', '2000')""")
    done = rows(conn, "select * from pgmem.work()")
    assert [(d["task"], d["examined"]) for d in done] == [("bind", 2000), ("bind", 500)]
    # temporal bindings of the session: 2,499; semantic: identical vectors, 5 neighbours each
    assert conn.execute("select count(*) from pgmem.links where kind = 'temporal'").fetchone()[0] == 2499


def test_reflect_rebinds_and_rescores_what_was_embedded_since_its_last_run(conn):
    a = conn.execute("select memory_id from pgmem.remember('the kite flew high', %s::vector)", (e(1),)).fetchone()[0]
    b = conn.execute("select memory_id from pgmem.remember('a kite above the trees', %s::vector)", (at_cos(1, 2, 0.8),)).fetchone()[0]
    conn.execute("delete from pgmem.work_queue")  # as if the ENCODE items were lost
    assert conn.execute("select count(*) from pgmem.links where kind = 'semantic'").fetchone()[0] == 0
    conn.execute("select pgmem.identity_set_goal('kites', 'fly kites', %s::vector)", (e(1),))
    conn.execute("delete from pgmem.work_queue")
    r = rows(conn, "select * from pgmem.reflect()")
    assert [(x["tenant_id"], x["examined"], x["bindings"], x["salience_changed"], x["more"]) for x in r] == \
        [("acme", 2, 1, 2, False)]
    assert conn.execute("select weight from pgmem.links where kind = 'semantic'").fetchone()[0] == pytest.approx(0.8, abs=1e-6)
    # the cursor moved: nothing new, nothing done
    assert rows(conn, "select * from pgmem.reflect()") == []
    c = conn.execute("select memory_id from pgmem.remember('kites need wind', %s::vector)", (at_cos(1, 3, 0.7),)).fetchone()[0]
    assert [(x["examined"]) for x in rows(conn, "select * from pgmem.reflect()")] == [1]
    # full_scan walks every active memory, in batches
    r = rows(conn, "select * from pgmem.reflect(batch => 2, full_scan => true)")
    assert [(x["examined"], x["more"]) for x in r] == [(2, True)]
    r = rows(conn, "select * from pgmem.reflect(batch => 2, full_scan => true)")
    assert [(x["examined"], x["more"]) for x in r] == [(1, False)]
    runs = rows(conn, "select status, examined, details from pgmem.job_runs where job = 'reflect' order by id")
    assert [(x["status"], x["examined"]) for x in runs] == [("ok", 2), ("ok", 0), ("ok", 1), ("ok", 2), ("ok", 1)]
    assert {a, b, c} <= {r[0] for r in conn.execute("select src_id from pgmem.links union select dst_id from pgmem.links")}


def test_run_job_drives_work_and_reflect(conn, dsn):
    ids = mems(conn, 3)
    for i in ids:
        conn.execute("select pgmem.enqueue('touch', array[%s]::bigint[])", (i,))
    conn.execute("call pgmem.run_job('work', '{\"max_items\": 2}')")
    runs = rows(conn, "select examined, details from pgmem.job_runs where job = 'work' order by id")
    assert [r["examined"] for r in runs] == [2, 1] and runs[0]["details"]["more"] is True
    assert conn.execute("select count(*) from pgmem.work_queue").fetchone()[0] == 0
    conn.execute("call pgmem.run_job('reflect')")
    assert conn.execute("select status from pgmem.job_runs where job = 'reflect'").fetchone()[0] == "ok"


def test_work_for_every_tenant_needs_no_tenant_and_sees_each(conn, dsn):
    mine = mems(conn, 1)
    with connect(dsn, tenant="other") as other:
        theirs = [r[0] for r in other.execute("insert into pgmem.memories (content) values ('theirs') returning id")]
        other.execute("select pgmem.enqueue('touch', %s::bigint[])", (theirs,))
        # a tenant's runner takes only its own items
        assert rows(other, "select * from pgmem.work()")[0]["tenant_id"] == "other"
        other.execute("select pgmem.enqueue('touch', %s::bigint[])", (theirs,))
    conn.execute("select pgmem.enqueue('touch', %s::bigint[])", (mine,))
    done = rows(conn, "select * from pgmem.work()")
    assert [d["tenant_id"] for d in done] == ["acme"]
    with connect(dsn, tenant=None) as admin:  # the owner: an admin, every tenant (what pg_cron runs)
        done = rows(admin, "select * from pgmem.work()")
        assert [d["tenant_id"] for d in done] == ["other"]
    assert conn.execute("select count(*) from pgmem.accesses where tenant = 'other'").fetchone()[0] == 2


@pytest.mark.slow
def test_pg_cron_runs_the_work_queue(cluster, conn, dsn):
    db = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    a = conn.execute("select memory_id from pgmem.remember('the kite flew high', %s::vector)", (e(1),)).fetchone()[0]
    b = conn.execute("select memory_id from pgmem.remember('a kite above the trees', %s::vector)", (at_cos(1, 2, 0.8),)).fetchone()[0]
    assert conn.execute("select count(*) from pgmem.work_queue").fetchone()[0] == 2
    command = """CALL pgmem.run_job('work', '{"tenant": "*"}')"""
    with connect(cluster.dsn(CRON_DB), tenant=None) as cron:
        jobid = cron.execute("select cron.schedule_in_database(%s, '* * * * *', %s, %s)",
                             (f"pgmem-test-work-{db}", command, db)).fetchone()[0]
        try:
            deadline = time.monotonic() + 75
            while time.monotonic() < deadline:
                if conn.execute("select count(*) from pgmem.job_runs where job = 'work' and status = 'ok'").fetchone()[0]:
                    break
                time.sleep(1)
        finally:
            cron.execute("select cron.unschedule(%s)", (jobid,))
    run = rows(conn, "select * from pgmem.job_runs where job = 'work' order by id limit 1")
    assert run and run[0]["tenant"] is None and run[0]["examined"] == 1, run  # both bind items in one pass
    assert conn.execute("select count(*) from pgmem.work_queue").fetchone()[0] == 0
    assert conn.execute("select src_id, dst_id from pgmem.links where kind = 'semantic'").fetchall() == [(a, b)]


# ------------------------------------------------------------------ issue 27, M2
@pytest.fixture(scope="module")
def tenant_logins(cluster):
    from conftest import login_roles

    yield from login_roles(cluster, "wq_", {"app": "pgmem_app"})


def test_only_the_queue_rules_let_an_item_in(cluster, dsn, tenant_logins):
    """Before: a plain INSERT as the app queued prune {"mode": "aggressive"}, merge
    {"threshold": 0.1} and an unknown task, and work() ran the first two as the owner. Every
    row now passes the rules of enqueue, whichever way it comes in."""
    from conftest import role_connect

    app = role_connect(cluster, dsn, tenant_logins, "app", "a")
    try:
        def refused(sql, params=(), state="22023", match=None):
            with pytest.raises(psycopg.Error, match=match) as ei:
                app.execute(sql, params)
            assert ei.value.sqlstate == state, ei.value

        ins = "insert into pgmem.work_queue (tenant, priority, task, params, not_before) values ('a', %s, %s, %s::jsonb, %s)"
        refused(ins, (3, "prune", '{"mode": "aggressive"}', None), "42501", 'maintenance task "prune" needs the pgmem_admin')
        refused(ins, (3, "merge", '{"threshold": 0.1}', None), "42501", 'maintenance task "merge"')
        refused(ins, (2, "shell", '{}', None), match='unknown task "shell"')
        refused(ins, (0, "idle", '{}', None), match="a idle item has priority 4 .IDLE. or lower")
        refused("select pgmem.enqueue('idle', priority => 0)", match="priority 4")
        refused(ins, (4, "idle", '{"batch": 100000}', None), match="batch must be a number between 1 and 10000")
        refused(ins, (4, "idle", '{"sql": "drop table x"}', None), match='a idle item takes no parameter "sql"')
        refused(ins, (4, "idle", '{"pad": "' + "x" * 20000 + '"}', None), match="params is .* bytes, more than 16384")
        refused("select pgmem.enqueue('reflect', not_before => 'infinity')", match="work_max_delay_days")
        refused(ins, (2, "reflect", '{}', "2999-01-01"), match="work_max_delay_days")
        assert app.execute("select count(*) from pgmem.work_queue").fetchone()[0] == 0
        # what the rules allow goes in, with the queue's own bookkeeping whatever the row said
        app.execute("insert into pgmem.work_queue (tenant, priority, task, params, attempts, last_error) "
                    "values ('a', 4, 'idle', '{\"batch\": 50}', 4, 'forged')")
        assert app.execute("select pgmem.enqueue('reflect', params => '{\"batch\": 10}')").fetchone()[0] > 0
        got = app.execute("select task, priority, attempts, last_error from pgmem.work_queue order by id").fetchall()
        assert got == [("idle", 4, 0, None), ("reflect", 2, 0, None)]
    finally:
        app.close()


def test_one_tenants_flood_does_not_hold_the_queue(cluster, dsn, tenant_logins):
    """Before: 200 enqueue('idle', priority => 0) of tenant a: work() spent 21.7 s on 6 of them
    while b's bind item waited. A tenant cannot jump its kind of work any more, and a tenant
    past its share of a run (work_tenant_seconds) goes after the others."""
    from conftest import role_connect

    with connect(dsn, tenant="b") as b:
        bm = b.execute("insert into pgmem.memories (content) values ('b''s plain memory') returning id").fetchone()[0]
        b.execute("delete from pgmem.work_queue")
        b_item = b.execute("select pgmem.enqueue('bind', %s::bigint[])", ([bm],)).fetchone()[0]
    app = role_connect(cluster, dsn, tenant_logins, "app", "a")
    try:
        for _ in range(200):
            app.execute("select pgmem.enqueue('idle', params => '{\"batch\": 50}')")
    finally:
        app.close()
    with connect(dsn, tenant=None) as admin:
        admin.execute("insert into pgmem.memories (tenant, content) select 'a', 'a''s memory ' || g from generate_series(1, 60) g")
        # an administrator may queue ahead of the kind of work: a's items first by priority ...
        admin.execute("update pgmem.work_queue set priority = 0 where tenant = 'a'")
        admin.execute("insert into pgmem.settings (tenant, key, value) values ('*', 'work_tenant_seconds', '0.000001') "
                      "on conflict (tenant, key) do update set value = excluded.value")
        ran = admin.execute("select item_id, tenant_id, task, status from pgmem.work(max_items => 3)").fetchall()
        # ... yet b's item runs second: a had its share of the run with its first item
        assert [r[1] for r in ran] == ["a", "b", "a"], ran
        assert ran[1][0] == b_item and ran[1][3] == "ok"
        details = admin.execute("select details from pgmem.job_runs where job = 'work' order by id desc limit 1").fetchone()[0]
        assert set(details["tenant_ms"]) == {"a", "b"}
