"""Issue 14, write side: every bad input at every write entry is a clear error.

- vectors that turn into NaN in float32 (all 1e30, all 1e-30, all 1e-45) are refused by
  remember, remember_many, update_memory, complete_embedding, a plain INSERT and `pgmem ingest`;
- an observation time from 1901 (whose decay underflowed) is refused at write;
- every field has a size limit with a setting (metadata, summary, 5W1H, ids, tags, reason);
- with enforce_tenants on, a plain INSERT that names an unregistered tenant is refused;
- remember_many takes at most max_batch_items items (the client splits larger batches).
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from conftest import ROOT, connect, e

DIM = 384


def counts(conn) -> tuple[int, int]:
    return conn.execute("select (select count(*) from pgmem.memories), (select count(*) from pgmem.history)").fetchone()


def refused(conn, fn, *match, sqlstate: str = "22023") -> psycopg.Error:
    """fn() fails with sqlstate and a message containing every `match`; nothing was written."""
    before = counts(conn)
    with pytest.raises(psycopg.Error) as ei:
        fn()
    err = ei.value
    assert err.sqlstate == sqlstate, f"{err.sqlstate}: {err}"
    for m in match:
        assert m in err.diag.message_primary, (m, err.diag.message_primary)
    assert counts(conn) == before
    return err


def remember(conn, content, **kw):
    names = ", ".join(f"{k} => %({k})s" for k in kw)
    return conn.cursor(row_factory=dict_row).execute(
        f"select * from pgmem.remember(%(content)s{', ' if kw else ''}{names})", {"content": content, **kw}).fetchone()


# float32 NaN makers: the norm taken in double precision is finite and non-zero for all three
BAD_VECTORS = {
    "all 1e30": np.full(DIM, 1e30, dtype=np.float32),     # float32 norm² overflows: inf/inf
    "all 1e-30": np.full(DIM, 1e-30, dtype=np.float32),   # float32 norm² underflows: 0/0
    "all 1e-45": np.full(DIM, 1e-45, dtype=np.float32),   # denormal
}


@pytest.mark.parametrize("name", list(BAD_VECTORS))
def test_nan_in_float32_vectors_are_refused_at_every_entry(conn, name):
    v = BAD_VECTORS[name]
    # the reason to refuse it: pgvector's float32 cosine distance of the vector to itself is NaN
    assert conn.execute("select (%s::vector operator(public.<=>) %s::vector) = 'NaN'::float8", (v, v)).fetchone()[0]
    remember(conn, "a memory with a good vector", embedding=e(0))
    msg = "has norm"
    refused(conn, lambda: remember(conn, "bad vector via remember", embedding=v), msg)
    refused(conn, lambda: conn.execute("select * from pgmem.remember_many(%s)",
                                       (Jsonb([{"content": "bad vector via remember_many", "embedding": v.tolist()}]),)),
            msg)
    refused(conn, lambda: conn.execute("insert into pgmem.memories (content, embedding) values ('plain', %s)", (v,)), msg)
    mid = remember(conn, "queued without a vector")["memory_id"]
    refused(conn, lambda: conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({"embedding": v.tolist()}))), msg)
    refused(conn, lambda: conn.execute("select pgmem.complete_embedding(%s, %s, 'm')", (mid, v)), msg)
    assert conn.execute("select embedding is null from pgmem.memories where id = %s", (mid,)).fetchone()[0]
    # a good vector still goes in
    assert remember(conn, "another memory, good vector", embedding=e(1))["decision"] == "stored"


def test_nan_vector_line_of_ingest_is_reported_and_skipped(dsn, conn, tmp_path):
    f = tmp_path / "events.jsonl"
    lines = [{"content": "first good line about the garden", "embedding": e(0).tolist()},
             {"content": "a line whose vector is all 1e30", "embedding": BAD_VECTORS["all 1e30"].tolist()},
             {"content": "third good line about the lake", "embedding": e(1).tolist()}]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    p = subprocess.run([sys.executable, "-m", "pgmem.cli", "ingest", str(f), "--no-extract", "--no-embed",
                        "--tenant", "acme"], capture_output=True, text=True, cwd=ROOT,
                       env={**__import__("os").environ, "PGMEM_DSN": dsn})
    assert p.returncode == 2, p.stderr
    assert f"{f}:2: skipped" in p.stderr and "norm" in p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["stored"] == 2
    assert [r[0] for r in conn.execute("select content from pgmem.memories order by id")] == \
        [lines[0]["content"], lines[2]["content"]]


def test_created_at_1901_is_refused_with_a_hint(conn):
    err = refused(conn, lambda: remember(conn, "an old observation", created_at="1901-01-01T00:00:00Z"),
                  "created_at 1901-01-01", "out of range (1970 .. now + 200 years)")
    assert "happened_at" in err.diag.message_hint
    refused(conn, lambda: conn.execute("insert into pgmem.memories (content, created_at) values ('x', '1901-01-01')"),
            "created_at 1901-01-01")
    # the event time may be old: that is what happened_at is for
    r = remember(conn, "the bridge opened", happened_at="1901-01-01T00:00:00Z")
    assert r["decision"] == "stored"
    refused(conn, lambda: remember(conn, "a later one", created_at="infinity"), "out of range")
    refused(conn, lambda: remember(conn, "far future event", happened_at="2400-01-01T00:00:00Z"), "out of range")


# (field, value of the limit + 1, setting, where the message names it)
BIG = [
    ("metadata", Jsonb({"blob": "x" * 65536}), "max_metadata_bytes", "metadata is"),
    ("summary", "s" * 16385, "max_summary_bytes", "summary is 16385 bytes"),
    ("who", "w" * 8193, "max_field_bytes", "who is 8193 bytes"),
    ("how", "h" * 8193, "max_field_bytes", "how is 8193 bytes"),
    ("user_id", "u" * 10240, "max_id_bytes", "user_id is 10240 bytes"),
    ("session_id", "s" * 257, "max_id_bytes", "session_id is 257 bytes"),
    ("event_key", "k" * 257, "max_id_bytes", "event_key is 257 bytes"),
    ("topics", ["t"] * 257, "max_tags", "at most max_tags (256) topics"),
    ("entities", ["e" * 257], "max_id_bytes", "a topic or entity is 257 bytes"),
]


@pytest.mark.parametrize("field, value, setting, message", BIG, ids=[b[0] for b in BIG])
def test_field_limits_are_clear_errors_at_every_write(conn, field, value, setting, message):
    remember(conn, "seed memory so that counts are meaningful")
    err = refused(conn, lambda: remember(conn, "a memory with a big field", **{field: value}), message, setting)
    assert setting in err.diag.message_hint
    col = {"metadata": "metadata"}.get(field, field)
    refused(conn, lambda: conn.execute(f"insert into pgmem.memories (content, {col}) values ('plain', %s)", (value,)),
            message)
    mid = remember(conn, "a memory to change later")["memory_id"]
    v = value.obj if isinstance(value, Jsonb) else value
    if field != "event_key":  # (not editable)
        refused(conn, lambda: conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({field: v}))), message)
    # the limit is a setting: raised for the tenant, the same write goes through
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', %s, '1000000')", (setting,))
    assert remember(conn, "a memory with a big field", **{field: value})["decision"] == "stored"


def test_a_row_written_before_a_limit_can_still_change_state(conn):
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'max_summary_bytes', '100000')")
    mid = remember(conn, "written when summaries could be long", summary="s" * 20000)["memory_id"]
    conn.execute("delete from pgmem.settings where tenant = 'acme' and key = 'max_summary_bytes'")
    # forget changes the state only: the old, now too long, summary is not checked again
    assert conn.execute("select (pgmem.forget(%s)).state", (mid,)).fetchone()[0] == "deleted"
    refused(conn, lambda: conn.execute("select pgmem.update_memory(%s, %s)", (mid, Jsonb({"summary": "s" * 20001}))),
            "summary is 20001 bytes")


@pytest.mark.parametrize("fn", ["forget", "restore", "update_memory"])
def test_reason_has_a_limit(conn, fn):
    mid = remember(conn, "a memory to change")["memory_id"]
    if fn == "restore":
        conn.execute("select pgmem.forget(%s)", (mid,))
    args = (mid, Jsonb({"importance": 0.5}), "r" * 2049) if fn == "update_memory" else (mid, "r" * 2049)
    ph = ", ".join(["%s"] * len(args))
    err = refused(conn, lambda: conn.execute(f"select pgmem.{fn}({ph})", args), "reason is 2049 bytes")
    assert "max_reason_bytes" in err.diag.message_hint


def test_unregistered_tenant_cannot_write_by_plain_insert(dsn, conn):
    conn.execute("insert into pgmem.tenants (tenant) values ('acme')")
    conn.execute("update pgmem.settings set value = 'true' where tenant = '*' and key = 'enforce_tenants'")
    assert remember(conn, "registered tenant writes")["decision"] == "stored"
    # the session's tenant is registered, the row names another one: refused all the same
    refused(conn, lambda: conn.execute("insert into pgmem.memories (tenant, content) values ('ghost', 'sneaked in')"),
            'unknown tenant "ghost"')
    mid = conn.execute("select id from pgmem.memories").fetchone()[0]
    refused(conn, lambda: conn.execute("update pgmem.memories set tenant = 'ghost' where id = %s", (mid,)),
            'unknown tenant "ghost"')
    with connect(dsn, tenant=None) as su:
        assert su.execute("select count(*) from pgmem.memories where tenant = 'ghost'").fetchone()[0] == 0


def test_remember_many_takes_at_most_max_batch_items(dsn, conn):
    """Before (issue 14, M4c): remember_many took any number of items in one call (10,000
    items ran 110 s in one statement). Now more than max_batch_items (1000) is a clear 22023
    naming the count, the limit and the setting, before anything is stored; the limit is a
    setting, and MemoryClient.remember_many splits a larger batch into calls below it."""
    from pgmem.client import MemoryClient
    from pgmem.errors import InvalidInput

    def many(n: int, prefix: str = "batch item") -> Jsonb:
        return Jsonb([{"content": f"{prefix} {i}", "force": True} for i in range(n)])

    call = "select count(*) from pgmem.remember_many(%s)"
    err = refused(conn, lambda: conn.execute(call, (many(1001),)),
                  "remember_many got 1001 items, more than max_batch_items (1000)")
    assert "split the batch" in err.diag.message_hint and "max_batch_items in pgmem.settings" in err.diag.message_hint
    # the limit itself goes through
    assert conn.execute(call, (many(1000),)).fetchone()[0] == 1000

    # a tenant's own limit: 3 items pass, 4 are refused whole (not the first 3 of them)
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'max_batch_items', '3')")
    refused(conn, lambda: conn.execute(call, (many(4, "small"),)), "got 4 items, more than max_batch_items (3)")
    assert conn.execute(call, (many(3, "small"),)).fetchone()[0] == 3

    # the client: a batch_size above the limit is the same clear error; below it, the events
    # are sent in several calls and all stored
    with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
        before = counts(conn)
        with pytest.raises(InvalidInput, match=r"more than max_batch_items \(3\)"):
            mem.remember_many([f"client event {i}" for i in range(5)], batch_size=5, embed=False)
        assert counts(conn) == before
        res = mem.remember_many([f"client event number {i} about topic {i}" for i in range(5)], batch_size=2,
                                embed=False)
    assert len(res) == 5
    assert counts(conn)[0] == before[0] + sum(r.decision == "stored" for r in res) > before[0]
