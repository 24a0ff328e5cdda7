"""Single-memory operations (forget, restore, update_memory, revert, history, get_memory),
the history triggers, tenant isolation of these operations, the embedding queue protocol,
and the decay / strength formulas of sql/030_decay.sql against the designs' tables.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from conftest import connect
from sqlhelpers import call, one, rows, scalar

DIM = 384
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)


# ---------------------------------------------------------------------------- helpers
def unit(*pairs: tuple[int, float]) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    for i, x in pairs:
        v[i] = x
    return v


VEC_E0 = unit((0, 1.0))
VEC_06 = unit((0, 0.6), (1, 0.8))  # cosine 0.6 with VEC_E0


def remember(conn, content, **kw) -> dict:
    return call(conn, "remember", content, **kw)[0]


def history(conn, memory_id) -> list[dict]:
    return rows(conn, "select * from pgmem.history(%s)", (memory_id,))


def ops(conn, memory_id) -> list[str]:
    return [h["op"] for h in history(conn, memory_id)]


def queued(conn) -> list[int]:
    return [r[0] for r in conn.execute("select memory_id from pgmem.embedding_queue order by memory_id")]


# ---------------------------------------------------------------------------- forget / restore
def test_forget_and_restore(conn):
    mid = remember(conn, "The wifi password is hunter2", category="fact")["memory_id"]
    m = one(conn, "select * from pgmem.forget(%s, 'rotated')", (mid,))
    assert m["id"] == mid and m["state"] == "deleted"
    assert m["state_changed_at"] is not None
    h = history(conn, mid)
    assert [x["op"] for x in h] == ["add", "delete"]
    assert h[1]["before"]["state"] == "active"
    assert h[1]["after"]["state"] == "deleted"
    assert h[1]["before"]["content"] == h[1]["after"]["content"] == "The wifi password is hunter2"
    assert h[1]["details"] == {"reason": "rotated", "previous_state": "active"}
    assert h[1]["actor"] == scalar(conn, "select current_user")

    # forgetting twice changes nothing and records nothing
    again = one(conn, "select * from pgmem.forget(%s, 'again')", (mid,))
    assert again["state"] == "deleted"
    assert again["state_changed_at"] == m["state_changed_at"]
    assert ops(conn, mid) == ["add", "delete"]

    r = one(conn, "select * from pgmem.restore(%s, 'still valid')", (mid,))
    assert r["state"] == "active"
    h = history(conn, mid)
    assert [x["op"] for x in h] == ["add", "delete", "restore"]
    assert h[2]["before"]["state"] == "deleted" and h[2]["after"]["state"] == "active"
    assert h[2]["details"] == {"reason": "still valid", "previous_state": "deleted"}
    # restoring an active memory is a no-op
    one(conn, "select * from pgmem.restore(%s)", (mid,))
    assert ops(conn, mid) == ["add", "delete", "restore"]
    assert scalar(conn, "select state from pgmem.memories where id = %s", (mid,)) == "active"


def test_forgotten_memory_is_not_a_duplicate_or_neighbour(conn):
    mid = remember(conn, "Project Falcon launches in May")["memory_id"]
    conn.execute("select pgmem.forget(%s)", (mid,))
    r = remember(conn, "Project Falcon launches in May")
    assert r["decision"] == "stored" and r["memory_id"] != mid
    assert r["surprise"] == pytest.approx(1.0)  # the deleted memory is not "existing"


def test_restore_archived(conn):
    mid = remember(conn, "Old note about the printer")["memory_id"]
    conn.execute("update pgmem.memories set state = 'archived' where id = %s", (mid,))
    assert one(conn, "select * from pgmem.restore(%s)", (mid,))["state"] == "active"
    assert ops(conn, mid) == ["add", "archive", "restore"]


def test_restore_of_merged_memory_points_to_unmerge(conn):
    keep = remember(conn, "User prefers TypeScript")["memory_id"]
    gone = remember(conn, "User likes TypeScript a lot")["memory_id"]
    conn.execute("update pgmem.memories set state = 'merged', merged_into = %s where id = %s", (keep, gone))
    assert ops(conn, gone) == ["add", "merge"]  # inferred by the trigger
    n = len(history(conn, gone))
    with pytest.raises(psycopg.errors.InvalidParameterValue) as ei:
        conn.execute("select pgmem.restore(%s)", (gone,))
    assert ei.value.diag.message_primary == \
        f"memory {gone} was merged into memory {keep}: use pgmem.unmerge({gone}) to split it out again"
    assert scalar(conn, "select state from pgmem.memories where id = %s", (gone,)) == "merged"
    assert len(history(conn, gone)) == n


def test_forget_unknown_id(conn):
    with pytest.raises(psycopg.errors.NoDataFound, match='memory 987654 does not exist for tenant "acme"'):
        conn.execute("select pgmem.forget(987654)")


# ---------------------------------------------------------------------------- update_memory
def test_update_memory_records_before_and_after(conn):
    r = remember(conn, "Alice works at Initech", who="Alice", category="fact", embedding=VEC_E0)
    mid, old_importance = r["memory_id"], r["importance"]
    old = one(conn, "select * from pgmem.memories where id = %s", (mid,))
    m = one(conn, "select * from pgmem.update_memory(%s, %s, 'correction')",
            (mid, Jsonb({"importance": 0.9, "who": "Alice Smith", "topics": ["work", "career"],
                         "metadata": {"source": "hr"}})))
    assert m["importance"] == pytest.approx(0.9)
    assert m["who"] == "Alice Smith"
    assert m["topics"] == ["work", "career"]
    assert m["metadata"] == {"source": "hr"}
    assert m["gate"]["importance_source"] == "caller"
    # untouched fields stay
    assert m["content"] == old["content"] and m["category"] == "fact" and m["created_at"] == old["created_at"]
    assert m["embedding"] is not None and m["embedded_at"] == old["embedded_at"]
    assert m["updated_at"] > old["updated_at"]
    h = history(conn, mid)
    assert [x["op"] for x in h] == ["add", "update"]
    u = h[-1]
    assert u["before"]["who"] == "Alice" and u["after"]["who"] == "Alice Smith"
    assert u["before"]["importance"] == pytest.approx(old_importance, abs=1e-6)
    assert u["after"]["importance"] == pytest.approx(0.9)
    assert u["before"]["topics"] == [] and u["after"]["topics"] == ["work", "career"]
    assert u["details"]["reason"] == "correction"
    assert sorted(u["details"]["fields"]) == ["importance", "metadata", "topics", "who"]
    # the content did not change: no re-embedding
    assert queued(conn) == []


def test_update_memory_rejects_unknown_field_and_empty_changes(conn):
    mid = remember(conn, "Bob likes chess")["memory_id"]
    n = len(history(conn, mid))
    with pytest.raises(psycopg.errors.InvalidParameterValue) as ei:
        conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({"who": "Bob", "state": "deleted"})))
    assert ei.value.diag.message_primary == '"state" cannot be changed with update_memory'
    hint = ei.value.diag.message_hint
    assert hint.startswith("editable fields: content, summary, who, what, happened_at, location, why, how, category")
    assert hint.endswith("(state changes: forget, restore, unmerge)")
    for bad in ({}, [], [{"who": "x"}], "text"):
        with pytest.raises(psycopg.errors.InvalidParameterValue,
                           match="changes must be a non-empty JSON object of column: new value"):
            conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb(bad)))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="changes must be a non-empty JSON object"):
        conn.execute("select pgmem.update_memory(%s, null)", (mid,))
    # nothing changed, the whole update was refused
    assert len(history(conn, mid)) == n
    assert scalar(conn, "select who from pgmem.memories where id = %s", (mid,)) is None


def test_update_memory_validates_values(conn):
    mid = remember(conn, "Bob likes chess")["memory_id"]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="valence must be between 0 and 1"):
        conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({"valence": 1.5})))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown category "hobby"'):
        conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({"category": "hobby"})))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="embedding has 3 dimensions"):
        conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({"embedding": [1, 2, 3]})))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="content is empty"):
        conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({"content": "  "})))
    assert ops(conn, mid) == ["add"]


def test_content_change_requeues_embedding_and_revert_restores(conn):
    text = "Alice works at Initech"
    mid = remember(conn, text, embedding=VEC_E0, embedding_model="mini", category="fact")["memory_id"]
    assert queued(conn) == []
    old = one(conn, "select * from pgmem.memories where id = %s", (mid,))
    assert old["embedding_model"] == "mini" and old["embedded_at"] is not None

    new_text = "Alice now works at Globex Corporation in the Springfield branch office"
    m = one(conn, "select * from pgmem.update_memory(%s, %s)", (mid, Jsonb({"content": new_text})))
    assert m["content"] == new_text
    assert m["embedding"] is None and m["embedded_at"] is None and m["embedding_model"] is None
    assert m["token_count"] == max(math.ceil(len(new_text) / 4), len(new_text.split()))
    assert m["token_count"] != old["token_count"]
    assert queued(conn) == [mid]
    assert scalar(conn, "select count(*) from pgmem.memories where tsv @@ websearch_to_tsquery('english', 'globex')") == 1
    u = history(conn, mid)[-1]
    assert u["op"] == "update"
    assert u["before"]["content"] == text and u["after"]["content"] == new_text
    assert u["before"]["has_embedding"] is True and u["after"]["has_embedding"] is False

    r = one(conn, "select * from pgmem.revert(%s)", (u["id"],))
    assert r["content"] == text
    assert r["state"] == "active"
    assert scalar(conn, "select content from pgmem.memories where id = %s", (mid,)) == text
    last = history(conn, mid)[-1]
    assert last["op"] == "restore"
    assert last["details"] == {"reverted_history_id": u["id"]}
    assert last["before"]["content"] == new_text and last["after"]["content"] == text
    # the reverted text still needs an embedding
    assert queued(conn) == [mid]
    assert scalar(conn, "select count(*) from pgmem.memories where tsv @@ websearch_to_tsquery('english', 'globex')") == 0


def test_revert_of_forget_brings_memory_back(conn):
    mid = remember(conn, "Car is parked on level 3")["memory_id"]
    conn.execute("select pgmem.forget(%s)", (mid,))
    hid = history(conn, mid)[-1]["id"]
    assert one(conn, "select * from pgmem.revert(%s)", (hid,))["state"] == "active"


def test_revert_needs_a_before_state(conn):
    mid = remember(conn, "Car is parked on level 3")["memory_id"]
    add_id = history(conn, mid)[0]["id"]
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match=f'history entry {add_id} does not exist for this tenant or has no "before" state'):
        conn.execute("select pgmem.revert(%s)", (add_id,))


def test_revert_restores_scope_fields(conn):
    mid = remember(conn, "Alice works at Initech", user_id="alice", session_id="s1")["memory_id"]
    conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({"user_id": "bob", "agent_id": "a7",
                                                                     "session_id": "s2"})))
    hid = history(conn, mid)[-1]["id"]
    r = one(conn, "select * from pgmem.revert(%s)", (hid,))
    assert (r["user_id"], r["agent_id"], r["session_id"]) == ("alice", None, "s1")


# ---------------------------------------------------------------------------- trigger-inferred ops
def test_direct_sql_updates_are_recorded_with_inferred_ops(conn):
    mid = remember(conn, "Standup moved to 9:30")["memory_id"]
    conn.execute("update pgmem.memories set state = 'archived' where id = %s", (mid,))
    h = history(conn, mid)
    assert [x["op"] for x in h] == ["add", "archive"]
    assert h[-1]["before"]["state"] == "active" and h[-1]["after"]["state"] == "archived"
    assert scalar(conn, "select state_changed_at is not null from pgmem.memories where id = %s", (mid,))

    # usage bookkeeping alone is not history
    conn.execute("update pgmem.memories set access_count = access_count + 1, last_accessed_at = now() where id = %s", (mid,))
    conn.execute("update pgmem.memories set access_count = access_count + 4 where id = %s", (mid,))
    assert ops(conn, mid) == ["add", "archive"]
    assert scalar(conn, "select access_count from pgmem.memories where id = %s", (mid,)) == 5

    conn.execute("update pgmem.memories set importance = 0.77 where id = %s", (mid,))
    conn.execute("update pgmem.memories set state = 'deleted' where id = %s", (mid,))
    conn.execute("update pgmem.memories set state = 'active' where id = %s", (mid,))
    conn.execute("update pgmem.memories set embedding = %s where id = %s", (VEC_E0, mid))
    assert ops(conn, mid) == ["add", "archive", "update", "delete", "restore", "embed"]
    # a no-op UPDATE writes nothing either
    conn.execute("update pgmem.memories set content = content where id = %s", (mid,))
    assert len(ops(conn, mid)) == 6


def test_hard_delete_is_recorded_as_purge(conn):
    mid = remember(conn, "Temporary scratch memory")["memory_id"]
    conn.execute("delete from pgmem.memories where id = %s", (mid,))
    h = conn.cursor(row_factory=dict_row).execute(
        "select * from pgmem.history where memory_id = %s order by id", (mid,)).fetchall()
    assert [x["op"] for x in h] == ["add", "purge"]
    assert h[-1]["before"]["content"] == "Temporary scratch memory" and h[-1]["after"] is None
    assert queued(conn) == []  # the queue entry went with it (on delete cascade)


# ---------------------------------------------------------------------------- tenant isolation
def test_other_tenants_memory_is_invisible(conn, dsn):
    with connect(dsn, tenant="other") as o:
        oid = scalar(o, "insert into pgmem.memories (content) values ('Other tenant secret plan') returning id")
        o.execute("update pgmem.memories set importance = 0.9 where id = %s", (oid,))
        assert len(history(o, oid)) == 2
    assert conn.execute("select * from pgmem.get_memory(%s)", (oid,)).fetchall() == []
    assert conn.execute("select * from pgmem.history(%s)", (oid,)).fetchall() == []
    with pytest.raises(psycopg.errors.NoDataFound) as ei:
        conn.execute("select pgmem.forget(%s)", (oid,))
    assert ei.value.diag.message_primary == f'memory {oid} does not exist for tenant "acme"'
    assert "check the id" in ei.value.diag.message_hint
    for sql in ("select pgmem.restore(%s)", "select pgmem.update_memory(%s, '{\"who\": \"x\"}')"):
        with pytest.raises(psycopg.errors.NoDataFound, match="does not exist for tenant"):
            conn.execute(sql, (oid,))
    other_hist = scalar(conn, "select max(id) from pgmem.history where memory_id = %s", (oid,))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="does not exist for this tenant"):
        conn.execute("select pgmem.revert(%s)", (other_hist,))
    # nothing happened to it
    row = conn.execute("select tenant, state, who from pgmem.memories where id = %s", (oid,)).fetchone()
    assert row == ("other", "active", None)
    assert scalar(conn, "select count(*) from pgmem.history where memory_id = %s", (oid,)) == 2
    # and the own tenant's memory is visible
    mid = remember(conn, "Acme memory")["memory_id"]
    assert [r[0] for r in conn.execute("select id from pgmem.get_memory(%s)", (mid,))] == [mid]


# ---------------------------------------------------------------------------- embedding queue
def _queue_three(conn) -> list[int]:
    return [remember(conn, t)["memory_id"] for t in
            ("Kiwis are flightless birds", "Rust has a borrow checker", "Lisbon has seven hills")]


def test_claim_is_skip_locked_across_connections(conn, dsn):
    ids = _queue_three(conn)
    assert queued(conn) == ids
    with conn.transaction():
        a = conn.cursor(row_factory=dict_row).execute("select * from pgmem.claim_embeddings(2)").fetchall()
        assert [r["memory_id"] for r in a] == ids[:2]
        assert a[0]["tenant"] == "acme" and a[0]["content"] == "Kiwis are flightless birds" and a[0]["attempts"] == 0
        with connect(dsn) as c2:
            with c2.transaction():
                b = [r[0] for r in c2.execute("select memory_id from pgmem.claim_embeddings(10)")]
                assert b == ids[2:]  # the first two are locked by the other worker
            with c2.transaction():
                # nothing left for a third claim while the first transaction holds its rows
                assert [r[0] for r in c2.execute("select memory_id from pgmem.claim_embeddings(10)")] == ids[2:]
    # a claim without completion leaves everything queued
    assert queued(conn) == ids


def test_rolled_back_claim_leaves_rows_queued(conn, dsn):
    ids = _queue_three(conn)
    with pytest.raises(RuntimeError):
        with conn.transaction():
            assert len(conn.execute("select * from pgmem.claim_embeddings(10)").fetchall()) == 3
            conn.execute("select pgmem.complete_embedding(%s, %s)", (ids[0], VEC_E0))
            raise RuntimeError("worker died")
    assert queued(conn) == ids
    assert scalar(conn, "select embedding is null from pgmem.memories where id = %s", (ids[0],))
    assert ops(conn, ids[0]) == ["add"]
    # and the next worker takes them
    with connect(dsn) as c2, c2.transaction():
        assert [r[0] for r in c2.execute("select memory_id from pgmem.claim_embeddings(10)")] == ids


def test_complete_embedding_finishes_surprise(conn):
    first = remember(conn, "Alpha rockets reached orbit", embedding=VEC_E0, force=True)
    assert first["decision"] == "stored"
    r = remember(conn, "Zebra migration patterns observed", valence=0.8, arousal=0.4)
    mid = r["memory_id"]
    gate = scalar(conn, "select gate from pgmem.memories where id = %s", (mid,))
    # without an embedding: keyword novelty 1 (no shared word), one existing episode
    kw, rar = float(gate["keyword_novelty"]), float(gate["rarity"])
    assert kw == 1.0 and rar == pytest.approx(1 / math.log2(3), abs=1e-6)
    assert r["surprise"] == pytest.approx(0.8 * kw + 0.2 * rar, abs=1e-5)
    emotion = min(1.0, 0.4 + abs(0.8 - 0.5))
    assert r["salience"] == pytest.approx((0.35 * emotion + 0.30 * 1.0 + 0.10 * 0) / 0.75, abs=1e-5)
    assert queued(conn) == [mid]

    with conn.transaction():
        claimed = [x[0] for x in conn.execute("select memory_id from pgmem.claim_embeddings(10)")]
        assert claimed == [mid]
        m = one(conn, "select * from pgmem.complete_embedding(%s, %s, 'test-model')", (mid, VEC_06))
    sem = 1 - 0.6
    surprise = 0.6 * sem + 0.3 * kw + 0.1 * rar
    assert m["surprise"] == pytest.approx(surprise, abs=1e-5)
    assert m["importance"] == pytest.approx(surprise * 0.6, abs=1e-5)  # episode weight
    assert m["salience"] == pytest.approx((0.35 * emotion + 0.30 * sem + 0.10 * 0) / 0.75, abs=1e-5)
    assert np.allclose(m["embedding"].to_numpy(), VEC_06)
    assert m["embedding_model"] == "test-model" and m["embedded_at"] is not None
    assert float(m["gate"]["semantic_novelty"]) == pytest.approx(sem, abs=1e-5)
    assert float(m["gate"]["surprise"]) == pytest.approx(surprise, abs=1e-5)
    assert m["gate"]["with_embedding"] is True and m["gate"]["completed_by_worker"] is True
    assert queued(conn) == []
    h = history(conn, mid)
    assert [x["op"] for x in h] == ["add", "embed"]
    assert h[-1]["before"]["has_embedding"] is False and h[-1]["after"]["has_embedding"] is True
    assert h[-1]["details"]["model"] == "test-model"
    assert h[-1]["details"]["semantic_novelty"] == pytest.approx(sem, abs=1e-5)


def test_complete_embedding_keeps_caller_importance(conn):
    remember(conn, "Alpha rockets reached orbit", embedding=VEC_E0, force=True)
    mid = remember(conn, "Zebra migration patterns observed", importance=0.33)["memory_id"]
    m = one(conn, "select * from pgmem.complete_embedding(%s, %s)", (mid, VEC_06))
    assert m["importance"] == pytest.approx(0.33)
    assert m["surprise"] == pytest.approx(0.6 * 0.4 + 0.3 * 1.0 + 0.1 / math.log2(3), abs=1e-5)


def test_complete_embedding_validates_vector(conn):
    mid = remember(conn, "Zebra migration patterns observed")["memory_id"]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="all zeros"):
        conn.execute("select pgmem.complete_embedding(%s, %s)", (mid, np.zeros(DIM, dtype=np.float32)))
    assert queued(conn) == [mid]


def test_fail_embedding_backs_off(conn):
    ids = _queue_three(conn)
    conn.execute("select pgmem.fail_embedding(%s, 'model timeout')", (ids[1],))
    row = one(conn, "select attempts, last_error, extract(epoch from not_before - now())::float8 as wait "
                    "from pgmem.embedding_queue where memory_id = %s", (ids[1],))
    assert row["attempts"] == 1 and row["last_error"] == "model timeout"
    assert 9.0 < row["wait"] <= 10.0
    with conn.transaction():
        assert [r[0] for r in conn.execute("select memory_id from pgmem.claim_embeddings(10)")] == [ids[0], ids[2]]
    # exponential: 10 s · 2^attempts, at most an hour
    conn.execute("select pgmem.fail_embedding(%s, 'again')", (ids[1],))
    row = one(conn, "select attempts, extract(epoch from not_before - now())::float8 as wait "
                    "from pgmem.embedding_queue where memory_id = %s", (ids[1],))
    assert row["attempts"] == 2 and 19.0 < row["wait"] <= 20.0
    conn.execute("update pgmem.embedding_queue set attempts = 12 where memory_id = %s", (ids[1],))
    conn.execute("select pgmem.fail_embedding(%s, %s)", (ids[1], "x" * 5000))
    row = one(conn, "select attempts, length(last_error) as n, extract(epoch from not_before - now())::float8 as wait "
                    "from pgmem.embedding_queue where memory_id = %s", (ids[1],))
    assert row["attempts"] == 13 and row["n"] == 2000 and 3599.0 < row["wait"] <= 3600.0
    # once the wait is over it is claimed again
    conn.execute("update pgmem.embedding_queue set not_before = now() - interval '1 second' where memory_id = %s", (ids[1],))
    with conn.transaction():
        assert ids[1] in [r[0] for r in conn.execute("select memory_id from pgmem.claim_embeddings(10)")]


def test_claim_all_tenants_as_superuser(conn, dsn):
    mine = remember(conn, "Acme memory to embed")["memory_id"]
    with connect(dsn, tenant="other") as o:
        theirs = remember(o, "Other memory to embed")["memory_id"]
        with o.transaction():
            assert [r[0] for r in o.execute("select memory_id from pgmem.claim_embeddings(10)")] == [theirs]
    with conn.transaction():
        assert [r[0] for r in conn.execute("select memory_id from pgmem.claim_embeddings(10)")] == [mine]
    with conn.transaction():
        rows = conn.execute("select memory_id, tenant from pgmem.claim_embeddings(10, all_tenants => true)").fetchall()
        assert rows == [(mine, "acme"), (theirs, "other")]
    # a worker without a tenant claims across tenants and completes another tenant's memory
    with connect(dsn, tenant=None) as w:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="pgmem.tenant is not set"):
            w.execute("select * from pgmem.claim_embeddings(10)")
        with w.transaction():
            assert len(w.execute("select * from pgmem.claim_embeddings(10, all_tenants => true)").fetchall()) == 2
            m = one(w, "select * from pgmem.complete_embedding(%s, %s)", (theirs, VEC_E0))
            assert m["tenant"] == "other" and m["embedding"] is not None
            # the tenant the function borrowed is given back
            assert scalar(w, "select pgmem.current_tenant()") is None
    assert queued(conn) == [mine]
    assert scalar(conn, "select tenant from pgmem.history where memory_id = %s and op = 'embed'", (theirs,)) == "other"


@pytest.mark.parametrize("batch", [0, -1, 10001, None])
def test_claim_batch_is_validated(conn, batch):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="batch must be between 1 and 10000, got"):
        conn.execute("select * from pgmem.claim_embeddings(%s::int)", (batch,))


# ---------------------------------------------------------------------------- decay formulas
def _at(days: float = 0, hours: float = 0) -> datetime:
    return T0 + timedelta(days=days, hours=hours)


@pytest.mark.parametrize("days, expected", [(0, 1.0), (30, 0.5), (60, 0.25), (90, 0.125)])
def test_exp_decay_table(conn, days, expected):
    assert scalar(conn, "select pgmem.exp_decay(%s)", (float(days),)) == pytest.approx(expected, abs=1e-12)
    # the same through age_days on timestamps
    assert scalar(conn, "select pgmem.exp_decay(pgmem.age_days(%s, %s))", (T0, _at(days))) == \
        pytest.approx(expected, abs=1e-12)


def test_exp_decay_other_half_life_and_negative_age(conn):
    assert scalar(conn, "select pgmem.exp_decay(7, 7)") == pytest.approx(0.5, abs=1e-12)
    assert scalar(conn, "select pgmem.exp_decay(10, 7)") == pytest.approx(math.exp(-math.log(2) * 10 / 7), abs=1e-12)
    assert scalar(conn, "select pgmem.exp_decay(-5)") == pytest.approx(1.0)
    assert scalar(conn, "select pgmem.age_days(%s, %s)", (_at(3), T0)) == 0.0  # never negative


@pytest.mark.parametrize("n, table", [(0, 1.0), (1, 1.1), (3, 1.2), (7, 1.3), (15, 1.4), (100, 1.67)])
def test_access_boost_table(conn, n, table):
    got = scalar(conn, "select pgmem.access_boost(%s)", (n,))
    assert got == pytest.approx(1 + math.log2(1 + n) * 0.1, abs=1e-9)
    assert got == pytest.approx(table, abs=0.005)


def test_access_boost_null_and_negative(conn):
    assert scalar(conn, "select pgmem.access_boost(null)") == pytest.approx(1.0)
    assert scalar(conn, "select pgmem.access_boost(-3)") == pytest.approx(1.0)


@pytest.mark.parametrize("days, table", [(0, 1.0), (30, 0.67), (60, 0.33), (90, 0.0), (120, 0.0)])
def test_linear_recency_table(conn, days, table):
    got = scalar(conn, "select pgmem.linear_recency(%s, %s)", (T0, _at(days)))
    assert got == pytest.approx(max(0.0, 1 - days / 90), abs=1e-12)
    assert got == pytest.approx(table, abs=0.005)


@pytest.mark.parametrize("n, expected", [(0, 0.0), (10, 0.1), (50, 0.5), (100, 1.0), (200, 1.0)])
def test_access_frequency_table(conn, n, expected):
    assert scalar(conn, "select pgmem.access_frequency(%s)", (n,)) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("days", [0, 1, 3, 10, 30, 365])
def test_power_law_decay(conn, days):
    assert scalar(conn, "select pgmem.power_law_decay(%s, 1.5)", (float(days),)) == \
        pytest.approx(1 / (1 + days) ** 1.5, rel=1e-12)
    assert scalar(conn, "select pgmem.power_law_decay(%s)", (float(days),)) == \
        pytest.approx(1 / (1 + days) ** 1.5, rel=1e-12)


@pytest.mark.parametrize("importance, days, accesses, half_life", [
    (0.8, 30, 3, 30), (0.435, 45, 100, 30), (1.0, 0, 0, 30), (0.5, 10, 7, 14)])
def test_decayed_importance(conn, importance, days, accesses, half_life):
    expected = importance * math.exp(-math.log(2) / half_life * days) * (1 + math.log2(1 + accesses) * 0.1)
    got = scalar(conn, "select pgmem.decayed_importance(%s, %s, %s, %s, %s)",
                 (importance, T0, accesses, _at(days), float(half_life)))
    assert got == pytest.approx(expected, rel=1e-9)
    if (importance, days, accesses) == (0.8, 30, 3):
        assert got == pytest.approx(0.48, abs=1e-9)  # 0.8 · 0.5 · 1.2


def _fragment_strength(salience, created, accesses, now):
    """fragment-reconstructive-memory.md, Strength Decay, verbatim."""
    age_hours = (now - created).total_seconds() / 3600
    decay = 1.0 / (1.0 + age_hours ** 0.5)
    bonus = 0.0
    for t in accesses:
        recency = (now - t).total_seconds() / 3600
        bonus += 0.1 / (1.0 + recency ** 0.3)
    return min(1.0, salience * decay + bonus)


def test_fragment_strength_by_hand(conn):
    accesses = [_at(hours=5), _at(hours=9)]
    now = _at(hours=10)
    expected = _fragment_strength(0.6, T0, accesses, now)
    got = scalar(conn, "select pgmem.fragment_strength(0.6, %s, %s::timestamptz[], %s)", (T0, accesses, now))
    assert got == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(0.6 / (1 + math.sqrt(10)) + 0.1 / (1 + 5 ** 0.3) + 0.1 / 2)
    # accesses after as_of do not count; no accesses = pure decay
    got = scalar(conn, "select pgmem.fragment_strength(0.6, %s, %s::timestamptz[], %s)",
                 (T0, accesses + [_at(hours=11)], now))
    assert got == pytest.approx(expected, rel=1e-9)
    assert scalar(conn, "select pgmem.fragment_strength(0.6, %s, '{}', %s)", (T0, now)) == \
        pytest.approx(0.6 / (1 + math.sqrt(10)), rel=1e-9)


def test_fragment_strength_is_capped_at_one(conn):
    accesses = [T0, T0]
    expected = _fragment_strength(0.95, T0, accesses, T0)
    assert expected == 1.0  # 0.95 + 0.1 + 0.1 capped
    assert scalar(conn, "select pgmem.fragment_strength(0.95, %s, %s::timestamptz[], %s)", (T0, accesses, T0)) == 1.0


def test_memory_strength_uses_the_access_log(conn, dsn):
    mid = scalar(conn, "insert into pgmem.memories (content, salience, created_at) "
                       "values ('Checked the oven twice', 0.6, now() - interval '10 hours') returning id")
    created, salience = conn.execute("select created_at, salience::float8 from pgmem.memories where id = %s", (mid,)).fetchone()
    assert salience == pytest.approx(0.6)  # a real: 0.6000000238...
    accesses = [created + timedelta(hours=5), created + timedelta(hours=9)]
    for t in accesses + [created + timedelta(hours=12)]:  # the last one is after as_of
        conn.execute("insert into pgmem.accesses (tenant, memory_id, accessed_at) values ('acme', %s, %s)", (mid, t))
    as_of = created + timedelta(hours=10)
    got = scalar(conn, "select pgmem.memory_strength(%s, %s)", (mid, as_of))
    assert got == pytest.approx(_fragment_strength(salience, created, accesses, as_of), rel=1e-9)
    # another tenant gets nothing
    with connect(dsn, tenant="other") as o:
        assert scalar(o, "select pgmem.memory_strength(%s, %s)", (mid, as_of)) is None


def test_emotional_intensity_and_processing_depth(conn):
    assert scalar(conn, "select pgmem.emotional_intensity(0.9, 0.3)") == pytest.approx(0.7)
    assert scalar(conn, "select pgmem.emotional_intensity(1.0, 0.9)") == pytest.approx(1.0)
    assert scalar(conn, "select pgmem.emotional_intensity(null, 0.2)") == pytest.approx(0.2)
    assert scalar(conn, "select pgmem.processing_depth('a', '', now(), null, 'b', 'c')") == pytest.approx(4 / 6)
    # Fragment salience with all four components uses the design's weights as they are
    assert scalar(conn, "select pgmem.salience(0.7, 0.4, 0.5, 0.5)") == \
        pytest.approx(0.35 * 0.7 + 0.30 * 0.4 + 0.25 * 0.5 + 0.10 * 0.5)


def test_embedding_given_by_update_dequeues(conn):
    mid = remember(conn, "Zebra migration patterns observed")["memory_id"]
    assert queued(conn) == [mid]
    conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({"embedding": VEC_E0.tolist(),
                                                                     "embedding_model": "client-model"})))
    assert scalar(conn, "select embedding_model from pgmem.memories where id = %s", (mid,)) == "client-model"
    assert ops(conn, mid) == ["add", "update"]
    assert queued(conn) == []
