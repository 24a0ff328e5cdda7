"""Attacks on pgmem by its own logins (issue 14), organised by attacker.

Login roles are created for the module (cluster-wide, random suffix, dropped at the end):
``app`` (pgmem_app, bound to tenant a), ``shared`` (pgmem_app, bound to no tenant: a shared
application role that acts through signed claims), ``reader`` (pgmem_reader, tenant a) and
``admin`` (pgmem_admin). Tenant b is the victim. Each test names the finding it covers; each
fails on the code before the fix (the attack got through) and passes after.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from conftest import connect
from sqlhelpers import rows, scalar
from pgmem.errors import TenantError
from conftest import login_roles


# ------------------------------------------------------------------------------ logins
@pytest.fixture(scope="module")
def logins(cluster):
    yield from login_roles(cluster, "adv_", {"app": "pgmem_app", "shared": "pgmem_app", "reader": "pgmem_reader",
                                             "admin": "pgmem_admin"})


class Env:
    """A fresh database with tenant b's data, and connections as each login (tenant a)."""

    def __init__(self, cluster, dsn, logins):
        self.cluster, self.dsn, self.logins = cluster, dsn, logins
        self.su = connect(dsn, tenant=None)
        self.opened: list[psycopg.Connection] = [self.su]
        for kind in ("app", "reader"):
            self.su.execute("select pgmem.grant_tenant(%s, 'a')", (logins[kind][0],))
        # the shared login is bound to no tenant (it uses claims): its timeouts are set by hand
        self.su.execute("select pgmem.set_session_limits(%s)", (logins["shared"][0],))
        with connect(dsn, tenant="b") as b:
            self.b_id = b.execute("select memory_id from pgmem.remember('tenant b secret: the vault code is 4711')").fetchone()[0]
        with connect(dsn, tenant="a") as a:
            self.a_id = a.execute("select memory_id from pgmem.remember('tenant a note: buy milk')").fetchone()[0]

    def login(self, kind: str, tenant: str | None = "a", **options) -> psycopg.Connection:
        name, pw = self.logins[kind]
        # no timeouts set here: grant_tenant / set_session_limits gave the logins theirs
        opts = {"pgmem.tenant": tenant, **options}
        c = psycopg.connect(host="127.0.0.1", port=self.cluster.port, user=name, password=pw,
                            dbname=conninfo_to_dict(self.dsn)["dbname"], autocommit=True)
        for k, v in opts.items():
            if v is not None:
                c.execute("select set_config(%s, %s, false)", (k, v))
        self.opened.append(c)
        return c

    def close(self):
        for c in self.opened:
            c.close()


@pytest.fixture
def env(cluster, dsn, logins):
    e = Env(cluster, dsn, logins)
    yield e
    e.close()


def refused(conn, q, sqlstate: str = "42501", match: str | None = None, params=()) -> psycopg.Error:
    """The statement fails with ``sqlstate`` (and ``match`` in the message); nothing is kept."""
    with pytest.raises(psycopg.Error) as ei:
        with conn.transaction():
            conn.execute(q, params)
    e = ei.value
    assert e.sqlstate == sqlstate, f"expected {sqlstate}, got {e.sqlstate}: {e}"
    if match:
        assert match in str(e), f"{match!r} not in {str(e)!r}"
    return e


# ---------------------------------------------------------------- signed claims (helpers)
def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign(key: bytes, payload: dict, header: dict | None = None) -> str:
    """An HS256 JWT, written out here rather than with pgmem.claims (an independent check)."""
    h = b64url(json.dumps(header or {"alg": "HS256", "typ": "JWT", "kid": "default"}).encode())
    p = b64url(json.dumps(payload).encode())
    sig = hmac.new(key, f"{h}.{p}".encode(), hashlib.sha256).digest()
    return f"{h}.{p}.{b64url(sig)}"


# ============================================================== attacker: the app role
class TestApp:
    def test_cannot_choose_another_tenant(self, env):
        """High 1: SET pgmem.tenant = 'b' by a login bound to a gave full access to b."""
        app = env.login("app", "a")
        assert scalar(app, "select pgmem.current_tenant()") == "a"
        app.execute("set pgmem.tenant = 'b'")
        e = refused(app, "select count(*) from pgmem.memories", match='may not act for tenant "b"')
        assert "pgmem.grant_tenant(" in e.diag.message_hint
        for q in ("select * from pgmem.search('vault code')", "select * from pgmem.get_memory(%s)" % env.b_id,
                  "select * from pgmem.remember('written into b')",
                  "insert into pgmem.memories (tenant, content) values ('b', 'plain insert into b')",
                  "select * from pgmem.history(%s)" % env.b_id):
            refused(app, q, match='may not act for tenant "b"')
        assert scalar(env.su, "select count(*) from pgmem.memories where tenant = 'b'") == 1

    def test_reset_lands_nowhere_usable(self, env):
        """High 1: RESET pgmem.tenant landed in the database default 'default'."""
        dbname = conninfo_to_dict(env.dsn)["dbname"]
        env.su.execute(sql.SQL("alter database {} set pgmem.tenant = 'default'").format(sql.Identifier(dbname)))
        app = env.login("app", None)
        assert scalar(app, "show pgmem.tenant") == "default"
        refused(app, "select count(*) from pgmem.memories", match='may not act for tenant "default"')
        app.execute("set pgmem.tenant = 'a'")
        assert scalar(app, "select count(*) from pgmem.memories") == 1
        app.execute("reset pgmem.tenant")
        refused(app, "select * from pgmem.remember('x')", match='may not act for tenant "default"')

    def test_installation_rows_are_admin_only(self, env):
        """High 1: as the app, SET pgmem.tenant = '*' rewrote the installation-wide jam profile."""
        app = env.login("app", "*")
        refused(app, "update pgmem.profiles set weights = '{\"semantic\": 1}' where tenant = '*' and name = 'jam'",
                match='only pgmem_admin may act for')
        refused(app, "insert into pgmem.categories (tenant, category, weight) values ('*', 'evil', 1)",
                match='only pgmem_admin may act for')
        app.execute("set pgmem.tenant = 'a'")
        # its own tenant: the defaults are readable, not writable
        assert scalar(app, "select count(*) from pgmem.profiles where tenant = '*'") >= 3
        app.execute("update pgmem.profiles set weights = '{\"semantic\": 1}' where tenant = '*' and name = 'jam'")
        refused(app, "insert into pgmem.categories (tenant, category, weight) values ('*', 'evil', 1)",
                match="row-level security")
        assert scalar(env.su, "select weights->>'semantic' from pgmem.profiles where tenant = '*' and name = 'jam'") == "0.55"

    def test_tenant_names_are_validated(self, env):
        app = env.login("app", "a")
        app.execute("set pgmem.tenant = 'acme corp'")
        refused(app, "select pgmem.current_tenant()", "22023", 'invalid tenant name "acme corp"')

    def test_shared_role_acts_through_signed_claims(self, env):
        """High 1: a shared application role serving many tenants: a signed claim per tenant,
        verified in the database with a key the role cannot read."""
        key = bytes(scalar(env.su, "select pgmem.add_claim_key('default')"))
        shared = env.login("shared", None)
        shared.execute("set pgmem.tenant = 'a'")
        refused(shared, "select count(*) from pgmem.memories", match="may not act for tenant")
        shared.execute("reset pgmem.tenant")
        good = sign(key, {"tenant": "a", "exp": int(time.time()) + 60})
        shared.execute("select set_config('pgmem.tenant_claim', %s, false)", (good,))
        assert scalar(shared, "select pgmem.current_tenant()") == "a"
        assert scalar(shared, "select count(*) from pgmem.memories") == 1
        assert rows(shared, "select * from pgmem.remember('written by the shared role for a')")[0]["decision"] == "stored"
        # claims the database refuses, each with its reason
        forged_key = secrets.token_bytes(48)
        bad = {
            "wrong signature": sign(forged_key, {"tenant": "b", "exp": int(time.time()) + 60}),
            "expired at": sign(key, {"tenant": "b", "exp": int(time.time()) - 5}),
            "no expiry": sign(key, {"tenant": "b"}),
            "must be signed with HS256": sign(key, {"tenant": "b", "exp": int(time.time()) + 60},
                                              {"alg": "none", "kid": "default"}),
            'names key "other"': sign(key, {"tenant": "b", "exp": int(time.time()) + 60}, {"alg": "HS256", "kid": "other"}),
            "names no valid tenant": sign(key, {"tenant": "*", "exp": int(time.time()) + 60}),
            "is for role": sign(key, {"tenant": "b", "exp": int(time.time()) + 60, "role": env.logins["app"][0]}),
            "not a signed claim": "eyJhbGciOiJIUzI1NiJ9.eyJ0ZW5hbnQiOiJiIn0",
        }
        # tamper: b's tenant with a's signature
        h, p, s = good.split(".")
        bad["wrong signature (tampered)"] = f"{h}.{b64url(json.dumps({'tenant': 'b', 'exp': int(time.time()) + 60}).encode())}.{s}"
        for why, token in bad.items():
            shared.execute("select set_config('pgmem.tenant_claim', %s, false)", (token,))
            try:
                shared.execute("select count(*) from pgmem.memories")
            except psycopg.Error as e:
                assert e.sqlstate == "28000" and why.split(" (")[0] in str(e), (why, e)
            else:
                pytest.fail(f"the claim with {why!r} was accepted")
        # a claim bound to this login works; a claim and a different pgmem.tenant conflict
        mine = sign(key, {"tenant": "b", "exp": int(time.time()) + 60, "role": env.logins["shared"][0]})
        shared.execute("select set_config('pgmem.tenant_claim', %s, false)", (mine,))
        assert scalar(shared, "select count(*) from pgmem.memories") == 1  # b's one memory
        shared.execute("set pgmem.tenant = 'a'")
        refused(shared, "select count(*) from pgmem.memories", match='but the signed claim is for tenant "b"')
        # the key is out of the role's reach, and so is minting claims
        refused(shared, "select * from pgmem.claim_keys", match="permission denied")
        refused(shared, "select pgmem.sign_tenant_claim('b')", match="permission denied")
        refused(shared, "select pgmem._claim_tenant('x.y.z')", match="permission denied")
        # dropping the key stops every claim signed with it
        env.su.execute("select pgmem.drop_claim_key('default')")
        shared.execute("reset pgmem.tenant")
        refused(shared, "select count(*) from pgmem.memories", "28000", "unknown or expired")

    def test_claims_signed_in_sql_and_python_agree(self, env):
        from pgmem.claims import sign_tenant_claim

        key = bytes(scalar(env.su, "select pgmem.add_claim_key('k2')"))
        shared = env.login("shared", None)
        for token in (scalar(env.su, "select pgmem.sign_tenant_claim('a', '1 minute', kid => 'k2')"),
                      sign_tenant_claim(key, "a", ttl=60, kid="k2")):
            shared.execute("select set_config('pgmem.tenant_claim', %s, false)", (token,))
            assert scalar(shared, "select pgmem.current_tenant()") == "a"

    def test_cannot_write_history(self, env):
        """Medium (forged history): the app role could INSERT history rows for b's memory."""
        app = env.login("app", "a")
        refused(app, "insert into pgmem.history (tenant, memory_id, op, details) values ('a', %s, 'merge', '{}')"
                % env.b_id, match="permission denied for table history")
        refused(app, "insert into pgmem.history (tenant, memory_id, op) values ('a', %s, 'merge')" % env.a_id,
                match="permission denied for table history")
        # its own changes are still recorded, by pgmem's triggers, with the login as actor
        app.execute("select * from pgmem.forget(%s)", (env.a_id,))
        h = rows(app, "select op, actor from pgmem.history(%s)", (env.a_id,))
        assert [x["op"] for x in h] == ["add", "delete"]
        assert h[-1]["actor"] == env.logins["app"][0]

    def test_ids_are_the_databases(self, env):
        """Medium (shared id sequence): a chosen id revealed through 23505 whether it existed in
        any tenant, and ids ahead of the sequence broke every tenant's remember."""
        app = env.login("app", "a")
        refused(app, "insert into pgmem.memories (id, content) values (%s, 'probe')" % env.b_id, "428C9",
                "non-DEFAULT value")
        refused(app, "insert into pgmem.memories (id, content) overriding system value values (%s, 'probe')"
                % (env.b_id + 1000), "42501", "permission denied")
        for seq in [r[0] for r in env.su.execute(
                "select format('%I.%I', n.nspname, c.relname) from pg_class c join pg_namespace n on n.oid = c.relnamespace"
                " where n.nspname = 'pgmem' and c.relkind = 'S'")]:
            refused(app, f"select last_value from {seq}", match="permission denied")
            refused(app, f"select nextval('{seq}')", match="permission denied")
            refused(app, f"select setval('{seq}', 1000000)", match="permission denied")
        assert scalar(env.su, "select attidentity from pg_attribute where attrelid = 'pgmem.memories'::regclass"
                              " and attname = 'id'") == "a"
        # plain inserts and the API still get their ids
        assert scalar(app, "insert into pgmem.memories (content) values ('plain insert of a') returning id") > env.a_id
        assert rows(app, "select * from pgmem.remember('remembered by a')")[0]["decision"] == "stored"

    def test_cannot_lock_pgmem_tables(self, env):
        """A table-level UPDATE, DELETE or TRUNCATE privilege lets a role LOCK the table in
        ACCESS EXCLUSIVE mode, stopping every tenant; the app holds column-level rights only."""
        app = env.login("app", "a")
        tables = [r[0] for r in env.su.execute(
            "select format('%I.%I', n.nspname, c.relname) from pg_class c join pg_namespace n on n.oid = c.relnamespace"
            " where n.nspname = 'pgmem' and c.relkind = 'r' order by 1")]
        for t in tables:
            for mode in ("row exclusive", "share", "exclusive", "access exclusive"):
                refused(app, f"lock table {t} in {mode} mode nowait", match="permission denied")
        # ...and it still completes its own queued memories (through the SECURITY DEFINER functions)
        mid = scalar(app, "select memory_id from pgmem.remember('a memory waiting for its vector')")
        import numpy as np

        v = np.zeros(384, dtype=np.float32)
        v[9] = 1
        from pgvector.psycopg import register_vector

        register_vector(app)
        with app.transaction():
            assert mid in [r["memory_id"] for r in rows(app, "select * from pgmem.claim_embeddings(10)")]
            assert rows(app, "select id from pgmem.complete_embedding(%s, %s::vector)", (mid, v))[0]["id"] == mid
        assert scalar(app, "select count(*) from pgmem.embedding_queue where memory_id = %s", (mid,)) == 0

    def test_private_helpers_are_not_executable(self, env):
        """High 5 (privilege half): pgmem._pack was executable by the app role and skipped
        build_context's caps. Every private helper outside the audited allowlist is refused."""
        app = env.login("app", "a")
        refused(app, "select * from pgmem._pack(array[1.0], '\\x00010000bdcccccd'::bytea, 1, array[150000000], array[1.0], 150000000, 0.5)",
                match="permission denied for function _pack")
        allowed = set(ALLOWED_HELPERS)
        helpers = [r for r in rows(env.su, """
            select p.oid::regprocedure::text as sig, p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
             where n.nspname = 'pgmem' and p.proname ~ '^_' and p.prorettype <> 'trigger'::regtype""")]
        for kind in ("app", "reader"):
            role = "pgmem_app" if kind == "app" else "pgmem_reader"
            can = {h["proname"] for h in helpers if scalar(env.su, "select has_function_privilege(%s, %s, 'execute')",
                                                            (role, h["sig"]))}
            if kind == "app":
                assert can == allowed, f"app may execute {sorted(can - allowed)}; not {sorted(allowed - can)}"
            else:
                assert can <= allowed, f"reader may execute {sorted(can - allowed)}"
        # build_context still works for the app (it is SECURITY DEFINER and bounds the knapsack)
        assert rows(app, "select * from pgmem.build_context('milk', token_budget => 100)")


# SECURITY DEFINER functions a view may call: they return the session's own tenant's data only
VIEW_SAFE_DEFINERS = ["current_tenant", "_setting", "_check_category",
                      # clusters (sql/340_cluster_views.sql, views cluster_members / cluster_overview): each
                      # is one SQL statement filtered on `tenant = (select pgmem.current_tenant()) or
                      # (select pgmem._is_admin())` (as the row-level policies: admins see every row),
                      # joining memories and clusters on equal tenants; another tenant's memory or cluster
                      # id gives NULL / '[]' (tests/test_tenancy.py, cluster_confidence check)
                      "cluster_confidence", "cluster_top_members",
                      # the tier views' fact statement (sql/330_tier_views.sql, issue 35): filtered on
                      # the caller's tenant (or an admin), NULL for a login that reads no content
                      "_fact_statement"]

# the private helpers pgmem_app may execute (sql/900_security.sql, app_helpers, with reasons)
ALLOWED_HELPERS = [
    "_require_tenant", "_check_registered", "_is_admin", "_bad_input", "_check_between", "_check_unit", "_check_time", "_check_embedding",
    "_check_category", "_setting", "_setting_num", "_setting_bool", "_words", "_content_key", "_scope_key",
    "_lexeme_query", "_get_for_update", "_snapshot", "_set_op", "_op_details", "_profile", "_effective_weights",
    "_search", "_activate",
    # writejobs: pure size checks of update_memory/forget/restore's reason; the constant job registry
    "_check_reason", "_check_bytes", "_jobs",
    # scaleout (issue 19): touch/search(touch) on a hot standby raise 25006 naming the primary (reads settings only)
    "_standby_refuses", "_primary_address",
    # read path (201): the lexical statistics of the caller's tenant, bounded by their arguments
    "_lexicon_df", "_lexical_probe", "_query_actors", "_month",
    # integrations (issue 26): pure helpers of list_memories and the items
    "_filter_strings", "_item_key", "_item_path", "_check_namespace", "_item_matches",
    # issue 24 (110): restore of a purged memory, SECURITY DEFINER, the caller's tenant's history only
    "_restore_from_history",
    # issue 29 (200): the time grammar's pure helpers (text and dates in, a window out), read by _query
    "_time_text", "_named_day", "_time_kinds", "_time_regex", "_time_kind_names", "_time_kind", "_time_period",
    "_time_window_first",
    # reliability (issue 27): the argument limits (sql/015_limits.sql): pure size checks, settings read, no writes
    "_too_big", "_over_limit", "_limit", "_check_text", "_check_chars", "_check_json", "_check_items", "_fits",
    "_check_args", "_argument_limits", "_check_read_args", "_check_activate_args", "_invalid", "_unit_ok", "_check_positive",
    "_reads_content",
    # issue 32 (200): mem0's filter operators parsed for list_memories (a jsonpath from a string);
    # issue 35 (330): a fact's statement for the tier views (SECURITY DEFINER, tenant-checked)
    "_filter_path", "_fact_statement"]


# ============================================================== attacker: the admin role
class TestAdmin:
    @pytest.mark.parametrize("attack", [
        "create function pg_temp.f() returns trigger language plpgsql as $$begin return new; end$$;"
        " create trigger evil before insert on pgmem.memories for each row execute function pg_temp.f()",
        "create rule evil as on insert to pgmem.memories do also notify evil",
        "create policy evil on pgmem.memories using (true)",
        "alter table pgmem.memories disable row level security",
        "truncate pgmem.history",
        "truncate pgmem.memories cascade",
        "create table public.evil_fk (id bigint references pgmem.memories (id))",
        "alter table pgmem.memories add column evil text",
        "create function pgmem.evil() returns int language sql as 'select 1'",
        "update pgmem.py_modules set source = 'import os' where name = 'packing'",
        "insert into pgmem.history (tenant, memory_id, op) values ('b', 1, 'merge')",
        "select * from pgmem.claim_keys",
    ])
    def test_cannot_become_superuser(self, env, attack):
        """High 2: `grant all` included TRIGGER: a trigger (with a function in pg_temp) on
        pgmem.memories ran with the rights of the next superuser session that wrote."""
        admin = env.login("admin", "a")
        refused(admin, attack, sqlstate="42501")

    def test_no_table_accepts_a_trigger_rule_or_policy_from_the_admin(self, env):
        """High 2 on every table of the catalog (tables other files add included)."""
        admin = env.login("admin", "a")
        admin.execute("create function pg_temp.f() returns trigger language plpgsql as $$begin return new; end$$")
        tables = [r[0] for r in env.su.execute(
            "select format('%I.%I', n.nspname, c.relname) from pg_class c join pg_namespace n on n.oid = c.relnamespace"
            " where n.nspname = 'pgmem' and c.relkind in ('r', 'p') order by 1")]
        assert len(tables) >= 15
        for t in tables:
            for attack in (f"create trigger evil before insert on {t} for each row execute function pg_temp.f()",
                           f"create rule evil as on insert to {t} do also notify evil",
                           f"create policy evil on {t} using (true)",
                           f"alter table {t} disable row level security",
                           f"truncate {t} cascade"):
                refused(admin, attack, sqlstate="42501")

    def test_owner_is_not_a_superuser(self, env):
        owner = rows(env.su, """select r.rolname, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls
                                  from pg_class c join pg_roles r on r.oid = c.relowner where c.oid = 'pgmem.memories'::regclass""")[0]
        assert owner == {"rolname": "pgmem_owner", "rolsuper": False, "rolcreaterole": False, "rolcreatedb": False,
                         "rolbypassrls": False}
        admin = env.login("admin", "a")
        assert not scalar(admin, "select pg_has_role('pgmem_owner', 'member')")
        # no table grants TRIGGER, TRUNCATE or REFERENCES to anyone but the owner
        bad = rows(env.su, """
            select c.relname, a.grantee::regrole::text as grantee, a.privilege_type
              from pg_class c join pg_namespace n on n.oid = c.relnamespace, aclexplode(c.relacl) a
             where n.nspname = 'pgmem' and a.privilege_type in ('TRIGGER', 'TRUNCATE', 'REFERENCES')
               and a.grantee <> c.relowner""")
        assert bad == []

    def test_admin_still_runs_the_jobs(self, env):
        admin = env.login("admin", None)
        admin.execute("call pgmem.run_job('merge', '{\"tenant\": \"*\"}')")
        assert scalar(env.su, "select status from pgmem.job_runs where job = 'merge' order by id desc limit 1") == "ok"
        assert {r["tenant"] for r in rows(admin, "select tenant from pgmem.tenant_stats")} == {"a", "b"}
        assert scalar(admin, "select pgmem.grant_tenant(%s, 'b')", (env.logins["app"][0],))
        app = env.login("app", "b")
        assert scalar(app, "select count(*) from pgmem.memories") == 1


# ============================================================== attacker: the reader role
VICTIM = "victimcorp"  # tenant b's name in the view tests: it is in every row of b a view could show


@pytest.fixture
def views_env(cluster, dsn, logins):
    """Tenant a (the reader's) and tenant victimcorp, each with memories, accesses, queued
    memories and job runs, so that every view has rows of both."""
    su = connect(dsn, tenant=None)
    su.execute("select pgmem.grant_tenant(%s, 'a')", (logins["reader"][0],))
    for t in ("a", VICTIM):
        with connect(dsn, tenant=t) as c:
            ids = [c.execute("select memory_id from pgmem.remember(%s, user_id => %s, session_id => %s)",
                             (f"{t} memory number {i} about {w}", f"{t}-user", f"{t}-session")).fetchone()[0]
                   for i, w in enumerate(["kites", "boats", "trains"])]
            c.execute("select pgmem.touch(%s::bigint[])", (ids,))
            c.execute("call pgmem.run_job('prune', '{\"dry_run\": true}')")
    yield su
    su.close()


def view_names(conn) -> list[str]:
    return [r[0] for r in conn.execute(
        "select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = 'pgmem' and c.relkind in ('v', 'm') order by 1")]


class TestReader:
    def test_views_are_barriers_that_run_as_their_reader(self, dsn, views_env):
        """High 3 (the fix, on every view of the catalog: views other files add included)."""
        su = views_env
        bad = [r for r in rows(su, """
            select c.relname, c.reloptions from pg_class c join pg_namespace n on n.oid = c.relnamespace
             where n.nspname = 'pgmem' and c.relkind = 'v'
               and not (coalesce(c.reloptions, '{}') @> array['security_barrier=true', 'security_invoker=true'])""")]
        assert bad == []

    def test_views_read_only_what_row_level_security_guards(self, views_env):
        """The leak tests below see only tables this fixture fills; this one covers every view
        of the catalog structurally: a view (security_invoker) can only show another tenant's
        rows through a table without row-level security or a SECURITY DEFINER function (which
        runs as the owner, whom the policies do not bind). Neither may appear under a view,
        directly or through the SQL functions it calls."""
        deps = rows(views_env, """
            with recursive v as (
              select c.oid, c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
               where n.nspname = 'pgmem' and c.relkind in ('v', 'm')),
            d(view, classid, objid) as (
              select v.relname, d.refclassid, d.refobjid from v
                join pg_rewrite w on w.ev_class = v.oid
                join pg_depend d on d.classid = 'pg_rewrite'::regclass and d.objid = w.oid
              union
              select d.view, x.refclassid, x.refobjid from d
                join pg_depend x on d.classid = 'pg_proc'::regclass and x.classid = 'pg_proc'::regclass
                                and x.objid = d.objid)
            select distinct d.view, coalesce(c.relname, p.proname) as obj,
                   case when c.oid is not null then 'table without row-level security'
                        else 'SECURITY DEFINER function' end as why
              from d
              left join pg_class c on d.classid = 'pg_class'::regclass and c.oid = d.objid and c.relkind in ('r', 'p')
                                   and not c.relrowsecurity
              left join pg_proc p on d.classid = 'pg_proc'::regclass and p.oid = d.objid and p.prosecdef
             where c.oid is not null or (p.oid is not null and p.proname <> all (%s))""", (VIEW_SAFE_DEFINERS,))
        assert deps == [], deps

    def test_no_view_leaks_through_a_failing_cast(self, cluster, dsn, logins, views_env):
        """High 3: as pgmem_reader in tenant a, `where tenant::int = 1` on memory_health put
        tenant b's values into the error message."""
        reader = _reader(cluster, dsn, logins)
        seen = 0
        for view in view_names(views_env):
            cols = [r["attname"] for r in rows(views_env, """
                select a.attname from pg_attribute a where a.attrelid = %s::regclass and a.attnum > 0
                   and not a.attisdropped and format_type(a.atttypid, a.atttypmod) in ('text', 'character varying', 'name')""",
                (f"pgmem.{view}",))]
            for col in cols:
                try:
                    with reader.transaction():
                        reader.execute(sql.SQL("select * from pgmem.{} where {}::int = 1").format(
                            sql.Identifier(view), sql.Identifier(col))).fetchall()
                except psycopg.errors.InvalidTextRepresentation as e:
                    seen += 1
                    assert VICTIM not in str(e), f"{view}.{col}: {e}"
        assert seen > 0  # the trick ran (on tenant a's own rows)

    def test_no_view_leaks_to_a_leaky_function(self, cluster, dsn, logins, views_env):
        """High 3: a cheap pg_temp function in the WHERE clause printed every row of every
        tenant as NOTICEs (memory_health, category_stats, tenant_stats, job_status)."""
        reader = _reader(cluster, dsn, logins)
        notices: list[str] = []
        reader.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        reader.execute("""create function pg_temp.leak(r text) returns boolean language plpgsql cost 0.0000001
                          as $$ begin raise notice 'row: %', r; return true; end $$""")
        counted = {}
        for view in view_names(views_env):
            before = len(notices)
            got = reader.execute(sql.SQL("select v.* from pgmem.{} v where pg_temp.leak(v::text)").format(
                sql.Identifier(view))).fetchall()
            counted[view] = (len(got), len(notices) - before)
        leaked = [n for n in notices if VICTIM in n]
        assert leaked == [], leaked[:3]
        assert any(n for n, _ in counted.values()), counted  # the reader does see its own rows
        # the su sees the victim's rows in the same views: the test would have caught a leak
        assert all(VICTIM in json.dumps(rows(views_env, sql.SQL("select * from pgmem.{}").format(sql.Identifier(v))),
                                        default=str)
                   for v in ("memory_health", "category_stats", "tenant_stats", "job_status"))

    def test_reader_reads_views_not_content(self, cluster, dsn, logins, views_env):
        reader = _reader(cluster, dsn, logins)
        assert {r["tenant"] for r in rows(reader, "select * from pgmem.tenant_stats")} == {"a"}
        refused(reader, "select content from pgmem.memories", match="permission denied")
        refused(reader, "select embedding from pgmem.memories", match="permission denied")
        refused(reader, "select * from pgmem.history", match="permission denied")
        refused(reader, "select * from pgmem.search('kites')", match="permission denied")
        # what it may read of the tables is its own tenant's
        assert {r["tenant"] for r in rows(reader, "select tenant from pgmem.memories")} == {"a"}


def _reader(cluster, dsn, logins) -> psycopg.Connection:
    name, pw = logins["reader"]
    c = psycopg.connect(host="127.0.0.1", port=cluster.port, user=name, password=pw,
                        dbname=conninfo_to_dict(dsn)["dbname"], autocommit=True, options="-c pgmem.tenant=a")
    return c


# ============================================================== attacker: another tenant
class TestAnotherTenant:
    def test_session_limits_cannot_be_switched_off(self, env):
        """Medium (no time limits): a tenant's session ran statements of 30 to 110 s; now an app
        or reader session must keep statement_timeout and idle_in_transaction_session_timeout
        on and within the installation's maxima."""
        app = env.login("app", "a")
        assert scalar(app, "select count(*) from pgmem.memories") == 1
        for setting, value in (("statement_timeout", "0"), ("statement_timeout", "10min"),
                               ("idle_in_transaction_session_timeout", "0"), ("idle_in_transaction_session_timeout", "1h")):
            app.execute(f"set {setting} = '{value}'")
            e = refused(app, "select count(*) from pgmem.memories", match=f"{setting} is")
            assert "ALTER ROLE" in e.diag.message_hint
            refused(app, "select * from pgmem.search('milk')", match=f"{setting} is")
            app.execute(f"reset {setting}")
            app.execute(f"set {setting} = '30s'")
        assert scalar(app, "select count(*) from pgmem.memories") == 1
        # a tenant cannot raise its own ceiling; the installation's is the admin's
        refused(app, "insert into pgmem.settings (tenant, key, value) values ('a', 'max_statement_timeout_ms', '0')",
                match="permission denied")
        env.su.execute("update pgmem.settings set value = '0' where tenant = '*' and key = 'max_statement_timeout_ms'")
        app.execute("set statement_timeout = 0")
        assert scalar(app, "select count(*) from pgmem.memories") == 1

    def test_unregistered_tenants_cannot_write(self, env):
        """Low: with enforce_tenants = true, a plain INSERT naming an unregistered tenant succeeded."""
        env.su.execute("update pgmem.settings set value = 'true' where tenant = '*' and key = 'enforce_tenants'")
        env.su.execute("insert into pgmem.tenants (tenant) values ('a')")
        admin = env.login("admin", "a")
        refused(admin, "insert into pgmem.memories (tenant, content) values ('ghost', 'x')", "22023", 'unknown tenant "ghost"')
        refused(env.su, "insert into pgmem.memories (tenant, content) values ('ghost', 'x')", "22023", 'unknown tenant "ghost"')
        app = env.login("app", "a")
        assert scalar(app, "insert into pgmem.memories (content) values ('a registered tenant writes') returning tenant") == "a"
        assert scalar(admin, "insert into pgmem.memories (tenant, content) values ('a', 'named') returning tenant") == "a"

    def test_a_plain_driver_session_starts_inside_the_limits(self, env):
        """grant_tenant gave the login its timeouts (ALTER ROLE ... IN DATABASE ... SET), so a
        session that sets nothing (psql, a BI tool) works; set_session_limits says what to run
        when its caller may not alter the role."""
        app = env.login("app", "a")
        assert scalar(app, "show statement_timeout") == "30s"
        assert scalar(app, "show idle_in_transaction_session_timeout") == "1min"
        assert scalar(app, "select count(*) from pgmem.memories") == 1
        admin = env.login("admin", None)
        notices: list[str] = []
        admin.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert scalar(admin, "select pgmem.set_session_limits(%s)", (env.logins["app"][0],)) is False
        assert notices and "a superuser runs: alter role" in notices[-1], notices
        assert scalar(admin, "select pgmem.set_session_limits('pgmem_app')") is False
        assert "is not a login" in notices[-1]

    def test_limits_do_not_bind_the_admin(self, env):
        admin = env.login("admin", "b", statement_timeout="0", idle_in_transaction_session_timeout="0")
        assert scalar(admin, "select count(*) from pgmem.memories where tenant = 'b'") == 1

    @pytest.mark.parametrize("params, message", [
        ({"recency_half_life_days": 0}, "params.recency_half_life_days must be a number of days above 0"),
        ({"usage_half_life_days": -3}, "params.usage_half_life_days must be a number of days above 0"),
        ({"half_life_days": "thirty"}, "params.half_life_days must be a number of days above 0"),
        ({"actor_mismatch": 50}, "params.actor_mismatch must be a number between 0 and 1"),
        ({"thresholds": {"query": 1.5}}, "params.thresholds.query must be a number between 0 and 1"),
        ({"access_cap": 0}, "params.access_cap must be a number >= 1"),
    ])
    def test_profile_params_are_checked_when_written(self, env, params, message):
        """Medium: half-life 0 gave 22012 at search time; actor_mismatch 50 a score of 25.5."""
        app = env.login("app", "a")
        e = refused(app, "insert into pgmem.profiles (tenant, name, method, params) values ('a', 'mine', 'search', %s::jsonb)",
                    "22023", message, params=(json.dumps(params),))
        assert 'profile "mine" (tenant a)' in str(e)
        refused(env.su, "update pgmem.profiles set params = params || %s::jsonb where tenant = '*' and name = 'jam'",
                "22023", message, params=(json.dumps(params),))

    def test_profile_weights_are_checked_when_written(self, env):
        app = env.login("app", "a")
        refused(app, "insert into pgmem.profiles (tenant, name, method, weights) values ('a', 'w', 'search', '{\"semantic\": 0.5}')",
                "22023", "weights must sum to 1")
        refused(app, "insert into pgmem.profiles (tenant, name, method, weights) values ('a', 'w', 'search', "
                     "'{\"semantic\": 1.5, \"lexical\": -0.5}')", "22023", 'weight "lexical" must be a number >= 0')
        app.execute("insert into pgmem.profiles (tenant, name, method, weights, params) values ('a', 'w', 'search', "
                    "'{\"semantic\": 0.7, \"lexical\": 0.3}', '{\"recency_half_life_days\": 7, \"actor_mismatch\": 0}')")
        assert rows(app, "select * from pgmem.search('milk', profile => 'w')")


# ============================================================== the app, through the client
class TestClient:
    def test_tenant_cannot_inject_connection_options(self, env):
        """Medium (connection-option injection): MemoryClient(tenant="a -c pgmem.tenant=b")
        ran as b (the tenant was pasted into libpq's options unquoted); tenant="acme corp"
        hung for 30 s, then raised PoolTimeout."""
        from pgmem.client import MemoryClient
        from pgmem.errors import ConfigError

        for bad in ("a -c pgmem.tenant=b", "acme corp", "a'b", "", "*", "x" * 65, None, 7):
            t = time.monotonic()
            with pytest.raises(ConfigError, match="invalid tenant name"):
                MemoryClient(env.dsn, tenant=bad, embedder=None)
            assert time.monotonic() - t < 1.0
        # a valid tenant is set with set_config, whatever the login may do with it
        with MemoryClient(_login_dsn(env, "app"), tenant="a", embedder=None) as mem:
            assert mem.call("current_tenant")[0]["current_tenant"] == "a"
        with MemoryClient(_login_dsn(env, "app"), tenant="b", embedder=None) as mem:
            # the client raises pgmem.errors.TenantError (SQLSTATE 42501) from the server's error
            with pytest.raises(TenantError, match='may not act for tenant "b"') as ei:
                mem.search("vault code")
            assert isinstance(ei.value.__cause__, psycopg.errors.InsufficientPrivilege)

    def test_keyword_names_do_not_reach_the_sql(self, env):
        """Low: remember(**{"force => true, who => current_user::text, what": "x"}) ran the
        expression: argument names were pasted into the SQL."""
        from pgmem.client import MemoryClient
        from pgmem.errors import PgmemError

        with MemoryClient(_login_dsn(env, "app"), tenant="a", embedder=None) as mem:
            before = scalar(env.su, "select count(*) from pgmem.memories")
            with pytest.raises(PgmemError, match="is not an argument name of pgmem.remember"):
                mem.remember("x", **{"force => true, who => current_user::text, what": "x"})
            with pytest.raises(PgmemError, match="pgmem.remember has no argument 'colour'; its arguments are: "):
                mem.remember("x", colour="red")
            with pytest.raises(PgmemError, match="has no argument 'bogus'"):
                mem.call("search", query_text="milk", bogus=1)
            with pytest.raises(PgmemError, match="has no argument 'pick'"):  # an output column, not an argument
                mem.call("build_context", query_text="milk", pick=1)
            with pytest.raises(PgmemError, match="is not a pgmem function name"):
                mem.call("search(); drop table pgmem.memories; --")
            with pytest.raises(PgmemError, match="pgmem._pack does not exist"):
                mem.call("_pack")
            assert scalar(env.su, "select count(*) from pgmem.memories") == before
            assert mem.remember("a new note of a about kites").stored

    def test_shared_role_client_with_claims(self, env):
        from pgmem.claims import sign_tenant_claim
        from pgmem.client import MemoryClient

        key = bytes(scalar(env.su, "select pgmem.add_claim_key('default')"))
        with MemoryClient(_login_dsn(env, "shared"), tenant_claim=sign_tenant_claim(key, "a", ttl=60),
                          embedder=None) as mem:
            assert mem.tenant == "a"
            assert [h.id for h in mem.search("milk")] == [env.a_id]
            mem.set_tenant_claim(sign_tenant_claim(key, "b", ttl=60))
            assert [h.id for h in mem.search("vault code")] == [env.b_id]
            mem.set_tenant_claim(sign_tenant_claim(secrets.token_bytes(32), "a", ttl=60))
            with pytest.raises((psycopg.Error, PermissionError), match="wrong signature"):
                mem.search("milk")

    def test_passwords_are_not_printed(self, env):
        """Low: a malformed DSN's error printed the password."""
        from pgmem.client import MemoryClient
        from pgmem.errors import PgmemError

        for dsn in ("postgresql://u:sek rit@127.0.0.1:1/db", "host=127.0.0.1 password='sekrit",
                    "postgresql://u:sekrit@127.0.0.1:1/db?bogus=1"):
            with pytest.raises(PgmemError) as ei:
                MemoryClient(dsn, tenant="a", embedder=None)
            assert "sek" not in str(ei.value) and "****" in str(ei.value), ei.value


def _login_dsn(env, kind: str) -> str:
    from urllib.parse import quote

    name, pw = env.logins[kind]
    return f"postgresql://{name}:{quote(pw, safe='')}@127.0.0.1:{env.cluster.port}/{conninfo_to_dict(env.dsn)['dbname']}"


class TestEmbeddedOwner:
    def test_worker_and_cron_run_as_the_owner_not_a_superuser(self, cluster):
        """High 2: the worker, the CLI, the migrations and pg_cron all wrote as the superuser
        in the embedded set-up. Now the client's default DSN is the owner role's (migrations
        keep the superuser's), and pg_cron jobs scheduled through it run as the owner."""
        from conftest import CRON_DB

        cluster.ensure_owner_login(CRON_DB)
        with psycopg.connect(cluster.owner_dsn(CRON_DB), autocommit=True) as owner:
            assert scalar(owner, "select rolsuper from pg_roles where rolname = current_user") is False
            assert scalar(owner, "select current_user") == "pgmem_owner"
            name = f"pgmem-test-{uuid.uuid4().hex[:8]}"
            jobid = scalar(owner, "select cron.schedule_in_database(%s, '0 0 1 1 *', 'select 1', %s)", (name, CRON_DB))
            try:
                assert scalar(owner, "select username from cron.job where jobid = %s", (jobid,)) == "pgmem_owner"
            finally:
                owner.execute("select cron.unschedule(%s)", (jobid,))
        assert "pgmem_owner:****@" in cluster.owner_dsn(mask=True)


class TestHistory:
    def test_unmerge_reads_only_its_tenants_history(self, env):
        """Medium (forged history): a forged 'merge' row for tenant b's memory made b's unmerge
        zero an access count and add a link of weight 99. The app can no longer write history
        (TestApp.test_cannot_write_history); and should a row of another tenant name b's memory
        (written here by the superuser), unmerge does not read it."""
        import numpy as np

        v = np.zeros(384, dtype=np.float32)
        v[3] = 1.0
        w = v.copy()
        w[4] = 0.05
        with connect(env.dsn, tenant="b") as b:
            keep = b.execute("select memory_id from pgmem.remember('the vault is in the cellar', %s::vector, "
                             "importance => 0.9, force => true)", (v,)).fetchone()[0]
            gone = b.execute("select memory_id from pgmem.remember('the vault sits in the cellar', %s::vector, "
                             "importance => 0.2, force => true)", (w / np.linalg.norm(w),)).fetchone()[0]
            b.execute("select pgmem.touch(array[%s, %s]::bigint[])", (keep, gone))
            merged = b.execute("select survivor_id, merged_id from pgmem.merge_duplicates(threshold => 0.9)").fetchall()
            assert (keep, gone) in merged, merged
            survivor_count = scalar(b, "select access_count from pgmem.memories where id = %s", (keep,))
        env.su.execute("insert into pgmem.history (tenant, memory_id, op, details) values ('a', %s, 'merge', %s::jsonb)",
                       (gone, json.dumps({"role": "merged", "survivor_id": keep, "access_count_added": survivor_count,
                                          "links": [{"src_id": gone, "dst_id": env.b_id, "weight": -99, "count": -1}]})))
        admin = env.login("admin", "b")
        assert rows(admin, "select state from pgmem.unmerge(%s)", (gone,))[0]["state"] == "active"
        assert scalar(env.su, "select access_count from pgmem.memories where id = %s", (keep,)) == survivor_count - 1
        assert scalar(env.su, "select count(*) from pgmem.links where weight > 50 or weight < 0") == 0


# ============================================================== issue 27: the Lows (L1, L2)
class TestClaimExpiry:
    def test_an_expired_claim_stops_inside_an_open_transaction(self, env):
        """L1: `exp` was compared with now(), the transaction's start: a claim that expired 3 s in
        worked 77 s later inside the same transaction. clock_timestamp() now: the next statement
        after the expiry is refused."""
        key = bytes(scalar(env.su, "select pgmem.add_claim_key('default')"))
        shared = env.login("shared", None)
        token = sign(key, {"tenant": "a", "exp": int(time.time()) + 2})
        with shared.transaction():
            shared.execute("select set_config('pgmem.tenant_claim', %s, true)", (token,))
            assert scalar(shared, "select pgmem.current_tenant()") == "a"
            time.sleep(3.2)
            with pytest.raises(psycopg.Error) as ei:
                shared.execute("select count(*) from pgmem.memories").fetchall()
            assert ei.value.sqlstate == "28000" and "expired" in str(ei.value)

    def test_an_expired_key_stops_inside_an_open_transaction(self, env):
        key = bytes(scalar(env.su, "select pgmem.add_claim_key('short', expires_at => clock_timestamp() + interval '2 seconds')"))
        shared = env.login("shared", None)
        token = sign(key, {"tenant": "a", "exp": int(time.time()) + 600}, {"alg": "HS256", "kid": "short"})
        with shared.transaction():
            shared.execute("select set_config('pgmem.tenant_claim', %s, true)", (token,))
            assert scalar(shared, "select pgmem.current_tenant()") == "a"
            time.sleep(2.5)
            with pytest.raises(psycopg.Error) as ei:
                shared.execute("select pgmem.current_tenant()").fetchall()
            assert ei.value.sqlstate == "28000"


CONTENT_MARK = "q7x9content"  # in every memory's content of the reader's tenant: a leak shows it

# SECURITY DEFINER functions pgmem_reader may execute (through the functions its views call):
# they run as the owner, past the column privileges that keep content from the reader, so each
# is reviewed here and called by the test below with every id of the reader's tenant.
READER_DEFINERS = {"current_tenant", "_setting", "_check_category", "cluster_confidence", "cluster_top_members",
                   "_fact_statement"}  # (issue 35: NULL for the reader, tests/test_tenancy.py)


@pytest.fixture
def clusters_env(cluster, dsn, logins):
    """Tenant a (the reader's) with embedded memories in clusters, their content marked."""
    import numpy as np

    su = connect(dsn, tenant=None)
    su.execute("select pgmem.grant_tenant(%s, 'a')", (logins["reader"][0],))
    su.execute("select pgmem.grant_tenant(%s, 'a')", (logins["app"][0],))
    rng = np.random.default_rng(9)
    with connect(dsn, tenant="a") as a:
        for i in range(30):
            v = rng.normal(size=384)
            a.execute("select pgmem.remember(%s, %s::vector, force => true)",
                      (f"{CONTENT_MARK} memory {i} about kites and boats", (v / np.linalg.norm(v)).astype(np.float32)))
        a.execute("call pgmem.run_job('cluster', '{\"tenant\": \"a\"}')")
        assert a.execute("select count(*) from pgmem.memories where cluster_id is not null").fetchone()[0] == 30
    yield su
    su.close()


class TestReaderContent:
    def test_cluster_top_members_gives_the_reader_no_content(self, cluster, dsn, logins, clusters_env):
        """L2: pgmem_reader read 200 characters of 371 of 1,194 memories through
        cluster_top_members(id, 100) (and the cluster_overview view)."""
        reader = _reader(cluster, dsn, logins)
        ids = [r[0] for r in reader.execute("select cluster_id from pgmem.cluster_overview where state = 'active'")]
        assert ids
        seen = 0
        for cid in ids:
            got = scalar(reader, "select pgmem.cluster_top_members(%s, 100)", (cid,))
            assert all(set(m) == {"id", "content", "confidence"} and m["content"] is None for m in got), got[:2]
            seen += len(got)
        assert seen == 30  # every member was listed, none with its words
        # (a cluster's label and top terms are the words its members share most: an aggregate the
        # BI views show by design, SECURITY.md; the members themselves are not shown)
        overview = json.dumps([r["top_members"] for r in rows(reader, "select top_members from pgmem.cluster_overview")])
        assert CONTENT_MARK not in overview and "kites and boats" not in overview
        # the app (and the explorer page, through list_clusters) still sees the members' words
        name, pw = logins["app"]
        with psycopg.connect(host="127.0.0.1", port=cluster.port, user=name, password=pw, autocommit=True,
                             dbname=conninfo_to_dict(dsn)["dbname"], options="-c pgmem.tenant=a") as app:
            assert CONTENT_MARK in json.dumps([scalar(app, "select pgmem.cluster_top_members(%s, 100)", (i,)) for i in ids])

    def test_no_function_the_reader_may_execute_returns_content(self, cluster, dsn, logins, clusters_env):
        """L2, the catalog's side: every function pgmem_reader may EXECUTE. A SECURITY INVOKER one
        runs with the reader's column privileges (no content); each SECURITY DEFINER one is in
        READER_DEFINERS and is called with every memory and cluster id of the reader's tenant."""
        su = clusters_env
        reader_role = logins["reader"][0]
        can = rows(su, """select p.proname, p.prosecdef, p.oid::regprocedure::text as sig, pg_get_function_identity_arguments(p.oid) as args
                            from pg_proc p where p.pronamespace = 'pgmem'::regnamespace
                             and has_function_privilege(%s, p.oid, 'EXECUTE')""", (reader_role,))
        definers = {r["proname"] for r in can if r["prosecdef"]}
        assert definers <= READER_DEFINERS, f"review these SECURITY DEFINER functions the reader may run: {sorted(definers - READER_DEFINERS)}"
        reader = _reader(cluster, dsn, logins)
        memory_ids = [r[0] for r in su.execute("select id from pgmem.memories where tenant = 'a'")]
        cluster_ids = [r[0] for r in su.execute("select id from pgmem.clusters where tenant = 'a'")]
        out = []
        for mid in memory_ids:
            out.append(scalar(reader, "select pgmem.cluster_confidence(%s)", (mid,)))
        for cid in cluster_ids:
            out.append(scalar(reader, "select pgmem.cluster_top_members(%s, 100)", (cid,)))
        if "_setting" in definers:
            for key in ("embedding_dim", "search_profile", "max_content_bytes"):
                out.append(scalar(reader, "select pgmem._setting(%s)", (key,)))
        if "_check_category" in definers:
            out.append(scalar(reader, "select pgmem._check_category('fact')"))
        if "_fact_statement" in definers:
            for (fid,) in su.execute("select id from pgmem.profile_facts where tenant = 'a'").fetchall():
                out.append(scalar(reader, "select pgmem._fact_statement(%s)", (fid,)))
        assert {"cluster_confidence", "cluster_top_members"} <= definers  # (the test called what the reader can)
        assert CONTENT_MARK not in json.dumps(out, default=str)
        # and the reader still reads no content column itself
        refused(reader, "select content from pgmem.memories", match="permission denied")
