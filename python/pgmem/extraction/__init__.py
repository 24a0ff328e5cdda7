"""5W1H extraction: turn a raw agent event into the fields of a memory.

JAM (jam-journalistic-agent-memory.md, Stages 1.1-1.2) turns an event (content plus
timestamp, actor, event type) into who / what / when / where / why / how with an LLM. pgmem
offers two extractors with the same interface:

* :class:`HeuristicExtractor` - deterministic, offline, rule based. Every rule is small
  and written down next to its code, so a user can predict what it stores.
* :class:`LLMExtractor` - any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI,
  Ollama, vLLM, llama.cpp server), standard library only. It never raises for server
  problems: it falls back to the heuristic result and logs one warning.

:func:`make_extractor` picks one from the environment (``PGMEM_LLM_BASE_URL``).

The code lives in :mod:`.base` (result type, protocol, events), :mod:`.heuristic` and
:mod:`.llm`; every public name stays importable from ``pgmem.extraction``.
"""

from __future__ import annotations

import os

from .base import CATEGORIES, Extraction, Extractor
from .heuristic import HeuristicExtractor, emotion, extract_entities, keywords, summarize
from .llm import SYSTEM_PROMPT, LLMExtractor, validate_llm_fields


__all__ = [
    "CATEGORIES",
    "Extraction",
    "Extractor",
    "HeuristicExtractor",
    "LLMExtractor",
    "SYSTEM_PROMPT",
    "emotion",
    "extract_entities",
    "keywords",
    "make_extractor",
    "summarize",
    "validate_llm_fields",
]


def make_extractor(kind: str | None = None) -> Extractor:
    """The extractor to use: ``"llm"`` when asked or when ``PGMEM_LLM_BASE_URL`` is set
    (``kind`` None or ``"auto"``), else ``"heuristic"``."""
    choice = (kind or "auto").strip().lower()
    if choice == "auto":
        choice = "llm" if os.environ.get("PGMEM_LLM_BASE_URL", "").strip() else "heuristic"
    if choice == "llm":
        return LLMExtractor()
    if choice == "heuristic":
        return HeuristicExtractor()
    raise ValueError(f"unknown extractor kind {kind!r} (use 'llm', 'heuristic' or 'auto')")
