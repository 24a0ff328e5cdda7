"""Errors raised by the pgmem client. Each carries a message written for a person:
what failed, with which input, and what to do about it.

Errors the database raises through the SQL API are mapped by SQLSTATE (:func:`from_database`):

=========================  ==========================================================
SQLSTATE                   exception
=========================  ==========================================================
22023 invalid_parameter    :class:`InvalidInput` (``pgmem._bad_input``: bad argument)
P0002 no_data_found        :class:`NotFound` (no such memory, profile, job run...)
42501 insufficient_priv.   :class:`TenantError` (no tenant set, not granted the tenant)
=========================  ==========================================================

A mapped error keeps the server's words (``str(e)``), its ``hint`` and ``detail``, the
``sqlstate``, and the original psycopg error as ``__cause__``. Other database errors are
raised unchanged (psycopg's own classes).
"""
from __future__ import annotations


class PgmemError(Exception):
    """Base class for pgmem errors."""


class SetupError(PgmemError):
    """The environment is not ready: a server, an extension or a package is missing."""


class ClusterError(SetupError):
    """The embedded PostgreSQL cluster could not be created, started or stopped."""


class MigrationError(SetupError):
    """Migrations could not be applied to the target database."""


class ConfigError(PgmemError):
    """A setting (environment variable, argument) is invalid."""


class DatabaseError(PgmemError):
    """An error the SQL API raised, with the server's message, hint and SQLSTATE."""

    sqlstate: str | None = None

    def __init__(self, message: str, *, hint: str | None = None, detail: str | None = None,
                 sqlstate: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail
        if sqlstate is not None:
            self.sqlstate = sqlstate

    def __str__(self) -> str:
        return self.message + (f" (hint: {self.hint})" if self.hint else "")


class InvalidInput(DatabaseError, ValueError):
    """An argument the database refused (SQLSTATE 22023): the message names it and the fix."""

    sqlstate = "22023"


class NotFound(DatabaseError, LookupError):
    """The memory (or other object) asked for does not exist for this tenant (SQLSTATE P0002)."""

    sqlstate = "P0002"


class TenantError(DatabaseError, PermissionError):
    """The session has no tenant, or its login may not act for the tenant (SQLSTATE 42501)."""

    sqlstate = "42501"


#: SQLSTATE -> client exception (the table in this module's docstring).
SQLSTATE_ERRORS: dict[str, type[DatabaseError]] = {
    "22023": InvalidInput,
    "P0002": NotFound,
    "42501": TenantError,
}


def from_database(exc: BaseException) -> BaseException:
    """The client exception for a psycopg error (see :data:`SQLSTATE_ERRORS`), or ``exc``
    itself when its SQLSTATE is not mapped. Use as ``raise from_database(e) from e``."""
    state = getattr(exc, "sqlstate", None)
    cls = SQLSTATE_ERRORS.get(state or "")
    if cls is None:
        return exc
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    text = str(exc).strip()
    message = (primary or (text.splitlines()[0] if text else state)).strip()
    return cls(message, hint=getattr(diag, "message_hint", None), detail=getattr(diag, "message_detail", None),
               sqlstate=state)
