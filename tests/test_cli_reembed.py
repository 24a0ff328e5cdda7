"""Moving a tenant to a new embedding model (issue 26, sql/126_reembed.sql, `pgmem reembed`):
through the queue, with search working throughout and nothing lost; the write limits and the
event keys a client checks before it embeds; every new function run as another tenant.

Real models: the tenant's memories are embedded with the float all-MiniLM-L6-v2
(sentence-transformers) and moved to its int8 ONNX build (another model name)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest


from conftest import ROOT, connect, role_connect
from registry import ECO_FUNCTIONS  # noqa: F401
from sqlhelpers import rows, scalar

PGMEM = [sys.executable, "-m", "pgmem.cli"]
FLOAT = "sentence-transformers/all-MiniLM-L6-v2"
INT8 = "sentence-transformers/all-MiniLM-L6-v2:onnx-int8"

FACTS = ["Maya is allergic to peanuts", "The deploy pipeline runs every Friday at noon",
         "Tom's trip to Japan is from 17 to 28 October", "The office plants are watered on Mondays",
         "Maya's daughter plays the violin in the school orchestra", "Our staging database lives on port 6543"]


@pytest.fixture(scope="module")
def models():
    pytest.importorskip("onnxruntime")
    from pgmem.embedding import OnnxEmbedder, SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(), OnnxEmbedder()


def _client(dsn, tenant, embedder):
    from pgmem import MemoryClient

    return MemoryClient(dsn, tenant=tenant, embedder=embedder)


def _top(mem, question, embedder) -> str:
    return mem.search(question, embedding=embedder.embed_query(question), k=1)[0].content


def test_reembed_moves_a_tenant_with_search_working_throughout(dsn, models):
    from pgmem.worker import EmbeddingWorker

    old, new = models
    with _client(dsn, "acme", old) as mem, _client(dsn, "other", old) as other:
        ids = [mem.remember(f, who="user").id for f in FACTS]
        other.remember("Other tenant: the boat leaves at dawn", who="user")
        before = {r["id"]: r for r in rows(connect(dsn), "select id, content, embedding::text from pgmem.memories")}
        questions = {"what is maya allergic to": FACTS[0], "when does the deploy run": FACTS[1],
                     "which port is staging on": FACTS[5]}
        assert all(_top(mem, q, old) == a for q, a in questions.items())

        move = mem.reembed(new.model_name)
        assert move["state"] == "running" and move["total"] == len(FACTS)
        assert mem.reembed(new.model_name)["id"] == move["id"]  # asked again: the same move
        with pytest.raises(Exception, match="is moving to model .* already"):
            mem.reembed("some-other-model")
        # a worker of the old model takes nothing of the move; one of the new model half of it
        assert EmbeddingWorker(dsn, embedder=old, tenant="acme", batch=3, embed=False).run_once() == 0
        w = EmbeddingWorker(dsn, embedder=new, tenant="acme", batch=3, embed=False)
        assert w.run_once() == 3
        # half done: every memory still has its old vector and model, and search answers as before
        with connect(dsn) as c:
            assert {r[0] for r in c.execute("select distinct embedding_model from pgmem.memories")} == {FLOAT}
            assert scalar(c, "select count(*) from pgmem.reembed_queue where embedding is not null") == 3
        assert all(_top(mem, q, old) == a for q, a in questions.items())
        # a memory edited and one written with the old model during the move join it
        mem.update_memory(ids[2], {"content": "Tom's trip to Japan is from 18 to 29 October"})
        late = mem.remember("The coffee machine is descaled on the first of each month", who="user")
        while w.run_once():
            pass
        st = mem.reembed_status()[0]
        # (the late memory joined the move; the edited one was embedded again from its new words)
        assert st["state"] == "done" and st["pending"] == 0 and st["total"] == len(FACTS) + 1, st
        with connect(dsn) as c:
            models_now = dict(c.execute("select tenant, array_agg(distinct embedding_model) from pgmem.memories "
                                        "group by 1").fetchall())
            assert models_now == {"acme": [INT8], "other": [FLOAT]}  # the other tenant is untouched
            assert scalar(c, "select count(*) from pgmem.reembed_queue") == 0
            # nothing lost: the same memories with the same content; each vector is the new model's
            after = {r["id"]: r for r in rows(c, "select id, content, embedding::text from pgmem.memories")}
            assert set(after) == set(before) | {late.id}
            assert all(after[i]["content"] == before[i]["content"] for i in before if i != ids[2])
            v = np.array(json.loads(after[ids[0]]["embedding"]), dtype=np.float32)
            np.testing.assert_allclose(v, new.embed("user " + FACTS[0]), atol=1e-4)  # embedding_text: who, content
            v = np.array(json.loads(after[ids[2]]["embedding"]), dtype=np.float32)
            np.testing.assert_allclose(v, new.embed("user Tom's trip to Japan is from 18 to 29 October"), atol=1e-4)
            # the swap is in history, naming the move
            h = rows(c, "select op, details from pgmem.history where memory_id = %s order by id", (ids[0],))
            assert h[-1]["op"] == "embed" and h[-1]["details"]["reembed"] == move["id"]
            assert rows(c, "select model, embedded from pgmem.embedding_models where tenant = 'acme'") == [
                {"model": INT8, "embedded": len(FACTS) + 1}]
        # and search works with the new model
        mem.embedder.cache_clear()
        assert all(_top(mem, q, new) == a for q, a in questions.items())


def test_cancel_keeps_every_vector(dsn, models):
    from pgmem.worker import EmbeddingWorker

    old, new = models
    with _client(dsn, "acme", old) as mem:
        for f in FACTS[:3]:
            mem.remember(f, who="user")
        mem.reembed(new.model_name)
        EmbeddingWorker(dsn, embedder=new, tenant="acme", batch=2, embed=False).run_once()
        assert mem.cancel_reembed()["state"] == "cancelled"
        with connect(dsn) as c:
            assert {r[0] for r in c.execute("select embedding_model from pgmem.memories")} == {FLOAT}
            assert scalar(c, "select count(*) from pgmem.reembed_queue") == 0
        from pgmem.errors import NotFound

        with pytest.raises(NotFound, match="has no embedding move running"):
            mem.cancel_reembed()
        with pytest.raises(Exception, match="model must be the name"):
            mem.reembed(" ")


def test_pgmem_reembed_command(dsn, models):
    old, _ = models
    with _client(dsn, "acme", old) as mem:
        for f in FACTS:
            mem.remember(f, who="user")
    env = {**os.environ, "PGMEM_DSN": dsn, "PGMEM_EMBEDDER": "onnx", "PYTHONPATH": str(ROOT / "python")}
    p = subprocess.run(PGMEM + ["reembed", "--tenant", "acme"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["state"] == "done" and out["total"] == len(FACTS) and out["model"] == INT8
    assert f"moving tenant 'acme' to {INT8}: {len(FACTS)} memories to embed" in p.stderr
    p = subprocess.run(PGMEM + ["reembed", "--tenant", "acme", "--status"], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "done" in p.stdout and INT8 in p.stdout
    # nothing left to move: done at once
    p = subprocess.run(PGMEM + ["reembed", "--tenant", "acme"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0 and json.loads(p.stdout.strip().splitlines()[-1])["total"] == 0


def test_write_limits_and_known_event_keys(dsn):
    from pgmem import MemoryClient

    with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
        lim = mem.write_limits()
        assert lim["max_content_bytes"] == 262144 and lim["max_batch_items"] == 1000 and lim["max_id_bytes"] == 256
        mem.remember("Maya is allergic to peanuts", event_key="ev-1")
        assert mem.known_event_keys(["ev-1", "ev-2"]) == {"ev-1"}
        assert mem.known_event_keys([]) == set()
    with connect(dsn) as c:
        c.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'max_content_bytes', '1000')")
    with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
        assert mem.write_limits()["max_content_bytes"] == 1000  # the tenant's own limit wins


def test_every_new_function_is_isolated_between_tenants(cluster, dsn, roles, models):  # noqa: F811
    old, new = models
    su = connect(dsn, tenant=None)
    with _client(dsn, "b", old) as mb:
        b_ids = [mb.remember(f"SECRET-B {f}", who="user", event_key=f"b-{i}").id for i, f in enumerate(FACTS[:3])]
        mb.reembed(new.model_name)
    with _client(dsn, "a", old) as ma:
        a_ids = [ma.remember(f, who="user", event_key=f"a-{i}").id for i, f in enumerate(FACTS[3:])]
    a = role_connect(cluster, dsn, roles, "app", "a")
    try:
        assert rows(a, "select * from pgmem.known_event_keys(array['b-0', 'a-0'])") == [{"known_event_keys": "a-0"}]
        assert "max_content_bytes" in scalar(a, "select pgmem.write_limits()")
        assert rows(a, "select * from pgmem.reembed_status()") == []  # b's move is not a's
        with pytest.raises(Exception, match="has no embedding move running"):
            a.execute("select pgmem.cancel_reembed()")
        with pytest.raises(Exception, match="needs the pgmem_admin role"):
            a.execute("select * from pgmem.claim_reembeddings(10, true)")
        with pytest.raises(Exception, match="needs the pgmem_admin role"):
            a.execute("select * from pgmem.finish_reembed(true)")
        assert rows(a, "select * from pgmem.claim_reembeddings(100)") == []  # b's queue is not a's
        vec = "[" + ",".join(map(str, new.embed("x").tolist())) + "]"
        assert scalar(a, "select pgmem.complete_reembedding(%s, %s::vector, %s)", (b_ids[0], vec, new.model_name)) is False
        assert rows(a, "select * from pgmem.finish_reembed()") == []
        # a's own move works as the app role, and touches only a's rows
        mv = rows(a, "select * from pgmem.reembed(%s)", (new.model_name,))[0]
        assert mv["tenant"] == "a" and mv["total"] == len(a_ids)
        claimed = rows(a, "select * from pgmem.claim_reembeddings(100)")
        assert sorted(c["memory_id"] for c in claimed) == sorted(a_ids) and {c["tenant"] for c in claimed} == {"a"}
        with pytest.raises(Exception, match="permission denied"):
            a.execute("select * from pgmem.reembed_queue")  # the queue is pgmem's alone
        reader = role_connect(cluster, dsn, roles, "bi", "a")
        assert rows(reader, "select tenant, model, embedded from pgmem.embedding_models") == [
            {"tenant": "a", "model": FLOAT, "embedded": 3}]
        reader.close()
    finally:
        a.close()
    assert scalar(su, "select count(*) from pgmem.reembed_queue where tenant = 'b' and embedding is null") == 3
    su.close()
