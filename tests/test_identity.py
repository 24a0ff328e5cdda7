"""Identity (fragment-reconstructive-memory.md, Identity Model) and goal relevance in salience
(Salience Formula: 0.25 × goal relevance).

Updates are EMAs whose rate is the inertia: new = inertia × old + (1 - inertia) × observed;
traits .9 (high), beliefs .6 (medium), goals .2 (low) by default. Every number below is
recomputed by hand.
"""
from __future__ import annotations

import time

import numpy as np
import psycopg
import pytest

from conftest import at_cos, e
from sqlhelpers import one, rows


def ema(old: float, observed: float, inertia: float) -> float:
    return inertia * old + (1 - inertia) * observed


def test_trait_inertia(conn):
    first = one(conn, "select * from pgmem.identity_update_trait('curiosity', 0.8)")
    assert (first["value"], first["inertia"], first["observations"]) == (0.8, pytest.approx(0.9), 1)
    want = 0.8
    for obs in (0.2, 0.2, 0.2, 1.0):
        want = ema(want, obs, 0.9)
        got = one(conn, "select * from pgmem.identity_update_trait('curiosity', %s)", (obs,))
        assert got["value"] == pytest.approx(want, rel=1e-9)
    assert want == pytest.approx(0.9 * (0.9 * (0.9 * (0.9 * 0.8 + 0.02) + 0.02) + 0.02) + 0.1)
    # three observations at .2 move a trait at .8 only to .6374: high inertia
    assert ema(ema(ema(0.8, 0.2, 0.9), 0.2, 0.9), 0.2, 0.9) == pytest.approx(0.6374)
    # an explicit inertia is used for this update and kept
    got = one(conn, "select * from pgmem.identity_update_trait('curiosity', 0.0, inertia => 0.5)")
    assert got["value"] == pytest.approx(0.5 * want) and got["inertia"] == pytest.approx(0.5)
    # a tenant's own default inertia (setting identity_inertia)
    conn.execute("""insert into pgmem.settings (tenant, key, value) values ('acme', 'identity_inertia', '{"trait": 0.99}')""")
    assert one(conn, "select * from pgmem.identity_update_trait('patience', 0.3)")["inertia"] == pytest.approx(0.99)
    for bad, msg in (("select pgmem.identity_update_trait('x', 1.5)", "observed must be between 0 and 1"),
                     ("select pgmem.identity_update_trait('x', null)", "a trait update needs a value"),
                     ("select pgmem.identity_update_trait(' ', 0.5)", "trait name is empty"),
                     ("select pgmem.identity_update_trait('x', 0.5, inertia => 2)", "inertia must be between 0 and 1")):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=msg):
            conn.execute(bad)


def test_beliefs_compete_with_medium_inertia(conn):
    m = [r[0] for r in conn.execute("insert into pgmem.memories (content) values ('saw her eat a salad'), "
                                    "('she ordered chicken'), ('she ordered chicken again') returning id")]

    def statements():
        return {r["statement"]: r for r in rows(conn, "select * from pgmem.identity_beliefs where key = 'diet'")}

    conn.execute("select * from pgmem.identity_update_belief('diet', 'vegetarian', 0.9, array[%s]::bigint[])", (m[0],))
    assert statements()["vegetarian"]["confidence"] == pytest.approx(0.9)  # the first statement of a key sets it
    # one contradicting observation: vegetarian .6 × .9 = .54, meat (1 - .6) × .9 = .36 -> still vegetarian
    got = rows(conn, "select * from pgmem.identity_update_belief('diet', 'eats meat', 0.9, array[%s]::bigint[])", (m[1],))
    assert [(r["statement"], round(r["confidence"], 6)) for r in got] == [("vegetarian", 0.54), ("eats meat", 0.36)]
    held = [b for b in conn.execute("select pgmem.identity()").fetchone()[0]["beliefs"] if b["held"]]
    assert [b["statement"] for b in held] == ["vegetarian"]
    # a second one overturns it: .6 × .54 = .324 against .6 × .36 + .4 × .9 = .576
    conn.execute("select * from pgmem.identity_update_belief('diet', 'eats meat', 0.9, array[%s]::bigint[])", (m[2],))
    s = statements()
    assert s["vegetarian"]["confidence"] == pytest.approx(0.324) and s["eats meat"]["confidence"] == pytest.approx(0.576)
    assert s["eats meat"]["evidence"] == sorted([m[1], m[2]]) and s["eats meat"]["observations"] == 2
    held = [b["statement"] for b in conn.execute("select pgmem.identity()").fetchone()[0]["beliefs"] if b["held"]]
    assert held == ["eats meat"]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="evidence 999999 is not a memory of this tenant"):
        conn.execute("select pgmem.identity_update_belief('diet', 'vegan', 0.5, array[999999]::bigint[])")


def test_goals_move_with_low_inertia_and_snapshots_keep_the_history(conn):
    g = one(conn, "select * from pgmem.identity_set_goal('trip', 'plan the Kyoto trip', %s::vector, 0.9)", (e(1),))
    assert (g["inertia"], g["priority"], g["state"]) == (pytest.approx(0.2), pytest.approx(0.9), "active")
    t_after_first = one(conn, "select clock_timestamp() as t")["t"]
    time.sleep(0.01)
    g = one(conn, "select * from pgmem.identity_set_goal('trip', 'plan the Osaka trip', %s::vector, 0.5)", (e(2),))
    # embedding: normalise(.2 e1 + .8 e2); priority .2 × .9 + .8 × .5 = .58; the text is the latest
    v = 0.2 * e(1) + 0.8 * e(2)
    v = v / np.linalg.norm(v)
    assert np.allclose(np.asarray(g["embedding"].to_numpy()), v, atol=1e-6)
    assert g["priority"] == pytest.approx(0.58) and g["goal"] == "plan the Osaka trip" and g["observations"] == 2
    conn.execute("select pgmem.identity_update_trait('curiosity', 0.7)")
    ended = one(conn, "select * from pgmem.identity_end_goal('trip', 'achieved')")
    assert ended["state"] == "achieved"
    # a snapshot after every change; identity_at reads the one in force at a time
    snaps = conn.execute("select reason from pgmem.identity_snapshots order by id").fetchall()
    assert [s[0] for s in snaps] == ["goal trip set: plan the Kyoto trip", "goal trip set: plan the Osaka trip",
                                     "trait curiosity observed at 0.7", "goal trip achieved"]
    then = conn.execute("select pgmem.identity_at(%s)", (t_after_first,)).fetchone()[0]
    assert [(x["goal"], x["state"]) for x in then["goals"]] == [("plan the Kyoto trip", "active")]
    assert then["traits"] == {}
    now = conn.execute("select pgmem.identity_at(now() + interval '1 minute')").fetchone()[0]
    assert now["goals"][0]["state"] == "achieved" and now["traits"]["curiosity"]["value"] == pytest.approx(0.7)
    before = conn.execute("select pgmem.identity_at('2000-01-01')").fetchone()[0]
    assert before["snapshot_id"] is None and before["goals"] == []
    sid = conn.execute("select pgmem.identity_snapshot('end of sprint')").fetchone()[0]
    assert conn.execute("select reason from pgmem.identity_snapshots where id = %s", (sid,)).fetchone()[0] == "end of sprint"
    # identities of two agents are apart
    conn.execute("select pgmem.identity_update_trait('curiosity', 0.1, agent_id => 'bot-2')")
    assert conn.execute("select pgmem.identity()->'traits'->'curiosity'->>'value'").fetchone()[0] == "0.7"
    assert conn.execute("select pgmem.identity('bot-2')->'traits'->'curiosity'->>'value'").fetchone()[0] == "0.1"
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='no goal "nope"'):
        conn.execute("select pgmem.identity_end_goal('nope')")


# ------------------------------------------------------------------ goal relevance in salience
def salience_by_hand(emotion, novelty, goal, depth):
    w = {"emotion": 0.35, "novelty": 0.30, "goal": 0.25, "depth": 0.10}
    parts = [(w["emotion"], emotion), (w["novelty"], novelty), (w["goal"], goal), (w["depth"], depth)]
    known = [(a, b) for a, b in parts if b is not None]
    return sum(a * b for a, b in known) / sum(a for a, _ in known)


def test_goal_relevance_enters_salience_at_write(conn):
    # no goals: goal relevance unknown, left out; the first memory's novelty is 1, depth 2/6 (who, what)
    r = one(conn, "select * from pgmem.remember('booked the ryokan in Kyoto', %s::vector, who => 'maya', what => 'booking')",
            (at_cos(1, 2, 0.6),))
    assert r["salience"] == pytest.approx(salience_by_hand(None, 1.0, None, 2 / 6), rel=1e-6)
    assert conn.execute("select pgmem.goal_relevance(%s::vector)", (e(1),)).fetchone()[0] is None
    conn.execute("select pgmem.identity_set_goal('trip', 'plan the Kyoto trip', %s::vector)", (e(1),))
    conn.execute("select pgmem.identity_set_goal('tax', 'file the tax return', %s::vector)", (e(5),))
    # with goals: max cosine to the active goals, cos(at_cos(1, 3, .8), e1) = .8
    assert conn.execute("select pgmem.goal_relevance(%s::vector)", (at_cos(1, 3, 0.8),)).fetchone()[0] == pytest.approx(0.8)
    r2 = one(conn, "select * from pgmem.remember('the temple tour starts at nine', %s::vector, who => 'maya', what => 'tour')",
             (at_cos(1, 3, 0.8),))
    nov = 1 - 0.8 * 0.6  # semantic novelty against the first memory: 1 - cos
    assert r2["salience"] == pytest.approx(salience_by_hand(None, nov, 0.8, 2 / 6), rel=1e-5)
    # an agent's own goals count for its memories, not for another agent's
    conn.execute("select pgmem.identity_set_goal('garden', 'grow tomatoes', %s::vector, agent_id => 'gardener')", (e(7),))
    assert conn.execute("select pgmem.goal_relevance(%s::vector, 'gardener')", (e(7),)).fetchone()[0] == pytest.approx(1.0)
    assert conn.execute("select pgmem.goal_relevance(%s::vector)", (e(7),)).fetchone()[0] == pytest.approx(0.0)


def test_salience_is_rescored_by_a_job_when_goals_change(conn):
    ids = [one(conn, "select * from pgmem.remember(%s, %s::vector, force => true)", (f"note {i} about the garden", v))["memory_id"]
           for i, v in enumerate([e(1), at_cos(1, 2, 0.5), e(3)])]
    before = dict(conn.execute("select id, salience from pgmem.memories"))
    gates = dict(conn.execute("select id, (gate->>'novelty')::float8 from pgmem.memories"))
    conn.execute("delete from pgmem.work_queue")  # the ENCODE items of the writes
    conn.execute("select pgmem.identity_set_goal('garden', 'grow tomatoes', %s::vector)", (e(1),))
    q = conn.execute("select priority, task, params->>'reason' from pgmem.work_queue").fetchall()
    assert q == [(2, "salience", "goal garden set")]  # REFLECT
    done = rows(conn, "select * from pgmem.work()")
    assert [(d["task"], d["status"], d["examined"], d["changed"]) for d in done] == [("salience", "ok", 3, 3)]
    after = dict(conn.execute("select id, salience from pgmem.memories"))
    for mid, rel in zip(ids, (1.0, 0.5, 0.0)):
        assert after[mid] == pytest.approx(salience_by_hand(None, gates[mid], rel, 0.0), rel=1e-5)
        assert after[mid] != pytest.approx(before[mid])
    h = conn.execute("select op, details->>'reason' from pgmem.history where memory_id = %s order by id desc limit 1",
                     (ids[0],)).fetchone()
    assert h == ("update", "goal garden set")
    # the goal is achieved: no active goal, the salience goes back to what it was at write
    conn.execute("select pgmem.identity_end_goal('garden')")
    conn.execute("select * from pgmem.work()")
    assert dict(conn.execute("select id, salience from pgmem.memories")) == pytest.approx(before)
    # by hand for one page of a tenant, with the public function
    r = one(conn, "select * from pgmem.rescore_salience(after_id => 0, batch => 2)")
    assert (r["examined"], r["changed"], r["last_id"]) == (2, 0, ids[1])


# ------------------------------------------------------------------ identity constrains reconstruction (issue 36, F18)
def test_reconstruction_checks_traits_goals_and_beliefs_and_can_reframe(conn):
    """fragment-reconstructive-memory.md, Identity Model: "Identity constrains reconstruction:
    memories inconsistent with core identity are suppressed or reframed." Traits, beliefs and
    goals each, the identity recomputed by hand (EMAs, inertia .9 / .6 / .2):
    * trait patience: observed .9 then .1 -> .9·.9 + .1·.1 = .82; a memory showing patience .1
      is .72 away (> tolerance .5): a conflict; one showing .6 (.22 away) is not;
    * belief diet: "vegetarian" .9, then "eats meat" .9 -> held "vegetarian" at .54 (.6·.9),
      "eats meat" .36 (.4·.9): the steak memory, evidence of the statement not held, conflicts;
    * goal lisbon (e(5)) dropped: a memory at cosine .9 of it (>= .8) and of no active goal conflicts;
      one at .7 does not.
    flag names each conflict, suppress leaves them out, reframe keeps them with the identity's words."""
    from datetime import datetime, timedelta, timezone

    from sqlhelpers import call

    T0 = datetime(2026, 5, 1, 9, 0, tzinfo=timezone.utc)

    def remember(content, vec, **kw):
        return call(conn, "remember", content, embedding=vec, force=True, created_at=T0, **kw)[0]["memory_id"]

    veg = remember("I have been vegetarian for ten years", e(1))
    steak = remember("I ordered a steak at the grill", at_cos(1, 2, 0.9))
    rude = remember("I snapped at the waiter for being slow", at_cos(1, 3, 0.85), metadata={"traits": {"patience": 0.1}})
    calm = remember("I waited for the table without a word", at_cos(1, 4, 0.85), metadata={"traits": {"patience": 0.6}})
    flat = remember("I looked at flats in Alfama", at_cos(1, 5, 0.8))
    conn.execute("select pgmem.identity_update_trait('patience', 0.9)")
    patience = one(conn, "select * from pgmem.identity_update_trait('patience', 0.1)")["value"]
    assert patience == pytest.approx(ema(0.9, 0.1, 0.9)) == pytest.approx(0.82)
    conn.execute("select pgmem.identity_update_belief('diet', 'the user is vegetarian', 0.9, array[%s]::bigint[])", (veg,))
    conn.execute("select pgmem.identity_update_belief('diet', 'the user eats meat', 0.9, array[%s]::bigint[])", (steak,))
    # the goal: e(5); flat's cosine to it: .8·0 + .6·1 = .6 (its e(5) part is sqrt(1 - .8²) = .6): no conflict yet
    conn.execute("select pgmem.identity_set_goal('lisbon', 'move to Lisbon', %s::vector)", (e(5),))
    conn.execute("select pgmem.identity_end_goal('lisbon', 'dropped')")
    kw = dict(query_embedding=e(1), k=10, noise=0, as_of=T0 + timedelta(days=3), log=False)
    r = call(conn, "reconstruct", **kw)[0]["reconstruct"]
    flags = {m["id"]: m["flags"] for m in r["members"]}
    assert flags[rude] == {"identity_conflict": {"trait": "patience", "observed": 0.1, "held": pytest.approx(0.82)}}
    assert abs(0.1 - 0.82) > 0.5 and abs(0.6 - 0.82) <= 0.5 and flags[calm] == {}
    assert flags[steak]["identity_conflict"]["belief"] == "diet"
    assert flags[steak]["identity_conflict"]["confidence"] == pytest.approx(0.4 * 0.9)
    assert flags[steak]["identity_conflict"]["held_confidence"] == pytest.approx(0.6 * 0.9)
    assert flags[flat] == {} and flags[veg] == {}
    # a memory of the dropped goal: cosine .9 to e(5)
    plan = remember("I booked a viewing of a flat in Lisbon for June", at_cos(5, 1, 0.9))
    r = call(conn, "reconstruct", **kw)[0]["reconstruct"]
    flags = {m["id"]: m["flags"] for m in r["members"]}
    assert flags[plan] == {"identity_conflict": {"goal": "lisbon", "goal_text": "move to Lisbon", "state": "dropped",
                                                 "similarity": pytest.approx(0.9, abs=1e-4)}}
    # an active goal as close keeps it consistent
    conn.execute("select pgmem.identity_set_goal('porto', 'move to Porto', %s::vector)", (at_cos(5, 6, 0.95),))
    r = call(conn, "reconstruct", **kw)[0]["reconstruct"]
    assert {m["id"]: m["flags"] for m in r["members"]}[plan] == {}  # .9·.95 = .855 >= .8 to porto
    conn.execute("select pgmem.identity_end_goal('porto', 'dropped')")
    # suppress: the three conflicting memories leave the strand
    r = call(conn, "reconstruct", identity="suppress", **kw)[0]["reconstruct"]
    assert {x["id"] for x in r["suppressed"]} == {rude, steak, plan} and {m["id"] for m in r["members"]} == {veg, calm, flat}
    # reframe: they stay, each with what the identity holds now, in the strand's text too
    r = call(conn, "reconstruct", identity="reframe", **kw)[0]["reconstruct"]
    assert r["suppressed"] == [] and {m["id"] for m in r["members"]} == {veg, steak, rude, calm, flat, plan}
    got = {m["id"]: m.get("reframed") for m in r["members"]}
    assert got[rude] == "I snapped at the waiter for being slow [reframed: it shows patience at 0.10; the identity's patience is 0.82]"
    assert got[steak] == ('I ordered a steak at the grill [reframed: it supported "the user eats meat"; '
                          'the identity now holds "the user is vegetarian"]')
    assert got[plan] == 'I booked a viewing of a flat in Lisbon for June [reframed: it served the goal "move to Lisbon", since dropped]'
    assert got[veg] is None and got[calm] is None and got[flat] is None
    assert got[rude] in r["text"] and "I snapped at the waiter for being slow\n" not in r["text"] + "\n"
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="identity also reframe"):
        call(conn, "reconstruct", query_embedding=e(1), identity="rewrite")
