"""The LLM extractor: 5W1H by any OpenAI-compatible ``/chat/completions`` endpoint.

OpenAI, Ollama, vLLM and llama.cpp server all serve that API. Standard library only. It
never raises for server problems: it falls back to the heuristic result and logs one
warning (JAM, jam-journalistic-agent-memory.md, Stage 1.2, with a model).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import math
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import fields
from datetime import datetime
from typing import Any, Iterable, Mapping

from .base import (
    CATEGORIES,
    MAX_ENTITIES,
    MAX_TOPICS,
    UTC,
    Extraction,
    Extractor,
    _clip,
    _collapse,
    _Event,
    _normalize_event,
    _text,
    _to_utc,
)
from ..engine.profile_facts import LLM_FIELD, is_user_speaker, merge_facts, validate_facts
from .heuristic import HeuristicExtractor

logger = logging.getLogger("pgmem.extraction")

# =============================================================================== LLM
SYSTEM_PROMPT = """\
You extract structured memory fields from ONE event in an AI agent's history (a user
message, an assistant message, a tool result or a system note).
Reply with a single JSON object and nothing else, with exactly these keys:
"who": string or null - the actor ("user", "assistant", "tool:NAME") or the person acting,
"what": string - the core content or action, in plain words,
"when": string or null - ISO-8601 date/time the event refers to; resolve relative dates
  ("yesterday") against current_time; null if unknown,
"where": string or null - location context: URL, file path, chat/channel id or place,
"why": string or null - the intent, goal or reason,
"how": string or null - the method, tool or mechanism,
"topics": array of at most 8 short lowercase keywords,
"entities": array of at most 12 named things (people, products, projects, identifiers),
"summary": string of at most 160 characters,
"category": one of "fact" (a stable fact), "preference" (likes, dislikes, choices),
  "skill" (what someone can do), "episode" (something that happened),
  "context" (tool output, system note, situational detail),
"valence": number 0..1 (0 negative, 0.5 neutral, 1 positive),
"arousal": number 0..1 (0 calm, 1 excited or urgent),
"dominance": number 0..1 (0 helpless, 1 in control),
"importance": number 0..1 - how worth remembering in the long term,
""" + LLM_FIELD + """.
Use null for a field the event does not support. Do not invent facts."""

_STRING_FIELDS = ("who", "what", "where", "why", "how", "summary")
_UNIT_FIELDS = ("valence", "arousal", "dominance", "importance")
_NULL_WORDS = frozenset({"", "null", "none", "n/a", "na", "unknown", "unspecified", "-"})
_CATEGORY_ALIASES = {"event": "episode", "experience": "episode", "likes": "preference",
                     "ability": "skill", "knowledge": "fact", "observation": "context"}
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class _Retryable(Exception):
    """Timeout, connection error, HTTP 429/5xx or a malformed answer: try again."""


class _Fatal(Exception):
    """An error that retrying cannot fix (HTTP 4xx other than 429, bad URL)."""


def _parse_content(content: Any) -> dict[str, Any]:
    """The JSON object in an assistant message (```json fences stripped)."""
    if isinstance(content, dict):
        return content
    if not isinstance(content, str):
        raise _Retryable(f"assistant content is {type(content).__name__}, not a JSON string")
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")  # prose around the object
        try:
            obj = json.loads(text[start:end + 1]) if 0 <= start < end else None
        except json.JSONDecodeError:
            obj = None
        if obj is None:
            raise _Retryable(f"malformed JSON in assistant message: {content[:120]!r}") from None
    if not isinstance(obj, dict):
        raise _Retryable(f"assistant JSON is a {type(obj).__name__}, not an object")
    return obj


def _unit(value: Any) -> float | None:
    """A number in [0, 1]; tiny overshoots (within 0.05) are clamped, the rest dropped.

    Numeric strings are accepted ("0.7", "70%")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        scale = 100.0 if text.endswith("%") else 1.0
        try:
            value = float(text.rstrip("%")) / scale
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if -0.05 <= value <= 1.05:
        return round(min(1.0, max(0.0, float(value))), 4)
    return None


def _string(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        return None
    text = _collapse(value)
    return None if text.lower() in _NULL_WORDS else text


def _string_list(value: Any, limit: int, *, lower: bool = False) -> list[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)):
        return []
    out: list[str] = []
    seen: set[str] = set()
    for item in value:
        text = _string(item)
        if not text:
            continue
        text = text.lower() if lower else text
        if text.casefold() not in seen:
            seen.add(text.casefold())
            out.append(text)
    return out[:limit]


def _category_value(value: Any) -> str | None:
    text = _string(value)
    if not text:
        return None
    low = text.lower()
    low = _CATEGORY_ALIASES.get(low, low)
    if low not in CATEGORIES and low.endswith("s"):
        low = low[:-1]  # "facts", "preferences"
    return low if low in CATEGORIES else None


def validate_llm_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Coerce an LLM's JSON into Extraction fields; what cannot be coerced is dropped.

    Strings are trimmed ("null"/"unknown" become None), ``when`` is parsed to UTC, lists
    accept a comma-separated string, category must be one of :data:`CATEGORIES` (plurals
    and a few synonyms are mapped), and numbers must lie in [0, 1] (within 0.05 they are
    clamped; "70%" is 0.7; anything else, like valence 7, is dropped).
    """
    out: dict[str, Any] = {}
    for name in _STRING_FIELDS:
        out[name] = _string(obj.get(name))
    if out["summary"]:
        out["summary"] = _clip(out["summary"])
    out["when"] = _to_utc(obj.get("when"))
    out["topics"] = _string_list(obj.get("topics"), MAX_TOPICS, lower=True)
    out["entities"] = _string_list(obj.get("entities"), MAX_ENTITIES)
    out["category"] = _category_value(obj.get("category"))
    for name in _UNIT_FIELDS:
        out[name] = _unit(obj.get(name))
    # layered tiers (issue 15): profile facts (pgmem.engine.profile_facts.validate_facts)
    out["facts"] = validate_facts(obj["facts"]) if isinstance(obj.get("facts"), list) else None
    return out


def _is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LLMExtractor:
    """5W1H extraction by an OpenAI-compatible chat-completions endpoint.

    Arguments left as None come from the environment: ``PGMEM_LLM_BASE_URL`` (for example
    ``http://127.0.0.1:11434/v1`` for Ollama), ``PGMEM_LLM_MODEL``, ``PGMEM_LLM_API_KEY``,
    ``PGMEM_LLM_TIMEOUT`` (seconds, default 20). ``fallback`` defaults to a
    :class:`HeuristicExtractor`.

    Timeouts, connection errors, HTTP 429/5xx and malformed answers are retried ``retries``
    times with exponential backoff (``backoff``, ``2*backoff``, ...). Then, or at once on
    another 4xx, one warning is logged to ``pgmem.extraction`` and the heuristic result
    is returned (``source="heuristic"``): server problems never raise.

    Fields the event itself states (actor, timestamp, location) win over the model's;
    fields the model leaves out or gets wrong are filled from the heuristic result.
    """

    source = "llm"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        retries: int = 2,
        backoff: float = 0.5,
        fallback: Extractor | None = None,
    ) -> None:
        base_url = (base_url or os.environ.get("PGMEM_LLM_BASE_URL", "")).strip()
        model = (model or os.environ.get("PGMEM_LLM_MODEL", "")).strip()
        if not base_url:
            raise ValueError("LLMExtractor needs base_url or PGMEM_LLM_BASE_URL "
                             "(for example http://127.0.0.1:11434/v1)")
        if not model:
            raise ValueError("LLMExtractor needs model or PGMEM_LLM_MODEL")
        if timeout is None:
            raw = os.environ.get("PGMEM_LLM_TIMEOUT", "").strip()
            try:
                timeout = float(raw) if raw else 20.0
            except ValueError:
                raise ValueError(
                    f"PGMEM_LLM_TIMEOUT must be a number of seconds, not {raw!r}") from None
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ValueError("timeout must be > 0, retries and backoff >= 0")
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        if api_key is None:
            api_key = os.environ.get("PGMEM_LLM_API_KEY") or None
        self.api_key = api_key
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.fallback: Extractor = fallback if fallback is not None else HeuristicExtractor()
        # A local server (Ollama, llama.cpp) must not be sent through an HTTP proxy.
        self._opener = (urllib.request.build_opener(urllib.request.ProxyHandler({}))
                        if _is_loopback(self.url) else urllib.request.build_opener())

    def __repr__(self) -> str:
        return f"LLMExtractor(url={self.url!r}, model={self.model!r})"

    # ------------------------------------------------------------------ request
    def _payload(self, ev: _Event, now: datetime) -> dict[str, Any]:
        event: dict[str, Any] = {"content": ev.content}
        for key, value in (("who", ev.who), ("when", ev.when.isoformat() if ev.when else None),
                           ("where", ev.where), ("tool", ev.tool),
                           ("event_type", _text(ev.raw.get("event_type") or ev.raw.get("type")))):
            if value:
                event[key] = value
        user = json.dumps({"event": event, "current_time": now.isoformat()}, ensure_ascii=False)
        return {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                         {"role": "user", "content": user}],
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One POST; returns the parsed JSON object or raises _Retryable / _Fatal."""
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "pgmem-extraction"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"),
                                         headers=headers, method="POST")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            try:
                detail = exc.read(300).decode("utf-8", "replace").strip()
            except Exception:
                detail = ""
            finally:
                exc.close()
            message = f"HTTP {exc.code} {exc.reason}" + (f": {detail}" if detail else "")
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(message) from None
            raise _Fatal(message) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise _Retryable(f"timed out after {self.timeout:g}s") from None
            raise _Retryable(f"connection error: {reason}") from None
        except (TimeoutError, socket.timeout):
            raise _Retryable(f"timed out after {self.timeout:g}s") from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            raise _Retryable(f"connection error: {type(exc).__name__}: {exc}") from None
        except ValueError as exc:  # e.g. an unsupported URL scheme
            raise _Fatal(f"bad request: {exc}") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise _Retryable(f"response body is not JSON: {raw[:120]!r}") from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise _Retryable(
                f"no choices[0].message.content in response: {str(data)[:120]}") from None
        return _parse_content(content)

    # ------------------------------------------------------------------ merge
    def _merge(self, fields_: dict[str, Any], base: Extraction, ev: _Event) -> Extraction:
        """LLM fields over the heuristic result; the event's own who/when/where win."""
        merged = {f.name: getattr(base, f.name) for f in fields(Extraction)}
        for name, value in fields_.items():
            if value not in (None, "", []):
                merged[name] = value
        if ev.who:
            merged["who"] = ev.who
        if ev.when:
            merged["when"] = ev.when
        if ev.where:
            merged["where"] = ev.where
        # profile facts: the LLM's, then the heuristic's for the keys it does not state; an
        # assistant, tool or system event states none about the user (layered tiers, issue 15)
        merged["facts"] = (merge_facts(fields_.get("facts"), base.facts) if is_user_speaker(merged["who"] or ev.who)
                           else [])
        merged["source"] = "llm"
        return Extraction(**merged)

    # ------------------------------------------------------------------ API
    def extract(self, event: Mapping[str, Any] | str, *, now: datetime | None = None) -> Extraction:
        """Extract one event with the LLM; the heuristic result if the server fails."""
        ev = _normalize_event(event)
        now = _to_utc(now) or datetime.now(UTC)
        base = self.fallback.extract(event, now=now)
        if not ev.content.strip():
            return base  # nothing for a model to read
        payload = self._payload(ev, now)
        error: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                return self._merge(validate_llm_fields(self._post(payload)), base, ev)
            except _Fatal as exc:
                error = exc
                break
            except _Retryable as exc:
                error = exc
                logger.debug("LLM extraction attempt %d/%d failed (%s): %s",
                             attempt + 1, self.retries + 1, self.url, exc)
            except Exception as exc:  # never let a server's answer crash ingestion
                error = exc
                break
        logger.warning("LLM extraction failed (url=%s, model=%s): %s; using the heuristic "
                       "extraction instead", self.url, self.model, error)
        return base

    def extract_many(self, events: Iterable[Mapping[str, Any] | str], *,
                     now: datetime | None = None) -> list[Extraction]:
        """Extract several events, one request each, in order."""
        return [self.extract(e, now=now) for e in events]
