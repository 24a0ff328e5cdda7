"""Client side of the layered tiers (layered-memory-architecture.md; issue 15): the result
types of :meth:`pgmem.MemoryClient.context_for` and :meth:`classify_intent`, and the LLM
steps that SQL cannot take (it cannot call an HTTP API): the intent fallback, the thread
summary and insight extraction, over the same OpenAI-compatible endpoint as the extractor
(``PGMEM_LLM_BASE_URL``, ``PGMEM_LLM_MODEL``, ``PGMEM_LLM_API_KEY``).

Every answer the LLM gives is stored in the database (``pgmem.cache_intent``,
``pgmem.set_thread_summary``, ``pgmem.observe_reply(insights => ...)``), so SQL callers see it
too; a server that fails is logged once and the offline result stays.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from .engine import insights as _insights
from .engine import intent as _intent

log = logging.getLogger("pgmem.layered")

__all__ = ["ContextResult", "IntentResult", "LayeredLLM", "stream_annotations"]


@dataclass
class IntentResult:
    """What classify_intent decided: ``source`` is fast_path, cache, llm or heuristic (the
    offline guess, ``needs_llm`` True when no LLM answered)."""

    intent: str
    confidence: float
    source: str
    rule: str | None = None
    needs_llm: bool = False
    facts: list[dict] = field(default_factory=list)


@dataclass
class ContextResult:
    """The document pgmem.context_for returns, with shortcuts. ``stages`` are the pipeline's
    steps in order; ``context`` is what was selected for the prompt."""

    doc: dict[str, Any]

    @property
    def intent(self) -> str:
        return self.doc["intent"]

    @property
    def stages(self) -> list[dict[str, Any]]:
        return self.doc["stages"]

    @property
    def context(self) -> dict[str, Any]:
        return self.doc["context"]

    def stage(self, name: str) -> dict[str, Any]:
        """One stage's entry ("classified", "topic_gate", "state", "behaviour", "thread",
        "research", "policy", "history", "retrieved")."""
        for s in self.stages:
            if s.get("stage") == name:
                return s
        raise KeyError(f"no stage {name!r}: stages are {[s.get('stage') for s in self.stages]}")

    @property
    def confidence(self) -> float:
        return float(self.stage("classified")["confidence"])

    @property
    def policy(self) -> dict[str, Any]:
        return self.stage("policy")

    def annotations(self) -> list[str]:
        """The stage annotations a server streams before the first token (the design's
        "Streaming Stage Protocol"): classified, retrieved, generating."""
        return stream_annotations(self.doc)


def stream_annotations(doc: dict[str, Any]) -> list[str]:
    """``8:[{...}]`` lines for the classified and retrieved stages of a context_for document,
    then the generating stage."""
    def line(obj: dict) -> str:  # the design's compact form: 8:[{"stage":"classified",...}]
        return "8:" + json.dumps([obj], separators=(",", ":"))

    out = []
    for s in doc.get("stages", []):
        if s.get("stage") == "classified":
            out.append(line({"stage": "classified", "intent": s["intent"], "confidence": s["confidence"]}))
        elif s.get("stage") == "retrieved":
            out.append(line({"stage": "retrieved", "retrieval_info": s["retrieval_info"]}))
    out.append(line({"stage": "generating"}))
    return out


#: mem0's two prompts, in pgmem's words (the mem0 drop-in's add with an LLM: pgmem.compat)
FACTS_PROMPT = (
    "You extract facts worth remembering from a conversation: the {speaker}'s preferences, personal details, "
    "plans, relationships, health, work and opinions, each as one short sentence. Greetings, questions, "
    "thanks and small talk are no facts. Answer with a JSON object {{\"facts\": [\"...\", ...]}} "
    "(an empty list when there is nothing to remember).")
UPDATE_PROMPT = (
    "You keep a memory store. Given the existing memories (id and text) and new facts, decide for each fact: "
    "ADD it as a new memory; UPDATE an existing memory that it refines or corrects (keep that memory's id, give "
    "the new text and the old one as old_memory); DELETE an existing memory it contradicts; or NONE when it is "
    "already known. Answer with a JSON object {\"memory\": [{\"id\": \"...\", \"text\": \"...\", "
    "\"event\": \"ADD|UPDATE|DELETE|NONE\", \"old_memory\": \"...\"}]}; an ADD gets a new id.")


class LayeredLLM:
    """The layered tiers' LLM steps over an OpenAI-compatible chat-completions endpoint. It
    reuses the extractor's HTTP client (timeouts, retries with backoff, loopback without
    proxy), so its settings are the extractor's. Every method returns None (and logs a
    warning) when the server fails or answers nonsense."""

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None, **kw: Any):
        from .extraction import LLMExtractor

        self.http = LLMExtractor(base_url, model, api_key, **kw)
        self.model = self.http.model

    @classmethod
    def from_env(cls) -> "LayeredLLM | None":
        """An LLM when PGMEM_LLM_BASE_URL is set, else None."""
        return cls() if os.environ.get("PGMEM_LLM_BASE_URL", "").strip() else None

    def _ask(self, payload: dict[str, Any], what: str) -> dict[str, Any] | None:
        from .extraction.llm import _Fatal, _Retryable

        error: Exception | None = None
        for attempt in range(self.http.retries + 1):
            if attempt:
                time.sleep(self.http.backoff * 2 ** (attempt - 1))
            try:
                return self.http._post(payload)
            except _Retryable as exc:
                error = exc
            except (_Fatal, Exception) as exc:  # never let a server's answer break a chat turn
                error = exc
                break
        log.warning("LLM %s failed (url=%s, model=%s): %s; keeping the offline result", what, self.http.url,
                    self.model, error)
        return None

    def classify(self, text: str, recent: list[str] | None = None) -> dict[str, Any] | None:
        """{"intent", "confidence"} for a message no fast path classified."""
        obj = self._ask(_intent.llm_payload(text, self.model, recent), "intent classification")
        got = _intent.parse_llm(obj) if obj is not None else None
        if obj is not None and got is None:
            log.warning("LLM intent answer unusable: %.200s", json.dumps(obj))
        return got

    def insights(self, text: str, role: str) -> list[dict[str, Any]] | None:
        """The insights of one message (types, contents, confidences), or None on failure."""
        obj = self._ask(_insights.insights_payload(text, role, self.model), "insight extraction")
        return None if obj is None else _insights.parse_llm_insights(obj)

    # -------------------------------------------------------------- mem0's add (issue 32)
    def facts(self, messages: list[dict[str, Any]], speaker: str = "user") -> list[str] | None:
        """mem0's fact extraction: the facts the ``speaker``'s messages state (preferences,
        personal details, plans), as short sentences; None on failure."""
        convo = "\n".join(f"{m.get('role', 'user')}: {m.get('content')}" for m in messages if isinstance(m.get("content"), str))
        obj = self._ask({"model": self.model, "temperature": 0, "response_format": {"type": "json_object"},
                         "messages": [{"role": "system", "content": FACTS_PROMPT.format(speaker=speaker)},
                                      {"role": "user", "content": convo}]}, "fact extraction")
        if not isinstance(obj, dict) or not isinstance(obj.get("facts"), list):
            return None
        return [f.strip() for f in obj["facts"] if isinstance(f, str) and f.strip()][:50]

    def memory_decisions(self, facts: list[str], existing: list[dict[str, str]]) -> list[dict[str, Any]] | None:
        """mem0's update step: for the new facts against the existing memories ({"id", "text"},
        ids local to this call), a list of {"id", "text", "event": ADD|UPDATE|DELETE|NONE,
        "old_memory"?}; None on failure."""
        user = json.dumps({"existing_memories": existing, "new_facts": facts}, ensure_ascii=False)
        obj = self._ask({"model": self.model, "temperature": 0, "response_format": {"type": "json_object"},
                         "messages": [{"role": "system", "content": UPDATE_PROMPT},
                                      {"role": "user", "content": user}]}, "memory update decisions")
        if not isinstance(obj, dict) or not isinstance(obj.get("memory"), list):
            return None
        out = []
        for d in obj["memory"]:
            if isinstance(d, dict) and d.get("event") in ("ADD", "UPDATE", "DELETE", "NONE") and isinstance(d.get("text", ""), str):
                out.append({"id": str(d.get("id", "")), "text": d.get("text") or "", "event": d["event"],
                            "old_memory": d.get("old_memory")})
        return out

    def summarize(self, messages: list[dict[str, Any]]) -> tuple[str | None, str | None]:
        """(summary, label) of a thread's messages, or (None, None) on failure."""
        obj = self._ask(_insights.summary_payload(messages, self.model), "thread summary")
        return (None, None) if obj is None else _insights.parse_llm_summary(obj)
