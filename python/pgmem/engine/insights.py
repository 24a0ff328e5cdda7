"""Research memory and thread summaries without a model (layered-memory-architecture.md,
"Research Memory (research_memory.py)" and "Topic Threading").

* :func:`extract_insights`: cue phrases name the insight type (decision, conclusion,
  hypothesis, open_question, observation) of a sentence; an explicit label ("Decision: ...")
  is surest. The design extracts insights with an LLM and a confidence threshold; offline,
  pgmem gives each cue a fixed confidence (below) and the same threshold applies
  (setting insight_min_confidence, 0.6).
* :func:`concepts`: the design's concept heuristic: capitalised nouns, snake_case and
  camelCase terms, quoted and backtick terms, acronyms.
* :func:`summarize` / :func:`label`: the extractive summary written at every 8th message of
  a thread when no LLM is configured, and the thread's label.

Standard library only (runs in PL/Python and in the client).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pgmem.engine.conversation import keywords
from pgmem.engine.guard import normalise, tick, windows

__all__ = ["INSIGHT_TYPES", "extract_insights", "concepts", "summarize", "label", "SQL_API"]

INSIGHT_TYPES = ("decision", "conclusion", "hypothesis", "open_question", "observation")
MAX_INSIGHT_CHARS = 300
LABELLED = 0.9  # "Decision: ..." and the like

# Cue phrases and the confidence pgmem gives them (checked in this order; first wins).
CUES: list[tuple[str, float, re.Pattern[str]]] = [
    ("decision", 0.8, re.compile(
        r"\b(?:(?:we|i)(?:\s*'ve|\s+have)?\s*(?:decided|agreed|chose|chosen|settled\s+on)|(?:we|i)\s*(?:will|'ll)\s+(?:go\s+with|use|switch\s+to|stick\s+with)"
        r"|(?:we|i)\s*(?:are|'re|am|'m)\s+going\s+(?:with|to\s+use)|let'?s\s+(?:go\s+with|use|pick|stick\s+with|switch\s+to)|the\s+plan\s+is)\b", re.I)),
    ("conclusion", 0.75, re.compile(
        r"(?:^|\b)(?:so|therefore|thus|hence)\b,?\s|\b(?:in\s+conclusion|to\s+conclude|it\s+turns\s+out|the\s+(?:answer|result|conclusion|bottom\s+line)\s+is"
        r"|this\s+(?:means|shows|proves|confirms)|which\s+means|(?:we|i)\s+(?:found|learned|concluded)\s+that|overall)\b", re.I)),
    ("open_question", 0.7, re.compile(
        r"\b(?:open\s+question|(?:we|i)\s+(?:still\s+)?(?:don'?t|do\s+not)\s+know|unclear\s+(?:whether|if|how|why|what)|not\s+sure\s+(?:whether|if|how|why|what)"
        r"|need\s+to\s+(?:find\s+out|figure\s+out|investigate)|remains\s+to\s+be\s+seen|to\s+be\s+determined|tbd)\b"
        r"|^\W*(?:should\s+we|how\s+(?:do|can|should)\s+we|do\s+we|can\s+we|is\s+it\s+worth|what\s+if\s+we)\b.*\?\s*$", re.I)),
    ("hypothesis", 0.65, re.compile(
        r"\b(?:maybe|perhaps|possibly|probably|i\s+(?:suspect|guess|bet)|my\s+(?:hypothesis|guess|hunch|theory)|(?:it|this|that)\s+(?:might|could|may)\s+be"
        r"|(?:might|could)\s+be\s+(?:because|due\s+to|caused\s+by))\b", re.I)),
    ("observation", 0.6, re.compile(
        r"\b(?:(?:i|we)\s+(?:noticed|observed|saw)|interesting(?:ly)?|it\s+seems|it\s+looks\s+like|apparently|notably|note\s+that)\b", re.I)),
]
_LABEL = re.compile(r"^\W*(decision|conclusion|hypothesis|open\s+question|question|observation|finding|note)\s*[:\-–]\s*(.+)$", re.I | re.S)
_LABEL_TYPE = {"decision": "decision", "conclusion": "conclusion", "finding": "conclusion", "hypothesis": "hypothesis",
               "open question": "open_question", "question": "open_question", "observation": "observation", "note": "observation"}
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*", re.S)


def sentences(text: str) -> list[str]:
    """Sentences of a text (split at . ! ? and new lines; decimal points kept), from its
    normalised windows (engine/guard.py: a sentence is at most guard.WINDOW_CHARS long)."""
    out: list[str] = []
    for _, part in windows(normalise(text)):
        protected = re.sub(r"(\d)\.(\d)", "\\1\u2024\\2", part)
        out.extend(s.strip().replace("\u2024", ".") for s in _SENTENCE.findall(protected) if len(s.strip()) > 3)
    return out


def _clip(text: str, limit: int) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"


def extract_insights(text: str, min_confidence: float = 0.0) -> list[dict[str, Any]]:
    """Insights stated in a text, one per sentence at most: ``{"type", "content",
    "confidence", "cue"}``, those below ``min_confidence`` left out."""
    out: list[dict[str, Any]] = []
    for s in sentences(text):
        tick()
        m = _LABEL.match(s)
        if m:
            kind = _LABEL_TYPE[re.sub(r"\s+", " ", m.group(1).lower())]
            found = (kind, LABELLED, m.group(1))
        else:
            found = None
            for kind, conf, rx in CUES:
                hit = rx.search(s)
                if hit:
                    found = (kind, conf, hit.group(0).strip())
                    break
        if found and found[1] >= min_confidence:
            out.append({"type": found[0], "content": _clip(s, MAX_INSIGHT_CHARS), "confidence": found[1],
                        "cue": found[2].lower()})
    return out


# ---------------------------------------------------------------------------- concepts
_BACKTICK = re.compile(r"`([^`\n]{2,60})`")
_QUOTED = re.compile(r"\"([^\"\n]{2,60})\"|“([^”\n]{2,60})”|'([^'\n]{3,40})'(?!\w)")
_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_CAMEL = re.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b|\b[A-Z]{2,}[a-z][A-Za-z0-9]*\b")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,7}s?\b")
_CAPITAL = re.compile(r"\b[A-Z][a-z][a-zA-Z0-9]+(?:\s+[A-Z][a-z][a-zA-Z0-9]+)*\b")
_NOT_CONCEPTS = frozenset("""
i im ive id ill the this that these those it its we you they he she there here what when where which who why how
yes no ok okay hi hello hey thanks thank please so but and or if then also maybe perhaps however let lets sure
monday tuesday wednesday thursday friday saturday sunday january february march april may june july august
september october november december today tomorrow yesterday decision conclusion hypothesis observation note
question open great good nice cool well actually now just still
""".split())


def concepts(text: str, limit: int = 12) -> list[dict[str, str]]:
    """Concepts of a text, in order of first appearance: ``{"concept": key, "term": as
    written}``; the key is the term lower-cased with spaces collapsed. Capitalised words
    that only start a sentence are not concepts."""
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    # window by window (engine/guard.py): the concepts of a window come after those of the ones
    # before it, so once ``limit`` are found the rest of the text cannot change them
    for _, part in windows(normalise(text)):
        _window_concepts(part, limit, out, seen)
        if len(out) >= limit:
            break
    return out


def _window_concepts(text: str, limit: int, out: list[dict[str, str]], seen: set[str]) -> None:
    found: list[tuple[int, str]] = []
    for rx in (_BACKTICK, _QUOTED):
        for m in rx.finditer(text):
            term = next(g for g in m.groups() if g) if m.groups() else m.group(0)
            found.append((m.start(), term.strip()))
    for rx in (_SNAKE, _CAMEL, _ACRONYM):
        found.extend((m.start(), m.group(0)) for m in rx.finditer(text))
    starts = {m.start() for m in re.finditer(r"(?:^|[.!?:]\s+|\n\s*|[\"“(]\s*)(?=[A-Z])", text)}
    starts |= {m.end() for m in re.finditer(r"(?:^|[.!?:]\s+|\n\s*|[\"“(]\s*)(?=[A-Z])", text)}
    for m in _CAPITAL.finditer(text):
        term = m.group(0)
        if m.start() in starts:  # sentence-initial: keep the rest of a run ("The Postgres Planner" -> "Postgres Planner")
            rest = term.split(None, 1)
            if len(rest) < 2:
                continue
            term = rest[1]
        found.append((m.start(), term))
    for _, term in sorted(found, key=lambda x: x[0]):
        key = re.sub(r"\s+", " ", term.strip(" .,;:!?")).lower()
        if not key or len(key) < 2 or key in _NOT_CONCEPTS or key in seen:
            continue
        if key.endswith("s") and key[:-1] in seen:  # "APIs" after "API"
            continue
        seen.add(key)
        out.append({"concept": key, "term": term.strip(" .,;:!?")})
        if len(out) >= limit:
            break


# ---------------------------------------------------------------------------- summaries
def label(texts: list[str], limit: int = 3) -> str | None:
    """A thread's label: its most frequent content words (ties: first seen), comma-separated."""
    counts: Counter[str] = Counter()
    order: dict[str, int] = {}
    for t in texts:
        tick()
        for w in keywords(t, 50):
            counts[w] += 1
            order.setdefault(w, len(order))
    if not counts:
        return None
    top = sorted(counts, key=lambda w: (-counts[w], order[w]))[:limit]
    return ", ".join(top)


def summarize(messages: list[dict[str, Any]], max_sentences: int = 3, max_chars: int = 400) -> str | None:
    """Extractive summary of a thread: its sentences scored by the similarity of their
    message to the thread centroid (``sim``) plus the share of the thread's frequent words
    they contain; the best ``max_sentences`` in their original order, joined. ``messages``:
    ``[{"content": str, "sim": float | None}]`` in order."""
    freq: Counter[str] = Counter()
    for m in messages:
        tick()
        freq.update(set(keywords(m.get("content") or "", 50)))
    common = {w for w, c in freq.items() if c >= 2} or set(freq)
    scored: list[tuple[float, int, str]] = []
    for m in messages:
        for s in sentences(m.get("content") or ""):
            words = set(keywords(s, 50))
            cover = len(words & common) / len(common) if common else 0.0
            scored.append((float(m.get("sim") or 0.0) + cover, len(scored), s))
    if not scored:
        return None
    best = sorted(sorted(scored, key=lambda x: (-x[0], x[1]))[:max_sentences], key=lambda x: x[1])
    return _clip(" ".join(s if s[-1] in ".!?" else s + "." for _, _, s in best), max_chars)


# ---------------------------------------------------------------------------- LLM prompts
# The client sends these when an LLM is configured (SQL cannot call one); the parsers keep
# what is usable. The confidence threshold is applied in the database (pgmem.add_insight).
INSIGHTS_PROMPT = """\
You extract research insights from ONE message of a conversation between a user and an AI assistant.
An insight is a decision, conclusion, hypothesis, open_question or observation worth remembering
across conversations. Reply with a single JSON object and nothing else:
{"insights": [{"type": "<decision|conclusion|hypothesis|open_question|observation>",
               "content": "<one self-contained sentence>", "confidence": <0..1>}]}
Use an empty list when the message holds none. Do not invent insights."""

SUMMARY_PROMPT = """\
You summarise ONE topic thread of a conversation (its messages in order) for later recall.
Reply with a single JSON object and nothing else:
{"summary": "<at most 3 sentences>", "label": "<2 to 5 words naming the topic>"}"""


def _chat(system: str, user: Any, model: str) -> dict[str, Any]:
    import json

    return {"model": model, "temperature": 0, "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": json.dumps(user, ensure_ascii=False)}]}


def insights_payload(text: str, role: str, model: str) -> dict[str, Any]:
    """The chat-completions body asking for the insights of one message."""
    return _chat(INSIGHTS_PROMPT, {"role": role, "message": text}, model)


def parse_llm_insights(obj: Any, limit: int = 10) -> list[dict[str, Any]]:
    """Insights from the model's JSON: known types only, non-empty content (clipped), a
    confidence in [0, 1] (a missing one is 0.7)."""
    items = obj.get("insights") if isinstance(obj, dict) else obj
    out: list[dict[str, Any]] = []
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, dict):
            continue
        kind = str(it.get("type") or "").strip().lower().replace(" ", "_")
        content = str(it.get("content") or "").strip()
        if kind not in INSIGHT_TYPES or not content:
            continue
        try:
            conf = float(it.get("confidence", 0.7))
        except (TypeError, ValueError):
            conf = 0.7
        out.append({"type": kind, "content": _clip(content, MAX_INSIGHT_CHARS),
                    "confidence": round(min(1.0, max(0.0, conf)), 4), "source": "llm"})
    return out[:limit]


def summary_payload(messages: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """The chat-completions body asking for a thread's summary and label."""
    return _chat(SUMMARY_PROMPT, {"messages": [{"role": m.get("role"), "content": m.get("content")} for m in messages]},
                 model)


def parse_llm_summary(obj: Any) -> tuple[str | None, str | None]:
    """(summary, label) from the model's JSON; None for what is missing."""
    if not isinstance(obj, dict):
        return None, None
    summary = str(obj.get("summary") or "").strip() or None
    lab = str(obj.get("label") or "").strip() or None
    return (_clip(summary, 600) if summary else None), (_clip(lab, 80) if lab else None)


def research(text: str) -> dict[str, Any]:
    """One message's research material in one call (pgmem._message_research): its insights,
    each with its own concepts, and the message's concepts."""
    found = extract_insights(text)
    for i in found:
        i["concepts"] = concepts(i["content"])
    return {"insights": found, "concepts": concepts(text)}


# What pgmem._engine may call from SQL (module 'insights').
SQL_API = {"extract_insights": extract_insights, "concepts": concepts, "summarize": summarize, "label": label,
           "research": research}
