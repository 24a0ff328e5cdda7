"""plpgsql_check lints every PL/pgSQL function and procedure of schema pgmem.

The functions are read from the catalog, so those that other concerns add are checked when
they land. plpgsql_check (Debian's postgresql-15-plpgsql-check) plans every statement of a
routine and reports errors (a missing column, a wrong type), warnings (implicit casts between
unrelated types, unused or unassigned variables) and, with ``extra_warnings``/
``security_warnings``, dead variables and SQL-injection risks in dynamic SQL. Performance
warnings (implicit numeric casts, volatility advice) are not part of the contract: they are
advice on speed, which the benchmark measures.

The check of a routine stops at its first error (``fatal_errors``): the errors that follow a
missing temporary table are consequences of it, and the pragma that declares the table (e.g.
``perform 'PRAGMA:TABLE: _pgmem_batch (id bigint)'``, a no-op at run time) lets the check go on.

Each finding is either fixed in the SQL or listed in ALLOWED with the reason it stays.
An ALLOWED entry that no longer matches any finding fails the test too: the list only shrinks
when the code improves.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from conftest import connect


@dataclass(frozen=True)
class Allowed:
    function: str | None  # proname, or None for a rule about the tool that holds everywhere
    message: str          # a regular expression the finding's message (and detail) must match
    reason: str


ALLOWED: tuple[Allowed, ...] = (
    Allowed("_lexicon_track", r'relation "old_rows" does not exist',
            "a statement trigger's transition table (REFERENCING OLD TABLE AS old_rows): the checker "
            "runs the function outside a trigger and cannot see it (sql/201_lexical.sql)"),
    # issue 24 (sql/110_memory_ops.sql): a purged memory written again from its history snapshot;
    # the column list comes from the catalog (pg_attribute names through format('%I')), no input
    *(Allowed("_restore_from_history", msg, "the INSERT's column list is memories' own columns from the catalog, "
              "each quoted with %I; the values are a parameter ($1, the snapshot)")
      for msg in (r"text type variable is not sanitized", r"cannot determinate a result of dynamic SQL")),
    # The tool's limits -------------------------------------------------------------------
    Allowed("schedule_jobs", r'schema "cron" does not exist',
            "pg_cron lives only in cron.database_name's database; elsewhere the function schedules "
            "through cron.schedule_in_database from there (tested in test_jobs)"),
    Allowed("unschedule_jobs", r'relation "cron.job" does not exist',
            "same: the cron schema exists only in cron.database_name's database"),
    # Findings in SQL files other concerns own (reported to the lead) ----------------------
    Allowed("merge_duplicates", r'relation "_pgmem_batch" does not exist',
            "a temporary table created at run time; the fix is a pragma "
            "`perform 'PRAGMA:TABLE: _pgmem_batch (...)'` in sql/410_merge.sql (writejobs)"),
    Allowed("prune", r'relation "_pgmem_prune_cut" does not exist',
            "a temporary table created at run time; pragma to add in sql/420_prune_archive.sql (writejobs)"),
    Allowed("merge_duplicates", r'target type is different type than source type.*cast "text" value to "jsonb"',
            "a text literal assigned to a jsonb variable (sql/410_merge.sql, writejobs): harmless, '{}'::jsonb fixes it"),
    Allowed("_filter_strings", r"control reached end of function without RETURN",
            "it ends with pgmem._bad_input, which always raises; plpgsql_check cannot know that "
            "(sql/200_query.sql, readpath: a `return null;` after it silences it)"),
    Allowed("_filter_time", r"control reached end of function without RETURN",
            "same as _filter_strings (sql/200_query.sql, readpath)"),
    Allowed("_query", r'target type is different type than source type.*cast "text" value to "double precision"',
            "jsonb ->> text assigned to the float8 fields of the query record: an exact cast through text; "
            "(w->>'x')::float8 would say so (sql/200_query.sql, readpath)"),
    # work()'s handlers (sql/450_work_queue.sql, reconstructive) --------------------------
    # work() calls every handler as pgmem.<handler>($1 memory ids, $2 params) (pgmem.work_tasks()),
    # so each has both parameters whether its task uses them or not
    *(Allowed(fn, r'unused parameter "p_ids"', "a work() handler: one signature for every task; "
              "the task pages over the tenant's memories itself") for fn in ("_work_idle", "_work_reflect", "_work_salience")),
    Allowed("_work_bind", r'unused parameter "p_params"',
            "a work() handler: one signature for every task; BIND needs only the memory ids"),
)


@dataclass(frozen=True)
class Finding:
    function: str      # proname
    signature: str     # regprocedure
    level: str
    message: str
    lineno: int | None
    detail: str | None

    def text(self) -> str:
        return self.message + (f" ({self.detail})" if self.detail else "")

    def __str__(self) -> str:
        line = f" line {self.lineno}" if self.lineno else ""
        return f"{self.signature}{line}: {self.level}: {self.text()}"


def _findings(dsn: str) -> tuple[list[str], list[Finding]]:
    """Every PL/pgSQL routine of schema pgmem, and what plpgsql_check reports on it."""
    with connect(dsn, tenant="acme") as c:  # a session as the API sees it: with a tenant
        c.execute("create extension if not exists plpgsql_check")
        routines = c.execute("""
            select p.oid, p.proname, p.oid::regprocedure::text,
                   t.tgrelid, t.tgoldtable, t.tgnewtable
              from pg_proc p join pg_language l on l.oid = p.prolang
              left join lateral (select t.tgrelid, t.tgoldtable, t.tgnewtable from pg_trigger t
                                  where t.tgfoid = p.oid and not t.tgisinternal order by t.tgrelid limit 1) t on true
             where l.lanname = 'plpgsql' and p.pronamespace = 'pgmem'::regnamespace
             order by 3""").fetchall()
        found: list[Finding] = []
        for oid, name, signature, relid, oldtable, newtable in routines:
            # a statement trigger's transition tables (REFERENCING OLD/NEW TABLE AS ...) exist
            # only while it fires: the check is told their names, as the trigger declares them
            rows = c.execute(
                "select level, message, lineno, detail from plpgsql_check_function_tb(%s, relid => %s::oid::regclass, "
                "oldtable => %s, newtable => %s, "
                "fatal_errors => true, other_warnings => true, extra_warnings => true, "
                "performance_warnings => false, security_warnings => true)",
                (oid, relid or 0, oldtable, newtable)).fetchall()
            found += [Finding(name, signature, *r) for r in rows]
    return [r[2] for r in routines], found


def _allowed(f: Finding) -> Allowed | None:
    return next((a for a in ALLOWED if a.function in (None, f.function) and re.search(a.message, f.text())), None)


@pytest.fixture(scope="module")
def findings(cluster, tmp_path_factory):
    from conftest import TEMPLATE, _janitor

    j = _janitor(cluster, f"t_plpgsql_check_{tmp_path_factory.getbasetemp().name[-8:]}", TEMPLATE)
    j.drop()
    j.init()
    try:
        yield _findings(cluster.dsn(j.dbname))
    finally:
        j.drop()


def test_every_plpgsql_routine_is_checked(findings):
    routines, _ = findings
    # the catalog, not a list: these are some of the routines any install has
    for name in ("remember(", "recall(", "_activate(", "merge_duplicates(", "_require_tenant(", "erase_user("):
        assert any(r.startswith(name) for r in routines), name
    assert len(routines) >= 40


def test_no_finding_outside_the_allowed_list(findings):
    _, found = findings
    unexplained = [str(f) for f in found if _allowed(f) is None]
    assert not unexplained, "plpgsql_check findings to fix (or allow in ALLOWED with the reason):\n" + "\n".join(unexplained)


def test_every_allowed_entry_is_still_needed(findings):
    _, found = findings
    used = {_allowed(f) for f in found}
    stale = [a for a in ALLOWED if a not in used]
    assert not stale, "fixed since: remove from ALLOWED:\n" + "\n".join(f"{a.function}: {a.message}" for a in stale)


def test_plpgsql_check_finds_what_it_should(cluster, fresh_db):
    """The linter is live: a broken function in a scratch schema is reported."""
    dsn = fresh_db()
    with connect(dsn, tenant="acme") as c:
        c.execute("create extension plpgsql_check")
        c.execute("""create function public.broken() returns bigint language plpgsql as $$
                     declare unused int; begin return (select no_such_column from pgmem.memories limit 1); end $$""")
        msgs = [r[0] for r in c.execute("select message from plpgsql_check_function_tb('public.broken()', "
                                        "extra_warnings => true)").fetchall()]
    assert any('column "no_such_column" does not exist' in m for m in msgs), msgs
