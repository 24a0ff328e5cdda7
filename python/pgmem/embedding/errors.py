"""Errors of the embedders (pgmem.errors is the layer under this package)."""
from __future__ import annotations

from ..errors import PgmemError, SetupError


class EmbeddingModelError(SetupError, RuntimeError):
    """The embedding model (or the package that runs it) could not be loaded."""


class EmbeddingUnavailable(EmbeddingModelError, ImportError):
    """A package the chosen embedder needs is not installed (``.name`` names it); the message
    names the extra to install."""

    def __init__(self, message: str, *, name: str | None = None):
        EmbeddingModelError.__init__(self, message)
        self.msg = message
        self.name = name
        self.path = None

    def __str__(self) -> str:
        return self.msg


class EmbeddingError(PgmemError, RuntimeError):
    """An embedding request failed (the HTTP embedder's server refused it, or stayed down
    after the retries); the message names the server and what to check."""
