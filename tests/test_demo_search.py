"""The demo is right (issue 12): for every query of examples/demo_queries.json, search with the
default profile puts one of its intended answers (expect_event_ids) in the top 3, asked the way
examples/demo.py asks it (its user filter, actor, location and as_of). Real MiniLM embeddings
of the bundled conversation; examples/demo.py prints the same check as ✓/✗."""
from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _demo_module():
    spec = importlib.util.spec_from_file_location("pgmem_demo", ROOT / "examples" / "demo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def demo_db(cluster):
    pytest.importorskip("sentence_transformers", reason="needs the [embed] extra (make setup)")
    from conftest import TEMPLATE, _janitor
    from pgmem.client import MemoryClient

    name = f"t_demo_{uuid.uuid4().hex[:8]}"
    j = _janitor(cluster, name, TEMPLATE)
    j.init()
    try:
        events = [json.loads(line) for line in (ROOT / "examples" / "demo_conversation.jsonl").read_text().splitlines()
                  if line.strip()]
        with MemoryClient(cluster.dsn(name), tenant="default") as mc:
            results = mc.remember_many(events, progress=False)
        yield cluster.dsn(name), events, results
    finally:
        j.drop()


# Queries whose intended answer search does NOT put in the top 3 today, and why. The test fails
# when this list is wrong either way: a new miss, or a miss that is fixed (then delete it here).
KNOWN_MISSES = {
    # (fixed by issue 24: "which editor does maya use now" — the Neovim turn supersedes the VS Code
    # one, and the profile fact it states, editor, is one of its topics: it ranks 1st)
    # multi-hop: the hotel (s05) and the allergy (s01) are two facts none of the question's
    # words or meaning reach together; the restaurant turns of s11 rank 6th-7th
    "suggest a restaurant near maya's hotel in Lisbon that is safe for her",
}


@pytest.mark.slow
def test_every_demo_query_finds_an_intended_answer_in_the_top_3(demo_db):
    from pgmem.client import MemoryClient

    dsn, events, results = demo_db
    demo = _demo_module()
    queries = json.loads((ROOT / "examples" / "demo_queries.json").read_text())
    assert len(queries) >= 10 and all(q.get("expect_event_ids") for q in queries)
    with MemoryClient(dsn, tenant="default") as mc:
        checked = demo.expected_ranks(mc, queries, events, results, k=3)
    missed = {q["query"] for q, rank in checked if rank is None}
    assert missed == KNOWN_MISSES, f"intended answer not in search's top 3: {sorted(missed)}"
