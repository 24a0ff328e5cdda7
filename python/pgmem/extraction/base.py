"""What every extractor shares: the result type, the protocol, and event normalisation.

JAM (jam-journalistic-agent-memory.md, Stages 1.1-1.2) turns an event (content plus
timestamp, actor, event type) into who / what / when / where / why / how. This module holds
the :class:`Extraction` result, the :class:`Extractor` protocol both extractors follow, and
the normalisation of the loose event dicts callers pass (:func:`_normalize_event`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time as dtime, timezone
from typing import Any, Iterable, Mapping, Protocol, runtime_checkable

CATEGORIES: tuple[str, ...] = ("fact", "preference", "skill", "episode", "context")
MAX_TOPICS = 8
MAX_ENTITIES = 12
SUMMARY_CHARS = 160
UTC = timezone.utc


# =============================================================================== result
@dataclass
class Extraction:
    """The extracted fields of one memory (JAM 5W1H plus pgmem's extra metadata).

    ``when`` is timezone-aware UTC. ``valence``/``arousal``/``dominance`` and
    ``importance`` lie in [0, 1] (fragment-reconstructive-memory.md, "Content Domains").
    ``source`` says which extractor produced the result: ``"heuristic"`` or ``"llm"``.
    """

    who: str | None = None
    what: str | None = None
    when: datetime | None = None
    where: str | None = None
    why: str | None = None
    how: str | None = None
    topics: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    summary: str | None = None
    category: str | None = None
    valence: float | None = None
    arousal: float | None = None
    dominance: float | None = None
    importance: float | None = None
    #: layered tiers (issue 15): the profile facts the user states in the event
    #: (pgmem.engine.profile_facts; the memories_profile_facts trigger writes them with
    #: pgmem.set_fact); None when the extractor did not look (the client then runs detect_facts)
    facts: list[dict[str, Any]] | None = None
    source: str = "heuristic"

    def to_dict(self, *, iso: bool = False) -> dict[str, Any]:
        """The fields as a dict; with ``iso=True`` ``when`` is an ISO-8601 string (JSON-safe)."""
        out = asdict(self)
        if iso and self.when is not None:
            out["when"] = self.when.isoformat()
        return out


@runtime_checkable
class Extractor(Protocol):
    """What the client needs from an extractor."""

    def extract(self, event: Mapping[str, Any] | str, *, now: datetime | None = None) -> Extraction:
        """Extract one event."""
        ...

    def extract_many(self, events: Iterable[Mapping[str, Any] | str], *,
                     now: datetime | None = None) -> list[Extraction]:
        """Extract several events, in order."""
        ...


# =============================================================================== helpers
_WS = re.compile(r"\s+")


def _collapse(text: str | None) -> str:
    return _WS.sub(" ", text).strip() if text else ""


def _clip(text: str, limit: int = SUMMARY_CHARS) -> str:
    """Cut ``text`` to at most ``limit`` chars at a word boundary, ending with "…"."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if not text[limit - 1].isspace() and " " in cut:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:-–—") + "…"


def _to_utc(value: Any) -> datetime | None:
    """Coerce a timestamp (datetime, date, epoch seconds/ms, ISO string) to aware UTC."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime.combine(value, dtime(0), tzinfo=UTC)
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return None
        seconds = value / 1000.0 if abs(value) > 1e11 else float(value)  # epoch ms
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return _to_utc(float(text))
        except ValueError:
            pass
        try:
            return _to_utc(datetime.fromisoformat(text.replace("z", "Z")))
        except ValueError:
            return None
    return None


_CONTEXT_ROLES = frozenset({"system", "tool", "function", "developer"})
_CONTEXT_KINDS = frozenset({"tool", "tool_call", "tool_result", "tool_output", "function",
                            "observation", "system", "system_note", "note"})


# =============================================================================== events
@dataclass
class _Event:
    """An event normalised from the loose dict a caller passes (JAM Stage 1.1)."""

    content: str
    who: str | None
    when: datetime | None
    where: str | None
    tool: str | None
    is_context: bool
    session_id: str | None
    raw: Mapping[str, Any]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    return str(value)


def _normalize_event(event: Mapping[str, Any] | str) -> _Event:
    if isinstance(event, str):
        event = {"content": event}
    if not isinstance(event, Mapping):
        raise TypeError(f"event must be a dict or a str, not {type(event).__name__}")
    meta: Mapping[str, Any] = event["metadata"] if isinstance(event.get("metadata"), Mapping) else {}

    def pick(*keys: str) -> Any:
        for source in (event, meta):
            for key in keys:
                value = source.get(key)
                if value not in (None, ""):
                    return value
        return None

    content = event.get("content", event.get("text"))
    if content is None:
        content = ""
    elif not isinstance(content, str):  # structured tool output
        content = json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)
    role = (_text(event.get("role")) or "").lower()
    kind = (_text(pick("event_type", "type", "kind")) or "").lower()
    actor = _text(event.get("actor")) or _text(event.get("who")) or _text(event.get("role"))
    tool_value = pick("tool", "tool_name")
    if isinstance(tool_value, Mapping):  # {"tool": {"name": "search", ...}}
        tool_value = tool_value.get("name")
    tool = _text(tool_value)
    if tool is None and (role in ("tool", "function") or kind.startswith("tool")
                         or kind == "function"):
        tool = _text(event.get("name"))  # OpenAI-style {"role": "tool", "name": ...}
    who: str | None
    if tool:
        who = tool if tool.lower().startswith("tool:") else f"tool:{tool}"
    else:
        who = actor
    is_context = bool(tool) or role in _CONTEXT_ROLES or kind in _CONTEXT_KINDS or (
        (who or "").lower().startswith("tool") or (who or "").lower() == "system")
    session = _text(pick("session_id", "session"))
    return _Event(
        content=content,
        who=who,
        when=_to_utc(pick("ts", "when", "timestamp", "time", "created_at")),
        where=_text(pick("where", "location")),
        tool=tool,
        is_context=is_context,
        session_id=session,
        raw=event,
    )

