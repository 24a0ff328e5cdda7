"""Knowledge-base documents (issue 24, LMA rows L7 and L33; sql/680_documents.sql, migration 0019):
a document is split into chunks with their own HNSW and full-text indexes, search_documents scores
them .7·cosine + .3·(full-text rank / the best candidate's), and context_for's knowledge_base
intent retrieves them. Scores recomputed by hand; the meaning test uses real MiniLM embeddings;
isolation with real app logins."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import psycopg
import pytest

from conftest import at_cos, connect, e, role_connect
from sqlhelpers import call, one, rows, scalar

ROOT = Path(__file__).resolve().parent.parent

RUNBOOK = """# Runbook: the orders database

Credentials for the orders database rotate every 90 days. To rotate them, run ops/rotate-db.sh,
then restart the orders-api pods so that they read the new secret.

Backups run nightly at 02:00 UTC with pg_basebackup to the backup bucket. A restore is tested
every Monday on the staging cluster.

The connection pool is PgBouncer in transaction mode with default_pool_size 40; the application
uses SQLAlchemy's NullPool behind it."""


def cos(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# ============================================================================ chunking
def test_chunk_document_packs_paragraphs_then_sentences_then_words(conn):
    est = lambda t: scalar(conn, "select pgmem.estimate_tokens(%s)", (t,))
    paras = ["First paragraph, short.", "Second paragraph, also short.", "Third."]
    got = rows(conn, "select * from pgmem.chunk_document(%s, 40)", ("\n\n".join(paras),))
    # all three fit in 40 tokens: one chunk, paragraphs joined by a blank line
    assert got == [{"ord": 1, "chunk": "\n\n".join(paras), "token_count": est("\n\n".join(paras))}]
    # a chunk of at most 8 tokens: each paragraph its own chunk
    got = rows(conn, "select * from pgmem.chunk_document(%s, 8)", ("\n\n".join(paras),))
    assert [g["chunk"] for g in got] == paras and [g["ord"] for g in got] == [1, 2, 3]
    # a paragraph over the limit is split into its sentences, packed again
    long = " ".join(f"Sentence number {i} is here." for i in range(1, 11))
    got = rows(conn, "select * from pgmem.chunk_document(%s, 16)", (long,))
    assert all(g["token_count"] == est(g["chunk"]) <= 16 for g in got)
    assert " ".join(g["chunk"].replace("\n\n", " ") for g in got) == long  # nothing lost, in order
    assert got[0]["chunk"] == "Sentence number 1 is here.\n\nSentence number 2 is here."
    # a sentence over the limit: runs of words; a word over it: cut by characters
    words = " ".join(f"w{i}" for i in range(40)) + " " + "x" * 100
    got = rows(conn, "select * from pgmem.chunk_document(%s, 8)", (words,))
    assert all(g["token_count"] <= 8 for g in got)
    assert "".join(g["chunk"] for g in got if g["chunk"].startswith("x")) == "x" * 100
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="empty"):
        conn.execute("select * from pgmem.chunk_document('  \n ')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="max_tokens must be between 8 and 8192"):
        conn.execute("select * from pgmem.chunk_document('text', 2)")


# ============================================================================ ingest and search by hand
def test_ingest_and_search_by_hand(conn):
    """Three chunks along known axes; the question's vector at known cosines; the full-text rank
    from PostgreSQL's ts_rank_cd over the same tsquery."""
    text = ("Rotate the database credentials every ninety days.\n\n"
            "Backups run nightly with pg_basebackup.\n\n"
            "The pool is PgBouncer in transaction mode.")
    chunks = rows(conn, "select * from pgmem.chunk_document(%s, 12)", (text,))
    assert len(chunks) == 3
    vecs = [e(1), e(2), e(3)]
    doc = one(conn, "select * from pgmem.ingest_document('Runbook', %s, source => 'wiki/runbook', max_tokens => 12, "
                    "embeddings => %s::vector[], embedding_model => 'hand')", (text, vecs))
    assert doc["decision"] == "stored" and doc["chunks"] == 3 and doc["tokens"] == sum(c["token_count"] for c in chunks)
    # the same text again: a duplicate, not a copy
    again = one(conn, "select * from pgmem.ingest_document('Runbook again', %s, max_tokens => 12)", (text,))
    assert again["decision"] == "duplicate" and again["document_id"] == doc["document_id"]

    q = at_cos(1, 2, 0.8)  # cosine .8 with chunk 1, .6 with chunk 2, 0 with chunk 3
    qt = "how often do credentials rotate"
    got = rows(conn, "select * from pgmem.search_documents(%s, %s, k => 3)", (qt, q))
    tsq = scalar(conn, "select pgmem.query_tsquery(%s)::text", (qt,))
    ranks = {r["ord"]: r["r"] for r in rows(conn, "select c.ord, ts_rank_cd(c.tsv, %s::tsquery)::float8 as r "
                                                    "from pgmem.document_chunks c", (tsq,))}
    best = max(ranks.values())
    assert best > 0 and ranks[1] == best  # only chunk 1 holds the question's words
    expect = {o: 0.7 * max(0.0, cos(q, vecs[o - 1])) + 0.3 * ranks[o] / best for o in (1, 2, 3)}
    assert [g["ord"] for g in got] == sorted(expect, key=lambda o: -expect[o])
    for g in got:
        assert g["score"] == pytest.approx(expect[g["ord"]], abs=1e-6)
        assert g["title"] == "Runbook" and g["source"] == "wiki/runbook"
    # without an embedding: full text alone
    lex = rows(conn, "select ord, score from pgmem.search_documents(%s)", (qt,))
    assert lex == [{"ord": 1, "score": pytest.approx(1.0)}]
    # deleted: out of retrieval; restored: back
    conn.execute("select pgmem.delete_document(%s)", (doc["document_id"],))
    assert call(conn, "search_documents", query_text=qt, query_embedding=q) == []
    assert scalar(conn, "select count(*) from pgmem.list_documents(include_deleted => true)") == 1
    conn.execute("select pgmem.restore_document(%s)", (doc["document_id"],))
    assert len(call(conn, "search_documents", query_text=qt, query_embedding=q)) == 3


def test_user_documents_embeddings_later_and_errors(conn):
    mine = one(conn, "select * from pgmem.ingest_document('Maya''s notes', 'My dentist is Dr Alves on Rua Augusta.', user_id => 'maya')")
    shared = one(conn, "select * from pgmem.ingest_document('Office guide', 'The office dentist plan covers Dr Alves.')")
    ids = lambda **kw: {r["document_id"] for r in call(conn, "search_documents", query_text="dentist Alves", **kw)}
    assert ids() == {shared["document_id"]}                     # the tenant's knowledge base
    assert ids(user_id="maya") == {shared["document_id"], mine["document_id"]}  # and maya's own
    assert ids(user_id="tom") == {shared["document_id"]}
    listed = {r["id"]: r for r in rows(conn, "select * from pgmem.list_documents()")}
    assert listed[mine["document_id"]]["embedded"] == 0
    # vectors added later (an SQL caller), one per chunk
    assert scalar(conn, "select pgmem.set_chunk_embeddings(%s, array[%s]::vector[], 'm')", (mine["document_id"], e(5))) == 1
    assert one(conn, "select * from pgmem.list_documents('maya')")["embedded"] == 1
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="2 embeddings for the 1 chunks of document"):
        conn.execute("select pgmem.set_chunk_embeddings(%s, array[%s, %s]::vector[])", (mine["document_id"], e(1), e(2)))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"1 embeddings for 2 chunks: pass one per chunk"):
        conn.execute("select * from pgmem.ingest_document('Two', %s, max_tokens => 8, embeddings => array[%s]::vector[])",
                     ("First paragraph here today.\n\nSecond paragraph here today.", e(1)))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="needs a title"):
        conn.execute("select * from pgmem.ingest_document(' ', 'text')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="has 3 dimensions"):
        conn.execute("select * from pgmem.ingest_document('T', 'text', embeddings => array['[1,0,0]']::vector[])")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="needs a query_text or a query_embedding"):
        conn.execute("select * from pgmem.search_documents()")
    with pytest.raises(psycopg.errors.NoDataFound, match="document 999 does not exist"):
        conn.execute("select pgmem.delete_document(999)")
    # export_user and erase_user: the user's own documents, not the tenant's
    exp = scalar(conn, "select pgmem.export_user('maya')")
    assert [d["id"] for d in exp["documents"]] == [mine["document_id"]]
    assert exp["documents"][0]["chunks_text"] == ["My dentist is Dr Alves on Rua Augusta."]
    conn.execute("select * from pgmem.erase_user('maya')")
    assert {r["id"] for r in rows(conn, "select id from pgmem.documents")} == {shared["document_id"]}
    assert scalar(conn, "select count(*) from pgmem.document_chunks where document_id = %s", (mine["document_id"],)) == 0


def test_search_documents_takes_the_hnsw_and_gin_paths(conn):
    """The chunks' own indexes: the planner uses them for the candidate branches."""
    conn.execute("set enable_seqscan = off")
    plan = "\n".join(r[0] for r in conn.execute(
        "explain select c.id from pgmem.document_chunks c order by c.embedding <=> %s limit 100", (e(1),)).fetchall())
    assert "document_chunks_embedding_hnsw" in plan
    plan = "\n".join(r[0] for r in conn.execute(
        "explain select c.id from pgmem.document_chunks c where c.tsv @@ pgmem.query_tsquery('credentials rotate')").fetchall())
    assert "document_chunks_tsv_gin" in plan
    plan = "\n".join(r[0] for r in conn.execute(
        "explain select m.id from pgmem.messages m order by m.embedding <=> %s limit 3", (e(1),)).fetchall())
    assert "messages_embedding_hnsw" in plan
    plan = "\n".join(r[0] for r in conn.execute(
        "explain select m.id from pgmem.memories m where m.tenant = 'acme' and m.state = 'active' order by m.salience desc limit 5").fetchall())
    assert "memories_salience" in plan


# ============================================================================ meaning, and context_for
@pytest.fixture(scope="module")
def embedder():
    pytest.importorskip("sentence_transformers", reason="needs the [embed] extra (make setup)")
    from pgmem.embedding import Embedder

    return Embedder()


def test_context_for_retrieves_knowledge_base_excerpts(dsn, embedder, monkeypatch):
    """Real MiniLM embeddings: the runbook is chunked and embedded by the client; a technical
    question (intent knowledge_base) gets the chunk that answers it first, a greeting none."""
    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)
    from pgmem.client import MemoryClient

    with MemoryClient(dsn, tenant="acme", embedder=embedder) as mc:
        mc.llm = None
        r = mc.ingest_document("Runbook: the orders database", RUNBOOK, source="wiki/orders-db", max_tokens=60)
        assert r["decision"] == "stored" and r["chunks"] == 3
        assert mc.list_documents()[0]["embedded"] == 3
        hits = mc.search_documents("How do I rotate the database credentials?", k=3)
        assert "Credentials for the orders database rotate" in hits[0]["content"]
        assert hits[0]["semantic"] > hits[1]["semantic"]
        got = mc.context_for("How do I rotate the database credentials?", conversation_id="c1", user_id="maya")
        assert got.intent == "knowledge_base"
        docs = got.context["documents"]
        assert docs and "Credentials for the orders database rotate" in docs[0]["content"]
        assert docs[0]["title"] == "Runbook: the orders database" and docs[0]["source"] == "wiki/orders-db"
        hello = mc.context_for("Hi there!", conversation_id="c1", user_id="maya")
        assert hello.context["documents"] == []


def test_cli_ingest_doc(dsn, tmp_path):
    f = tmp_path / "backups.md"
    f.write_text("# Backups\n\nBackups run nightly at 02:00 UTC.\n\nRestores are tested on Mondays.\n")
    env = {**os.environ, "PGMEM_DSN": dsn, "PYTHONPATH": str(ROOT / "python"), "PGMEM_TENANT": "acme"}
    run = lambda *a: subprocess.run([sys.executable, "-c", "import sys; from pgmem.cli import main; sys.exit(main())", *a],
                                    env=env, capture_output=True, text=True, timeout=120)
    p = run("ingest-doc", str(f), "--no-embed")
    assert p.returncode == 0, p.stderr
    assert "stored: 1 chunk(s)" in p.stdout and "'Backups'" in p.stdout
    p = run("ingest-doc", str(f), "--no-embed")
    assert p.returncode == 0 and "duplicate" in p.stdout
    p = run("ingest-doc", str(tmp_path / "missing.md"))
    assert p.returncode != 0 and "missing.md: no such file" in p.stderr and "Traceback" not in p.stderr
    with connect(dsn) as c:
        d = one(c, "select * from pgmem.list_documents()")
        assert d["title"] == "Backups" and d["source"] == str(f.resolve()) and d["chunks"] == 1


# ============================================================================ tenancy
def test_documents_keep_to_their_tenant(cluster, dsn, roles):  # noqa: F811
    a = role_connect(cluster, dsn, roles, "app", "a")
    b = role_connect(cluster, dsn, roles, "app", "b")
    with connect(dsn, tenant=None) as su:
        theirs = one(b, "select * from pgmem.ingest_document('B runbook', 'quokkazebra rotation steps', "
                        "embeddings => array[%s]::vector[])", (e(7),))["document_id"]
        mine = one(a, "select * from pgmem.ingest_document('A runbook', 'our own rotation steps')")["document_id"]
        before = rows(su, "select id, state, updated_at from pgmem.documents where tenant = 'b'")
        assert rows(a, "select document_id from pgmem.search_documents('quokkazebra rotation', %s)", (e(7),)) == \
            [{"document_id": mine}]
        assert [r["id"] for r in rows(a, "select * from pgmem.list_documents(include_deleted => true)")] == [mine]
        for q in ("select pgmem.delete_document(%s)", "select pgmem.restore_document(%s)",
                  "select pgmem.set_chunk_embeddings(%s, array[%s]::vector[])"):
            with pytest.raises(psycopg.errors.NoDataFound):
                a.execute(q, (theirs, e(1)) if "embeddings" in q else (theirs,))
        # plain SQL sees its own tenant's rows only (row-level security)
        assert {r["tenant"] for r in rows(a, "select tenant from pgmem.documents")} == {"a"}
        assert {r["tenant"] for r in rows(a, "select tenant from pgmem.document_chunks")} == {"a"}
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            a.execute("insert into pgmem.documents (tenant, title, content_hash) values ('b', 'x', gen_random_uuid())")
        assert rows(su, "select id, state, updated_at from pgmem.documents where tenant = 'b'") == before
    for c in (a, b):
        c.close()
