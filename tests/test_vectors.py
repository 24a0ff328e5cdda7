"""Vectors in a table of their own (STORAGE.md, sql/125_vectors.sql, 440_index.sql):
pgmem.memory_vectors holds exactly the active, embedded memories that the index job moved there,
pgmem.vector_queue the ones waiting; pgmem._neighbours searches both; the triggers keep both in
step with pgmem.memories in the writing transaction. And the surprise gate, taken again when a
memory gets its embedding late (issue 14).
"""
from __future__ import annotations

import threading
import time

import psycopg
import pytest

from conftest import at_cos, connect, e
from sqlhelpers import call, rows, scalar


def remember(conn, content, embedding=None, **kw) -> dict:
    return call(conn, "remember", content, embedding=embedding, **kw)[0]


def where(conn) -> dict[int, str]:
    """memory id -> 'indexed' | 'queued' (never both)."""
    out = {}
    for (mid,) in conn.execute("select memory_id from pgmem.memory_vectors"):
        out[mid] = "indexed"
    for (mid,) in conn.execute("select memory_id from pgmem.vector_queue"):
        assert mid not in out, f"memory {mid} both indexed and queued"
        out[mid] = "queued"
    return out


def index(conn, **kw) -> dict:
    names = ", ".join(f"{k} => %({k})s" for k in kw)
    return rows(conn, f"select * from pgmem.index_vectors({names})", kw)[0]


def consistent(conn) -> None:
    """memory_vectors ∪ vector_queue = the active embedded memories; vectors are the memories'."""
    want = {r[0] for r in conn.execute("select id from pgmem.memories where state = 'active' and embedding is not null")}
    assert set(where(conn)) == want
    assert scalar(conn, "select count(*) from pgmem.memory_vectors v join pgmem.memories m on m.id = v.memory_id "
                        "where v.embedding <> m.embedding or v.user_scope <> coalesce(m.user_id, '') or v.tenant <> m.tenant") == 0


def test_memories_are_queued_then_indexed_and_follow_every_change(conn):
    a = remember(conn, "Deploys happen on Tuesday mornings", e(0), force=True)["memory_id"]
    b = remember(conn, "Lunch is at noon in the canteen", e(1), force=True)["memory_id"]
    c = remember(conn, "A memory still without a vector")["memory_id"]
    assert where(conn) == {a: "queued", b: "queued"}
    consistent(conn)
    r = index(conn)
    assert (r["indexed"], r["dropped"], r["queued"]) == (2, 0, 0)
    assert where(conn) == {a: "indexed", b: "indexed"}
    assert [j["status"] for j in rows(conn, "select status from pgmem.job_runs where job = 'index'")] == ["ok"]
    # a late embedding queues it; a state change takes it out of both; restore queues it again
    conn.execute("select pgmem.complete_embedding(%s, %s, 'm')", (c, e(2)))
    assert where(conn)[c] == "queued"
    conn.execute("select pgmem.forget(%s)", (a,))
    conn.execute("select pgmem.forget(%s)", (c,))
    assert where(conn) == {b: "indexed"}
    conn.execute("select pgmem.restore(%s)", (a,))
    assert where(conn) == {a: "queued", b: "indexed"}
    consistent(conn)
    # a new vector, or another user, re-queues the memory (the indexed vector is no longer its own)
    index(conn)
    conn.execute("select pgmem.update_memory(%s, %s)", (b, psycopg.types.json.Jsonb({"embedding": e(3).tolist()})))
    assert where(conn)[b] == "queued"
    index(conn)
    conn.execute("select pgmem.update_memory(%s, '{\"user_id\": \"maya\"}')", (a,))
    assert where(conn)[a] == "queued"
    index(conn)
    consistent(conn)
    assert scalar(conn, "select user_scope from pgmem.memory_vectors where memory_id = %s", (a,)) == "maya"
    # touching a memory (usage) changes nothing here
    before = scalar(conn, "select xmin::text from pgmem.memory_vectors where memory_id = %s", (b,))
    conn.execute("update pgmem.memories set access_count = access_count + 1 where id = %s", (b,))
    assert scalar(conn, "select xmin::text from pgmem.memory_vectors where memory_id = %s", (b,)) == before
    # a content change drops the vector until the worker embeds the new text
    conn.execute("select pgmem.update_memory(%s, '{\"content\": \"Lunch moved to one o clock\"}')", (b,))
    assert b not in where(conn)
    # purge deletes for good: the vector goes with the memory
    conn.execute("delete from pgmem.memories where id = %s", (a,))
    consistent(conn)


def test_neighbours_see_indexed_and_queued_memories_exactly(conn):
    ids = [remember(conn, f"memory number {i} about the sea", at_cos(10, 11 + i, 0.99 - 0.05 * i), force=True)["memory_id"]
           for i in range(6)]
    other = remember(conn, "memory of another user", at_cos(10, 30, 0.999), user_id="ola", force=True)["memory_id"]
    index(conn, batch=3)  # three indexed, three (and ola's) queued
    assert sorted(where(conn).values()).count("indexed") == 3
    got = rows(conn, "select * from pgmem._neighbours('acme', %s, 4, '')", (e(10),))
    assert [r["id"] for r in got] == ids[:4]
    for r, i in zip(got, range(4)):
        assert r["distance"] == pytest.approx(1 - (0.99 - 0.05 * i), abs=1e-6)
    # without a user scope: every user's; another tenant's: never
    assert [r["id"] for r in rows(conn, "select * from pgmem._neighbours('acme', %s, 2)", (e(10),))] == [other, ids[0]]
    assert rows(conn, "select * from pgmem._neighbours('other', %s, 5)", (e(10),)) == []
    assert rows(conn, "select * from pgmem._neighbours('acme', null, 5)") == []


def test_index_job_and_a_concurrent_state_change_never_leave_a_stale_vector(dsn):
    """A batch of the index job locks the queue rows it moves; a forget of one of them waits
    for the batch and then removes what it moved."""
    with connect(dsn) as c:
        mid = remember(c, "a memory to be indexed and forgotten at once", e(5), force=True)["memory_id"]
        with connect(dsn, tenant=None, autocommit=False) as job:
            assert index(job)["indexed"] == 1  # moved, not committed yet
            done = threading.Event()

            def forget():
                with connect(dsn) as f:
                    f.execute("select pgmem.forget(%s)", (mid,))
                done.set()
            t = threading.Thread(target=forget)
            t.start()
            time.sleep(0.5)
            assert not done.is_set()  # waits for the batch's lock on the queue row
            job.commit()
            t.join(10)
            assert done.is_set()
        assert where(c) == {}
        consistent(c)


def test_late_embedding_takes_the_surprise_gate_again(conn):
    """Before: a memory embedded later was never gated again, and a near-duplicate stayed.
    Now, below the threshold with its vector, it is merged into its nearest memory."""
    first = remember(conn, "The staff party is on the roof terrace", e(7), category="context")["memory_id"]
    # nearly the same words (Jaccard 7/8): on words alone the gate lets it through (surprise
    # .8 × .125 + .2 × rarity(1) = .226), with a vector at cosine .995 it would not (.104)
    r = remember(conn, "The staff party is on the roof terrace tonight", category="context")
    assert r["decision"] == "stored" and r["surprise"] >= 0.15
    late = r["memory_id"]
    m = rows(conn, "select (pgmem.complete_embedding(%s, %s, 'm')).*", (late, at_cos(7, 8, 0.995)))[0]
    assert m["state"] == "merged" and m["merged_into"] == first
    assert m["gate"]["late_decision"] == "merged" and m["gate"]["nearest_id"] == first
    assert m["gate"]["surprise"] < 0.15 and m["gate"]["reason"].startswith("surprise ")
    h = rows(conn, "select op, details from pgmem.history where memory_id = %s order by id", (late,))
    assert [x["op"] for x in h] == ["add", "embed", "merge"]
    assert h[-1]["details"]["method"] == "late_gate" and h[-1]["details"]["survivor_id"] == first
    # reversible
    conn.execute("select pgmem.unmerge(%s)", (late,))
    assert scalar(conn, "select state from pgmem.memories where id = %s", (late,)) == "active"
    # a restatement with new numbers stays, and says why
    r = remember(conn, "The staff party is on the roof terrace on 19", category="context")
    m = rows(conn, "select (pgmem.complete_embedding(%s, %s, 'm')).*", (r["memory_id"], at_cos(7, 9, 0.995)))[0]
    assert m["state"] == "active" and m["gate"]["late_decision"] == "stored"
    assert m["gate"]["kept_because"].startswith("new numbers: ")
    # a memory that is novel with its vector stays too
    r = remember(conn, "The printer on floor two is broken", category="context")
    m = rows(conn, "select (pgmem.complete_embedding(%s, %s, 'm')).*", (r["memory_id"], e(40)))[0]
    assert m["state"] == "active" and m["gate"]["late_decision"] == "stored"
