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
from psycopg.rows import dict_row

from conftest import connect


# ------------------------------------------------------------------------------ logins
@pytest.fixture(scope="module")
def logins(cluster):
    suffix = uuid.uuid4().hex[:10]
    made: dict[str, tuple[str, str]] = {}
    with connect(cluster.dsn("postgres"), tenant=None) as su:
        for kind, grant in (("app", "pgmem_app"), ("shared", "pgmem_app"), ("reader", "pgmem_reader"),
                            ("admin", "pgmem_admin")):
            name, pw = f"adv_{kind}_{suffix}", secrets.token_urlsafe(18)
            su.execute(sql.SQL("create role {} login password {}").format(sql.Identifier(name), sql.Literal(pw)))
            su.execute(sql.SQL("grant {} to {}").format(sql.Identifier(grant), sql.Identifier(name)))
            made[kind] = (name, pw)
    yield made
    with connect(cluster.dsn("postgres"), tenant=None) as su:
        for name, _ in made.values():
            su.execute("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (name,))
            su.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(name)))


class Env:
    """A fresh database with tenant b's data, and connections as each login (tenant a)."""

    def __init__(self, cluster, dsn, logins):
        self.cluster, self.dsn, self.logins = cluster, dsn, logins
        self.su = connect(dsn, tenant=None)
        self.opened: list[psycopg.Connection] = [self.su]
        for kind in ("app", "reader"):
            self.su.execute("select pgmem.grant_tenant(%s, 'a')", (logins[kind][0],))
        with connect(dsn, tenant="b") as b:
            self.b_id = b.execute("select memory_id from pgmem.remember('tenant b secret: the vault code is 4711')").fetchone()[0]
        with connect(dsn, tenant="a") as a:
            self.a_id = a.execute("select memory_id from pgmem.remember('tenant a note: buy milk')").fetchone()[0]

    def login(self, kind: str, tenant: str | None = "a", **options) -> psycopg.Connection:
        name, pw = self.logins[kind]
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


def scalar(conn, q, params=()):
    return conn.execute(q, params).fetchone()[0]


def rows(conn, q, params=()):
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(q, params)
        return cur.fetchall() if cur.description else []


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

    def test_private_helpers_are_not_executable(self, env):
        """High 5 (privilege half): pgmem._pack was executable by the app role and skipped
        build_context's caps. Every private helper outside the audited allowlist is refused."""
        app = env.login("app", "a")
        refused(app, "select * from pgmem._pack(array[1.0], array[0.1]::real[], 1, array[150000000], array[1.0], 150000000, 0.5)",
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


# the private helpers pgmem_app may execute (sql/900_security.sql, app_helpers, with reasons)
ALLOWED_HELPERS = [
    "_require_tenant", "_is_admin", "_bad_input", "_check_between", "_check_unit", "_check_time", "_check_embedding",
    "_check_category", "_setting", "_setting_num", "_setting_bool", "_words", "_content_key", "_scope_key",
    "_lexeme_query", "_get_for_update", "_snapshot", "_set_op", "_op_details", "_profile", "_effective_weights",
    "_search", "_activate"]


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
