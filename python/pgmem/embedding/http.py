"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM,
LM Studio, llama.cpp server, text-embeddings-inference): the ``[http]`` extra, numpy only.

Settings (arguments win over the environment):

=============================  ===============================================================
``PGMEM_EMBED_BASE_URL``       the API's base URL, e.g. ``https://api.openai.com/v1`` or
                               ``http://127.0.0.1:11434/v1`` (Ollama); ``/embeddings`` is added;
                               else ``OPENAI_BASE_URL`` (as OpenAI's SDK reads it), else, when
                               ``OPENAI_EMBEDDING_MODEL`` is set, OpenAI's own API
``PGMEM_EMBED_MODEL``          the model, e.g. ``text-embedding-3-small`` (Shadow's default,
                               shadow-memory-system.md "Environment Variables":
                               ``OPENAI_EMBEDDING_MODEL`` is read too)
``PGMEM_EMBED_API_KEY``        bearer token (else ``OPENAI_API_KEY``); none for a local server
``PGMEM_EMBED_DIMENSIONS``     ask for this many dimensions (text-embedding-3-* shorten their
                               vectors; else ``OPENAI_EMBEDDING_DIMENSIONS``); also the
                               expected length of every vector
``PGMEM_EMBED_TIMEOUT``        seconds per request (default 30)
=============================  ===============================================================

Requests carry up to ``batch_size`` texts (default 64). Timeouts, connection errors, HTTP 429
and 5xx are retried ``retries`` times (default 3) with exponential backoff, honouring a
``Retry-After`` of at most 30 s; any other 4xx fails at once with the server's words. Every
vector is checked (count, length, finite) and L2-normalised.
"""
from __future__ import annotations

import http.client
import json
import logging
import math
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import numpy as np

from ..errors import ConfigError
from .base import Embedder
from .errors import EmbeddingError

log = logging.getLogger("pgmem.embedding")

#: Dimensions of OpenAI's models (the Shadow design's list: 3-small 1536, 3-large 3072, ada-002 1536).
OPENAI_BASE_URL = "https://api.openai.com/v1"
KNOWN_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


def _env(*names: str) -> str:
    for n in names:
        v = os.environ.get(n, "").strip()
        if v:
            return v
    return ""


def _is_loopback(url: str) -> bool:
    import ipaddress

    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class HttpEmbedder(Embedder):
    """An OpenAI-compatible embeddings endpoint (``kind="http"``); see the module's table."""

    kind = "http"

    def __init__(
        self,
        model: str | None = None,
        *,
        kind: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float | None = None,
        retries: int = 3,
        backoff: float = 0.5,
        batch_size: int = 64,
        cache_size: int = 4096,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        threads: int | None = None,
    ) -> None:
        # shadow-memory-system.md, Environment Variables (issue 36, S37): OPENAI_EMBEDDING_MODEL alone
        # selects OpenAI's embeddings (OPENAI_BASE_URL, as OpenAI's SDK reads it, may point elsewhere)
        base_url = (base_url or _env("PGMEM_EMBED_BASE_URL", "OPENAI_BASE_URL")
                    or (OPENAI_BASE_URL if _env("OPENAI_EMBEDDING_MODEL") else "")).strip()
        if not base_url:
            raise ConfigError("the HTTP embedder needs a server: set PGMEM_EMBED_BASE_URL "
                              "(e.g. https://api.openai.com/v1, or http://127.0.0.1:11434/v1 for Ollama)")
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"PGMEM_EMBED_BASE_URL={base_url!r} is not an http(s) URL: "
                              "use e.g. https://api.openai.com/v1")
        model = (model or _env("PGMEM_EMBED_MODEL", "OPENAI_EMBEDDING_MODEL")).strip()
        # (the design's default, openai/text-embedding-3-small, is a router's name: OpenAI's own
        # API knows the model as text-embedding-3-small)
        if model.startswith("openai/") and parts.hostname == "api.openai.com":
            model = model[len("openai/"):]
        if not model:
            raise ConfigError("the HTTP embedder needs a model: set PGMEM_EMBED_MODEL (e.g. text-embedding-3-small, "
                              "or nomic-embed-text for Ollama)")
        if dimensions is None:
            raw = _env("PGMEM_EMBED_DIMENSIONS", "OPENAI_EMBEDDING_DIMENSIONS")
            if raw:
                try:
                    dimensions = int(raw)
                except ValueError:
                    raise ConfigError(f"PGMEM_EMBED_DIMENSIONS={raw!r} is not an integer") from None
        if dimensions is not None and not 1 <= dimensions <= 16000:
            raise ConfigError(f"dimensions={dimensions} is outside 1..16000 (pgvector's limit)")
        if timeout is None:
            raw = _env("PGMEM_EMBED_TIMEOUT")
            try:
                timeout = float(raw) if raw else 30.0
            except ValueError:
                raise ConfigError(f"PGMEM_EMBED_TIMEOUT={raw!r} is not a number of seconds") from None
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ConfigError("timeout must be > 0, retries and backoff >= 0")
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/embeddings") else base + "/embeddings"
        self._model = model
        self.api_key = api_key if api_key is not None else (_env("PGMEM_EMBED_API_KEY", "OPENAI_API_KEY") or None)
        self.dimensions = dimensions
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self._setup(batch_size=batch_size, cache_size=cache_size, query_prefix=query_prefix,
                    document_prefix=document_prefix, prefix_model=model)
        self._dim: int | None = dimensions or KNOWN_DIMENSIONS.get(model)
        self.requests = 0  # POSTs sent (retries included), for tests and logs
        # a local server (Ollama, vLLM) must not be sent through an HTTP proxy
        self._opener = (urllib.request.build_opener(urllib.request.ProxyHandler({}))
                        if _is_loopback(self.url) else urllib.request.build_opener())

    @property
    def model_name(self) -> str:
        return self._model if not self.dimensions else f"{self._model}@{self.dimensions}"

    @property
    def dim(self) -> int:
        if self._dim is None:  # ask the server once
            self._dim = int(self._encode(["dimension probe"]).shape[1])
        return self._dim

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "url": self.url, "dimensions": self.dimensions, "timeout": self.timeout,
                "retries": self.retries}

    # ------------------------------------------------------------------ requests
    def _post(self, texts: list[str]) -> np.ndarray:
        payload: dict[str, Any] = {"model": self._model, "input": texts, "encoding_format": "float"}
        if self.dimensions:
            payload["dimensions"] = self.dimensions
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "pgmem-embedding"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"), headers=headers,
                                         method="POST")
        self.requests += 1
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            try:
                detail = exc.read(300).decode("utf-8", "replace").strip()
            except Exception:
                detail = ""
            retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            exc.close()
            message = f"HTTP {exc.code} {exc.reason}" + (f": {detail}" if detail else "")
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(message, retry_after) from None
            hint = {401: "check PGMEM_EMBED_API_KEY", 403: "check PGMEM_EMBED_API_KEY",
                    404: "check PGMEM_EMBED_BASE_URL (it should end in /v1) and PGMEM_EMBED_MODEL"}.get(
                        exc.code, "check PGMEM_EMBED_MODEL and PGMEM_EMBED_DIMENSIONS")
            raise EmbeddingError(f"the embedding server {self.url} refused the request ({message}): {hint}") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise _Retryable(f"timed out after {self.timeout:g}s") from None
            raise _Retryable(f"connection error: {reason}") from None
        except (TimeoutError, socket.timeout):
            raise _Retryable(f"timed out after {self.timeout:g}s") from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            raise _Retryable(f"connection error: {type(exc).__name__}: {exc}") from None
        try:
            data = json.loads(raw.decode("utf-8"))
            items = sorted(data["data"], key=lambda d: d.get("index", 0))
            rows = [d["embedding"] for d in items]
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise _Retryable(f"the answer is not an embeddings response: {raw[:120]!r}") from None
        if len(rows) != len(texts):
            raise EmbeddingError(f"the embedding server {self.url} returned {len(rows)} vectors for {len(texts)} texts")
        lengths = {len(r) if isinstance(r, list) else -1 for r in rows}
        if len(lengths) != 1 or -1 in lengths:
            raise EmbeddingError(f"the embedding server {self.url} returned vectors of lengths {sorted(lengths)}: "
                                 "expected one list of numbers per text (encoding_format float)")
        out = np.asarray(rows, dtype=np.float32)
        n = out.shape[1]
        want = self.dimensions or self._dim
        if want and n != want:
            raise EmbeddingError(f"the embedding server {self.url} returned {n}-dimensional vectors, but "
                                 f"{self._model} was configured for {want}: set PGMEM_EMBED_DIMENSIONS={n}, "
                                 "or a model that makes the dimension pgmem was installed with")
        if not np.isfinite(out).all():
            raise EmbeddingError(f"the embedding server {self.url} returned NaN or infinite values")
        return out

    def _post_with_retries(self, texts: list[str]) -> np.ndarray:
        attempt = 0
        while True:
            try:
                return self._post(texts)
            except _Retryable as e:
                if attempt >= self.retries:
                    raise EmbeddingError(f"the embedding server {self.url} failed {attempt + 1} time(s), last: {e}: "
                                         "check that it runs and PGMEM_EMBED_BASE_URL, or raise PGMEM_EMBED_TIMEOUT") from None
                delay = e.retry_after if e.retry_after is not None else self.backoff * (2 ** attempt)
                attempt += 1
                log.warning("embedding request failed (%s); retry %d/%d in %.2fs", e, attempt, self.retries, delay)
                time.sleep(delay)

    def _encode(self, texts: list[str], batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        size = batch_size or self.batch_size
        parts = [self._post_with_retries(texts[i:i + size]) for i in range(0, len(texts), size)]
        out = np.concatenate(parts, axis=0)
        if self._dim is None:
            self._dim = int(out.shape[1])
        return out


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the number form), capped at 30 s; None when absent or a date."""
    if not value:
        return None
    try:
        s = float(value)
    except ValueError:
        return None
    return min(30.0, max(0.0, s)) if math.isfinite(s) else None
