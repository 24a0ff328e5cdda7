"""`pgmem ingest` (issue 26): sizes checked before anything is embedded, each line embedded
once (a batch the database refuses is sent again item by item with the same vectors; a replayed
event is not embedded at all), a content-derived key for lines without event_id, and a
progress bar with a total. The embedder is the HTTP one against a local server that records
every text it embeds (real MiniLM vectors)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from conftest import ROOT, connect
from sqlhelpers import scalar

PGMEM = [sys.executable, "-m", "pgmem.cli"]


@pytest.fixture
def server():
    from openai_server import OpenAIServer

    with OpenAIServer() as s:
        yield s


def ingest(dsn, server, path, *extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    env.update(PYTHONPATH=str(ROOT / "python"), PGMEM_DSN=dsn, PGMEM_TENANT="acme", PGMEM_EMBEDDER="http",
               PGMEM_EMBED_BASE_URL=server.url, PGMEM_EMBED_MODEL="minilm-over-http", PGMEM_EMBED_DIMENSIONS="384")
    return subprocess.run(PGMEM + ["ingest", str(path), "--no-extract", *extra], capture_output=True, text=True,
                          env=env, timeout=300)


def embedded_texts(server) -> Counter:
    return Counter(t for r in server.paths("/embeddings") for t in r["body"]["input"])


def test_sizes_first_each_line_once_and_keys_from_content(dsn, server, tmp_path):
    huge = "x" * 300_000  # over max_content_bytes (262144)
    lines = [
        {"event_id": "e1", "content": "Maya is allergic to peanuts", "who": "user"},
        {"content": huge, "who": "user"},
        {"content": "The deploy runs every Friday", "who": "ops"},                      # no event_id
        {"event_id": "e4", "content": "Maya plays the violin", "category": "hobby"},  # the database refuses it
        {"content": "Tom flies to Japan", "who": "tom", "user_id": "u" * 300},         # id over max_id_bytes
        {"event_id": "e6", "content": "Staging runs on port 6543", "who": "ops"},
    ]
    f = tmp_path / "events.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    p = ingest(dsn, server, f, "--batch-size", "16")
    assert p.returncode == 2, p.stderr  # bad lines: exit 2
    assert "Traceback" not in p.stderr
    err = p.stderr
    assert f"{f}:2: skipped, content is 300,000 bytes, more than max_content_bytes (262,144): split the text" in err
    assert f"{f}:5: skipped, user_id is 300 bytes, more than max_id_bytes (256): use a shorter user_id" in err
    assert f'{f}:4: skipped, unknown category "hobby"' in err
    assert "1 line(s) had no event_id: each got a key derived from its content" in err
    counts = json.loads(p.stdout.strip().splitlines()[-1])
    assert counts == {"stored": 3, "duplicate": 0, "rejected": 0, "replayed": 0, "bad": 3}
    # every text embedded exactly once: the oversized lines never, the refused batch not again
    texts = embedded_texts(server)
    assert all(n == 1 for n in texts.values()), texts
    assert len(texts) == 4 and not any(huge in t for t in texts) and not any("Tom flies" in t for t in texts)
    with connect(dsn) as c:
        keys = [r[0] for r in c.execute("select event_key from pgmem.memories order by id")]
        assert keys[0] == "e1" and keys[1].startswith("line:") and keys[2] == "e6"
        assert scalar(c, "select count(*) from pgmem.memories where embedding is not null "
                         "and embedding_model = 'minilm-over-http@384'") == 3
    # again: the stored lines are replayed and embedded no more (their keys are known)
    before = sum(embedded_texts(server).values())
    p = ingest(dsn, server, f, "--batch-size", "16")
    counts = json.loads(p.stdout.strip().splitlines()[-1])
    assert counts["replayed"] == 3 and counts["stored"] == 0
    after = embedded_texts(server)
    assert sum(after.values()) - before == 1  # only the refused line was embedded again (it is not stored)
    assert after["Maya plays the violin"] == 2


def test_progress_bar_has_a_total(dsn, server, tmp_path):
    pytest.importorskip("tqdm")
    f = tmp_path / "events.jsonl"
    f.write_text("\n".join(json.dumps({"event_id": f"p{i}", "content": f"note number {i} about the garden"})
                           for i in range(7)) + "\n\n")
    p = ingest(dsn, server, f, "--progress", "--batch-size", "3")
    assert p.returncode == 0, p.stderr
    assert "7/7" in p.stderr and "ingest" in p.stderr  # tqdm's bar: done/total
    assert json.loads(p.stdout.strip().splitlines()[-1])["stored"] == 7
