"""The SQL side of pgmem on the web (issue 25, sql/570_web.sql, migrations/versions/0013_web.py):
the write-only API key store, Shadow's formatted context, memoryContext, stats and health, and
the explorer's panels; each checked as an app login, an admin login and across tenants.
"""
from __future__ import annotations

import hashlib
import json
import uuid

import numpy as np
import psycopg
import pytest

from conftest import TEMPLATE, _janitor, at_cos, connect, e, role_connect
from registry import WEB_FUNCTIONS
from sqlhelpers import call, rows, scalar

KEY_A = "sk-test-aaaaaaaaaaaaaaaaaaaaaaaa1"
KEY_B = "sk-test-bbbbbbbbbbbbbbbbbbbbbbbb2"
MARK = "quokkaharbour"  # a word only tenant b's memories hold


@pytest.fixture(scope="module")
def db(cluster):
    """One database for the module (the tests use distinct tenants), dropped at the end."""
    j = _janitor(cluster, f"t_web_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


# ------------------------------------------------------------------------------ API keys
def test_api_key_is_write_only_for_the_app_login(cluster, db, roles):
    app = role_connect(cluster, db, roles, "app", "keys-a")
    admin = role_connect(cluster, db, roles, "admin", "keys-a")
    try:
        assert scalar(app, "select pgmem.has_api_key()") is False
        got = scalar(app, "select pgmem.set_api_key(%s)", (KEY_A,))
        assert got["success"] is True and got["provider"] == "openai"
        assert got["fingerprint"] == hashlib.sha256(KEY_A.encode()).hexdigest()[:8]
        assert KEY_A not in json.dumps(got)
        assert scalar(app, "select pgmem.has_api_key()") is True
        assert scalar(app, "select pgmem.has_api_key('anthropic')") is False
        # the app login reads it back by no path: the table, the private reader, export_user
        for q in ("select * from pgmem.api_keys", "select pgmem._api_key()", "select pgmem._api_key('openai')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(q)
        assert KEY_A not in json.dumps(scalar(app, "select pgmem.export_user('anyone')"), default=str)
        app.execute("select * from pgmem.erase_user('anyone')")  # a tenant's key is no user's data: it stays
        assert scalar(app, "select pgmem.has_api_key()") is True
        assert KEY_A not in json.dumps(scalar(app, "select pgmem.system_stats()"), default=str)
        # administrators do not read the table either (as with claim keys) ...
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            admin.execute("select * from pgmem.api_keys")
        # ... but an admin's login (the web server's, in the embedded default) gets the key
        # through the one SECURITY DEFINER reader, for the tenant it acts for
        assert scalar(admin, "select pgmem._api_key()") == KEY_A
        admin.execute("set pgmem.tenant = 'keys-b'")
        assert scalar(admin, "select pgmem._api_key()") is None
        # replaced, then cleared: the old key is kept nowhere
        scalar(app, "select pgmem.set_api_key(%s)", (KEY_B,))
        admin.execute("set pgmem.tenant = 'keys-a'")
        assert scalar(admin, "select pgmem._api_key()") == KEY_B
        with connect(db, tenant=None) as su:
            dump = json.dumps(rows(su, "select to_jsonb(x) as r from pgmem.history x"), default=str)
            assert KEY_A not in dump and KEY_B not in dump
            assert scalar(su, "select count(*) from pgmem.api_keys where tenant = 'keys-a'") == 1
        assert scalar(app, "select pgmem.clear_api_key()") is True
        assert scalar(app, "select pgmem.clear_api_key()") is False
        assert scalar(app, "select pgmem.has_api_key()") is False
    finally:
        app.close()
        admin.close()


def test_api_key_errors_name_the_rule_and_never_the_key(conn):
    conn.execute("set pgmem.tenant = 'keys-err'")
    for bad, words in (("short", "8 to 512 printable ASCII characters"),
                       ("sk-has a space in it", "some of them spaces"),
                       ("x" * 600, "this one has 600 characters")):
        with pytest.raises(psycopg.errors.InvalidParameterValue) as ei:
            conn.execute("select pgmem.set_api_key(%s)", (bad,))
        assert words in str(ei.value) and bad not in str(ei.value)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="provider must be a short lower-case name"):
        conn.execute("select pgmem.set_api_key(%s, 'Open AI')", (KEY_A,))
    conn.execute("select set_config('pgmem.tenant', '', false)")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="pgmem.tenant is not set"):
        conn.execute("select pgmem.set_api_key(%s)", (KEY_A,))


def test_api_keys_table_has_row_level_security_and_tenant_isolation(cluster, db, roles):
    with connect(db, tenant=None) as su:
        assert scalar(su, "select relrowsecurity from pg_class where oid = 'pgmem.api_keys'::regclass") is True
        policies = {r["policyname"] for r in rows(su, "select policyname from pg_policies where tablename = 'api_keys'")}
        assert {"tenant_rows", "admin_rows"} <= policies
        # no privilege at all for the app, the reader or the admin roles
        for role in ("pgmem_app", "pgmem_reader", "pgmem_admin"):
            assert scalar(su, "select has_table_privilege(%s, 'pgmem.api_keys', 'select,insert,update,delete')", (role,)) is False
            assert scalar(su, "select has_function_privilege(%s, 'pgmem._api_key(text)', 'execute')", (role,)) is (role == "pgmem_admin")
    a = role_connect(cluster, db, roles, "app", "iso-a")
    b = role_connect(cluster, db, roles, "app", "iso-b")
    try:
        scalar(b, "select pgmem.set_api_key(%s)", (KEY_B,))
        assert scalar(a, "select pgmem.has_api_key()") is False     # b's key is not a's
        assert scalar(a, "select pgmem.clear_api_key()") is False   # and a cannot remove it
        assert scalar(b, "select pgmem.has_api_key()") is True
        assert scalar(b, "select pgmem.has_api_key()") is True
    finally:
        a.close()
        b.close()


# ------------------------------------------------------------------------------ format_context
DESIGN_EXAMPLE = [  # shadow-memory-system.md, Usage Example, steps 2-4 (threshold .3, conversation)
    {"memoryId": 1, "activationScore": 0.72, "activated": True, "summary": "User expresses security concerns..."},
    {"memoryId": 2, "activationScore": 0.45, "activated": True, "summary": "User prefers PostgreSQL..."},
    {"memoryId": 3, "activationScore": 0.28, "activated": False, "summary": "User mentions co-founder..."},
]
DESIGN_TEXT = ("HIGHLY RELEVANT MEMORIES:\n"
               "- [Score: 72%] User expresses security concerns...\n"
               "- [Score: 45%] User prefers PostgreSQL...\n"
               "\n"
               "POTENTIALLY RELEVANT MEMORIES:\n"
               "- [Score: 28%] User mentions co-founder...")


def test_format_context_is_the_designs_block(conn):
    fmt = lambda doc, *more: scalar(conn, "select pgmem.format_context(%s::jsonb" + ", %s" * len(more) + ")",  # noqa: E731
                                    (json.dumps(doc), *more))
    assert fmt(DESIGN_EXAMPLE) == DESIGN_TEXT
    assert fmt(list(reversed(DESIGN_EXAMPLE))) == DESIGN_TEXT          # best first, whatever the input order
    assert fmt({"candidateMemories": DESIGN_EXAMPLE}) == DESIGN_TEXT    # a memory_context document
    # max_candidates bounds the "potentially relevant" list (0: the design's "tracked but not used")
    assert fmt(DESIGN_EXAMPLE, None, 0) == DESIGN_TEXT.split("\n\n")[0]
    # rows without an activated flag: the threshold decides (default: the conversation threshold .3)
    plain = [{"score": d["activationScore"], "content": d["summary"]} for d in DESIGN_EXAMPLE]
    assert fmt(plain) == DESIGN_TEXT
    assert fmt(plain, 0.5) == ("HIGHLY RELEVANT MEMORIES:\n- [Score: 72%] User expresses security concerns...\n\n"
                               "POTENTIALLY RELEVANT MEMORIES:\n- [Score: 45%] User prefers PostgreSQL...\n"
                               "- [Score: 28%] User mentions co-founder...")
    # build_context rows: selected is the flag; one line each, long text cut with an ellipsis
    long = "word " * 200
    out = fmt([{"score": 0.9, "selected": True, "content": long}, {"score": 0.8, "selected": False, "content": "b\n\tc"}],
              None, 3, 40)
    assert out == f"HIGHLY RELEVANT MEMORIES:\n- [Score: 90%] {long.strip()[:39]}…\n\nPOTENTIALLY RELEVANT MEMORIES:\n- [Score: 80%] b c"
    # a context_for document: everything it retrieved went into the prompt
    assert fmt({"context": {"memories": [{"id": 5, "score": 0.41, "content": "Maya lives in Lisbon"}]}}) == \
        "HIGHLY RELEVANT MEMORIES:\n- [Score: 41%] Maya lives in Lisbon"
    assert fmt([]) == "" and scalar(conn, "select pgmem.format_context(null)") == ""
    for bad, words in (({"x": 1}, "this object is none of them"), ('"text"', "needs a JSON array"),
                       ([{"score": "high", "content": "x"}], "memory 1 of format_context's input needs a numeric score"),
                       ([{"score": 0.5}], "and a text")):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=words):
            conn.execute("select pgmem.format_context(%s::jsonb)", (bad if isinstance(bad, str) else json.dumps(bad),))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="max_candidates must be between 0 and 100"):
        conn.execute("select pgmem.format_context('[]', max_candidates => 500)")


def _memories(conn, tenant: str) -> dict[str, int]:
    """Four memories of one user with hand-made embeddings along axes 1-4 (and one of another user)."""
    conn.execute("select set_config('pgmem.tenant', %s, false)", (tenant,))
    texts = {"peanut": ("I am allergic to peanuts", e(1)), "editor": ("I switched from VS Code to Neovim", e(2)),
             "lisbon": ("I moved to Lisbon last month", e(3)), "deploy": ("The deploy of orders-service failed", e(4))}
    ids = {k: call(conn, "remember", t, embedding=v, who="user", user_id="maya", force=True)[0]["memory_id"]
           for k, (t, v) in texts.items()}
    ids["other"] = call(conn, "remember", "Tom is allergic to peanuts too", embedding=e(1), user_id="tom", force=True)[0]["memory_id"]
    return ids


def test_format_context_of_real_rankings_and_memory_context(conn):
    ids = _memories(conn, "fmt")
    q = at_cos(1, 7, 0.9)  # close to the peanut memory only
    act = rows(conn, "select * from pgmem.activate('peanut allergy', %s, k => 5, filters => '{\"user_id\": \"maya\"}')", (q,))
    assert act[0]["id"] == ids["peanut"] and act[0]["activated"]
    text = scalar(conn, "select pgmem.format_context(jsonb_agg(a)) from pgmem.activate('peanut allergy', %s, k => 5, "
                        "filters => '{\"user_id\": \"maya\"}') a", (q,))
    first = text.splitlines()[1]
    assert first == f"- [Score: {round(act[0]['score'] * 100)}%] I am allergic to peanuts"
    assert sum(1 for ln in text.splitlines() if ln.startswith("- ")) == \
        sum(a["activated"] for a in act) + min(3, sum(not a["activated"] for a in act))

    doc = scalar(conn, "select pgmem.memory_context('peanut allergy', %s, k => 5, filters => '{\"user_id\": \"maya\"}')", (q,))
    cands = doc["candidateMemories"]
    assert [c["memoryId"] for c in cands] == [a["id"] for a in act]
    assert [c["activationScore"] for c in cands] == [round(a["score"], 4) for a in act]
    assert [c["memoryId"] for c in doc["activatedMemories"]] == [a["id"] for a in act if a["activated"]]
    assert doc["totalMemories"] == len(act) and ids["other"] not in {c["memoryId"] for c in cands}
    assert doc["avgActivationScore"] == pytest.approx(np.mean([a["score"] for a in act]), abs=1e-4)
    assert doc["threshold"] == pytest.approx(0.3) and doc["contextType"] == "conversation"
    assert set(cands[0]["signals"]) == {"embedding", "metadata", "summary", "temporal"}
    assert cands[0]["signals"]["embedding"] == pytest.approx(act[0]["embedding_sim"], abs=1e-4)
    assert doc["formatted"] == text
    # the activations are logged under the query id (feedback, tune_thresholds, system_stats)
    logged = rows(conn, "select memory_id, score, activated from pgmem.activation_log where query_id = %s",
                  (doc["queryId"],))
    assert {r["memory_id"] for r in logged} == {c["memoryId"] for c in cands}
    # a strict context type activates less
    strict = scalar(conn, "select pgmem.memory_context('peanut allergy', %s, 'task', 5)", (q,))
    assert strict["threshold"] == pytest.approx(0.8)
    assert len(strict["activatedMemories"]) <= len(doc["activatedMemories"])
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="k must be between 1 and 100"):
        conn.execute("select pgmem.memory_context('x', k => 0)")


# ------------------------------------------------------------------------------ stats and health
def test_system_stats(conn):
    ids = _memories(conn, "stats")
    call(conn, "forget", ids["deploy"])
    call(conn, "set_fact", "maya", "city", json.dumps("Lisbon"))
    before = scalar(conn, "select pgmem.system_stats()")
    assert before["averageActivationScore"] is None and before["activations30d"]["count"] == 0
    doc = scalar(conn, "select pgmem.memory_context('peanut allergy', %s, k => 3)", (at_cos(1, 7, 0.9),))
    s = scalar(conn, "select pgmem.system_stats()")
    assert s["tenant"] == "stats" and s["totalMemories"] == 4  # 5 stored, 1 forgotten
    assert s["memories"] == {**s["memories"], "total": 5, "active": 4, "deleted": 1, "users": 2}
    assert s["tiers"]["episodic"] == 4 and s["tiers"]["profile_facts"] == 1
    scores = [c["activationScore"] for c in doc["candidateMemories"]]
    assert s["averageActivationScore"] == pytest.approx(np.mean(scores), abs=1e-3)
    assert s["activations30d"] == {"average": s["averageActivationScore"], "count": len(scores),
                                   "activated": len(doc["activatedMemories"]), "queries": 1}
    assert s["hasApiKey"] is False
    conn.execute("select pgmem.set_api_key(%s)", (KEY_A,))
    assert scalar(conn, "select pgmem.system_stats()")["hasApiKey"] is True
    # job health: a failed run of this tenant is reported, with its error
    conn.execute("insert into pgmem.job_runs (tenant, job, status, error, finished_at) values "
                 "('stats', 'prune', 'failed', 'lock timeout', now()), ('stats', 'merge', 'ok', null, now()),"
                 "('other', 'merge', 'failed', 'not ours', now())")
    jobs = scalar(conn, "select pgmem.system_stats()")["jobs"]
    assert jobs["runs7d"] == 2 and jobs["failures7d"] == 1
    assert jobs["lastFailure"]["job"] == "prune" and jobs["lastFailure"]["error"] == "lock timeout"
    listed = {r["job"]: r for r in rows(conn, "select * from pgmem.list_jobs() where scope = 'stats'")}
    assert listed["prune"]["last_status"] == "failed" and listed["prune"]["failures_7d"] == 1
    assert listed["merge"]["runs_7d"] == 1 and "not ours" not in json.dumps(rows(conn, "select * from pgmem.list_jobs()"), default=str)


def test_health(conn, cluster):
    from pgmem.web import expected_revision

    conn.execute("set pgmem.tenant = 'health'")
    head = expected_revision()
    h = scalar(conn, "select pgmem.health(%s)", (head,))
    assert h["status"] == "ok", h["problems"]
    assert h["database"]["reachable"] is True and h["migrations"] == {"installed": head, "expected": head, "current": True}
    assert h["cron"]["running"] is True and h["cron"]["preloaded"] is True  # the test cluster preloads pg_cron
    assert h["worker"] == {"queue": 0, "oldest_ready_s": None, "stall_after_s": 300, "alive": True}
    # a migration behind, and a backlog the worker does not drain, are named
    h = scalar(conn, "select pgmem.health('9999')")
    assert h["status"] == "degraded" and h["migrations"]["current"] is False
    assert any("run pgmem migrate" in p for p in h["problems"])
    mid = call(conn, "remember", "waiting for an embedding", force=True)[0]["memory_id"]
    conn.execute("update pgmem.embedding_queue set queued_at = now() - interval '1 hour' where memory_id = %s", (mid,))
    h = scalar(conn, "select pgmem.health(%s)", (head,))
    assert h["worker"]["alive"] is False and h["worker"]["queue"] == 1 and h["worker"]["oldest_ready_s"] >= 3600
    assert any("start pgmem worker" in p for p in h["problems"])


def test_health_is_degraded_without_scheduled_jobs(cluster):
    """Issue 32 item 9: a database whose jobs pg_cron does not run says so (uses are not
    folded, clusters do not form). Read in the test cluster's pg_cron database."""
    from conftest import CRON_DB, connect

    with connect(cluster.dsn(CRON_DB), tenant="health-cron") as c:
        def jobs():
            return scalar(c, "select count(*) from cron.job where command like '%%pgmem.%%' "
                             "and database = current_database() and active")

        def named(h):
            return any("no pgmem job is scheduled" in p for p in h["problems"])

        h = scalar(c, "select pgmem.health()")
        assert h["cron"]["scheduled_jobs"] == jobs() and named(h) == (jobs() == 0)
        jobid = scalar(c, "select cron.schedule_in_database('pgmem-health-test', '0 0 31 2 *', "
                          "'select pgmem.health()', current_database())")  # (February 31st: never runs)
        try:
            h = scalar(c, "select pgmem.health()")
            assert not named(h) and h["cron"]["scheduled_jobs"] >= 1
        finally:
            c.execute("select cron.unschedule(%s)", (jobid,))


# ------------------------------------------------------------------------------ the explorer's panels
def test_list_bindings_and_clusters(conn):
    ids = _memories(conn, "panels")
    call(conn, "bind", ids["peanut"], ids["editor"], "causal", 0.8)
    call(conn, "touch", [ids["peanut"], ids["lisbon"]])  # co_access
    got = {(r["other_id"], r["kind"]): r for r in rows(conn, "select * from pgmem.list_bindings(%s)", (ids["peanut"],))}
    assert got[(ids["editor"], "causal")]["direction"] == "out"
    assert got[(ids["editor"], "causal")]["other_content"] == "I switched from VS Code to Neovim"
    assert (ids["lisbon"], "co_access") in got
    back = {(r["other_id"], r["kind"]): r for r in rows(conn, "select * from pgmem.list_bindings(%s)", (ids["editor"],))}
    assert back[(ids["peanut"], "causal")]["direction"] == "in"
    assert rows(conn, "select * from pgmem.list_clusters()") == []


# ------------------------------------------------------------------------------ tenancy of every web function
def _snapshot_b(db: str) -> str:
    with connect(db, tenant="wb") as su:
        return json.dumps([rows(su, f"select to_jsonb(x) as r from pgmem.{t} x where tenant = 'wb' order by 1")
                           for t in ("memories", "api_keys", "activation_log", "links", "job_runs")], default=str)


def test_every_web_function_is_isolated(cluster, db, roles):
    """Tenant b holds memories, a key, activations, job runs and bindings; tenant a calls every
    web function (as an app login) and sees none of b's, nor changes any."""
    with connect(db, tenant="wb") as su:
        bids = [call(su, "remember", f"{MARK} secret number {i}", embedding=at_cos(1, 10 + i, 0.95), user_id="u",
                     force=True)[0]["memory_id"] for i in range(3)]
        su.execute("select pgmem.set_api_key(%s)", (KEY_B,))
        su.execute("select pgmem.memory_context(%s, %s)", (MARK, e(1)))
        call(su, "bind", bids[0], bids[1], "causal", 0.9)
        su.execute("insert into pgmem.job_runs (tenant, job, status, error) values ('wb', 'prune', 'failed', %s)", (MARK,))
    before = _snapshot_b(db)
    a = role_connect(cluster, db, roles, "app", "wa")
    try:
        call(a, "remember", "a's own memory about peanuts", embedding=e(1), user_id="u", force=True)
        called = set()

        def run(name, q, params=()):
            called.add(name)
            got = rows(a, q, params)
            text = json.dumps(got, default=str)
            assert MARK not in text and KEY_B not in text, f"{name} returned tenant b's data: {text[:300]}"
            return got

        assert run("set_api_key", "select pgmem.set_api_key(%s) as r", (KEY_A,))[0]["r"]["success"]
        assert run("has_api_key", "select pgmem.has_api_key() as r")[0]["r"] is True
        assert run("clear_api_key", "select pgmem.clear_api_key() as r")[0]["r"] is True
        run("format_context", "select pgmem.format_context(jsonb_agg(x)) from pgmem.activate(%s, %s) x", (MARK, e(1)))
        doc = run("memory_context", "select pgmem.memory_context(%s, %s) as r", (MARK, e(1)))[0]["r"]
        assert doc["totalMemories"] == 1 and {c["memoryId"] for c in doc["candidateMemories"]}.isdisjoint(bids)
        stats = run("system_stats", "select pgmem.system_stats() as r")[0]["r"]
        assert stats["totalMemories"] == 1 and stats["hasApiKey"] is False and stats["jobs"]["runs7d"] == 0
        from pgmem.web import expected_revision

        h = run("health", "select pgmem.health(%s) as r", (expected_revision(),))[0]["r"]
        assert h["worker"]["queue"] == 0 and h["migrations"]["current"] is True  # the app login reads the revision
        for bid in bids:
            assert run("list_bindings", "select * from pgmem.list_bindings(%s)", (bid,)) == []
        assert run("list_clusters", "select * from pgmem.list_clusters()") == []
        assert run("list_jobs", "select * from pgmem.list_jobs()") == []
        assert called == WEB_FUNCTIONS
    finally:
        a.close()
    assert _snapshot_b(db) == before, "a web function of tenant a changed tenant b's rows"
