"""The embedding worker: embeds queued memories (rows written without a vector).

Each batch is one transaction: claim rows from pgmem.embedding_queue with FOR UPDATE SKIP
LOCKED, embed them on the CPU, complete them in one SQL statement, commit. Several workers
can run at once; a worker killed mid-batch rolls back, so no row stays locked or
half-written and another worker takes the rows. SIGINT/SIGTERM finish the current batch
and stop.
"""
from __future__ import annotations

import logging
import signal
import threading

import psycopg

from .db import connect

log = logging.getLogger("pgmem.worker")


class EmbeddingWorker:
    def __init__(self, dsn: str | None = None, *, embedder=None, batch: int = 64, tenant: str | None = None,
                 poll_interval: float = 1.0):
        self.dsn = dsn
        self._embedder = embedder
        self.batch = batch
        self.tenant = tenant  # None: every tenant (needs pgmem_admin or a superuser)
        self.poll_interval = poll_interval
        self._stop = threading.Event()
        self._conn: psycopg.Connection | None = None
        self.embedded = 0
        self.failed = 0

    @property
    def embedder(self):
        if self._embedder is None:
            from .embedding import Embedder

            self._embedder = Embedder()
        return self._embedder

    def stop(self, *_args) -> None:
        log.info("stop requested: finishing the current batch")
        self._stop.set()

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.dsn)
            # set_config, not libpq options: a tenant there would be parsed as more options
            self._conn.execute("select set_config('pgmem.tenant', %s, false)", (self.tenant or "",))
            self._conn.commit()  # a session setting, kept only if its transaction commits
            from pgvector.psycopg import register_vector

            register_vector(self._conn)
        return self._conn

    def run_once(self) -> int:
        """Embed one batch. Returns how many memories were embedded (0: queue empty)."""
        from .embedding import embedding_text

        conn = self._connection()
        ids: list[int] = []
        try:
            with conn.transaction():
                rows = conn.execute(
                    "select memory_id, content, who, what, location, why, how from pgmem.claim_embeddings(%s, %s)",
                    (self.batch, self.tenant is None)).fetchall()
                if not rows:
                    return 0
                ids = [r[0] for r in rows]
                texts = [embedding_text(content=r[1], who=r[2], what=r[3], where=r[4], why=r[5], how=r[6]) for r in rows]
                vectors = self.embedder.embed_many(texts)
                conn.execute(
                    "select pgmem.complete_embedding(t.id, t.v::vector, %s) "
                    "from unnest(%s::bigint[], %s::text[]) as t(id, v)",
                    (self.embedder.model_name, ids, [str(v.tolist()) for v in vectors]))
            self.embedded += len(ids)
            log.info("embedded %d memories (total %d)", len(ids), self.embedded)
            return len(ids)
        except psycopg.OperationalError:
            self._conn = None  # connection lost: the server rolled the batch back
            raise
        except Exception as e:
            if not ids:
                raise
            # the batch rolled back; record the failure so the rows are retried later with backoff
            self.failed += len(ids)
            log.warning("embedding %d memories failed (%s); they will be retried", len(ids), e)
            with conn.transaction():
                conn.execute("select pgmem.fail_embedding(id, %s) from unnest(%s::bigint[]) id", (str(e), ids))
            return 0

    def run(self, *, until_empty: bool = False, max_batches: int | None = None) -> int:
        """Loop until stopped (or the queue is empty with ``until_empty``)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        batches = 0
        try:
            while not self._stop.is_set():
                n = self.run_once()
                batches += 1
                if max_batches is not None and batches >= max_batches:
                    break
                if n == 0:
                    if until_empty:
                        break
                    self._stop.wait(self.poll_interval)
        finally:
            if self._conn is not None:
                self._conn.close()
        return self.embedded
