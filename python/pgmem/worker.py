"""The embedding worker: embeds queued memories (rows written without a vector), and the
memories of embedding moves to its model (``pgmem reembed``; sql/126_reembed.sql).

Each batch is one transaction: claim rows from pgmem.embedding_queue with FOR UPDATE SKIP
LOCKED, embed them on the CPU, complete them in one SQL statement, commit. Several workers
can run at once; a worker killed mid-batch rolls back, so no row stays locked or
half-written and another worker takes the rows. SIGINT/SIGTERM finish the current batch
and stop; ``pgmem worker`` (``hard_stop``) also exits within the deadline of
:mod:`pgmem._shutdown` when the batch (or the model's load) would take longer (issue 34): its
transaction rolls back and the rows are taken again. When the embedding queue is empty, the worker takes the memories of running moves
to its own model (pgmem.claim_reembeddings), stores their new vectors, and lets the database
swap a move's vectors once they are all ready (pgmem.finish_reembed).
"""
from __future__ import annotations

import logging
import signal
import threading

import psycopg

from .db import connect, require_pgmem, scalar

log = logging.getLogger("pgmem.worker")


class EmbeddingWorker:
    def __init__(self, dsn: str | None = None, *, embedder=None, batch: int = 64, tenant: str | None = None,
                 poll_interval: float = 1.0, reembed: bool = True, embed: bool = True, hard_stop: bool = False):
        self.dsn = dsn
        self._embedder = embedder
        self.batch = batch
        self.tenant = tenant  # None: every tenant (needs pgmem_admin or a superuser)
        self.poll_interval = poll_interval
        self.reembed = reembed  # also take the memories of embedding moves to this worker's model
        self.embed = embed      # the embedding queue (False: moves only, as `pgmem reembed` runs it)
        self._stop = threading.Event()
        self.hard_stop = hard_stop  # a signal also arms pgmem._shutdown's deadline (the CLI's worker)
        self._conn: psycopg.Connection | None = None
        self.embedded = 0
        self.reembedded = 0
        self.failed = 0

    @property
    def embedder(self):
        if self._embedder is None:
            from .embedding import Embedder

            self._embedder = Embedder()  # the configured one (PGMEM_EMBEDDER): the client's choice too
        return self._embedder

    def stop(self, *args) -> None:
        if self.hard_stop and args:
            from . import _shutdown

            _shutdown.arm("worker", args[0])  # a second signal exits at once
        log.info("stop requested: finishing the current batch")
        self._stop.set()

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.dsn)
            require_pgmem(self._conn, self._conn.info.dsn)  # a database without pgmem: one line (issue 34)
            # set_config, not libpq options: a tenant there would be parsed as more options
            self._conn.execute("select set_config('pgmem.tenant', %s, false)", (self.tenant or "",))
            self._conn.commit()  # a session setting, kept only if its transaction commits
            from pgvector.psycopg import register_vector

            register_vector(self._conn)
        return self._conn

    def run_once(self) -> int:
        """Embed one batch. Returns how many memories were embedded (0: queues empty)."""
        n = self._embed_batch() if self.embed else 0
        if n == 0 and self.reembed:
            n = self._reembed_batch()
        return n

    def _embed_batch(self) -> int:
        from .embedding.text import embedding_text

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

    def _reembed_batch(self) -> int:
        """One batch of the running embedding moves to this worker's model; then the swap of
        every move whose vectors are all ready."""
        from .embedding.text import embedding_text

        conn = self._connection()
        model = self.embedder.model_name
        try:
            with conn.transaction():
                if scalar(conn, "select to_regprocedure('pgmem.claim_reembeddings(integer, boolean, text)')") is None:
                    return 0  # a database older than this worker: nothing to move
                rows = conn.execute(
                    "select memory_id, content, who, what, location, why, how from pgmem.claim_reembeddings(%s, %s, %s)",
                    (self.batch, self.tenant is None, model)).fetchall()
                if rows:
                    texts = [embedding_text(content=r[1], who=r[2], what=r[3], where=r[4], why=r[5], how=r[6])
                             for r in rows]
                    vectors = self.embedder.embed_many(texts)
                    conn.execute(
                        "select pgmem.complete_reembedding(t.id, t.v::vector, %s) "
                        "from unnest(%s::bigint[], %s::text[]) as t(id, v)",
                        (model, [r[0] for r in rows], [str(v.tolist()) for v in vectors]))
            with conn.transaction():
                for _move, tenant, target, state, total, _pending in conn.execute(
                        "select * from pgmem.finish_reembed(%s)", (self.tenant is None,)).fetchall():
                    if state == "done":
                        log.info("tenant %s moved to model %s (%d memories)", tenant, target, total)
        except psycopg.OperationalError:
            self._conn = None
            raise
        self.reembedded += len(rows)
        if rows:
            log.info("re-embedded %d memories with %s (total %d)", len(rows), model, self.reembedded)
        return len(rows)

    def run(self, *, until_empty: bool = False, max_batches: int | None = None) -> int:
        """Loop until stopped (or the queues are empty with ``until_empty``)."""
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
        return self.embedded + self.reembedded
