"""Shadow's lifecycle, as designed (issue 24, item 3; sql/420_prune_archive.sql, 425_compact.sql,
110_memory_ops.sql): shadow-memory-system.md, 7. MemoryLifecycleManager and 8. Configuration.

* Archival triggers, any one of them: age over the retention period (90 days), activation below
  the archival threshold, the maxMemories cap (10,000; the least activated first), the manual
  archival command.
* Cleanup: archived memories deleted after their own retention (90 days in the archive), kept in
  history and restorable (also after purge, from history); statistics and compaction as a job.

The activation is recomputed by hand in each test:
    activation(m, t) = max(importance · D(age) · (1 + 0.1·log2(1 + uses)),
                           D(t − latest use),
                           max over activate()'s log of score · D(t − logged_at)),   D(d) = 2^(−d/30 days)
and the default threshold is D(90 days) = 0.125.
"""
from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

from conftest import connect, e, role_connect
from registry import LIVING_FUNCTIONS  # noqa: F401
from sqlhelpers import call, one, rows, scalar

DAY = timedelta(days=1)




def D(days: float) -> float:
    """Shadow's temporal relevance: e^(-ln2·days/30)."""
    return math.exp(-math.log(2) * days / 30)


def decayed(importance: float, age_days: float, uses: int = 0) -> float:
    """Engram: importance · D(age) · (1 + 0.1·log2(1 + uses))."""
    return importance * D(age_days) * (1 + 0.1 * math.log2(1 + uses))


def now(conn) -> datetime:
    return scalar(conn, "select now()")


def remember(conn, text: str, *, age_days: float = 0, importance: float = 0.5, vec=None, **kw) -> int:
    t = now(conn)
    r = call(conn, "remember", text, embedding=vec, force=True, importance=importance,
             created_at=t - timedelta(days=age_days), **kw)[0]
    assert r["decision"] == "stored", r
    return r["memory_id"]


def stored(conn, mid: int, days_ago: float) -> None:
    """The memory was stored days_ago (its first history row): what the nightly jobs' grace reads
    (issue 36; a memory written today, whatever its date, waits lifecycle_grace of use)."""
    conn.execute("update pgmem.history set at = at - %s * interval '1 day' where memory_id = %s", (days_ago, mid))


def use(conn, mid: int, days_ago: float) -> None:
    """A use of the memory days_ago (what the access job folds from a context, or touch():
    pgmem.accesses, access_count)."""
    conn.execute("insert into pgmem.accesses (tenant, memory_id, kind, accessed_at) values ('acme', %s, 'use', now() - %s * interval '1 day')",
                 (mid, days_ago))
    conn.execute("update pgmem.memories set access_count = access_count + 1 where id = %s", (mid,))


def retrieve(conn, mid: int, days_ago: float) -> None:
    """A retrieval: a ranking returned it, nothing used it."""
    conn.execute("insert into pgmem.accesses (tenant, memory_id, kind, accessed_at) values ('acme', %s, 'retrieval', now() - %s * interval '1 day')",
                 (mid, days_ago))


def activated(conn, mid: int, score: float, days_ago: float) -> None:
    """What activate(query_id => ...) logs."""
    conn.execute("insert into pgmem.activation_log (tenant, query_id, memory_id, context_type, score, threshold, activated, logged_at)"
                 " values ('acme', %s, %s, 'conversation', %s, .3, %s >= .3, now() - %s * interval '1 day')",
                 (uuid.uuid4(), mid, score, score, days_ago))


def state(conn, mid: int) -> str:
    return scalar(conn, "select state from pgmem.memories where id = %s", (mid,))


def hist(conn, mid: int) -> list[dict]:
    return rows(conn, "select op, details, before, after from pgmem.history where memory_id = %s order by id", (mid,))


# ============================================================================ activation
def test_activation_by_hand(conn):
    """The largest of the three parts, each recomputed; memory_activation shows each, and the
    view memory_health carries the same number."""
    plain = remember(conn, "The legacy VPN gateway is vpn-old.example", age_days=40, importance=0.6)
    used = remember(conn, "The office printer is on the third floor", age_days=40, importance=0.2)
    shown = remember(conn, "The staging database is db-stage.example", age_days=40, importance=0.2)
    use(conn, used, 12)
    use(conn, used, 20)
    retrieve(conn, used, 1)  # a retrieval is not a use: it keeps nothing alive
    activated(conn, shown, 0.8, 10)
    activated(conn, shown, 0.9, 45)  # older: 0.9·D(45) = .318 < 0.8·D(10) = .635
    t = now(conn)
    got = {r["id"]: r for r in (one(conn, "select * from pgmem.memory_activation(%s, %s)", (i, t)) for i in (plain, used, shown))}

    assert got[plain]["activation"] == pytest.approx(decayed(0.6, 40), abs=1e-6)  # (importance is a real)  # .238
    assert got[plain]["last_use"] is None and got[plain]["best_activation_score"] is None
    # two uses: the boost counts both; the latest use (12 days ago) gives D(12) = .758
    assert got[used]["decayed_importance"] == pytest.approx(decayed(0.2, 40, uses=2), abs=1e-6)
    assert got[used]["last_use_relevance"] == pytest.approx(D(12), abs=1e-6)
    assert got[used]["activation"] == pytest.approx(D(12), abs=1e-6)
    assert got[shown]["best_activation_score"] == pytest.approx(0.8, abs=1e-6)
    assert got[shown]["best_activation_relevance"] == pytest.approx(0.8 * D(10), abs=1e-6)
    assert got[shown]["activation"] == pytest.approx(0.8 * D(10), abs=1e-6)
    for r in got.values():
        assert r["threshold"] == pytest.approx(0.125) and r["below_threshold"] is (r["activation"] < 0.125)
    # 0.125 is D(90 days): the design's decay at its retention period
    assert D(90) == pytest.approx(0.125)
    # as of 60 days later every part has decayed by D(60) = .25
    later = one(conn, "select * from pgmem.memory_activation(%s, %s)", (shown, t + 60 * DAY))
    assert later["activation"] == pytest.approx(0.8 * D(70), abs=1e-6) and not later["below_threshold"]  # .159
    later = one(conn, "select * from pgmem.memory_activation(%s, %s)", (shown, t + 100 * DAY))
    assert later["activation"] == pytest.approx(0.8 * D(110), abs=1e-6) and later["below_threshold"]  # .063
    health = {r["id"]: r["activation"] for r in rows(conn, "select id, activation from pgmem.memory_health")}
    for i in (plain, used, shown):
        assert health[i] == pytest.approx(got[i]["activation"], abs=1e-4)

    with pytest.raises(psycopg.errors.NoDataFound, match="does not exist"):
        conn.execute("select * from pgmem.memory_activation(%s)", (shown + 1000,))


# ============================================================================ archival triggers
def test_archive_on_any_trigger(conn):
    """Shadow's "Archival Triggers": age over the retention OR activation below the threshold.
    Old age alone archives a memory in use (the design's "or"); below the threshold a memory
    older than archive_min_age (30 days) is archived; a retrieval keeps nothing."""
    ids = {
        # age 100 > 90 days, used yesterday: archived for its age
        "old_in_use": remember(conn, "The old VPN gateway is vpn-old.example", age_days=100, importance=0.9),
        # 40 days, importance .1: .1·D(40) = .040 < .125
        "faded": remember(conn, "The cafeteria menu changes on Mondays", age_days=40, importance=0.1),
        # 40 days, importance .9: .9·D(40) = .357
        "important": remember(conn, "Production database password rotates quarterly", age_days=40, importance=0.9),
        # 40 days, importance .1, used 10 days ago: D(10) = .794
        "used": remember(conn, "The deploy script lives in ops/deploy.sh", age_days=40, importance=0.1),
        # 40 days, importance .1, retrieved (not used) yesterday: still .040
        "retrieved": remember(conn, "The wiki has a page about onboarding", age_days=40, importance=0.1),
        # 40 days, importance .1, activated at .8 20 days ago: .8·D(20) = .504
        "activated": remember(conn, "The on-call rotation is weekly", age_days=40, importance=0.1),
        # 10 days (younger than archive_min_age), importance .05: spared
        "young": remember(conn, "Lunch was at noon today", age_days=10, importance=0.05),
        # at the edge: 31 days, importance just above and below .125·2^(31/30)
        "edge_above": remember(conn, "Edge case above the threshold", age_days=31, importance=0.125 * 2 ** (31 / 30) * 1.01),
        "edge_below": remember(conn, "Edge case below the threshold", age_days=31, importance=0.125 * 2 ** (31 / 30) * 0.99),
    }
    use(conn, ids["old_in_use"], 1)
    use(conn, ids["used"], 10)
    retrieve(conn, ids["retrieved"], 1)
    activated(conn, ids["activated"], 0.8, 20)
    t = now(conn)
    dry = call(conn, "archive_stale", dry_run=True, as_of=t)
    assert {r["memory_id"]: r["reason"] for r in dry} == {ids["old_in_use"]: "age", ids["faded"]: "activation",
                                                           ids["retrieved"]: "activation", ids["edge_below"]: "activation"}
    act = {r["memory_id"]: r["activation"] for r in dry}
    assert act[ids["faded"]] == pytest.approx(decayed(0.1, 40), abs=1e-6)
    assert act[ids["edge_below"]] == pytest.approx(0.125 * 0.99, abs=1e-6)
    assert act[ids["old_in_use"]] is None  # past the retention: archived whatever its activation
    assert all(state(conn, i) == "active" for i in ids.values())  # a dry run changes nothing

    res = call(conn, "archive_stale", as_of=t)
    assert {r["memory_id"]: (r["reason"], r["applied"]) for r in res} == {i: (x, True) for i, x in
                                                                          ((r["memory_id"], r["reason"]) for r in dry)}
    assert next(r for r in res if r["memory_id"] == ids["old_in_use"])["age_days"] == pytest.approx(100, abs=0.01)
    archived = {k for k, i in ids.items() if state(conn, i) == "archived"}
    assert archived == {"old_in_use", "faded", "retrieved", "edge_below"}
    h = hist(conn, ids["faded"])[-1]
    assert h["op"] == "archive" and h["details"]["reason"] == "activation" and h["details"]["job"] == "archive"
    assert h["before"]["state"] == "active" and h["after"]["state"] == "archived"
    assert hist(conn, ids["old_in_use"])[-1]["details"]["reason"] == "age"
    run = rows(conn, "select * from pgmem.job_runs where job = 'archive' order by id")[-1]
    assert run["examined"] == len(ids) and run["changed"] == 4
    assert run["details"]["age"] == 1 and run["details"]["activation"] == 3
    # archived memories leave search, and come back with restore
    found = lambda **kw: {r["id"] for r in call(conn, "search", query_text="cafeteria menu Mondays", k=10, **kw)}
    assert ids["faded"] not in found() and ids["faded"] in found(filters={"state": ["active", "archived"]})
    assert one(conn, "select * from pgmem.restore(%s)", (ids["faded"],))["state"] == "active"
    assert ids["faded"] in found()
    assert call(conn, "archive_stale", as_of=t, activation_threshold=0.0) == []  # (restored: archived again only by activation)


def test_triggers_are_settings_per_tenant_and_arguments_override_them(conn):
    """archive_retention, archive_activation_threshold, archive_min_age: each tenant's own
    value, else the installation default; JSON null / 0 switch a trigger off; an argument wins."""
    old = remember(conn, "An old note", age_days=100, importance=0.9)
    faded = remember(conn, "A faded note", age_days=40, importance=0.1)
    t = now(conn)
    got = lambda **kw: {r["memory_id"]: r["reason"] for r in call(conn, "archive_stale", dry_run=True, as_of=t, **kw)}
    assert got() == {old: "age", faded: "activation"}
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'archive_retention', 'null'), "
                 "('acme', 'archive_activation_threshold', '0')")
    assert got() == {}
    assert got(retention="90 days") == {old: "age"}
    # 100 days, importance .9: .9·D(100) = .089 < .125
    assert got(activation_threshold=0.125) == {old: "activation", faded: "activation"}
    conn.execute("update pgmem.settings set value = '0.05' where tenant = 'acme' and key = 'archive_activation_threshold'")
    assert got() == {faded: "activation"}  # .040 < .05 <= .089
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'archive_min_age', '\"50 days\"')")
    assert got() == {}
    assert got(min_age="30 days") == {faded: "activation"}
    for bad, msg in ((dict(retention="-1 day"), "retention"), (dict(min_age="-1 day"), "min_age"),
                     (dict(activation_threshold=1.5), "activation_threshold"), (dict(max_memories=-1), "max_memories")):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=msg):
            call(conn, "archive_stale", **bad)


def test_the_cap_archives_the_least_activated_first(conn):
    """maxMemories: per user scope (max_memories_per "user"), the active memories beyond the cap,
    least activated first; the memories the other triggers archive do not count. Per tenant
    with max_memories_per "tenant"."""
    imp = [0.9, 0.7, 0.5, 0.3, 0.1]
    a = [remember(conn, f"Maya note {i}", importance=x, user_id="maya", age_days=1) for i, x in enumerate(imp)]
    b = [remember(conn, f"Tom note {i}", importance=x, user_id="tom", age_days=1) for i, x in enumerate(imp[:2])]
    use(conn, a[4], 0)  # the least important, used just now: activation 1, the most activated
    t = now(conn)
    res = call(conn, "archive_stale", dry_run=True, as_of=t, max_memories=3)
    # activations: a0 .9·D(1), a1 .7·D(1), a2 .5·D(1), a3 .3·D(1), a4 1 (used): the two least are a3, a2
    assert {r["memory_id"]: r["reason"] for r in res} == {a[3]: "cap", a[2]: "cap"}
    assert {r["memory_id"]: r["activation"] for r in res} == pytest.approx({a[3]: 0.3 * D(1), a[2]: 0.5 * D(1)}, abs=1e-6)
    # another trigger archives one of maya's: the cap then archives one memory fewer
    old = remember(conn, "Maya old note", importance=0.95, user_id="maya", age_days=100)
    res = call(conn, "archive_stale", dry_run=True, as_of=t, max_memories=3)
    assert {r["memory_id"]: r["reason"] for r in res} == {old: "age", a[3]: "cap", a[2]: "cap"}
    # per tenant: 7 active besides the old one, cap 3 -> the 4 least activated of both users
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'max_memories_per', '\"tenant\"'), "
                 "('acme', 'max_memories', '3')")
    res = call(conn, "archive_stale", dry_run=True, as_of=t)
    assert {r["memory_id"]: r["reason"] for r in res} == {old: "age", a[3]: "cap", a[2]: "cap", a[1]: "cap", b[1]: "cap"}
    # the run in batches of one archives the same memories, each batch one, and forgets its cut-offs
    conn.execute("CALL pgmem.run_job('archive', %s)", (Jsonb({"batch": 1, "as_of": t.isoformat()}),))
    assert {i for i in a + b + [old] if state(conn, i) == "archived"} == {old, a[3], a[2], a[1], b[1]}
    runs = [r for r in rows(conn, "select * from pgmem.job_runs where job = 'archive' order by id") if not r["params"]["dry_run"]]
    assert [r["changed"] for r in runs] == [1, 1, 1, 1, 1, 0]
    assert rows(conn, "select * from pgmem.job_state where job like 'archive%%'") == []
    assert {h["details"]["reason"] for i in (a[3], b[1]) for h in hist(conn, i)[-1:]} == {"cap"}
    # max_memories 0: no cap
    conn.execute("select * from pgmem.restore(%s)", (a[3],))
    assert call(conn, "archive_stale", dry_run=True, as_of=t, max_memories=0) == []
    conn.execute("update pgmem.settings set value = '\"everyone\"' where tenant = 'acme' and key = 'max_memories_per'")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='max_memories_per must be "user" or "tenant"'):
        call(conn, "archive_stale", dry_run=True)


def test_manual_archive(conn):
    """Shadow's "Manual archival command": pgmem.archive(ids), in history with the reason,
    restorable; clear errors for what it cannot archive."""
    a = remember(conn, "Keep this one out of the way for now", vec=e(1))
    b = remember(conn, "And this one as well", vec=e(2))
    got = rows(conn, "select id, state from pgmem.archive(array[%s, %s], 'moved to the wiki')", (a, b))
    assert got == [{"id": a, "state": "archived"}, {"id": b, "state": "archived"}]
    h = hist(conn, a)[-1]
    assert h["op"] == "archive" and h["details"] == {"manual": True, "reason": "moved to the wiki"}
    assert rows(conn, "select id from pgmem.archive(array[%s])", (a,)) == [{"id": a}]  # already archived: unchanged
    assert len([x for x in hist(conn, a) if x["op"] == "archive"]) == 1
    assert call(conn, "search", query_text="this one", query_embedding=e(1), k=5) == []
    conn.execute("select * from pgmem.restore(%s)", (a,))
    assert state(conn, a) == "active"
    lc = {(r["op"], r["reason"]): r["memories"] for r in rows(conn, "select * from pgmem.lifecycle_changes")}
    assert lc[("archive", "moved to the wiki")] == 2 and lc[("restore", None)] == 1

    with pytest.raises(psycopg.errors.NoDataFound, match=f'no memory {b + 100} for tenant "acme"'):
        conn.execute("select * from pgmem.archive(array[%s, %s])", (a, b + 100))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="needs the ids"):
        conn.execute("select * from pgmem.archive('{}'::bigint[])")
    conn.execute("select pgmem.forget(%s)", (a,))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"memory {a} is deleted: pgmem.restore\\({a}\\) brings it back first"):
        conn.execute("select * from pgmem.archive(array[%s])", (a,))
    conn.execute("update pgmem.memories set state = 'merged', merged_into = %s where id = %s", (b, a))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"memory {a} was merged into memory {b}"):
        conn.execute("select * from pgmem.archive(array[%s])", (a,))
    assert state(conn, b) == "archived"


# ============================================================================ cleanup
def test_archived_memories_are_deleted_after_their_retention_and_restored_from_history(conn):
    """"Delete archived memories after retention period": after archive_delete_after (90 days)
    in the archive, state deleted (in history, restorable). After purge, restore writes the
    memory again from its last history snapshot, with its id; an erased one stays gone."""
    a = remember(conn, "Archived long ago", user_id="maya", vec=e(3), metadata=Jsonb({"source": "test"}))
    b = remember(conn, "Archived recently", user_id="maya")
    conn.execute("select * from pgmem.archive(array[%s, %s])", (a, b))
    conn.execute("update pgmem.memories set state_changed_at = now() - interval '91 days' where id = %s", (a,))
    conn.execute("update pgmem.memories set state_changed_at = now() - interval '89 days' where id = %s", (b,))
    assert [r["memory_id"] for r in call(conn, "delete_archived", dry_run=True)] == [a]
    res = call(conn, "delete_archived")
    assert [(r["memory_id"], r["applied"]) for r in res] == [(a, True)]
    assert (state(conn, a), state(conn, b)) == ("deleted", "archived")
    h = hist(conn, a)[-1]
    assert h["op"] == "delete" and h["details"]["job"] == "delete_archived" and h["before"]["state"] == "archived"
    # the setting, per tenant; an argument wins
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'archive_delete_after', '\"80 days\"')")
    assert [r["memory_id"] for r in call(conn, "delete_archived", dry_run=True)] == [b]
    conn.execute("update pgmem.settings set value = 'null' where tenant = 'acme' and key = 'archive_delete_after'")
    assert call(conn, "delete_archived", dry_run=True) == []
    assert [r["memory_id"] for r in call(conn, "delete_archived", dry_run=True, older_than="1 day")] == [b]

    # purged: gone from memories, its last state in history; restore brings it back from there
    before = one(conn, "select content, user_id, metadata, created_at, importance from pgmem.memories where id = %s", (a,))
    assert [r["memory_id"] for r in call(conn, "purge", older_than="0 seconds")] == [a]
    assert scalar(conn, "select count(*) from pgmem.memories where id = %s", (a,)) == 0
    back = one(conn, "select * from pgmem.restore(%s, 'wanted after all')", (a,))
    assert back["id"] == a and back["state"] == "active" and back["embedding"] is None
    assert {k: back[k] for k in before} == before
    assert scalar(conn, "select count(*) from pgmem.embedding_queue where memory_id = %s", (a,)) == 1  # re-embedded by the worker
    ops = [h["op"] for h in hist(conn, a)]
    assert ops == ["add", "archive", "update", "delete", "purge", "restore"]
    assert hist(conn, a)[-1]["details"]["previous_state"] == "purged"
    assert a in {r["id"] for r in call(conn, "search", query_text="Archived long ago", k=5)}
    # erased with its user: refused, its content was not kept
    c = remember(conn, "Erased with its user", user_id="zoe")
    conn.execute("select pgmem.erase_user('zoe')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"memory {c} was erased with its user"):
        conn.execute("select * from pgmem.restore(%s)", (c,))
    with pytest.raises(psycopg.errors.NoDataFound, match="does not exist"):
        conn.execute("select * from pgmem.restore(%s)", (c + 1000,))


def test_compact_analyzes_what_changed_and_vacuum_runs_as_its_own_statement(conn, dsn):
    """Shadow's "Compact memory store indices" and "Update system statistics": ANALYZE of the
    tables the night changed (as the owner), VACUUM (a statement no function may run) from
    vacuum_command(), both in the job-run views."""
    ids = [remember(conn, f"Compaction note {i}", importance=0.1, age_days=100) for i in range(60)]
    conn.execute("analyze pgmem.memories")
    # 60 rows changed (their old versions dead); as_of given: judged at that instant (without it
    # the night spares memories stored today whatever their dates: test_lifecycle_import.py)
    call(conn, "archive_stale", as_of=now(conn))
    conn.execute("select pg_stat_force_next_flush()")
    dry = {(r["relation"], r["action"]): r for r in call(conn, "compact", dry_run=True)}
    assert not dry[("pgmem.memories", "analyze")]["applied"]
    assert dry[("pgmem.memories", "analyze")]["changed_since_analyze"] >= 60
    # 60 dead row versions of 60 live ones: over vacuum_fraction .2, VACUUM is due (not run by a function)
    assert dry[("pgmem.memories", "vacuum")]["dead_rows"] >= 60 and not dry[("pgmem.memories", "vacuum")]["applied"]
    res = {(r["relation"], r["action"]): r for r in call(conn, "compact")}
    assert res[("pgmem.memories", "analyze")]["applied"]
    conn.execute("select pg_stat_force_next_flush()")
    assert scalar(conn, "select n_mod_since_analyze from pg_stat_user_tables where relid = 'pgmem.memories'::regclass") == 0
    run = rows(conn, "select * from pgmem.job_runs where job = 'compact' order by id")[-1]
    assert "memories" in run["details"]["analyzed"] and "memories" in run["details"]["vacuum_due"] and run["status"] == "ok"
    assert {r["job"] for r in rows(conn, "select job from pgmem.job_status")} >= {"archive", "compact"}
    cmd = scalar(conn, "select pgmem.vacuum_command()")
    assert cmd.startswith("VACUUM (ANALYZE, SKIP_LOCKED) ") and "pgmem.memories" in cmd and "py_modules" not in cmd
    conn.execute(cmd)  # (autocommit: outside a transaction block, as pg_cron runs it)
    conn.execute("select pg_stat_force_next_flush()")
    assert scalar(conn, "select n_dead_tup from pg_stat_user_tables where relid = 'pgmem.memories'::regclass") == 0
    assert len(ids) == 60
    # the next compact records when each table was last vacuumed
    call(conn, "compact")
    run = rows(conn, "select * from pgmem.job_runs where job = 'compact' order by id")[-1]
    assert "memories" in run["details"]["last_vacuum"]
    with connect(dsn, tenant="acme") as c, pytest.raises(psycopg.errors.InvalidParameterValue):
        c.execute("select * from pgmem.compact(min_changed_fraction => 2)")


def test_the_nightly_jobs_apply_it_by_default(conn, dsn):
    """What pg_cron runs (run_job for every tenant, with no parameters): each tenant's settings;
    the lifecycle_changes view and job_status show it."""
    old = remember(conn, "A memory from last spring", age_days=120, importance=0.9)
    faded = remember(conn, "A faded memory", age_days=45, importance=0.1)
    keep = remember(conn, "A fresh memory", age_days=1, importance=0.5)
    # (stored when they were written: the night reads each tenant's clock, today, the latest write)
    stored(conn, old, 120)
    stored(conn, faded, 45)
    with connect(dsn, tenant="globex") as g:
        g_old = remember(g, "Globex memory from last spring", age_days=120, importance=0.9)
        stored(g, g_old, 120)
        g.execute("insert into pgmem.settings (tenant, key, value) values ('globex', 'archive_retention', '\"200 days\"'), "
                  "('globex', 'archive_activation_threshold', '0')")
    for job in ("archive", "delete_archived", "compact"):
        conn.execute(f"""CALL pgmem.run_job('{job}', '{{"tenant": "*"}}')""")
    assert (state(conn, old), state(conn, faded), state(conn, keep), state(conn, g_old)) == ("archived", "archived", "active", "active")
    st = {r["job"]: r for r in rows(conn, "select * from pgmem.job_status where tenant is null")}
    assert st["archive"]["last_status"] == "ok" and st["archive"]["last_changed"] == 2
    assert st["delete_archived"]["last_status"] == "ok" and st["compact"]["last_status"] == "ok"
    lc = {(r["op"], r["reason"]): r["memories"] for r in rows(conn, "select * from pgmem.lifecycle_changes where tenant = 'acme'")}
    assert lc == {("archive", "age"): 1, ("archive", "activation"): 1}
    # the default schedules hold all three, nightly (and VACUUM after them)
    sched = {r["job_name"].split("-")[1]: r["schedule"] for r in rows(conn, "select * from pgmem.job_schedule_commands()")}
    assert (sched["archive"], sched["delete_archived"], sched["compact"], sched["vacuum"]) == \
        ("30 3 * * *", "35 3 * * *", "0 4 * * *", "10 4 * * *")


# ============================================================================ tenancy
def test_the_lifecycle_keeps_to_the_tenant(cluster, dsn, roles):  # noqa: F811
    """Real app and reader logins: tenant a archives, restores (also from history after purge)
    and reads the activation and the lifecycle view of its own memories only; b's memories,
    history and settings stay as they were."""
    a = role_connect(cluster, dsn, roles, "app", "a")
    b = role_connect(cluster, dsn, roles, "app", "b")
    reader = role_connect(cluster, dsn, roles, "bi", "a")
    with connect(dsn, tenant=None) as su:
        mine = scalar(a, "select memory_id from pgmem.remember('a note of tenant a', force => true)")
        theirs = scalar(b, "select memory_id from pgmem.remember('a note of tenant b', force => true)")
        b.execute("select * from pgmem.archive(array[%s])", (theirs,))
        snap = lambda: rows(su, "select id, state, updated_at from pgmem.memories where tenant = 'b' order by id") + \
            rows(su, "select id, op from pgmem.history where tenant = 'b' order by id")
        before = snap()
        for q in ("select * from pgmem.archive(array[%s])", "select * from pgmem.memory_activation(%s)",
                  "select * from pgmem.restore(%s)"):
            with pytest.raises(psycopg.errors.NoDataFound):
                a.execute(q, (theirs,))
        assert rows(a, "select id from pgmem.archive(array[%s])", (mine,)) == [{"id": mine}]
        assert scalar(a, "select activation from pgmem.memory_activation(%s)", (mine,)) >= 0
        assert {r["tenant"] for r in rows(reader, "select tenant from pgmem.lifecycle_changes")} == {"a"}
        assert {r["tenant"] for r in rows(reader, "select tenant, activation from pgmem.memory_health")} == {"a"}
        # the jobs are the administrator's
        for q in ("select * from pgmem.delete_archived()", "select * from pgmem.compact()", "select * from pgmem.archive_stale()"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                a.execute(q)
        # a purged memory comes back for its own tenant only
        su.execute("update pgmem.memories set state = 'deleted' where id in (%s, %s)", (mine, theirs))
        su.execute("select * from pgmem.purge(older_than => '0 seconds')")
        before = [r for r in before if "state" not in r] + [r for r in rows(su, "select id, op from pgmem.history where tenant = 'b' and id > %s order by id",
                                                                           (max(r["id"] for r in before if "op" in r),))]
        back = one(a, "select id, state, content from pgmem.restore(%s)", (mine,))
        assert back == {"id": mine, "state": "active", "content": "a note of tenant a"}
        with pytest.raises(psycopg.errors.NoDataFound):
            a.execute("select * from pgmem.restore(%s)", (theirs,))
        assert scalar(su, "select count(*) from pgmem.memories where id = %s", (theirs,)) == 0
        assert rows(su, "select id, op from pgmem.history where tenant = 'b' order by id") == \
            [r for r in before if "op" in r]
    for c in (a, b, reader):
        c.close()


# ============================================================================ client and command line
def test_client_and_cli(dsn):
    """MemoryClient.archive / memory_activation / run_job('archive'); `pgmem archive`, `pgmem jobs
    run archive --dry-run`, `pgmem jobs vacuum`: errors as messages, no traceback."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pgmem.client import MemoryClient

    root = Path(__file__).resolve().parent.parent
    with MemoryClient(dsn, tenant="acme", embedder=None) as mc:
        mid = mc.remember("A note about the office Wi-Fi", extract=False, embed=False, force=True).id
        assert mc.memory_activation(mid)["activation"] == pytest.approx(mc.get(mid)["importance"], abs=1e-3)
        assert [r["state"] for r in mc.archive([mid], reason="by hand")] == ["archived"]
        assert mc.restore(mid)["state"] == "active"
        assert mc.run_job("archive", dry_run=True) == []
    env = {**os.environ, "PGMEM_DSN": dsn, "PYTHONPATH": str(root / "python"), "PGMEM_TENANT": "acme"}
    run = lambda *a: subprocess.run([sys.executable, "-c", "import sys; from pgmem.cli import main; sys.exit(main())", *a],
                                    env=env, capture_output=True, text=True, timeout=120)
    p = run("archive", str(mid), "--reason", "from the CLI")
    assert p.returncode == 0 and f"memory {mid} is archived (restore with: pgmem restore {mid})" in p.stdout, p.stderr
    p = run("archive", str(mid + 100))
    assert p.returncode != 0 and f"no memory {mid + 100}" in p.stderr and "Traceback" not in p.stderr
    p = run("jobs", "run", "archive", "--dry-run", "--param", "retention=0 seconds")
    assert p.returncode == 0 and "reason" in p.stdout and "activation" in p.stdout, p.stderr
    p = run("jobs", "vacuum")
    assert p.returncode == 0 and p.stdout.startswith("VACUUM (ANALYZE, SKIP_LOCKED) pgmem."), p.stderr
