"""The lifecycle on imported history (issue 36; sql/420_prune_archive.sql, "the tenant's own clock").

make demo's conversation (examples/demo_conversation.jsonl, September–October), dated a year
back, is imported into a new tenant. Before issue 36 the nightly archive read the wall clock:
every memory of the import was older than the retention (90 days) and below the archival
activation, and the nightly prune found its decayed importance below 0.01, so the first night
took all of it out of search. Now:

* the first night (run_job prune and archive, no as_of: what pg_cron runs) archives and prunes
  nothing: the tenant's clock is the import, and every memory is in its grace (stored less than
  lifecycle_grace, 30 days, before that clock);
* after a simulated month of use (the import a month back; some memories used during the month,
  others only retrieved), the night archives exactly the memories the month left unused (their
  activation, read from their own dates, is far below .125) and keeps the used ones; prune deletes
  none (an import is never deleted for its dates alone);
* a tenant left idle does not age: its clock stops at its last use.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from conftest import connect
from sqlhelpers import call, rows, scalar

ROOT = Path(__file__).resolve().parents[1]
YEAR = timedelta(days=365)


def remember(conn, text: str, *, age_days: float, importance: float) -> int:
    t = scalar(conn, "select now()")
    r = call(conn, "remember", text, force=True, importance=importance, created_at=t - timedelta(days=age_days))[0]
    assert r["decision"] == "stored", r
    return r["memory_id"]


def stored(conn, mid: int, days_ago: float) -> None:
    """The memory was stored days_ago (its first history row)."""
    conn.execute("update pgmem.history set at = at - %s * interval '1 day' where memory_id = %s", (days_ago, mid))


def _events() -> list[dict]:
    events = [json.loads(line) for line in (ROOT / "examples" / "demo_conversation.jsonl").read_text().splitlines()
              if line.strip()]
    for ev in events:  # the same conversation, a year older
        ev["ts"] = (datetime.fromisoformat(ev["ts"].replace("Z", "+00:00")) - YEAR).isoformat()
    return events


def _import(dsn: str) -> list[int]:
    from pgmem.client import MemoryClient

    with MemoryClient(dsn, tenant="acme") as mc:
        results = mc.remember_many(_events(), progress=False, embed=False)
    return [r.id for r in results if r.stored]


def _states(conn, ids: list[int]) -> dict[int, str]:
    return {r["id"]: r["state"] for r in rows(conn, "select id, state from pgmem.memories where id = any(%s)", (ids,))}


def _night(conn) -> None:
    """The nightly jobs, as pg_cron runs them (no as_of)."""
    for job in ("prune", "archive"):
        conn.execute(f"""CALL pgmem.run_job('{job}', '{{"tenant": "*"}}')""")


def test_an_imported_year_old_conversation_survives_the_night_and_fades_after_a_month_unused(conn, dsn):
    ids = _import(dsn)
    n = len(ids)
    assert n >= 250, n  # (the surprise gate keeps most of the 290 turns)
    oldest = scalar(conn, "select max(now() - created_at) from pgmem.memories where tenant = 'acme'")
    assert oldest > timedelta(days=420)  # a year older than the demo's September–October

    # before issue 36, the night read the wall clock: the what-if at now (as_of given) is that night
    before = call(conn, "archive_stale", dry_run=True, as_of=scalar(conn, "select now()"))
    assert len(before) == n  # every memory of the import (age > 90 days)
    assert len(call(conn, "prune", dry_run=True, as_of=scalar(conn, "select now()"))) == n  # decayed < 0.01

    # the first night: nothing archived or pruned, every memory still searchable
    assert call(conn, "archive_stale", dry_run=True) == []
    conn.execute("delete from pgmem.job_runs")
    _night(conn)
    assert set(_states(conn, ids).values()) == {"active"}
    runs = rows(conn, "select job, examined, changed from pgmem.job_runs where job in ('prune', 'archive') order by id")
    assert [(r["job"], r["changed"]) for r in runs] == [("prune", 0), ("archive", 0)]
    assert runs[1]["examined"] == n
    probe = rows(conn, "select id, content from pgmem.memories where id = any(%s) order by id", (ids,))[::40]
    for m in probe:
        assert m["id"] in {h["id"] for h in call(conn, "search", query_text=m["content"], k=20)}, m

    # a month of use: the import was a month ago; every 7th memory was used during the month (a
    # context packed it), the others were only retrieved (a ranking returned them, nothing used them)
    conn.execute("update pgmem.history set at = at - interval '31 days' where tenant = 'acme'")
    used = ids[::7]
    for i, mid in enumerate(ids):
        days_ago = 1 + (i % 29)
        kind = "use" if mid in used else "retrieval"
        conn.execute("insert into pgmem.accesses (tenant, memory_id, kind, accessed_at) "
                     "values ('acme', %s, %s, now() - %s * interval '1 day')", (mid, kind, days_ago))
    conn.execute("update pgmem.memories set access_count = access_count + 1 where id = any(%s)", (used,))
    conn.execute("delete from pgmem.job_runs")
    dry = {r["memory_id"]: r["reason"] for r in call(conn, "archive_stale", dry_run=True)}
    _night(conn)
    st = _states(conn, ids)
    archived = {i for i, s in st.items() if s == "archived"}
    assert archived == set(ids) - set(used)  # the unused ones, and only them
    assert {st[i] for i in used} == {"active"}
    assert dry == {i: "activation" for i in archived}  # (30 days in the store: not yet its age)
    runs = {r["job"]: r["changed"] for r in rows(conn, "select job, changed from pgmem.job_runs where job in ('prune', 'archive')")}
    assert runs == {"prune": 0, "archive": n - len(used)}
    # the figures of sql/420_prune_archive.sql's comment
    print(f"\nimport: {n} memories; first night: 0 archived, 0 pruned (wall clock: {len(before)}); "
          f"after a month with {len(used)} used: {len(archived)} archived, {len(used)} kept")


def test_an_idle_tenant_does_not_age(conn, dsn):
    """The clock of a tenant nobody uses stops at its last use: six months idle archive nothing
    that was active at that use; the what-if at now (as_of) would."""
    faded = remember(conn, "A note of low importance", age_days=200, importance=0.3)
    stored(conn, faded, 200)
    fresh = remember(conn, "A note written on the last day of use", age_days=180, importance=0.3)
    stored(conn, fresh, 180)  # the tenant's last use: 180 days ago
    clock = scalar(conn, "select pgmem._tenant_clock('acme', now())")
    assert abs((scalar(conn, "select now()") - clock) - timedelta(days=180)) < timedelta(minutes=1)
    # at its clock: faded is 20 days old (younger than archive_min_age), fresh 0
    assert call(conn, "archive_stale", dry_run=True) == []
    assert {r["memory_id"] for r in call(conn, "archive_stale", dry_run=True, as_of=scalar(conn, "select now()"))} == {faded, fresh}
    # memory_activation without as_of reads the clock too: .3 · 2^(-20/30)
    act = scalar(conn, "select activation from pgmem.memory_activation(%s)", (faded,))
    assert abs(act - 0.3 * 2 ** (-20 / 30)) < 1e-4
    # a use today moves the clock to today: faded (200 days) goes for its age
    with connect(dsn, tenant="acme") as c:
        c.execute("select pgmem.touch(array[%s]::bigint[])", (fresh,))
    assert {r["memory_id"]: r["reason"] for r in call(conn, "archive_stale", dry_run=True)} == {faded: "age", fresh: "age"}
