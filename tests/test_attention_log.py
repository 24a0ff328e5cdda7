"""JAM's attention log (issue 36, audit row J34; sql/280_attention.sql, migration 0022).

jam-journalistic-agent-memory.md, Attention Mechanism: weights = softmax(q · k_i / √d). Each
response of pgmem.search_attention appends one row to pgmem.attention_log: the memories the
attention weighed and their weights, largest first. It is append-only (the app inserts and reads
its tenant's rows, never updates or deletes them), under row-level security, exported and erased
with its user, and read through the view pgmem.attention_weights. The weights are recomputed by
hand here."""
from __future__ import annotations

import math

import psycopg
import pytest

from conftest import at_cos, connect, e, role_connect
from sqlhelpers import call, rows, scalar


def remember(c, text, vec, **kw):
    return call(c, "remember", text, embedding=vec, force=True, **kw)[0]["memory_id"]


@pytest.fixture
def mem(conn):
    texts = {"allergy": ("Maya is allergic to peanuts", at_cos(1, 2, 0.95), "maya"),
             "nut": ("Peanut butter is in the kitchen", at_cos(1, 3, 0.7), "maya"),
             "shop": ("Peanuts are on the shopping list", at_cos(1, 4, 0.2), "tom")}
    return {k: remember(conn, t, v, user_id=u) for k, (t, v, u) in texts.items()}


def softmax_by_hand(cosines: dict[int, float], d: int = 384) -> dict[int, float]:
    s = {i: c / math.sqrt(d) for i, c in cosines.items()}
    top = max(s.values())
    x = {i: math.exp(v - top) for i, v in s.items()}
    return {i: v / sum(x.values()) for i, v in x.items()}


def test_each_response_logs_its_weights(conn, mem):
    hits = call(conn, "search_attention", query_text="peanuts", query_embedding=e(1), k=3, candidates=3)
    assert {h["id"] for h in hits} == set(mem.values())
    log = rows(conn, "select * from pgmem.attention_log")
    assert len(log) == 1 and log[0]["tenant"] == "acme" and log[0]["source"] == "search_attention"
    want = softmax_by_hand({mem["allergy"]: 0.95, mem["nut"]: 0.7, mem["shop"]: 0.2})
    assert log[0]["memory_ids"] == [mem["allergy"], mem["nut"], mem["shop"]]  # largest weight first
    assert log[0]["weights"] == pytest.approx([want[i] for i in log[0]["memory_ids"]], abs=1e-6)
    assert sum(log[0]["weights"]) == pytest.approx(1.0)
    # the view: one row per memory weighed, with its rank
    view = rows(conn, "select response_id, rank, memory_id, weight from pgmem.attention_weights order by rank")
    assert [(v["response_id"], v["rank"], v["memory_id"]) for v in view] == \
        [(log[0]["id"], 1, mem["allergy"]), (log[0]["id"], 2, mem["nut"]), (log[0]["id"], 3, mem["shop"])]
    assert [v["weight"] for v in view] == pytest.approx(log[0]["weights"])
    # a second response, a second row; without an embedding there is no attention and no row
    call(conn, "search_attention", query_text="peanuts", query_embedding=e(1), k=1, candidates=2, scale=2.0)
    call(conn, "search_attention", query_text="peanuts", k=3)
    log = rows(conn, "select * from pgmem.attention_log order by id")
    assert len(log) == 2 and log[1]["scale"] == 2.0 and len(log[1]["memory_ids"]) == 2
    two = softmax_by_hand({mem["allergy"]: 0.95 * 2 * math.sqrt(384), mem["nut"]: 0.7 * 2 * math.sqrt(384)})
    assert log[1]["weights"] == pytest.approx([two[mem["allergy"]], two[mem["nut"]]], abs=1e-6)
    # read-only: the response, no row
    with conn.transaction():
        conn.execute("set transaction read only")
        assert len(call(conn, "search_attention", query_text="peanuts", query_embedding=e(1), k=3)) == 3
    assert scalar(conn, "select count(*) from pgmem.attention_log") == 2


def test_append_only_and_row_level_security(cluster, dsn, roles):
    a = role_connect(cluster, dsn, roles, "app", "a")
    b = role_connect(cluster, dsn, roles, "app", "b")
    reader = role_connect(cluster, dsn, roles, "bi", "a")
    for c, t in ((a, "a"), (b, "b")):
        remember(c, f"note of tenant {t} about peanuts", e(1))
        call(c, "search_attention", query_text="peanuts", query_embedding=e(1), k=3)
    with connect(dsn, tenant=None) as su:
        assert {r["tenant"] for r in rows(su, "select tenant from pgmem.attention_log")} == {"a", "b"}
    assert {r["tenant"] for r in rows(a, "select tenant from pgmem.attention_log")} == {"a"}
    assert {r["tenant"] for r in rows(b, "select tenant from pgmem.attention_log")} == {"b"}
    assert {r["tenant"] for r in rows(reader, "select tenant from pgmem.attention_weights")} == {"a"}
    mine = scalar(a, "select id from pgmem.attention_log")
    # append-only: no update, no delete, and no row for another tenant
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        a.execute("update pgmem.attention_log set weights = weights where id = %s", (mine,))
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        a.execute("delete from pgmem.attention_log where id = %s", (mine,))
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        a.execute("insert into pgmem.attention_log (tenant, source, memory_ids, weights) values ('b', 'search_attention', '{1}', '{1}')")


def test_export_and_erase_cover_it(conn, mem):
    call(conn, "search_attention", query_text="peanuts", query_embedding=e(1), k=3, candidates=3)
    call(conn, "search_attention", query_text="shopping", query_embedding=e(4), k=1, candidates=1)  # tom's only
    doc = scalar(conn, "select pgmem.export_user('maya')")
    assert [(x["memory_ids"], len(x["weights"])) for x in doc["attention_log"]] == [([mem["allergy"], mem["nut"]], 2)]
    assert [x["memory_ids"] for x in scalar(conn, "select pgmem.export_user('tom')")["attention_log"]] == [[mem["shop"]], [mem["shop"]]]
    before = rows(conn, "select id, memory_ids, weights from pgmem.attention_log order by id")
    conn.execute("select * from pgmem.erase_user('tom')")
    after = rows(conn, "select id, memory_ids, weights from pgmem.attention_log order by id")
    # the response that weighed only tom's memory is gone; the other keeps maya's ids and weights
    assert after == [{"id": before[0]["id"], "memory_ids": [mem["allergy"], mem["nut"]], "weights": before[0]["weights"][:2]}]
