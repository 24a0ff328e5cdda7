"""The two clients are one client (issue 28): MemoryClient and AsyncMemoryClient run the same
plans through one transport (python/pgmem/_transport.py), so the same calls give the same
results. Each client works in a fresh database of its own, so ids and every value line up.

The script covers each kind of plan: one call, a call whose result is shaped (get, profile,
known_event_keys), a search that first asks for the text to embed (a pipeline), a pipeline that
starts one batch while it embeds the next (remember_many with several batches), a pipeline
that handles a call's error (remember_many's on_error), and errors raised by class.

The embedder is a bag of words hashed into 384 dimensions: what is compared is what the
clients do with vectors, not what the vectors mean.
"""
from __future__ import annotations

import asyncio
import hashlib
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pytest

from pgmem.client import AsyncMemoryClient, MemoryClient
from pgmem.errors import InvalidInput, NotFound, PgmemError


class Words:
    """A deterministic embedder: each word adds a fixed random direction (sha256 of the word)."""

    model_name = "test-words-384"
    dim = 384

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in text.lower().split():
            v[int.from_bytes(hashlib.sha256(w.strip(".,?!").encode()).digest()[:4], "big") % self.dim] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def embed(self, text: str) -> np.ndarray:
        return self._vec(text)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vec(text)

    def embed_many(self, texts) -> np.ndarray:
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


EVENTS = [{"content": f"Maya planted {n} tomato seedlings in the allotment", "who": "maya", "user_id": "maya"}
          for n in ("two", "three", "five", "seven", "eleven")]


def script(mem: Any):
    """The same calls through either client: the script yields what each call returns (the
    result, or a coroutine the async runner awaits and sends back; its error is thrown back in).
    Returns what every call gave, and the errors raised."""
    out: dict[str, Any] = {}
    out["remember"] = yield mem.remember("Maya is allergic to peanuts", who="maya", user_id="maya", category="fact")
    out["remember2"] = yield mem.remember("The deploy runs on Fridays", who="ops", where="the office")
    out["many"] = yield mem.remember_many(EVENTS, batch_size=2, extract=False)  # 3 batches: the overlapped path
    errors: list[tuple[int, str, str]] = []
    bad = [{"content": "Kofi drinks green tea", "user_id": "kofi"}, {"content": "   "},
           {"content": "Kofi gossips", "category": "gossip"}, {"content": "Kofi runs on Sundays"}]
    out["many_on_error"] = yield mem.remember_many(bad, batch_size=4, extract=False,
                                                   on_error=lambda i, ev, e: errors.append((i, type(e).__name__,
                                                                                            str(e))))
    out["many_errors"] = errors
    rid = out["remember"].id
    out["get"] = yield mem.get(rid)
    out["search"] = yield mem.search("what is maya allergic to", k=3, filters={"user_id": "maya"})
    out["search_exact"] = yield mem.search_exact("tomato seedlings", k=3)
    out["explain"] = yield mem.explain_search("tomato seedlings", k=2)
    out["activate"] = yield mem.activate("tomato seedlings allotment", k=3)
    out["recall"] = yield mem.recall("peanuts", k=2)
    out["context"] = yield mem.build_context("what does maya grow", token_budget=60)
    out["touch"] = yield mem.touch([rid])
    out["update"] = yield mem.update_memory(rid, {"importance": 0.9}, reason="parity")
    out["forget"] = yield mem.forget(out["remember2"].id, reason="parity")
    out["restore"] = yield mem.restore(out["remember2"].id)
    out["history"] = yield mem.history(out["remember2"].id)
    out["fact"] = yield mem.set_fact("maya", "city", "Leeds")
    out["profile"] = yield mem.profile("maya")
    out["item"] = yield mem.put_item(["notes", "maya"], "garden", {"content": "raised beds by the shed"})
    out["get_item"] = yield mem.get_item(["notes", "maya"], "garden")
    out["session"] = yield mem.session_add_items("s1", [{"role": "user", "content": "hello"}])
    out["session_items"] = yield mem.session_get_items("s1")
    out["known"] = yield mem.known_event_keys(["nope"])
    out["limits"] = yield mem.write_limits()
    out["list"] = yield mem.list_memories({"user_id": "maya"}, k=3)
    out["call"] = yield mem.call("get_memory", memory_id=rid)
    out["job"] = yield mem.run_job("merge")
    out["export"] = yield mem.export_user("kofi")
    for name, bad_call, cls in (("not_found", lambda: mem.forget(987654321), NotFound),
                                ("invalid", lambda: mem.search("x", k=0), InvalidInput),
                                ("unknown_arg", lambda: mem.call("get_memory", nope=1), PgmemError),
                                ("unknown_job", lambda: mem.run_job("nope"), PgmemError)):
        try:
            yield bad_call()
            out[name] = "no error"
        except cls as e:
            out[name] = (type(e).__name__, str(e))
    return out


def run_sync(dsn: str) -> dict:
    """The script with MemoryClient: each call has run (or raised, inside the script) when it is yielded."""
    with MemoryClient(dsn, tenant="acme", embedder=Words()) as mem:
        steps = script(mem)
        value: Any = None
        while True:
            try:
                value = steps.send(value)
            except StopIteration as stop:
                return stop.value


def run_async(dsn: str) -> dict:
    async def go():
        async with AsyncMemoryClient(dsn, tenant="acme", embedder=Words()) as mem:
            steps = script(mem)
            value: Any = None
            error: BaseException | None = None
            while True:
                try:
                    x = steps.throw(error) if error is not None else steps.send(value)
                except StopIteration as stop:
                    return stop.value
                value = error = None
                try:
                    value = await x
                except Exception as e:
                    error = e

    return asyncio.run(go())


def plain(v: Any) -> Any:
    """Results as plain data: dataclasses as dicts, times as a mark (each database has its own now())."""
    if is_dataclass(v) and not isinstance(v, type):
        return plain(asdict(v))
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        items = [plain(x) for x in v]
        return sorted(items, key=repr) if isinstance(v, set) else items
    if isinstance(v, datetime):
        return "<time>"
    if isinstance(v, str) and len(v) >= 19 and v[4] == "-" and v[10] == "T":
        return "<time>"
    if isinstance(v, np.ndarray):
        return plain(v.tolist())
    return v


def same(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two plain results differ (floats within 1e-4: recency moves between the two runs)."""
    if isinstance(a, float) and isinstance(b, float):
        return [] if abs(a - b) <= 1e-4 else [f"{path}: {a} != {b}"]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in same(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in same(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_the_same_calls_give_the_same_results_in_both_clients(fresh_db):
    sync, coro = run_sync(fresh_db()), run_async(fresh_db())
    assert sync.keys() == coro.keys()
    diffs = same(plain(sync), plain(coro))
    assert not diffs, "the clients drifted apart:\n" + "\n".join(diffs[:40])
    # and what they gave is right (not merely equal)
    assert sync["remember"].stored and [r.decision for r in sync["many"]] == ["stored"] * 5
    assert [r.id for r in sync["many"]] == sorted(r.id for r in sync["many"])  # batches stored in order
    assert sync["search"][0].id == sync["remember"].id and sync["get"]["content"] == "Maya is allergic to peanuts"
    assert sync["profile"] == {"city": "Leeds"} and [h["op"] for h in sync["history"]] == ["add", "delete", "restore"]
    assert sync["not_found"][0] == "NotFound" and sync["invalid"][0] == "InvalidInput"
    assert "has no argument 'nope'" in sync["unknown_arg"][1] and "unknown job 'nope'" in sync["unknown_job"][1]


def test_remember_many_on_error_reports_and_keeps_the_rest(fresh_db):
    """The drift the audit found (issue 28): the sync remember_many took on_error and ignored
    it, the async one had neither on_error nor progress. Both now report the bad event and the
    event the database refused, and store the rest with the vectors embedded once."""
    sync = run_sync(fresh_db())
    assert [(i, cls) for i, cls, _ in sync["many_errors"]] == [(1, "PgmemError"), (2, "InvalidInput")]
    assert "event has no content" in sync["many_errors"][0][2]
    assert 'unknown category "gossip"' in sync["many_errors"][1][2]
    assert [r.decision for r in sync["many_on_error"]] == ["stored", "stored"]


@pytest.mark.parametrize("client", ["sync", "async"])
def test_remember_many_without_on_error_raises_and_stores_nothing_of_the_batch(fresh_db, client):
    dsn = fresh_db()
    events = [{"content": "Ada likes chess"}, {"content": "Ada gossips", "category": "gossip"}]

    async def go_async():
        async with AsyncMemoryClient(dsn, tenant="acme", embedder=None) as mem:
            with pytest.raises(InvalidInput, match='unknown category "gossip"'):
                await mem.remember_many(events, extract=False)
            return await mem.list_memories()

    if client == "sync":
        with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
            with pytest.raises(InvalidInput, match='unknown category "gossip"'):
                mem.remember_many(events, extract=False)
            left = mem.list_memories()
    else:
        left = asyncio.run(go_async())
    assert left == []
    with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
        with pytest.raises(PgmemError, match="batch_size must be a positive integer"):
            mem.remember_many(events, batch_size=0)
