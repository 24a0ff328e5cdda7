"""The Python client (MemoryClient, AsyncMemoryClient) and the memory commands of the CLI,
against a fresh database, with the real all-MiniLM-L6-v2 embedder and the heuristic extractor.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import psycopg
import pytest

import sqlhelpers
from conftest import connect
from pgmem.client import AsyncMemoryClient, Hit, MemoryClient, RememberResult
from pgmem.embedding import embedding_text
from pgmem.errors import NotFound

pytest.importorskip("sentence_transformers", reason="needs the [embed] extra (make setup)")

SIGNALS = ("semantic", "lexical", "recency", "actor", "spatial", "usage")
JAM = {"semantic": 0.55, "lexical": 0.20, "recency": 0.10, "actor": 0.07, "spatial": 0.03, "usage": 0.05}
PGMEM = Path(sys.executable).with_name("pgmem")


@pytest.fixture(scope="module")
def embedder():
    from pgmem.embedding import Embedder

    e = Embedder()
    assert e.dim == 384
    return e


@pytest.fixture(autouse=True)
def _offline_extractor(monkeypatch):
    # the heuristic extractor, whatever the shell says (PGMEM_LLM_BASE_URL would select the LLM one)
    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)


@pytest.fixture
def mem(dsn, embedder):
    m = MemoryClient(dsn, tenant="acme", embedder=embedder)
    yield m
    m.close()


def scalar(dsn, sql, params=(), tenant="acme"):
    """sqlhelpers.scalar on a connection of its own, as ``tenant``."""
    with connect(dsn, tenant=tenant) as c:
        return sqlhelpers.scalar(c, sql, params)


def cli(dsn, *args, timeout=300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}
    env["PGMEM_DSN"] = dsn
    exe = [str(PGMEM)] if PGMEM.exists() else [sys.executable, "-m", "pgmem.cli"]
    return subprocess.run(exe + list(args), env=env, capture_output=True, text=True, timeout=timeout)


def cos(a, b) -> float:
    a, b = (x.to_numpy() if hasattr(x, "to_numpy") else x for x in (a, b))  # pgvector's Vector
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---------------------------------------------------------------------- remember + search
def test_remember_returns_a_result_with_the_embedding_stored(mem, dsn, embedder):
    r = mem.remember("Maya is allergic to peanuts", who="maya", where="chat/web/maya", category="fact",
                     user_id="maya", session_id="s1", metadata={"source": "test"})
    assert isinstance(r, RememberResult)
    assert r.decision == "stored" and r.stored and isinstance(r.id, int)
    assert r.surprise == pytest.approx(1.0)                  # the first memory is fully novel
    assert r.importance == pytest.approx(0.8)                # surprise x weight of 'fact'
    assert 0 < r.salience <= 1
    assert r.details["with_embedding"] is True
    with connect(dsn) as c:
        emb, model, who, loc, meta, user = c.execute(
            "select embedding, embedding_model, who, location, metadata, user_id from pgmem.memories where id = %s",
            (r.id,)).fetchone()
        assert c.execute("select count(*) from pgmem.embedding_queue").fetchone()[0] == 0
    want = embedder.embed(embedding_text(content="Maya is allergic to peanuts", who="maya", where="chat/web/maya"))
    assert cos(emb, want) == pytest.approx(1.0, abs=1e-6)
    assert model == embedder.model_name
    assert (who, loc, meta, user) == ("maya", "chat/web/maya", {"source": "test"}, "maya")
    # the same text again is an exact duplicate
    again = mem.remember("maya is   allergic to peanuts", who="maya", user_id="maya", category="fact")
    assert again.decision == "duplicate" and again.id == r.id and not again.stored


def test_search_returns_hits_with_signals_and_5w1h(mem, embedder):
    when = datetime(2026, 9, 1, 9, 0, tzinfo=timezone.utc)
    a = mem.remember("Maya is allergic to peanuts", who="maya", where="chat/web/maya", category="fact", when=when,
                     why="food safety", how="told the assistant")
    b = mem.remember("Tom is learning Rust for his Raft project", who="tom", where="chat/mobile/tom", category="skill")
    # profile jam: JAM's six signals, recomputed below (the default profile, pgmem, is tests/test_search_pgmem.py's)
    hits = mem.search("what is maya allergic to", actor="maya", location="chat/web/maya", k=5, profile="jam")
    assert hits and all(isinstance(h, Hit) for h in hits)
    top = hits[0]
    assert top.id == a.id
    assert set(top.signals) == set(SIGNALS)
    assert top.score == pytest.approx(sum(JAM[s] * top.signals[s] for s in SIGNALS), abs=1e-9)
    assert (top.who, top.where, top.when, top.why, top.how) == ("maya", "chat/web/maya", when, "food safety",
                                                               "told the assistant")
    assert top.content == "Maya is allergic to peanuts" and top.category == "fact"
    assert top.what is None and isinstance(top.created_at, datetime)
    assert top.signals["actor"] == 1.0 and top.signals["spatial"] == 1.0
    # the semantic signal is (1 + cos)/2 of the stored vector and the query's embedding
    q = embedder.embed("what is maya allergic to")
    stored = embedder.embed(embedding_text(content="Maya is allergic to peanuts", who="maya", where="chat/web/maya",
                                           why="food safety", how="told the assistant"))
    assert top.signals["semantic"] == pytest.approx((1 + cos(q, stored)) / 2, abs=1e-5)
    assert {"access_count", "importance", "tier", "user_id"} <= set(top.extra)
    other = next(h for h in hits if h.id == b.id)
    assert other.signals["actor"] == pytest.approx(0.3) and other.score < top.score
    # no actor/location: those signals are left out of the dict (NULL), the score renormalised
    hits = mem.search("what is maya allergic to", k=5, profile="jam")
    assert "actor" not in hits[0].signals and "spatial" not in hits[0].signals
    assert sum(hits[0].signals.values()) > 0
    # touch through the client
    mem.search("what is maya allergic to", k=1, touch=True)
    assert mem.get(a.id)["access_count"] == 1
    # search_exact agrees
    assert [h.id for h in mem.search_exact("what is maya allergic to", k=5, profile="jam")] == [h.id for h in hits]


def test_remember_in_the_callers_transaction_rolls_back(mem, dsn):
    with psycopg.connect(dsn) as c:  # not autocommit: the caller's transaction
        r = mem.remember("Priya runs the Amsterdam half marathon on 18 October", who="priya", conn=c)
        assert r.decision == "stored"
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert c.execute("select count(*) from pgmem.memories where id = %s", (r.id,)).fetchone()[0] == 1
        hits = mem.search("half marathon", conn=c)
        assert [h.id for h in hits] == [r.id]
        # invisible outside until committed
        assert scalar(dsn, "select count(*) from pgmem.memories") == 0
        c.rollback()
    assert mem._pool is None  # the client never took a connection of its own
    for table in ("memories", "history", "embedding_queue", "links"):
        assert scalar(dsn, f"select count(*) from pgmem.{table}") == 0, table


def test_remember_in_the_callers_transaction_commits(mem, dsn):
    with psycopg.connect(dsn) as c:
        with c.transaction():
            r1 = mem.remember("Tom is vegetarian", who="tom", conn=c)
            r2 = mem.remember("Tom's birthday is on 14 October", who="tom", conn=c)
    assert scalar(dsn, "select count(*) from pgmem.memories where id = any(%s)", ([r1.id, r2.id],)) == 2


def test_forget_restore_update_history_round_trip(mem):
    r = mem.remember("Maya uses VS Code", who="maya", category="preference")
    assert mem.get(r.id)["state"] == "active"
    m = mem.forget(r.id, reason="user asked")
    assert m["id"] == r.id and m["state"] == "deleted"
    assert r.id not in [h.id for h in mem.search("VS Code")]
    assert r.id in [h.id for h in mem.search("VS Code", filters={"state": "deleted"})]
    m = mem.restore(r.id, reason="mistake")
    assert m["state"] == "active"
    assert r.id in [h.id for h in mem.search("VS Code")]
    m = mem.update_memory(r.id, {"content": "Maya switched from VS Code to Neovim", "importance": 0.95},
                          reason="supersedes")
    assert m["content"] == "Maya switched from VS Code to Neovim"
    assert m["importance"] == pytest.approx(0.95)
    assert m["embedding"] is None  # a new text needs a new vector: queued for the worker
    got = mem.get(r.id)
    assert got["content"] == m["content"]
    h = mem.history(r.id)
    assert [x["op"] for x in h] == ["add", "delete", "restore", "update"]
    assert h[1]["details"]["reason"] == "user asked" and h[2]["details"]["reason"] == "mistake"
    assert h[3]["details"]["reason"] == "supersedes"
    assert h[3]["before"]["content"] == "Maya uses VS Code"
    assert h[3]["after"]["content"] == "Maya switched from VS Code to Neovim"
    assert mem.get(10 ** 9) is None
    with pytest.raises(NotFound, match="does not exist") as ei:  # P0002, mapped by pgmem.errors
        mem.forget(10 ** 9)
    assert isinstance(ei.value.__cause__, psycopg.errors.NoDataFound) and ei.value.hint


def test_other_tenant_client_sees_nothing(mem, dsn, embedder):
    r = mem.remember("Maya lives in Kreuzberg", who="maya")
    other = MemoryClient(dsn, tenant="other", embedder=embedder)
    try:
        assert other.search("Kreuzberg") == []
        assert other.get(r.id) is None
        assert other.history(r.id) == []
    finally:
        other.close()


# ---------------------------------------------------------------------------- batches
NAMES = ["maya", "tom", "priya", "lena", "ines", "jonas", "clara", "sam", "rose", "chen"]
THINGS = ["a red bicycle", "the quarterly report", "sourdough starter", "a train ticket to Kyoto", "the Raft paper",
          "a peanut-free cake", "the on-call schedule", "a violin lesson", "the tax return", "an umbrella",
          "the EKS cluster", "a jar of honey", "the hotel voucher", "a chess clock", "the wedding playlist"]
VERBS = ["bought", "lost", "fixed", "borrowed", "painted", "reviewed", "sold", "found", "ordered", "returned",
         "photographed", "packed", "cancelled", "translated", "wrapped", "scanned", "booked", "measured", "tested",
         "signed"]


def _events(n=300):
    t0 = datetime(2026, 9, 1, 8, 0, tzinfo=timezone.utc)
    out = []
    for i in range(n):
        user = NAMES[i % len(NAMES)]
        thing = THINGS[(i * 7) % len(THINGS)]
        verb = VERBS[(i * 3 + i // len(NAMES)) % len(VERBS)]
        out.append({
            "event_id": f"t-{i:04d}", "ts": (t0 + timedelta(minutes=7 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "session_id": f"{user}-s{i // 50}", "user_id": user, "agent_id": "assistant",
            "actor": "user" if i % 3 else "assistant",
            "content": f"{user.title()} {verb} {thing} on day {i} (order {1000 + i * 13})",
            "where": f"chat:web/{user}",
            **({"category": ["fact", "episode", "skill", "preference", "context"][i % 5]} if i % 4 == 0 else {}),
            **({"metadata": {"n": i}} if i % 10 == 0 else {}),
        })
    return out


def test_remember_many_300_events_and_replay(mem, dsn):
    events = _events()
    assert len({e["content"] for e in events}) == 300
    first = mem.remember_many(events, progress=False)
    assert len(first) == 300
    assert all(isinstance(r, RememberResult) for r in first)
    decisions = [r.decision for r in first]
    assert decisions.count("stored") == 300, {d: decisions.count(d) for d in set(decisions)}
    assert len({r.id for r in first}) == 300
    assert scalar(dsn, "select count(*) from pgmem.memories where embedding is not null") == 300
    assert scalar(dsn, "select count(*) from pgmem.memories where event_key like 't-%%'") == 300
    # the event fields arrived: ts -> created_at, actor -> who, where -> location, session ordering
    with connect(dsn) as c:
        row = c.execute("select created_at, who, location, session_id, user_id, agent_id, metadata->>'n', seq "
                        "from pgmem.memories where event_key = 't-0010'").fetchone()
    assert row[:7] == (datetime(2026, 9, 1, 9, 10, tzinfo=timezone.utc), "user", "chat:web/maya", "maya-s0",
                       "maya", "assistant", "10")
    assert row[7] == 2  # the second event of session maya-s0 (events 0, 10, 20, ...)
    # a second run is idempotent: every event replays the memory it created
    second = mem.remember_many(events, progress=False)
    assert [r.decision for r in second] == ["replayed"] * 300
    assert [r.id for r in second] == [r.id for r in first]
    assert scalar(dsn, "select count(*) from pgmem.memories") == 300


def test_remember_many_keeps_the_events_own_embeddings(dsn, embedder):
    """An event with a precomputed embedding is stored with that vector and is not embedded
    again; the others in the same batch are embedded by the client."""
    calls = []

    class Counting:
        dim, model_name = embedder.dim, embedder.model_name

        def embed_many(self, texts, **kw):
            calls.append(list(texts))
            return embedder.embed_many(texts, **kw)

        def embed(self, text):
            return embedder.embed(text)

    own = embedder.embed("a vector computed elsewhere for a sailing trip")
    with MemoryClient(dsn, tenant="acme", embedder=Counting()) as m:
        res = m.remember_many([
            {"event_id": "own-1", "content": "Booked the sailing trip to Hydra for June", "embedding": own.tolist(),
             "embedding_model": "my-model"},
            {"event_id": "own-2", "content": "The dentist moved the appointment to Thursday"}], progress=False)
    assert [r.decision for r in res] == ["stored", "stored"]
    assert calls == [["The dentist moved the appointment to Thursday"]]  # only the event without one
    with connect(dsn, tenant="acme") as c:
        v, model = c.execute("select embedding, embedding_model from pgmem.memories where event_key = 'own-1'").fetchone()
    assert cos(v, own) > 0.99999 and model == "my-model"


def test_remember_with_extraction(mem):
    r = mem.remember("Yesterday Maya booked the Casa do Largo hotel in Lisbon because of Ines's wedding",
                     who="maya", extract=True)
    assert r.decision == "stored"
    m = mem.get(r.id)
    assert m["who"] == "maya"
    assert m["what"] == "Yesterday Maya booked the Casa do Largo hotel in Lisbon because of Ines's wedding"
    assert m["topics"], m
    assert any("lisbon" in t.lower() for t in m["topics"] + m["entities"])
    assert m["happened_at"] is not None  # "yesterday"
    assert m["happened_at"].date() == (datetime.now(timezone.utc) - timedelta(days=1)).date()
    assert m["summary"]
    assert m["metadata"]["extracted_by"] == "heuristic"
    # explicit fields win over extracted ones
    r2 = mem.remember("Tom said his sister Lena loves Kyoto temples", who="tom", what="Lena loves Kyoto", extract=True)
    m2 = mem.get(r2.id)
    assert m2["what"] == "Lena loves Kyoto" and m2["who"] == "tom"


def test_async_client(dsn, embedder):
    async def main():
        async with AsyncMemoryClient(dsn, tenant="acme", embedder=embedder) as amem:
            r = await amem.remember("Priya is lactose intolerant", who="priya", category="fact")
            assert isinstance(r, RememberResult) and r.decision == "stored"
            hits = await amem.search("which food intolerance does priya have", actor="priya")
            assert hits and hits[0].id == r.id and isinstance(hits[0], Hit)
            assert set(hits[0].signals) == {"semantic", "lexical", "recency", "actor", "usage", "context"}
            many = await amem.remember_many([{"event_id": "a-1", "content": "Priya owns the on-call rotation"},
                                             {"event_id": "a-2", "content": "Priya writes runbooks in Markdown"}])
            assert [m.decision for m in many] == ["stored", "stored"]
            h = await amem.history(r.id)
            assert [x["op"] for x in h] == ["add"]
            return r.id

    mid = asyncio.run(main())
    assert scalar(dsn, "select count(*) from pgmem.memories") == 3
    assert scalar(dsn, "select who from pgmem.memories where id = %s", (mid,)) == "priya"


def test_embed_false_queues_and_the_worker_embeds(mem, dsn, embedder):
    text = "The staging cluster runs on EKS in eu-central-1"
    r = mem.remember(text, embed=False, who="maya")
    assert r.decision == "stored" and r.details["with_embedding"] is False
    assert scalar(dsn, "select count(*) from pgmem.embedding_queue where memory_id = %s", (r.id,)) == 1
    q = embedder.embed("Which AWS region hosts staging Kubernetes?")
    assert mem.search(embedding=q) == []  # nothing has a vector yet

    p = cli(dsn, "worker", "--once")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"embedded": 1, "reembedded": 0, "failed": 0}
    assert scalar(dsn, "select count(*) from pgmem.embedding_queue") == 0
    with connect(dsn) as c:
        emb, model = c.execute("select embedding, embedding_model from pgmem.memories where id = %s",
                               (r.id,)).fetchone()
    assert cos(emb, embedder.embed(embedding_text(content=text, who="maya"))) == pytest.approx(1.0, abs=1e-5)
    assert model == embedder.model_name
    hits = mem.search(embedding=q)  # semantic only: no text
    assert [h.id for h in hits] == [r.id]
    assert "lexical" not in hits[0].signals and hits[0].signals["semantic"] > 0.5
    assert [x["op"] for x in mem.history(r.id)] == ["add", "embed"]


# --------------------------------------------------------------------------------- CLI
def test_cli_search_prints_the_signal_table(mem, dsn):
    r = mem.remember("Maya is allergic to peanuts", who="maya", category="fact")
    p = cli(dsn, "search", "what is maya allergic to", "--tenant", "acme", "--explain")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    header = lines[0].split()
    assert header == ["id", "score", "semantic", "lexical", "recency", "actor", "spatial", "usage", "who", "content"]
    assert set(lines[1]) <= {"-", " "}
    row = lines[2].split()
    assert row[0] == str(r.id) and "Maya is allergic to peanuts" in lines[2]
    assert float(row[1]) == pytest.approx(mem.search("what is maya allergic to")[0].score, abs=1e-3)
    # --explain: a second table, one row per signal, contributions adding up to the score
    assert lines[3] == ""
    assert lines[4].split() == ["id", "rank", "signal", "value", "weight", "contribution"]
    ex = [line.split() for line in lines[6:]]
    # every signal of the default profile (pgmem), those it lacks for this query with weight 0
    assert len(ex) == 10 and {e[2] for e in ex} == {"semantic", "lexical", "recency", "actor", "spatial", "usage",
                                                    "time", "session", "neighbour", "context"}
    assert sum(float(e[-1]) for e in ex) == pytest.approx(float(row[1]), abs=6e-3)
    # another tenant sees an empty table
    p = cli(dsn, "search", "what is maya allergic to", "--tenant", "other")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 2
    # a bad argument is one line on stderr
    p = cli(dsn, "search", "x", "--tenant", "acme", "--k", "0")
    assert p.returncode == 2 and "pgmem: k must be between 1 and 1000, got 0" in p.stderr


def test_cli_ingest_reports_bad_lines(tmp_path, dsn):
    good1 = {"event_id": "ok-1", "ts": "2026-09-01T09:00:00Z", "actor": "user", "user_id": "maya",
             "content": "Maya moved to Kreuzberg in Berlin", "where": "chat:web/maya", "category": "fact"}
    good2 = {"event_id": "ok-2", "ts": "2026-09-01T09:01:00Z", "actor": "assistant", "user_id": "maya",
             "content": "The assistant suggested a Thai place without peanuts"}
    no_content = {"event_id": "bad-3", "ts": "2026-09-01T09:02:00Z", "content": "   "}
    bad_category = {"event_id": "bad-4", "ts": "2026-09-01T09:03:00Z", "content": "Maya plays the violin",
                    "category": "hobby"}
    lines = [json.dumps(good1), '{"event_id": "bad-2", "content": "unterminated', json.dumps(no_content),
             json.dumps(bad_category), "", json.dumps(good2)]
    f = tmp_path / "events.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    p = cli(dsn, "ingest", str(f), "--tenant", "acme")
    assert p.returncode == 2, (p.stdout, p.stderr)
    err = p.stderr
    assert f"{f}:2: skipped, not JSON" in err
    assert f"{f}:3: skipped, no \"content\" text" in err
    assert f"{f}:4: skipped, unknown category \"hobby\"" in err
    assert f"{f}:1:" not in err and f"{f}:6:" not in err
    counts = json.loads(p.stdout.strip().splitlines()[-1])
    assert counts == {"stored": 2, "duplicate": 0, "rejected": 0, "replayed": 0, "bad": 3}
    with connect(dsn) as c:
        rows = c.execute("select event_key, who, location, category, embedding is not null from pgmem.memories "
                         "order by event_key").fetchall()
    assert [r[0] for r in rows] == ["ok-1", "ok-2"]
    assert rows[0][1:] == ("user", "chat:web/maya", "fact", True)
    assert rows[1][1] == "assistant" and rows[1][4] is True
    # ingesting again: the good lines replay, the bad ones are reported again
    p = cli(dsn, "ingest", str(f), "--tenant", "acme", "--no-embed")
    assert p.returncode == 2
    assert json.loads(p.stdout.strip().splitlines()[-1])["replayed"] == 2
    assert scalar(dsn, "select count(*) from pgmem.memories") == 2


def test_cli_history_prints_the_ops(mem, dsn):
    r = mem.remember("Tom's trip to Japan is 17-28 October", who="tom", embed=False)
    mem.update_memory(r.id, {"content": "Tom's trip to Japan is 18-29 October"}, reason="flights changed")
    mem.forget(r.id, reason="trip is over")
    p = cli(dsn, "history", str(r.id), "--tenant", "acme")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    ops = [line.split()[3] for line in out if not line.strip().startswith("reason:")]
    assert ops == ["add", "update", "delete"]
    assert "Tom's trip to Japan is 17-28 October" in out[0]
    assert any("content: Tom's trip to Japan is 17-28 October → Tom's trip to Japan is 18-29 October" in line
               for line in out)
    assert "reason: flights changed" in p.stdout and "reason: trip is over" in p.stdout
    # another tenant has no history of it
    p = cli(dsn, "history", str(r.id), "--tenant", "other")
    assert p.returncode == 2 and "no history for memory" in p.stderr
