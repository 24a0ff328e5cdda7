"""Lifecycle jobs of sql/400_jobs.sql: duplicate merge and unmerge, pruning, purge, archival,
relevance feedback and threshold tuning, job bookkeeping (job_runs, job_status, run_job) and
pg_cron scheduling (SQL and the ``pgmem jobs`` CLI).

Expected behaviour comes from the designs:
* engram.md, Deduplication & Merging: similarity >= 0.85 (cosine with embeddings, Jaccard of
  tokens without), same category unless >= 0.95; keep the more important memory, sum the
  access counts, record merged_from.
* engram.md, Pruning Modes: gentle = expired; normal = + decayed importance < 0.01;
  aggressive = + the bottom 10% by decayed importance.
* shadow-memory-system.md, ThresholdManager (false-positive rate > 0.2 raises the threshold by
  0.1, false-negative rate > 0.2 lowers it, within [0, 1]) and MemoryLifecycleManager (old and
  not activated recently -> archived: tests/test_lifecycle.py).

Vectors are built by hand (384-d unit vectors on chosen axes) so every cosine is known.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

from conftest import CRON_DB, DIM, at_cos, connect, e
from sqlhelpers import call, one, rows, scalar
ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo_conversation.jsonl"


# ---------------------------------------------------------------------------- helpers
def rot(i: int, j: int, angle: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = math.cos(angle)
    v[j] = math.sin(angle)
    return v



def remember(conn, content: str, embedding=None, *, force: bool = True, **kw) -> int:
    r = call(conn, "remember", content, embedding=embedding, force=force, **kw)[0]
    assert r["decision"] == "stored", r
    return r["memory_id"]


def merge(conn, **kw) -> list[dict]:
    return call(conn, "merge_duplicates", **kw)


def pairs_of(result: list[dict]) -> set[tuple[int, int]]:
    return {(r["survivor_id"], r["merged_id"]) for r in result}


def mem(conn, mid: int) -> dict:
    return one(conn, "select * from pgmem.memories where id = %s", (mid,))


def hist(conn, mid: int) -> list[dict]:
    return rows(conn, "select * from pgmem.history where memory_id = %s order by id", (mid,))


def links(conn) -> set[tuple]:
    return {(r["src_id"], r["dst_id"], r["kind"], round(float(r["weight"]), 5), r["count"],
             json.dumps(r["metadata"], sort_keys=True))
            for r in rows(conn, "select * from pgmem.links")}


def snapshot(conn) -> dict:
    """Everything a dry run must leave alone."""
    return {
        "memories": [tuple(r.values()) for r in rows(conn, "select id, state, merged_into, merged_from, access_count, "
                                                     "importance, updated_at, state_changed_at from pgmem.memories order by id")],
        "history": scalar(conn, "select count(*) from pgmem.history"),
        "links": links(conn),
        "job_state": rows(conn, "select tenant, job, cursor_at, cursor_id from pgmem.job_state order by 1, 2"),
    }


def job_runs(conn, job: str | None = None) -> list[dict]:
    if job is None:
        return rows(conn, "select * from pgmem.job_runs order by id")
    return rows(conn, "select * from pgmem.job_runs where job = %s order by id", (job,))


def touch(conn, ids, times: int = 1) -> None:
    for _ in range(times):
        conn.execute("select pgmem.touch(%s::bigint[])", (list(ids),))


def add_link(conn, src: int, dst: int, kind: str, weight: float = 1.0, count: int = 1, tenant: str = "acme") -> None:
    conn.execute("insert into pgmem.links (tenant, src_id, dst_id, kind, weight, count) values (%s, %s, %s, %s, %s, %s)",
                 (tenant, src, dst, kind, weight, count))


def wait_gone(conn, pid: int, seconds: float = 10.0) -> None:
    """Wait until backend pid has left pg_stat_activity (a closed connection's backend exits a moment later)."""
    deadline = time.monotonic() + seconds
    while conn.execute("select count(*) from pg_stat_activity where pid = %s", (pid,)).fetchone()[0]:
        assert time.monotonic() < deadline, f"backend {pid} still alive"
        time.sleep(0.02)


def now(conn) -> datetime:
    return scalar(conn, "select now()")


# ============================================================================ merge
def _merge_fixture(conn) -> dict[str, int]:
    """Four pairs with known cosine and categories, plus two unrelated memories for links."""
    ids = {}
    # 0.90, same category -> merged; the more important one survives
    ids["sq_lo"] = remember(conn, "Deploy window is Tuesday morning", e(0), category="fact", importance=0.4)
    ids["sq_hi"] = remember(conn, "Deploys happen on Tuesday mornings", at_cos(0, 1, 0.90), category="fact", importance=0.7)
    # 0.90, different category -> not merged
    ids["dc_a"] = remember(conn, "Maya likes green tea", e(2), category="fact", importance=0.5)
    ids["dc_b"] = remember(conn, "Maya prefers green tea", at_cos(2, 3, 0.90), category="preference", importance=0.6)
    # 0.96, different category -> merged; equal importance -> the lower id survives
    ids["xc_a"] = remember(conn, "The office is in Kreuzberg", e(4), category="fact", importance=0.5)
    ids["xc_b"] = remember(conn, "Office location: Kreuzberg", at_cos(4, 5, 0.96), category="context", importance=0.5)
    # 0.80, same category -> not merged
    ids["lo_a"] = remember(conn, "The CI runs on GitHub Actions", e(6), category="fact", importance=0.5)
    ids["lo_b"] = remember(conn, "CI pipelines moved to Buildkite", at_cos(6, 7, 0.80), category="fact", importance=0.5)
    ids["x"] = remember(conn, "Unrelated memory x", e(10), importance=0.5)
    ids["y"] = remember(conn, "Unrelated memory y", e(11), importance=0.5)
    return ids


EXPECTED_MERGE = [("sq_hi", "sq_lo", 0.90, True), ("xc_a", "xc_b", 0.96, False)]


def test_merge_thresholds_categories_and_survivor(conn):
    ids = _merge_fixture(conn)
    touch(conn, [ids["sq_lo"]], 3)
    touch(conn, [ids["sq_hi"]], 2)
    touch(conn, [ids["xc_b"]], 1)
    before = {k: mem(conn, v) for k, v in ids.items()}

    res = merge(conn)
    got = {(r["survivor_id"], r["merged_id"]): r for r in res}
    assert set(got) == {(ids[s], ids[m]) for s, m, _, _ in EXPECTED_MERGE}
    for s, m, sim, same in EXPECTED_MERGE:
        r = got[(ids[s], ids[m])]
        assert r["similarity"] == pytest.approx(sim, abs=1e-4)
        assert r["same_category"] is same
        assert r["method"] == "cosine" and r["applied"] is True

    for s, m, _, _ in EXPECTED_MERGE:
        sv, lo = mem(conn, ids[s]), mem(conn, ids[m])
        assert sv["state"] == "active" and sv["merged_into"] is None
        assert lo["state"] == "merged" and lo["merged_into"] == ids[s]
        assert ids[m] in sv["merged_from"]
        assert sv["access_count"] == before[s]["access_count"] + before[m]["access_count"]
        assert lo["access_count"] == before[m]["access_count"]  # the merged memory keeps its own count
        # history: both sides, op merge, with their role
        hs = [h for h in hist(conn, ids[s]) if h["op"] == "merge"]
        hm = [h for h in hist(conn, ids[m]) if h["op"] == "merge"]
        assert len(hs) == 1 and hs[0]["details"]["role"] == "survivor" and hs[0]["details"]["merged_id"] == ids[m]
        assert len(hm) == 1 and hm[0]["details"]["role"] == "merged" and hm[0]["details"]["survivor_id"] == ids[s]
        assert hm[0]["before"]["state"] == "active" and hm[0]["after"]["state"] == "merged"
    assert mem(conn, ids["sq_hi"])["access_count"] == 5
    # not merged
    for k in ("dc_a", "dc_b", "lo_a", "lo_b", "x", "y"):
        m = mem(conn, ids[k])
        assert m["state"] == "active" and m["merged_into"] is None and m["merged_from"] == []


def test_merge_repoints_links_and_unmerge_restores_them(conn):
    ids = _merge_fixture(conn)
    lo, hi, x, y = ids["sq_lo"], ids["sq_hi"], ids["x"], ids["y"]
    touch(conn, [lo], 3)
    touch(conn, [hi], 2)
    add_link(conn, x, lo, "temporal", 1.0, 1)
    add_link(conn, x, hi, "temporal", 2.0, 2)   # the survivor has the same link: weights add up
    add_link(conn, lo, hi, "temporal", 1.0, 1)  # between the two: dropped while merged
    touch(conn, [lo, y])                        # a co_access link lo -- y (and +1 access each)
    links_before = links(conn)
    assert (min(lo, y), max(lo, y), "co_access", 1.0, 1, "{}") in links_before
    hi_before, lo_before = mem(conn, hi), mem(conn, lo)

    assert (hi, lo) in pairs_of(merge(conn))

    after = {(s, d, k): (w, c, md) for s, d, k, w, c, md in links(conn)}
    assert not any(lo in (s, d) for (s, d, k) in after if k != "merged"), after
    assert after[(lo, hi, "merged")][0] == pytest.approx(0.90, abs=1e-4)
    assert after[(x, hi, "temporal")][:2] == (3.0, 3)
    co = after[(min(hi, y), max(hi, y), "co_access")]
    assert co[:2] == (1.0, 1) and json.loads(co[2])["via_merge"] == lo
    assert (hi, hi, "temporal") not in after
    survivor = mem(conn, hi)
    assert survivor["access_count"] == hi_before["access_count"] + lo_before["access_count"]
    assert survivor["merged_from"] == [lo]

    m = one(conn, "select * from pgmem.unmerge(%s)", (lo,))
    assert m["state"] == "active" and m["merged_into"] is None
    s = mem(conn, hi)
    assert s["access_count"] == hi_before["access_count"]
    assert s["merged_from"] == hi_before["merged_from"] == []
    assert mem(conn, lo)["access_count"] == lo_before["access_count"]
    xc = {ids["xc_a"], ids["xc_b"]}  # the other pair (merged too, not unmerged)
    assert {l for l in links(conn) if not xc & {l[0], l[1]}} == links_before
    for mid, role in ((lo, "merged"), (hi, "survivor")):
        un = [h for h in hist(conn, mid) if h["op"] == "unmerge"]
        assert len(un) == 1 and un[0]["details"]["role"] == role

    # unmerge of a memory that is not merged: a clear error
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="not merged"):
        conn.execute("select pgmem.unmerge(%s)", (hi,))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="not merged"):
        conn.execute("select pgmem.unmerge(%s)", (lo,))


def test_forget_refuses_a_merged_memory(conn):
    """Before (issue 14, L2): forget turned a merged memory into a deleted one, and restore then
    brought it back active beside its survivor, whose access count still held its accesses.
    Now forget refuses a merged memory with a 22023 naming the survivor and unmerge; the
    memory, its survivor and the history are left as they were."""
    ids = _merge_fixture(conn)
    lo, hi = ids["sq_lo"], ids["sq_hi"]
    touch(conn, [lo], 3)
    assert (hi, lo) in pairs_of(merge(conn))
    lo_before, hi_before, n = mem(conn, lo), mem(conn, hi), scalar(conn, "select count(*) from pgmem.history")
    with pytest.raises(psycopg.errors.InvalidParameterValue) as ei:
        conn.execute("select pgmem.forget(%s, 'no longer true')", (lo,))
    assert ei.value.diag.message_primary == (f"memory {lo} was merged into memory {hi}: forget memory {hi} instead, "
                                             f"or split it out first with pgmem.unmerge({lo})")
    assert mem(conn, lo) == lo_before and mem(conn, hi) == hi_before
    assert scalar(conn, "select count(*) from pgmem.history") == n
    # what the message says works: unmerge, then forget
    conn.execute("select pgmem.unmerge(%s)", (lo,))
    assert one(conn, "select * from pgmem.forget(%s, 'no longer true')", (lo,))["state"] == "deleted"


def test_restored_memory_forgotten_while_merged_goes_back_to_merged(conn):
    """Before (issue 14, L2): a memory forgotten while merged (state deleted, merged_into still
    set, as forget left it before it refused merged memories) was restored to active; the next
    merge run merged it into its survivor a second time and added its access count again
    (survivor 2 + 3 + 3). Now restore puts it back to merged: merge leaves it alone, the
    survivor's count stays 2 + 3, unmerge takes the 3 back once, and merging again adds it once."""
    ids = _merge_fixture(conn)
    lo, hi = ids["sq_lo"], ids["sq_hi"]
    touch(conn, [lo], 3)
    touch(conn, [hi], 2)
    assert (mem(conn, lo)["access_count"], mem(conn, hi)["access_count"]) == (3, 2)
    assert (hi, lo) in pairs_of(merge(conn))
    assert mem(conn, hi)["access_count"] == 2 + 3
    # a row forgotten before forget refused merged memories (written by hand: forget refuses now)
    conn.execute("update pgmem.memories set state = 'deleted' where id = %s", (lo,))
    assert (mem(conn, lo)["state"], mem(conn, lo)["merged_into"]) == ("deleted", hi)

    m = one(conn, "select * from pgmem.restore(%s, 'forgotten by mistake')", (lo,))
    assert (m["state"], m["merged_into"]) == ("merged", hi)
    h = hist(conn, lo)[-1]
    assert h["op"] == "restore" and h["after"]["state"] == "merged" and h["details"]["previous_state"] == "deleted"

    # merge runs (incremental and full scan) see no pair with it: the survivor is not counted twice
    assert not any(lo in (r["survivor_id"], r["merged_id"]) for r in merge(conn) + merge(conn, full_scan=True))
    s = mem(conn, hi)
    assert s["access_count"] == 2 + 3 and s["merged_from"] == [lo]

    # unmerge takes lo's 3 accesses back once; merging the pair again adds them once
    u = one(conn, "select * from pgmem.unmerge(%s)", (lo,))
    assert (u["state"], u["merged_into"], u["access_count"]) == ("active", None, 3)
    assert mem(conn, hi)["access_count"] == 2
    assert (hi, lo) in pairs_of(merge(conn, full_scan=True))
    s = mem(conn, hi)
    assert s["access_count"] == 2 + 3 and s["merged_from"] == [lo]


def test_merge_dry_run_lists_the_same_pairs_and_changes_nothing(conn):
    ids = _merge_fixture(conn)
    touch(conn, [ids["sq_lo"]], 2)
    add_link(conn, ids["x"], ids["sq_lo"], "temporal")
    snap = snapshot(conn)
    dry = merge(conn, dry_run=True)
    assert dry and all(r["applied"] is False for r in dry)
    assert snapshot(conn) == snap
    # repeatable
    assert merge(conn, dry_run=True) == dry
    assert snapshot(conn) == snap
    real = merge(conn)
    assert all(r["applied"] is True for r in real)
    key = lambda r: (r["survivor_id"], r["merged_id"], round(r["similarity"], 6), r["same_category"], r["method"])
    assert sorted(map(key, dry)) == sorted(map(key, real))
    assert pairs_of(real) == {(ids[s], ids[m]) for s, m, _, _ in EXPECTED_MERGE}


def test_merge_dry_run_of_a_chain_matches_the_real_run(conn):
    theta = math.acos(0.90)
    a = remember(conn, "chain memory A", rot(0, 1, 0.0), importance=0.7, category="fact")
    b = remember(conn, "chain memory B", rot(0, 1, theta), importance=0.5, category="fact")
    c = remember(conn, "chain memory C", rot(0, 1, 2 * theta), importance=0.6, category="fact")
    dry = pairs_of(merge(conn, dry_run=True))
    real = pairs_of(merge(conn))
    assert {mem(conn, i)["state"] for i in (b, c)} == {"merged"} and mem(conn, a)["state"] == "active"
    assert dry == real


@pytest.mark.parametrize("importance", [(0.7, 0.5, 0.6), (0.5, 0.5, 0.5), (0.4, 0.9, 0.3)],
                         ids=["first-most-important", "all-equal", "middle-most-important"])
def test_merge_chains_end_with_one_survivor_whatever_the_order(conn, importance):
    # A ~ B and B ~ C at cosine 0.90; A ~ C at cos(2θ) = 0.62, below the threshold
    theta = math.acos(0.90)
    vecs = {"A": rot(0, 1, 0.0), "B": rot(0, 1, theta), "C": rot(0, 1, 2 * theta)}
    assert float(vecs["A"] @ vecs["C"]) < 0.85
    imp = dict(zip("ABC", importance))
    groups = []
    orders = ["ABC", "CBA", "BCA", "ACB", "CAB", "BAC"]
    for n, order in enumerate(orders):
        user = f"chain{n}"
        ids = {}
        for name in order:
            ids[name] = remember(conn, f"chain memory {name}", vecs[name], user_id=user, importance=imp[name], category="fact")
        res = [r for r in merge(conn) if r["survivor_id"] in ids.values() or r["merged_id"] in ids.values()]
        assert len(res) == 2, res
        ms = {k: mem(conn, v) for k, v in ids.items()}
        survivors = [k for k, m in ms.items() if m["state"] == "active"]
        assert len(survivors) == 1, (order, ms)
        s = survivors[0]
        for k, m in ms.items():
            if k != s:
                assert m["state"] == "merged" and m["merged_into"] == ids[s], (order, k, m)
        assert sorted(ms[s]["merged_from"]) == sorted(ids[k] for k in ids if k != s)
        # the survivor: most important, then the lowest id
        best = max(ids, key=lambda k: (imp[k], -ids[k]))
        assert s == best, (order, s, best)
        groups.append((s, frozenset(ids) - {s}))
    if len(set(importance)) == 3:  # a distinct most important memory: the same group whatever the order
        assert len(set(groups)) == 1, groups


def test_merge_never_pairs_other_tenants_or_users(conn, dsn):
    v = e(20)
    same = at_cos(20, 21, 0.99)
    a = remember(conn, "Prefers dark mode (u1)", v, user_id="u1")
    b = remember(conn, "Prefers dark mode (u2)", same, user_id="u2")
    c = remember(conn, "Prefers dark mode (no user)", v)
    with connect(dsn, tenant="other") as other:
        d = remember(other, "Prefers dark mode (other tenant)", same, importance=0.6)
        d2 = remember(other, "Prefers the dark mode (other tenant)", v, importance=0.5)
        f = remember(other, "Prefers dark mode (other tenant, u1)", same, user_id="u1")
    assert merge(conn) == []
    assert merge(conn, full_scan=True) == []
    with connect(dsn, tenant=None) as admin:
        res = merge(admin, full_scan=True)  # every tenant
    assert pairs_of(res) == {(d, d2)}
    states = {r["id"]: r["state"] for r in rows(conn, "select id, state from pgmem.memories")}
    assert states == {a: "active", b: "active", c: "active", d: "active", d2: "merged", f: "active"}
    # a job run for one tenant records it; the all-tenant run records NULL
    assert [r["tenant"] for r in job_runs(conn, "merge")] == ["acme", "acme", None]


def test_merge_incremental_cursor_and_full_scan(conn):
    d = remember(conn, "Standup is at 9:30", e(30), category="fact", importance=0.6)
    dd = remember(conn, "The daily standup starts 9:30", at_cos(30, 31, 0.90), category="fact", importance=0.5)
    f = remember(conn, "Unrelated f", e(32))
    # first run with a high threshold: the pair is not merged, but all three were examined
    assert merge(conn, threshold=0.95) == []
    assert job_runs(conn, "merge")[-1]["examined"] == 3
    g = remember(conn, "Unrelated g", e(33))
    # incremental: only g is new; the d ~ dd pair was examined already
    assert merge(conn, threshold=0.85) == []
    run = job_runs(conn, "merge")[-1]
    assert run["examined"] == 1 and run["changed"] == 0
    cursor = one(conn, "select * from pgmem.job_state where tenant = 'acme' and job = 'merge'")
    assert cursor["cursor_id"] == g
    # nothing new: nothing examined
    assert merge(conn) == []
    assert job_runs(conn, "merge")[-1]["examined"] == 0
    # full scan: everything active again, and the pair is found
    res = merge(conn, threshold=0.85, full_scan=True)
    assert pairs_of(res) == {(d, dd)}
    assert mem(conn, f)["state"] == mem(conn, g)["state"] == "active"
    run = job_runs(conn, "merge")[-1]
    assert run["examined"] == 4 and run["changed"] == 1
    # a full scan does not move the cursor
    assert one(conn, "select cursor_id from pgmem.job_state where tenant = 'acme' and job = 'merge'")["cursor_id"] == g
    # a memory embedded later is examined (once) by the next incremental run
    h = remember(conn, "Standup at half past nine", at_cos(30, 34, 0.92), category="fact", importance=0.4)
    res = merge(conn)
    assert pairs_of(res) == {(d, h)}
    assert job_runs(conn, "merge")[-1]["examined"] == 1


def test_merge_full_scan_walks_every_memory_in_batches(conn):
    """A full scan goes on from batch to batch (its own keyset cursor) until it has examined every
    active memory, so run_job ends after about N/batch batches and finds a pair beyond the first one."""
    ids = [remember(conn, f"unrelated memory {i}", e(200 + i)) for i in range(10)]
    a = remember(conn, "Standup is at 9:30", e(230), category="fact", importance=0.6)
    dup = remember(conn, "The daily standup starts 9:30", at_cos(230, 231, 0.90), category="fact", importance=0.5)
    # the incremental run has examined all twelve with a stricter threshold: only a full scan can
    # find the pair now, and it is in the last batch of five
    assert merge(conn, threshold=0.95) == []
    incremental = one(conn, "select cursor_at, cursor_id from pgmem.job_state where tenant = 'acme' and job = 'merge'")
    assert incremental["cursor_id"] == dup
    k = len(job_runs(conn, "merge"))
    conn.execute("""CALL pgmem.run_job('merge', '{"full_scan": true, "batch": 5, "threshold": 0.85}', 20)""")
    runs = job_runs(conn, "merge")[k:]
    assert [(r["examined"], r["changed"], r["details"]["more"]) for r in runs] == [(5, 0, True), (5, 0, True), (2, 1, False)]
    assert mem(conn, dup)["merged_into"] == a
    # the full scan's cursors are gone (the next one starts from the beginning); the incremental one is untouched
    assert [r["job"] for r in rows(conn, "select job from pgmem.job_state order by job")] == ["merge"]
    assert one(conn, "select cursor_at, cursor_id from pgmem.job_state where tenant = 'acme' and job = 'merge'") == incremental

    # by hand: each call goes on where the previous one stopped, until one says there is no more
    k = len(job_runs(conn, "merge"))
    for _ in range(3):
        assert merge(conn, full_scan=True, batch=5) == []
    runs = job_runs(conn, "merge")[k:]
    # (eleven active: the merged memory is not examined any more)
    assert [(r["examined"], r["details"]["more"]) for r in runs] == [(5, True), (5, True), (1, False)]
    # a dry run neither moves nor resets a full scan under way
    assert merge(conn, full_scan=True, batch=5) == []
    snap = snapshot(conn)
    assert merge(conn, full_scan=True, batch=5, dry_run=True) == []
    assert snapshot(conn) == snap
    # run_job starts a full scan from the beginning, even when an earlier one stopped half-way
    cursor = one(conn, "select cursor_id from pgmem.job_state where tenant = 'acme' and job = 'merge_full'")
    assert cursor["cursor_id"] == ids[4]
    k = len(job_runs(conn, "merge"))
    conn.execute("""CALL pgmem.run_job('merge', '{"full_scan": true, "batch": 5}', 20)""")
    assert [r["examined"] for r in job_runs(conn, "merge")[k:]] == [5, 5, 1]
    # ... and an incremental run_job leaves the incremental cursor where it was
    conn.execute("CALL pgmem.run_job('merge')")
    assert job_runs(conn, "merge")[-1]["examined"] == 0
    assert one(conn, "select cursor_at, cursor_id from pgmem.job_state where tenant = 'acme' and job = 'merge'") == incremental


def test_merge_full_scan_in_batches_without_embeddings(conn):
    """The text side of a full scan (memories without an embedding, Jaccard) pages too."""
    g1, g2, _ = _jaccard_texts()
    for i in range(6):
        remember(conn, f"{g2[i]} {g2[i + 6]} lone text memory {i}", importance=0.5, category="fact")
    a1 = remember(conn, " ".join(g1), importance=0.6, category="fact")
    a2 = remember(conn, " ".join(g1 + ["uniform"]), importance=0.5, category="fact")
    assert scalar(conn, "select count(*) from pgmem.memories where embedding is null") == 8
    conn.execute("""CALL pgmem.run_job('merge', '{"full_scan": true, "batch": 3}', 20)""")
    runs = job_runs(conn, "merge")
    assert [(r["examined"], r["changed"]) for r in runs] == [(3, 0), (3, 0), (2, 1)]
    assert mem(conn, a2)["merged_into"] == a1


def test_merge_cursor_does_not_skip_late_commits(conn, dsn):
    with connect(dsn, autocommit=False) as slow:
        # the slow writer's transaction starts first (a plain INSERT: remember() would make the
        # second writer of the same user scope wait for it, pgmem.write_locks) ...
        p = scalar(slow, "insert into pgmem.memories (content, embedding, category, importance) "
                         "values ('Parking is on level -2', %s, 'fact', 0.6) returning id", (e(40),))
        time.sleep(0.05)
        # ... a later one commits its near duplicate at once, and merge runs
        q = remember(conn, "The car park is level -2", at_cos(40, 41, 0.92), category="fact", importance=0.5)
        assert merge(conn) == []  # p is not visible yet
        slow.commit()
    assert mem(conn, p)["embedded_at"] < mem(conn, q)["embedded_at"]
    res = merge(conn)
    assert pairs_of(res) == {(p, q)}


def _jaccard_texts():
    g1 = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango".split()
    g2 = "apple banana cherry damson elder fig grape guava kiwi lemon lime mango melon nectarine olive papaya peach pear plum quince".split()
    g3 = "anchor barrel cable deck engine funnel galley harbour island jetty keel ladder mast net oar pier quay rudder sail tiller".split()
    return g1, g2, g3


def test_merge_without_embeddings_uses_jaccard(conn):
    g1, g2, g3 = _jaccard_texts()
    # 20 vs 21 tokens, 20 shared: J = 20/21 = 0.952 -> merged
    a1 = remember(conn, " ".join(g1), importance=0.6, category="fact")
    a2 = remember(conn, " ".join(g1 + ["uniform"]), importance=0.5, category="fact")
    # 17 vs 20 tokens, 17 shared: J = 17/20 = 0.85 exactly -> merged (>= threshold)
    b1 = remember(conn, " ".join(g2[:17]), importance=0.5, category="fact")
    b2 = remember(conn, " ".join(g2[:17] + ["raisin", "sloe", "tangerine"]), importance=0.6, category="fact")
    # 17 vs 21: J = 17/21 = 0.81 -> not merged
    c1 = remember(conn, " ".join(g3[:17]), importance=0.5, category="fact")
    c2 = remember(conn, " ".join(g3[:17] + ["stern", "tug", "umbrella", "vessel"]), importance=0.5, category="fact")
    assert scalar(conn, "select count(*) from pgmem.memories where embedding is not null") == 0
    jac = lambda x, y: scalar(conn, "select pgmem.jaccard(pgmem.tokens(%s), pgmem.tokens(%s))", (x, y))
    assert jac(" ".join(g2[:17]), " ".join(g2[:17] + ["raisin", "sloe", "tangerine"])) == 0.85

    dry = merge(conn, dry_run=True)
    res = merge(conn)
    assert pairs_of(res) == pairs_of(dry) == {(a1, a2), (b2, b1)}
    by = {(r["survivor_id"], r["merged_id"]): r for r in res}
    assert by[(a1, a2)]["similarity"] == pytest.approx(20 / 21)
    assert by[(b2, b1)]["similarity"] == pytest.approx(0.85)
    assert all(r["method"] == "jaccard" and r["same_category"] for r in res)
    assert mem(conn, a2)["merged_into"] == a1 and mem(conn, b1)["merged_into"] == b2
    assert mem(conn, c1)["state"] == mem(conn, c2)["state"] == "active"
    # the text cursor: nothing left to examine
    merge(conn)
    assert job_runs(conn, "merge")[-1]["examined"] == 0


def test_merge_without_embeddings_finds_a_pair_behind_many_weak_matches(conn):
    """Issue 14: the Jaccard candidates were an unordered `limit 50` of the memories sharing
    any word, so a duplicate pair behind 60 memories that share one common word was never
    compared. Candidates now come most shared words first (setting merge_text_candidates)."""
    g1, _, _ = _jaccard_texts()
    for i in range(60):
        remember(conn, f"alpha filler{i} note{i} about thing{i}", importance=0.5, category="fact")
    p = remember(conn, " ".join(g1), importance=0.6, category="fact")
    q = remember(conn, " ".join(g1 + ["uniform"]), importance=0.5, category="fact")
    res = merge(conn)
    assert pairs_of(res) == {(p, q)}
    assert res[0]["similarity"] == pytest.approx(20 / 21)
    assert scalar(conn, "select value::text::int from pgmem.settings where tenant = '*' and key = 'merge_text_candidates'") == 200


# ============================================================================ prune
def _prune_fixture(conn, t: datetime) -> dict[str, int]:
    ids = {}
    ids["expired"] = remember(conn, "Temporary door code 4711", e(50), created_at=t - timedelta(days=10),
                              expires_at=t - timedelta(days=1), importance=0.9)
    ids["not_yet"] = remember(conn, "Door code valid next week", e(51), created_at=t - timedelta(days=10),
                              expires_at=t + timedelta(days=10), importance=0.9)
    # 300 days old, importance 0.5: 0.5 * 2^-10 = 0.00049 < 0.01
    ids["decayed"] = remember(conn, "An old chat about lunch", e(52), created_at=t - timedelta(days=300), importance=0.5)
    for i in range(19):
        ids[f"fresh{i}"] = remember(conn, f"Fresh memory number {i}", e(60 + i), created_at=t - timedelta(days=1),
                                    importance=round(0.1 + 0.04 * i, 2))
    return ids


def test_prune_modes(conn):
    t = now(conn)
    ids = _prune_fixture(conn, t)
    inv = {v: k for k, v in ids.items()}
    n_active = lambda: scalar(conn, "select count(*) from pgmem.memories where state = 'active'")

    # dry runs change nothing
    snap = snapshot(conn)
    for mode in ("gentle", "normal", "aggressive"):
        dry = call(conn, "prune", mode=mode, dry_run=True, as_of=t)
        assert dry and all(r["applied"] is False for r in dry)
    assert snapshot(conn) == snap

    res = call(conn, "prune", mode="gentle", as_of=t)
    assert [(inv[r["memory_id"]], r["reason"], r["applied"]) for r in res] == [("expired", "expired", True)]
    assert n_active() == 21

    res = call(conn, "prune", mode="normal", as_of=t)
    assert [(inv[r["memory_id"]], r["reason"]) for r in res] == [("decayed", "decayed")]
    assert res[0]["decayed_importance"] == pytest.approx(0.5 * 2 ** -10, rel=1e-3)

    # aggressive: the bottom 10% by decayed importance among the 20 active, as implemented with
    # percent_rank() < 0.1 (rank i of n has percent_rank i/(n-1))
    active = rows(conn, "select id, pgmem.decayed_importance(importance, created_at, access_count, %s) di "
                        "from pgmem.memories where state = 'active' order by 2, 1", (t,))
    n = len(active)
    assert n == 20
    expected = [r["id"] for i, r in enumerate(active) if i / (n - 1) < 0.10]
    assert len(expected) == math.ceil(0.10 * (n - 1)) == 2 == math.floor(0.10 * n)
    res = call(conn, "prune", mode="aggressive", as_of=t)
    assert [r["memory_id"] for r in res] == expected
    assert all(r["reason"] == "bottom" for r in res)
    assert {inv[i] for i in expected} == {"fresh0", "fresh1"}
    assert n_active() == 18

    # pruned = soft-deleted, with a history row naming the reason
    for name, reason, mode in (("expired", "expired", "gentle"), ("decayed", "decayed", "normal"), ("fresh0", "bottom", "aggressive")):
        m = mem(conn, ids[name])
        assert m["state"] == "deleted"
        h = hist(conn, ids[name])[-1]
        assert h["op"] == "delete" and h["details"]["reason"] == reason and h["details"]["mode"] == mode
        assert h["before"]["state"] == "active" and h["after"]["state"] == "deleted"
    assert mem(conn, ids["not_yet"])["state"] == "active"
    # restorable
    r = one(conn, "select * from pgmem.restore(%s)", (ids["decayed"],))
    assert r["state"] == "active" and hist(conn, ids["decayed"])[-1]["op"] == "restore"

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="gentle, normal, aggressive"):
        call(conn, "prune", mode="brutal")


def test_prune_aggressive_counts_floor_of_fraction(conn):
    """engram.md, Pruning Modes (aggressive): the bottom floor(n * 0.1) by decayed importance."""
    t = now(conn)
    for i in range(25):
        remember(conn, f"memory {i}", e(100 + i), importance=round(0.2 + 0.02 * i, 2), created_at=t - timedelta(days=1))
    res = call(conn, "prune", mode="aggressive", as_of=t, dry_run=True)
    assert len(res) == math.floor(0.1 * 25) == 2
    assert [r["memory_id"] for r in res] == sorted(r["memory_id"] for r in res)[:2]  # the two least important
    res = call(conn, "prune", mode="aggressive", as_of=t, bottom_fraction=0.2, dry_run=True)
    assert len(res) == math.floor(0.2 * 25) == 5


def test_prune_aggressive_keeps_small_tenants(conn):
    t = now(conn)
    only = remember(conn, "The only memory of this tenant", e(3), importance=0.8, created_at=t - timedelta(days=1))
    assert call(conn, "prune", mode="aggressive", as_of=t) == []
    assert mem(conn, only)["state"] == "active"


def test_run_job_aggressive_prune_prunes_the_bottom_fraction_once(conn):
    t = now(conn)
    for i in range(30):
        remember(conn, f"memory {i}", e(100 + i), importance=round(0.2 + 0.02 * i, 2), created_at=t - timedelta(days=1))
    expected = {r["memory_id"] for r in call(conn, "prune", mode="aggressive", dry_run=True)}
    assert len(expected) == 3
    conn.execute("""CALL pgmem.run_job('prune', '{"mode": "aggressive", "batch": 2}')""")
    pruned = {r["id"] for r in rows(conn, "select id from pgmem.memories where state = 'deleted'")}
    assert pruned == expected, f"{len(pruned)} of 30 pruned, expected {len(expected)}"


def _prune_population(conn, t: datetime, n: int) -> None:
    """Memories 'memory 1' .. 'memory n' of the session's tenant: most a day old with importance
    0.10 .. 0.59 (g and g + 50 tie: the same decayed importance, the lower id ranks first), every
    19th expired (4, 23, ..., 99), every 31st 300 days old (8, 39, ...: decayed importance 0.00049)."""
    conn.execute("""
        insert into pgmem.memories (content, importance, created_at, expires_at)
        select format('memory %%s', g),
               case when g %% 31 = 8 then 0.5 else round(0.1 + (g * 37 %% 50) / 100.0, 2) end,
               %(t)s - case when g %% 31 = 8 then interval '300 days' else interval '1 day' end,
               case when g %% 19 = 4 then %(t)s - interval '1 hour' end
          from generate_series(1, %(n)s) g""", {"t": t, "n": n})


def _expected_prune(conn, mode: str, t: datetime, fraction: float = 0.10) -> dict[int, str]:
    """engram.md, Pruning Modes, computed here from one ranking: memory id -> reason."""
    active = rows(conn, "select id, tenant, expires_at, pgmem.decayed_importance(importance, created_at, access_count, %s) di "
                        "from pgmem.memories where state = 'active' order by tenant, di, id", (t,))
    out = {}
    for tenant in {r["tenant"] for r in active}:
        ranked = [r for r in active if r["tenant"] == tenant]
        cut = math.floor(len(ranked) * fraction)
        for i, r in enumerate(ranked):
            if r["expires_at"] is not None and r["expires_at"] < t:
                out[r["id"]] = "expired"
            elif mode != "gentle" and r["di"] < 0.01:
                out[r["id"]] = "decayed"
            elif mode == "aggressive" and i < cut:
                out[r["id"]] = "bottom"
    return out


def _pruned(conn) -> dict[int, str]:
    return {r["memory_id"]: r["reason"] for r in rows(
        conn, "select memory_id, details->>'reason' reason from pgmem.history where op = 'delete' order by id")}


@pytest.mark.parametrize("mode", ["gentle", "normal", "aggressive"])
def test_prune_in_small_batches_prunes_what_one_batch_prunes(conn, mode):
    """A run of many small batches prunes exactly what one big batch does: in aggressive mode the
    bottom floor(n × 10%) of one ranking (plus the expired and decayed memories), not 10% again
    on every batch; and each batch walks on from where the previous one stopped, so the run
    examines every active memory once."""
    t = now(conn)
    _prune_population(conn, t, 100)
    expected = _expected_prune(conn, mode, t)
    reasons = sorted(expected.values())
    assert {"gentle": reasons == ["expired"] * 6, "normal": reasons == ["decayed"] * 3 + ["expired"] * 6,
            # the bottom 10 of 100: 3 decayed, 1 expired (23), 6 by rank: 50, 100 (0.10), 73 (0.11),
            # 46, 96 (0.12) and 19 (0.13), which ties with 69: the cut-off falls inside the tie
            "aggressive": reasons == ["bottom"] * 6 + ["decayed"] * 3 + ["expired"] * 6}[mode], reasons
    if mode == "aggressive":
        g = {int(r["content"].split()[1]): r["id"] for r in rows(conn, "select id, content from pgmem.memories")}
        assert {i for i, r in expected.items() if r == "bottom"} == {g[50], g[100], g[73], g[46], g[96], g[19]}
    # one big batch (a dry run lists it, lowest decayed importance first)
    dry = call(conn, "prune", mode=mode, dry_run=True, as_of=t)
    assert {r["memory_id"]: r["reason"] for r in dry} == expected
    assert [(r["decayed_importance"], r["memory_id"]) for r in dry] == sorted((r["decayed_importance"], r["memory_id"]) for r in dry)
    # many small ones
    conn.execute("CALL pgmem.run_job('prune', %s)", (Jsonb({"mode": mode, "batch": 4, "as_of": t.isoformat()}),))
    assert _pruned(conn) == expected
    assert {r["id"] for r in rows(conn, "select id from pgmem.memories where state = 'deleted'")} == set(expected)
    runs = [r for r in job_runs(conn, "prune") if not r["params"]["dry_run"]]
    assert [r["changed"] for r in runs] == [4] * (len(expected) // 4) + [len(expected) % 4]
    assert [r["details"]["more"] for r in runs] == [True] * (len(runs) - 1) + [False]
    assert sum(r["examined"] for r in runs) == 100
    for h in rows(conn, "select details from pgmem.history where op = 'delete'"):
        assert h["details"]["mode"] == mode and h["details"]["job_run_id"] in {r["id"] for r in runs}
    # the run is complete: nothing of it is left in job_state
    assert rows(conn, "select * from pgmem.job_state") == []


def _rows_read(conn) -> int:
    """Rows of pgmem.memories read so far (sequential and index scans), this session's included."""
    conn.execute("select pg_stat_force_next_flush()")  # flushed when the session goes idle
    conn.execute("select pg_stat_clear_snapshot()")
    return scalar(conn, "select seq_tup_read + coalesce(idx_tup_fetch, 0) from pg_stat_user_tables "
                        "where relid = 'pgmem.memories'::regclass")


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_prune_batches_do_not_rescan_every_memory(fresh_db, mode):
    """The work of a run does not grow with the number of batches: 400 memories, 200 to prune,
    20 batches of 10 read about as many rows as one batch of 10,000 (re-ranking every memory on
    every batch read 17 times as many)."""
    read = {}
    for batch in (10000, 10):
        with connect(fresh_db()) as c:
            t = now(c)
            c.execute("""insert into pgmem.memories (content, importance, created_at)
                         select 'memory ' || g, 0.5, %s - case when g %% 2 = 0 then interval '300 days' else interval '1 day' end
                           from generate_series(1, 400) g""", (t,))
            c.execute("analyze pgmem.memories")  # (as autovacuum would: plans as on a real table)
            before = _rows_read(c)
            c.execute("CALL pgmem.run_job('prune', %s)", (Jsonb({"mode": mode, "batch": batch, "as_of": t.isoformat()}),))
            read[batch] = _rows_read(c) - before
            assert scalar(c, "select count(*) from pgmem.memories where state = 'deleted'") == 200
            assert len(job_runs(c, "prune")) == (1 if batch == 10000 else 21)
    print(f"\nrows of pgmem.memories read by prune('{mode}') of 200 of 400: {read}")
    assert read[10] < 1.5 * read[10000]


def test_prune_by_hand_goes_on_with_the_run_under_way(conn, dsn):
    """Calls by hand (what `pgmem jobs run` does) make up one run while the last one said there is
    more: aggressive mode prunes floor(n × 10%) in the run, not in each call; run_job starts a new
    run; and with no tenant set a run ranks each tenant on its own."""
    t = now(conn)
    for i in range(30):
        remember(conn, f"memory {i}", e(100 + i), importance=round(0.2 + 0.02 * i, 2), created_at=t - timedelta(days=1))
    expected = _expected_prune(conn, "aggressive", t)
    assert list(expected.values()) == ["bottom"] * 3
    more = lambda: job_runs(conn, "prune")[-1]["details"]["more"]
    first = call(conn, "prune", mode="aggressive", batch=2)
    assert len(first) == 2 and more() is True
    # a dry run in between starts afresh and leaves the run under way alone
    snap = snapshot(conn)
    assert len(call(conn, "prune", mode="aggressive", batch=2, dry_run=True)) == 2  # floor(28 × 10%)
    assert snapshot(conn) == snap
    second = call(conn, "prune", mode="aggressive", batch=2)
    assert len(second) == 1 and more() is False
    assert _pruned(conn) == expected
    assert rows(conn, "select * from pgmem.job_state") == []
    # the next call is a new run: the bottom 10% of the 27 left
    assert len(call(conn, "prune", mode="aggressive", batch=3)) == 2 and more() is False
    # an unfinished run by hand is not continued by run_job, which ranks afresh: 1 + floor(24 × 10%)
    assert len(call(conn, "prune", mode="aggressive", batch=1)) == 1 and more() is True
    k = len(job_runs(conn, "prune"))
    conn.execute("""CALL pgmem.run_job('prune', '{"mode": "aggressive", "batch": 1}')""")
    runs = job_runs(conn, "prune")[k:]
    assert [r["changed"] for r in runs] == [1, 1, 0] and runs[0]["examined"] == 1
    assert scalar(conn, "select count(*) from pgmem.memories where state = 'active'") == 22

    # every tenant (what pg_cron runs): each is ranked on its own, in batches across tenants
    with connect(dsn, tenant="other") as other:
        for i in range(25):
            remember(other, f"other memory {i}", e(150 + i), importance=round(0.2 + 0.01 * i, 2), created_at=t - timedelta(days=1))
    with connect(dsn, tenant=None) as admin:
        expected = _expected_prune(admin, "aggressive", t)
        by_tenant = {r["id"]: r["tenant"] for r in rows(admin, "select id, tenant from pgmem.memories")}
        assert sorted(by_tenant[i] for i in expected) == ["acme", "acme", "other", "other"]
        before = set(_pruned(admin))
        admin.execute("CALL pgmem.run_job('prune', %s)",
                      (Jsonb({"tenant": "*", "mode": "aggressive", "batch": 3, "as_of": t.isoformat()}),))
        assert {i: r for i, r in _pruned(admin).items() if i not in before} == expected
        assert [r["changed"] for r in job_runs(admin, "prune") if r["tenant"] is None] == [3, 1]
        assert rows(admin, "select * from pgmem.job_state") == []


# ============================================================================ purge
def test_purge_only_long_deleted(conn):
    a = remember(conn, "Deleted long ago", e(1))
    b = remember(conn, "Deleted just now", e(2))
    c = remember(conn, "Still active", e(3))
    add_link(conn, a, c, "temporal")
    conn.execute("select pgmem.forget(%s, 'old')", (a,))
    time.sleep(1.3)
    conn.execute("select pgmem.forget(%s, 'new')", (b,))
    a_row = mem(conn, a)

    dry = call(conn, "purge", older_than="1 second", dry_run=True)
    assert [(r["memory_id"], r["applied"]) for r in dry] == [(a, False)]
    assert mem(conn, a) is not None

    res = call(conn, "purge", older_than="1 second")
    assert [(r["memory_id"], r["applied"]) for r in res] == [(a, True)]
    assert res[0]["deleted_at"] == a_row["state_changed_at"]
    assert mem(conn, a) is None
    assert mem(conn, b)["state"] == "deleted"
    assert mem(conn, c)["state"] == "active"
    assert scalar(conn, "select count(*) from pgmem.links where src_id = %s or dst_id = %s", (a, a)) == 0
    # the history survives, with the last state as "before"
    h = hist(conn, a)
    assert [x["op"] for x in h] == ["add", "delete", "purge"]
    assert h[-1]["before"]["content"] == "Deleted long ago" and h[-1]["before"]["state"] == "deleted"
    assert h[-1]["after"] is None
    run = job_runs(conn, "purge")[-1]
    assert run["status"] == "ok" and run["changed"] == 1

    # active memories are never purged, whatever older_than
    res = call(conn, "purge", older_than="0 seconds")
    assert [r["memory_id"] for r in res] == [b]
    assert mem(conn, c)["state"] == "active"
    assert scalar(conn, "select count(*) from pgmem.memories") == 1

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="older_than"):
        call(conn, "purge", older_than="-1 day")


# ============================================================================ archive
# Shadow's lifecycle (archive by age, activation and cap; manual archive; delete_archived;
# compact): tests/test_lifecycle.py (issue 24).


# ============================================================================ feedback and thresholds
def _activation_memories(conn) -> dict[str, list[int]]:
    """hi: cosine 1 with the query (score .65, activated at .3); lo: orthogonal (score .05);
    mid: cosine .5 (score .35: activated at .3, not at .4)."""
    out = {"hi": [], "lo": [], "mid": []}
    for i in range(5):
        out["hi"].append(remember(conn, f"relevant looking memory {i}", at_cos(0, 10 + i, 0.999999)))
        out["lo"].append(remember(conn, f"unrelated looking memory {i}", e(20 + i)))
    out["mid"].append(remember(conn, "half related memory", at_cos(0, 30, 0.5)))
    return out


def activate_logged(conn, context_type: str = "conversation", **kw) -> tuple[object, dict[int, dict]]:
    qid = one(conn, "select gen_random_uuid() as q")["q"]
    res = call(conn, "activate", query_embedding=e(0), context_type=context_type, query_id=qid, **kw)
    return qid, {r["id"]: r for r in res}


def give_feedback(conn, qid, mids, relevant: bool) -> None:
    for m in mids:
        conn.execute("select pgmem.feedback(%s, %s, %s)", (m, qid, relevant))


def thr(conn, ctx: str) -> float:
    return scalar(conn, "select pgmem.context_threshold(%s)", (ctx,))


def test_feedback_false_positives_raise_the_threshold(conn):
    ms = _activation_memories(conn)
    qid, shown = activate_logged(conn)
    assert all(shown[m]["activated"] for m in ms["hi"] + ms["mid"])
    assert not any(shown[m]["activated"] for m in ms["lo"])
    assert shown[ms["mid"][0]]["score"] == pytest.approx(0.35, abs=0.01)
    logged = rows(conn, "select * from pgmem.activation_log where query_id = %s", (qid,))
    assert len(logged) == 11 and {r["context_type"] for r in logged} == {"conversation"}
    assert all(r["threshold"] == pytest.approx(0.3) for r in logged)

    # activated: 2 relevant, 3 not (false-positive rate 0.6); the others irrelevant (no false negatives)
    give_feedback(conn, qid, ms["hi"][:2], True)
    give_feedback(conn, qid, ms["hi"][2:], False)
    give_feedback(conn, qid, ms["lo"], False)
    fb = rows(conn, "select * from pgmem.feedback order by id")
    assert len(fb) == 10 and all(f["context_type"] == "conversation" for f in fb)
    assert [f["activated"] for f in fb] == [True] * 5 + [False] * 5
    assert thr(conn, "conversation") == pytest.approx(0.30)

    res = call(conn, "tune_thresholds")
    assert len(res) == 1
    r = res[0]
    assert (r["tenant_id"], r["context_type"]) == ("acme", "conversation")
    assert r["old_value"] == pytest.approx(0.30) and r["new_value"] == pytest.approx(0.40)
    assert r["false_positive_rate"] == pytest.approx(0.6) and r["false_negative_rate"] == pytest.approx(0.0)
    assert r["feedback_count"] == 10
    ch = rows(conn, "select * from pgmem.threshold_changes order by id")
    assert len(ch) == 1
    assert ch[0]["context_type"] == "conversation" and ch[0]["tenant"] == "acme"
    assert (ch[0]["old_value"], ch[0]["new_value"]) == (pytest.approx(0.3), pytest.approx(0.4))
    assert ch[0]["false_positive_rate"] == pytest.approx(0.6) and ch[0]["false_negative_rate"] == pytest.approx(0.0)
    assert ch[0]["feedback_count"] == 10 and "false-positive" in ch[0]["reason"]
    assert ch[0]["job_run_id"] == job_runs(conn, "tune")[-1]["id"]
    assert scalar(conn, "select count(*) from pgmem.feedback where tuned_at is null") == 0

    # the tuned value is what context_threshold() and activate() use
    assert thr(conn, "conversation") == pytest.approx(0.40)
    _, shown = activate_logged(conn)
    assert all(r["threshold_used"] == pytest.approx(0.40) for r in shown.values())
    assert shown[ms["mid"][0]]["activated"] is False
    assert all(shown[m]["activated"] for m in ms["hi"])
    # the feedback was consumed: another run changes nothing
    assert call(conn, "tune_thresholds") == []
    assert thr(conn, "conversation") == pytest.approx(0.40)


def test_feedback_false_negatives_lower_the_threshold(conn, dsn):
    ms = _activation_memories(conn)
    qid, shown = activate_logged(conn)
    give_feedback(conn, qid, ms["hi"], True)        # no false positives
    give_feedback(conn, qid, ms["lo"][:3], True)    # 3 relevant but not activated: FNR = 3/8
    give_feedback(conn, qid, ms["lo"][3:], False)
    res = call(conn, "tune_thresholds")
    assert [(r["context_type"], round(r["old_value"], 6), round(r["new_value"], 6)) for r in res] == [("conversation", 0.3, 0.2)]
    assert res[0]["false_negative_rate"] == pytest.approx(3 / 8) and res[0]["false_positive_rate"] == 0
    assert thr(conn, "conversation") == pytest.approx(0.2)
    assert "false-negative" in one(conn, "select reason from pgmem.threshold_changes")["reason"]
    with connect(dsn, tenant="other") as other:
        assert thr(other, "conversation") == pytest.approx(0.3)


def _explicit_feedback(conn, mids, ctx: str, activated: bool, relevant: bool) -> None:
    for m in mids:
        conn.execute("select pgmem.feedback(%s, null, %s, %s, %s)", (m, relevant, ctx, activated))


def test_thresholds_are_bounded_to_0_and_1(conn):
    ids = [remember(conn, f"memory {i}", e(i)) for i in range(10)]
    conn.execute("insert into pgmem.thresholds (tenant, context_type, threshold) values "
                 "('acme', 'query', 1.0), ('acme', 'conversation', 0.95)")
    _explicit_feedback(conn, ids, "conversation", activated=True, relevant=False)  # FPR 1
    res = call(conn, "tune_thresholds")
    assert [(r["context_type"], r["new_value"]) for r in res] == [("conversation", 1.0)]
    assert thr(conn, "conversation") == 1.0 and thr(conn, "query") == 1.0
    # at 1 already: another round of false positives changes nothing
    _explicit_feedback(conn, ids, "conversation", activated=True, relevant=False)
    assert call(conn, "tune_thresholds") == []
    assert thr(conn, "conversation") == 1.0

    conn.execute("update pgmem.thresholds set threshold = 0.05 where context_type = 'conversation'")
    _explicit_feedback(conn, ids, "conversation", activated=False, relevant=True)  # FNR 1
    res = call(conn, "tune_thresholds")
    assert [(r["context_type"], r["new_value"]) for r in res] == [("conversation", 0.0)]
    assert thr(conn, "conversation") == 0.0
    _explicit_feedback(conn, ids, "conversation", activated=False, relevant=True)
    assert call(conn, "tune_thresholds") == []
    assert thr(conn, "conversation") == 0.0


def test_tune_respects_min_feedback(conn):
    ids = [remember(conn, f"memory {i}", e(i)) for i in range(12)]
    _explicit_feedback(conn, ids[:9], "conversation", activated=True, relevant=False)
    assert call(conn, "tune_thresholds") == []
    assert thr(conn, "conversation") == pytest.approx(0.3)
    assert scalar(conn, "select count(*) from pgmem.feedback where tuned_at is null") == 9  # kept for later
    assert scalar(conn, "select count(*) from pgmem.threshold_changes") == 0
    assert call(conn, "tune_thresholds", min_feedback=12) == []
    _explicit_feedback(conn, ids[9:10], "conversation", activated=True, relevant=False)
    res = call(conn, "tune_thresholds")
    assert len(res) == 1 and res[0]["feedback_count"] == 10 and res[0]["new_value"] == pytest.approx(0.4)
    # min_feedback is per context type
    _explicit_feedback(conn, ids[:6], "conversation", activated=True, relevant=False)
    _explicit_feedback(conn, ids[:6], "document", activated=True, relevant=False)
    assert call(conn, "tune_thresholds", min_feedback=7) == []
    res = call(conn, "tune_thresholds", min_feedback=6)
    assert {r["context_type"] for r in res} == {"conversation", "document"}


def test_tune_keeps_conversation_at_most_query(conn):
    ids = [remember(conn, f"memory {i}", e(i)) for i in range(10)]
    conn.execute("insert into pgmem.thresholds (tenant, context_type, threshold) values ('acme', 'conversation', 0.7)")
    _explicit_feedback(conn, ids, "conversation", activated=True, relevant=False)
    res = call(conn, "tune_thresholds")
    got = [(r["context_type"], round(r["old_value"], 4), round(r["new_value"], 4)) for r in res]
    assert got == [("conversation", 0.7, 0.8), ("query", 0.75, 0.8)]
    ch = rows(conn, "select * from pgmem.threshold_changes order by id")
    assert len(ch) == 2
    assert ch[1]["context_type"] == "query" and "consistency" in ch[1]["reason"]
    assert (ch[1]["old_value"], ch[1]["new_value"]) == (pytest.approx(0.75), pytest.approx(0.8))
    assert thr(conn, "query") == pytest.approx(0.8) and thr(conn, "conversation") == pytest.approx(0.8)

    # the other way: query tuned down below conversation pulls conversation down
    _explicit_feedback(conn, ids, "query", activated=False, relevant=True)
    res = call(conn, "tune_thresholds")
    got = [(r["context_type"], round(r["old_value"], 4), round(r["new_value"], 4)) for r in res]
    assert got == [("query", 0.8, 0.7), ("conversation", 0.8, 0.7)]
    assert thr(conn, "query") <= thr(conn, "conversation") + 1e-9 and thr(conn, "conversation") == pytest.approx(0.7)


def test_feedback_errors(conn):
    m = remember(conn, "a memory", e(1))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="no activation of memory .* was logged"):
        conn.execute("select pgmem.feedback(%s, gen_random_uuid(), true)", (m,))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="context_type and activated must be given"):
        conn.execute("select pgmem.feedback(%s, null, true, 'conversation')", (m,))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="relevant"):
        conn.execute("select pgmem.feedback(%s, null, null, 'conversation', true)", (m,))
    with pytest.raises(psycopg.errors.NoDataFound, match="does not exist"):
        conn.execute("select pgmem.feedback(%s, null, true, 'conversation', true)", (m + 1000,))
    # with context_type and activated it is accepted without a logged activation
    fid = scalar(conn, "select pgmem.feedback(%s, null, true, 'conversation', false)", (m,))
    f = one(conn, "select * from pgmem.feedback where id = %s", (fid,))
    assert (f["context_type"], f["activated"], f["relevant"], f["score"]) == ("conversation", False, True, None)


# ============================================================================ job_runs, job_status, run_job
def test_each_job_call_is_a_job_run(conn):
    t = now(conn)
    a = remember(conn, "dup one", e(1), importance=0.6, category="fact")
    remember(conn, "dup two", at_cos(1, 2, 0.9), importance=0.5, category="fact")
    remember(conn, "expired", e(3), created_at=t - timedelta(days=2), expires_at=t - timedelta(days=1))
    remember(conn, "stale", e(4), created_at=t - timedelta(days=100))
    assert [r["survivor_id"] for r in merge(conn)] == [a]
    call(conn, "prune", mode="gentle")
    call(conn, "archive_stale", as_of=t)  # (at t: without as_of, "stale", stored today, is in its grace; issue 36)
    call(conn, "tune_thresholds")
    call(conn, "purge")
    runs = job_runs(conn)
    assert [r["job"] for r in runs] == ["merge", "prune", "archive", "tune", "purge"]
    assert all(r["status"] == "ok" and r["tenant"] == "acme" and r["finished_at"] >= r["started_at"] for r in runs)
    got = {r["job"]: (r["examined"], r["changed"]) for r in runs}
    assert got["merge"] == (4, 1)
    assert got["prune"] == (3, 1)   # 3 active after the merge, 1 expired
    assert got["archive"] == (2, 1)  # the active memories walked (the survivor, the stale one); 1 past 90 days
    assert got["tune"] == (0, 0)
    assert got["purge"] == (0, 0)
    assert runs[0]["params"]["threshold"] == 0.85 and runs[1]["params"]["mode"] == "gentle"
    st = {r["job"]: r for r in rows(conn, "select * from pgmem.job_status")}
    assert set(st) == {"merge", "prune", "archive", "tune", "purge"}
    assert all(st[r["job"]]["last_run_id"] == r["id"] and st[r["job"]]["last_status"] == "ok" for r in runs)
    assert st["merge"]["runs_7d"] == 1 and st["merge"]["failures_7d"] == 0


def test_concurrent_run_is_skipped_and_job_status_shows_the_latest(conn, dsn):
    remember(conn, "one", e(1))
    merge(conn)
    first = job_runs(conn, "merge")[-1]
    with connect(dsn, autocommit=False) as other:
        # a batch of merge for acme is under way in another session (its transaction is open)
        other.execute("select count(*) from pgmem.merge_duplicates()")
        other_pid = other.info.backend_pid
        assert merge(conn) == []
        skipped = job_runs(conn, "merge")[-1]
        assert skipped["status"] == "skipped"
        assert skipped["error"].startswith(f"skipped: a batch of merge for acme is running in backend pid {other_pid} "
                                           "(transaction since ")
        assert skipped["error"].endswith("last statement: select count(*) from pgmem.merge_duplicates())")
        assert skipped["tenant"] == "acme" and skipped["finished_at"] is not None
        st = one(conn, "select * from pgmem.job_status where job = 'merge' and tenant = 'acme'")
        assert st["last_run_id"] == first["id"] and st["last_status"] == "ok"
        # another tenant's merge is not blocked... except by the maintenance lock the batch holds:
        # it waits job_lock_timeout_ms, then is skipped naming the holder
        conn.execute("insert into pgmem.settings (tenant, key, value) values ('*', 'job_lock_timeout_ms', '300') "
                     "on conflict (tenant, key) do update set value = excluded.value")
        with connect(dsn, tenant="other") as o2:
            merge(o2)
            r = job_runs(conn, "merge")[-1]
            assert (r["tenant"], r["status"]) == ("other", "skipped")
            assert r["error"].startswith("skipped: waited 300 ms (job_lock_timeout_ms) for another job that changes "
                                         f"memories, held by backend pid {other_pid} (transaction since ")
        # run_job: its batch is skipped too
        conn.execute("CALL pgmem.run_job('merge')")
        assert job_runs(conn, "merge")[-1]["status"] == "skipped"
        other.rollback()
        # a whole run_job holds the job between its transactions: while the backend that runs it
        # lives, a second run_job, or a batch by hand, is skipped
        other.execute("update pgmem.job_locks set holder_pid = pg_backend_pid(), holder_since = "
                      "(select backend_start from pg_stat_activity where pid = pg_backend_pid()) "
                      "where tenant = 'acme' and job = 'merge'")
        other.commit()
        n = len(job_runs(conn, "merge"))
        conn.execute("CALL pgmem.run_job('merge')")
        merge(conn)
        new = job_runs(conn, "merge")[n:]
        assert [r["status"] for r in new] == ["skipped", "skipped"]
        assert new[0]["error"].startswith(f"skipped: run_job('merge') for acme is running in backend pid {other_pid}")
    # the holder is gone: the job runs again
    wait_gone(conn, other_pid)
    merge(conn)
    last = job_runs(conn, "merge")[-1]
    assert last["status"] == "ok"
    st = one(conn, "select * from pgmem.job_status where job = 'merge' and tenant = 'acme'")
    assert st["last_run_id"] == last["id"]
    # one row per tenant (a superuser, like pgmem_admin, sees every tenant's)
    conn.execute("CALL pgmem.run_job('merge', '{\"tenant\": \"other\"}')")
    assert [r["tenant"] for r in rows(conn, "select * from pgmem.job_status where job = 'merge'")] == ["acme", "other"]


def test_run_job_loops_batches_until_done(conn):
    ids = [remember(conn, f"unrelated memory {i}", e(200 + i)) for i in range(7)]
    conn.execute("""CALL pgmem.run_job('merge', '{"batch": 2}')""")
    runs = job_runs(conn, "merge")
    assert [r["examined"] for r in runs] == [2, 2, 2, 1]
    assert all(r["status"] == "ok" and r["params"]["batch"] == 2 for r in runs)
    assert sum(r["examined"] for r in runs) == len(ids)
    assert [r["details"]["more"] for r in runs] == [True, True, True, False]
    # duplicates arriving later are merged by the next run
    d = remember(conn, "near copy of memory 0", at_cos(200, 300, 0.95), importance=0.1)
    conn.execute("CALL pgmem.run_job('merge')")
    assert mem(conn, d)["merged_into"] == ids[0]
    assert job_runs(conn, "merge")[-1]["examined"] == 1
    # max_batches bounds a run
    for i in range(5):
        remember(conn, f"another memory {i}", e(250 + i))
    n = len(job_runs(conn, "merge"))
    conn.execute("""CALL pgmem.run_job('merge', '{"batch": 1}', 3)""")
    assert len(job_runs(conn, "merge")) - n == 3
    # dry_run: one batch only
    n = len(job_runs(conn, "merge"))
    conn.execute("""CALL pgmem.run_job('merge', '{"batch": 1, "dry_run": true}')""")
    assert len(job_runs(conn, "merge")) - n == 1
    # the session's tenant is unchanged after a run for every tenant
    conn.execute("""CALL pgmem.run_job('prune', '{"tenant": "*", "mode": "gentle"}')""")
    assert job_runs(conn, "prune")[-1]["tenant"] is None
    assert scalar(conn, "select pgmem.current_tenant()") == "acme"


def test_run_job_errors(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown job "nope": jobs are merge, prune, archive, delete_archived, compact, tune, purge'):
        conn.execute("CALL pgmem.run_job('nope')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='job merge has no parameter "bogus"'):
        conn.execute("""CALL pgmem.run_job('merge', '{"bogus": 1}')""")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="JSON object"):
        conn.execute("""CALL pgmem.run_job('merge', '[1]')""")
    assert job_runs(conn) == []
    # a job that fails is recorded as failed, with the error, and the call reports a warning
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    conn.execute("""CALL pgmem.run_job('merge', '{"threshold": 2}')""")
    conn.execute("""CALL pgmem.run_job('prune', '{"mode": "brutal"}')""")
    runs = job_runs(conn)
    assert [(r["job"], r["status"]) for r in runs] == [("merge", "failed"), ("prune", "failed")]
    assert "threshold" in runs[0]["error"] and "2" in runs[0]["error"]
    assert 'unknown prune mode "brutal"' in runs[1]["error"]
    assert runs[0]["params"] == {"threshold": 2}
    assert any("pgmem job merge failed" in n for n in notices)
    st = {r["job"]: r for r in rows(conn, "select * from pgmem.job_status")}
    assert st["merge"]["last_status"] == "failed" and st["merge"]["failures_7d"] == 1
    assert "threshold" in st["merge"]["last_error"]
    # the run's hold on the job was released: the next run works
    conn.execute("CALL pgmem.run_job('merge')")
    assert job_runs(conn, "merge")[-1]["status"] == "ok"


# ============================================================================ pg_cron
def _dbname(dsn: str) -> str:
    return psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]


@pytest.mark.slow
def test_pg_cron_runs_a_scheduled_job(cluster, conn, dsn):
    db = _dbname(dsn)
    t = now(conn)
    exp = remember(conn, "expired memory", e(1), created_at=t - timedelta(days=2), expires_at=t - timedelta(days=1))
    with connect(dsn, tenant="other") as other:
        exp2 = remember(other, "expired memory of another tenant", e(1), created_at=t - timedelta(days=2),
                        expires_at=t - timedelta(days=1))
    command = """CALL pgmem.run_job('prune', '{"tenant": "*", "mode": "gentle"}')"""
    name = f"pgmem-test-prune-{db}"
    with connect(cluster.dsn(CRON_DB), tenant=None) as cron:
        jobid = scalar(cron, "select cron.schedule_in_database(%s, '* * * * *', %s, %s)", (name, command, db))
        try:
            run = None
            deadline = time.monotonic() + 75
            while time.monotonic() < deadline:
                run = one(conn, "select * from pgmem.job_runs where job = 'prune' and params->>'mode' = 'gentle' "
                                "and status <> 'running' order by id limit 1")
                if run:
                    break
                time.sleep(1)
            assert run is not None, "pg_cron did not run the prune job within 75 s"
            details = None
            while time.monotonic() < deadline + 15:
                details = rows(cron, "select status, return_message, database from cron.job_run_details "
                                     "where jobid = %s order by runid", (jobid,))
                if details and details[0]["status"] not in ("starting", "running"):
                    break
                time.sleep(0.5)
        finally:
            cron.execute("select cron.unschedule(%s)", (jobid,))
        assert scalar(cron, "select count(*) from cron.job where jobid = %s", (jobid,)) == 0
    assert run["status"] == "ok" and run["tenant"] is None and run["changed"] == 2
    assert details and details[0]["status"] == "succeeded", details
    assert details[0]["database"] == db
    assert mem(conn, exp)["state"] == "deleted"
    assert scalar(conn, "select state from pgmem.memories where id = %s", (exp2,)) == "deleted"


def test_schedule_jobs_needs_pg_cron_here(conn, dsn):
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="pg_cron is not installed in database") as ei:
        conn.execute("select * from pgmem.schedule_jobs()")
    assert _dbname(dsn) in str(ei.value) and CRON_DB in str(ei.value)
    assert "job_schedule_commands" in (ei.value.diag.message_hint or "")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="pg_cron is not installed in database"):
        conn.execute("select pgmem.unschedule_jobs()")


def test_job_schedule_commands(conn, dsn):
    db = _dbname(dsn)
    got = rows(conn, "select * from pgmem.job_schedule_commands()")
    assert [(r["job_name"], r["schedule"], r["command"], r["database_name"]) for r in got] == [
        (f"pgmem-merge-{db}", "0 * * * *", """CALL pgmem.run_job('merge', '{"tenant": "*"}')""", db),
        (f"pgmem-prune-{db}", "15 3 * * *", """CALL pgmem.run_job('prune', '{"tenant": "*"}')""", db),
        (f"pgmem-archive-{db}", "30 3 * * *", """CALL pgmem.run_job('archive', '{"tenant": "*"}')""", db),
        (f"pgmem-tune-{db}", "45 3 * * *", """CALL pgmem.run_job('tune', '{"tenant": "*"}')""", db),
        # Shadow's cleanup (issue 24): archived memories deleted after their retention, statistics
        (f"pgmem-delete_archived-{db}", "35 3 * * *", """CALL pgmem.run_job('delete_archived', '{"tenant": "*"}')""", db),
        (f"pgmem-compact-{db}", "0 4 * * *", """CALL pgmem.run_job('compact', '{"tenant": "*"}')""", db),
        # the index job (440_index.sql): every minute, from its row in the job registry
        (f"pgmem-index-{db}", "* * * * *", """CALL pgmem.run_job('index', '{"tenant": "*"}')""", db),
        # reconstructive's work queue and reflection, clusters' cluster job: their registry rows
        (f"pgmem-work-{db}", "* * * * *", """CALL pgmem.run_job('work', '{"tenant": "*"}')""", db),
        (f"pgmem-reflect-{db}", "40 * * * *", """CALL pgmem.run_job('reflect', '{"tenant": "*"}')""", db),
        (f"pgmem-cluster-{db}", "20 * * * *", """CALL pgmem.run_job('cluster', '{"tenant": "*"}')""", db),
        # the read path's lexicon job (201_lexical.sql): folds the appended lexical statistics
        (f"pgmem-lexicon-{db}", "* * * * *", """CALL pgmem.run_job('lexicon', '{"tenant": "*"}')""", db),
        # living memory's access job (212_access_log.sql): folds the retrievals and uses appended
        (f"pgmem-access-{db}", "* * * * *", """CALL pgmem.run_job('access', '{"tenant": "*"}')""", db),
        # and VACUUM, which no function may run: its own statement (425_compact.sql)
        (f"pgmem-vacuum-{db}", "10 4 * * *", scalar(conn, "select pgmem.vacuum_command()"), db),
    ]
    got = rows(conn, "select * from pgmem.job_schedule_commands(merge => null, purge => '0 4 * * 0', database => 'elsewhere')")
    assert [r["job_name"] for r in got] == ["pgmem-prune-elsewhere", "pgmem-archive-elsewhere",
                                           "pgmem-tune-elsewhere", "pgmem-purge-elsewhere", "pgmem-delete_archived-elsewhere",
                                           "pgmem-compact-elsewhere", "pgmem-index-elsewhere",
                                           "pgmem-work-elsewhere", "pgmem-reflect-elsewhere", "pgmem-cluster-elsewhere",
                                           "pgmem-lexicon-elsewhere", "pgmem-access-elsewhere", "pgmem-vacuum-elsewhere"]
    # each command is valid as it stands
    for r in rows(conn, "select * from pgmem.job_schedule_commands()"):
        conn.execute(r["command"])


def _cli(dsn: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PGMEM_DSN": dsn, "PYTHONPATH": str(ROOT / "python")}
    return subprocess.run([sys.executable, "-c", "import sys; from pgmem.cli import main; sys.exit(main())", *args],
                          env=env, capture_output=True, text=True, timeout=120)


JOBS_SCHEDULED = ("merge", "prune", "archive", "tune", "index", "work", "reflect", "cluster", "lexicon", "access",
                  "delete_archived", "compact")


def test_cli_jobs_schedule_status_unschedule(cluster, conn, dsn):
    db = _dbname(dsn)
    q = "select jobname, schedule, command, database from cron.job where database = %s order by jobname"
    with connect(cluster.dsn(CRON_DB), tenant=None) as cron:
        try:
            p = _cli(dsn, "jobs", "schedule", "--merge", "0 5 * * *")
            assert p.returncode == 0, p.stderr
            got = rows(cron, q, (db,))
            assert [(r["jobname"], r["schedule"]) for r in got] == [
                (f"pgmem-access-{db}", "* * * * *"),
                (f"pgmem-archive-{db}", "30 3 * * *"), (f"pgmem-cluster-{db}", "20 * * * *"),
                (f"pgmem-compact-{db}", "0 4 * * *"), (f"pgmem-delete_archived-{db}", "35 3 * * *"),
                (f"pgmem-index-{db}", "* * * * *"), (f"pgmem-lexicon-{db}", "* * * * *"), (f"pgmem-merge-{db}", "0 5 * * *"),
                (f"pgmem-prune-{db}", "15 3 * * *"), (f"pgmem-reflect-{db}", "40 * * * *"),
                (f"pgmem-tune-{db}", "45 3 * * *"), (f"pgmem-vacuum-{db}", "10 4 * * *"), (f"pgmem-work-{db}", "* * * * *")]
            assert {r["command"] for r in got} == {f"""CALL pgmem.run_job('{j}', '{{"tenant": "*"}}')"""
                                                   for j in JOBS_SCHEDULED} | {scalar(conn, "select pgmem.vacuum_command()")}
            assert p.stdout.count("scheduled pgmem-") == 13

            conn.execute("select * from pgmem.prune('gentle')")
            p = _cli(dsn, "jobs", "status")
            assert p.returncode == 0, p.stderr
            assert "prune" in p.stdout and "ok" in p.stdout
            assert "schedules:" in p.stdout
            for j in JOBS_SCHEDULED:
                assert f"pgmem-{j}-{db}" in p.stdout

            p = _cli(dsn, "jobs", "unschedule")
            assert p.returncode == 0, p.stderr
            assert "removed 13 schedule(s)" in p.stdout
            assert rows(cron, q, (db,)) == []
            p = _cli(dsn, "jobs", "status")
            assert p.returncode == 0 and "no pg_cron schedules" in p.stdout
        finally:
            cron.execute("select cron.unschedule(jobid) from cron.job where database = %s", (db,))


# ============================================================================ demo data
@pytest.fixture(scope="module")
def demo_template(cluster):
    """A database with examples/demo_conversation.jsonl ingested (with embeddings), made once;
    each demo test works on a copy."""
    pytest.importorskip("sentence_transformers", reason="needs the [embed] extra (make setup)")
    from conftest import TEMPLATE, _janitor
    from pgmem.client import MemoryClient

    name = f"t_demo_{uuid.uuid4().hex[:8]}"
    j = _janitor(cluster, name, TEMPLATE)
    j.init()
    try:
        events = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]
        with MemoryClient(cluster.dsn(name), tenant="acme") as mc:
            results = mc.remember_many(events, progress=False)
        decisions: dict[str, int] = {}
        for r in results:
            decisions[r.decision] = decisions.get(r.decision, 0) + 1
        yield name, events, decisions
    finally:
        j.drop()


@pytest.fixture
def demo(cluster, demo_template):
    from conftest import _janitor

    template, events, decisions = demo_template
    name = f"t_{uuid.uuid4().hex[:12]}"
    j = _janitor(cluster, name, template)
    j.init()
    try:
        yield cluster.dsn(name), events, decisions
    finally:
        j.drop()


def _root(conn, mid: int) -> int:
    seen = set()
    m = mem(conn, mid)
    while m["state"] == "merged":
        assert m["id"] not in seen
        seen.add(m["id"])
        m = mem(conn, m["merged_into"])
    return m["id"]


@pytest.mark.slow
def test_demo_conversation_merge(demo):
    dsn, events, decisions = demo
    print(f"\ndemo: {len(events)} events -> {decisions}")
    with connect(dsn) as conn:
        key_to_id = {r["event_key"]: r["id"] for r in rows(conn, "select id, event_key from pgmem.memories")}
        assert scalar(conn, "select count(*) from pgmem.memories where embedding is null") == 0
        near = [(ev["event_id"], ev["metadata"]["near_duplicate_of"]) for ev in events
                if (ev.get("metadata") or {}).get("near_duplicate_of")]
        assert len(near) == 12

        def found(res):
            pairs = {frozenset((r["survivor_id"], r["merged_id"])) for r in res}
            return [(a, b) for a, b in near if a in key_to_id and b in key_to_id
                    and frozenset((key_to_id[a], key_to_id[b])) in pairs]

        snap = snapshot(conn)
        dry75 = merge(conn, threshold=0.75, dry_run=True)
        dry85 = merge(conn, threshold=0.85, dry_run=True)
        assert snapshot(conn) == snap
        stored_near = sum(1 for a, b in near if a in key_to_id and b in key_to_id)
        h85, h75 = found(dry85), found(dry75)
        print(f"demo: {stored_near} of {len(near)} marked near-duplicate pairs have both events stored")
        print(f"demo: pairs at 0.85: {len(dry85)}; marked near-duplicates among them: {len(h85)} {h85}")
        print(f"demo: pairs at 0.75: {len(dry75)}; marked near-duplicates among them: {len(h75)} {h75}")
        assert dry85, "expected at least one pair at 0.85 in the demo data"

        real = merge(conn, threshold=0.85)
        assert all(r["applied"] for r in real)
        print(f"demo: dry run pairs {sorted(pairs_of(dry85))}; real run merged {sorted(pairs_of(real))}")
        # the same memories are involved, each dry-run pair ends up in one group, and the real run
        # merges exactly one memory per pair it lists
        members = lambda res: {i for r in res for i in (r["survivor_id"], r["merged_id"])}
        assert members(real) == members(dry85)
        for r in dry85:
            assert _root(conn, r["survivor_id"]) == _root(conn, r["merged_id"])
        merged_now = {r["id"] for r in rows(conn, "select id from pgmem.memories where state = 'merged'")}
        assert merged_now == {m for _, m in pairs_of(real)}
        for s, m in pairs_of(real):
            assert mem(conn, m)["merged_into"] == s and m in mem(conn, s)["merged_from"]
        s, m = sorted(pairs_of(real))[0]
        u = one(conn, "select * from pgmem.unmerge(%s)", (m,))
        assert u["state"] == "active" and u["merged_into"] is None
        assert mem(conn, m)["state"] == "active"
        assert m not in mem(conn, s)["merged_from"]
        assert hist(conn, m)[-1]["op"] == "unmerge"


def test_demo_dry_run_lists_what_the_real_run_merges(demo):
    dsn, _, _ = demo
    with connect(dsn) as conn:
        dry = merge(conn, threshold=0.85, dry_run=True)
        real = merge(conn, threshold=0.85)
        assert pairs_of(dry) == pairs_of(real)


@pytest.mark.parametrize("call", [
    "select * from pgmem.merge_duplicates(batch => {b})",
    "select * from pgmem.prune(batch => {b})",
    "select * from pgmem.purge(batch => {b})",
    "select * from pgmem.archive_stale(batch => {b})",
    "select * from pgmem.delete_archived(batch => {b})",
])
@pytest.mark.parametrize("b", ["0", "-5", "null"])
def test_every_job_rejects_a_batch_out_of_range(conn, call, b):
    before = conn.execute("select count(*) from pgmem.job_runs").fetchone()[0]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"batch must be between 1 and \d+, got"):
        conn.execute(call.format(b=b))
    assert conn.execute("select count(*) from pgmem.job_runs").fetchone()[0] == before  # no run recorded
