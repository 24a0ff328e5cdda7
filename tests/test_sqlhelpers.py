"""tests/sqlhelpers.py: the shared SQL helpers cast arguments from the catalog."""
from __future__ import annotations

import numpy as np
import psycopg
import pytest

from conftest import e
from sqlhelpers import Expr, call, one, rows, scalar, signature


def test_call_casts_from_the_declared_signature(conn):
    stored = call(conn, "remember", "Maya is allergic to peanuts", embedding=e(1), who="user",
                  importance=0.7, metadata={"source": "test"}, topics=["food"], user_id="maya")
    assert stored[0]["decision"] == "stored"
    mid = stored[0]["memory_id"]
    m = one(conn, "select importance, metadata, topics, who from pgmem.memories where id = %s", (mid,))
    assert m == {"importance": pytest.approx(0.7), "metadata": {"source": "test"}, "topics": ["food"], "who": "user"}
    hits = call(conn, "search", query_text="peanuts", query_embedding=e(1), k=3, filters={"user_id": "maya"})
    assert [h["id"] for h in hits] == [mid] and hits[0]["semantic"] == pytest.approx(1.0)
    assert scalar(conn, "select count(*) from pgmem.memories") == 1
    assert rows(conn, "select op from pgmem.history where memory_id = %s", (mid,)) == [{"op": "add"}]
    assert rows(conn, "set local work_mem = '4MB'") == []  # a statement without rows


def test_call_overrides_and_errors(conn):
    call(conn, "remember", "a fact", embedding=np.asarray(e(2)), importance=0.7, casts={"importance": "real"})
    assert scalar(conn, "select importance from pgmem.memories") == pytest.approx(0.7, abs=1e-6)
    names, types = signature(conn, "forget")[0]
    assert names == ["memory_id", "reason"] and types == ["bigint", "text"]
    with pytest.raises(AssertionError, match="no function pgmem.search takes 0 positional argument"):
        call(conn, "search", no_such_argument=1)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        call(conn, "search", query_text="x", k=0)


def test_call_takes_sql_expressions(conn):
    now = scalar(conn, "select now()")
    mid = call(conn, "remember", "lunch tomorrow", happened_at=Expr("now() + interval '1 day'"), force=True)[0]["memory_id"]
    assert (scalar(conn, "select happened_at from pgmem.memories where id = %s", (mid,)) - now).days == 1
    with pytest.raises(psycopg.errors.UndefinedColumn):
        call(conn, "remember", "x", created_at=Expr("no_such_column"))
