"""Events to remember() arguments: the JSONL event format of ``pgmem ingest`` (examples/README.md)
or a plain text, with the 5W1H fields an extractor fills, and the JSON document
pgmem.remember_many takes for a batch of them.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Iterable, Mapping

from .errors import PgmemError

__all__ = ["event_to_args", "jsonable", "remember_many_payload"]


def event_to_args(event: Mapping[str, Any] | str, extractor: Any = None, *,
                  now: datetime | None = None) -> dict[str, Any]:
    """Map an event (the JSONL format of ``pgmem ingest``, see examples/README.md) or a plain
    text to remember() arguments, filling the 5W1H fields with the extractor when given.
    Fields the event states explicitly win over extracted ones."""
    if isinstance(event, str):
        event = {"content": event}
    content = event.get("content") or event.get("text")
    if content is None or not str(content).strip():
        raise PgmemError("event has no content: a memory needs some text")
    args: dict[str, Any] = {
        "content": content,
        "who": event.get("who") or event.get("actor") or event.get("role"),
        "what": event.get("what"),
        "happened_at": event.get("when") or event.get("happened_at"),
        "location": event.get("where") or event.get("location"),
        "why": event.get("why"),
        "how": event.get("how"),
        "category": event.get("category"),
        "importance": event.get("importance"),
        "metadata": dict(event.get("metadata") or {}),
        "user_id": event.get("user_id"),
        "agent_id": event.get("agent_id"),
        "session_id": event.get("session_id"),
        "created_at": event.get("ts") or event.get("created_at"),
        "event_key": event.get("event_id") or event.get("event_key"),
        "summary": event.get("summary"),
        "topics": event.get("topics"),
        "entities": event.get("entities"),
        "tier": event.get("tier"),
        "expires_at": event.get("expires_at"),
        # a precomputed embedding travels with its event (the client then does not embed it)
        "embedding": event.get("embedding"),
        "embedding_model": event.get("embedding_model") if event.get("embedding") is not None else None,
        # Fragment content domains (issue 16): action-related and perceptual content, JSON objects
        "motor": event.get("motor"),
        "sensory": event.get("sensory"),
    }
    if extractor is not None:
        x = extractor.extract(event, now=now)
        for key, value in (("who", x.who), ("what", x.what), ("happened_at", x.when), ("location", x.where),
                           ("why", x.why), ("how", x.how), ("summary", x.summary), ("category", x.category),
                           ("topics", x.topics or None), ("entities", x.entities or None),
                           ("valence", x.valence), ("arousal", x.arousal), ("dominance", x.dominance)):
            if args.get(key) in (None, "", []):
                args[key] = value
        if args.get("importance") is None and x.importance is not None and x.source == "llm":
            args["importance"] = x.importance
        args["metadata"].setdefault("extracted_by", x.source)
        # layered tiers (issue 15): the profile facts a user's statement makes; the database's
        # memories_profile_facts trigger writes them (pgmem.set_fact) as the memory is stored
        facts = getattr(x, "facts", None)
        if facts is None:  # an extractor without profile-statement detection: the heuristic's
            from .engine.profile_facts import detect_facts

            facts = detect_facts(content, speaker=args.get("who"))
        if facts and args.get("user_id"):
            args["metadata"].setdefault("facts", facts)
    return {k: v for k, v in args.items() if v is not None and v != {} or k == "content"}


def jsonable(v: Any) -> Any:
    """A value json.dumps can write: a datetime as ISO 8601, an array (numpy) as a list."""
    if isinstance(v, datetime):
        return v.isoformat()
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


def remember_many_payload(items: Iterable[Mapping[str, Any]]) -> str:
    """The JSON array pgmem.remember_many takes for remember() arguments. A vector travels as
    pgvector's text ('[0.1,0.2,...]'), a JSON string: the server parses it once into the
    vector, where a JSON array of 384 numbers was first parsed into 384 numerics (issue 23:
    0.04 ms of server time per item)."""
    out = []
    for a in items:
        d = {k: jsonable(v) for k, v in a.items()}
        e = a.get("embedding")
        if e is not None and not isinstance(e, str):
            d["embedding"] = "[" + ",".join(map(repr, map(float, e.tolist() if hasattr(e, "tolist") else e))) + "]"
        out.append(d)
    return json.dumps(out)
