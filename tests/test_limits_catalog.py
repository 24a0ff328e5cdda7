"""Issue 27, item 2: every argument of every public function has a size limit, named in its error.

Driven by the catalog, not by a list kept here: every public function of schema pgmem (name not
starting with "_") and each of its text, jsonb, bytea and array arguments. For each:

* pgmem._argument_limits() lists its limit (unit, setting or fixed value), and lists nothing
  that is not in the catalog;
* a call with a value just over the limit (built in the database: repeat(), array_fill(), a JSON
  object holding a long string) fails within 1 s with 22023 or 54000 and a message naming the
  argument;
* a call with a value at the limit fails, if it fails at all, for another reason than its size
  (the documented limit is not tighter in the code);
* SECURITY.md's table of limits is the list (regenerate it with PGMEM_WRITE_SECURITY=1).

Every call runs in a transaction that is rolled back, in one database for the module.
"""
from __future__ import annotations

import os
import re
import time
import uuid
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from conftest import ROOT, TEMPLATE, _janitor, connect

TENANT = "limits"
DIM = 384
SIZED_TYPES = ("text", "jsonb", "json", "bytea")  # and every array type


@pytest.fixture(scope="module")
def ldb(cluster):
    name = f"t_limits_{uuid.uuid4().hex[:10]}"
    j = _janitor(cluster, name, TEMPLATE)
    j.init()
    yield cluster.dsn(name)
    j.drop()


@pytest.fixture(scope="module")
def lc(ldb):
    with connect(ldb, tenant=TENANT) as c:
        c.execute("select pgmem.remember('a memory so that the functions have something to look at', force => true)")
        yield c


def catalog_arguments(c) -> list[tuple[str, str, str, int, str]]:
    """(function, argument, type, position, kind) of every sized input argument of every public
    function and procedure of schema pgmem."""
    return [tuple(r) for r in c.execute("""
        select p.proname, a.n, format_type(a.t, null), a.o::int, p.prokind::text
          from pg_proc p
          cross join lateral unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]),
                                    coalesce(p.proargmodes, array_fill('i'::"char", array[cardinality(p.proargtypes::oid[])])),
                                    p.proargnames) with ordinality a(t, m, n, o)
         where p.pronamespace = 'pgmem'::regnamespace and p.proname !~ '^_' and p.prokind in ('f', 'p')
           and a.m in ('i', 'b', 'v')
           and (format_type(a.t, null) = any(%s) or format_type(a.t, null) like '%%[]')
         order by 1, 4""", (list(SIZED_TYPES),)).fetchall()]


def limits(c) -> dict[tuple[str, str], dict]:
    return {(r[0], r[1]): {"unit": r[2], "setting": r[3], "fixed": r[4]}
            for r in c.execute("select function_name, argument, unit, setting, fixed from pgmem._argument_limits()")}


def limit_value(c, lim: dict) -> int:
    if lim["setting"] is None:
        return int(lim["fixed"])
    v = c.execute("select value #>> '{}' from pgmem.settings where tenant = '*' and key = %s", (lim["setting"],)).fetchone()
    assert v is not None, f"setting {lim['setting']} is not installed"
    return int(float(v[0]))


# ------------------------------------------------------------------ the list and the catalog
def test_every_sized_argument_has_a_limit_and_every_limit_an_argument(lc):
    args = catalog_arguments(lc)
    lims = limits(lc)
    have = {(f, a) for f, a, *_ in args}
    missing = sorted(have - set(lims))
    stale = sorted(set(lims) - have)
    assert missing == [], f"arguments without a limit in pgmem._argument_limits(): {missing}"
    assert stale == [], f"limits of arguments that do not exist: {stale}"
    assert {v["unit"] for v in lims.values()} <= {"bytes", "characters", "items"}
    for key, v in lims.items():
        assert (v["setting"] is None) != (v["fixed"] is None), key
    assert len(args) > 250  # the catalog was read


def test_every_limit_setting_exists(lc):
    keys = {r[0] for r in lc.execute("select key from pgmem.settings where tenant = '*'")}
    assert {v["setting"] for v in limits(lc).values() if v["setting"]} <= keys


# ------------------------------------------------------------------ calling each function
def _required_value(c, typ: str) -> sql.Composable:
    """A valid value for a required argument that is not the one under test."""
    vec = "[" + ",".join(["1"] + ["0"] * (DIM - 1)) + "]"
    return {
        "text": sql.Literal("x"), "jsonb": sql.SQL("'{}'::jsonb"), "json": sql.SQL("'{}'::json"),
        "bigint": sql.SQL("1::bigint"), "integer": sql.SQL("1"), "smallint": sql.SQL("1::smallint"),
        "double precision": sql.SQL("0.5::float8"), "real": sql.SQL("0.5::real"), "boolean": sql.SQL("false"),
        "timestamp with time zone": sql.SQL("now()"), "interval": sql.SQL("interval '1 day'"),
        "uuid": sql.SQL("gen_random_uuid()"), "bytea": sql.SQL("'\\x00'::bytea"),
        "vector": sql.SQL("{}::vector").format(sql.Literal(vec)), "memories": sql.SQL("null::pgmem.memories"),
    }.get(typ) or (sql.SQL("'{{}}'::{}").format(sql.SQL(typ)) if typ.endswith("[]") else sql.SQL("null"))


def _sized_value(typ: str, unit: str, n: int) -> sql.Composable:
    """A value of type typ of size n (in unit), built in the database."""
    if typ.endswith("[]"):
        elem = typ[:-2]
        one = {"text": "'a'::text", "bigint": "1::bigint", "integer": "1", "double precision": "0.5::float8",
               "real": "0.5::real", "timestamp with time zone": "now()",
               "vector": "('[' || array_to_string(array_fill(0.05::float8, array[384]), ',') || ']')::vector"}[elem]
        return sql.SQL("array_fill({}, array[{}])").format(sql.SQL(one), sql.Literal(n))
    if typ in ("jsonb", "json"):
        # an object holding a string: n bytes of text (the stored size is a little more)
        return sql.SQL("jsonb_build_object('x', repeat('a', {}))::{}").format(sql.Literal(n), sql.SQL(typ))
    if typ == "bytea":
        return sql.SQL("decode(repeat('61', {}), 'hex')").format(sql.Literal(n))
    return sql.SQL("repeat('a', {})").format(sql.Literal(n))


def _call(c, fn: str, kind: str, args: list[tuple[str, str, int]], target: str, value: sql.Composable) -> sql.Composable:
    """The call of fn with `target` set to value and the other required arguments valid."""
    defaults = c.execute("select pronargdefaults from pg_proc where pronamespace = 'pgmem'::regnamespace and proname = %s",
                         (fn,)).fetchone()[0]
    nin = len(args)
    parts = []
    for i, (name, typ, _) in enumerate(args):
        if name == target:
            parts.append(sql.SQL("{} => {}").format(sql.Identifier(name), value))
        elif i < nin - defaults or name == "query_text":  # required, or the question a ranking needs
            parts.append(sql.SQL("{} => {}").format(sql.Identifier(name), _required_value(c, typ)))
    call = sql.SQL("pgmem.{}({})").format(sql.Identifier(fn), sql.SQL(", ").join(parts))
    return sql.SQL("call {}").format(call) if kind == "p" else sql.SQL("select * from {}").format(call)


def _inputs(c, fn: str) -> list[tuple[str, str, int]]:
    return [tuple(r) for r in c.execute("""
        select a.n, format_type(a.t, null), a.o::int
          from pg_proc p cross join lateral unnest(p.proargtypes::oid[], p.proargnames[1:cardinality(p.proargtypes::oid[])])
                                        with ordinality a(t, n, o)
         where p.pronamespace = 'pgmem'::regnamespace and p.proname = %s order by a.o""", (fn,)).fetchall()]


def _attempt(c, q: sql.Composable, timeout_ms: int) -> tuple[psycopg.Error | None, float]:
    t = time.monotonic()
    err = None
    try:
        with c.transaction(force_rollback=True):
            c.execute(sql.SQL("set local statement_timeout = {}").format(sql.Literal(timeout_ms)))
            cur = c.execute(q)
            if cur.description:
                cur.fetchall()
    except psycopg.Error as e:
        err = e
    return err, time.monotonic() - t


def _cases(c):
    out = []
    lims = limits(c)
    for fn, arg, typ, _pos, kind in catalog_arguments(c):
        if (fn, arg) in lims:
            out.append((fn, arg, typ, kind, lims[(fn, arg)]))
    return out


def test_an_oversized_value_is_refused_naming_the_argument(lc):
    """Each text, jsonb, bytea and array argument of each public function, one value over its
    limit: 22023 (or 54000) within 1 s, the message naming the argument."""
    bad = []
    count = 0
    for fn, arg, typ, kind, lim in _cases(lc):
        n = limit_value(lc, lim) + 1
        q = _call(lc, fn, kind, _inputs(lc, fn), arg, _sized_value(typ, lim["unit"], n))
        err, took = _attempt(lc, q, 5000)
        count += 1
        msg = err.diag.message_primary if err is not None else None
        if err is None:
            bad.append((fn, arg, "accepted"))
        elif err.sqlstate not in ("22023", "54000"):
            bad.append((fn, arg, f"{err.sqlstate}: {msg}"))
        elif not re.search(r"\b" + re.escape(arg) + r"\b", msg or ""):
            bad.append((fn, arg, f"message does not name it: {msg}"))
        elif took > 1.0:
            bad.append((fn, arg, f"took {took:.2f} s"))
    assert count > 250
    assert bad == [], "\n".join(f"{f}({a}): {why}" for f, a, why in bad)


def test_a_value_at_the_limit_is_not_refused_for_its_size(lc):
    """The limit in the code is not tighter than the list says: at the limit, a call may fail
    for another reason (an unknown name, a missing row), never for that argument's size."""
    bad = []
    for fn, arg, typ, kind, lim in _cases(lc):
        n = limit_value(lc, lim)
        if typ in ("jsonb", "json"):
            n -= 64  # the stored size of a JSON value is a little more than its text
        q = _call(lc, fn, kind, _inputs(lc, fn), arg, _sized_value(typ, lim["unit"], n))
        err, _ = _attempt(lc, q, 20000)
        msg = (err.diag.message_primary or "") if err is not None else ""
        if err is not None and re.search(r"\b" + re.escape(arg) + r"\b is \d+ (bytes|characters|items), more than", msg):
            bad.append((fn, arg, msg))
    assert bad == [], "\n".join(f"{f}({a}): {why}" for f, a, why in bad)


# ------------------------------------------------------------------ SECURITY.md
BEGIN, END = "<!-- limits:begin (generated from pgmem._argument_limits(); tests/test_limits_catalog.py) -->", "<!-- limits:end -->"


def security_table(c) -> str:
    rows = c.execute("select function_name, argument, unit, setting, fixed from pgmem._argument_limits() order by 1, 2").fetchall()
    defaults = {r[0]: r[1] for r in c.execute("select key, value #>> '{}' from pgmem.settings where tenant = '*'")}
    by_fn: dict[str, list[str]] = defaultdict(list)
    for fn, arg, unit, setting, fixed in rows:
        what = f"`{setting}` ({int(float(defaults[setting])):,} {unit})" if setting else f"{int(fixed):,} {unit}"
        by_fn[fn].append(f"`{arg}` {what}")
    lines = ["| function | arguments and their limits |", "|---|---|"]
    lines += [f"| `{fn}` | {'; '.join(v)} |" for fn, v in sorted(by_fn.items())]
    return "\n".join(lines)


def test_security_md_lists_every_limit(lc):
    path = ROOT / "SECURITY.md"
    text = path.read_text()
    want = security_table(lc)
    if os.environ.get("PGMEM_WRITE_SECURITY"):
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        path.write_text(head + BEGIN + "\n" + want + "\n" + END + tail)
        text = path.read_text()
    assert BEGIN in text and END in text, "SECURITY.md has no generated table of limits"
    got = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert got == want, "SECURITY.md's table of limits is stale: run PGMEM_WRITE_SECURITY=1 pytest tests/test_limits_catalog.py -k security_md"
