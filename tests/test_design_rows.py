"""Rows of the designs closed by issue 24 (item 5), each recomputed by hand on a real cluster:

* Shadow S15: thresholds by relevance kind (sql/430_thresholds.sql, activate in 220);
* Shadow S21: the retrieval success rate (sql/355_success.sql);
* Shadow S7 / S34: clearMemories, clearHistory (sql/110_memory_ops.sql);
* Engram E29: recall's early termination (sql/230_recall.sql), and since issue 36 the candidates it saves reading;
* Fragment F6: salience with unknown parts explained, or counted as 0 (sql/100_remember.sql);
* the profile facts a statement sets join its topics (the demo's editor question).
"""
from __future__ import annotations

import uuid

import psycopg
import pytest

from conftest import at_cos, connect, e, role_connect
from sqlhelpers import call, one, rows, scalar
from shadow_fixture import T, act, activate  # noqa: F401  (the activation fixture: a .705 semantic, d .55 mixed)


# ============================================================================ Shadow S15
def test_thresholds_by_relevance_kind(conn, act):  # noqa: F811
    """Shadow's Configuration: thresholds {default, semantic, contextual, temporal}, .3 each: a
    memory is activated when its score reaches its context type's threshold AND its kind's."""
    assert [scalar(conn, "select pgmem.relevance_threshold(%s)", (k,)) for k in ("default", "semantic", "contextual",
                                                                                "temporal", "mixed")] == [0.3] * 5
    base = {r["id"]: r for r in activate(conn, context_type="conversation")}
    a, d = base[act["a"]], base[act["d"]]
    assert (a["relevance_type"], d["relevance_type"]) == ("semantic", "mixed")
    assert a["activated"] and d["activated"] and a["threshold_used"] == pytest.approx(0.3)
    # semantic .75: a (.705, semantic) is no longer activated in a conversation; d (mixed) still is
    conn.execute("""insert into pgmem.settings (tenant, key, value) values
                    ('acme', 'relevance_thresholds', '{"default": 0.3, "semantic": 0.75, "contextual": 0.3, "temporal": 0.3}')""")
    got = {r["id"]: r for r in activate(conn, context_type="conversation")}
    assert not got[act["a"]]["activated"] and got[act["a"]]["threshold_used"] == pytest.approx(0.75)
    assert got[act["d"]]["activated"] and got[act["d"]]["threshold_used"] == pytest.approx(0.3)
    # default .6 (mixed takes it): d (.55) drops out; the context type's threshold stays the floor
    conn.execute("""update pgmem.settings set value = '{"default": 0.6, "semantic": 0.3}' where tenant = 'acme'
                    and key = 'relevance_thresholds'""")
    got = {r["id"]: r for r in activate(conn, context_type="conversation")}
    assert got[act["a"]]["activated"] and not got[act["d"]]["activated"]
    assert got[act["d"]]["threshold_used"] == pytest.approx(0.6)
    got = {r["id"]: r for r in activate(conn, context_type="document")}  # document .6 > semantic .3
    assert got[act["a"]]["threshold_used"] == pytest.approx(0.6) and got[act["a"]]["activated"]
    # an explicit threshold is the only one
    got = {r["id"]: r for r in activate(conn, threshold=0.5)}
    assert got[act["d"]]["activated"] and got[act["d"]]["threshold_used"] == pytest.approx(0.5)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown relevance_type "lexical"'):
        conn.execute("select pgmem.relevance_threshold('lexical')")


# ============================================================================ Shadow S21
def test_retrieval_success_rate_by_hand(conn):
    """Of the activate() calls logged with a query_id that got feedback, the share where a memory
    they activated was marked relevant; FPR and FNR over the same feedback."""
    m = [call(conn, "remember", f"Note {i} about the staging cluster", embedding=e(i), force=True)[0]["memory_id"]
         for i in range(1, 5)]

    def retrieval(shown: list[tuple[int, bool]], ctx="conversation"):
        q = uuid.uuid4()
        for mid, on in shown:
            conn.execute("insert into pgmem.activation_log (tenant, query_id, memory_id, context_type, score, threshold, activated)"
                         " values ('acme', %s, %s, %s, %s, .3, %s)", (q, mid, ctx, 0.5 if on else 0.1, on))
        return q

    q1 = retrieval([(m[0], True), (m[1], False)])   # activated m0 relevant: success
    q2 = retrieval([(m[0], True), (m[2], True)])    # both activated irrelevant: failure
    q3 = retrieval([(m[3], False), (m[1], True)])   # the relevant one was not activated: failure
    retrieval([(m[2], True)])                       # no feedback: not judged
    q5 = retrieval([(m[0], True)], ctx="query")     # another context type
    fb = lambda q, mid, rel: conn.execute("select pgmem.feedback(%s, %s, %s)", (mid, q, rel))
    fb(q1, m[0], True)
    fb(q1, m[1], False)
    fb(q2, m[0], False)
    fb(q2, m[2], False)
    fb(q3, m[3], True)
    fb(q3, m[1], False)
    fb(q5, m[0], True)
    got = {r["kind"]: r for r in rows(conn, "select * from pgmem.retrieval_success_rate()")}
    c = got["conversation"]
    assert (c["retrievals"], c["judged"], c["successful"]) == (4, 3, 1)
    assert c["success_rate"] == pytest.approx(1 / 3)
    # activated with feedback: q1 m0 (rel), q2 m0, m2 (irrel), q3 m1 (irrel) -> FPR 3/4
    assert c["false_positive_rate"] == pytest.approx(3 / 4)
    # relevant: q1 m0 (activated), q3 m3 (not activated) -> FNR 1/2
    assert c["false_negative_rate"] == pytest.approx(1 / 2)
    assert (got["query"]["success_rate"], got["query"]["judged"]) == (1.0, 1)
    # the latest feedback counts: q2's m2 turns out relevant -> q2 succeeds
    fb(q2, m[2], True)
    assert one(conn, "select * from pgmem.retrieval_success_rate('conversation')")["success_rate"] == pytest.approx(2 / 3)
    view = {r["context_type"]: r for r in rows(conn, "select * from pgmem.retrieval_success where tenant = 'acme'")}
    assert view["conversation"]["success_rate"] == pytest.approx(2 / 3) and view["conversation"]["retrievals"] == 4
    assert rows(conn, "select * from pgmem.retrieval_success_rate(since => now() + interval '1 day')") == []


# ============================================================================ Engram E29
def test_recall_early_termination(conn):
    """engram.md, Early Termination: keep a memory if score > 0.8, stop at k. Scores by hand:
    .5·relevance + .3·decayed importance + .2·recency (linear 90 days), at age 0."""
    q = e(1)
    ids = {}
    for name, (cosine, importance) in {"best": (1.0, 1.0), "good": (0.9, 1.0), "weak": (0.99, 0.2)}.items():
        v = at_cos(1, 2 + len(ids), cosine)
        ids[name] = call(conn, "remember", f"Memory {name}", embedding=v, importance=importance, force=True,
                         created_at=T)[0]["memory_id"]
    score = {"best": 0.5 * 1.0 + 0.3 * 1.0 + 0.2, "good": 0.5 * 0.9 + 0.3 * 1.0 + 0.2, "weak": 0.5 * 0.99 + 0.3 * 0.2 + 0.2}
    assert score == pytest.approx({"best": 1.0, "good": 0.95, "weak": 0.755})
    plain = call(conn, "recall", query_embedding=q, k=10, as_of=T)
    assert [r["id"] for r in plain] == [ids["best"], ids["good"], ids["weak"]]
    for r in plain:
        assert r["score"] == pytest.approx(score[next(n for n, i in ids.items() if i == r["id"])], abs=1e-6)
    et = call(conn, "recall", query_embedding=q, k=10, as_of=T, early_termination=True)
    # .755 is not above .8: with fewer than k above the bar once all are read, the best of the
    # others fill the k (issue 36: the exit saves work, it does not filter the result)
    assert [r["id"] for r in et] == [ids["best"], ids["good"], ids["weak"]]
    assert [r["id"] for r in call(conn, "recall", query_embedding=q, k=1, as_of=T, early_termination=True)] == [ids["best"]]
    assert [r["id"] for r in call(conn, "recall", query_embedding=q, k=10, as_of=T, early_termination=True,
                                  min_score=0.99)] == [ids["best"], ids["good"], ids["weak"]]  # (the order of scores)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="min_score"):
        call(conn, "recall", query_embedding=q, early_termination=True, min_score=1.5)


def test_recall_early_termination_stops_reading_candidates(conn):
    """Issue 36 (E29): the early exit saves work. 60 memories at cosines .99 down to .40 with the
    query, importance 1, at age 0: score = .5·cos + .3 + .2 > .8 iff cos > .6. Read nearest first
    from the index, the first k all pass: recall reads k candidates instead of every one (this
    small tenant is scored exactly: all 60). Where the nearest fail the bar (importance 0: score
    .5·cos + .2 <= .695), they are read and passed over until k pass."""
    q = e(1)
    cos = [round(0.99 - 0.01 * i, 2) for i in range(60)]
    ids = [call(conn, "remember", f"Memory number {i}", embedding=at_cos(1, 2 + i, c), importance=1.0, force=True,
                created_at=T)[0]["memory_id"] for i, c in enumerate(cos)]
    conn.execute("select * from pgmem.index_vectors(1000)")
    read = lambda: int(scalar(conn, "select current_setting('pgmem.recall_candidates_read')"))
    full = call(conn, "recall", query_embedding=q, k=5, as_of=T)
    assert read() == 60 and [r["id"] for r in full] == ids[:5]
    early = call(conn, "recall", query_embedding=q, k=5, as_of=T, early_termination=True)
    assert read() == 5 and [r["id"] for r in early] == ids[:5]
    assert [r["score"] for r in early] == pytest.approx([0.5 * c + 0.5 for c in cos[:5]], abs=1e-6)
    # the setting recall_early_termination (off by default) switches it on for the tenant
    assert scalar(conn, "select pgmem._setting('recall_early_termination')") is False
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'recall_early_termination', 'true')")
    assert [r["id"] for r in call(conn, "recall", query_embedding=q, k=5, as_of=T)] == ids[:5] and read() == 5
    assert len(call(conn, "recall", query_embedding=q, k=5, as_of=T, early_termination=False)) == 5 and read() == 60
    # the 3 nearest can no longer pass: read 3 + 5
    conn.execute("update pgmem.memories set importance = 0 where id = any(%s)", (ids[:3],))
    got = call(conn, "recall", query_embedding=q, k=5, as_of=T)
    assert [r["id"] for r in got] == ids[3:8] and read() == 8
    # none clears a bar of .99 (the best left, cos .96, scores .98): it reads every candidate (up to
    # candidate_pool), and the best of them fill the k, as recall without the early exit ranks them
    # (the design's loop returned nothing: on LoCoMo's dev file no Engram score reaches .8)
    got = call(conn, "recall", query_embedding=q, k=5, as_of=T, min_score=0.99)
    assert read() == 60 and [r["id"] for r in got] == [r["id"] for r in call(conn, "recall", query_embedding=q, k=5,
                                                                               as_of=T, early_termination=False)]


# ============================================================================ Fragment F6
def test_salience_with_unknown_parts_is_explained_and_can_count_as_zero(conn):
    """Salience = .35 emotion + .30 novelty + .25 goal relevance + .10 depth. With no emotion and
    no goals: renormalised over novelty and depth (.75 / .25), or, with salience_unknown "zero",
    the formula as written (.30 novelty + .10 depth). remember()'s details say which."""
    first = call(conn, "remember", "The deploy runbook lives in the ops repo", embedding=e(1), who="user", force=True)[0]
    d = first["details"]["salience"]
    depth = d["processing_depth"]
    assert d["emotion"] is None and d["goal_relevance"] is None and d["novelty"] == 1.0  # the first memory
    assert d["unknown"] == "renormalise" and d["weights"] == {"novelty": 0.75, "depth": 0.25}
    assert first["salience"] == pytest.approx(0.75 * 1.0 + 0.25 * depth, abs=1e-6)
    assert d["value"] == pytest.approx(first["salience"], abs=1e-6)
    conn.execute("insert into pgmem.settings (tenant, key, value) values ('acme', 'salience_unknown', '\"zero\"')")
    second = call(conn, "remember", "Backups run nightly at two", embedding=e(2), who="user", force=True)[0]
    d2 = second["details"]["salience"]
    assert d2["unknown"] == "zero" and d2["weights"] == {"emotion": 0.35, "novelty": 0.3, "goal": 0.25, "depth": 0.1}
    assert second["salience"] == pytest.approx(0.30 * d2["novelty"] + 0.10 * d2["processing_depth"], abs=1e-6)
    # with an emotion given, it is known: .35·min(1, arousal + |valence - .5|)
    third = call(conn, "remember", "The outage was terrifying", embedding=e(3), valence=0.1, arousal=0.5, force=True)[0]
    d3 = third["details"]["salience"]
    assert d3["emotion"] == pytest.approx(0.9)
    assert third["salience"] == pytest.approx(0.35 * 0.9 + 0.30 * d3["novelty"] + 0.10 * d3["processing_depth"], abs=1e-6)


# ============================================================================ topics from profile facts
def test_profile_fact_keys_join_the_topics(conn):
    """A user's statement that sets a profile fact is about that fact's key: "I've switched from VS
    Code to Neovim" (key editor) is found by "editor", which it never says."""
    facts = [{"key": "editor", "value": "Neovim", "previous": "VS Code", "rule": "switch", "confidence": 0.9,
              "statement": "I've switched from VS Code to Neovim"}]
    a = call(conn, "remember", "I've switched from VS Code to Neovim", user_id="maya", topics=["neovim"],
             metadata={"facts": facts}, force=True)[0]["memory_id"]
    b = call(conn, "remember", "I'm allergic to peanuts", user_id="maya",
             metadata={"facts": [{"key": "allergies.peanuts", "value": True, "rule": "allergy", "confidence": 0.95,
                                  "statement": "I'm allergic to peanuts"}]}, force=True)[0]["memory_id"]
    c = call(conn, "remember", "The editor of the newsletter is Ana", force=True)[0]["memory_id"]  # no user: no facts
    topics = {r["id"]: r["topics"] for r in rows(conn, "select id, topics from pgmem.memories")}
    assert topics[a] == ["neovim", "editor"] and topics[b] == ["allergies", "peanuts"] and topics[c] == []
    found = {r["id"] for r in call(conn, "search", query_text="which editor", k=5, filters={"user_id": "maya"})}
    assert found == {a}
    # the profile knows it too (the trigger that applies the facts is unchanged)
    assert scalar(conn, "select value #>> '{}' from pgmem.profile('maya') where key = 'editor'") == "Neovim"


# ============================================================================ Shadow S7, S34
def test_clear_memories_is_restorable(conn):
    """clearMemories: every memory of the tenant (or a user) deleted, in history with one clear_id;
    restore_cleared brings back exactly those, to what they were."""
    a = call(conn, "remember", "Maya likes green tea", user_id="maya", force=True)[0]["memory_id"]
    b = call(conn, "remember", "Maya's flat is in Kreuzberg", user_id="maya", force=True)[0]["memory_id"]
    t = call(conn, "remember", "Tom is vegetarian", user_id="tom", force=True)[0]["memory_id"]
    conn.execute("select * from pgmem.archive(array[%s])", (b,))
    conn.execute("select pgmem.forget(%s)", (t,))  # deleted before: not the clear's to restore
    r = one(conn, "select * from pgmem.clear_memories('maya', 'user asked to start over')")
    assert r["memories"] == 2
    state = lambda i: scalar(conn, "select state from pgmem.memories where id = %s", (i,))
    assert (state(a), state(b), state(t)) == ("deleted", "deleted", "deleted")
    h = rows(conn, "select details from pgmem.history where memory_id = %s order by id desc limit 1", (a,))[0]["details"]
    assert h["clear_memories"] == str(r["clear_id"]) and h["reason"] == "user asked to start over"
    assert call(conn, "search", query_text="Maya green tea Kreuzberg", k=5) == []
    assert scalar(conn, "select pgmem.restore_cleared(%s)", (r["clear_id"],)) == 2
    assert (state(a), state(b), state(t)) == ("active", "archived", "deleted")
    assert scalar(conn, "select pgmem.restore_cleared(%s)", (r["clear_id"],)) == 0  # nothing left to restore
    # the whole tenant
    assert one(conn, "select * from pgmem.clear_memories()")["memories"] == 2
    assert scalar(conn, "select count(*) from pgmem.memories where state in ('active', 'archived')") == 0


def test_clear_history_is_restorable(conn):
    """clearHistory: the conversation's turns move aside; the next context_for starts afresh (no
    history); the memories its turns became stay; restore_history puts them back."""
    ctx = lambda text: call(conn, "context_for", text, conversation_id="chat-1", user_id="maya")[0]["context_for"]
    ctx("I moved to Lisbon last month.")
    ctx("What should I pack for the weather there?")
    assert scalar(conn, "select message_count from pgmem.conversations where conversation_id = 'chat-1'") == 2
    memories = scalar(conn, "select count(*) from pgmem.memories where state = 'active'")
    r = one(conn, "select * from pgmem.clear_history('chat-1', 'new topic')")
    assert r["conversation"] == "chat-1" and r["messages"] == 2 and r["cleared_as"].startswith("chat-1 (cleared ")
    assert scalar(conn, "select count(*) from pgmem.conversations where conversation_id = 'chat-1'") == 0
    fresh = ctx("Hello again")
    assert fresh["context"]["history"] == []
    assert scalar(conn, "select message_count from pgmem.conversations where conversation_id = 'chat-1'") == 1
    assert scalar(conn, "select count(*) from pgmem.memories where state = 'active'") >= memories  # kept
    assert scalar(conn, "select count(*) from pgmem.messages where conversation_id = %s", (r["cleared_as"],)) == 2
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='conversation "chat-1" was started again'):
        conn.execute("select * from pgmem.restore_history('chat-1', %s)", (r["cleared_as"],))
    again = one(conn, "select * from pgmem.clear_history('chat-1')")
    back = one(conn, "select * from pgmem.restore_history('chat-1', %s)", (r["cleared_as"],))
    assert back == {"conversation": "chat-1", "messages": 2}
    assert [m["content"] for m in rows(conn, "select content from pgmem.messages where conversation_id = 'chat-1' order by seq")] == \
        ["I moved to Lisbon last month.", "What should I pack for the weather there?"]
    assert scalar(conn, "select count(*) from pgmem.messages where conversation_id = %s", (again["cleared_as"],)) == 1
    with pytest.raises(psycopg.errors.NoDataFound, match='conversation "nope" does not exist'):
        conn.execute("select * from pgmem.clear_history('nope')")
    with pytest.raises(psycopg.errors.NoDataFound, match="was cleared as"):
        conn.execute("select * from pgmem.restore_history('chat-1', 'chat-1 (cleared never)')")


# ============================================================================ tenancy
def test_the_rows_keep_to_the_tenant(cluster, dsn, roles):  # noqa: F811
    """Real app logins: tenant a's calls of relevance_threshold, retrieval_success_rate,
    clear_memories, restore_cleared, clear_history and restore_history never read or change
    tenant b's rows."""
    a = role_connect(cluster, dsn, roles, "app", "a")
    b = role_connect(cluster, dsn, roles, "app", "b")
    with connect(dsn, tenant=None) as su:
        mb = scalar(b, "select memory_id from pgmem.remember('b''s note', force => true)")
        ma = scalar(a, "select memory_id from pgmem.remember('a''s note', force => true)")
        su.execute("""insert into pgmem.settings (tenant, key, value) values ('b', 'relevance_thresholds', '{"default": 0.9}')""")
        q = uuid.uuid4()
        su.execute("insert into pgmem.activation_log (tenant, query_id, memory_id, context_type, score, threshold, activated)"
                   " values ('b', %s, %s, 'conversation', .5, .3, true)", (q, mb))
        b.execute("select pgmem.feedback(%s, %s, true)", (mb, q))
        b.execute("select * from pgmem.context_for('I live in Quito', conversation_id => 'shared', user_id => 'u')")
        cleared_b = scalar(b, "select clear_id from pgmem.clear_memories()")
        b_mem = rows(su, "select id, state, updated_at from pgmem.memories where tenant = 'b' order by id")
        b_conv = rows(su, "select conversation_id, message_count from pgmem.conversations where tenant = 'b'")

        assert scalar(a, "select pgmem.relevance_threshold('default')") == pytest.approx(0.3)
        assert rows(a, "select * from pgmem.retrieval_success_rate()") == []
        assert scalar(a, "select pgmem.restore_cleared(%s)", (cleared_b,)) == 0
        assert one(a, "select * from pgmem.clear_memories()")["memories"] == 1
        assert scalar(a, "select state from pgmem.memories where id = %s", (ma,)) == "deleted"
        with pytest.raises(psycopg.errors.NoDataFound):
            a.execute("select * from pgmem.clear_history('shared')")
        cleared_as = scalar(b, "select cleared_as from pgmem.clear_history('shared')")
        b_conv = rows(su, "select conversation_id, message_count from pgmem.conversations where tenant = 'b'")
        with pytest.raises(psycopg.errors.NoDataFound):
            a.execute("select * from pgmem.restore_history('shared', %s)", (cleared_as,))
        assert rows(su, "select id, state, updated_at from pgmem.memories where tenant = 'b' order by id") == b_mem
        assert rows(su, "select conversation_id, message_count from pgmem.conversations where tenant = 'b'") == b_conv
    for c in (a, b):
        c.close()
