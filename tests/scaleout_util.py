"""Private clusters for the scale-out tests (issue 19): primaries with standbys, shard clusters.

They live under .pgmem/scale-<id>/ on free ports of this checkout's range (port_range()), with
small memory settings, and are stopped and removed at the end of their module.
"""
from __future__ import annotations

import os
import shutil
import uuid
import zlib

import numpy as np

from conftest import DIM, ROOT
from pgmem import migrate
from pgmem.cluster import Cluster, port_in_use

SMALL = {"shared_buffers": "'128MB'", "max_connections": "40", "max_worker_processes": "8",
         "maintenance_work_mem": "'64MB'"}
_taken: set[int] = set()


def port_range() -> tuple[int, int]:
    """PGMEM_SCALE_PORTS ("lo-hi"), else 20 ports of this checkout's own, derived from its test
    port (55000 + 20 * (PGMEM_TEST_PORT - 54300)): runs in other checkouts cannot take them."""
    env = os.environ.get("PGMEM_SCALE_PORTS")
    if env:
        lo, hi = (int(x) for x in env.split("-"))
        return lo, hi
    lo = 55000 + 20 * (int(os.environ.get("PGMEM_TEST_PORT", "54330")) - 54300)
    return lo, lo + 19


def free_port() -> int:
    lo, hi = port_range()
    for port in range(lo, hi + 1):
        if port not in _taken and not port_in_use(port):
            _taken.add(port)
            return port
    raise RuntimeError(f"no free port in {lo}..{hi} (PGMEM_SCALE_PORTS)")


def scratch_home(kind: str):
    return ROOT / ".pgmem" / f"scale-{kind}-{uuid.uuid4().hex[:8]}"


def new_cluster(home, settings: dict | None = None) -> Cluster:
    """A created, started, migrated cluster with pgmem_owner's login (like `pgmem db up`)."""
    c = Cluster(home=home, port=free_port(), dbname="pgmem", cron_database="pgmem",
                settings={**SMALL, **(settings or {})})
    c.init()
    c.start()
    c.wait_ready()
    c.ensure_database("pgmem", tenant=None)
    migrate.upgrade(c.dsn("pgmem"))
    c.ensure_owner_login()
    return c


def destroy(*clusters: Cluster) -> None:
    """Stop every cluster under the clusters' homes (standbys live inside their primary's home,
    and one left half-made by a failed step is found too), then delete the homes."""
    for c in clusters:
        for pidfile in sorted(c.home.glob("**/postmaster.pid")):
            try:
                Cluster(pidfile.parent.parent).stop("immediate")
            except Exception:
                pass
    for c in clusters:
        shutil.rmtree(c.home, ignore_errors=True)


def vec(seed: int) -> list[float]:
    """A deterministic unit vector (the tests compare rankings, not meanings)."""
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return (v / np.linalg.norm(v)).tolist()


class HashEmbedder:
    """A deterministic stand-in for MiniLM for the worker (the meaning of vectors is not tested here)."""

    model_name = "test-hash"

    def embed_many(self, texts):
        return [np.asarray(vec(zlib.crc32(t.encode())), dtype=np.float32) for t in texts]

    def embed(self, text):
        return self.embed_many([text])[0]
