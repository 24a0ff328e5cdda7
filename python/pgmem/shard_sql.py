"""Tenant shards on PL/Proxy (issue 19, part 2): the SQL, generated from a shard's catalog.

The orchestration (clusters, the partition map, splitting) is :mod:`pgmem.shards`; this module
only reads a catalog and writes SQL text, and imports nothing of pgmem.

A *proxy database* exposes pgmem's public functions and views with the same names and
signatures as a single server, and routes every call with PL/Proxy to the partition that holds
the session's tenant: ``CLUSTER 'pgmem'; RUN ON hashtext(tenant)``. Each partition is a normal
pgmem install (a shard), plus a schema ``pgmem_shard`` of thin call targets. Nothing here moves
data or plans queries: PL/Proxy does the remote calls, PostgreSQL does the rest.

How a call runs as the caller's tenant (the tenant is a session setting, RULES.md 1):

1. ``pgmem.F(args)`` on the proxy (PL/pgSQL, generated) reads the session's tenant (or signed
   claim) and its timeouts with ``pgmem_proxy._session()``, which refuses a missing or malformed
   tenant *at the proxy*, before any shard is contacted.
2. It calls ``pgmem_proxy.F(tenant, claim, statement_timeout, idle_timeout, args)``, a PL/Proxy
   function: ``CLUSTER 'pgmem'; RUN ON hashtext(tenant); TARGET pgmem_shard.F``. PL/Proxy connects
   to the partition as the *same login* (it appends ``user=current_user``), so the shard checks
   that login's grants itself.
3. ``pgmem_shard.F(tenant, claim, ..., args)`` on the shard (SQL, SECURITY INVOKER) sets
   ``pgmem.tenant`` / ``pgmem.tenant_claim`` and the timeouts *for its transaction only*
   (set_config(..., true)) and calls ``pgmem.F(args)``: the shard's ``current_tenant()`` verifies
   the login's grant or the claim's signature exactly as on a single server (42501 otherwise), and
   row-level security applies. The proxy holds no data and grants nothing.

Tenant ``'*'`` (administrators: installation-wide rows and every tenant) runs set-returning
functions and views on ALL partitions and concatenates the rows: each tenant lives on exactly
one partition, so per-tenant rows (tenant_stats, job results) merge by concatenation. Functions
that configure the installation (grants, claim keys, session limits, schedules) always run on
all partitions. Pure functions (IMMUTABLE) run on any partition.

The wrappers are generated from a shard's catalog (``install_proxy``): a public function added
to pgmem later is covered by re-running ``pgmem db shards up`` (or ``install_proxy``). This is
the "generated from the catalog" option for the 8xx layer: no sql/8xx file is
applied to normal installs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CLUSTER_NAME", "PROXY_SCHEMA", "SHARD_SCHEMA", "SESSION_ARGS", "RUN_ON_ALL", "KEEP_ON_SPLIT", "APP_ROLES",
           "Fn", "View", "Catalog", "read_catalog", "shard_sql", "proxy_sql"]
CLUSTER_NAME = "pgmem"
PROXY_SCHEMA = "pgmem_proxy"
SHARD_SCHEMA = "pgmem_shard"
SESSION_ARGS = 4  # tenant, claim, statement_timeout, idle_in_transaction_session_timeout
# installation-wide configuration: the same on every partition
RUN_ON_ALL = {"grant_tenant", "revoke_tenant", "add_claim_key", "drop_claim_key", "set_session_limits",
              "schedule_jobs", "unschedule_jobs"}
# tables whose rows every partition keeps after a split (logins' grants, the tenant registry)
KEEP_ON_SPLIT = {"tenant_grants", "tenants"}
APP_ROLES = ("pgmem_app", "pgmem_reader", "pgmem_admin")


# --------------------------------------------------------------------------- catalog
@dataclass
class Fn:
    name: str
    args: str            # with names and defaults (the public signature)
    identity: str        # types only, for the generated functions
    argtypes: list[str]
    argnames: list[str]
    result: str          # "TABLE(...)", "SETOF pgmem.x", "double precision", ...
    retset: bool
    rettype: str         # the element type (for a scalar or composite result)
    composite: bool
    volatility: str
    is_void: bool


@dataclass
class View:
    name: str
    columns: list[tuple[str, str]]


@dataclass
class Catalog:
    functions: list[Fn] = field(default_factory=list)
    views: list[View] = field(default_factory=list)
    types: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)  # composite types to mirror


def read_catalog(conn) -> Catalog:
    """pgmem's public API as a shard's catalog describes it (names fully qualified)."""
    conn.execute("set local search_path = pg_catalog") if not conn.autocommit else conn.execute("set search_path = pg_catalog")
    cat = Catalog()
    for r in conn.execute("""
        select p.proname, pg_get_function_arguments(p.oid), pg_get_function_identity_arguments(p.oid),
               array(select format_type(t, null) from unnest(p.proargtypes) t),
               coalesce(p.proargnames[1:p.pronargs], array[]::text[]),
               pg_get_function_result(p.oid), p.proretset, format_type(p.prorettype, null),
               t.typtype = 'c', p.provolatile::text, p.prorettype = 'void'::regtype
          from pg_proc p join pg_type t on t.oid = p.prorettype
         where p.pronamespace = 'pgmem'::regnamespace and p.proname !~ '^_' and p.prokind = 'f'
           and p.prorettype <> 'trigger'::regtype
         order by p.proname, p.oid""").fetchall():
        cat.functions.append(Fn(r[0], r[1], r[2], list(r[3]), list(r[4]), r[5], r[6], r[7], r[8], r[9], r[10]))
    for name, cols in conn.execute("""
        select c.relname, array_agg(array[a.attname::text, format_type(a.atttypid, a.atttypmod)] order by a.attnum)
          from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
         where c.relnamespace = 'pgmem'::regnamespace and c.relkind = 'v'
         group by c.relname order by c.relname""").fetchall():
        cat.views.append(View(name, [(a, t) for a, t in cols]))
    # composite types the API uses: standalone ones and the row types of tables it returns
    used = {f.rettype for f in cat.functions if f.composite} | {t for f in cat.functions for t in f.argtypes}
    for name, kind, cols in conn.execute("""
        select t.typname, c.relkind::text,
               array_agg(array[a.attname::text, format_type(a.atttypid, a.atttypmod)] order by a.attnum)
          from pg_type t join pg_class c on c.oid = t.typrelid
          join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
         where t.typnamespace = 'pgmem'::regnamespace and t.typtype = 'c'
         group by t.typname, c.relkind order by t.typname""").fetchall():
        if kind == "c" or f"pgmem.{name}" in used:
            cat.types.append((name, [(a, t) for a, t in cols]))
    conn.execute("reset search_path")
    return cat


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _positional(n: int, first: int = 1) -> str:
    return ", ".join(f"${i}" for i in range(first, first + n))


def _setof_type(f: Fn) -> str:
    """The result of the run-on-all variant: a set of the same rows (or of the scalar)."""
    if f.retset:
        return f.result
    return f"setof {f.rettype}"


def _session_params() -> str:
    return "proxy_tenant text, proxy_claim text, proxy_statement_timeout text, proxy_idle_timeout text"


def _with_session(identity: str) -> str:
    return _session_params() + (", " + identity if identity else "")


# --------------------------------------------------------------------------- shard side
def shard_sql(cat: Catalog) -> str:
    """The call targets on every shard: set the tenant for the transaction, call pgmem.F."""
    out = [f"create schema if not exists {SHARD_SCHEMA};",
           f"comment on schema {SHARD_SCHEMA} is 'pgmem scale-out: call targets of the PL/Proxy proxy (pgmem/shards.py): "
           f"each sets the caller''s tenant for its transaction and calls the pgmem function of the same name';",
           f"""create or replace function {SHARD_SCHEMA}._enter(p_tenant text, p_claim text, p_statement_timeout text,
                                                  p_idle_timeout text) returns void
  language sql volatile
as $$
  -- for this transaction only (the remote call's): the next call on PL/Proxy's connection sets its own
  select set_config('pgmem.tenant', coalesce(p_tenant, ''), true),
         set_config('pgmem.tenant_claim', coalesce(p_claim, ''), true),
         set_config('statement_timeout', coalesce(p_statement_timeout, current_setting('statement_timeout')), true),
         set_config('idle_in_transaction_session_timeout',
                    coalesce(p_idle_timeout, current_setting('idle_in_transaction_session_timeout')), true);
$$;"""]
    for f in cat.functions:
        n = len(f.argtypes)
        call = f"pgmem.{_q(f.name)}({_positional(n, SESSION_ARGS + 1)})"
        body = f"select * from {call}" if (f.retset or f.composite) else f"select {call}"
        for variant, result in ((f.name, f.result), (f.name + "__all", _setof_type(f))):
            if variant.endswith("__all") and f.retset:
                continue  # a set-returning target serves both
            out.append(f"""create or replace function {SHARD_SCHEMA}.{_q(variant)}({_with_session(', '.join(f.argtypes))})
  returns {result} language sql volatile
as $$
  select {SHARD_SCHEMA}._enter($1, $2, $3, $4);
  {body};
$$;""")
    for v in cat.views:
        cols = ", ".join(f"{_q(a)} {t}" for a, t in v.columns)
        out.append(f"""create or replace function {SHARD_SCHEMA}.{_q('view__' + v.name)}({_session_params()})
  returns table ({cols}) language sql volatile
as $$
  select {SHARD_SCHEMA}._enter($1, $2, $3, $4);
  select * from pgmem.{_q(v.name)};
$$;""")
    out.append(f"grant usage on schema {SHARD_SCHEMA} to {', '.join(APP_ROLES)};")
    out.append(f"revoke all on all functions in schema {SHARD_SCHEMA} from public;")
    out.append(f"grant execute on all functions in schema {SHARD_SCHEMA} to {', '.join(APP_ROLES)};")
    return "\n".join(out)


# --------------------------------------------------------------------------- proxy side
PROXY_BASE = f"""
create extension if not exists plproxy;
create extension if not exists vector;
create schema if not exists pgmem;
create schema if not exists {PROXY_SCHEMA};
create schema if not exists plproxy;
comment on schema {PROXY_SCHEMA} is 'pgmem scale-out: the partition map and the PL/Proxy functions behind the pgmem.* wrappers of this proxy database (pgmem/shards.py)';
create table if not exists {PROXY_SCHEMA}.partitions (
  part    integer primary key check (part >= 0),
  connstr text not null
);
create table if not exists {PROXY_SCHEMA}.map_version (
  cluster text primary key,
  version integer not null
);
insert into {PROXY_SCHEMA}.map_version values ('{CLUSTER_NAME}', 1) on conflict do nothing;

create or replace function {PROXY_SCHEMA}._unknown_cluster(p_name text) returns integer
  language plpgsql as $$
begin
  raise exception 'unknown PL/Proxy cluster "%": this proxy serves cluster "{CLUSTER_NAME}"', p_name using errcode = '42704';
end $$;

-- PL/Proxy's cluster configuration API, read from the tables above
create or replace function plproxy.get_cluster_version(cluster_name text) returns integer
  language sql stable as $$
  select coalesce((select version from {PROXY_SCHEMA}.map_version where cluster = cluster_name),
                  {PROXY_SCHEMA}._unknown_cluster(cluster_name))
$$;
create or replace function plproxy.get_cluster_partitions(cluster_name text) returns setof text
  language sql stable as $$
  select connstr from {PROXY_SCHEMA}.partitions where cluster_name = '{CLUSTER_NAME}' order by part
$$;
create or replace function plproxy.get_cluster_config(in cluster_name text, out key text, out val text)
  returns setof record language sql stable as $$
  values ('connection_lifetime', '1800'), ('query_timeout', '0'), ('disable_binary', '0')
$$;

-- the session's tenant (or the tenant its signed claim names: the shard verifies the
-- signature) and timeouts; a missing or malformed tenant is refused here, before any shard
create or replace function {PROXY_SCHEMA}._session(out tenant text, out claim text,
                                                  out statement_timeout text, out idle_timeout text)
  language plpgsql stable
as $$
declare
  v_payload text;
  v_claimed text;
begin
  tenant := nullif(current_setting('pgmem.tenant', true), '');
  claim := nullif(current_setting('pgmem.tenant_claim', true), '');
  if claim is not null then
    begin
      v_payload := translate(split_part(claim, '.', 2), '-_', '+/');
      v_payload := v_payload || repeat('=', (4 - length(v_payload) % 4) % 4);
      v_claimed := convert_from(decode(v_payload, 'base64'), 'UTF8')::jsonb ->> 'tenant';
    exception when others then
      v_claimed := null;
    end;
    if v_claimed is null then
      raise exception 'pgmem.tenant_claim is not a signed tenant claim (header.payload.signature)'
        using errcode = '42501', hint = 'refused by the pgmem proxy; sign claims with pgmem.sign_tenant_claim';
    end if;
    if tenant is not null and tenant <> v_claimed then
      raise exception 'pgmem.tenant "%" differs from the tenant of pgmem.tenant_claim ("%")', tenant, v_claimed
        using errcode = '42501';
    end if;
    tenant := v_claimed;
  end if;
  if tenant is null then
    raise exception 'pgmem.tenant is not set: this session has no tenant, so it can neither read nor write memories'
      using errcode = '42501',
            hint = 'run SET pgmem.tenant = ''your_tenant'' first (refused by the pgmem proxy: no shard was contacted)';
  end if;
  if tenant <> '*' and tenant !~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{{0,63}}$' then
    raise exception 'invalid tenant name "%": use 1 to 64 letters, digits and _ . : @ -, starting with a letter or digit', tenant
      using errcode = '22023', hint = 'refused by the pgmem proxy: no shard was contacted';
  end if;
  statement_timeout := current_setting('statement_timeout');
  idle_timeout := current_setting('idle_in_transaction_session_timeout');
end $$;


create or replace function {PROXY_SCHEMA}._no_star(p_fn text) returns void
  language plpgsql as $$
begin
  raise exception 'pgmem.% with tenant "*" through the proxy: it returns one value, and tenant "*" runs on every shard', p_fn
    using errcode = '22023',
          hint = 'set pgmem.tenant to the tenant whose rows it concerns, or call it on a shard directly';
end $$;

-- the partition of a tenant (what RUN ON hashtext(tenant) picks: PL/Proxy's bitmask mapping)
create or replace function {PROXY_SCHEMA}.partition_of(p_tenant text) returns integer
  language sql stable as $$
  select hashtext(p_tenant) & ((select count(*)::integer from {PROXY_SCHEMA}.partitions) - 1)
$$;
comment on function {PROXY_SCHEMA}.partition_of(text) is
  'The partition PL/Proxy routes a tenant to: hashtext(tenant) & (partitions - 1).';
"""

# pgmem.run_job commits between batches: a procedure cannot run through PL/Proxy (a remote call
# is one statement of one transaction)
PROXY_RUN_JOB = """
create or replace procedure pgmem.run_job(job text, params jsonb default '{}', max_batches integer default 1000)
  language plpgsql as $$
begin
  raise exception 'pgmem.run_job cannot run through the PL/Proxy proxy: it commits between batches, and a remote call is one transaction'
    using errcode = '0A000',
          hint = 'each shard runs its jobs with pg_cron (select * from pgmem.schedule_jobs() through the proxy schedules them on every shard), or CALL pgmem.run_job on a shard';
end $$;
comment on procedure pgmem.run_job(text, jsonb, integer) is
  'On a proxy database: refuses with a hint (jobs run on each shard: pg_cron, or CALL on a shard).';
"""


def _agg(f: Fn) -> str:
    """How a run-on-all result of a scalar function merges into one value."""
    if f.rettype in ("integer", "bigint", "numeric", "double precision"):
        return "sum"
    if f.rettype == "boolean":
        return "bool_or"
    return ""


def proxy_sql(cat: Catalog) -> str:
    out = [PROXY_BASE]
    for name, fields in cat.types:
        out.append(f"do $$ begin create type pgmem.{_q(name)} as ({', '.join(f'{_q(a)} {t}' for a, t in fields)}); "
                       f"exception when duplicate_object then null; end $$;")
    for f in cat.functions:
        n = len(f.argtypes)
        pure = f.volatility == "i"
        # pure functions need no tenant: they run on any partition
        ses = "null, null, null, null" if pure else "_pgmem_s.tenant, _pgmem_s.claim, _pgmem_s.statement_timeout, _pgmem_s.idle_timeout"
        args = _positional(n)
        if f.name == "add_claim_key" and n >= 2:
            # one secret for every partition: made here when not given (48 bytes, as the shard would)
            args = ("$1, coalesce($2, uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) || "
                    "uuid_send(gen_random_uuid()))" + (", " + _positional(n - 2, 3) if n > 2 else ""))
        call_args = ses + (", " + args if n else "")
        args_public = _positional(n)
        # the routing key: an explicit `tenant` argument (admin jobs) wins over the session's
        key = "proxy_tenant"
        tenant_arg = next((i for i, (a, t) in enumerate(zip(f.argnames, f.argtypes)) if a == "tenant" and t == "text"), None)
        if tenant_arg is not None:
            key = f"coalesce(${SESSION_ARGS + 1 + tenant_arg}, proxy_tenant)"
        always_all = f.name in RUN_ON_ALL
        run = "all" if always_all else ("any" if pure else f"hashtext({key})")
        result_one = _setof_type(f) if always_all else f.result
        out.append(f"""create or replace function {PROXY_SCHEMA}.{_q(f.name)}({_with_session(', '.join(f.argtypes))})
  returns {result_one} language plproxy as $$
  cluster '{CLUSTER_NAME}'; run on {run}; target {SHARD_SCHEMA}.{f.name if (always_all and f.retset) or not always_all else f.name + '__all'};
$$;""")
        if not always_all and not pure:
            out.append(f"""create or replace function {PROXY_SCHEMA}.{_q(f.name + '__all')}({_with_session(', '.join(f.argtypes))})
  returns {_setof_type(f)} language plproxy as $$
  cluster '{CLUSTER_NAME}'; run on all; target {SHARD_SCHEMA}.{f.name if f.retset else f.name + '__all'};
$$;""")
        # the public wrapper, same name and signature as on a shard
        star = "_pgmem_s.tenant = '*'" if tenant_arg is None else f"coalesce(${1 + tenant_arg}, _pgmem_s.tenant) = '*'"
        if f.retset:
            if always_all:
                body = f"return query select * from {PROXY_SCHEMA}.{_q(f.name)}({call_args});"
            else:
                body = (f"if {star} then\n    return query select * from {PROXY_SCHEMA}.{_q(f.name + '__all')}({call_args});\n"
                        f"  else\n    return query select * from {PROXY_SCHEMA}.{_q(f.name)}({call_args});\n  end if;")
                if pure:
                    body = f"return query select * from {PROXY_SCHEMA}.{_q(f.name)}({call_args});"
            decl = ""
        else:
            agg = _agg(f)
            if always_all:
                if f.is_void:
                    body = f"perform count(*) from {PROXY_SCHEMA}.{_q(f.name)}({call_args});"
                elif agg:
                    body = f"select {agg}(x) into _pgmem_r from {PROXY_SCHEMA}.{_q(f.name)}({call_args}) x;\n  return _pgmem_r;"
                else:
                    body = f"select x into _pgmem_r from {PROXY_SCHEMA}.{_q(f.name)}({call_args}) x limit 1;\n  return _pgmem_r;"
            else:
                one = (f"perform {PROXY_SCHEMA}.{_q(f.name)}({call_args});" if f.is_void else
                       f"_pgmem_r := {PROXY_SCHEMA}.{_q(f.name)}({call_args});\n  return _pgmem_r;")
                body = one if pure else (f"if {star} then\n    perform {PROXY_SCHEMA}._no_star({_lit(f.name)});\n  end if;\n  " + one)
            decl = "" if f.is_void else f"  _pgmem_r {f.rettype};\n"
        session = "" if pure else f"  _pgmem_s record := {PROXY_SCHEMA}._session();\n"
        # the router: PL/pgSQL with unnamed parameters (a result column may share an argument's
        # name, which PL/pgSQL refuses), called by the public wrapper, which is SQL
        route = f.name + "__route"
        out.append(f"""create or replace function {PROXY_SCHEMA}.{_q(route)}({', '.join(f.argtypes)})
  returns {f.result} language plpgsql volatile
as $body$
declare
{session}{decl}begin
  {body}
end $body$;""")
        call = f"{PROXY_SCHEMA}.{_q(route)}({args_public})"
        out.append(f"""create or replace function pgmem.{_q(f.name)}({f.args})
  returns {f.result} language sql volatile
as $body$
  select {'* from ' + call if (f.retset or f.composite) else call}
$body$;""")
    for v in cat.views:
        cols = ", ".join(f"{_q(a)} {t}" for a, t in v.columns)
        ses = "s.tenant, s.claim, s.statement_timeout, s.idle_timeout"
        for variant, run in (("view__" + v.name, "hashtext(proxy_tenant)"), ("view__" + v.name + "__all", "all")):
            out.append(f"""create or replace function {PROXY_SCHEMA}.{_q(variant)}({_session_params()})
  returns table ({cols}) language plproxy as $$
  cluster '{CLUSTER_NAME}'; run on {run}; target {SHARD_SCHEMA}.view__{v.name};
$$;""")
        out.append(f"""create or replace function {PROXY_SCHEMA}.{_q('view__' + v.name + '__route')}()
  returns table ({cols}) language plpgsql volatile
as $body$
declare s record := {PROXY_SCHEMA}._session();
begin
  if s.tenant = '*' then
    return query select * from {PROXY_SCHEMA}.{_q('view__' + v.name + '__all')}({ses});
  else
    return query select * from {PROXY_SCHEMA}.{_q('view__' + v.name)}({ses});
  end if;
end $body$;""")
        out.append(f"create or replace view pgmem.{_q(v.name)} as select * from {PROXY_SCHEMA}.{_q('view__' + v.name + '__route')}();")
    out.append(PROXY_RUN_JOB)
    out.append(f"grant usage on schema pgmem, {PROXY_SCHEMA}, plproxy to public;")
    out.append(f"grant execute on all functions in schema pgmem, {PROXY_SCHEMA}, plproxy to public;")
    out.append("grant select on all tables in schema pgmem to public;")
    out.append(f"grant select on {PROXY_SCHEMA}.partitions, {PROXY_SCHEMA}.map_version to public;")
    return "\n".join(out)


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"
