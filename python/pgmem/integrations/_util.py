"""What the integrations share: the client they are given or make, and the one-line error
for a missing framework."""
from __future__ import annotations

from typing import Any

from ..config import DISTRIBUTION
from ..errors import SetupError


def require(module: str, extra: str) -> Any:
    """Import a framework's module, or a SetupError naming the extra to install."""
    from importlib import import_module

    try:
        return import_module(module)
    except ImportError as e:
        raise SetupError(f"this integration needs {e.name} ({module}): pip install '{DISTRIBUTION}[{extra}]'") from None


def make_client(client: Any = None, *, dsn: str | None = None, tenant: str | None = None, embedder: Any = "auto"):
    """The caller's MemoryClient, or one for dsn (default PGMEM_DSN, else the embedded cluster)
    and tenant (default PGMEM_TENANT, else 'default')."""
    if client is not None:
        return client
    import os

    from ..client import MemoryClient

    return MemoryClient(dsn, tenant=tenant or os.environ.get("PGMEM_TENANT") or "default", embedder=embedder)
