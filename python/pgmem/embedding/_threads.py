"""Threads of the embedding models, set in one place for every entry point (client, worker,
CLI, MCP, web): each of them reaches a model only through this package.

Issue 23 ("The client's embedder collapses when the other core is busy"): with torch's default
of one OpenMP thread per core, a single query embedding took 466-500 ms on a 2-core machine
whose other core PostgreSQL kept busy, against 13 ms on one thread: OpenMP's worker threads
spin while they wait, and a spinning thread that shares its core with a busy backend makes
every parallel region wait for the slowest. pgmem's embedded default always runs beside
PostgreSQL, so this is the normal case. The fix:

* ``OMP_WAIT_POLICY=PASSIVE`` and ``TOKENIZERS_PARALLELISM=false`` are set (unless the user
  set them) when :mod:`pgmem.embedding` is imported, which is before torch or onnxruntime
  start their pools: waiting threads sleep instead of spinning;
* every model runs on :func:`embed_threads` threads (``PGMEM_EMBED_THREADS``, default 1):
  ``torch.set_num_threads`` for sentence-transformers, ``intra_op_num_threads`` with
  spinning off for onnxruntime. One thread is the fastest for a query beside a busy server;
  a machine with idle cores can raise it for bulk ingest.
"""
from __future__ import annotations

import os

#: Environment variable: threads of an embedding model (default 1).
ENV_THREADS = "PGMEM_EMBED_THREADS"


def configure_process() -> None:
    """Environment defaults read once by OpenMP and the tokenizers when they load."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def embed_threads() -> int:
    """Threads for an embedding model: ``PGMEM_EMBED_THREADS`` (1 to 256), default 1."""
    from ..config import int_env
    from ..errors import ConfigError

    n = int_env(ENV_THREADS, 1)
    if not 1 <= n <= 256:
        raise ConfigError(f"{ENV_THREADS}={n} is outside 1..256: give the number of threads an embedding model uses")
    return n


def set_torch_threads(n: int) -> None:
    """torch's intra-op threads (process-wide: torch has one pool)."""
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
