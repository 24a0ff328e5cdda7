"""The heuristic extractor: deterministic, offline, rule-based 5W1H extraction.

Every rule is small and written down next to its code, so a user can predict what it
stores (JAM, jam-journalistic-agent-memory.md, Stage 1.2, without a model).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, time as dtime, timedelta
from typing import Any, Iterable, Mapping

from .base import (
    MAX_ENTITIES,
    MAX_TOPICS,
    SUMMARY_CHARS,
    UTC,
    Extraction,
    _clip,
    _collapse,
    _normalize_event,
    _to_utc,
)
from ..engine.profile_facts import detect_facts  # layered tiers (issue 15): profile statements

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


def _day_start(moment: datetime) -> datetime:
    return datetime.combine(moment.astimezone(UTC).date(), dtime(0), tzinfo=UTC)


# (a run of marks is tried from its first mark only: tried from each mark of "....x" it was
# quadratic; issue 27, H1)
_SENTENCE_BREAK = re.compile(r"(?<![.!?])[.!?]+(?=\s|$)|\n")
_CLAUSE_BREAK = re.compile(r"(?<![.!?])[.!?]+(?=\s|$)|[;\n]")


def _sentence_end(text: str, start: int = 0, *, clause: bool = False) -> int:
    """Index just past the sentence that starts at ``start`` (.!? before a space, or a
    newline; with ``clause=True`` a ``;`` ends it too)."""
    for m in (_CLAUSE_BREAK if clause else _SENTENCE_BREAK).finditer(text, start):
        if m.group()[0] == ".":
            j = m.start()  # the word before the mark (a scan back over it, not a search of the text)
            while j > start and not text[j - 1].isspace():
                j -= 1
            word = text[j:m.start()].lower()
            if word in _ABBREVIATIONS or re.fullmatch(r"(?:[a-z]\.)+[a-z]", word):
                continue  # "Dr. Smith", "e.g. this"
        return m.end()
    return len(text)


_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc",
                            "e.g", "i.e", "approx", "fig", "inc", "ltd"})


FIELD_BYTES = 8192  # the default max_field_bytes (sql/020_defaults.sql): one 5W1H field of a memory


def fit_field(value: str | None, max_bytes: int = FIELD_BYTES) -> str | None:
    """A 5W1H field cut to ``max_bytes`` of UTF-8 at a word boundary, ending with "…", as the
    summary is cut: content up to the documented 256 KB is stored, its ``what`` the start of it
    (issue 35, M5: the whole text was copied into ``what``, refused over 8 KB)."""
    if value is None:
        return None
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return value
    head = raw[: max_bytes - 3].decode("utf-8", "ignore")  # room for "…" (3 bytes)
    space = head.rfind(" ")
    if space > len(head) // 2:
        head = head[:space]
    return head.rstrip(" ,;:-–—") + "…"


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
    rel = _RELATIVE_DAY.search(text)
    if rel:
        word = rel.group(1).lower()
        today = _day_start(now)
        if word == "today":
            when = today
        elif word == "yesterday":
            when = today - timedelta(days=1)
        else:
            target = _WEEKDAYS.index(rel.group(2).lower())
            when = today - timedelta(days=(today.weekday() - target) % 7 or 7)
        found.append((rel.start(), when))
    return min(found, key=lambda item: item[0])[1] if found else None


# ------------------------------------------------------------------------------ where
_URL = re.compile(r"\b(?:https?|ftp|file)://[^\s<>\"'`]+", re.IGNORECASE)
# (starts only where the local part starts: tried at every letter of "x.x.x.x..." it was
# quadratic; issue 27, H1)
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
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
    # (scans back from pos over what it needs, not over the whole text before it: called for
    # every capitalised word, a copy or a search of the text before each was quadratic; issue 27, H1)
    j = pos
    while j > 0 and text[j - 1] in " \t\"'“(*-•>":
        j -= 1
    if j == 0:
        return True
    if text[j - 1] == ".":
        i = j - 1
        while i > 0 and not text[i - 1].isspace():
            i -= 1
        return text[i:j - 1].lower() not in _ABBREVIATIONS
    return text[j - 1] in "!?:\n"


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
    kept_end = 0  # in start order, a span overlaps a kept one exactly when it starts before the last kept end
    for start, end, value in sorted(spans, key=lambda s: (s[0], -(s[1] - s[0]))):
        if value and end > start and start >= kept_end:
            kept.append((start, end, value))
            kept_end = end
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
# (one pass per sentence: the verb before the sentence's last digit. The pattern verb, then
# anything up to a digit, scanned from every verb to the sentence's end: quadratic; issue 27, H1)
_STATED_VERB = re.compile(r"\b(?:is|are|has|have|costs?|equals?|weighs?)\b", re.IGNORECASE)


def _states_number(text: str) -> bool:
    for sentence in re.split(r"[.!?;\n]", text):
        last = max(sentence.rfind(d) for d in "0123456789")
        if last > 0 and _STATED_VERB.search(sentence, 0, last):
            return True
    return False


def _category(text: str, *, is_context: bool) -> str:
    """engram.md categories. Context (tool outputs, system notes) first, then preference,
    skill, fact; anything else is an episode."""
    if is_context:
        return "context"
    if _PREFERENCE.search(text):
        return "preference"
    if _SKILL.search(text):
        return "skill"
    if _FACT.search(text) or _states_number(text):
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
    * why / how: the clause after a cue phrase; what: the content, whitespace collapsed;
      each cut to 8 KB (:func:`fit_field`), as the summary is cut.
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
        what = fit_field(_collapse(text) or None)
        when = ev.when or (_when_from_text(text, now) if text else None)
        where = ev.where or (fit_field(_where_from_text(text)) if text else None)
        if where is None and ev.session_id:
            where = f"session:{ev.session_id}"
        valence, arousal, dominance = emotion(text) if text else (None, None, None)
        return Extraction(
            who=ev.who,
            what=what,
            when=when,
            where=where,
            why=fit_field(_why_from_text(text)) if text else None,
            how=fit_field(_how_from_text(text)) if text else None,
            topics=keywords(text),
            entities=extract_entities(text),
            summary=summarize(text),
            category=_category(text, is_context=ev.is_context) if text or ev.is_context else None,
            valence=valence,
            arousal=arousal,
            dominance=dominance,
            importance=None,
            facts=detect_facts(text, ev.who) if text else None,  # layered tiers (issue 15)
            source="heuristic",
        )

    def extract_many(self, events: Iterable[Mapping[str, Any] | str], *,
                     now: datetime | None = None) -> list[Extraction]:
        """Extract several events, in order."""
        return [self.extract(e, now=now) for e in events]

