"""The interface every embedder implements, and the choice of the embedder.

``Embedder()`` is the embedder the user configured (:func:`embedder_class`): an instance of
one of the subclasses below, all with the same methods. Vectors are float32 and L2-normalised
(JAM, Stage 1.3: ``model.encode(text, normalize_embeddings=True)``), so cosine similarity is
a dot product.

=================  ==========================================  =============================
kind               class                                       extra
=================  ==========================================  =============================
``local``          :class:`~.local.SentenceTransformerEmbedder`  ``[embed]`` (torch)
``onnx``           :class:`~.onnx.OnnxEmbedder` (int8 MiniLM)   ``[onnx]`` (onnxruntime)
``http``           :class:`~.http.HttpEmbedder` (/v1/embeddings) ``[http]`` (numpy only)
=================  ==========================================  =============================
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import ConfigError
from .text import check_text

#: Environment variable choosing the embedder: auto (default), local, onnx or http.
ENV_KIND = "PGMEM_EMBEDDER"
#: Environment variables of the instruction prefixes of asymmetric models.
ENV_QUERY_PREFIX = "PGMEM_EMBED_QUERY_PREFIX"
ENV_DOCUMENT_PREFIX = "PGMEM_EMBED_DOCUMENT_PREFIX"

KIND_ALIASES = {
    "auto": "auto", "": "auto",
    "local": "local", "sentence-transformers": "local", "torch": "local",
    "onnx": "onnx", "onnx-int8": "onnx", "int8": "onnx",
    "http": "http", "openai": "http",
}

# Instruction prefixes of asymmetric retrieval models, by a word of their name. The layered
# design (layered-memory-architecture.md, Step 1) embeds questions of BAAI/bge-base-en-v1.5
# with its QUERY_INSTRUCTION and passages without one; E5 and nomic-embed-text mark both sides.
# (query prefix, document prefix); PGMEM_EMBED_QUERY_PREFIX / _DOCUMENT_PREFIX override them.
KNOWN_PREFIXES: list[tuple[str, tuple[str, str]]] = [
    ("bge-", ("Represent this sentence for searching relevant passages: ", "")),
    ("e5-", ("query: ", "passage: ")),
    ("nomic-embed-text", ("search_query: ", "search_document: ")),
    ("mxbai-embed", ("Represent this sentence for searching relevant passages: ", "")),
]


def known_prefixes(model: str) -> tuple[str, str]:
    """The (query, document) prefixes of a known asymmetric model, else ("", "")."""
    low = (model or "").lower()
    for word, prefixes in KNOWN_PREFIXES:
        if word in low:
            return prefixes
    return "", ""


def embedder_kind(kind: str | None = None, model: str | None = None) -> str:
    """The embedder to build: ``kind`` (or ``PGMEM_EMBEDDER``), with ``auto`` resolved.

    auto: the HTTP embedder when ``PGMEM_EMBED_BASE_URL`` or ``OPENAI_EMBEDDING_MODEL`` is set; sentence-transformers when a
    model is named (argument or ``PGMEM_EMBED_MODEL``: any sentence-transformers model); else
    the default model, all-MiniLM-L6-v2, in its fastest build that is installed and qualifies
    (:data:`pgmem.embedding.onnx.DEFAULT_QUALIFIES`): the int8 ONNX build, else the float model.
    """
    raw = (kind if kind is not None else os.environ.get(ENV_KIND, "auto")).strip().lower()
    if raw not in KIND_ALIASES:
        raise ConfigError(f"{ENV_KIND if kind is None else 'kind'}={raw!r} is not an embedder: "
                          f"use auto, local (sentence-transformers), onnx (int8 MiniLM) or http (OpenAI-compatible)")
    chosen = KIND_ALIASES[raw]
    if chosen != "auto":
        return chosen
    if os.environ.get("PGMEM_EMBED_BASE_URL", "").strip() or os.environ.get("OPENAI_EMBEDDING_MODEL", "").strip():
        return "http"  # (OPENAI_EMBEDDING_MODEL alone: OpenAI's embeddings, shadow-memory-system.md; issue 36)
    named = (model or os.environ.get("PGMEM_EMBED_MODEL", "")).strip()
    if named:
        from .local import is_default_model

        if not is_default_model(named):
            return "local"
    from .onnx import DEFAULT_QUALIFIES, onnx_available

    from importlib.util import find_spec

    onnx_ok = onnx_available()
    if DEFAULT_QUALIFIES and onnx_ok:
        return "onnx"
    if find_spec("sentence_transformers") is not None:
        return "local"
    if onnx_ok:
        return "onnx"
    from ..config import DISTRIBUTION
    from .errors import EmbeddingUnavailable

    raise EmbeddingUnavailable(f"no embedding model is installed: pip install '{DISTRIBUTION}[onnx]' (or [embed], "
                               "or [http] with PGMEM_EMBED_BASE_URL)", name="onnxruntime")


def embedder_class(kind: str | None = None, model: str | None = None) -> type[Embedder]:
    chosen = embedder_kind(kind, model)
    if chosen == "local":
        from .local import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder
    if chosen == "onnx":
        from .onnx import OnnxEmbedder

        return OnnxEmbedder
    from .http import HttpEmbedder

    return HttpEmbedder


class Embedder:
    """Lazy, cached, thread-safe sentence embedder; ``Embedder()`` builds the configured one.

    ``Embedder(model=None, *, kind=None, batch_size=64, cache_size=4096, query_prefix=None,
    document_prefix=None)``: ``kind`` is auto, local, onnx or http (default ``PGMEM_EMBEDDER``,
    else auto: see :func:`embedder_kind`). The model loads on first use. An LRU cache of recent
    texts (``cache_size`` entries, 0 disables it) lets repeated texts skip the model.

    ``embed``/``embed_many`` embed documents (memories), ``embed_query`` a question: an
    asymmetric model (bge, e5, nomic) gets its instruction prefix there (``query_prefix``,
    default ``PGMEM_EMBED_QUERY_PREFIX``, else the model's known prefix; "" for none).
    """

    kind = "auto"

    def __new__(cls, *args: Any, **kwargs: Any):
        if cls is Embedder:
            cls = embedder_class(kwargs.get("kind"), args[0] if args else kwargs.get("model"))
        return super().__new__(cls)

    # ---------------------------------------------------------------- shared set-up
    def _setup(self, *, batch_size: int, cache_size: int, query_prefix: str | None,
               document_prefix: str | None, prefix_model: str) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError("cache_size must be >= 0")
        self.batch_size = batch_size
        self.cache_size = cache_size
        q, d = known_prefixes(prefix_model)
        self.query_prefix = (query_prefix if query_prefix is not None
                             else os.environ.get(ENV_QUERY_PREFIX, q))
        self.document_prefix = (document_prefix if document_prefix is not None
                                else os.environ.get(ENV_DOCUMENT_PREFIX, d))
        self._model_lock = threading.RLock()  # guards loading and every model call
        self._cache_lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    # ---------------------------------------------------------------- subclasses
    @property
    def model_name(self) -> str:  # pragma: no cover - abstract
        """Stable identity of the model, stored next to its vectors (memories.embedding_model)."""
        raise NotImplementedError

    @property
    def dim(self) -> int:  # pragma: no cover - abstract
        """Vector dimension (loads the model, or asks the server, if needed)."""
        raise NotImplementedError

    @property
    def is_loaded(self) -> bool:
        return True

    def _encode(self, texts: list[str], batch_size: int | None = None,
                show_progress: bool = False) -> np.ndarray:  # pragma: no cover - abstract
        """One call into the model: float32 unit rows, in input order."""
        raise NotImplementedError

    def check_available(self) -> None:
        """Raise EmbeddingUnavailable (an ImportError) naming the extra when a package this
        embedder needs is not installed; without loading anything."""

    def describe(self) -> dict[str, Any]:
        """What this embedder is, for logs and the benchmark's JSON."""
        return {"kind": self.kind, "model": self.model_name, "batch_size": self.batch_size,
                "query_prefix": self.query_prefix, "document_prefix": self.document_prefix}

    # ---------------------------------------------------------------- cache
    def _cache_get(self, text: str) -> np.ndarray | None:
        if not self.cache_size:
            return None
        with self._cache_lock:
            row = self._cache.get(text)
            if row is not None:
                self._cache.move_to_end(text)
            return row

    def _cache_put(self, text: str, row: np.ndarray) -> None:
        if not self.cache_size:
            return
        frozen = row.copy()
        frozen.setflags(write=False)
        with self._cache_lock:
            self._cache[text] = frozen
            self._cache.move_to_end(text)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def cache_clear(self) -> None:
        """Forget every cached vector."""
        with self._cache_lock:
            self._cache.clear()

    @property
    def cache_len(self) -> int:
        """Number of texts currently cached."""
        return len(self._cache)

    # ---------------------------------------------------------------- API
    def _one(self, text: str) -> np.ndarray:
        cached = self._cache_get(text)
        if cached is not None:
            return cached.copy()
        row = _unit_rows(self._encode([text]))[0]
        self._cache_put(text, row)
        return row

    def embed(self, text: str) -> np.ndarray:
        """Embed one document (a memory): float32, L2-normalised, shape ``(dim,)``."""
        check_text(text)
        return self._one(self.document_prefix + text)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one question: with the query instruction prefix of an asymmetric model."""
        check_text(text)
        return self._one(self.query_prefix + text)

    def embed_many(self, texts: Iterable[str], batch_size: int | None = None,
                   show_progress: bool = False) -> np.ndarray:
        """Embed many documents: float32 array of shape ``(n, dim)``, rows in input order.

        Cached texts are taken from the cache; the misses (each distinct text once) are
        encoded together, ``batch_size`` at a time."""
        items = list(texts)
        for text in items:
            check_text(text)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        items = [self.document_prefix + t for t in items]
        rows: list[np.ndarray | None] = [self._cache_get(t) for t in items]
        misses = list(dict.fromkeys(t for t, r in zip(items, rows) if r is None))
        if misses:
            encoded = _unit_rows(self._encode(misses, batch_size=batch_size, show_progress=show_progress))
            fresh = dict(zip(misses, encoded))
            for text, row in fresh.items():
                self._cache_put(text, row)
            rows = [fresh[t] if r is None else r for t, r in zip(items, rows)]
        return np.stack([r for r in rows if r is not None]).astype(np.float32, copy=False)  # np.stack copies

    def close(self) -> None:
        """Release what the embedder holds (connections, sessions); it reloads on next use."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model_name!r}, {'loaded' if self.is_loaded else 'not loaded'})"


def _unit_rows(vectors: Any) -> np.ndarray:
    """float32 rows scaled to norm 1 (models without a Normalize layer; zero rows stay zero)."""
    # (in float64: a server answering components of 1e30, finite in float32, squares them past
    # float32's range, and a float32 norm of inf made every row zero; issue 35, L4)
    out = np.array(vectors, dtype=np.float64, copy=True)
    if out.ndim == 1:
        out = out.reshape(1, -1)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out.astype(np.float32)
