"""What text is embedded for a memory, and the checks every embedder applies to its input.
No third-party import: the core install (without numpy) uses :func:`embedding_text` too."""
from __future__ import annotations

import re
from typing import Any

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


def check_text(text: Any) -> None:
    """A text an embedder accepts: a non-empty str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    if not text.strip():
        raise ValueError("cannot embed empty text")
