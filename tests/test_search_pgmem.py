"""The default search profile, pgmem (sql/020_defaults.sql): JAM's fusion with BM25 on the
tenant's document frequencies, the actors a question names, its time window, and conversation
context (session, neighbours). And the statistics behind them (pgmem.lexicon).

Every expected number is recomputed here: document frequencies from the memories' lexemes,
BM25's idf = ln(1 + (N - df + .5) / (df + .5)), its length norm with k1 1.2 and b .4, the time
window's 2^(-distance / tau), and the fused score Σ w·s / Σ w over the signals a memory has."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from conftest import connect
from searchhelpers import call, cos, ids, remember, scalar, unit

T = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
K1, B = 1.2, 0.4


def pgmem_weights(conn) -> dict:
    return conn.execute("select weights from pgmem.profiles where tenant = '*' and name = 'pgmem'").fetchone()[0]


def search(conn, **kw) -> list[dict]:
    return call(conn, "search", profile="pgmem", **kw)


def lexemes(conn, text: str) -> list[str]:
    return sorted(scalar(conn, "select coalesce(tsvector_to_array(to_tsvector('english', %s)), '{}')", (text,)))


def stats(conn, tenant: str = "acme", user_id: str | None = None):
    """Document frequencies and lengths recounted from the memories themselves."""
    rows = conn.execute("select tsvector_to_array(tsv) from pgmem.memories where tenant = %s and state = 'active' "
                        "and (%s::text is null or user_id = %s)", (tenant, user_id, user_id)).fetchall()
    docs = [set(r[0]) for r in rows]
    df: dict[str, int] = {}
    for d in docs:
        for x in d:
            df[x] = df.get(x, 0) + 1
    return len(docs), sum(len(d) for d in docs), df


def lexicon(conn, tenant="acme", scope=""):
    """What pgmem reads: base + deltas."""
    return {r[0]: (r[1], r[2]) for r in conn.execute(
        "select lexeme, sum(df), sum(len) from (select lexeme, df, len from pgmem.lexicon where tenant = %s and scope = %s "
        "union all select lexeme, df, len from pgmem.lexicon_delta where tenant = %s and scope = %s) x "
        "group by 1 having sum(df) <> 0 or sum(len) <> 0", (tenant, scope, tenant, scope)).fetchall()}


def assert_lexicon_matches_the_memories(conn, tenant="acme"):
    n, total, df = stats(conn, tenant)
    lx = lexicon(conn, tenant)
    assert lx.pop("", (0, 0)) == (n, total)
    assert {k: v[0] for k, v in lx.items()} == df


# ------------------------------------------------------------------ the statistics
def test_lexicon_follows_every_write(conn):
    a = remember(conn, "Maya has a peanut allergy", who="maya", user_id="u1")
    b = remember(conn, "Tom booked the flight to Lisbon", who="tom", user_id="u1")
    remember(conn, "The peanut butter is in the kitchen", who="maya", user_id="u2")
    assert_lexicon_matches_the_memories(conn)
    assert lexicon(conn)["peanut"] == (2, 0)
    # per user, and per actor
    assert lexicon(conn, scope="user:u1")["peanut"] == (1, 0)
    assert lexicon(conn, scope="user:u2")[""] == (1, len(lexemes(conn, "The peanut butter is in the kitchen")) + 1)  # + 'maya' (who)
    assert lexicon(conn, scope="who") == {"maya": (2, 0), "tom": (1, 0)}
    # an edit, an archive, a restore, a plain SQL insert and a delete
    conn.execute("select * from pgmem.update_memory(%s, '{\"content\": \"Maya has a walnut allergy\"}')", (a,))
    assert_lexicon_matches_the_memories(conn)
    assert lexicon(conn)["peanut"] == (1, 0) and lexicon(conn)["walnut"] == (1, 0)
    conn.execute("update pgmem.memories set state = 'archived' where id = %s", (b,))
    assert_lexicon_matches_the_memories(conn)
    assert "lisbon" not in lexicon(conn) and "tom" not in lexicon(conn, scope="who")
    conn.execute("update pgmem.memories set state = 'active' where id = %s", (b,))
    conn.execute("insert into pgmem.memories (tenant, content, who) values ('acme', 'Lisbon again', 'tom')")
    assert lexicon(conn)["lisbon"] == (2, 0)
    conn.execute("update pgmem.memories set access_count = access_count + 1")  # bookkeeping: no delta
    n_delta = scalar(conn, "select count(*) from pgmem.lexicon_delta")
    conn.execute("select pgmem.touch(array[%s, %s]::bigint[])", (a, b))
    assert scalar(conn, "select count(*) from pgmem.lexicon_delta") == n_delta
    conn.execute("delete from pgmem.memories where id = %s", (a,))
    assert_lexicon_matches_the_memories(conn)


def test_fold_keeps_the_counts_and_empties_the_deltas(conn):
    for i in range(5):
        remember(conn, f"note number {i} about the garden", who="maya")
    conn.execute("delete from pgmem.memories where content like 'note number 4%'")
    before = lexicon(conn)
    assert scalar(conn, "select count(*) from pgmem.lexicon_delta") > 0
    assert scalar(conn, "select pgmem.fold_lexicon()") > 0
    assert scalar(conn, "select count(*) from pgmem.lexicon_delta") == 0
    assert lexicon(conn) == before
    assert_lexicon_matches_the_memories(conn)
    # nothing left at 0 in the base table
    assert scalar(conn, "select count(*) from pgmem.lexicon where df <= 0 and len <= 0") == 0


def test_rebuild_recounts_what_a_load_without_triggers_skipped(conn):
    for i in range(4):
        remember(conn, f"note number {i} about the garden", who="maya", user_id="u1")
    conn.execute("set session_replication_role = replica")  # a bulk load: no triggers
    conn.execute("insert into pgmem.memories (tenant, content, who) select 'acme', 'garden hose ' || g, 'tom' "
                 "from generate_series(1, 5) g")
    conn.execute("set session_replication_role = origin")
    assert lexicon(conn)["garden"] == (4, 0)  # the 5 loaded rows are missing
    assert scalar(conn, "select pgmem.rebuild_lexicon()") > 0
    assert scalar(conn, "select count(*) from pgmem.lexicon_delta") == 0
    assert_lexicon_matches_the_memories(conn)
    assert lexicon(conn)["garden"] == (9, 0) and lexicon(conn, scope="who") == {"maya": (4, 0), "tom": (5, 0)}
    assert lexicon(conn, scope="user:u1")[""][0] == 4


def test_erase_user_leaves_no_word_in_the_statistics(conn):
    remember(conn, "my quokkapassword is secret", user_id="u9")
    remember(conn, "the garden needs water", user_id="u1")
    assert lexicon(conn)["quokkapassword"] == (1, 0)
    conn.execute("select * from pgmem.erase_user('u9')")
    for table in ("lexicon", "lexicon_delta"):
        assert scalar(conn, f"select count(*) from pgmem.{table} where lexeme like 'quokka%%' or scope = 'user:u9'") == 0
    assert_lexicon_matches_the_memories(conn)


def test_statistics_are_per_tenant(dsn):
    """Issue 14 (Low): the lexical probe read pg_stats over every tenant, so tenant a could not
    find its own memory holding a word tenant b used 7,000 times. Now each tenant's own counts
    decide: b's words change nothing for a."""
    with connect(dsn, tenant="a") as a, connect(dsn, tenant="b") as b:
        target = remember(a, "the zorblat manual is in the blue folder")
        for i in range(30):
            remember(a, f"filler memory {i} about the weather")
        b.execute("insert into pgmem.memories (tenant, content) select 'b', 'zorblat zorblat ' || g from generate_series(1, 2000) g")
        b.execute("analyze pgmem.memories")
        # a's statistics: zorblat is a's rarest word (df 1 of 31)
        assert lexicon(a, "a")["zorblat"] == (1, 0)
        assert lexicon(b, "b")["zorblat"] == (2000, 0)
        # a budget of 10 rows: a's probe is its rarest word; b's 2,000 do not count
        assert scalar(a, "select pgmem.lexical_probe('zorblat weather', 10)::text") == "'zorblat'"
        assert ids(search(a, query_text="zorblat weather", k=1)) == [target]


# ------------------------------------------------------------------ BM25
def test_bm25_by_hand(conn):
    texts = ["Maya has a severe peanut allergy", "Tom booked a table at the peanut bar in Berlin",
             "The Berlin flight leaves on Friday", "Maya likes the Berlin zoo",
             "A long note about the garden, the roses, the tulips, the weeds and the watering schedule"]
    mids = [remember(conn, t, created_at=T - timedelta(days=1)) for t in texts]
    q = "peanut allergy in Berlin"
    rows = {r["id"]: r for r in search(conn, query_text=q, as_of=T, k=10)}
    n, total, df = stats(conn)
    avg = total / n
    ql = lexemes(conn, q)
    assert ql == ["allergi", "berlin", "peanut"]
    idf = {x: math.log(1 + (n - df.get(x, 0) + 0.5) / (df.get(x, 0) + 0.5)) for x in ql}
    docs = {m: set(scalar(conn, "select tsvector_to_array(tsv) from pgmem.memories where id = %s", (m,))) for m in mids}
    bm = {m: sum(idf[x] for x in ql if x in d) * (K1 + 1) / (1 + K1 * (1 - B + B * len(d) / avg)) for m, d in docs.items()}
    best = max(bm[m] for m in rows)
    for m, r in rows.items():
        assert r["lexical"] == pytest.approx(bm[m] / best, abs=1e-9), m
    # the rare 'allergi' outweighs the common 'berlin': memory 1 (peanut + allergi) first
    assert max(rows, key=lambda m: rows[m]["lexical"]) == mids[0]
    assert idf["allergi"] > idf["berlin"]


def test_bm25_statistics_of_one_user_when_filtered(conn):
    """Per user scope: with a filter on one user_id, idf comes from that user's memories."""
    remember(conn, "peanut peanut peanut", user_id="u2")
    for i in range(6):
        remember(conn, f"peanut note {i}", user_id="u1")
    a = remember(conn, "the walnut recipe", user_id="u1")
    r_all = {r["id"]: r for r in search(conn, query_text="walnut peanut", k=20)}
    r_u1 = {r["id"]: r for r in search(conn, query_text="walnut peanut", k=20, filters={"user_id": "u1"})}
    n1, total1, df1 = stats(conn, user_id="u1")
    assert n1 == 7 and df1["peanut"] == 6
    idf = {x: math.log(1 + (n1 - df1[x] + 0.5) / (df1[x] + 0.5)) for x in ("walnut", "peanut")}
    d = set(scalar(conn, "select tsvector_to_array(tsv) from pgmem.memories where id = %s", (a,)))
    raw_a = idf["walnut"] * (K1 + 1) / (1 + K1 * (1 - B + B * len(d) / (total1 / n1)))
    best = max(r["lexical"] for r in r_u1.values())
    assert best == pytest.approx(1.0)
    assert r_u1[a]["lexical"] == pytest.approx(1.0)  # walnut is the rarest term: memory a has the best BM25
    assert set(r_u1) < set(r_all) and len(r_u1) == 7
    # with the tenant's statistics peanut is rarer (7 of 8 memories hold it, against 6 of 7):
    # the same memory scores differently without the filter only through idf
    n, total, df = stats(conn)
    assert (n, df["peanut"]) == (8, 7) and raw_a > 0


# ------------------------------------------------------------------ the actors a question names
def test_actors_named_by_a_question(conn):
    for who, text in (("Caroline", "I went to a support group yesterday"), ("Melanie", "I signed up for a pottery class"),
                      ("Dr. Okafor", "The results look fine")):
        remember(conn, text, who=who)
    assert scalar(conn, "select pgmem.query_actors('What did Caroline do yesterday?')") == ["Caroline"]
    assert scalar(conn, "select pgmem.query_actors('what did dr okafor say about caroline''s results')") == ["Caroline", "Dr. Okafor"]
    assert scalar(conn, "select pgmem.query_actors('What did Carol say?')") == []
    assert scalar(conn, "select pgmem.query_embedding_text('What is Caroline''s identity?')") == "What is identity?"
    assert scalar(conn, "select pgmem.query_embedding_text('What is Caroline''s identity?', 'jam')") == \
        "What is Caroline's identity?"  # jam does not match actors from the text


def test_the_actor_signal_takes_the_named_actors(conn):
    q = unit((0, 1.0))
    c = remember(conn, "I researched adoption agencies", who="Caroline", embedding=unit((0, 0.8), (1, 0.6)), created_at=T)
    m = remember(conn, "I researched pottery classes", who="Melanie", embedding=unit((0, 0.8), (2, 0.6)), created_at=T)
    rows = {r["id"]: r for r in search(conn, query_text="What did Caroline research?", query_embedding=q, as_of=T)}
    assert rows[c]["actor"] == 1.0 and rows[m]["actor"] == pytest.approx(0.3)
    assert ids(search(conn, query_text="What did Caroline research?", query_embedding=q, as_of=T))[0] == c
    assert ids(search(conn, query_text="What did Melanie research?", query_embedding=q, as_of=T))[0] == m
    # the name left the lexical query: both memories share 'research' alone, so the same lexical
    assert rows[c]["lexical"] == rows[m]["lexical"] == pytest.approx(1.0)
    # naming every actor, or none, tells nothing apart: no actor signal, its weight shared out
    for text in ("What did Caroline and Melanie research?", "What was researched?"):
        assert all(r["actor"] is None for r in search(conn, query_text=text, query_embedding=q, as_of=T))
    # an explicit actor wins over the names in the text
    rows = {r["id"]: r for r in search(conn, query_text="What did Caroline research?", query_embedding=q, as_of=T,
                                       actor="Melanie")}
    assert rows[m]["actor"] == 1.0 and rows[c]["actor"] == pytest.approx(0.3)


# ------------------------------------------------------------------ time in a question
AS_OF = datetime(2023, 8, 10, 15, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("text, lo, hi, tau, month", [
    ("What painting did Melanie show on October 13, 2023?", "2023-10-13", "2023-10-14", 3.5, None),
    ("What did Gina find on 1 February, 2023?", "2023-02-01", "2023-02-02", 3.5, None),
    ("the week before August 3, 2023", "2023-07-27", "2023-08-04", 3.5, None),  # through the anchor
    ("What did Maria donate in December 2023?", "2023-12-01", "2024-01-01", 7.0, None),
    ("What state did Joanna visit in summer 2021?", "2021-06-01", "2021-09-01", 14.0, None),
    ("How many times in 2023?", "2023-01-01", "2024-01-01", 30.0, None),
    ("what did I eat yesterday", "2023-08-09", "2023-08-10", 1.0, None),
    ("what happened last week", "2023-07-31", "2023-08-07", 3.5, None),
    ("who called last weekend", "2023-08-05", "2023-08-07", 2.0, None),
    ("the bill from last month", "2023-07-01", "2023-08-01", 7.0, None),
    ("three days ago", "2023-08-07", "2023-08-08", 1.0, None),
    ("When did Melanie go camping in June?", None, None, 7.0, 6),
    ("nothing about time here", None, None, None, None),
])
def test_time_window_of_a_question(conn, text, lo, hi, tau, month):
    rows = conn.execute("select lo, hi, tau_days, month from pgmem.time_window(%s, %s)", (text, AS_OF)).fetchall()
    if tau is None:
        assert rows == []
        return
    (rlo, rhi, rtau, rmonth), = rows
    day = lambda s: None if s is None else datetime.fromisoformat(s).replace(tzinfo=timezone.utc)  # noqa: E731
    assert (rlo, rhi, rtau, rmonth) == (day(lo), day(hi), tau, month)


def test_the_time_signal_boosts_the_window_and_never_filters(conn):
    q = unit((0, 1.0))
    inside = remember(conn, "we painted a sunset", embedding=unit((0, 0.9), (1, math.sqrt(0.19))),
                      happened_at=datetime(2023, 10, 13, 18, tzinfo=timezone.utc), created_at=AS_OF - timedelta(days=400))
    week = remember(conn, "we painted a lake", embedding=unit((0, 0.9), (2, math.sqrt(0.19))),
                    happened_at=datetime(2023, 10, 20, 12, tzinfo=timezone.utc), created_at=AS_OF - timedelta(days=400))
    unknown = remember(conn, "we painted a horse", embedding=unit((0, 0.9), (3, math.sqrt(0.19))),
                       created_at=datetime(2023, 1, 1, tzinfo=timezone.utc))
    text = "What did they paint on October 13, 2023?"
    rows = {r["id"]: r for r in search(conn, query_text=text, query_embedding=q, as_of=AS_OF + timedelta(days=100))}
    assert set(rows) == {inside, week, unknown}  # a boost, not a filter
    assert rows[inside]["time"] == 1.0
    # 6.5 days after the window's end, tau 3.5 days: 2^(-6.5/3.5)
    assert rows[week]["time"] == pytest.approx(2 ** (-6.5 / 3.5), abs=1e-9)
    # no happened_at: its created_at counts, 285 days before the window
    assert rows[unknown]["time"] == pytest.approx(2 ** (-285 / 3.5), abs=1e-12)
    assert ids(search(conn, query_text=text, query_embedding=q, as_of=AS_OF + timedelta(days=100)))[0] == inside
    # without a time in the question there is no time signal
    assert all(r["time"] is None for r in search(conn, query_text="What did they paint?", query_embedding=q, as_of=AS_OF))


# ------------------------------------------------------------------ conversation context
def test_session_and_neighbour_context_by_hand(conn):
    """A session of three turns (temporal links 1-2-3) and an unrelated memory. The second turn
    answers the first's question without sharing its words: its neighbour signal is the first
    turn's own score; the first turn's second neighbour (the third) passes on neighbour_far
    (.9) of its own score; each turn's context signal is the question's (1 + cos) / 2 to the
    sum of its vector and its previous turn's (issue 29)."""
    q = unit((0, 1.0))
    vecs = (unit((0, 0.9), (1, math.sqrt(0.19))), unit((2, 1.0)), unit((0, 0.2), (3, math.sqrt(0.96))))
    s = [remember(conn, text, embedding=v, session_id="s1", who=who, created_at=T - timedelta(days=2))
         for text, v, who in (("Where is the conference this year?", vecs[0], "maya"),
                              ("Yes, in Lisbon, in May", vecs[1], "tom"),
                              ("Great, I will book a flight", vecs[2], "maya"))]
    other = remember(conn, "The conference badge is in the drawer", embedding=unit((4, 1.0)),
                     created_at=T - timedelta(days=2))
    assert scalar(conn, "select count(*) from pgmem.links where kind = 'temporal'") == 2
    w = pgmem_weights(conn)
    far = conn.execute("select (params->>'neighbour_far')::float8 from pgmem.profiles where tenant = '*' "
                       "and name = 'pgmem'").fetchone()[0]
    assert far == 0.9
    rows = {r["id"]: r for r in search(conn, query_text="where is the conference", query_embedding=q, as_of=T, k=10)}
    # no actor named, no location, no time: those weights are shared out
    present = ("semantic", "lexical", "recency", "usage", "context", "session", "neighbour")
    own_signals = ("semantic", "lexical", "recency", "usage", "context")
    total = sum(w[x] for x in present)
    ew = {x: w[x] / total for x in present}
    own_w = sum(ew[x] for x in own_signals)

    def own(r):
        return sum(ew[x] * r[x] for x in own_signals) / own_w

    s1, s2, s3 = (rows[i] for i in s)
    # context: the first turn has no previous turn (its own semantic signal); the others read
    # with the turn before them
    assert s1["context"] == pytest.approx(s1["semantic"], abs=1e-9)
    assert s2["context"] == pytest.approx((1 + cos(vecs[0] + vecs[1], q)) / 2, abs=1e-6)
    assert s3["context"] == pytest.approx((1 + cos(vecs[1] + vecs[2], q)) / 2, abs=1e-6)
    assert s2["context"] > s2["semantic"] + 0.3  # the answer, read with its question
    assert s1["session"] == pytest.approx(max(own(s1), own(s2), own(s3)), abs=1e-9)
    assert s2["neighbour"] == pytest.approx(max(own(s1), own(s3)), abs=1e-9)
    assert s1["neighbour"] == pytest.approx(max(own(s2), far * own(s3)), abs=1e-9)
    assert s3["neighbour"] == pytest.approx(max(own(s2), far * own(s1)), abs=1e-9)
    o = rows[other]
    assert o["session"] is None and o["neighbour"] is None  # no session, no links: rescaled without them
    assert o["context"] == pytest.approx(o["semantic"], abs=1e-9)
    for r in rows.values():
        have = [x for x in present if r[x] is not None]
        want = sum(ew[x] * r[x] for x in have) / sum(ew[x] for x in have)
        assert r["score"] == pytest.approx(want, abs=1e-9)
    # the answer ranks above the unrelated memory that shares the question's words
    ranked = ids(search(conn, query_text="where is the conference", query_embedding=q, as_of=T, k=10))
    assert ranked.index(s[1]) < ranked.index(other)
    # explain_search: per-memory weights whose contributions add up to the score
    ex = call(conn, "explain_search", query_text="where is the conference", query_embedding=q, as_of=T, profile="pgmem")
    for mid in rows:
        assert sum(r["contribution"] for r in ex if r["id"] == mid) == pytest.approx(rows[mid]["score"], abs=1e-12)
    assert {r["signal"] for r in ex} >= {"context", "session", "neighbour"}
    # the jam profile has neither: its fusion is JAM's six signals
    assert all(r["context"] is None for r in call(conn, "search", query_text="where is the conference",
                                                 query_embedding=q, as_of=T, k=10, profile="jam"))


def test_a_neighbour_outside_the_candidates_is_brought_in(conn):
    """Candidates are expanded by their neighbours (temporal links): a reply that matches
    nothing of the question is still scored, through its neighbour."""
    q = unit((0, 1.0))
    ask = remember(conn, "Which hotel did you pick for the wedding?", embedding=unit((0, 1.0)), session_id="s",
                   created_at=T)
    reply = remember(conn, "Casa do Largo, near the castle", embedding=unit((5, 1.0)), session_id="s", created_at=T)
    for i in range(30):  # closer in meaning than the reply, and enough to fill the HNSW branch
        remember(conn, f"unrelated chatter number {i}", embedding=unit((0, 0.3), (6 + i, math.sqrt(0.91))),
                 created_at=T)
    rows = {r["id"]: r for r in call(conn, "search", query_text="hotel wedding", query_embedding=q, as_of=T, k=5,
                                     candidates=5, profile="pgmem")}
    assert ask in rows and reply in rows  # 5 per branch: the reply is in none of them, but next to the question
    assert rows[reply]["neighbour"] == pytest.approx(rows[reply]["session"]) and rows[reply]["neighbour"] > 0.9
    jam = ids(call(conn, "search", query_text="hotel wedding", query_embedding=q, as_of=T, k=5, candidates=5, profile="jam"))
    assert reply not in jam


# ------------------------------------------------------------------ the default
def test_search_ranks_with_the_setting_search_profile(conn):
    q = unit((0, 1.0))
    remember(conn, "a memory about kites", embedding=unit((0, 1.0)))
    assert conn.execute("select value from pgmem.settings where tenant = '*' and key = 'search_profile'").fetchone()[0] == "pgmem"
    default = conn.execute("select time, session, neighbour from pgmem.search('kites', %s::vector)", (q,)).fetchall()
    assert default  # the pgmem profile: the context signals exist (NULL here: no session)
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'search_profile', '\"jam\"')")
    jam = call(conn, "search", query_text="kites", query_embedding=q, profile=None, as_of=T)
    named = call(conn, "search", query_text="kites", query_embedding=q, profile="jam", as_of=T)
    assert [r["score"] for r in jam] == [r["score"] for r in named]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown profile "nope"'):
        conn.execute("update pgmem.settings set value = '\"nope\"' where tenant = 'acme' and key = 'search_profile'")
        call(conn, "search", query_text="kites", profile=None)


# ------------------------------------------------------------------ usage, log-scaled
def test_usage_is_log_scaled_in_pgmem_and_linear_in_jam(conn):
    """pgmem: ln(1 + count) / ln(1 + the tenant's largest count); jam: count / largest (JAM)."""
    q = unit((0, 1.0))
    hot = remember(conn, "the hot memory about kites", embedding=unit((0, 0.9), (1, 0.43589)), created_at=T)
    warm = remember(conn, "the warm memory about kites", embedding=unit((0, 0.9), (2, 0.43589)), created_at=T)
    conn.execute("update pgmem.memories set access_count = case id when %s then 5000 else 50 end, last_accessed_at = %s "
                 "where id in (%s, %s)", (hot, T, hot, warm))
    pg = {r["id"]: r for r in search(conn, query_text="kites", query_embedding=q, as_of=T)}
    jam = {r["id"]: r for r in call(conn, "search", profile="jam", query_text="kites", query_embedding=q, as_of=T)}
    assert pg[hot]["usage"] == pytest.approx(1.0) and jam[hot]["usage"] == pytest.approx(1.0)
    assert pg[warm]["usage"] == pytest.approx(math.log(51) / math.log(5001), abs=1e-9)
    assert jam[warm]["usage"] == pytest.approx(50 / 5000, abs=1e-9)
