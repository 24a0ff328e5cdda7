"""Errors raised by the pgmem client. Each carries a message written for a person:
what failed, with which input, and what to do about it.

Errors the database raises through the SQL API are mapped by SQLSTATE (:func:`from_database`).
The SQLSTATEs pgmem's functions raise, and those a client meets in normal use, each have a
class of their own; any other SQLSTATE maps to the class of its two-character SQLSTATE class
(``22`` :class:`DataError`, ``23`` :class:`IntegrityError`, ...), and to
:class:`DatabaseError` when even that is unknown. So every error of the SQL API is a
:class:`PgmemError`.

=========================================  ========================================================
SQLSTATE                                   exception
=========================================  ========================================================
22023 invalid_parameter_value              :class:`InvalidInput` (``pgmem._bad_input``: bad argument)
P0002 no_data_found                        :class:`NotFound` (no such memory, profile, job run...)
42501 insufficient_privilege               :class:`TenantError` (no tenant set, not granted the tenant)
28000 invalid_authorization_specification  :class:`ClaimError` (a signed tenant claim is bad or expired)
28P01 invalid_password                     :class:`AuthenticationError` (the login's password)
25006 read_only_sql_transaction            :class:`ReadOnlyError` (a write sent to a hot standby)
55000 object_not_in_prerequisite_state     :class:`PrerequisiteError` (pg_cron or an engine module missing)
57014 query_canceled                       :class:`StatementTimeout` (statement_timeout reached)
40001 serialization_failure                :class:`SerializationFailure` (retry the transaction)
40P01 deadlock_detected                    :class:`DeadlockDetected` (retry the transaction)
23505 unique_violation                     :class:`UniqueViolation`
54000 program_limit_exceeded               :class:`LimitExceeded` (an input over a limit)
42883 undefined_function                   :class:`NotInstalled` (pgmem is missing or older: migrate)
3F000 invalid_schema_name                  :class:`NotInstalled`
42P01 undefined_table                      :class:`NotInstalled`
=========================================  ========================================================

A mapped error keeps the server's words (``str(e)``), its ``hint`` and ``detail``, the
``sqlstate``, and the original psycopg error as ``__cause__``.
"""
from __future__ import annotations


class PgmemError(Exception):
    """Base class for pgmem errors."""


class SetupError(PgmemError):
    """The environment is not ready: a server, an extension or a package is missing."""


class ServerUnavailable(SetupError, ConnectionError):
    """The database server cannot be reached (down, wrong address, refused): the message names
    the address and what to check."""


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


# ---------------------------------------------------------------- by SQLSTATE class
class ConnectionFailure(DatabaseError, ConnectionError):
    """SQLSTATE class 08: the connection failed or was lost."""


class DataError(DatabaseError, ValueError):
    """SQLSTATE class 22: a value the database cannot take (format, range, encoding)."""


class IntegrityError(DatabaseError):
    """SQLSTATE class 23: a constraint refused the change."""


class TransactionStateError(DatabaseError):
    """SQLSTATE class 25: the transaction's state forbids the statement."""


class AuthorizationError(DatabaseError, PermissionError):
    """SQLSTATE class 28: the login, or a signed tenant claim, was refused."""


class TransactionRollback(DatabaseError):
    """SQLSTATE class 40: the transaction was rolled back; running it again may succeed."""


class AccessOrSyntaxError(DatabaseError):
    """SQLSTATE class 42: a name, a type or a privilege is wrong."""


class ResourceError(DatabaseError):
    """SQLSTATE class 53: the server ran out of a resource (memory, disk, connections)."""


class LimitExceeded(DatabaseError, ValueError):
    """SQLSTATE class 54 (54000): an input over one of the server's limits."""


class PrerequisiteError(DatabaseError):
    """SQLSTATE class 55 (55000): something the call needs is not there (pg_cron, an engine module)."""


class OperatorIntervention(DatabaseError):
    """SQLSTATE class 57: the statement was cancelled or the server is shutting down."""


class RaisedError(DatabaseError):
    """SQLSTATE class P0: a PL/pgSQL RAISE without a more specific SQLSTATE."""


class InternalError(DatabaseError):
    """SQLSTATE class XX: an internal error of the server."""


# ---------------------------------------------------------------- one SQLSTATE each
class InvalidInput(DataError):
    """An argument the database refused (SQLSTATE 22023): the message names it and the fix."""

    sqlstate = "22023"


class NotFound(RaisedError, LookupError):
    """The memory (or other object) asked for does not exist for this tenant (SQLSTATE P0002)."""

    sqlstate = "P0002"


class TenantError(AccessOrSyntaxError, PermissionError):
    """The session has no tenant, or its login may not act for the tenant (SQLSTATE 42501)."""

    sqlstate = "42501"


class ClaimError(AuthorizationError):
    """A signed tenant claim is malformed, wrongly signed or expired (SQLSTATE 28000): get a
    fresh one from the auth service (``MemoryClient.set_tenant_claim``)."""

    sqlstate = "28000"


class AuthenticationError(AuthorizationError):
    """The server refused the login's password (SQLSTATE 28P01)."""

    sqlstate = "28P01"


class ReadOnlyError(TransactionStateError):
    """A write was sent to a read-only hot standby (SQLSTATE 25006): send it to the primary."""

    sqlstate = "25006"


class StatementTimeout(OperatorIntervention, TimeoutError):
    """The statement ran past statement_timeout and was cancelled (SQLSTATE 57014)."""

    sqlstate = "57014"


class SerializationFailure(TransactionRollback):
    """SQLSTATE 40001: a concurrent transaction conflicted; run it again."""

    sqlstate = "40001"


class DeadlockDetected(TransactionRollback):
    """SQLSTATE 40P01: two transactions waited for each other; run it again."""

    sqlstate = "40P01"


class UniqueViolation(IntegrityError):
    """SQLSTATE 23505: the key already exists."""

    sqlstate = "23505"


class NotInstalled(AccessOrSyntaxError):
    """pgmem's schema, a table or a function is missing (SQLSTATE 3F000, 42P01, 42883): the
    database is not migrated, or to an older version: run ``pgmem migrate``."""


#: SQLSTATE -> client exception (the table in this module's docstring).
SQLSTATE_ERRORS: dict[str, type[DatabaseError]] = {
    "22023": InvalidInput,
    "P0002": NotFound,
    "42501": TenantError,
    "28000": ClaimError,
    "28P01": AuthenticationError,
    "25006": ReadOnlyError,
    "55000": PrerequisiteError,
    "57014": StatementTimeout,
    "40001": SerializationFailure,
    "40P01": DeadlockDetected,
    "23505": UniqueViolation,
    "54000": LimitExceeded,
    "42883": NotInstalled,
    "3F000": NotInstalled,
    "42P01": NotInstalled,
}

#: SQLSTATE class (its first two characters) -> exception, for the SQLSTATEs not in SQLSTATE_ERRORS.
SQLSTATE_CLASSES: dict[str, type[DatabaseError]] = {
    "08": ConnectionFailure, "22": DataError, "23": IntegrityError, "25": TransactionStateError,
    "28": AuthorizationError, "40": TransactionRollback, "42": AccessOrSyntaxError, "53": ResourceError,
    "54": LimitExceeded, "55": PrerequisiteError, "57": OperatorIntervention, "P0": RaisedError,
    "XX": InternalError,
}

_NOT_INSTALLED_HINT = "pgmem is not installed in this database, or is older than this client: run `pgmem migrate`"


def error_class(sqlstate: str | None) -> type[DatabaseError]:
    """The exception class of a SQLSTATE (:data:`SQLSTATE_ERRORS`, else its class's)."""
    state = sqlstate or ""
    return SQLSTATE_ERRORS.get(state) or SQLSTATE_CLASSES.get(state[:2]) or DatabaseError


def from_database(exc: BaseException) -> BaseException:
    """The client exception for a psycopg error with a SQLSTATE (see :func:`error_class`), or
    ``exc`` itself when it carries none (a client-side error). Use as
    ``raise from_database(e) from e``."""
    state = getattr(exc, "sqlstate", None)
    if not state:
        return exc
    cls = error_class(state)
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    text = str(exc).strip()
    message = (primary or (text.splitlines()[0] if text else state)).strip()
    hint = getattr(diag, "message_hint", None) if diag is not None else None
    if cls is NotInstalled and not hint and "pgmem" in message:
        hint = _NOT_INSTALLED_HINT
    return cls(message, hint=hint, detail=getattr(diag, "message_detail", None), sqlstate=state)
