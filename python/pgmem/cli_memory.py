"""Memory commands of the ``pgmem`` CLI (remember, ingest, search, ...)."""
from __future__ import annotations


def register(sub) -> None:
    """Add the memory subcommands to the parser."""
