"""SQLSTATE -> exception class in one table (python/pgmem/errors.py; issue 28).

The table is written twice on purpose, once for people (the module's docstring) and once for
the code (``SQLSTATE_ERRORS``); these tests keep the two equal, and make sure every SQLSTATE the
SQL API raises has a class of its own. The mapping of real server errors is tested against
the database in tests/test_package.py (test_from_database_maps_sqlstates) and
tests/test_cli_errors.py.
"""
from __future__ import annotations

import re
from pathlib import Path

import psycopg.errors
import pytest

from pgmem import errors
from pgmem.errors import SQLSTATE_CLASSES, SQLSTATE_ERRORS, DatabaseError, PgmemError, error_class

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^([0-9A-Z]{5}) +[a-z_]+ +:class:`(\w+)`", re.M)


def test_the_docstring_table_is_the_code_table():
    documented = {state: cls for state, cls in ROW.findall(errors.__doc__ or "")}
    coded = {state: cls.__name__ for state, cls in SQLSTATE_ERRORS.items()}
    assert documented == coded, (
        "pgmem/errors.py: the table in the docstring and SQLSTATE_ERRORS differ; "
        f"only documented: {sorted(documented.items() - coded.items())}, "
        f"only in SQLSTATE_ERRORS: {sorted(coded.items() - documented.items())}")


def test_the_condition_names_in_the_table_are_postgresqls():
    for state, name in re.findall(r"^([0-9A-Z]{5}) +([a-z_]+) +:class:", errors.__doc__ or "", re.M):
        assert psycopg.errors.lookup(state).__name__.lower() == name.replace("_", ""), (state, name)


def sqlstates_raised_in_sql() -> dict[str, list[str]]:
    """Every SQLSTATE (or condition name, as its code) an ``errcode = '...'`` in sql/ raises."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "sql").glob("*.sql")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for code in re.findall(r"errcode\s*=\s*'([0-9A-Za-z_]+)'", line):
                state = code if re.fullmatch(r"[0-9A-Z]{5}", code) else psycopg.errors.lookup(code).sqlstate
                found.setdefault(state, []).append(f"{path.name}:{n}")
    return found


def test_every_sqlstate_the_sql_api_raises_has_its_own_class():
    raised = sqlstates_raised_in_sql()
    assert {"22023", "P0002", "42501", "28000"} <= set(raised)
    missing = {state: where[:3] for state, where in raised.items() if state not in SQLSTATE_ERRORS}
    assert not missing, (
        "the SQL API raises SQLSTATEs without a class of their own: add each to SQLSTATE_ERRORS and to the "
        f"table in python/pgmem/errors.py's docstring: {missing}")


@pytest.mark.parametrize("state", sorted(SQLSTATE_ERRORS))
def test_each_mapped_class_is_a_database_error_with_its_sqlstate(state):
    cls = error_class(state)
    assert cls is SQLSTATE_ERRORS[state] and issubclass(cls, DatabaseError) and issubclass(cls, PgmemError)
    # the class of the SQLSTATE's class is a base of the specific one (except pgmem's own NotInstalled)
    general = SQLSTATE_CLASSES.get(state[:2])
    assert general is None or issubclass(cls, general) or cls is errors.NotInstalled, (state, cls, general)
    e = cls("a message", hint="the fix", sqlstate=state)
    assert str(e) == "a message (hint: the fix)" and e.sqlstate == state


def test_an_unknown_sqlstate_takes_its_class_or_database_error():
    assert error_class("22P02") is errors.DataError and error_class("08001") is errors.ConnectionFailure
    assert error_class("ZZ999") is DatabaseError and error_class(None) is DatabaseError
