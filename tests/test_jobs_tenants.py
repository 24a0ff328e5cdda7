"""One tenant cannot stall another's maintenance (issue 27, M1 and M2).

The attacks of the adversarial probe of 2026-11-26, as app logins bound to tenants a and b:
* M1: a's login holds `SELECT ... FOR UPDATE` on two of its own duplicates; the all-tenant
  merge waited 105 s for it and b's prune was skipped after 30 s. Now the merge skips a's pair
  (reported in job_runs.details), merges b's, and prune runs; a's pair is merged by the first
  run after a lets go.
* M2: a floods near-duplicates; the hourly merge was busy for 15 minutes with them while b's
  merges were skipped. Now a run for every tenant examines at most merge_tenant_budget of one
  tenant's memories, takes the tenants round robin, and leaves the rest of a's for the next runs.
"""
from __future__ import annotations

import threading

import numpy as np
import psycopg
from psycopg.types.json import Jsonb
import pytest

from conftest import DIM, connect
from sqlhelpers import rows
from conftest import login_roles, role_connect


@pytest.fixture(scope="module")
def roles(cluster):
    yield from login_roles(cluster, "jt_", {"app": "pgmem_app", "admin": "pgmem_admin"})


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


def near(v: np.ndarray, rng: np.random.Generator, eps: float) -> np.ndarray:
    w = v + eps * rng.normal(size=DIM).astype(np.float32) / np.sqrt(DIM)
    return (w / np.linalg.norm(w)).astype(np.float32)


def store(conn, content: str, vec: np.ndarray, importance: float = 0.5) -> int:
    r = conn.execute("select memory_id, decision from pgmem.remember(%s, %s::vector, importance => %s, force => true)",
                     (content, vec, importance)).fetchone()
    assert r[1] == "stored", r
    return r[0]


def state(conn, mid: int) -> tuple:
    return conn.execute("select state, merged_into from pgmem.memories where id = %s", (mid,)).fetchone()


def in_thread(fn):
    """Runs fn in a thread; returns (thread, result dict)."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_a_tenants_row_locks_do_not_stall_the_jobs_of_the_others(cluster, dsn, roles):
    rng = np.random.default_rng(27)
    with connect(dsn, tenant="a") as a, connect(dsn, tenant="b") as b:
        va, vb = unit(rng), unit(rng)
        a1, a2 = store(a, "A's note on the release", va, 0.9), store(a, "A's note on the release, again", near(va, rng, 0.2))
        b1, b2 = store(b, "B's note on the budget", vb, 0.9), store(b, "B's note on the budget, again", near(vb, rng, 0.2))
        b_old = store(b, "B's memory nobody needs", unit(rng), 0.001)  # prunable (normal mode)
    attacker = role_connect(cluster, dsn, roles, "app", "a")
    attacker.autocommit = False
    try:
        held = attacker.execute("select id from pgmem.memories where id in (%s, %s) order by id for update",
                                (a1, a2)).fetchall()
        assert [r[0] for r in held] == [a1, a2]  # a's own rows: its login may lock them
        with connect(dsn, tenant=None) as admin:
            admin.execute("set statement_timeout = '60s'")
            t, out = in_thread(lambda: admin.execute("""CALL pgmem.run_job('merge', '{"tenant": "*"}')"""))
            t.join(30)
            # the merge did not wait for a's transaction, which still holds the rows
            assert not t.is_alive(), "the merge waited for tenant a's row locks"
            assert "error" not in out, out
            assert state(admin, b2) == ("merged", b1)      # b's duplicates merged
            assert state(admin, a2) == ("active", None)    # a's pair left alone ...
            runs = rows(admin, "select status, details from pgmem.job_runs where job = 'merge' order by id")
            assert all(r["status"] == "ok" for r in runs)
            assert sum(r["details"].get("skipped_locked", 0) for r in runs) == 1   # ... and reported
            assert [a1, a2] in [r["details"].get("skipped_pairs") for r in runs]
            # b's prune is not skipped for a job lock held by the merge either
            t, out = in_thread(lambda: admin.execute("""CALL pgmem.run_job('prune', '{"tenant": "*"}')"""))
            t.join(30)
            assert not t.is_alive() and "error" not in out, out
            prune = rows(admin, "select status, error from pgmem.job_runs where job = 'prune' order by id")
            assert prune and all(r["status"] == "ok" for r in prune), prune
            assert state(admin, b_old)[0] == "deleted"
            # a lets go: the next merge run examines a's pair again and merges it
            attacker.rollback()
            admin.execute("""CALL pgmem.run_job('merge', '{"tenant": "*"}')""")
            assert state(admin, a2) == ("merged", a1)
    finally:
        attacker.close()


def test_prune_archive_and_purge_skip_and_report_rows_a_tenant_holds(cluster, dsn, roles):
    rng = np.random.default_rng(28)
    with connect(dsn, tenant="a") as a, connect(dsn, tenant="b") as b:
        def old_note(conn, text, importance, days=200):
            return conn.execute("select memory_id from pgmem.remember(%s, %s::vector, importance => %s, "
                                "created_at => now() - make_interval(days => %s))",
                                (text, unit(rng), importance, days)).fetchone()[0]
        mine = [old_note(a, f"a's old note {i}", 0.001) for i in range(3)]
        theirs = [old_note(b, f"b's old note {i}", 0.001) for i in range(3)]
        keepers = [old_note(b, f"b's old but important note {i}", 0.9, 100) for i in range(2)]  # not decayed
    attacker = role_connect(cluster, dsn, roles, "app", "a")
    attacker.autocommit = False
    try:
        attacker.execute("select 1 from pgmem.memories where id = any(%s) for update", (mine[:2],))
        with connect(dsn, tenant=None) as admin:
            admin.execute("set lock_timeout = '20s'")  # a wait would show as a failure, not a hang

            def last(job):
                return rows(admin, "select status, changed, details from pgmem.job_runs where job = %s "
                                   "order by id desc limit 1", (job,))[0]
            # (as_of: judged at this instant; without it the night spares an import, memories dated long
            # before they were stored, for a month of use: issue 36, tests/test_lifecycle_import.py)
            at = admin.execute("select now()").fetchone()[0].isoformat()
            admin.execute("CALL pgmem.run_job('prune', %s)", (Jsonb({"tenant": "*", "as_of": at}),))
            r = last("prune")
            assert r["status"] == "ok" and r["changed"] == 4 and r["details"]["skipped_locked"] == 2, r
            assert [state(admin, i)[0] for i in theirs + mine[2:]] == ["deleted"] * 4
            assert [state(admin, i)[0] for i in mine[:2]] == ["active", "active"]
            admin.execute("CALL pgmem.run_job('archive', %s)", (Jsonb({"tenant": "*", "as_of": at}),))
            r = last("archive")
            assert r["status"] == "ok" and r["changed"] == 2 and r["details"]["skipped_locked"] == 2, r
            assert [state(admin, i)[0] for i in keepers] == ["archived"] * 2
            assert [state(admin, i)[0] for i in mine[:2]] == ["active", "active"]
            # purge: b's deleted memories go, a's held one stays and is reported
            admin.execute("update pgmem.memories set state_changed_at = now() - interval '60 days' "
                          "where id = any(%s)", (theirs + mine[2:],))
            attacker.execute("select 1 from pgmem.memories where id = %s for update", (mine[2],))
            admin.execute("""CALL pgmem.run_job('purge', '{"tenant": "*"}')""")
            r = last("purge")
            assert r["status"] == "ok" and r["changed"] == 3 and r["details"]["skipped_locked"] == 1, r
            assert admin.execute("select count(*) from pgmem.memories where id = any(%s)", (theirs,)).fetchone()[0] == 0
            assert state(admin, mine[2])[0] == "deleted"
    finally:
        attacker.close()


def test_a_flood_of_near_duplicates_waits_for_the_next_runs(dsn):
    """M2: merge_tenant_budget memories of a tenant per run, the tenants round robin."""
    rng = np.random.default_rng(29)
    with connect(dsn, tenant=None) as admin:
        admin.execute("insert into pgmem.settings (tenant, key, value) values ('*', 'merge_tenant_budget', '10') "
                      "on conflict (tenant, key) do update set value = excluded.value")
    with connect(dsn, tenant="a") as a, connect(dsn, tenant="b") as b:
        base = unit(rng)
        flood = [store(a, f"flood copy {i}", near(base, rng, 0.15)) for i in range(35)]
        vb = unit(rng)
        b1 = store(b, "B's only note", vb, 0.9)
        b2 = store(b, "B's only note, again", near(vb, rng, 0.2))   # written after the whole flood
    with connect(dsn, tenant=None) as admin:
        admin.execute("""CALL pgmem.run_job('merge', '{"tenant": "*", "batch": 4}')""")
        first = rows(admin, "select examined, details from pgmem.job_runs where job = 'merge' order by id")
        per_tenant: dict = {}
        for r in first:
            for t, n in r["details"]["tenants"].items():
                per_tenant[t] = per_tenant.get(t, 0) + n
        assert per_tenant == {"a": 10, "b": 2}                  # a's budget; b's memories in the same run
        assert first[0]["details"]["tenants"] == {"a": 2, "b": 2}   # round robin: b is not behind a's flood
        assert state(admin, b2) == ("merged", b1)
        assert first[-1]["details"]["more"] is False             # the run ends: a's rest waits
        assert any(r["details"].get("deferred", {}).get("a", 0) > 0 for r in first), first
        # the next runs go on with a's flood, at most 10 of a's memories each, until none is left
        for _ in range(5):
            since = admin.execute("select max(id) from pgmem.job_runs").fetchone()[0]
            admin.execute("""CALL pgmem.run_job('merge', '{"tenant": "*", "batch": 4}')""")
            run = rows(admin, "select details from pgmem.job_runs where job = 'merge' and id > %s", (since,))
            assert sum(r["details"]["tenants"].get("a", 0) for r in run) <= 10
            if not any(r["details"].get("deferred") for r in run):
                break
        else:
            pytest.fail("a's flood was still deferred after 5 more runs")
        merged = admin.execute("select count(*) from pgmem.memories where id = any(%s) and state = 'merged'",
                               (flood,)).fetchone()[0]
        assert merged == len(flood) - 1                          # one survivor of the flood
        assert admin.execute("select count(*) from pgmem.job_state where job = 'merge:used'").fetchone()[0] == 0


def test_a_tenants_row_locks_do_not_stall_the_cluster_job(cluster, dsn, roles):
    """M1, the cluster job: its moves skip the memories another transaction holds (FOR UPDATE
    SKIP LOCKED) and report them per tenant in job_runs.details, instead of waiting; a's other
    memories and b's move on. A refit after a lets go moves the held ones too."""
    rng = np.random.default_rng(2717)
    ids: dict[str, list[int]] = {"a": [], "b": []}
    with connect(dsn, tenant="a") as a, connect(dsn, tenant="b") as b:
        for name, c in (("a", a), ("b", b)):
            centres = [unit(rng) for _ in range(3)]
            for i in range(24):
                ids[name].append(store(c, f"{name}'s clustered note {i}", near(centres[i % 3], rng, 0.5)))
    with connect(dsn, tenant=None) as admin:
        admin.execute("""CALL pgmem.run_job('cluster', '{"tenant": "*", "refit": true}')""")
        first = dict(admin.execute("select id, cluster_id from pgmem.memories where id = any(%s)",
                                   (ids["a"] + ids["b"],)).fetchall())
        assert all(v is not None for v in first.values())
    attacker = role_connect(cluster, dsn, roles, "app", "a")
    attacker.autocommit = False
    held = ids["a"][:2]
    try:
        attacker.execute("select id from pgmem.memories where id = any(%s) order by id for update", (held,))
        with connect(dsn, tenant=None) as admin:
            admin.execute("set statement_timeout = '60s'")
            last = admin.execute("select coalesce(max(id), 0) from pgmem.job_runs").fetchone()[0]
            t, out = in_thread(lambda: admin.execute("""CALL pgmem.run_job('cluster', '{"tenant": "*", "refit": true}')"""))
            t.join(30)
            assert not t.is_alive(), "the cluster job waited for tenant a's row locks"
            assert "error" not in out, out
            now = dict(admin.execute("select id, cluster_id from pgmem.memories where id = any(%s)",
                                     (ids["a"] + ids["b"],)).fetchall())
            # the refit moved every memory to the new generation's clusters, but the two held ones
            assert [m for m in ids["b"] if now[m] == first[m]] == []
            assert [m for m in ids["a"] if now[m] == first[m]] == held
            runs = rows(admin, "select status, details from pgmem.job_runs where job = 'cluster' and id > %s", (last,))
            assert runs and all(r["status"] == "ok" for r in runs), runs
            skipped = sum((r["details"].get("tenants") or {}).get("a", {}).get("skipped_locked", 0) for r in runs)
            assert skipped == 2, runs
            assert all("skipped_locked" not in ((r["details"].get("tenants") or {}).get("b") or {}) for r in runs)
        attacker.rollback()
        with connect(dsn, tenant=None) as admin:
            admin.execute("""CALL pgmem.run_job('cluster', '{"tenant": "*", "refit": true}')""")
            again = dict(admin.execute("select id, cluster_id from pgmem.memories where id = any(%s)", (held,)).fetchall())
            assert all(again[m] != first[m] for m in held)
    finally:
        attacker.close()
