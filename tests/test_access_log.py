"""Retrievals and uses (issue 24; sql/212_access_log.sql): every ranking appends what it returned,
every context what it packed; the job access folds them. Uses move JAM's usage and Engram's
access count; retrievals do not, so what one query returns never decides the next one's top.
Fragment's rehearsal counts both (pgmem.accesses, each row with its count), recomputed by hand."""
from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np
import psycopg
import pytest

from conftest import e, at_cos
from sqlhelpers import call, rows, scalar


def remember(c, text, vec, **kw):
    return call(c, "remember", text, embedding=vec, force=True, **kw)[0]["memory_id"]


@pytest.fixture
def mem(conn):
    ids = {}
    texts = {"allergy": ("Maya is allergic to peanuts", at_cos(1, 2, 0.95)),
             "nut": ("Peanut butter is in the kitchen", at_cos(1, 3, 0.7)),
             "editor": ("Maya switched from VS Code to Neovim", e(10)),
             "vim": ("Neovim config lives in the dotfiles repo", at_cos(10, 11, 0.8)),
             "trip": ("Flight to Lisbon on Friday", e(20))}
    for k, (t, v) in texts.items():
        ids[k] = remember(conn, t, v, user_id="maya", session_id="s1")
    conn.execute("select * from pgmem.index_vectors(1000)")
    conn.execute("select pgmem.fold_access_log()")  # (nothing yet)
    return ids


def log(conn):
    return rows(conn, "select kind, source, ids from pgmem.access_log order by id")


def test_search_records_what_it_returned(conn, mem):
    hits = call(conn, "search", query_text="peanuts", query_embedding=e(1), k=3)
    assert log(conn) == [{"kind": "retrieval", "source": "search", "ids": [h["id"] for h in hits]}]
    # the reference and explanations record nothing of their own
    call(conn, "search_exact", query_text="peanuts", query_embedding=e(1), k=3)
    assert len(log(conn)) == 1
    # activate and recall record theirs
    a = call(conn, "activate", query_text="peanuts", query_embedding=e(1), k=2)
    r = call(conn, "recall", query_text="peanuts", query_embedding=e(1), k=2)
    assert log(conn)[1:] == [{"kind": "retrieval", "source": "activate", "ids": [x["id"] for x in a]},
                             {"kind": "retrieval", "source": "recall", "ids": [x["id"] for x in r]}]


def test_nothing_is_recorded_read_only_or_switched_off(conn, mem):
    with conn.transaction():
        conn.execute("set transaction read only")
        assert len(call(conn, "search", query_text="peanuts", query_embedding=e(1), k=3)) == 3
    conn.execute("set pgmem.record_retrievals = off")
    call(conn, "search", query_text="peanuts", query_embedding=e(1), k=3)
    conn.execute("reset pgmem.record_retrievals")
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'record_retrievals', 'false')")
    call(conn, "search", query_text="peanuts", query_embedding=e(1), k=3)
    assert log(conn) == []
    # uses are recorded whatever the setting
    call(conn, "build_context", query_text="peanuts", query_embedding=e(1), token_budget=20)
    assert [x["kind"] for x in log(conn)] == ["use"]


def test_contexts_record_uses(conn, mem):
    ctx = call(conn, "build_context", query_text="peanuts", query_embedding=e(1), token_budget=20)
    packed = [r["id"] for r in sorted((r for r in ctx if r["selected"]), key=lambda r: r["pick"])]
    assert packed and len(packed) < len(ctx)
    uses = [x for x in log(conn) if x["kind"] == "use"]
    assert uses == [{"kind": "use", "source": "build_context", "ids": packed}]
    # the search build_context ranks with is a retrieval of every candidate
    assert [x["source"] for x in log(conn) if x["kind"] == "retrieval"] == ["search"]


def test_the_fold_moves_uses_not_retrievals(conn, mem):
    before = {r["id"]: r for r in rows(conn, "select id, access_count, last_accessed_at from pgmem.memories")}
    for _ in range(3):
        call(conn, "search", query_text="peanuts", query_embedding=e(1), k=2)  # retrievals
    # uses as a context records them (touch, explicit feedback, records its uses at once)
    conn.execute("select pgmem._record_access('use', 'test', array[%s, %s]::bigint[])", (mem["allergy"], mem["nut"]))
    conn.execute("select pgmem._record_access('use', 'test', array[%s]::bigint[])", (mem["allergy"],))
    assert scalar(conn, "select pgmem.fold_access_log()") == 5
    assert log(conn) == []
    after = {r["id"]: r for r in rows(conn, "select id, access_count, last_accessed_at from pgmem.memories")}
    assert after[mem["allergy"]]["access_count"] == before[mem["allergy"]]["access_count"] + 2
    assert after[mem["nut"]]["access_count"] == before[mem["nut"]]["access_count"] + 1
    for k in ("editor", "vim", "trip"):
        assert after[mem[k]] == before[mem[k]]
    assert after[mem["allergy"]]["last_accessed_at"] is not None
    # the access log proper: one row per memory and kind, with its count
    acc = {(r["memory_id"], r["kind"]): r["count"] for r in rows(conn, "select memory_id, kind, count from pgmem.accesses")}
    assert acc[(mem["allergy"], "retrieval")] == 3 and acc[(mem["allergy"], "use")] == 2
    assert acc[(mem["nut"], "use")] == 1
    # memories used together are bound together, once per use together
    co = rows(conn, "select src_id, dst_id, count from pgmem.links where kind = 'co_access'")
    assert co == [{"src_id": min(mem["allergy"], mem["nut"]), "dst_id": max(mem["allergy"], mem["nut"]), "count": 1}]


def test_rehearsal_counts_each_access(conn, mem):
    """Fragment strength: min(1, salience/(1 + sqrt(age_h)) + Σ 0.1/(1 + h_since^0.3)) over every
    access; a folded row with count 3 is three accesses at its time."""
    for _ in range(3):
        call(conn, "search", query_text="Lisbon", query_embedding=e(20), k=1)
    conn.execute("select pgmem.fold_access_log()")
    m = rows(conn, "select salience, created_at from pgmem.memories where id = %s", (mem["trip"],))[0]
    at = scalar(conn, "select accessed_at from pgmem.accesses where memory_id = %s", (mem["trip"],))
    as_of = scalar(conn, "select now() + interval '2 hours'")
    age_h = (as_of - m["created_at"]).total_seconds() / 3600
    since_h = (as_of - at).total_seconds() / 3600
    expect = min(1.0, m["salience"] / (1 + math.sqrt(age_h)) + 3 * 0.1 / (1 + since_h ** 0.3))
    assert scalar(conn, "select pgmem.memory_strength(%s, %s)", (mem["trip"], as_of)) == pytest.approx(expect, abs=1e-6)


def test_one_query_does_not_decide_the_next(conn, mem):
    """The loop closed: a hundred retrievals of one query's results change neither that query's
    ranking nor an unrelated one's; uses move only the memories used, by the usage signal."""
    def top(text, vec, k=5):
        return [(h["id"], round(h["score"], 12)) for h in call(conn, "search", query_text=text, query_embedding=vec, k=k,
                                                                as_of=datetime(2030, 1, 1, tzinfo=timezone.utc))]
    a0, b0 = top("peanuts", e(1)), top("editor", e(10))
    for _ in range(100):
        call(conn, "search", query_text="peanuts", query_embedding=e(1), k=5)
    conn.execute("select pgmem.fold_access_log(100000)")
    assert top("peanuts", e(1)) == a0 and top("editor", e(10)) == b0
    # uses of the peanut memories: the unrelated question's top does not move
    b2 = top("editor", e(10), k=2)
    for _ in range(20):
        conn.execute("select pgmem._record_access('use', 'test', array[%s, %s]::bigint[])", (mem["allergy"], mem["nut"]))
    conn.execute("select pgmem.fold_access_log(100000)")
    assert top("editor", e(10), k=2) == b2 == b0[:2]
    assert [i for i, _ in top("peanuts", e(1))][:2] == [i for i, _ in a0][:2]
