"""Lifecycle jobs under concurrency: nothing is lost.

The workload: four writer threads store 2,000 memories through pgmem.remember (500 random base
vectors, each written four times with a little noise by four different writers at about the
same moment; some copies have exactly the same text, some nearly the same words; some memories
are touched in the transaction that stores them), while two job threads keep calling
merge_duplicates(batch => 200) and prune('aggressive') until the writers are done; then merge
runs to completion. Afterwards every memory remember() reported is accounted for.

The row-lock races the workload runs into are also reproduced one by one, deterministically:
a third connection holds a row lock so that two operations interleave in a known order.
"""
from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter, defaultdict

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row

from conftest import DIM, TEMPLATE, _janitor, at_cos, connect, e
N_BASE = 500
COPIES = 4
WRITERS = 4
NOISE = 0.0165  # per component: cosine ~0.95 to the base vector, ~0.90 between two copies

WORDS = ("amber basil cedar delta ember fjord garnet harbor indigo juniper kestrel lagoon marble nectar "
         "onyx pepper quartz raven saffron tundra umber velvet willow yarrow zephyr acorn bramble cobalt "
         "dune eagle fern glacier hazel iris jasper kelp lotus meadow nutmeg orchid pebble quill reed "
         "sorrel thistle upland violet walnut yew zinnia").split()


# ---------------------------------------------------------------------------- the workload
def _items(seed: int = 20261122) -> dict[int, list]:
    """writer -> [(base, copy, text, vector)]; copy k of base i goes to writer (i + k) % 4, so the
    four copies of a base are written by four writers at about the same moment."""
    rng = np.random.default_rng(seed)
    rnd = random.Random(seed)
    base = rng.standard_normal((N_BASE, DIM))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    per_writer: dict[int, list] = defaultdict(list)
    for i in range(N_BASE):
        words = rnd.sample(WORDS, 6)
        for k in range(COPIES):
            v = base[i] + rng.standard_normal(DIM) * NOISE
            v = (v / np.linalg.norm(v)).astype(np.float32)
            if i % 10 == 0:    # exactly the same text: the later copies are 'duplicate'
                text = f"Exact duplicate note {i}: " + " ".join(words)
            elif i % 10 == 5:  # nearly the same words and meaning: low surprise, mostly 'rejected'
                text = f"Near copy note {i}: " + " ".join(words) + ("" if k == 0 else f" v{k}")
            else:              # the same meaning (vector) in other words: stored, a merge candidate
                text = f"Note {i} copy {k}: " + " ".join(rnd.sample(WORDS, 8))
            per_writer[(i + k) % WRITERS].append((i, k, text, v))
    return per_writer


def _run_workload(dsn: str) -> dict:
    per_writer = _items()
    assert sum(len(v) for v in per_writer.values()) == N_BASE * COPIES
    errors: list[tuple[str, BaseException]] = []
    results: list[dict] = []        # one per remember() call
    touched: dict[int, int] = {}    # stored memory id -> touches made in the transaction that stored it
    lock = threading.Lock()
    writers_done = threading.Event()
    job_stats: Counter = Counter()

    def writer(w: int) -> None:
        with connect(dsn, tenant="acme") as c:
            for n, (i, k, text, v) in enumerate(per_writer[w]):
                try:
                    with c.transaction():
                        r = c.cursor(row_factory=dict_row).execute(
                            "select * from pgmem.remember(%s, embedding => %s::vector, category => 'fact')",
                            (text, v)).fetchone()
                        t = 0
                        if r["decision"] == "stored" and (i + k) % 3 == 0:
                            for _ in range(1 + (i + k) % 4):
                                t += c.execute("select pgmem.touch(%s::bigint[])", ([r["memory_id"]],)).fetchone()[0]
                except Exception as e:  # noqa: BLE001 - every error is a finding
                    with lock:
                        errors.append((f"writer {w} item {n}", e))
                    continue
                with lock:
                    results.append({"writer": w, "base": i, "copy": k, **r})
                    if r["decision"] == "stored":
                        touched[r["memory_id"]] = t

    def jobs(j: int) -> None:
        with connect(dsn, tenant="acme") as c:
            while not writers_done.is_set():
                for what, sql in (("merge", "select * from pgmem.merge_duplicates(batch => 200)"),
                                  ("prune", "select * from pgmem.prune('aggressive')")):
                    try:
                        n = len(c.execute(sql).fetchall())
                        with lock:
                            job_stats[f"{what} calls"] += 1
                            job_stats[f"{what} rows"] += n
                    except Exception as e:  # noqa: BLE001
                        with lock:
                            errors.append((f"job thread {j} {what}", e))
                time.sleep(0.3)

    def guarded(fn, *a):
        try:
            fn(*a)
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append((f"{fn.__name__}{a}", e))

    t0 = time.monotonic()
    writers = [threading.Thread(target=guarded, args=(writer, w)) for w in range(WRITERS)]
    job_threads = [threading.Thread(target=guarded, args=(jobs, j)) for j in range(2)]
    for t in job_threads + writers:
        t.start()
    for t in writers:
        t.join(900)
    writers_done.set()
    for t in job_threads:
        t.join(300)
    assert not any(t.is_alive() for t in writers + job_threads), "a thread hangs"
    t_concurrent = time.monotonic() - t0

    with connect(dsn, tenant="acme") as c:
        c.execute("CALL pgmem.run_job('merge')")  # to completion
        elapsed = time.monotonic() - t0
        cur = c.cursor(row_factory=dict_row)
        mems = {r["id"]: r for r in cur.execute(
            "select id, state, merged_into, merged_from, access_count from pgmem.memories")}
        hist: dict[int, list] = defaultdict(list)
        for h in cur.execute("select id, memory_id, op, before, after, details from pgmem.history order by id"):
            hist[h["memory_id"]].append(h)
        runs = Counter(f"{r[0]} {r[1]}" for r in c.execute("select job, status from pgmem.job_runs"))
        leftover = c.execute("select count(*) from pgmem.merge_duplicates(dry_run => true, full_scan => true)").fetchone()[0]

    decisions = Counter(r["decision"] for r in results)
    states = Counter(m["state"] for m in mems.values())
    deadlocks = [x for x in errors if isinstance(x[1], psycopg.errors.DeadlockDetected)]
    print(f"\nremember(): {dict(decisions)}; {len(touched)} stored, {sum(1 for v in touched.values() if v)} touched "
          f"{sum(touched.values())} times")
    print(f"memories: {dict(states)}; job threads: {dict(job_stats)}; job_runs: {dict(runs)}")
    print(f"errors: {len(errors)} ({len(deadlocks)} deadlocks); pairs a full-scan merge would still find: {leftover}")
    print(f"elapsed: {t_concurrent:.1f}s writes with jobs, {elapsed:.1f}s with the final merge")
    return dict(results=results, touched=touched, errors=errors, deadlocks=deadlocks, mems=mems, hist=hist,
                decisions=decisions, states=states)


@pytest.fixture(scope="module")
def workload(cluster):
    """The workload runs once, in its own database; the tests below check different properties."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    j = _janitor(cluster, name, TEMPLATE)
    j.init()
    try:
        yield _run_workload(cluster.dsn(name))
    finally:
        j.drop()


def _root(mems: dict, mid: int) -> int:
    seen = []
    while mems[mid]["state"] == "merged":
        assert mid not in seen, f"merge cycle {seen}"
        seen.append(mid)
        assert mems[mid]["merged_into"] is not None, f"merged memory {mid} points nowhere"
        mid = mems[mid]["merged_into"]
    return mid


def _state_changes(hist: dict, mid: int) -> list[dict]:
    return [h for h in hist[mid] if h["before"] and h["after"] and h["before"]["state"] != h["after"]["state"]]


@pytest.mark.slow
def test_concurrent_writes_merges_and_prunes_lose_nothing(workload):
    w = workload
    results, mems, hist, decisions, states = w["results"], w["mems"], w["hist"], w["decisions"], w["states"]
    # errors other than deadlocks (those are test_jobs_run_alongside_each_other_cleanly's)
    others = [x for x in w["errors"] if not isinstance(x[1], psycopg.errors.DeadlockDetected)]
    assert not others, others[:5]
    assert len(results) + sum(1 for x in w["deadlocks"] if x[0].startswith("writer")) == N_BASE * COPIES
    assert set(decisions) <= {"stored", "duplicate", "rejected"}
    assert decisions["stored"] and decisions["duplicate"] and decisions["rejected"]

    stored = [r["memory_id"] for r in results if r["decision"] == "stored"]
    # every stored memory has a row, no id twice, no row that no call stored
    assert len(stored) == len(set(stored))
    assert set(stored) == set(mems)
    for r in results:
        if r["decision"] == "duplicate":
            assert r["memory_id"] in mems, r
        elif r["decision"] == "rejected":
            assert r["memory_id"] is None, r

    merged_into_pruned = 0
    for mid in stored:
        m = mems[mid]
        assert m["state"] in ("active", "merged", "deleted"), m
        root = _root(mems, mid)  # merge chains end, without cycles ...
        assert mems[root]["state"] in ("active", "deleted")  # ... at an active survivor (or one pruned since)
        if m["state"] == "merged":
            assert m["merged_into"] == root, "merged memories point straight at their survivor"
            assert mid in mems[root]["merged_from"]
            assert _state_changes(hist, mid)[-1]["op"] == "merge"
            merged_into_pruned += mems[root]["state"] == "deleted"
        elif m["state"] == "deleted":
            last = _state_changes(hist, mid)[-1]
            assert last["op"] == "delete" and last["details"]["reason"] in ("bottom", "decayed", "expired"), hist[mid]
    print(f"stored {decisions['stored']}, duplicate {decisions['duplicate']}, rejected {decisions['rejected']}; "
          f"merged {states['merged']} ({merged_into_pruned} into a survivor pruned later), pruned {states['deleted']}, "
          f"active {states['active']}")
    assert states["merged"] > 0 and states["deleted"] > 0 and states["active"] > 0


def test_jobs_run_alongside_each_other_cleanly(workload):
    w = workload
    mems, hist, touched = w["mems"], w["hist"], w["touched"]
    problems = Counter()
    problems["deadlocks"] = len(w["deadlocks"])
    for mid, hs in hist.items():
        for h in hs:
            if h["op"] == "merge" and h["before"]["state"] not in ("active", "merged"):
                problems[f"merge took a {h['before']['state']} memory ({h['details'].get('role')})"] += 1
            if h["op"] in ("delete", "archive") and h["before"] and h["before"]["state"] == "merged":
                problems[f"{h['op']} of a merged memory"] += 1
    # access counts: a survivor holds its own touches plus those of everything merged into it;
    # merged memories keep their own count and are not counted again
    tree = defaultdict(list)
    for mid in mems:
        tree[_root(mems, mid)].append(mid)
    problems["survivors with a wrong access count"] = sum(
        1 for r, members in tree.items() if mems[r]["access_count"] != sum(touched[m] for m in members))
    total = sum(m["access_count"] for m in mems.values() if m["state"] != "merged")
    problems["access counts counted twice"] = total - sum(touched.values())
    print(f"\nproblems: {dict(problems)}")
    assert not +problems, dict(problems)


# ---------------------------------------------------------------------------- the races, one by one
DEADLOCK_TIMEOUT_S = 10


def remember(conn, content: str, embedding, importance: float, created_at=None) -> int:
    r = conn.cursor(row_factory=dict_row).execute(
        "select * from pgmem.remember(%s, embedding => %s::vector, importance => %s, category => 'fact', "
        "created_at => %s::timestamptz, force => true)", (content, embedding, importance, created_at)).fetchone()
    assert r["decision"] == "stored"
    return r["memory_id"]


def state(conn, mid: int) -> dict | None:
    return conn.cursor(row_factory=dict_row).execute("select * from pgmem.memories where id = %s", (mid,)).fetchone()


class Background:
    """Runs one SQL statement in its own connection and thread; waits until it blocks on a lock."""

    def __init__(self, dsn: str, sql: str, params=()):
        self.conn = connect(dsn)
        self.pid = self.conn.info.backend_pid
        self.result = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(sql, params))
        self.thread.start()

    def _run(self, sql, params):
        try:
            self.result = self.conn.execute(sql, params).fetchall()
        except BaseException as e:  # noqa: BLE001
            self.error = e

    def wait_blocked(self, observer) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            w = observer.execute("select wait_event_type from pg_stat_activity where pid = %s", (self.pid,)).fetchone()
            if w and w[0] == "Lock":
                return
            if not self.thread.is_alive():
                raise AssertionError(f"finished without blocking: {self.error or self.result}")
            time.sleep(0.02)
        raise AssertionError("did not block on a lock")

    def join(self):
        self.thread.join(DEADLOCK_TIMEOUT_S + 20)
        assert not self.thread.is_alive()
        self.conn.close()
        return self


def test_prune_leaves_a_memory_another_transaction_holds_for_the_next_run(dsn):
    """Set-based prune (one UPDATE per reason, FOR UPDATE SKIP LOCKED) neither waits for a row
    another transaction holds (no lock chain through the whole page, so no deadlock with a
    writer) nor prunes it under that transaction: the next run does."""
    with connect(dsn) as c:
        lo = remember(c, "Deploy window is Tuesday morning", e(0), 0.3)
        mid = remember(c, "Unrelated memory pruned in between", e(5), 0.4)
        hi = remember(c, "Deploys happen on Tuesday mornings", at_cos(0, 1, 0.9), 0.5)
        with connect(dsn, autocommit=False) as holder:
            holder.execute("select 1 from pgmem.memories where id = %s for update", (mid,))
            got = c.execute("select memory_id from pgmem.prune('normal', min_importance => 0.99)").fetchall()
            assert {r[0] for r in got} == {lo, hi}
            holder.commit()
        assert state(c, mid)["state"] == "active"
        got = c.execute("select memory_id from pgmem.prune('normal', min_importance => 0.99)").fetchall()
        assert [r[0] for r in got] == [mid]
        assert {state(c, i)["state"] for i in (lo, mid, hi)} == {"deleted"}


def test_merge_and_prune_take_turns(dsn):
    """The jobs that change memories share one lock row ('*', 'maintenance'): a prune started
    while a merge is uncommitted waits for it, then sees the merge's result (no deadlock)."""
    with connect(dsn) as c:
        lo = remember(c, "Deploy window is Tuesday morning", e(0), 0.3)          # merged into hi
        mid = remember(c, "Unrelated memory pruned in between", e(5), 0.4)
        hi = remember(c, "Deploys happen on Tuesday mornings", at_cos(0, 1, 0.9), 0.5)  # survivor, pruned
        with connect(dsn, autocommit=False) as tx:
            assert len(tx.execute("select * from pgmem.merge_duplicates()").fetchall()) == 1
            prune = Background(dsn, "select * from pgmem.prune('normal', min_importance => 0.99)")
            prune.wait_blocked(c)
            tx.commit()
        prune.join()
    assert prune.error is None, prune.error
    assert sorted(r[0] for r in prune.result) == sorted([mid, hi])
    with connect(dsn) as c:
        assert (state(c, lo)["state"], state(c, lo)["merged_into"]) == ("merged", hi)
        assert state(c, mid)["state"] == state(c, hi)["state"] == "deleted"


@pytest.mark.parametrize("side", ["loser", "survivor"])
def test_merge_does_not_merge_a_memory_deleted_meanwhile(dsn, side):
    with connect(dsn) as c:
        lo = remember(c, "Deploy window is Tuesday morning", e(0), 0.4)
        hi = remember(c, "Deploys happen on Tuesday mornings", at_cos(0, 1, 0.90), 0.7)
        victim, other = (lo, hi) if side == "loser" else (hi, lo)
        with connect(dsn, autocommit=False) as tx:
            tx.execute("select pgmem.forget(%s, 'deleted while merge runs')", (victim,))
            merge = Background(dsn, "select * from pgmem.merge_duplicates()")
            merge.wait_blocked(c)
            tx.commit()
        merge.join()
        assert merge.error is None
        assert state(c, victim)["state"] == "deleted"
        assert state(c, other)["state"] == "active" and state(c, other)["merged_into"] is None


@pytest.mark.parametrize("job", ["prune", "archive"])
def test_prune_and_archive_leave_a_memory_merged_meanwhile_alone(dsn, job):
    with connect(dsn) as c:
        old = c.execute("select now() - interval '200 days'").fetchone()[0] if job == "archive" else None
        lo = remember(c, "Deploy window is Tuesday morning", e(0), 0.3, created_at=old)
        hi = remember(c, "Deploys happen on Tuesday mornings", at_cos(0, 1, 0.90), 0.9, created_at=old)
        touches = 0
        if job == "prune":  # (a recent access would keep it from being archived)
            touches = c.execute("select pgmem.touch(%s::bigint[])", ([lo],)).fetchone()[0]
        with connect(dsn, autocommit=False) as tx:
            assert len(tx.execute("select * from pgmem.merge_duplicates()").fetchall()) == 1
            sql = ("select * from pgmem.prune('normal', min_importance => 0.5)" if job == "prune"
                   else "select * from pgmem.archive_stale()")
            bg = Background(dsn, sql)
            bg.wait_blocked(c)
            tx.commit()
        bg.join()
        assert bg.error is None
        m = state(c, lo)
        assert (m["state"], m["merged_into"]) == ("merged", hi)
        assert state(c, hi)["access_count"] == touches


def test_purge_does_not_destroy_a_memory_restored_meanwhile(dsn):
    """purge skips (FOR UPDATE SKIP LOCKED) a deleted memory another transaction holds, e.g.
    one being restored: it is not destroyed, and purge does not wait."""
    with connect(dsn) as c:
        m = remember(c, "A memory deleted by mistake", e(0), 0.5)
        c.execute("select pgmem.forget(%s)", (m,))
        time.sleep(1.2)
        with connect(dsn, autocommit=False) as tx:
            tx.execute("select pgmem.restore(%s, 'it was a mistake')", (m,))
            assert c.execute("select * from pgmem.purge(older_than => '1 second')").fetchall() == []
            tx.commit()
        row = state(c, m)
        assert row is not None and row["state"] == "active"


# ---------------------------------------------------------------------------- job locks (issue 14)
@pytest.fixture
def app_login(cluster, dsn):
    """A login role granted pgmem_app, connected to the test database (no tenant needed to take locks)."""
    import secrets

    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    name, pw = f"app_user_{uuid.uuid4().hex[:10]}", secrets.token_urlsafe(18)
    with connect(cluster.dsn("postgres"), tenant=None) as su:
        su.execute(sql.SQL("create role {} login password {}").format(sql.Identifier(name), sql.Literal(pw)))
        su.execute(sql.SQL("grant pgmem_app to {}").format(sql.Identifier(name)))
    c = psycopg.connect(host="127.0.0.1", port=cluster.port, user=name, password=pw,
                        dbname=conninfo_to_dict(dsn)["dbname"], autocommit=True)
    yield c
    c.close()
    with connect(cluster.dsn("postgres"), tenant=None) as su:
        su.execute("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (name,))
        su.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(name)))


def test_the_app_role_cannot_starve_the_jobs(dsn, app_login):
    """Before: pg_advisory_lock(hashtextextended('pgmem-maintenance', 0)) as pgmem_app blocked merge, prune,
    archive and purge of every tenant. The jobs now lock rows of pgmem.job_locks, which the app cannot touch."""
    app = app_login
    # every advisory lock key the jobs ever used, held by the app's session
    app.execute("select pg_advisory_lock(hashtextextended('pgmem-maintenance', 0))")
    for job in ("merge", "prune", "archive", "purge", "merge:run", "prune:run"):
        for scope in ("acme", "*"):
            app.execute("select pg_advisory_lock(hashtextextended(%s, 0))", (f"pgmem-job:{job}:{scope}",))
    for stmt in ("select * from pgmem.job_locks for update", "lock table pgmem.job_locks in exclusive mode",
                 "update pgmem.job_locks set holder_pid = pg_backend_pid()",
                 "insert into pgmem.job_locks (tenant, job) values ('*', 'maintenance')"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), app.transaction():
            app.execute(stmt)
    with connect(dsn, tenant=None) as admin:
        admin.execute("insert into pgmem.settings (tenant, key, value) values ('*', 'job_lock_timeout_ms', '500') "
                      "on conflict (tenant, key) do update set value = excluded.value")
        with connect(dsn) as c:
            a = remember(c, "Deploys happen on Tuesday mornings", e(0), 0.6)
            b = remember(c, "Deploy window is Tuesday morning", at_cos(0, 1, 0.95), 0.3)
        for job in ("merge", "prune", "archive", "purge"):
            admin.execute(f"""CALL pgmem.run_job('{job}', '{{"tenant": "*"}}')""")
        runs = admin.execute("select job, status from pgmem.job_runs order by id").fetchall()
        assert runs == [("merge", "ok"), ("prune", "ok"), ("archive", "ok"), ("purge", "ok")]
        assert state(admin, b)["merged_into"] == a


def test_a_killed_batch_leaves_a_record(dsn):
    """Before: a batch killed with its backend rolled back its own job_runs row: no trace. run_job now
    writes the row first, in its own transaction."""
    with connect(dsn) as c:
        remember(c, "a memory for the merge to look at", e(3), 0.5)
        c.execute("insert into pgmem.settings (tenant, key, value) values ('*', 'job_lock_timeout_ms', '60000') "
                  "on conflict (tenant, key) do update set value = excluded.value")
        with connect(dsn, autocommit=False) as holder:
            # a prune batch holds the maintenance lock: the merge batch below waits for it
            holder.execute("select count(*) from pgmem.prune('gentle')")
            victim = Background(dsn, "CALL pgmem.run_job('merge')")
            victim.wait_blocked(c)
            running = c.execute("select id, status, pid from pgmem.job_runs where job = 'merge'").fetchall()
            assert [(r[1], r[2]) for r in running] == [("running", victim.pid)]
            st = c.cursor(row_factory=dict_row).execute("select * from pgmem.job_status where job = 'merge'").fetchone()
            assert st["last_status"] == "running"
            c.execute("select pg_terminate_backend(%s)", (victim.pid,))
            victim.thread.join(10)
            assert isinstance(victim.error, psycopg.OperationalError)
            holder.rollback()
        deadline = time.monotonic() + 10
        while c.execute("select count(*) from pg_stat_activity where pid = %s", (victim.pid,)).fetchone()[0]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        st = c.cursor(row_factory=dict_row).execute("select * from pgmem.job_status where job = 'merge'").fetchone()
        assert (st["last_run_id"], st["last_status"]) == (running[0][0], "interrupted")
        # the next run marks it failed, says why, and runs
        c.execute("CALL pgmem.run_job('merge')")
        runs = c.execute("select id, status, error from pgmem.job_runs where job = 'merge' order by id").fetchall()
        assert runs[0][:2] == (running[0][0], "failed")
        assert runs[0][2].startswith("interrupted: the backend running this batch ended before the batch did")
        assert [r[1] for r in runs[1:]] == ["ok"]


def test_run_job_puts_the_session_tenant_back_when_skipped(dsn):
    """Before: run_job(..., '{"tenant": "*"}') left pgmem.tenant = '' when it was skipped, and the next
    admin call ran over all tenants."""
    with connect(dsn) as c, connect(dsn, autocommit=False) as holder:
        holder.execute("set pgmem.tenant = ''")
        holder.execute("select count(*) from pgmem.merge_duplicates()")  # a batch for all tenants, left open
        c.execute("""CALL pgmem.run_job('merge', '{"tenant": "*"}')""")
        r = c.execute("select status, error from pgmem.job_runs where job = 'merge' and status = 'skipped'").fetchone()
        assert r[0] == "skipped" and r[1].startswith("skipped: a batch of merge for all tenants is running in backend pid")
        assert c.execute("select pgmem.current_tenant()").fetchone()[0] == "acme"
        # and after a failure, and after an error in the arguments
        c.execute("""CALL pgmem.run_job('prune', '{"tenant": "*", "mode": "brutal"}')""")
        assert c.execute("select pgmem.current_tenant()").fetchone()[0] == "acme"
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            c.execute("""CALL pgmem.run_job('prune', '{"tenant": "*", "bogus": 1}')""")
        assert c.execute("select pgmem.current_tenant(), current_setting('search_path')").fetchone() == \
            ("acme", '"$user", public')
