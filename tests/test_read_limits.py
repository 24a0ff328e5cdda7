"""The read path at the edges of its inputs (issue 14, read side): decay formulas total over
their domain, memories not embedded yet, touch's bookkeeping and limits, per-call limits of
the rankings, and the profile/actor/location arguments of activate and build_context.

Expected numbers are recomputed here from the formulas (jam-journalistic-agent-memory.md Score
Fusion, shadow-memory-system.md Activation Score Formula)."""
from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg.types.json import Jsonb

from searchhelpers import JAM, call, decay, ids, remember, scalar, search, unit

T = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
READS = {
    "search": "select id, score from pgmem.search(%(q)s, %(v)s::vector, as_of => %(t)s)",
    "search_exact": "select id, score from pgmem.search_exact(%(q)s, %(v)s::vector, as_of => %(t)s)",
    "explain_search": "select id, score from pgmem.explain_search(%(q)s, %(v)s::vector, as_of => %(t)s)",
    "activate": "select id, score from pgmem.activate(%(q)s, %(v)s::vector, as_of => %(t)s)",
    "recall": "select id, score from pgmem.recall(%(q)s, %(v)s::vector, as_of => %(t)s)",
    "build_context": "select id, score from pgmem.build_context(%(q)s, %(v)s::vector, as_of => %(t)s)",
}


# ------------------------------------------------------------------ decay is total
@pytest.mark.parametrize("read", list(READS))
def test_reads_survive_a_memory_from_1901_and_as_of_150_years_ahead(conn, read):
    """Issue 14: remember(created_at => '1901-01-01') made exp() underflow (22003) and broke
    every read of the tenant, and so did as_of => now() + 150 years. (created_at before 1970 is
    refused since; an event of 1901 is its happened_at, which recency and decay read.)"""
    old = remember(conn, "the 1901 census of the village", embedding=unit((0, 1.0)),
                   happened_at=datetime(1901, 1, 1, tzinfo=timezone.utc), created_at=T - timedelta(days=8))
    new = remember(conn, "the census of the village last week", embedding=unit((0, 0.9), (1, math.sqrt(0.19))),
                   created_at=T - timedelta(days=7))
    for as_of in (T, datetime.now(timezone.utc) + timedelta(days=150 * 365)):
        rows = conn.execute(READS[read], {"q": "census village", "v": unit((0, 1.0)), "t": as_of}).fetchall()
        assert {r[0] for r in rows} == {old, new}, (read, as_of)
        assert all(r[1] is not None and 0 <= r[1] <= 1.0 + 1e-9 for r in rows), rows


def test_decay_formulas_at_extreme_ages(conn):
    # e^(-ln2 · t / h) clamped at e^-700: no underflow, and still 1 at age 0, .5 at one half-life
    assert scalar(conn, "select pgmem.exp_decay(1e9)") == pytest.approx(math.exp(-700))
    assert scalar(conn, "select pgmem.exp_decay(45000, 30)") == pytest.approx(math.exp(-700))
    assert scalar(conn, "select pgmem.exp_decay(30, 30)") == pytest.approx(0.5)
    assert scalar(conn, "select pgmem.exp_decay(0)") == 1.0
    # 1 / (1 + t)^α in log space: no overflow of (1 + t)^α
    assert scalar(conn, "select pgmem.power_law_decay(1e300, 5)") == pytest.approx(math.exp(-700))
    assert scalar(conn, "select pgmem.power_law_decay(9, 1.5)") == pytest.approx(10 ** -1.5)
    # Engram's decayed importance and Fragment's strength of a memory from 1901
    assert scalar(conn, "select pgmem.decayed_importance(0.9, '1901-01-01', 3, now())") == pytest.approx(0, abs=1e-300)
    h0, h1 = conn.execute("select pgmem.age_days('1901-01-01', now()) * 24, pgmem.age_days('1901-01-02', now()) * 24").fetchone()
    assert scalar(conn, "select pgmem.fragment_strength(0.9, '1901-01-01', array['1901-01-02'::timestamptz], now())") \
        == pytest.approx(0.9 / (1 + math.sqrt(h0)) + 0.1 / (1 + h1 ** 0.3), rel=1e-6)


# ------------------------------------------------------------------ memories not embedded yet
def test_a_memory_not_embedded_yet_is_scored_without_the_semantic_signal(conn):
    """Issue 14: a queued memory got semantic 0 and lost about .275 of fused score to an
    unrelated memory (cosine 0: semantic .5). Its semantic signal is absent: the other weights
    are rescaled to sum 1 for it, as when the query has no embedding."""
    q = unit((0, 1.0))
    queued = remember(conn, "Maya has a peanut allergy", embedding=None, created_at=T - timedelta(days=1))
    unrelated = remember(conn, "Maya has no allergy at the office", embedding=unit((1, 1.0)),
                         created_at=T - timedelta(days=1))
    assert scalar(conn, "select count(*) from pgmem.embedding_queue where memory_id = %s", (queued,)) == 1
    rows = {r["id"]: r for r in search(conn, query_text="peanut allergy", query_embedding=q, as_of=T)}
    a, b = rows[queued], rows[unrelated]
    assert a["semantic"] is None and b["semantic"] == pytest.approx(0.5)
    lex = a["lexical"]
    assert lex == pytest.approx(1.0)  # peanut, allergi
    rec = decay(1.0)
    # no actor, no location: .55/.20/.10/.05 over .90; without semantic: .20/.10/.05 over .35
    assert a["score"] == pytest.approx((0.20 * lex + 0.10 * rec) / 0.35, abs=1e-9)
    assert b["score"] == pytest.approx((0.55 * 0.5 + 0.20 * b["lexical"] + 0.10 * rec) / 0.90, abs=1e-9)
    assert ids(search(conn, query_text="peanut allergy", query_embedding=q, as_of=T))[0] == queued
    # explain_search: the queued memory's weights are the rescaled ones, and add up to its score
    ex = [r for r in call(conn, "explain_search", query_text="peanut allergy", query_embedding=q, as_of=T)
          if r["id"] == queued]
    w = {r["signal"]: r["weight"] for r in ex}
    assert w["semantic"] == 0 and w["lexical"] == pytest.approx(0.20 / 0.35) and w["usage"] == pytest.approx(0.05 / 0.35)
    assert sum(r["contribution"] for r in ex) == pytest.approx(a["score"], abs=1e-12)
    # search_exact agrees
    exact = {r["id"]: r for r in call(conn, "search_exact", query_text="peanut allergy", query_embedding=q, as_of=T)}
    assert exact[queued]["score"] == pytest.approx(a["score"], abs=1e-12)


def test_activate_shares_out_the_embedding_weight_of_a_memory_without_vector(conn):
    q = unit((0, 1.0))
    queued = remember(conn, "hotel in lisbon for the wedding", embedding=None, topics=["lisbon"], created_at=T)
    other = remember(conn, "hotel in lisbon for the wedding trip", embedding=unit((0, 0.6), (1, 0.8)),
                     topics=["lisbon"], created_at=T)
    rows = {r["id"]: r for r in call(conn, "activate", query_text="lisbon wedding hotel", query_embedding=q,
                                     topics=["lisbon"], as_of=T)}
    a, b = rows[queued], rows[other]
    assert a["embedding_sim"] is None and b["embedding_sim"] == pytest.approx(0.6)
    # .2 metadata + .15 summary + .05 temporal, rescaled by 1 / (1 - .6) for the queued memory
    assert a["score"] == pytest.approx((0.2 * a["metadata_sim"] + 0.15 * a["summary_sim"] + 0.05 * 1.0) / 0.4)
    assert b["score"] == pytest.approx(0.6 * 0.6 + 0.2 * b["metadata_sim"] + 0.15 * b["summary_sim"] + 0.05)
    assert a["metadata_sim"] == 1.0
    # a query without an embedding: every memory is scored on the other three, rescaled
    rows = {r["id"]: r for r in call(conn, "activate", query_text="lisbon wedding hotel", topics=["lisbon"], as_of=T)}
    assert rows[other]["embedding_sim"] is None
    assert rows[other]["score"] == pytest.approx(
        (0.2 * rows[other]["metadata_sim"] + 0.15 * rows[other]["summary_sim"] + 0.05) / 0.4)


# ------------------------------------------------------------------ touch
def test_touch_counts_and_logs_each_use_once(conn):
    a = remember(conn, "first memory to touch")
    b = remember(conn, "second memory to touch")
    assert scalar(conn, "select pgmem.touch(%s)", ([a, b],)) == 2
    assert scalar(conn, "select pgmem.touch(%s, 'used')", ([b],)) == 1
    for mid, n in ((a, 1), (b, 2)):
        assert scalar(conn, "select access_count from pgmem.memories where id = %s", (mid,)) == n
        assert scalar(conn, "select count(*) from pgmem.accesses where memory_id = %s", (mid,)) == n
    assert scalar(conn, "select kind from pgmem.accesses where memory_id = %s order by id desc limit 1", (b,)) == "used"


@pytest.mark.parametrize("args, message", [
    ("array[%(a)s, %(a)s]::bigint[]", "touch got memory .* more than once"),
    ("array(select %(a)s::bigint from generate_series(1, 1001))", "touch takes at most 1000 ids at once, got 1001"),
    ("array[%(a)s]::bigint[], repeat('x', 100000)", "touch kind must be a short lower-case name"),
    ("array[%(a)s]::bigint[], 'Used Twice'", "touch kind must be a short lower-case name"),
    ("array[%(a)s]::bigint[], null", "touch kind must be a short lower-case name"),
])
def test_touch_rejects_what_would_skew_or_bloat_the_log(conn, args, message):
    """Issue 14: touch with 1,000 copies of an id and a 100 KB kind added 105 MB."""
    a = remember(conn, "a memory touched badly")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        conn.execute(f"select pgmem.touch({args % {'a': a}})")
    assert scalar(conn, "select count(*) from pgmem.accesses") == 0
    assert scalar(conn, "select access_count from pgmem.memories where id = %s", (a,)) == 0


def test_touch_max_ids_is_a_setting(conn):
    mids = [remember(conn, f"memory number {i} for the touch limit") for i in range(4)]
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'touch_max_ids', '3')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="at most 3 ids at once, got 4"):
        conn.execute("select pgmem.touch(%s)", (mids,))
    assert scalar(conn, "select pgmem.touch(%s)", (mids[:3],)) == 3


# ------------------------------------------------------------------ per-call limits
@pytest.mark.parametrize("fn", ["search", "search_exact", "explain_search", "activate", "recall", "build_context"])
def test_query_text_is_limited(conn, fn):
    """Issue 14: a 79 KB query text ran 30 s."""
    remember(conn, "a memory about kites")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"query_text is 79000 characters, more than max_query_chars \(4000\)"):
        conn.execute(f"select * from pgmem.{fn}(%s)", ("kite " * 15800,)).fetchall()
    assert conn.execute(f"select * from pgmem.{fn}(%s)", ("kite " * 799,)).fetchall()


def test_candidates_and_ids_filter_are_limited(conn):
    remember(conn, "a memory about kites")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="candidates must be between 1 and 10000, got 10001"):
        search(conn, query_text="kites", candidates=10001)
    assert search(conn, query_text="kites", candidates=10000)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r'filter "ids" lists 10001 memories, more than max_candidates \(10000\)'):
        search(conn, query_text="kites", filters={"ids": list(range(1, 10002))})
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'max_candidates', '50')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="candidates must be between 1 and 50, got 51"):
        search(conn, query_text="kites", candidates=51)


def test_an_unknown_lexical_mode_is_a_clear_error(conn):
    # (issue 27, L3: refused when the profile is written, not at every search that uses it)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='profile "jam_bm" \\(tenant acme\\): params.lexical must be "coverage", "rank" or "bm25", got "bm99"'):
        conn.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values "
                     "('acme', 'jam_bm', 'search', %s, %s)", (Jsonb(JAM), Jsonb({"lexical": "bm99"})))


# ------------------------------------------------------------------ the same arguments as search
def test_activate_takes_a_profile(conn):
    """Issue 14: activate always used the shadow profile."""
    q = unit((0, 1.0))
    mid = remember(conn, "the hotel for the lisbon wedding", embedding=unit((0, 0.8), (1, 0.6)), topics=["lisbon"],
                   created_at=T - timedelta(days=10))
    conn.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values ('acme', 'meaning', "
                 "'activate', %s, %s)", (Jsonb({"embedding": 0.9, "temporal": 0.1}),
                                          Jsonb({"thresholds": {"query": 0.5}, "temporal_half_life_days": 10})))
    r = call(conn, "activate", query_text="lisbon wedding", query_embedding=q, context_type="query", as_of=T,
             profile="meaning")[0]
    assert r["id"] == mid
    assert r["temporal"] == pytest.approx(0.5)  # the profile's half-life: 10 days
    assert r["score"] == pytest.approx(0.9 * 0.8 + 0.1 * 0.5)
    assert r["threshold_used"] == pytest.approx(0.5) and r["activated"]
    assert scalar(conn, "select pgmem.context_threshold('query', 'meaning')") == pytest.approx(0.5)
    assert scalar(conn, "select pgmem.context_threshold('query')") == pytest.approx(0.75)
    # the default is still the design's
    r = call(conn, "activate", query_text="lisbon wedding", query_embedding=q, context_type="query", as_of=T)[0]
    assert r["threshold_used"] == pytest.approx(0.75) and r["temporal"] == pytest.approx(decay(10))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='profile "jam" is a search profile, not a activate profile'):
        call(conn, "activate", query_text="lisbon", profile="jam")


def test_build_context_ranks_with_actor_and_location(conn):
    """Issue 14: build_context called search with no actor and no location. With them, its
    candidates and scores are search's with the same actor and location."""
    q = unit((0, 1.0))
    for who, where in (("maya", "chat/web/maya"), ("tom", "chat/web/tom"), ("maya", "slack/infra")):
        remember(conn, f"{who} wrote about the flight to Lisbon", embedding=unit((0, 0.9), (2, math.sqrt(0.19))),
                 who=who, location=where, created_at=T - timedelta(days=2))
    kw = dict(query_text="flight to lisbon", query_embedding=q, as_of=T)
    hits = search(conn, **kw, actor="tom", location="chat/web/tom")
    ctx = call(conn, "build_context", **kw, actor="tom", location="chat/web/tom", token_budget=1000, profile="jam")
    assert {r["id"]: r["score"] for r in ctx} == pytest.approx({h["id"]: h["score"] for h in hits})
    assert ctx[0]["who"] == "tom"  # the best score is the asking actor's memory, packed first
    plain = call(conn, "build_context", **kw, token_budget=1000, profile="jam")
    assert {r["id"]: r["score"] for r in plain} == pytest.approx({h["id"]: h["score"] for h in search(conn, **kw)})


def test_activate_logs_with_a_query_id_through_the_client_signature(conn):
    mid = remember(conn, "a memory shown to the model", embedding=unit((0, 1.0)))
    qid = uuid.uuid4()
    rows = call(conn, "activate", query_text="memory shown", query_embedding=unit((0, 1.0)), query_id=qid,
                profile="shadow")
    assert [r["id"] for r in rows] == [mid]
    assert scalar(conn, "select count(*) from pgmem.activation_log where query_id = %s", (qid,)) == 1


def test_a_memory_created_in_1901_breaks_neither_views_nor_jobs(conn):
    """Issue 14 (High 4): memory_health and the prune job over a memory created in 1901. The API
    refuses created_at before 1970 now, so the memory comes the way an old dump restores it:
    plain SQL with triggers off (session_replication_role = replica), as the superuser."""
    conn.execute("set session_replication_role = replica")
    old = scalar(conn, "insert into pgmem.memories (tenant, content, created_at, importance, salience) "
                       "values ('acme', 'the 1901 census of the village', '1901-01-01', 0.9, 0.9) returning id")
    conn.execute("set session_replication_role = origin")
    row = conn.execute("select recency, decayed_importance, strength from pgmem.memory_health where id = %s",
                       (old,)).fetchone()
    assert row is not None and all(x is not None and 0 <= x <= 1 for x in row), row
    assert row[0] == pytest.approx(math.exp(-700))  # e^(-ln2 · t / 30) clamped at e^-700
    conn.execute("""call pgmem.run_job('prune', '{"tenant": "*"}')""")
    status = conn.execute("select status, error from pgmem.job_runs where job = 'prune' order by id desc limit 1").fetchone()
    assert status[0] == "ok", status
    state = scalar(conn, "select state from pgmem.memories where id = %s", (old,))
    assert state in ("active", "deleted")  # pruned (a decayed memory) or kept, never an error
    # and the reads still work over it (its lexical statistics went out of step with triggers
    # off: search clamps the document frequencies instead of failing)
    hits = ids(search(conn, query_text="census village", as_of=datetime.now(timezone.utc) + timedelta(days=150 * 365)))
    assert (old in hits) == (state == "active")
