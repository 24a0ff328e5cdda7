"""The candidate set of the rankings (sql/203_candidates.sql) and the recent memories' own index
(pgmem.recent_vectors, sql/440_index.sql; issue 23).

A tenant's size decides where its candidates come from:
  * at most exact_scan_rows memories: every eligible memory is scored (search = search_exact);
  * d memories with d^2 < exact_knn_factor x all indexed vectors: its nearest memories exactly,
    through the b-tree on memory_vectors(tenant) and a sort, never the shared HNSW graph;
  * otherwise the HNSW graph, the recent memories' own HNSW index and the GIN index.
One database for the module (a 1,500-memory tenant and a 40-memory one, random unit vectors
around a few topics), each test changes settings of its own tenant only.
"""
from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from conftest import TEMPLATE, _janitor, connect
from sqlhelpers import call, scalar
from searchhelpers import plan_nodes, plans_of

DIM = 384
BIG, SMALL = 1500, 40
WORDS = ["lisbon", "passport", "invoice", "garden", "tennis", "violin", "compiler", "kernel", "recipe", "harbour",
         "meteor", "glacier", "orchard", "sonnet", "lantern", "quartz"]


def _vectors(rng, n: int, topics: np.ndarray) -> np.ndarray:
    v = topics[rng.integers(0, len(topics), n)] + 0.35 * rng.standard_normal((n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _copy(c, tenant: str, n: int, rng, topics, *, recent_share: float) -> None:
    now = datetime.now(timezone.utc)
    vecs = _vectors(rng, n, topics)
    with c.cursor() as cur, cur.copy("copy pgmem.memories (tenant, content, who, session_id, created_at, embedding, "
                                     "embedding_model) from stdin") as cp:
        for i in range(n):
            words = " ".join(rng.choice(WORDS, 4, replace=False))
            age = rng.uniform(0, 10) if rng.random() < recent_share else rng.uniform(40, 400)
            cp.write_row((tenant, f"note {i} about {words}", f"p{i % 7}", f"s{i // 20}", now - timedelta(days=age),
                          "[" + ",".join(f"{x:.6f}" for x in vecs[i]) + "]", "test"))


@pytest.fixture(scope="module")
def db(cluster):
    name = f"t_cand_{uuid.uuid4().hex[:10]}"
    j = _janitor(cluster, name, TEMPLATE)
    j.init()
    dsn = cluster.dsn(name)
    rng = np.random.default_rng(23)
    topics = rng.standard_normal((6, DIM))
    try:
        with connect(dsn, tenant="big") as c:
            _copy(c, "big", BIG, rng, topics, recent_share=0.3)
        with connect(dsn, tenant="small") as c:
            _copy(c, "small", SMALL, rng, topics, recent_share=0.3)
        with connect(dsn, tenant=None) as c:
            c.execute("select * from pgmem.index_vectors(100000)")
            for t in ("memories", "memory_vectors", "recent_vectors"):
                c.execute(f"analyze pgmem.{t}")
        yield dsn, topics
    finally:
        j.drop()


def settings(c, tenant: str, **kv) -> None:
    for k, v in kv.items():
        c.execute("insert into pgmem.settings (tenant, key, value) values (%s, %s, %s) "
                  "on conflict (tenant, key) do update set value = excluded.value", (tenant, k, json.dumps(v)))


def queries(rng, topics, n=8):
    q = topics[rng.integers(0, len(topics), n)] + 0.5 * rng.standard_normal((n, DIM))
    return [(" ".join(rng.choice(WORDS, 2, replace=False)), v / np.linalg.norm(v)) for v in q]


def scans(c, sql: str, params) -> set[tuple[str, str]]:
    plans = [p for p in plans_of(c, sql, params)
             if any(t in p["Query Text"] for t in ("pgmem.memories", "pgmem.memory_vectors", "pgmem.recent_vectors"))]
    return {(n["Node Type"], n.get("Index Name", "")) for p in plans for n in plan_nodes(p)
            if n.get("Relation Name") in ("memories", "memory_vectors", "recent_vectors")
            or n.get("Index Name", "").startswith(("memories_", "memory_vectors_", "recent_vectors_"))}


SEARCH = "select id from pgmem.search(%s, %s::vector, k => 10)"


def test_the_recent_index_holds_the_recent_memories(db):
    dsn, _ = db
    with connect(dsn, tenant="big") as c:
        days = scalar(c, "select pgmem._setting_num('recent_vectors_days')")
        assert days == 30
        recent = scalar(c, "select count(*) from pgmem.memories where tenant = 'big' and created_at >= now() - interval '30 days'")
        assert 0 < recent < BIG
        assert scalar(c, "select count(*) from pgmem.recent_vectors where tenant = 'big'") == recent
        assert scalar(c, "select count(*) from pgmem.recent_vectors r join pgmem.memories m on m.id = r.memory_id "
                         "where m.created_at < now() - interval '30 days'") == 0
        # a memory that leaves the active state leaves it (with its memory_vectors row)
        mid = scalar(c, "select memory_id from pgmem.recent_vectors where tenant = 'big' order by memory_id limit 1")
        c.execute("select pgmem.forget(%s, 'test')", (mid,))
        assert scalar(c, "select count(*) from pgmem.recent_vectors where memory_id = %s", (mid,)) == 0
        c.execute("select pgmem.restore(%s, 'test')", (mid,))
        c.execute("select * from pgmem.index_vectors(1000)")
        assert scalar(c, "select count(*) from pgmem.recent_vectors where memory_id = %s", (mid,)) == 1
        # a new memory goes in with the index job; a shorter window drops the older ones
        new = call(c, "remember", "a fresh note about quartz and meteor", embedding=list(np.eye(DIM)[3]), force=True)[0]
        assert scalar(c, "select count(*) from pgmem.recent_vectors where memory_id = %s", (new["memory_id"],)) == 0
        c.execute("select * from pgmem.index_vectors(1000)")
        assert scalar(c, "select count(*) from pgmem.recent_vectors where memory_id = %s", (new["memory_id"],)) == 1
        settings(c, "big", recent_vectors_days=5)
        try:
            c.execute("select * from pgmem.index_vectors(1000)")
            assert scalar(c, "select count(*) from pgmem.recent_vectors r join pgmem.memories m on m.id = r.memory_id "
                             "where r.tenant = 'big' and m.created_at < now() - interval '5 days'") == 0
            assert scalar(c, "select count(*) from pgmem.recent_vectors where memory_id = %s", (new["memory_id"],)) == 1
        finally:
            settings(c, "big", recent_vectors_days=30)
            c.execute("set pgmem.tenant = '*'")
        # ... and rebuild_recent_vectors refills it (as pgmem_admin: the superuser here)
        c.execute("select pgmem.rebuild_recent_vectors()")
        c.execute("set pgmem.tenant = 'big'")
        assert scalar(c, "select count(*) from pgmem.recent_vectors where tenant = 'big'") == recent + 1
        c.execute("select pgmem.forget(%s, 'test')", (new["memory_id"],))


def test_a_small_tenant_is_scored_exactly(db):
    dsn, topics = db
    rng = np.random.default_rng(5)
    with connect(dsn, tenant="small") as c:
        now = scalar(c, "select now()")
        for text, vec in queries(rng, topics):
            a = call(c, "search", query_text=text, query_embedding=vec, k=10, as_of=now)
            b = call(c, "search_exact", query_text=text, query_embedding=vec, k=10, as_of=now)
            assert [r["id"] for r in a] == [r["id"] for r in b]
            assert [r["score"] for r in a] == pytest.approx([r["score"] for r in b], abs=1e-12)
        s = scans(c, SEARCH, (queries(rng, topics, 1)[0][0], queries(rng, topics, 1)[0][1]))
        assert not any(i.startswith(("memory_vectors_hnsw", "recent_vectors_hnsw", "memories_tsv_gin")) for _, i in s), s
        assert ("Seq Scan", "") not in s, s


def test_a_mid_sized_tenant_takes_its_nearest_exactly(db):
    """With exact_knn_factor raised for the tenant (d^2 < factor x all vectors), the nearest
    memories come from the b-tree on memory_vectors(tenant) and a sort, not the HNSW graph; at 0,
    from the graph. Both agree with search_exact on most of the top 10."""
    dsn, topics = db
    rng = np.random.default_rng(7)
    qs = queries(rng, topics)
    with connect(dsn, tenant="big") as c:
        overlap = {}
        for factor in (0, 10_000):
            settings(c, "big", exact_knn_factor=factor, exact_scan_rows=100)
            s = scans(c, SEARCH, qs[0])
            if factor:
                # the tenant's vectors, sorted: through its b-tree, or (here, where it holds
                # nearly every vector) a scan of the table; never the graph
                assert not any(i in ("memory_vectors_hnsw", "recent_vectors_hnsw") for _, i in s), s
                assert {("Index Scan", "memory_vectors_tenant"), ("Bitmap Index Scan", "memory_vectors_tenant"),
                        ("Seq Scan", "")} & s, s
            else:
                assert ("Index Scan", "memory_vectors_hnsw") in s and ("Index Scan", "recent_vectors_hnsw") in s, s
            got = []
            for text, vec in qs:
                a = [r["id"] for r in call(c, "search", query_text=text, query_embedding=vec, k=10)]
                b = [r["id"] for r in call(c, "search_exact", query_text=text, query_embedding=vec, k=10)]
                got.append(len(set(a) & set(b)) / 10)
            overlap[factor] = float(np.mean(got))
        settings(c, "big", exact_knn_factor=200, exact_scan_rows=1000)
        print(f"\n[overlap@10 with search_exact] HNSW {overlap[0]:.3f}, exact nearest {overlap[10_000]:.3f}")
        assert overlap[10_000] >= 0.9 and overlap[0] >= 0.9


def test_activate_and_recall_take_the_same_paths(db):
    dsn, topics = db
    rng = np.random.default_rng(9)
    (text, vec), = queries(rng, topics, 1)
    with connect(dsn, tenant="small") as c:
        # a small tenant: every memory is an activate candidate (Shadow's getAllCandidateMemories)
        assert len(call(c, "activate", query_text=text, query_embedding=vec, k=100)) == SMALL
    with connect(dsn, tenant="big") as c:
        settings(c, "big", exact_scan_rows=100)
        try:
            for fn in ("activate", "recall"):
                s = scans(c, f"select id from pgmem.{fn}(%s, %s::vector, k => 10)", (text, vec))
                assert ("Index Scan", "memory_vectors_hnsw") in s and ("Seq Scan", "") not in s, (fn, s)
        finally:
            settings(c, "big", exact_scan_rows=1000)
