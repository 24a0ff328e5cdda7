"""Issue 35, M3: context_for and observe_turn answer every message within the documented
limits, with no embedding: punctuation only, an emoji, a long company name, a 40 KB name."""
from __future__ import annotations

import uuid

import pytest

from conftest import TEMPLATE, _janitor, connect
from sqlhelpers import scalar

MESSAGES = {
    "question mark": "?",
    "bangs": "!!!",
    "smiley": ":)",
    "emoji": "\U0001F600",
    "dash": "-",
    "inverted question mark": "\u00bf",
    "long company": "I work at " + " ".join(["Acme"] * 40) + " Incorporated",
    "long company, one word": "I work at " + "Z" * 3000,
    "40 KB name": "my name is " + "Alexander " * 4000,
    "40 KB one-word name": "my name is " + "A" * 40000,
    "40 KB location": "I live in " + "Springfield" * 3600,
}


@pytest.fixture(scope="module")
def db(cluster):
    j = _janitor(cluster, f"t_advmsg_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


@pytest.mark.parametrize("name", list(MESSAGES))
def test_m3_context_for_answers_every_ordinary_message(db, name):
    text = MESSAGES[name]
    with connect(db, tenant="a") as c:
        doc = scalar(c, "select pgmem.context_for(%s, conversation_id => %s, user_id => 'u1')", (text, f"c-{name}"))
        assert isinstance(doc, dict) and doc.get("intent"), doc
        # and a second time, with a history and the earlier turn stored
        doc = scalar(c, "select pgmem.context_for(%s, conversation_id => %s, user_id => 'u1')", (text, f"c-{name}"))
        assert doc.get("intent")


@pytest.mark.parametrize("name", list(MESSAGES))
def test_m3_observe_turn_answers_every_ordinary_message(db, name):
    text = MESSAGES[name]
    with connect(db, tenant="a") as c:
        doc = scalar(c, "select pgmem.observe_turn(%s, %s, user_id => 'u2')", (f"o-{name}", text))
        assert isinstance(doc, dict), doc


def test_m3_search_insights_without_words_returns_nothing(db):
    with connect(db, tenant="a") as c:
        for text in ("?", "!!!", "\U0001F600"):
            assert c.execute("select * from pgmem.search_insights(%s)", (text,)).fetchall() == []


# ------------------------------------------------------------------------------ M2
@pytest.mark.parametrize("call,arg", [
    ("select * from pgmem.search_spread('x', kinds => %s)", "kinds"),
    ("select * from pgmem.reconstruct('x', kinds => %s)", "kinds"),
    ("select * from pgmem.search_insights('x', types => %s)", "types"),
    ("select * from pgmem.get_item(%s, 'k')", "namespace"),
    ("select * from pgmem.delete_item(%s, 'k')", "namespace"),
    ("select * from pgmem.list_item_namespaces(prefix => %s)", "prefix"),
    ("select * from pgmem.known_event_keys(%s)", "event_keys"),
    # L4: a 16 MB prefix blamed "filters"
    ("select * from pgmem.search_items(%s)", "namespace_prefix"),
])
def test_m2_array_elements_are_limited_by_size(db, call, arg):
    """One 1 MB element is refused at once, naming the argument, before any work."""
    import time

    big = ["a" * (1 << 20)]
    with connect(db, tenant="a") as c:
        t0 = time.monotonic()
        with pytest.raises(Exception) as err:
            c.execute(call, (big,)).fetchall()
        assert arg in str(err.value) and "element" in str(err.value), str(err.value)
        assert time.monotonic() - t0 < 5


def test_m2_closed_lists_are_checked_first(db):
    with connect(db, tenant="a") as c:
        with pytest.raises(Exception, match="unknown insight type"):
            c.execute("select * from pgmem.search_insights('x', types => array['decision', 'bogus'])").fetchall()
        assert c.execute("select * from pgmem.search_insights('x', types => array['decision'])").fetchall() == []


# ------------------------------------------------------------------------------ L1
@pytest.mark.parametrize("name,text", [
    ("1.2 MB paragraph, NBSP words", "\u00a0".join(["word"] * 240_000)),
    ("1.2 MB paragraph, no blank line", " ".join(["pdf-like text line"] * 64_000)),
    ("1 MB single word", "x" * (1 << 20)),
    ("1 MB single word, two-byte letters", "é" * (1 << 19)),
    ("1 MB of one-letter paragraphs", "a\n\n" * 350_000),  # (4 MB: 138 s before, 10 s now)
])
def test_l1_chunk_document_splits_long_paragraphs_and_words(db, name, text):
    import time

    with connect(db, tenant="a") as c:
        t0 = time.monotonic()
        got = c.execute("select ord, chunk, token_count from pgmem.chunk_document(%s, 200)", (text,)).fetchall()
        took = time.monotonic() - t0
    assert got and all(t <= 200 for _, _, t in got), name
    assert sum(len(ch) for _, ch, _ in got) >= len(text) * 0.9
    assert took < 30, f"{name}: {took:.1f} s"  # (a generous bound: the quadratic cut took minutes)


def test_l4_integrations_name_the_problem(dsn):
    """Issue 35, L4: a LangGraph value with NaN, and Agents items that are not objects, get one
    line naming the problem (not a JSON syntax error from the database, not Python's
    "dictionary update sequence")."""
    import asyncio

    from pgmem import MemoryClient
    from pgmem.errors import InvalidInput

    mem = MemoryClient(dsn, tenant="acme", embedder=None)
    with pytest.raises(InvalidInput, match="NaN or Infinity"):
        mem.put_item(("memories", "maya"), "k1", {"score": float("nan")})
    with pytest.raises(InvalidInput, match="NaN or Infinity"):
        mem.put_item(("memories", "maya"), "k2", {"score": float("inf")})
    try:
        from pgmem.integrations.openai_agents import PgmemSession
    except Exception:  # the [openai-agents] extra is part of the test install
        raise
    s = PgmemSession("s-l4", mem)
    with pytest.raises(TypeError, match="add_items takes the SDK's items"):
        asyncio.run(s.add_items(["x"]))
    mem.close()


@pytest.mark.parametrize("shape", ["sentences", "one word", "lines"])
def test_l5_a_cancel_of_a_250_kb_context_for_takes_effect_promptly(dsn, shape):
    """Issue 35, L5: pg_cancel_backend on a context_for of a 250 KB message ends it within a
    step (the engine checks for a cancel between its windows, engine/guard.py tick). Measured on
    the landed main of 2026-12-07: 0.02-0.04 s after the cancel; asserted under 3 s (a loaded
    machine), where the finding was 5 s."""
    import threading
    import time

    import psycopg

    text = {"sentences": "I went to the market and bought apples and pears for the week. " * 4000,
            "one word": "x" * 250000, "lines": "my name is Bob\n" * 17000}[shape][:250000]
    with connect(dsn, tenant="acme") as c, connect(dsn, tenant="acme") as admin:
        pid = scalar(c, "select pg_backend_pid()")
        sent: list[float] = []

        def cancel() -> None:  # once the statement is seen running (never before it starts)
            for _ in range(2000):
                if scalar(admin, "select count(*) from pg_stat_activity where pid = %s and state = 'active' "
                                 "and query like '%%context_for%%'", (pid,)):
                    break
                time.sleep(0.005)
            time.sleep(0.05)
            sent.append(time.perf_counter())
            admin.execute("select pg_cancel_backend(%s)", (pid,))

        th = threading.Thread(target=cancel)
        th.start()
        try:
            with pytest.raises(psycopg.errors.QueryCanceled):
                c.execute("select pgmem.context_for(%s, conversation_id => 'l5', user_id => 'u')", (text,))
            ended = time.perf_counter()
        finally:
            th.join()
        assert ended - sent[0] < 3
