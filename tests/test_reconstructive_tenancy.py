"""Tenant isolation of the reconstructive parts (issue 16): every new table (identity_*,
reconstructions, work_queue), view (binding_graph, work_queue_status) and function, with real
login roles. Tenant b writes one of everything through the API; tenant a (application role)
then calls every function aiming at b's ids, texts and vectors: nothing of b comes back, and
no row of b changes (a superuser snapshot before and after). Privacy: export_user/erase_user
cover the new tables.
"""
from __future__ import annotations

import json

import psycopg
import pytest
from psycopg.types.json import Jsonb

from conftest import at_cos, connect, e, role_connect
from sqlhelpers import call, rows

MARK = "quokkaharbour"
TABLES = ("identity_traits", "identity_beliefs", "identity_goals", "identity_snapshots", "reconstructions",
          "work_queue", "links", "memories")


def snapshot(su, tenant):
    return {t: sorted(json.dumps(r[0], sort_keys=True, default=str) for r in su.execute(
        f"select to_jsonb(x) - 'embedding' from pgmem.{t} x where x.tenant = %s", (tenant,))) for t in TABLES}


def remember(conn, content, vec, **kw):
    return call(conn, "remember", content, embedding=vec, force=True, **kw)[0]["memory_id"]


@pytest.fixture
def world(cluster, dsn, roles):  # noqa: F811
    su = connect(dsn, tenant=None)
    b = role_connect(cluster, dsn, roles, "app", "b")
    a = role_connect(cluster, dsn, roles, "app", "a")
    reader = role_connect(cluster, dsn, roles, "bi", "a")
    B = {}
    B["ids"] = [remember(b, f"{MARK} turn {i}: the harbour festival", at_cos(1, 2 + i, 0.9), session_id="bs", user_id="u",
                         entities=[f"{MARK}Corp"]) for i in range(3)]
    B["ids"].append(remember(b, f"So the {MARK} ferry was cancelled", e(9), session_id="bs", user_id="u"))
    assert rows(b, "select * from pgmem.work()")[0]["status"] == "ok"
    assert b.execute("select count(*) from pgmem.links").fetchone()[0] > 3
    B["strand"] = b.execute("select pgmem.reconstruct(%s, %s::vector, k => 3, filters => %s)",
                            (f"{MARK} festival", e(1), Jsonb({"user_id": "u"}))).fetchone()[0]
    assert B["strand"]["members"]
    b.execute("select pgmem.identity_update_trait('secrecy', 0.9)")
    b.execute("select pgmem.identity_update_belief('harbour', %s, 0.8, %s::bigint[])", (f"{MARK} is closed", B["ids"][:2]))
    b.execute("select pgmem.identity_set_goal('visit', %s, %s::vector)", (f"visit {MARK}", e(1)))
    b.execute("select pgmem.identity_snapshot('b checkpoint')")
    B["item"] = b.execute("select pgmem.enqueue('reflect', not_before => now() + interval '1 day')").fetchone()[0]
    for t in TABLES:
        assert su.execute(f"select count(*) from pgmem.{t} where tenant = 'b'").fetchone()[0] > 0, t
    A = {"m": remember(a, "alpha: the harbour is calm", e(1), session_id="as")}
    yield dict(su=su, a=a, b=b, reader=reader, B=B, A=A, dsn=dsn)
    for c in (su, a, b, reader):
        c.close()


def no_b(result, b_ids, what):
    text = json.dumps(result, default=str)
    assert MARK not in text, f"{what} returned text of tenant b: {text[:300]}"
    for i in b_ids:
        assert f'"id": {i},' not in text and f'"memory_id": {i},' not in text, f"{what} returned memory {i} of b"


def test_reconstructive_functions_views_and_tables_are_tenant_isolated(world):
    su, a, B = world["su"], world["a"], world["B"]
    before = snapshot(su, "b")
    ids = B["ids"]
    # reads aimed at b's ids, text and vectors
    assert rows(a, "select * from pgmem.spread(%s::bigint[])", (ids,)) == []
    r = a.execute("select pgmem.reconstruct(%s, %s::vector, k => 10, filters => %s)",
                  (f"{MARK} festival", e(1), Jsonb({"ids": ids}))).fetchone()[0]
    assert r["members"] == [] and r["reconstructions"] == 1
    r = a.execute("select pgmem.reconstruct(%s, %s::vector, k => 10)", (f"{MARK} festival", e(1))).fetchone()[0]
    no_b(r, ids, "reconstruct")
    assert [m["id"] for m in r["members"]] == [world["A"]["m"]]
    # b's log is not a's: the same query hash has no history for a
    assert a.execute("select pgmem.reconstruction_certainty(%s)", (B["strand"]["query_hash"],)).fetchone()[0] == 0.5
    no_b(rows(a, "select * from pgmem.search_spread(%s, %s::vector, k => 50)", (f"{MARK} festival", e(1))), ids, "search_spread")
    assert dict(a.execute("select * from pgmem.refresh_bindings(%s::bigint[])", (ids,)).fetchall()) == \
        {"temporal": 0, "semantic": 0, "causal": 0, "concept": 0, "supersedes": 0}
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="of this tenant"):
        a.execute("select pgmem.bind(%s, %s, 'causal')", (world["A"]["m"], ids[0]))
    ident = a.execute("select pgmem.identity()").fetchone()[0]
    assert ident == {"agent_id": "", "traits": {}, "beliefs": [], "goals": []}
    assert a.execute("select pgmem.identity_at(now())").fetchone()[0]["snapshot_id"] is None
    assert a.execute("select pgmem.goal_relevance(%s::vector)", (e(1),)).fetchone()[0] is None
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="is not a memory of this tenant"):
        a.execute("select pgmem.identity_update_belief('harbour', 'x', 0.5, %s::bigint[])", (ids[:1],))
    assert rows(a, "select * from pgmem.rescore_salience(%s::bigint[])", (ids,)) == [{"examined": 0, "changed": 0, "last_id": None}]
    # writes of a stay in a
    a.execute("select pgmem.identity_update_trait('secrecy', 0.1)")
    a.execute("select pgmem.identity_update_belief('harbour', 'the harbour is open', 0.9, %s::bigint[])", ([world["A"]["m"]],))
    a.execute("select pgmem.identity_set_goal('visit', 'visit the harbour', %s::vector)", (e(1),))
    a.execute("select pgmem.identity_end_goal('visit')")
    a.execute("select pgmem.identity_snapshot('a checkpoint')")
    assert a.execute("select pgmem.enqueue('touch', %s::bigint[])", ([world["A"]["m"]],)).fetchone()[0]
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="needs the pgmem_admin role"):
        a.execute("select pgmem.enqueue('prune')")
    done = rows(a, "select * from pgmem.work(1000)")
    assert done and all(d["tenant_id"] == "a" for d in done)
    assert all(x["tenant_id"] == "a" for x in rows(a, "select * from pgmem.reflect()"))
    # the tables and views show a's rows only
    for t in ("identity_traits", "identity_beliefs", "identity_goals", "identity_snapshots", "reconstructions", "work_queue"):
        assert all(r["tenant"] == "a" for r in rows(a, f"select tenant from pgmem.{t}")), t
    no_b(rows(a, "select * from pgmem.binding_graph"), ids, "binding_graph")
    assert all(r["tenant"] == "a" for r in rows(world["reader"], "select * from pgmem.binding_graph"))
    assert all(r["tenant"] == "a" for r in rows(world["reader"], "select * from pgmem.work_queue_status"))
    # nothing of b changed
    assert snapshot(su, "b") == before


def test_export_and_erase_cover_the_reconstructive_tables(world):
    su, b, B = world["su"], world["b"], world["B"]
    doc = b.execute("select pgmem.export_user('u')").fetchone()[0]
    assert [r["query_hash"] for r in doc["reconstructions"]] == [B["strand"]["query_hash"]]
    assert [x["key"] for x in doc["identity_beliefs"]] == ["harbour"]
    # a's export of the same user id shows nothing of b
    no_b(world["a"].execute("select pgmem.export_user('u')").fetchone()[0], B["ids"], "export_user")
    b.execute("select pgmem.enqueue('bind', %s::bigint[], not_before => now() + interval '1 day')", (B["ids"],))
    b.execute("select * from pgmem.erase_user('u')")
    for t in ("reconstructions", "identity_beliefs"):
        assert su.execute(f"select count(*) from pgmem.{t} where tenant = 'b'").fetchone()[0] == 0, t
    snaps = [r[0] for r in su.execute("select identity from pgmem.identity_snapshots where tenant = 'b'")]
    assert snaps and all(s["beliefs"] == [] for s in snaps)
    assert MARK in json.dumps(snaps)  # the goal ("visit <mark>") is not about the user: it stays
    queued = [r[0] for r in su.execute("select memory_ids from pgmem.work_queue where tenant = 'b'")]
    assert all(not set(q) & set(B["ids"]) for q in queued)
