"""remember() / remember_many(): Engram's surprise gate, Fragment salience, duplicates,
rejection, idempotency, temporal bindings, validation, and plain-INSERT write paths.

Every expected number is computed here in Python from the formulas of the source designs
(engram.md "Surprise Detection", fragment-reconstructive-memory.md "Salience Formula").
"""
from __future__ import annotations

import math

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from conftest import connect
from sqlhelpers import Expr, call, scalar

DIM = 384

# engram.md, Category Importance Weights
WEIGHTS = {"fact": 0.8, "preference": 0.9, "skill": 0.7, "episode": 0.6, "context": 0.5}


# ---------------------------------------------------------------------------- helpers
def remember(conn, content, **kw) -> dict:
    """Calls pgmem.remember(content, name => value, ...) and returns the result row as a dict."""
    got = call(conn, "remember", content, **kw)
    assert len(got) == 1
    return got[0]


def unit(*pairs: tuple[int, float]) -> np.ndarray:
    """A 384-d float32 vector with the given (axis, value) components."""
    v = np.zeros(DIM, dtype=np.float32)
    for i, x in pairs:
        v[i] = x
    return v


def counts(conn) -> tuple[int, int]:
    return conn.execute(
        "select (select count(*) from pgmem.memories), (select count(*) from pgmem.history)").fetchone()


def rarity(n: int) -> float:
    return 1.0 / math.log2(2 + n)


def hist_ops(conn, memory_id) -> list[str]:
    return [r[0] for r in conn.execute("select op from pgmem.history(%s)", (memory_id,))]


# Engram's Full Example: candidate c, "User likes JavaScript" a (cos 0.6), "User prefers dark
# mode" b (cos 0.3). All three are unit vectors.
VEC_C = unit((0, 1.0))
VEC_A = unit((0, 0.6), (1, 0.8))
VEC_B = unit((0, 0.3), (2, math.sqrt(1 - 0.3 ** 2)))


def test_vectors_have_the_example_similarities():
    cos = lambda x, y: float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))  # noqa: E731
    assert cos(VEC_C, VEC_A) == pytest.approx(0.6, abs=1e-6)
    assert cos(VEC_C, VEC_B) == pytest.approx(0.3, abs=1e-6)


# ---------------------------------------------------------------------------- surprise
@pytest.mark.parametrize("other_category", ["fact", "skill"])
def test_engram_full_example_with_embeddings(conn, other_category):
    a = remember(conn, "User likes JavaScript", embedding=VEC_A, category=other_category, force=True)
    b = remember(conn, "User prefers dark mode", embedding=VEC_B, category="preference", force=True)
    assert a["decision"] == b["decision"] == "stored"

    r = remember(conn, "User prefers TypeScript", embedding=VEC_C, category="preference")
    d = r["details"]

    # keyword: tokens {user, prefers, typescript}; best Jaccard 2/5 = 0.4 with "User prefers dark mode"
    kw_sim_b = len({"user", "prefers"}) / len({"user", "prefers", "typescript", "dark", "mode"})
    kw_sim_a = len({"user"}) / len({"user", "prefers", "typescript", "likes", "javascript"})
    keyword_novelty = 1 - max(kw_sim_a, kw_sim_b)
    semantic_novelty = 1 - 0.6
    rar = 1 / math.log2(3)  # exactly one existing preference
    surprise = 0.6 * semantic_novelty + 0.3 * keyword_novelty + 0.1 * rar
    importance = surprise * 0.9

    assert keyword_novelty == pytest.approx(0.6)
    assert surprise == pytest.approx(0.483, abs=1e-3)   # the design's number
    assert importance == pytest.approx(0.435, abs=1e-3)  # the design's number

    assert r["decision"] == "stored"
    assert r["memory_id"] is not None
    assert r["surprise"] == pytest.approx(surprise, abs=1e-5)
    assert r["surprise"] == pytest.approx(0.483, abs=1e-3)
    assert r["importance"] == pytest.approx(importance, abs=1e-5)
    assert r["importance"] == pytest.approx(0.435, abs=1e-3)
    assert float(d["keyword_novelty"]) == pytest.approx(0.6, abs=1e-6)
    assert float(d["semantic_novelty"]) == pytest.approx(0.4, abs=1e-5)
    assert float(d["rarity"]) == pytest.approx(rar, abs=1e-6)
    assert float(d["surprise"]) == pytest.approx(surprise, abs=1e-5)
    assert d["with_embedding"] is True
    assert d["decision"] == "stored"
    assert d["threshold"] == pytest.approx(0.15)
    assert d["category_weight"] == pytest.approx(0.9)
    assert d["importance_source"] == "surprise"
    # the nearest memory is the semantically closest one
    assert r["nearest_id"] == a["memory_id"]
    assert r["nearest_similarity"] == pytest.approx(0.6, abs=1e-5)
    # what was stored matches what was returned
    row = conn.execute("select surprise, importance, category, embedding is not null, gate->>'keyword_novelty' "
                       "from pgmem.memories where id = %s", (r["memory_id"],)).fetchone()
    assert row[0] == pytest.approx(surprise, abs=1e-5)
    assert row[1] == pytest.approx(importance, abs=1e-5)
    assert row[2] == "preference" and row[3] is True
    assert float(row[4]) == pytest.approx(0.6)
    # stored with its vector: nothing queued
    assert scalar(conn, "select count(*) from pgmem.embedding_queue where memory_id = %s", (r["memory_id"],)) == 0
    assert scalar(conn, "select count(*) from pgmem.memories") == 3


def test_engram_full_example_without_embeddings(conn):
    remember(conn, "User likes JavaScript", category="fact", force=True)
    remember(conn, "User prefers dark mode", category="preference", force=True)
    r = remember(conn, "User prefers TypeScript", category="preference")
    rar = 1 / math.log2(3)
    surprise = 0.8 * 0.6 + 0.2 * rar
    assert r["decision"] == "stored"
    assert r["surprise"] == pytest.approx(surprise, abs=1e-5)
    assert r["importance"] == pytest.approx(surprise * 0.9, abs=1e-5)
    d = r["details"]
    assert float(d["keyword_novelty"]) == pytest.approx(0.6, abs=1e-6)
    assert float(d["rarity"]) == pytest.approx(rar, abs=1e-6)
    assert d["semantic_novelty"] is None
    assert d["with_embedding"] is False
    # without an embedding the nearest memory is the best keyword match
    nearest = scalar(conn, "select id from pgmem.memories where content = 'User prefers dark mode'")
    assert r["nearest_id"] == nearest
    assert r["nearest_similarity"] == pytest.approx(0.4, abs=1e-6)
    # and it waits for the embedding worker
    assert scalar(conn, "select count(*) from pgmem.embedding_queue where memory_id = %s", (r["memory_id"],)) == 1


def test_first_memory_is_fully_novel(conn):
    r = remember(conn, "The office is in Lisbon", category="fact")
    assert r["surprise"] == pytest.approx(1.0)
    assert r["importance"] == pytest.approx(0.8)
    assert float(r["details"]["keyword_novelty"]) == 1.0
    assert float(r["details"]["rarity"]) == 1.0
    r2 = remember(conn, "Quarterly revenue grew strongly", embedding=VEC_C, category="context")
    # one existing memory, but none with an embedding: semantic novelty 1, keyword novelty 1 (no shared token)
    assert float(r2["details"]["semantic_novelty"]) == 1.0
    assert float(r2["details"]["keyword_novelty"]) == 1.0
    assert r2["surprise"] == pytest.approx(0.6 + 0.3 + 0.1 * 1.0)  # first 'context'
    assert r2["importance"] == pytest.approx(1.0 * 0.5)


@pytest.mark.parametrize("n, expected", [(0, 1.0), (1, 0.63), (10, 0.28), (100, 0.15)])
def test_category_rarity_table(conn, n, expected):
    # n memories of the category, plus some of another category that must not count
    for i in range(n):
        remember(conn, f"skill number {i} zq{i}", category="skill", force=True)
    for i in range(3):
        remember(conn, f"fact number {i} zf{i}", category="fact", force=True)
    assert scalar(conn, "select count(*) from pgmem.memories where category = 'skill'") == n
    r = remember(conn, "Can juggle five flaming torches", category="skill")
    got = float(r["details"]["rarity"])
    assert got == pytest.approx(rarity(n), abs=1e-6)
    assert got == pytest.approx(expected, abs=0.005)  # the design's rounded table


def test_rarity_ignores_deleted_memories_and_other_users(conn):
    ids = [remember(conn, f"preference {i} zz{i}", category="preference", force=True)["memory_id"] for i in range(3)]
    conn.execute("select pgmem.forget(%s)", (ids[0],))
    remember(conn, "preference for user bob", category="preference", user_id="bob", force=True)
    r = remember(conn, "Likes green tea in the morning", category="preference")
    assert float(r["details"]["rarity"]) == pytest.approx(rarity(2), abs=1e-6)


# ---------------------------------------------------------------------------- duplicates
def test_exact_duplicate_is_case_and_whitespace_insensitive(conn):
    first = remember(conn, "User lives in Paris", category="fact")
    assert first["decision"] == "stored"
    dup = remember(conn, "  user   LIVES in  PARIS ", category="fact", session_id="s9")
    assert dup["decision"] == "duplicate"
    assert dup["memory_id"] == first["memory_id"]
    assert dup["surprise"] == 0
    assert dup["importance"] == pytest.approx(first["importance"])
    assert dup["details"]["decision"] == "duplicate"
    assert scalar(conn, "select count(*) from pgmem.memories") == 1
    assert hist_ops(conn, first["memory_id"]) == ["add", "duplicate"]
    after = scalar(conn, "select after from pgmem.history where op = 'duplicate'")
    assert after["content"] == "  user   LIVES in  PARIS "
    assert after["session_id"] == "s9"
    # a duplicate is not queued again, and not linked into the session
    assert scalar(conn, "select count(*) from pgmem.embedding_queue") == 1
    assert scalar(conn, "select count(*) from pgmem.links") == 0


@pytest.mark.parametrize("variant", ["User lives in Paris\n", "\tuser lives in paris", "User lives in Paris\r\n"])
def test_exact_duplicate_ignores_leading_and_trailing_tabs_and_newlines(conn, variant):
    first = remember(conn, "User lives in Paris", category="fact")
    dup = remember(conn, variant, category="fact")
    assert dup["decision"] == "duplicate"
    assert dup["memory_id"] == first["memory_id"]


def test_duplicates_are_per_user(conn):
    a = remember(conn, "User lives in Paris", user_id="alice")
    b = remember(conn, "User lives in Paris", user_id="bob")
    c = remember(conn, "User lives in Paris")  # no user: its own scope
    assert [a["decision"], b["decision"], c["decision"]] == ["stored"] * 3
    assert len({a["memory_id"], b["memory_id"], c["memory_id"]}) == 3
    # bob had nothing yet: fully novel in his scope
    assert b["surprise"] == pytest.approx(1.0)
    again = remember(conn, "user lives in paris", user_id="bob")
    assert again["decision"] == "duplicate" and again["memory_id"] == b["memory_id"]
    assert scalar(conn, "select count(*) from pgmem.memories") == 3


def test_duplicate_of_deleted_memory_is_stored_again(conn):
    first = remember(conn, "Meeting moved to Friday")
    conn.execute("select pgmem.forget(%s)", (first["memory_id"],))
    again = remember(conn, "Meeting moved to Friday")
    assert again["decision"] == "stored"
    assert again["memory_id"] != first["memory_id"]


# ---------------------------------------------------------------------------- rejection
def test_near_duplicate_below_threshold_is_rejected(conn):
    existing = remember(conn, "User lives in Paris", category="fact")
    m0, h0 = counts(conn)
    # same token set, different text: keyword novelty 0, one existing fact
    r = remember(conn, "Paris: user lives in.", category="fact", session_id="s1", who="alice")
    expected = 0.8 * 0.0 + 0.2 * rarity(1)
    assert expected < 0.15
    assert r["decision"] == "rejected"
    assert r["memory_id"] is None
    assert r["surprise"] == pytest.approx(expected, abs=1e-5)
    assert r["nearest_id"] == existing["memory_id"]
    assert r["nearest_similarity"] == pytest.approx(1.0)
    reason = f"surprise {round(expected, 4)} is below the threshold 0.15"
    assert r["details"]["reason"] == reason
    assert r["details"]["decision"] == "rejected"
    # nothing stored, one history row
    assert counts(conn) == (m0, h0 + 1)
    h = conn.cursor(row_factory=dict_row).execute(
        "select * from pgmem.history order by id desc limit 1").fetchone()
    assert h["op"] == "reject"
    assert h["memory_id"] == existing["memory_id"]
    assert h["tenant"] == "acme"
    assert h["details"]["reason"] == reason
    assert h["after"]["content"] == "Paris: user lives in."
    assert h["after"]["who"] == "alice" and h["after"]["category"] == "fact"
    assert h["before"] is None
    assert hist_ops(conn, existing["memory_id"]) == ["add", "reject"]

    # force stores it anyway, and says it was forced
    f = remember(conn, "Paris: user lives in.", category="fact", force=True)
    assert f["decision"] == "stored"
    assert f["memory_id"] is not None
    assert f["surprise"] == pytest.approx(expected, abs=1e-5)
    assert f["details"]["forced"] is True
    assert scalar(conn, "select count(*) from pgmem.memories") == m0 + 1


def test_near_duplicate_by_embedding_is_rejected(conn):
    e = remember(conn, "Team standup is at nine", embedding=VEC_A, force=True)
    # cos 0.99 and same token set
    v = unit((0, 0.6), (1, 0.8))
    v[3] = 0.15
    r = remember(conn, "standup team: is at nine", embedding=v)
    cos = float(np.dot(v, VEC_A) / np.linalg.norm(v))
    expected = 0.6 * (1 - cos) + 0.3 * 0 + 0.1 * rarity(1)
    assert r["decision"] == "rejected"
    assert r["surprise"] == pytest.approx(expected, abs=1e-5)
    assert r["nearest_id"] == e["memory_id"]
    assert r["nearest_similarity"] == pytest.approx(cos, abs=1e-5)


def test_threshold_is_a_setting_with_tenant_override(conn, dsn):
    remember(conn, "User likes JavaScript", category="fact", force=True)
    remember(conn, "User prefers dark mode", category="preference", force=True)
    surprise = 0.8 * 0.6 + 0.2 * rarity(1)  # 0.606

    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'surprise_threshold', '0.7')")
    r = remember(conn, "User prefers TypeScript", category="preference")
    assert r["decision"] == "rejected"
    assert r["surprise"] == pytest.approx(surprise, abs=1e-5)
    assert r["details"]["threshold"] == pytest.approx(0.7)
    assert r["details"]["reason"].endswith("below the threshold 0.7")

    # the tenant's own value beats the installation default, in both directions
    conn.execute("update pgmem.settings set value = '0.95' where tenant = '*' and key = 'surprise_threshold'")
    conn.execute("update pgmem.settings set value = '0.5' where tenant = 'acme' and key = 'surprise_threshold'")
    r = remember(conn, "User prefers TypeScript", category="preference")
    assert r["decision"] == "stored"
    assert r["details"]["threshold"] == pytest.approx(0.5)

    # another tenant gets the default
    with connect(dsn, tenant="other") as o:
        o.execute("select pgmem.remember('Other tenant memory about llamas')")
        ro = remember(o, "Other tenant memory about alpacas")
        # keyword novelty 1 - 4/6 ... below 0.95 whatever it is: rejected under the default
        assert ro["details"]["threshold"] == pytest.approx(0.95)
        assert ro["decision"] == "rejected"

    # without a tenant override the default applies to acme too
    conn.execute("delete from pgmem.settings where tenant = 'acme' and key = 'surprise_threshold'")
    r = remember(conn, "User prefers Rust for systems work", category="preference")
    assert r["details"]["threshold"] == pytest.approx(0.95)
    assert r["decision"] == "rejected"


# ---------------------------------------------------------------------------- idempotency
def test_event_key_replay(conn):
    r1 = remember(conn, "Deployed release 4.2 to production", event_key="evt-42", session_id="s")
    assert r1["decision"] == "stored"
    m0, h0 = counts(conn)
    r2 = remember(conn, "Deployed release 4.2 to production", event_key="evt-42", session_id="s")
    assert r2["decision"] == "replayed"
    assert r2["memory_id"] == r1["memory_id"]
    assert r2["surprise"] == pytest.approx(r1["surprise"])
    assert r2["importance"] == pytest.approx(r1["importance"])
    assert r2["details"] == {"event_key": "evt-42"}
    # even with a different text: the key identifies the event
    r3 = remember(conn, "something else entirely", event_key="evt-42")
    assert r3["decision"] == "replayed" and r3["memory_id"] == r1["memory_id"]
    assert counts(conn) == (m0, h0)
    assert scalar(conn, "select count(*) from pgmem.memories where event_key = 'evt-42'") == 1
    # another key is another event
    r4 = remember(conn, "Rolled back release 4.2", event_key="evt-43")
    assert r4["decision"] == "stored" and r4["memory_id"] != r1["memory_id"]


def test_event_keys_are_per_tenant(conn, dsn):
    r1 = remember(conn, "acme event", event_key="k1")
    with connect(dsn, tenant="other") as o:
        r2 = remember(o, "other event", event_key="k1")
    assert r2["decision"] == "stored" and r2["memory_id"] != r1["memory_id"]


# ---------------------------------------------------------------------------- temporal links
def test_temporal_links_within_a_session(conn):
    texts = ["Alice opened the ticket", "Bob reproduced the crash", "Carol shipped the hotfix"]
    ids = [remember(conn, t, session_id="s1")["memory_id"] for t in texts]
    other = remember(conn, "Dave reviewed quarterly budget", session_id="s2")["memory_id"]
    lone = remember(conn, "Eve likes hiking mountains")["memory_id"]

    links = conn.execute("select src_id, dst_id, kind, weight, tenant from pgmem.links order by src_id").fetchall()
    assert links == [(ids[0], ids[1], "temporal", 1.0, "acme"), (ids[1], ids[2], "temporal", 1.0, "acme")]
    seqs = dict(conn.execute("select id, seq from pgmem.memories"))
    assert [seqs[i] for i in ids] == [1, 2, 3]
    assert seqs[other] == 1
    assert seqs[lone] is None

    # a later memory of session 2 links only to session 2
    nxt = remember(conn, "Dave approved marketing spend", session_id="s2")["memory_id"]
    assert conn.execute("select src_id, kind from pgmem.links where dst_id = %s", (nxt,)).fetchall() == [(other, "temporal")]
    assert scalar(conn, "select seq from pgmem.memories where id = %s", (nxt,)) == 2


def test_session_memory_has_a_single_add_history_row_with_its_seq(conn):
    # seq is written by the INSERT itself: no second 'update' history row for a new memory
    remember(conn, "Alice opened the ticket", session_id="s1")
    mid = remember(conn, "Bob reproduced the crash", session_id="s1")["memory_id"]
    assert hist_ops(conn, mid) == ["add"]
    assert scalar(conn, "select after->>'seq' from pgmem.history where memory_id = %s and op = 'add'", (mid,)) == "2"


# ---------------------------------------------------------------------------- salience
def _salience(emotion, novelty, depth, goal=None):
    w = {"emotion": 0.35, "novelty": 0.30, "goal": 0.25, "depth": 0.10}
    comp = {"emotion": emotion, "novelty": novelty, "goal": goal, "depth": depth}
    known = {k: v for k, v in comp.items() if v is not None}
    return sum(w[k] * v for k, v in known.items()) / sum(w[k] for k in known)


def test_salience_without_embedding(conn):
    r = remember(conn, "Alice moved to Berlin for the new job", who="Alice", what="moved",
                 location="Berlin", valence=0.9, arousal=0.3)
    emotion = min(1.0, 0.3 + abs(0.9 - 0.5))  # 0.7
    depth = 3 / 6
    novelty = 1.0  # keyword novelty of the first memory
    expected = _salience(emotion, novelty, depth)
    assert expected == pytest.approx((0.35 * 0.7 + 0.30 * 1.0 + 0.10 * 0.5) / 0.75)
    assert r["salience"] == pytest.approx(expected, abs=1e-5)
    assert r["details"]["emotion"] == pytest.approx(emotion, abs=1e-6)
    assert r["details"]["novelty"] == pytest.approx(1.0)
    assert scalar(conn, "select salience from pgmem.memories where id = %s", (r["memory_id"],)) == \
        pytest.approx(expected, abs=1e-5)


def test_salience_with_embedding_uses_semantic_novelty(conn):
    remember(conn, "Quarterly numbers were reviewed", embedding=VEC_A, force=True)
    r = remember(conn, "Alice moved to Berlin for the new job", embedding=VEC_C, who="Alice",
                 happened_at="2024-03-01T10:00:00Z", location="Berlin", why="a new job",
                 valence=0.2, arousal=0.5)
    emotion = min(1.0, 0.5 + abs(0.2 - 0.5))  # 0.8
    depth = 4 / 6
    semantic = 1 - 0.6
    assert float(r["details"]["keyword_novelty"]) == 1.0  # no shared words: must not be used
    expected = _salience(emotion, semantic, depth)
    assert r["salience"] == pytest.approx(expected, abs=1e-5)
    assert float(r["details"]["novelty"]) == pytest.approx(semantic, abs=1e-5)


def test_salience_without_emotion_renormalises_over_novelty_and_depth(conn):
    remember(conn, "Quarterly numbers were reviewed", embedding=VEC_A, force=True)
    r = remember(conn, "Alice moved to Berlin", embedding=VEC_C, who="Alice", what="moved")
    expected = (0.30 * 0.4 + 0.10 * (2 / 6)) / 0.40
    assert _salience(None, 0.4, 2 / 6) == pytest.approx(expected)
    assert r["salience"] == pytest.approx(expected, abs=1e-5)
    assert r["details"]["emotion"] is None


def test_salience_emotional_intensity_is_capped(conn):
    r = remember(conn, "Won the championship final", valence=1.0, arousal=0.9)
    emotion = min(1.0, 0.9 + 0.5)  # 1.0, not 1.4
    assert r["details"]["emotion"] == pytest.approx(1.0)
    assert r["salience"] == pytest.approx(_salience(emotion, 1.0, 0.0), abs=1e-5)


# ---------------------------------------------------------------------------- remember_many
def test_remember_many_batch(conn):
    items = [{"content": f"Batch item {i} mentions token q{i}x", "category": "fact" if i % 2 else "episode"}
             for i in range(1, 51)]
    items[29] = {"content": "  BATCH item 3 mentions   token Q3X "}  # in-batch exact duplicate of item 3
    items[9]["embedding"] = VEC_C.tolist()
    items[10].update({"when": "2024-05-01T12:00:00Z", "where": "Oslo", "who": "Ann",
                      "topics": ["travel"], "metadata": {"src": "batch"}, "importance": 0.9})
    cur = conn.cursor(row_factory=dict_row)
    rows = cur.execute("select * from pgmem.remember_many(%s)", (Jsonb(items),)).fetchall()
    assert len(rows) == 50
    assert [r["ord"] for r in rows] == list(range(1, 51))
    assert rows[29]["decision"] == "duplicate"
    assert rows[29]["memory_id"] == rows[2]["memory_id"]
    assert all(r["decision"] == "stored" for i, r in enumerate(rows) if i != 29)
    assert len({r["memory_id"] for r in rows}) == 49
    assert scalar(conn, "select count(*) from pgmem.memories") == 49
    # the first item is fully novel; fields are carried over
    assert rows[0]["surprise"] == pytest.approx(1.0)
    m = conn.cursor(row_factory=dict_row).execute(
        "select * from pgmem.memories where id = %s", (rows[10]["memory_id"],)).fetchone()
    assert m["location"] == "Oslo" and m["who"] == "Ann" and m["topics"] == ["travel"]
    assert m["happened_at"].isoformat().startswith("2024-05-01T12:00:00")
    assert m["metadata"] == {"src": "batch"}
    assert m["importance"] == pytest.approx(0.9)
    assert m["category"] == "fact"
    emb = scalar(conn, "select embedding from pgmem.memories where id = %s", (rows[9]["memory_id"],))
    assert np.allclose(emb.to_numpy(), VEC_C)
    # 49 stored, 1 with an embedding: 48 queued
    assert scalar(conn, "select count(*) from pgmem.embedding_queue") == 48


def _mixed_batch() -> tuple[list[dict], list[dict]]:
    """(stored before, the batch): every kind of decision, and every way an item of a batch
    depends on the items before it. Fewer than 20 memories per scope, so that the scope's most
    recent memories (keyword candidates) are the same whether the batch is one call or many."""
    u = lambda *p: unit(*p).tolist()  # noqa: E731
    before = [
        {"content": "Maya is allergic to peanuts", "category": "fact", "embedding": u((0, 1.0)), "session_id": "s1"},
        {"content": "The team meets every Monday at 9", "category": "context", "embedding": u((1, 1.0))},
        {"content": "Ola likes hiking in the fjords", "category": "preference", "user_id": "ola",
         "embedding": u((2, 1.0))},
        {"content": "Release 4.2 shipped on Friday", "event_key": "ev-old"},
    ]
    batch = [
        {"content": "Tom is vegetarian", "category": "fact", "embedding": u((10, 1.0)), "session_id": "s1"},  # 1 new
        {"content": "  tom IS vegetarian ", "category": "fact"},                      # 2 exact dup of item 1
        {"content": "Tom is a vegetarian", "category": "fact",                       # 3 near item 1 by vector
         "embedding": u((10, 0.995), (11, math.sqrt(1 - 0.995 ** 2)))},
        {"content": "maya is allergic to peanuts"},                                    # 4 dup of a stored memory
        {"content": "The team meets every Monday at 10", "category": "context",        # 5 near stored, new number
         "embedding": u((1, 0.99), (12, math.sqrt(1 - 0.99 ** 2)))},
        {"content": "Release 4.2 shipped on Friday again", "event_key": "ev-old"},     # 6 replay of stored
        {"content": "A brand new fact about the garden", "event_key": "ev-new", "session_id": "s1",
         "embedding": u((20, 1.0)), "category": "fact"},                              # 7 new, session s1
        {"content": "Something else entirely", "event_key": "ev-new"},                 # 8 replay of item 7
        {"content": "Tom is vegetarian", "category": "fact", "user_id": "ola"},        # 9 other scope: new
        {"content": "Ola likes hiking in the fjords a lot", "category": "preference",  # 10 near stored in scope ola
         "user_id": "ola", "embedding": u((2, 0.999), (13, math.sqrt(1 - 0.999 ** 2)))},
        {"content": "Ola likes hiking in the fjords a lot!", "category": "preference",  # 11 forced copy of 10
         "user_id": "ola", "force": True, "embedding": u((2, 0.999), (13, math.sqrt(1 - 0.999 ** 2)))},
        {"content": "lunch menu kale salad soup bread", "session_id": "s1"},         # 12 text only, new
        {"content": "Lunch menu: kale, salad, soup, bread."},                         # 13 text only, same words as 12
        {"content": "Garden notes: tomatoes need water", "category": "fact", "session_id": "s1",
         "embedding": u((20, 0.6), (21, 0.8)), "valence": 0.9, "arousal": 0.4},    # 14 new, session s1
        {"content": "  tom IS vegetarian ", "category": "fact", "force": True},       # 15 forced dup of item 1
    ]
    return before, batch


def _one_by_one(conn, items) -> list[dict]:
    """remember() once per item, each call its own transaction."""
    out = []
    for it in items:
        kw = {k: v for k, v in it.items() if k != "content"}
        if "embedding" in kw:
            kw["embedding"] = np.asarray(kw["embedding"], dtype=np.float32)
        out.append(remember(conn, it["content"], **kw))
    return out


def _state(conn) -> dict:
    cur = conn.cursor(row_factory=dict_row)
    mems = cur.execute(
        "select id, content, user_id, session_id, seq, category, event_key, embedding is not null as has_embedding, "
        "gate->>'decision' as decision, gate->>'forced' as forced, gate->>'kept_because' as kept_because, "
        "gate->>'nearest_id' as nearest_id from pgmem.memories order by id").fetchall()
    nums = cur.execute("select id, importance, salience, surprise from pgmem.memories order by id").fetchall()
    links = cur.execute("select src_id, dst_id, kind from pgmem.links order by 1, 2").fetchall()
    hist = cur.execute("select memory_id, op, after->>'content' as content, details->>'decision' as decision "
                       "from pgmem.history where op in ('duplicate', 'reject') order by memory_id, op, 3").fetchall()
    queued = [r[0] for r in conn.execute("select memory_id from pgmem.embedding_queue order by 1")]
    return {"memories": mems, "numbers": nums, "links": links, "history": hist, "queued": queued}


def test_remember_many_decides_as_one_remember_per_item(fresh_db):
    """The set-based batch (one neighbour query, one INSERT, one history statement) makes the
    decisions of one remember() call per item, in order: duplicates, near-duplicates, replays
    and session order of earlier items of the same batch included."""
    before, batch = _mixed_batch()
    with connect(fresh_db()) as a, connect(fresh_db()) as b:
        for c in (a, b):
            _one_by_one(c, before)
        got = a.cursor(row_factory=dict_row).execute("select * from pgmem.remember_many(%s)", (Jsonb(batch),)).fetchall()
        want = _one_by_one(b, batch)
        assert [r["decision"] for r in got] == [
            "stored", "duplicate", "rejected", "duplicate", "stored", "replayed", "stored", "replayed", "stored",
            "rejected", "stored", "stored", "rejected", "stored", "stored"]
        assert [r["decision"] for r in want] == [r["decision"] for r in got]
        for g, w in zip(got, want):
            assert (g["memory_id"], g["nearest_id"]) == (w["memory_id"], w["nearest_id"]), (g, w)
            for k in ("surprise", "importance", "salience", "nearest_similarity"):
                assert g[k] == pytest.approx(w[k], abs=1e-6), (k, g, w)
            assert set(g["details"]) == set(w["details"]), (g["details"], w["details"])
            for k, v in w["details"].items():
                if isinstance(v, float):
                    assert g["details"][k] == pytest.approx(v, abs=1e-6), k
                else:
                    assert g["details"][k] == v, (k, g["details"][k], v)
        sa, sb = _state(a), _state(b)
        for k in ("memories", "links", "history", "queued"):
            assert sa[k] == sb[k], k
        for x, y in zip(sa["numbers"], sb["numbers"]):
            assert x["id"] == y["id"] and x == pytest.approx(y, abs=1e-6)
        # what the batch found: spot checks of the cases of _mixed_batch
        ids = [r["memory_id"] for r in got]
        assert ids[1] == ids[0] and ids[14] != ids[0]                       # in-batch duplicate; forced copy stored
        assert got[2]["nearest_id"] == ids[0] and got[2]["surprise"] < 0.15  # near item 1 of the same batch
        assert got[7]["memory_id"] == ids[6]                                # event_key of item 7
        assert "kept_because" in got[4]["details"] and got[4]["details"]["kept_because"] == "new numbers: 10"
        assert got[12]["nearest_id"] == ids[11] and got[12]["details"]["keyword_novelty"] == 0
        assert got[10]["details"]["forced"] is True
        seqs = {m["content"]: m["seq"] for m in sa["memories"] if m["session_id"] == "s1"}
        assert seqs == {"Maya is allergic to peanuts": 1, "Tom is vegetarian": 2, "A brand new fact about the garden": 3,
                        "lunch menu kale salad soup bread": 4, "Garden notes: tomatoes need water": 5}


def test_remember_many_rejects_unknown_key(conn):
    m0, h0 = counts(conn)
    items = [{"content": "first"}, {"content": "second"}, {"content": "third", "colour": "red"}]
    with pytest.raises(psycopg.errors.InvalidParameterValue) as ei:
        conn.execute("select * from pgmem.remember_many(%s)", (Jsonb(items),))
    assert ei.value.diag.message_primary == 'item 3 of remember_many has an unknown key "colour"'
    assert "known keys: content, embedding" in ei.value.diag.message_hint
    assert counts(conn) == (m0, h0)  # the whole call rolled back


@pytest.mark.parametrize("payload", [{"content": "x"}, "just text", 42])
def test_remember_many_rejects_non_array(conn, payload):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="remember_many expects a JSON array of objects"):
        conn.execute("select * from pgmem.remember_many(%s)", (Jsonb(payload),))
    assert counts(conn) == (0, 0)


def test_remember_many_rejects_non_object_item(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="item 2 of remember_many is string, not an object"):
        conn.execute("select * from pgmem.remember_many(%s)", (Jsonb([{"content": "a"}, "b"]),))
    assert counts(conn) == (0, 0)


# ---------------------------------------------------------------------------- validation
@pytest.fixture
def seeded(conn):
    """conn with one memory stored, so 'counts did not change' is meaningful."""
    remember(conn, "Seed memory about kittens")
    return conn


def _fails(conn, exc, fn, *match):
    before = counts(conn)
    with pytest.raises(exc) as ei:
        fn()
    for m in match:
        assert m in str(ei.value), (m, str(ei.value))
    assert counts(conn) == before
    return ei.value


@pytest.mark.parametrize("content", ["", "    "])
def test_empty_content_rejected(seeded, content):
    e = _fails(seeded, psycopg.errors.InvalidParameterValue, lambda: remember(seeded, content))
    assert e.diag.message_primary == "content is empty: a memory needs some text"
    assert e.diag.message_hint == "pass the event text as content"


@pytest.mark.parametrize("content", ["\n", " \t \n ", "\r\n\r\n"])
def test_whitespace_only_content_rejected(seeded, content):
    # newlines and tabs are whitespace too (btrim alone strips only spaces)
    e = _fails(seeded, psycopg.errors.InvalidParameterValue, lambda: remember(seeded, content))
    assert e.diag.message_primary == "content is empty: a memory needs some text"
    e = _fails(seeded, psycopg.errors.InvalidParameterValue,
               lambda: seeded.execute("insert into pgmem.memories (content) values (%s)", (content,)))
    assert e.diag.message_primary == "content is empty: a memory needs some text"


def test_unknown_category_rejected(seeded):
    e = _fails(seeded, psycopg.errors.InvalidParameterValue, lambda: remember(seeded, "x y z", category="hobby"))
    assert e.diag.message_primary == \
        'unknown category "hobby": known categories are answer, context, episode, fact, preference, question, skill'
    assert e.diag.message_hint == \
        "add it with: insert into pgmem.categories (tenant, category, weight) values ('acme', 'hobby', 0.6)"
    # doing what the hint says makes it work, with the weight it was given
    seeded.execute(e.diag.message_hint.removeprefix("add it with: "))
    r = remember(seeded, "Plays the cello on weekends", category="hobby")
    assert r["decision"] == "stored"
    assert r["importance"] == pytest.approx(r["surprise"] * 0.6, abs=1e-6)


def test_tenant_category_weight_overrides_default(seeded):
    seeded.execute("insert into pgmem.categories (tenant, category, weight) values ('acme', 'fact', 0.4)")
    r = remember(seeded, "Mount Everest is 8849 metres high", category="fact")
    assert r["details"]["category_weight"] == pytest.approx(0.4)
    assert r["importance"] == pytest.approx(r["surprise"] * 0.4, abs=1e-6)


def test_wrong_vector_dimension_rejected(seeded):
    e = _fails(seeded, psycopg.errors.InvalidParameterValue,
               lambda: remember(seeded, "short vector", embedding=np.array([1, 2, 3], dtype=np.float32)))
    assert e.diag.message_primary == "embedding has 3 dimensions, but this pgmem installation stores 384"
    assert "embedding_dim" in e.diag.message_hint


def test_zero_vector_rejected(seeded):
    e = _fails(seeded, psycopg.errors.InvalidParameterValue,
               lambda: remember(seeded, "zero vector", embedding=np.zeros(DIM, dtype=np.float32)))
    assert e.diag.message_primary == "embedding is all zeros: cosine similarity is undefined for it"
    assert "pass NULL" in e.diag.message_hint


def test_nan_vector_rejected(seeded):
    v = VEC_C.copy()
    v[5] = np.nan
    e = _fails(seeded, psycopg.Error, lambda: remember(seeded, "nan vector", embedding=v))
    # pgvector refuses NaN on input; pgmem's own check would say "contains NaN or infinite values"
    assert "nan" in str(e).lower()
    assert isinstance(e, (psycopg.errors.DataException, psycopg.errors.InvalidParameterValue))


def test_importance_out_of_range(seeded):
    e = _fails(seeded, psycopg.errors.InvalidParameterValue, lambda: remember(seeded, "important", importance=1.5))
    assert e.diag.message_primary == "importance must be between 0 and 1, got 1.5"


def test_valence_out_of_range(seeded):
    e = _fails(seeded, psycopg.errors.InvalidParameterValue, lambda: remember(seeded, "sad", valence=-0.1))
    # the value is a real: the message shows its float8 image (-0.10000000149011612)
    assert e.diag.message_primary.startswith("valence must be between 0 and 1, got -0.1")


def test_created_at_in_future_rejected(seeded):
    e = _fails(seeded, psycopg.errors.InvalidParameterValue,
               lambda: remember(seeded, "from the future", created_at=Expr("now() + interval '1 day'")))
    assert e.diag.message_primary.startswith("created_at ")
    assert e.diag.message_primary.endswith(" is in the future")
    assert "happened_at" in e.diag.message_hint


def test_created_at_slightly_ahead_is_tolerated(seeded):
    r = remember(seeded, "clock skew of a minute", created_at=Expr("now() + interval '1 minute'"))
    assert r["decision"] == "stored"


def test_happened_at_year_3000_rejected(seeded):
    e = _fails(seeded, psycopg.errors.InvalidParameterValue,
               lambda: remember(seeded, "far future", happened_at="3000-01-01T00:00:00Z"))
    assert e.diag.message_primary.startswith("happened_at (when) 3000-01-01")
    assert e.diag.message_primary.endswith("is out of range (1900 .. now + 200 years)")


def test_happened_at_in_near_future_allowed(seeded):
    r = remember(seeded, "Dentist appointment next week", happened_at=Expr("now() + interval '7 days'"))
    assert r["decision"] == "stored"


def test_metadata_must_be_object(seeded):
    e = _fails(seeded, psycopg.errors.InvalidParameterValue,
               lambda: remember(seeded, "meta", metadata=[1, 2]))
    assert e.diag.message_primary == "metadata must be a JSON object, got array"


def test_no_tenant(dsn, conn):
    remember(conn, "Seed memory about kittens")
    before = counts(conn)
    with connect(dsn, tenant=None) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as ei:
            remember(c, "who am I")
        e = ei.value
        assert e.diag.message_primary.startswith("pgmem.tenant is not set")
        assert e.diag.message_hint.startswith("run SET pgmem.tenant = 'your_tenant' first")
        # a plain INSERT is refused the same way by the trigger
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="pgmem.tenant is not set"):
            c.execute("insert into pgmem.memories (content) values ('no tenant insert')")
    assert counts(conn) == before


def test_enforced_tenants(dsn, conn):
    remember(conn, "Seed memory about kittens")
    conn.execute("update pgmem.settings set value = 'true' where tenant = '*' and key = 'enforce_tenants'")
    e = _fails(conn, psycopg.errors.InvalidParameterValue, lambda: remember(conn, "not registered yet"))
    assert e.diag.message_primary == 'unknown tenant "acme": tenants are enforced and "acme" is not registered'
    assert e.diag.message_hint == "an admin registers it with: insert into pgmem.tenants (tenant) values ('acme')"
    _fails(conn, psycopg.errors.InvalidParameterValue,
           lambda: conn.execute("insert into pgmem.memories (content) values ('plain insert')"), "unknown tenant")
    conn.execute("insert into pgmem.tenants (tenant) values ('acme')")
    assert remember(conn, "registered now")["decision"] == "stored"
    with connect(dsn, tenant="other") as o:
        _fails(conn, psycopg.errors.InvalidParameterValue, lambda: remember(o, "still unknown"), 'unknown tenant "other"')


# ---------------------------------------------------------------------------- plain INSERT
def test_plain_insert_without_embedding(conn):
    text = "The deploy pipeline runs on GitHub Actions with three parallel stages"
    mid = scalar(conn, "insert into pgmem.memories (content, who) values (%s, 'ops') returning id", (text,))
    m = conn.cursor(row_factory=dict_row).execute("select * from pgmem.memories where id = %s", (mid,)).fetchone()
    assert m["tenant"] == "acme"
    assert m["token_count"] == max(math.ceil(len(text) / 4), len(text.split())) == 18
    assert m["embedding"] is None and m["embedded_at"] is None
    assert m["state"] == "active" and m["category"] == "episode"
    assert m["created_at"] == m["updated_at"]
    q = conn.execute("select tenant, attempts from pgmem.embedding_queue where memory_id = %s", (mid,)).fetchall()
    assert q == [("acme", 0)]
    found = conn.execute("select id from pgmem.memories where tsv @@ websearch_to_tsquery('english', %s)",
                         ("deploy pipeline",)).fetchall()
    assert found == [(mid,)]
    assert conn.execute("select id from pgmem.memories where tsv @@ websearch_to_tsquery('english', %s)",
                        ("deploy -github",)).fetchall() == []
    h = conn.cursor(row_factory=dict_row).execute("select * from pgmem.history(%s)", (mid,)).fetchall()
    assert [x["op"] for x in h] == ["add"]
    assert h[0]["before"] is None
    assert h[0]["after"]["content"] == text
    assert h[0]["after"]["has_embedding"] is False
    assert "embedding" not in h[0]["after"] and "tsv" not in h[0]["after"]


def test_plain_insert_keeps_given_token_count_and_words_floor(conn):
    mid = scalar(conn, "insert into pgmem.memories (content, token_count) values ('short text', 7) returning id")
    assert scalar(conn, "select token_count from pgmem.memories where id = %s", (mid,)) == 7
    # many one-letter words: the word count wins over chars/4
    text = "a b c d e f g h i j"
    mid = scalar(conn, "insert into pgmem.memories (content) values (%s) returning id", (text,))
    assert scalar(conn, "select token_count from pgmem.memories where id = %s", (mid,)) == 10


def test_plain_insert_with_embedding_is_not_queued(conn):
    mid = scalar(conn, "insert into pgmem.memories (content, embedding, embedding_model) values ('with vec', %s, 'm') "
                       "returning id", (VEC_C,))
    assert scalar(conn, "select count(*) from pgmem.embedding_queue where memory_id = %s", (mid,)) == 0
    assert scalar(conn, "select embedded_at is not null and embedding_model = 'm' from pgmem.memories where id = %s", (mid,))


def test_plain_insert_is_validated_by_trigger(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown category "nope"'):
        conn.execute("insert into pgmem.memories (content, category) values ('x', 'nope')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="all zeros"):
        conn.execute("insert into pgmem.memories (content, embedding) values ('x', %s)", (np.zeros(DIM, dtype=np.float32),))
    assert counts(conn) == (0, 0)
