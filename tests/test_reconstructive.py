"""Bindings, reconstruction and certainty (fragment-reconstructive-memory.md: Fragment
bindings, Reconstruction Pipeline, Variance and Certainty, Content Domains).

Vectors are unit vectors on chosen axes (conftest.e, at_cos), so every cosine is known.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from conftest import at_cos, e
from sqlhelpers import call, rows

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=timezone.utc)
AS_OF = T0 + timedelta(days=3)


def remember(conn, content, **kw) -> int:
    kw.setdefault("force", True)
    r = call(conn, "remember", content, **kw)[0]
    assert r["decision"] == "stored", (content, r)
    return r["memory_id"]


def links(conn, kind=None) -> dict[tuple[int, int, str], dict]:
    return {(r["src_id"], r["dst_id"], r["kind"]): r
            for r in rows(conn, "select * from pgmem.links where %s::text is null or kind = %s", (kind, kind))}


def work(conn) -> list[dict]:
    return rows(conn, "select * from pgmem.work(1000)")


def reconstruct(conn, **kw) -> dict:
    return call(conn, "reconstruct", **kw)[0]["reconstruct"]


# ------------------------------------------------------------------ bindings
def test_write_paths_queue_encode_items_and_work_writes_semantic_bindings(conn):
    a = remember(conn, "the red kite flew over the hill", embedding=e(1))
    b = remember(conn, "a kite of red silk above the hills", embedding=at_cos(1, 2, 0.9))
    c = remember(conn, "kites are sold at the market", embedding=at_cos(1, 3, 0.5))
    d = remember(conn, "the tax office opens at nine", embedding=e(4))
    q = conn.execute("select tenant, priority, task, memory_ids from pgmem.work_queue order by id").fetchall()
    assert q == [("acme", 1, "bind", [a]), ("acme", 1, "bind", [b]), ("acme", 1, "bind", [c]), ("acme", 1, "bind", [d])]
    # a plain INSERT with embeddings is queued as well, one item per statement (per 1,000 ids)
    conn.execute("insert into pgmem.memories (content, embedding) values ('x one', %s), ('x two', %s)", (e(7), e(8)))
    assert conn.execute("select memory_ids from pgmem.work_queue order by id desc limit 1").fetchone()[0] == \
        [r[0] for r in conn.execute("select id from pgmem.memories where content like 'x %' order by id")]
    done = work(conn)
    assert [(w["task"], w["status"]) for w in done] == [("bind", "ok")]  # the five items in one set-based pass
    sem = links(conn, "semantic")
    # threshold .55 (setting semantic_binding): cos(a, b) = .9 binds, cos(a, c) = .5 does not
    assert set(sem) == {(a, b, "semantic")}
    assert sem[(a, b, "semantic")]["weight"] == pytest.approx(0.9, abs=1e-6)
    assert conn.execute("select count(*) from pgmem.work_queue").fetchone()[0] == 0
    # a memory embedded later (the worker) is queued when its embedding arrives
    late = remember(conn, "kite festival on the hill next week")
    assert conn.execute("select count(*) from pgmem.work_queue").fetchone()[0] == 0
    conn.execute("select pgmem.complete_embedding(%s, %s::vector)", (late, at_cos(1, 5, 0.8)))
    assert conn.execute("select memory_ids from pgmem.work_queue").fetchall() == [([late],)]
    work(conn)
    assert (a, late, "semantic") in links(conn, "semantic")


def test_causal_bindings_from_cue_phrases_between_turns(conn):
    turns = [
        ("I lost my job last month.", None),
        ("So I started freelancing as a designer.", ("forward", "so")),
        ("Why did you move to Lisbon?", None),
        ("Because the rent in London was too high.", ("backward", "because")),
        ("So, how was the trip?", None),                       # a question: "so" is a discourse marker
        ("Well, that’s why I left the band.", ("forward", "that's why")),  # interjection, curly apostrophe
        ("Sorry about the noise yesterday.", None),             # "so" must be a whole word
        ("Due to the storm the ferry was cancelled.", ("backward", "due to")),
    ]
    ids = [remember(conn, t, session_id="s1", created_at=T0 + timedelta(minutes=i), embedding=e(10 + i))
           for i, (t, _) in enumerate(turns)]
    work(conn)
    causal = links(conn, "causal")
    want = {}
    for i, (_, cue) in enumerate(turns):
        if cue:
            cause, effect = (ids[i - 1], ids[i]) if cue[0] == "forward" else (ids[i], ids[i - 1])
            want[(cause, effect, "causal")] = cue[1]
    assert {k: v["metadata"]["cue"] for k, v in causal.items()} == want
    for (cause, effect, _), row in causal.items():
        assert row["metadata"]["cause"] == cause and row["metadata"]["effect"] == effect
    # remember wrote the temporal chain of the session
    assert set(links(conn, "temporal")) == {(ids[i], ids[i + 1], "temporal") for i in range(len(ids) - 1)}


def test_concept_bindings_share_entities_and_skip_hubs(conn):
    conn.execute("""insert into pgmem.settings (tenant, key, value) values ('acme', 'concept_binding', '{"neighbours": 10, "max_df": 3}')""")
    m1 = remember(conn, "Alice met Bob in Porto", entities=["Alice", "Bob", "Porto", "Caroline"], embedding=e(1))
    m2 = remember(conn, "Bob flew to Porto", entities=["Bob", "Porto", "Caroline"], embedding=e(2))
    m3 = remember(conn, "Alice paints", entities=["Alice", "Caroline"], embedding=e(3))
    m4 = remember(conn, "Dan cooks", entities=["Dan", "Caroline"], embedding=e(4))  # Caroline: 4 memories > max_df 3
    work(conn)
    con = {(s, d): r["weight"] for (s, d, _), r in links(conn, "concept").items()}
    jac = lambda x, y: len(set(x) & set(y)) / len(set(x) | set(y))  # noqa: E731
    assert con == pytest.approx({
        (m1, m2): jac(["Alice", "Bob", "Porto", "Caroline"], ["Bob", "Porto", "Caroline"]),  # 3/4
        (m1, m3): jac(["Alice", "Bob", "Porto", "Caroline"], ["Alice", "Caroline"]),          # 2/4
    })
    assert all(m4 not in k for k in con)  # it shares only the hub


def test_supersedes_bindings_for_restated_facts_with_other_numbers(conn):
    old = remember(conn, "My monthly budget for rent and food is 500 euros", category="fact", embedding=e(1),
                   created_at=T0, force=False)
    new = remember(conn, "My monthly budget for rent and food is 800 euros", category="fact", embedding=at_cos(1, 2, 0.99),
                   created_at=T0 + timedelta(days=1), force=False)
    # two episodes with other numbers are two events, not a correction
    ep1 = remember(conn, "I ran 5 km this morning", embedding=e(5), created_at=T0)
    ep2 = remember(conn, "I ran 10 km this morning", embedding=at_cos(5, 6, 0.99), created_at=T0 + timedelta(days=1))
    gate = conn.execute("select gate from pgmem.memories where id = %s", (new,)).fetchone()[0]
    assert gate["kept_because"] == "new numbers: 800" and gate["nearest_id"] == old
    work(conn)
    sup = links(conn, "supersedes")
    assert set(sup) == {(new, old, "supersedes")}
    assert sup[(new, old, "supersedes")]["metadata"]["reason"] == "surprise gate: new numbers: 800"
    assert (ep1, ep2, "semantic") in links(conn, "semantic")


def test_refresh_bindings_covers_plain_inserts_and_bind_by_hand(conn):
    rows = conn.execute("""insert into pgmem.memories (content, session_id, created_at)
                           select 'turn ' || g, 'chat', %s::timestamptz + g * interval '1 minute' from generate_series(1, 3) g
                           returning id""", (T0,)).fetchall()
    ids = [r[0] for r in rows]
    assert links(conn) == {}  # no embedding: nothing queued, no temporal link without remember
    got = dict(conn.execute("select * from pgmem.refresh_bindings(%s::bigint[])", (ids,)).fetchall())
    assert got == {"temporal": 2, "semantic": 0, "causal": 0, "concept": 0, "supersedes": 0}
    assert set(links(conn)) == {(ids[0], ids[1], "temporal"), (ids[1], ids[2], "temporal")}
    r = conn.cursor(row_factory=dict_row).execute(
        """select * from pgmem.bind(%s, %s, 'causal', 0.7, '{"why": "told by the user"}')""", (ids[2], ids[0])).fetchone()
    assert (r["kind"], r["weight"], r["metadata"]) == ("causal", pytest.approx(0.7), {"why": "told by the user", "method": "bind"})
    graph = conn.execute("select memory_id, other_id, kind, direction from pgmem.binding_graph where memory_id = %s order by kind",
                         (ids[0],)).fetchall()
    assert graph == [(ids[0], ids[2], "causal", "in"), (ids[0], ids[1], "temporal", "out")]
    for sql, msg in ((f"select pgmem.bind({ids[0]}, {ids[0]}, 'causal')", "cannot be bound to itself"),
                     (f"select pgmem.bind({ids[0]}, 999999, 'causal')", "no memory 999999 of this tenant"),
                     (f"select pgmem.bind({ids[0]}, {ids[1]}, 'co_access')", "not \"co_access\""),
                     (f"select pgmem.bind({ids[0]}, {ids[1]}, 'causal', 1.5)", "between 0 and 1"),
                     ("select * from pgmem.refresh_bindings(array[1], array['merged'])", "not refreshed"),
                     ("select * from pgmem.refresh_bindings(null)", "needs an array")):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=msg):
            conn.execute(sql)


# ------------------------------------------------------------------ certainty
def variance_by_hand(recs: list[list[int]]) -> float:
    """The variance of the reconstructions' membership vectors: Σ over memories of p(1 - p)."""
    ids = sorted({i for r in recs for i in r})
    x = np.array([[1.0 if i in r else 0.0 for i in ids] for r in recs])
    return float(np.var(x, axis=0).sum())


@pytest.mark.parametrize("recs", [
    [[1, 2, 3], [1, 2, 3]],
    [[1, 2, 3], [1, 2, 4]],
    [[1, 2, 3], [4, 5, 6]],
    [[1, 2, 3], [1, 2, 4], [1, 5, 3], [1, 2, 3]],
    [[7], [7, 8], [], [8]],
])
def test_certainty_from_given_reconstructions(conn, recs):
    want = 1.0 / (1.0 + variance_by_hand(recs))
    got = conn.execute("select pgmem.certainty(%s)", (Jsonb(recs),)).fetchone()[0]
    assert got == pytest.approx(want, rel=1e-12)


def test_certainty_with_fewer_than_two_and_bad_input(conn):
    assert conn.execute("select pgmem.certainty('[]'), pgmem.certainty('[[1, 2]]')").fetchone() == (0.5, 0.5)
    # by hand: one swap out of three -> p = 1, 1, .5, .5 -> variance .5 -> certainty 2/3
    assert conn.execute("select pgmem.certainty('[[1, 2, 3], [1, 2, 4]]')").fetchone()[0] == pytest.approx(2 / 3)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="each an array of memory ids"):
        conn.execute("""select pgmem.certainty('[1, 2]')""")
    comment = conn.execute("select obj_description('pgmem.reconstruct'::regproc, 'pg_proc')").fetchone()[0]
    assert "Certainty is not truth, just stability" in comment


# ------------------------------------------------------------------ reconstruction
@pytest.fixture
def story(conn):
    """Two sessions; seeds by cosine to e(1); bindings written by the work queue."""
    s = {}
    s["trip"] = remember(conn, "We planned a trip to Kyoto in April", who="maya", session_id="s1", embedding=e(1),
                         created_at=T0)
    s["tickets"] = remember(conn, "So we booked the flight tickets", who="maya", session_id="s1", embedding=e(2),
                            created_at=T0 + timedelta(minutes=1))
    s["hotel"] = remember(conn, "The hotel near the station was full", who="tom", session_id="s1", embedding=e(3),
                          created_at=T0 + timedelta(minutes=2))
    s["temple"] = remember(conn, "Maya wants to see the Kyoto temples", who="tom", session_id="s2",
                           embedding=at_cos(1, 4, 0.8), created_at=T0 + timedelta(days=1))
    s["garden"] = remember(conn, "The garden was quiet", who="tom", session_id="s2", embedding=e(5),
                           created_at=T0 + timedelta(days=1, minutes=1))
    s["tax"] = remember(conn, "The tax office needs a form", who="tom", session_id="s3", embedding=e(9),
                        created_at=T0 + timedelta(days=2))
    work(conn)
    return s


def strength(conn, mid: int) -> float:
    sal, created = conn.execute("select salience, created_at from pgmem.memories where id = %s", (mid,)).fetchone()
    hours = (AS_OF - created).total_seconds() / 3600
    return sal / (1 + math.sqrt(hours))


def test_reconstruct_scores_seeds_spread_and_assembles_a_strand(conn, story):
    s = story
    r = reconstruct(conn, query_embedding=e(1), k=4, seeds=2, noise=0.05, seed=7, as_of=AS_OF, log=False)
    assert r["seeds"] == [s["trip"], s["temple"]]  # cos 1 and .8 to the query
    members = {m["id"]: m for m in r["members"]}
    # activation: seeds 1.0; through the temporal chain .5, .25 (the story's links are all weight 1)
    acts = {m["id"]: m["activation"] for m in r["members"]}
    assert acts[s["trip"]] == 1 and acts[s["temple"]] == 1
    # candidates: seeds, their neighbours in the session (temporal), and what the semantic binding
    # of trip-temple (cos .8) and the causal "So we booked" add; the tax memory is not reached
    assert s["tax"] not in members
    assert r["candidates"] == 5
    # score = activation × strength + noise; noise = σ z, σ = .05 × the best activation × strength
    bases = {}
    for mid in (s["trip"], s["tickets"], s["hotel"], s["temple"], s["garden"]):
        act = conn.execute("select activation from pgmem.spread(%s::bigint[]) where memory_id = %s",
                           ([s["trip"], s["temple"]], mid)).fetchone()[0]
        bases[mid] = act * strength(conn, mid)
    sigma = 0.05 * max(bases.values())
    for m in r["members"]:
        z = conn.execute("select pgmem._gaussian(7, %s)", (m["id"],)).fetchone()[0]
        assert m["strength"] == pytest.approx(strength(conn, m["id"]), abs=2e-6)
        assert m["noise"] == pytest.approx(sigma * z, abs=2e-6)
        assert m["score"] == pytest.approx(bases[m["id"]] + sigma * z, abs=4e-6)
    # top k by score; the strand in event time order
    ranked = sorted(bases, key=lambda i: -(bases[i] + sigma * conn.execute("select pgmem._gaussian(7, %s)", (i,)).fetchone()[0]))
    assert set(members) == set(ranked[:4])
    times = [m["event_time"] for m in r["members"]]
    assert times == sorted(times) and [m["position"] for m in r["members"]] == [1, 2, 3, 4]
    # why each member is there
    assert members[s["trip"]]["why"] == {"seed": True, "search_rank": 1, "search_score": pytest.approx(members[s["trip"]]["why"]["search_score"])}
    for m in r["members"]:
        if not m["why"]["seed"]:
            assert m["why"]["path"][0] in (s["trip"], s["temple"]) and m["why"]["path"][-1] == m["id"]
            assert m["why"]["via"] in ("temporal", "semantic", "causal", "concept")
    assert r["text"].split("\n")[0].startswith("maya: We planned a trip")
    # seeded: the same call gives the same strand; another seed may not
    again = reconstruct(conn, query_embedding=e(1), k=4, seeds=2, noise=0.05, seed=7, as_of=AS_OF, log=False)
    assert again["members"] == r["members"]
    # the candidates are the most activated memories reached (here: the two seeds and the best at .5)
    small = reconstruct(conn, query_embedding=e(1), k=2, seeds=2, noise=0, candidates=3, as_of=AS_OF, log=False)
    assert small["candidates"] == 3 and {m["id"] for m in small["members"]} <= set(bases)


def test_reconstruct_temporal_consistency_suppresses_or_flags_superseded_memories(conn):
    old = remember(conn, "The team meeting is on Monday at 10", category="fact", embedding=e(1), created_at=T0, force=False)
    new = remember(conn, "The team meeting is on Monday at 14", category="fact", embedding=at_cos(1, 2, 0.99),
                   created_at=T0 + timedelta(hours=5), force=False)
    work(conn)
    r = reconstruct(conn, query_embedding=e(1), k=5, noise=0, as_of=AS_OF, log=False)
    assert [m["id"] for m in r["members"]] == [new]
    assert r["suppressed"] == [{"id": old, "score": pytest.approx(r["suppressed"][0]["score"]),
                                "content": "The team meeting is on Monday at 10", "reason": {"superseded_by": [new]}}]
    r = reconstruct(conn, query_embedding=e(1), k=5, noise=0, as_of=AS_OF, temporal="flag", log=False)
    flags = {m["id"]: m["flags"] for m in r["members"]}
    assert flags == {old: {"superseded_by": [new]}, new: {}}
    # before the newer memory existed (as_of), the older one is not superseded
    r = reconstruct(conn, query_embedding=e(1), k=5, noise=0, as_of=T0 + timedelta(hours=1), log=False)
    assert [m["id"] for m in r["members"]] == [old] and r["suppressed"] == []


def test_reconstruct_identity_consistency(conn):
    veg = remember(conn, "I have been vegetarian for ten years", embedding=e(1), created_at=T0)
    steak = remember(conn, "I ordered a steak at the grill", embedding=at_cos(1, 2, 0.9), created_at=T0 + timedelta(hours=1))
    conn.execute("select pgmem.identity_update_belief('diet', 'the user is vegetarian', 0.9, array[%s]::bigint[])", (veg,))
    conn.execute("select pgmem.identity_update_belief('diet', 'the user eats meat', 0.9, array[%s]::bigint[])", (steak,))
    held = conn.execute("select pgmem.identity()->'beliefs'").fetchone()[0]
    assert [(b["statement"], b["held"]) for b in held] == [("the user is vegetarian", True), ("the user eats meat", False)]
    r = reconstruct(conn, query_embedding=e(1), k=5, noise=0, as_of=AS_OF, log=False)
    flags = {m["id"]: m["flags"] for m in r["members"]}
    assert flags[veg] == {}
    assert flags[steak] == {"identity_conflict": {"belief": "diet", "statement": "the user eats meat",
                                                  "confidence": pytest.approx(0.36), "held": "the user is vegetarian",
                                                  "held_confidence": pytest.approx(0.54)}}
    r = reconstruct(conn, query_embedding=e(1), k=5, noise=0, as_of=AS_OF, identity="suppress", log=False)
    assert [m["id"] for m in r["members"]] == [veg] and [x["id"] for x in r["suppressed"]] == [steak]
    r = reconstruct(conn, query_embedding=e(1), k=5, noise=0, as_of=AS_OF, identity="off", log=False)
    assert all(m["flags"] == {} for m in r["members"])


def test_reconstruction_log_and_certainty(conn, story):
    q = dict(query_embedding=e(1), k=3, seeds=3, as_of=AS_OF)
    first = reconstruct(conn, noise=0, **q)
    assert (first["certainty"], first["reconstructions"]) == (0.5, 1)
    assert first["certainty_note"] == "certainty is not truth, just stability"
    second = reconstruct(conn, noise=0, **q)
    assert second["query_hash"] == first["query_hash"]
    assert (second["certainty"], second["reconstructions"]) == (1.0, 2)  # the same strand: no variance
    # noisy reconstructions of the same query: certainty = 1/(1 + variance) over the log
    for seed in range(6):
        reconstruct(conn, noise=3.0, seed=seed, **q)
    log = [r[0] for r in conn.execute("select member_ids from pgmem.reconstructions where query_hash = %s order by id",
                                      (first["query_hash"],))]
    assert len(log) == 8
    want = 1 / (1 + variance_by_hand(log))
    got = conn.execute("select pgmem.reconstruction_certainty(%s)", (first["query_hash"],)).fetchone()[0]
    assert got == pytest.approx(want)
    assert conn.execute("select certainty from pgmem.reconstructions order by id desc limit 1").fetchone()[0] == pytest.approx(want, rel=1e-6)
    # the window: the last 2 reconstructions only
    assert conn.execute("select pgmem.reconstruction_certainty(%s, 2)", (first["query_hash"],)).fetchone()[0] == \
        pytest.approx(1 / (1 + variance_by_hand(log[-2:])))
    # another k is another question
    other = reconstruct(conn, noise=0, **{**q, "k": 2})
    assert other["query_hash"] != first["query_hash"] and other["reconstructions"] == 1
    # the hash is of the question: text normalised, not the noise
    h1 = conn.execute("select pgmem.reconstruction_hash('Where  is Maya?', null, 3)").fetchone()[0]
    assert h1 == conn.execute("select pgmem.reconstruction_hash('where is maya?', null, 3)").fetchone()[0]


def test_reconstruct_filters_apply_to_spread_members(conn):
    a = remember(conn, "maya booked the ferry", user_id="maya", session_id="s", embedding=e(1), created_at=T0)
    b = remember(conn, "tom booked a hotel", user_id="tom", session_id="s", embedding=e(2), created_at=T0 + timedelta(minutes=1))
    work(conn)
    assert (a, b, "temporal") in links(conn)
    r = reconstruct(conn, query_embedding=e(1), k=5, noise=0, filters=Jsonb({"user_id": "maya"}), as_of=AS_OF, log=False)
    assert [m["id"] for m in r["members"]] == [a]
    r = reconstruct(conn, query_embedding=e(1), k=5, noise=0, as_of=AS_OF, log=False)
    assert {m["id"] for m in r["members"]} == {a, b}


@pytest.mark.parametrize("kw, message", [
    (dict(query_text="x", k=0), "k must be between 1 and 200"),
    (dict(query_text="x", noise=-1), "noise must be between 0 and 10"),
    (dict(query_text="x", temporal="hide"), "temporal and identity must be suppress, flag or off"),
    (dict(query_text="x", seed_levels="half"), "seed_levels must be one"),
    (dict(query_text="x", k=5, candidates=4), "candidates must be between 5 and 10000"),
    (dict(), "search needs a query_text, a query_embedding, or both"),
])
def test_reconstruct_bad_input(conn, kw, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        reconstruct(conn, **kw)


def test_reconstruct_empty_store(conn):
    r = reconstruct(conn, query_text="anything at all", log=False)
    assert (r["members"], r["suppressed"], r["certainty"], r["candidates"]) == ([], [], 0.5, 0)


# ------------------------------------------------------------------ content domains
def test_motor_and_sensory_content_is_stored_and_filterable(conn):
    grasp = remember(conn, "picked up the red mug", embedding=e(1), motor={"action": "grasp", "effector": "right hand"},
                     sensory={"visual": {"colour": "red"}, "touch": "warm"})
    look = remember(conn, "looked at the red mug", embedding=at_cos(1, 2, 0.9), sensory={"visual": {"colour": "red"}})
    remember(conn, "walked to the window", embedding=e(3), motor={"action": "walk"})
    row = conn.execute("select motor, sensory from pgmem.memories where id = %s", (grasp,)).fetchone()
    assert row == ({"action": "grasp", "effector": "right hand"}, {"visual": {"colour": "red"}, "touch": "warm"})
    hits = lambda f: [h[0] for h in conn.execute(  # noqa: E731
        "select id from pgmem.search('mug', %s::vector, k => 10, filters => %s) order by id", (e(1), Jsonb(f)))]
    assert hits({"motor": {"action": "grasp"}}) == [grasp]
    assert hits({"sensory": {"visual": {"colour": "red"}}}) == [grasp, look]
    r = reconstruct(conn, query_embedding=e(1), k=5, noise=0, filters=Jsonb({"motor": {"action": "grasp"}}), log=False)
    assert [m["id"] for m in r["members"]] == [grasp]
    # remember_many and update_memory take them too; a non-object is a clear error
    out = conn.execute("""select memory_id from pgmem.remember_many('[{"content": "pressed the button", "motor": {"action": "press"}, "force": true}]')""").fetchone()[0]
    assert conn.execute("select motor from pgmem.memories where id = %s", (out,)).fetchone()[0] == {"action": "press"}
    conn.execute("""select pgmem.update_memory(%s, '{"sensory": {"sound": "click"}}')""", (out,))
    assert conn.execute("select sensory from pgmem.memories where id = %s", (out,)).fetchone()[0] == {"sound": "click"}
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="motor and sensory content must be JSON objects"):
        remember(conn, "bad", motor=Jsonb([1, 2]))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='filter "motor" must be a JSON object'):
        hits({"motor": "grasp"})
    # history keeps them, and the client passes dicts through
    hist = conn.execute("select after->'motor' from pgmem.history where memory_id = %s and op = 'add'", (grasp,)).fetchone()[0]
    assert hist == {"action": "grasp", "effector": "right hand"}
    assert json.loads(json.dumps(hist)) == hist
