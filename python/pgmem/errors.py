"""Errors raised by the pgmem client. Each carries a message written for a person:
what failed, with which input, and what to do about it."""


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
