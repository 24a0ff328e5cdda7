"""SQL helpers shared by the tests (they were copied into each test file).

    from sqlhelpers import call, one, rows, scalar

    scalar(conn, "select count(*) from pgmem.memories")
    one(conn, "select * from pgmem.memories where id = %s", (7,))        # a dict, or None
    rows(conn, "select * from pgmem.history where memory_id = %s", (7,)) # a list of dicts
    call(conn, "search", query_text="peanuts", k=3, filters={"user_id": "maya"})

``call`` runs ``select * from pgmem.<fn>(name => value, ...)`` and casts every named argument
to the type the function itself declares (read from pg_proc), so a test states values, not
casts: a dict goes as jsonb, a numpy array or a list as vector, None as the SQL default's
NULL. ``casts=`` overrides a cast for one call (e.g. ``{"importance": "real"}``). An ``Expr``
goes in as SQL text, not as a parameter: ``call(conn, "remember", "x", created_at=Expr("now()"))``.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

__all__ = ["Expr", "call", "one", "public_functions", "rows", "scalar", "signature"]


class Expr(str):
    """A SQL expression passed to ``call`` as text (e.g. ``Expr("now() + interval '1 day'")``), not a parameter."""


def rows(conn: psycopg.Connection, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[dict]:
    """All rows of a statement as dicts ([] for a statement that returns none)."""
    cur = conn.cursor(row_factory=dict_row)
    cur.execute(sql, params)
    return cur.fetchall() if cur.description else []


def one(conn: psycopg.Connection, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> dict | None:
    """The first row as a dict, or None."""
    got = rows(conn, sql, params)
    return got[0] if got else None


def scalar(conn: psycopg.Connection, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
    """The first column of the first row."""
    return conn.execute(sql, params).fetchone()[0]


def public_functions(conn: psycopg.Connection) -> set[str]:
    """The names of schema pgmem's public functions (not starting with _), from pg_proc."""
    return {r[0] for r in conn.execute(
        "select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace"
        " where n.nspname = 'pgmem' and p.proname !~ '^_'")}


_SIGNATURES: dict[tuple[str, str], list[tuple[list[str], list[str]]]] = {}


def signature(conn: psycopg.Connection, fn: str) -> list[tuple[list[str], list[str]]]:
    """(input argument names, their types) of every function ``pgmem.<fn>``, from pg_proc."""
    key = (conn.info.dbname, fn)
    if key not in _SIGNATURES:
        found = conn.execute("""
            select coalesce(p.proargnames, '{}'),
                   coalesce(p.proargmodes::text[], array_fill('i'::text, array[p.pronargs])),
                   array(select format_type(t, null)
                           from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) with ordinality u(t, n)
                          order by n)
              from pg_proc p
             where p.pronamespace = 'pgmem'::regnamespace and p.proname = %s""", (fn,)).fetchall()
        sigs = []
        for names, modes, types in found:
            names = list(names) + [""] * (len(types) - len(names))
            inputs = [(n, t) for n, m, t in zip(names, modes, types) if m in ("i", "b", "v")]
            sigs.append(([n for n, _ in inputs], [t for _, t in inputs]))
        _SIGNATURES[key] = sigs
    return _SIGNATURES[key]


def _cast_for(conn: psycopg.Connection, fn: str, npos: int, names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The types of the positional and named arguments, from the one signature they fit."""
    fits = [(n, t) for n, t in signature(conn, fn) if len(n) >= npos and set(names) <= set(n[npos:])]
    if not fits:
        raise AssertionError(f"no function pgmem.{fn} takes {npos} positional argument(s) and {sorted(names)}")
    types = {tuple(t[:npos]) + tuple(sorted((a, t[n.index(a)]) for a in names)) for n, t in fits}
    if len(types) > 1:
        raise AssertionError(f"pgmem.{fn}({npos} positional, {sorted(names)}) is ambiguous: pass casts=")
    n, t = fits[0]
    return t[:npos], {a: t[n.index(a)] for a in names}


def call(conn: psycopg.Connection, fn: str, *args: Any, casts: Mapping[str, str] | None = None,
         **kwargs: Any) -> list[dict]:
    """``select * from pgmem.<fn>(args..., name => value, ...)`` as a list of dicts, each
    argument cast to the declared type (``casts`` overrides by name)."""
    pos_types, named_types = _cast_for(conn, fn, len(args), list(kwargs))
    named_types.update(casts or {})
    parts, params = [], []
    for value, typ in zip(args, pos_types):
        parts.append(f"%s::{typ}")
        params.append(Jsonb(value) if isinstance(value, dict) else value)
    for name, value in kwargs.items():
        if isinstance(value, Expr):
            parts.append(f"{name} => ({value})::{named_types[name]}")
            continue
        parts.append(f"{name} => %s::{named_types[name]}")
        params.append(Jsonb(value) if isinstance(value, dict) or (isinstance(value, list) and named_types[name] == "jsonb")
                      else value)
    return rows(conn, f"select * from pgmem.{fn}({', '.join(parts)})", params)
