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
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from datetime import date, datetime, time as dtime, timedelta, timezone
from typing import Any, Iterable, Mapping, Protocol, runtime_checkable

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

logger = logging.getLogger("pgmem.extraction")

#: Memory categories (engram.md, "Category Importance Weights").
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


# =============================================================================== word lists
STOPWORDS: frozenset[str] = frozenset("""
a about above after again against all almost also although always am among an and another
any anyone anything are around as at away back be became because been before being below
between both but by can cannot could did do does doing done down during each either else
enough etc even ever every few for from further get gets getting go goes going gone got had
has have having he her here hers herself him himself his how however i if in into is it its
itself just least less let like likely made make makes many may maybe me might mine more most
much must my myself neither never no nor not now of off often on once one only onto or other
others otherwise our ours ourselves out over own per perhaps please quite rather really same
say says said see seem seems shall she should since so some something sometimes still such
than that the their theirs them themselves then there therefore these they thing things this
those though through thus to too toward towards under until up upon us use used uses using
very via want wants was we well were what whatever when whenever where whether which while
who whom whose why will with within without would yes yet you your yours yourself
ok okay yeah hey hi hello thanks thank sure lot lots bit kind sort way ways also today
yesterday tomorrow tonight week weeks day days time times last next new know think need needs
""".split())
# Fragments of URLs and paths that are never topics.
_TOPIC_NOISE = frozenset("http https www com org net html htm php src lib bin usr tmp home".split())

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
TIME_WORDS: frozenset[str] = frozenset(
    _WEEKDAYS + _MONTHS + ("today", "yesterday", "tomorrow", "tonight", "now", "then",
                           "morning", "evening", "afternoon", "night", "last", "next", "this")
)

# Approximate valence / arousal / dominance in [0, 1] (fragment-reconstructive-memory.md,
# "Content Domains"). Hand-set in the spirit of the NRC VAD lexicon, rounded to 0.05; small
# on purpose so that a reader can check every number.
VAD_LEXICON: dict[str, tuple[float, float, float]] = {
    # positive
    "love": (0.95, 0.70, 0.65), "great": (0.90, 0.60, 0.70), "good": (0.80, 0.40, 0.60),
    "excellent": (0.95, 0.60, 0.75), "amazing": (0.95, 0.80, 0.65),
    "awesome": (0.95, 0.80, 0.70), "wonderful": (0.95, 0.65, 0.70),
    "fantastic": (0.95, 0.80, 0.70), "brilliant": (0.90, 0.65, 0.75),
    "perfect": (0.95, 0.55, 0.75), "happy": (0.95, 0.65, 0.70), "glad": (0.85, 0.45, 0.60),
    "excited": (0.85, 0.90, 0.65), "thanks": (0.80, 0.35, 0.55), "thank": (0.80, 0.35, 0.55),
    "grateful": (0.90, 0.40, 0.55), "nice": (0.80, 0.35, 0.60), "fun": (0.85, 0.70, 0.60),
    "enjoy": (0.85, 0.55, 0.65), "proud": (0.85, 0.60, 0.80), "relieved": (0.80, 0.30, 0.60),
    "calm": (0.75, 0.10, 0.60), "confident": (0.80, 0.50, 0.85),
    "success": (0.90, 0.60, 0.80), "win": (0.90, 0.75, 0.80), "beautiful": (0.90, 0.50, 0.60),
    "cool": (0.75, 0.40, 0.60), "yay": (0.90, 0.80, 0.65), "works": (0.70, 0.35, 0.65),
    "fixed": (0.75, 0.40, 0.70),
    # negative
    "hate": (0.05, 0.80, 0.45), "terrible": (0.05, 0.75, 0.35), "awful": (0.05, 0.70, 0.35),
    "horrible": (0.05, 0.75, 0.30), "bad": (0.15, 0.50, 0.35), "angry": (0.10, 0.85, 0.55),
    "furious": (0.05, 0.95, 0.60), "annoyed": (0.20, 0.70, 0.45),
    "frustrated": (0.15, 0.75, 0.35), "worried": (0.20, 0.70, 0.30),
    "anxious": (0.20, 0.80, 0.30), "afraid": (0.10, 0.80, 0.20), "scared": (0.10, 0.85, 0.20),
    "sad": (0.10, 0.35, 0.25), "upset": (0.15, 0.70, 0.30),
    "disappointed": (0.15, 0.45, 0.30), "sorry": (0.30, 0.35, 0.30),
    "broken": (0.15, 0.55, 0.30), "fail": (0.10, 0.60, 0.25), "failed": (0.10, 0.60, 0.25),
    "failure": (0.10, 0.60, 0.25), "crash": (0.10, 0.75, 0.30), "stuck": (0.20, 0.50, 0.20),
    "confused": (0.30, 0.55, 0.25), "tired": (0.25, 0.15, 0.30), "bored": (0.30, 0.10, 0.35),
    "stressed": (0.15, 0.80, 0.30), "stress": (0.15, 0.80, 0.30), "pain": (0.10, 0.70, 0.25),
    "wrong": (0.20, 0.50, 0.35), "problem": (0.25, 0.50, 0.40), "bug": (0.30, 0.45, 0.40),
    "error": (0.25, 0.55, 0.35),
    # arousal / urgency
    "urgent": (0.35, 0.90, 0.50), "asap": (0.40, 0.85, 0.55), "emergency": (0.10, 0.95, 0.35),
    "critical": (0.30, 0.85, 0.50), "deadline": (0.35, 0.75, 0.45),
    "immediately": (0.45, 0.80, 0.55), "important": (0.60, 0.60, 0.60),
    "hurry": (0.40, 0.85, 0.45),
}
NEUTRAL_VAD = (0.5, 0.25, 0.5)
_NEGATORS = frozenset({"not", "no", "never", "dont", "don't", "doesn't", "doesnt", "didn't",
                       "didnt", "isn't", "isnt", "wasn't", "wasnt", "aren't", "can't", "cant",
                       "cannot", "won't", "wont", "hardly", "without"})
# ALL-CAPS words that are ordinary words (so shouting, not an acronym) raise arousal.
_SHOUT_WORDS = frozenset({"now", "stop", "help", "please", "wow", "omg", "why", "what", "really",
                          "seriously", "done", "yes", "no", "never", "always", "again", "must",
                          "fix", "all", "every", "need"})


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


def _day_start(moment: datetime) -> datetime:
    return datetime.combine(moment.astimezone(UTC).date(), dtime(0), tzinfo=UTC)


_SENTENCE_BREAK = re.compile(r"[.!?]+(?=\s|$)|\n")
_CLAUSE_BREAK = re.compile(r"[.!?]+(?=\s|$)|[;\n]")


def _sentence_end(text: str, start: int = 0, *, clause: bool = False) -> int:
    """Index just past the sentence that starts at ``start`` (.!? before a space, or a
    newline; with ``clause=True`` a ``;`` ends it too)."""
    for m in (_CLAUSE_BREAK if clause else _SENTENCE_BREAK).finditer(text, start):
        if m.group()[0] == ".":
            prev = re.search(r"(\S+)$", text[start:m.start()])
            word = prev.group(1).lower() if prev else ""
            if word in _ABBREVIATIONS or re.fullmatch(r"(?:[a-z]\.)+[a-z]", word):
                continue  # "Dr. Smith", "e.g. this"
        return m.end()
    return len(text)


_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc",
                            "e.g", "i.e", "approx", "fig", "inc", "ltd"})


def summarize(text: str, limit: int = SUMMARY_CHARS) -> str | None:
    """First sentence of ``text``, at most ``limit`` chars (cut at a word, "…" appended).

    Shadow (shadow-memory-system.md, principle 1) keeps summaries rather than full content
    in working memory; this is the summary the heuristic stores.
    """
    body = (text or "").strip()
    if not body:
        return None
    first = _collapse(body[: _sentence_end(body)])
    return _clip(first, limit) or None


# ------------------------------------------------------------------------------ when
_ISO_IN_TEXT = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\d:])"
)
_RELATIVE_DAY = re.compile(
    r"\b(yesterday|today|last\s+(" + "|".join(_WEEKDAYS) + r"))\b", re.IGNORECASE
)


def _when_from_text(text: str, now: datetime) -> datetime | None:
    """First date expression in ``text``, resolved against ``now`` (UTC).

    An ISO date/time is taken as written (naive means UTC). "today", "yesterday" and
    "last <weekday>" resolve to the start (00:00 UTC) of that day, like a bare ISO date;
    "last monday" is the latest Monday strictly before today.
    """
    found: list[tuple[int, datetime]] = []
    for m in _ISO_IN_TEXT.finditer(text):
        when = _to_utc(m.group())
        if when is not None:
            found.append((m.start(), when))
            break
    m = _RELATIVE_DAY.search(text)
    if m:
        word = m.group(1).lower()
        today = _day_start(now)
        if word == "today":
            when = today
        elif word == "yesterday":
            when = today - timedelta(days=1)
        else:
            target = _WEEKDAYS.index(m.group(2).lower())
            when = today - timedelta(days=(today.weekday() - target) % 7 or 7)
        found.append((m.start(), when))
    return min(found, key=lambda item: item[0])[1] if found else None


# ------------------------------------------------------------------------------ where
_URL = re.compile(r"\b(?:https?|ftp|file)://[^\s<>\"'`]+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_WIN_PATH = re.compile(r"\b[A-Za-z]:\\(?:[^\\\s/:*?\"<>|]+\\)*[^\\\s/:*?\"<>|]*")
_ABS_PATH = re.compile(r"(?<![\w/:.~@-])(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]+)*/?")
_REL_PATH = re.compile(r"(?<![\w/:.~@-])[\w.@+-]+(?:/[\w.@+-]+)+")
_FILE_EXT = re.compile(r"\.[A-Za-z0-9]{1,8}$")
_CHAT_ID = re.compile(r"(?<![\w&#/])#[A-Za-z][\w-]*|\b(?:chat|channel|thread|room):[\w.-]+",
                      re.IGNORECASE)
_TRAILING = ".,;:!?'\")]}"


def _strip_trailing(text: str) -> str:
    """Drop sentence punctuation after a URL or path, but keep a balanced ")" (wiki URLs)."""
    out = text
    while out and out[-1] in _TRAILING:
        if out[-1] == ")" and out.count("(") >= out.count(")"):
            break
        out = out[:-1]
    return out


def _mask(text: str, *patterns: re.Pattern[str]) -> str:
    """Blank out matches (same length, so positions are kept)."""
    for pattern in patterns:
        text = pattern.sub(lambda m: " " * len(m.group()), text)
    return text


def _paths(text: str) -> list[tuple[int, str]]:
    """File paths in ``text`` with their positions (URLs must be masked already)."""
    found = [(m.start(), _strip_trailing(m.group())) for m in _WIN_PATH.finditer(text)]
    for m in _ABS_PATH.finditer(text):
        path = _strip_trailing(m.group())
        parts = [p for p in path.split("/") if p and p not in ("~", ".", "..")]
        if path[0] in "~." or len(parts) >= 2 or (parts and _FILE_EXT.search(parts[-1])):
            found.append((m.start(), path))
    for m in _REL_PATH.finditer(text):
        path = _strip_trailing(m.group())
        if _FILE_EXT.search(path.rsplit("/", 1)[-1]) and not path[0].isdigit():
            found.append((m.start(), path))
    return sorted(found)


def _where_from_text(text: str) -> str | None:
    """A location named in the text: a URL, else a file path, else a chat id.

    JAM (Stage 1.2) lists URL, file path and chat session as "where"; that order is the
    priority when a text names several.
    """
    url = _URL.search(text)
    if url:
        return _strip_trailing(url.group())
    paths = _paths(_mask(text, _URL, _EMAIL))
    if paths:
        return paths[0][1]
    chat = _CHAT_ID.search(text)
    return chat.group() if chat else None


# ------------------------------------------------------------------------------ why / how
_WHY_CUES = re.compile(
    r"\bbecause(?:\s+of)?\s+|\bso\s+that\s+|\bin\s+order\s+(?:to|for)\s+"
    r"|\bsince\s+(?!\d|(?:" + "|".join(sorted(TIME_WORDS)) + r"|then|the\s+(?:start|beginning))\b)"
    r"|\b(?:want|wants|wanted|need|needs|needed|plan|plans|planned|planning|hope|hopes|hoped"
    r"|hoping|aim|aims|aimed|aiming|intend|intends|intended|intending|try|tries|tried|trying"
    r"|goal\s+is|(?:would|'d)\s+like)\s+to\s+(?=[a-z])",
    re.IGNORECASE,
)
_HOW_CUES = re.compile(r"\bby\s+(?=\w+ing\b)|\busing\s+|\bvia\s+", re.IGNORECASE)
_WITH_CUE = re.compile(r"\b(\w+)\s+(with)\s+(?=(\w+))", re.IGNORECASE)
# "with" is the weakest "how" cue: not after these words, not before a person.
_WITH_NOT_AFTER = frozenset("""agree agreed deal dealt along together help helped problem
problems issue issues trouble wrong familiar happy satisfied angry upset lunch dinner coffee
breakfast met meet meeting talked talk spoke chatted went came come comes live lived lives
stay stayed compatible friends friend done""".split())
_WITH_NOT_BEFORE = frozenset("""me you him her us them my our his their your everyone
someone somebody friends family""".split())


def _clause(text: str, cue: re.Match[str], *stops: re.Pattern[str]) -> str | None:
    """The clause after ``cue``: up to the end of its sentence (or ``;``), the next
    ``stops`` pattern, and - for a clause that opens the sentence ("In order to X, we Y")
    - the first comma."""
    start = cue.end()
    end = _sentence_end(text, start, clause=True)
    if _sentence_initial(text, cue.start()):
        comma = text.find(",", start, end)
        end = comma if comma > start else end
    for stop in stops:
        m = stop.search(text, start + 1, end)
        if m:
            end = m.start()
    clause = _collapse(text[start:end]).rstrip(" ,;:.!?-–—")
    clause = re.sub(r"\s+(?:and|or|but|,)$", "", clause)
    return _clip(clause) if clause else None


def _why_from_text(text: str) -> str | None:
    """Intent or reason after a cue: "because", "so that", "in order to", "since" (not a
    date), or "to <verb>" after a goal verb ("I want to ...")."""
    m = _WHY_CUES.search(text)
    return _clause(text, m, _HOW_CUES, _RELATIVE_DAY) if m else None


def _how_from_text(text: str) -> str | None:
    """Method after "by <verb>ing", "using", "via"; failing those, a guarded "with"."""
    m = _HOW_CUES.search(text) or next(
        (w for w in _WITH_CUE.finditer(text)
         if w.group(1).lower() not in _WITH_NOT_AFTER
         and w.group(3).lower() not in _WITH_NOT_BEFORE), None)
    return _clause(text, m, _WHY_CUES, _RELATIVE_DAY) if m else None


# ------------------------------------------------------------------------------ topics
_TOKEN = re.compile(r"[a-z][a-z0-9]*(?:['’][a-z]+)?(?:[-_][a-z0-9]+)*(?:\+\+|#)?")
_NO_STRIP = frozenset("""postgres kubernetes redis jenkins windows macos ios news series
species always perhaps unless whereas various previous thus yes this has was does gas lens
analytics physics mathematics statistics economics ethics graphics pandas numpy status
bus virus campus canvas atlas alias chaos""".split())


def _stem(word: str) -> str:
    """Conservative plural stripping, so topics stay readable words.

    ``queries -> query``, ``classes -> class``, ``boxes -> box``, ``patches -> patch``,
    ``caches -> cache``, ``tables -> table``; words ending in ss/us/is and known names
    (``postgres``, ``kubernetes``) are left alone.
    """
    if len(word) < 4 or word in _NO_STRIP or not word.endswith("s"):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "xes", "zzes", "tches", "nches", "rches")):
        return word[:-2]
    if word.endswith(("ss", "us", "is")):
        return word
    return word[:-1]


def keywords(text: str, limit: int = MAX_TOPICS) -> list[str]:
    """Top keywords of ``text``: lowercase, stopwords removed, plurals stripped.

    Ordered by frequency, then by first occurrence (deterministic). Tokens shorter than 3
    characters and numbers are dropped (``c++`` and ``c#`` are kept).
    """
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    for token in _TOKEN.findall((text or "").lower()):
        token = re.sub(r"['’]s$", "", token)
        if "'" in token or "’" in token:  # contractions: don't, i'm, we're
            continue
        stem = _stem(token)
        if token in STOPWORDS or stem in STOPWORDS or stem in _TOPIC_NOISE:
            continue
        if len(stem) < 3 and not stem.endswith(("+", "#")):
            continue
        counts[stem] += 1
        first.setdefault(stem, len(first))
    ranked = sorted(counts, key=lambda w: (-counts[w], first[w]))
    return ranked[:limit]


# ------------------------------------------------------------------------------ entities
_BACKTICK = re.compile(r"`([^`\n]{1,80})`")
_QUOTED = re.compile(r"\"([^\"\n]{2,60})\"|“([^”\n]{2,60})”")
_HANDLE = re.compile(r"(?<![\w.@])@[A-Za-z0-9_][\w-]*(?:\.[\w-]+)*")
_HASHTAG = re.compile(r"(?<![\w&#/])#[A-Za-z][\w-]*")
_IDENT = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*\b")
_CAP_RUN = re.compile(
    r"\b[A-Z][A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)*"
    r"(?:(?:\s+(?:of|de|da|van|von|der|del|la|le))?\s+[A-Z][A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)*)*"
)
_CONNECTORS = frozenset({"of", "de", "da", "van", "von", "der", "del", "la", "le"})
# Everyday words that still belong to a name: "New York", "Great Britain", "United Nations".
_NAME_WORDS = frozenset({"new", "great", "united", "old", "little", "big", "good"})


def _ordinary(word: str) -> bool:
    """An everyday English word (not a name), in any capitalisation."""
    low = word.lower()
    return (low in STOPWORDS or low in TIME_WORDS or low in _SHOUT_WORDS
            or _vad(low) is not None)


def _sentence_initial(text: str, pos: int) -> bool:
    """Whether ``pos`` starts a sentence (text start, or after .!?: or a newline, but not
    after an abbreviation such as "Dr.")."""
    before = text[:pos].rstrip(" \t\"'“(*-•>")
    if not before:
        return True
    if before[-1] == ".":
        word = re.search(r"(\S*)\.$", before)
        return not (word and word.group(1).lower() in _ABBREVIATIONS)
    return before[-1] in "!?:\n"


def _cap_runs(text: str) -> list[tuple[int, int, str]]:
    """Capitalised names: multi-word runs ("Alice Smith", "Bank of America"), or a single
    capitalised word that does not start a sentence ("met Alice")."""
    out: list[tuple[int, int, str]] = []
    for m in _CAP_RUN.finditer(text):
        words = [(w.start() + m.start(), w.group()) for w in re.finditer(r"\S+", m.group())]
        # Ordinary capitalised words (The, I, Yesterday, LOVE) split a run into names.
        groups: list[list[tuple[int, str]]] = [[]]
        for pos, word in words:
            if _ordinary(word) and word.lower() not in _CONNECTORS | _NAME_WORDS:
                groups.append([])
            else:
                groups[-1].append((pos, word))
        for group in groups:
            while group and group[0][1] in _CONNECTORS:
                group.pop(0)
            while group and group[-1][1] in _CONNECTORS:
                group.pop()
            if not group:
                continue
            start, end = group[0][0], group[-1][0] + len(group[-1][1])
            if len(group) == 1:
                word = group[0][1]
                if len(word) < 2 or word.lower() in _NAME_WORDS or _sentence_initial(text, start):
                    continue
            out.append((start, end, text[start:end]))
    return out


def extract_entities(text: str, limit: int = MAX_ENTITIES) -> list[str]:
    """Named things in ``text``, in order of first appearance, deduplicated, at most ``limit``.

    Heuristic concept extraction after layered-memory-architecture.md ("Research Memory":
    capitalized nouns, snake_case/camelCase terms, quoted/backtick terms, acronyms), plus
    @handles and #tags. URLs, e-mail addresses and file paths are not entities (they are
    "where"). Where candidates overlap, the longer one wins ("AWS Lambda" over "AWS").
    """
    if not text:
        return []
    masked = _mask(text, _URL, _EMAIL)
    masked = _mask(masked, _WIN_PATH)
    for _, path in _paths(masked):
        masked = masked.replace(path, " " * len(path))
    spans: list[tuple[int, int, str]] = []
    for m in _BACKTICK.finditer(masked):
        spans.append((m.start(), m.end(), m.group(1).strip()))
    quoted = () if text.lstrip()[:1] in "{[" else _QUOTED.finditer(masked)  # JSON keys
    for m in quoted:
        inner = (m.group(1) or m.group(2)).strip()
        if inner and len(inner.split()) <= 6:
            spans.append((m.start(), m.end(), inner))
    for pattern in (_HANDLE, _HASHTAG):
        spans.extend((m.start(), m.end(), m.group()) for m in pattern.finditer(masked))
    for m in _IDENT.finditer(masked):
        word = m.group()
        if re.fullmatch(r"[A-Z]{2,}[0-9]*s", word):  # plural acronym: APIs -> API
            spans.append((m.start(), m.end(), word[:-1]))
        elif "_" in word.strip("_"):  # snake_case, SCREAMING_SNAKE
            spans.append((m.start(), m.end(), word))
        elif re.search(r"[a-z]", word) and re.search(r"[A-Z]", word[1:]):  # CamelCase
            spans.append((m.start(), m.end(), word))
        elif re.fullmatch(r"[A-Z][A-Z0-9]{1,9}", word):
            if not _ordinary(word):  # acronym, not shouting ("AWS", "EC2", not "LOVE")
                spans.append((m.start(), m.end(), word))
    spans.extend(_cap_runs(masked))
    kept: list[tuple[int, int, str]] = []
    for start, end, value in sorted(spans, key=lambda s: (s[0], -(s[1] - s[0]))):
        if value and all(end <= k_start or start >= k_end for k_start, k_end, _ in kept):
            kept.append((start, end, value))
    seen: set[str] = set()
    out: list[str] = []
    for _, _, value in sorted(kept):
        key = value.casefold()
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out[:limit]


# ------------------------------------------------------------------------------ category
_PREFERENCE = re.compile(
    r"\b(?:i|we)\s+(?:really\s+|do\s+|don't\s+|do\s+not\s+|also\s+|kind\s+of\s+)?"
    r"(?:prefer|like|love|hate|dislike|enjoy)\b|\bfavou?rites?\b|\b(?:would|'d)\s+rather\b"
    r"|\brather\s+than\b",
    re.IGNORECASE,
)
_SKILL = re.compile(
    r"\bi\s+know\s+how\b|\bi\s+can(?!['’]t|not)\b|\bexperienced\s+(?:in|with)\b|\byears\s+of\b"
    r"|\b(?:proficient|fluent|skilled|expert)\s+(?:in|at|with)\b|\bgood\s+at\b",
    re.IGNORECASE,
)
_FACT = re.compile(
    r"\bmy\s+name\s+is\b|\bi\s+(?:live|work)\b|\bwas\s+born\b|\b(?:is|are)\s+an?\b"
    r"|\bi\s+am\s+an?\b|\bi['’]m\s+an?\b|\bmy\s+\w+(?:\s+\w+)?\s+(?:is|are)\b",
    re.IGNORECASE,
)
# A number or date stated in the present tense ("the deadline is 2024-06-01", "the box has
# 64 GB") is a fact; the same in the past tense is an episode.
_STATED_NUMBER = re.compile(r"\b(?:is|are|has|have|costs?|equals?|weighs?)\b[^.!?;\n]*\d",
                            re.IGNORECASE)
_CONTEXT_ROLES = frozenset({"system", "tool", "function", "developer"})
_CONTEXT_KINDS = frozenset({"tool", "tool_call", "tool_result", "tool_output", "function",
                            "observation", "system", "system_note", "note"})


def _category(text: str, *, is_context: bool) -> str:
    """engram.md categories. Context (tool outputs, system notes) first, then preference,
    skill, fact; anything else is an episode."""
    if is_context:
        return "context"
    if _PREFERENCE.search(text):
        return "preference"
    if _SKILL.search(text):
        return "skill"
    if _FACT.search(text) or _STATED_NUMBER.search(text):
        return "fact"
    return "episode"


# ------------------------------------------------------------------------------ emotion
_INFLECTIONS = (("s", ""), ("es", ""), ("ed", ""), ("ed", "e"), ("ing", ""), ("ing", "e"),
                ("ly", ""), ("ied", "y"), ("ies", "y"))


def _vad(word: str) -> tuple[float, float, float] | None:
    """Lexicon entry for a lowercase ``word`` or a regular inflection of it
    (loves, loved, loving, crashed, badly)."""
    entry = VAD_LEXICON.get(word)
    if entry is not None:
        return entry
    for suffix, replacement in _INFLECTIONS:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            entry = VAD_LEXICON.get(word[: -len(suffix)] + replacement)
            if entry is not None:
                return entry
    return None


def emotion(text: str) -> tuple[float, float, float]:
    """(valence, arousal, dominance) in [0, 1] from a small, transparent lexicon.

    Mean of the lexicon words found (a negator among the three words before flips valence:
    ``v -> 1 - v``); neutral text is (0.5, 0.25, 0.5). Each "!" adds 0.1 arousal (at most
    0.3), and so does each ordinary word in ALL CAPS ("I LOVE THIS"; at most 0.3).
    Fragment design (fragment-reconstructive-memory.md) keeps VAD in [0, 1].
    """
    text = text or ""
    tokens = re.findall(r"[A-Za-z]+(?:['’][A-Za-z]+)?", text)
    hits: list[tuple[float, float, float]] = []
    shouted = 0
    for i, token in enumerate(tokens):
        low = token.lower().replace("’", "'")
        if len(token) >= 3 and token.isupper() and _ordinary(token):
            shouted += 1
        entry = _vad(low)
        if entry is None:
            continue
        v, a, d = entry
        if any(t.lower().replace("’", "'") in _NEGATORS or t.lower().endswith("n't")
               for t in tokens[max(0, i - 3):i]):
            v = 1.0 - v
        hits.append((v, a, d))
    if hits:
        valence = sum(h[0] for h in hits) / len(hits)
        arousal = sum(h[1] for h in hits) / len(hits)
        dominance = sum(h[2] for h in hits) / len(hits)
    else:
        valence, arousal, dominance = NEUTRAL_VAD
    arousal += min(0.3, 0.1 * text.count("!")) + min(0.3, 0.1 * shouted)

    def unit(x: float) -> float:
        return round(min(1.0, max(0.0, x)), 3)

    return unit(valence), unit(arousal), unit(dominance)


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
    meta = event.get("metadata") if isinstance(event.get("metadata"), Mapping) else {}

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


# =============================================================================== heuristic
class HeuristicExtractor:
    """Deterministic, offline 5W1H extraction (no model, no network).

    The rules, in short (details on each helper):

    * who: the event's tool (``"tool:NAME"``), else actor / who / role.
    * when: the event's ts / when / timestamp, else the first ISO date, "today",
      "yesterday" or "last <weekday>" in the text (relative to ``now``); else None, and
      the database's ``created_at`` stands in.
    * where: the event's where / location, else a URL, file path or chat id in the text,
      else ``"session:<id>"`` (JAM lists the chat session as a "where").
    * why / how: the clause after a cue phrase; what: the content, whitespace collapsed.
    * summary, topics, entities, category, emotion: see :func:`summarize`,
      :func:`keywords`, :func:`extract_entities`, :func:`_category`, :func:`emotion`.
    * importance stays None: the database's surprise gate (engram.md) computes it at write.
    """

    source = "heuristic"

    def extract(self, event: Mapping[str, Any] | str, *, now: datetime | None = None) -> Extraction:
        """Extract one event (a dict or plain text)."""
        ev = _normalize_event(event)
        now = _to_utc(now) or datetime.now(UTC)
        text = ev.content.strip()
        what = _collapse(text) or None
        when = ev.when or (_when_from_text(text, now) if text else None)
        where = ev.where or (_where_from_text(text) if text else None)
        if where is None and ev.session_id:
            where = f"session:{ev.session_id}"
        valence, arousal, dominance = emotion(text) if text else (None, None, None)
        return Extraction(
            who=ev.who,
            what=what,
            when=when,
            where=where,
            why=_why_from_text(text) if text else None,
            how=_how_from_text(text) if text else None,
            topics=keywords(text),
            entities=extract_entities(text),
            summary=summarize(text),
            category=_category(text, is_context=ev.is_context) if text or ev.is_context else None,
            valence=valence,
            arousal=arousal,
            dominance=dominance,
            importance=None,
            source="heuristic",
        )

    def extract_many(self, events: Iterable[Mapping[str, Any] | str], *,
                     now: datetime | None = None) -> list[Extraction]:
        """Extract several events, in order."""
        return [self.extract(e, now=now) for e in events]


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
"importance": number 0..1 - how worth remembering in the long term.
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
