"""A 1536-dimensional install end to end with the OpenAI-compatible HTTP embedder against a
local server (issue 26): `pgmem migrate --dimensions 1536` (or the dimension of the configured
model), remember, search and the worker through the HTTP embedder, and a clear error for a
vector of another dimension, on every write."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, connect
from sqlhelpers import scalar

PGMEM = [sys.executable, "-m", "pgmem.cli"]


@pytest.fixture
def server():
    from openai_server import OpenAIServer

    with OpenAIServer(dims=1536, api_key="sk-local") as s:  # text-embedding-3-small's length
        yield s


def cli(dsn, *args, server=None, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    e.update(PYTHONPATH=str(ROOT / "python"), PGMEM_DSN=dsn, PGMEM_TENANT="acme")
    if server is not None:
        e.update(PGMEM_EMBEDDER="http", PGMEM_EMBED_BASE_URL=server.url, PGMEM_EMBED_MODEL="text-embedding-3-small",
                 PGMEM_EMBED_API_KEY="sk-local")
    e.update(env)
    return subprocess.run(PGMEM + list(args), capture_output=True, text=True, env=e, timeout=300)


def test_a_1536_install_end_to_end(fresh_db, server):
    dsn = fresh_db(template=None)
    p = cli(dsn, "migrate", "--dimensions", "1536")
    assert p.returncode == 0, p.stderr
    assert "installing pgmem for 1536-dimensional embeddings (--dimensions)" in p.stderr
    with connect(dsn, tenant=None) as c:
        assert scalar(c, "select format_type(atttypid, atttypmod) from pg_attribute where attrelid = "
                         "'pgmem.memories'::regclass and attname = 'embedding'") == "vector(1536)"
        assert scalar(c, "select value::text from pgmem.settings where tenant = '*' and key = 'embedding_dim'") == "1536"
    facts = ["Maya is allergic to peanuts", "The deploy pipeline runs every Friday at noon",
             "Tom's flight to Tokyo leaves on the 17th"]
    for f in facts:
        p = cli(dsn, "remember", f, "--who", "user", "--no-extract", server=server)
        assert p.returncode == 0 and json.loads(p.stdout)["decision"] == "stored", p.stderr
    p = cli(dsn, "remember", "Our staging database lives on port 6543", "--no-embed", "--no-extract", server=server)
    assert p.returncode == 0, p.stderr
    p = cli(dsn, "worker", "--once", server=server)  # the worker embeds through the same HTTP embedder
    assert p.returncode == 0 and json.loads(p.stdout.strip().splitlines()[-1])["embedded"] == 1, p.stderr
    with connect(dsn) as c:
        assert scalar(c, "select count(*) from pgmem.memories where vector_dims(embedding) = 1536 "
                         "and embedding_model = 'text-embedding-3-small'") == 4
    # semantic search over 1536-d vectors: no word of the question is in the answer's text
    p = cli(dsn, "search", "which nut must she avoid", "--json", server=server)
    assert p.returncode == 0, p.stderr
    hits = json.loads(p.stdout)
    assert hits[0]["content"] == "Maya is allergic to peanuts" and hits[0]["signals"]["semantic"] > 0.3
    assert all(r["headers"].get("Authorization") == "Bearer sk-local" for r in server.requests)
    # a 384-d model writing into the 1536 install: one clear line naming the fix, on every write path
    p = cli(dsn, "remember", "Maya likes tea", "--no-extract", PGMEM_EMBEDDER="onnx")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "embedding has 384 dimensions, but this pgmem installation stores 1536" in p.stderr
    assert "pgmem migrate --dimensions N" in p.stderr
    # and the installed dimension cannot change under the data
    p = cli(dsn, "migrate", "--dimensions", "384")
    assert p.returncode == 2 and "stores 1536-dimensional embeddings since its install" in p.stderr


def test_the_dimension_follows_the_configured_model(fresh_db, server):
    dsn = fresh_db(template=None)
    p = cli(dsn, "migrate", server=server)  # text-embedding-3-small: 1536, known without a request
    assert p.returncode == 0, p.stderr
    assert "installing pgmem for 1536-dimensional embeddings (the configured model text-embedding-3-small)" in p.stderr
    assert server.requests == []
    dsn2 = fresh_db(template=None)
    p = cli(dsn2, "migrate", server=server, PGMEM_EMBED_MODEL="text-embedding-3-large")
    assert p.returncode == 2 and "HNSW index takes at most 2,000 dimensions" in p.stderr
    assert "PGMEM_EMBED_DIMENSIONS=1536" in p.stderr
    p = cli(dsn2, "migrate", server=server, PGMEM_EMBED_MODEL="text-embedding-3-large", PGMEM_EMBED_DIMENSIONS="1024")
    assert p.returncode == 0 and "installing pgmem for 1024-dimensional embeddings" in p.stderr
