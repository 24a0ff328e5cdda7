"""pgmem: long-term memory for LLM agents, inside PostgreSQL.

The engine (surprise gate, fused ranking, decay, merging, pruning, clustering) is SQL in
schema ``pgmem``; this package is the thin client around it."""
__version__ = "0.1.0"

from .errors import (  # noqa: E402
    ConfigError,
    DatabaseError,
    InvalidInput,
    NotFound,
    PgmemError,
    SetupError,
    TenantError,
)


def __getattr__(name):  # lazy: importing pgmem must not import torch
    if name in ("MemoryClient", "AsyncMemoryClient", "Hit", "RememberResult"):
        from . import client

        return getattr(client, name)
    raise AttributeError(name)


__all__ = ["MemoryClient", "AsyncMemoryClient", "Hit", "RememberResult", "PgmemError", "SetupError",
           "ConfigError", "DatabaseError", "InvalidInput", "NotFound", "TenantError"]
