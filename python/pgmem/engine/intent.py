"""Intent classification before any retrieval (layered-memory-architecture.md, "The Five
Intent Categories", Step 3 and "Intent Classification (classifier.py)").

Five intents: general, knowledge_base, continuation, profile, privacy. The design's
pre-heuristic fast paths decide first, with its confidences:

====================  ==========  ===========================================================
fast path             confidence  what matches (pgmem's rules; the design names only the path)
====================  ==========  ===========================================================
greeting -> general   0.97        the whole message is a greeting, thanks or goodbye
privacy               0.95        what is stored / known about me, delete or forget my data,
                                  tracking, GDPR
profile statement     0.92        the message states a profile fact (engine.profile_facts)
continuation          0.85        the conversation has earlier messages and this one refers
                                  back to them ("it", "that", "those", "tell me more", ...)
====================  ==========  ===========================================================

Anything else goes to the LLM (the client's OpenAI-compatible path; SQL cannot call it) and
the answer is cached in the database. Until then :func:`classify` returns pgmem's offline
guess with ``needs_llm = True`` and a confidence below every fast path: a question about the
user ("what's my name?") is profile (0.75), a factual or technical question is
knowledge_base (0.6), anything else general (0.5).

Standard library and engine.profile_facts only (runs in PL/Python and in the client).
"""
from __future__ import annotations

import json
import re
from typing import Any

from pgmem.engine.guard import normalise, tick, windows
from pgmem.engine.profile_facts import detect_facts

__all__ = ["INTENTS", "FAST_PATHS", "classify", "fast_path", "is_greeting", "SYSTEM_PROMPT", "llm_payload", "parse_llm", "SQL_API"]

INTENTS = ("general", "knowledge_base", "continuation", "profile", "privacy")
# layered-memory-architecture.md, "Intent Classification (classifier.py)": the confidences.
FAST_PATHS = {"greeting": 0.97, "privacy": 0.95, "profile_statement": 0.92, "continuation": 0.85}
FALLBACK = {"personal_question": 0.75, "question": 0.6, "default": 0.5}

_GREETING = re.compile(
    r"^\W*(?:(?:hi|hello|hey|hiya|howdy|yo|greetings|hallo|hola|bonjour|salut|sup|morning|evening)"
    r"(?:\s+there)?|good\s+(?:morning|afternoon|evening|day|night)|what'?s\s+up|how\s+are\s+you(?:\s+doing)?(?:\s+today)?"
    r"|how'?s\s+it\s+going|nice\s+to\s+meet\s+you|thanks?(?:\s+you)?(?:\s+(?:so|very)\s+much)?(?:\s+a\s+lot)?|thx|ty|cheers"
    r"|bye|goodbye|see\s+you(?:\s+later|\s+soon)?|good\s*night|ok(?:ay)?\s+thanks?)"
    r"(?:[\s,!.]+(?:(?:there|again|everyone|all|mate|friend|buddy|pgmem|assistant|bot)\b|[A-Z][a-z]+))?[\s!.?,:;)(*^-]*$",
    re.I)
_PRIVACY = re.compile(
    r"\b(?:what\s+(?:do\s+you|data\s+do\s+you|information\s+do\s+you|have\s+you)\s+(?:know|store|keep|have|remember|collect|saved?)\s+(?:about|on|of)\s+me"
    r"|what\s+(?:data|information|info|details)\s+(?:do\s+you|have\s+you|are\s+you)\s+\w+\s+(?:about|on)\s+me"
    r"|(?:delete|erase|remove|wipe|purge|forget)\s+(?:all\s+)?(?:of\s+)?(?:my|everything\s+about\s+me|me\b|what\s+you\s+know)"
    r"|forget\s+everything|(?:are|is)\s+(?:you|this|it)\s+(?:tracking|recording|logging|spying|storing)"
    r"|track(?:ing)?\s+me|privacy|gdpr|personal\s+data|my\s+data\b|data\s+(?:retention|protection)"
    r"|what\s+(?:is|'s)\s+stored|who\s+can\s+see\s+(?:my|this)|do\s+you\s+(?:store|keep|save|record|log)\s+(?:my|our|this|these|what))",
    re.I)
_BACKREF = re.compile(
    r"\b(?:it|that|those|this|these|they|them|the\s+(?:first|second|third|last|previous|above|other)\s+(?:one|option|point|step)"
    r"|the\s+same|same\s+thing|what\s+you\s+(?:said|mentioned|suggested)|you\s+(?:said|mentioned|suggested))\b", re.I)
_FOLLOW_UP = re.compile(
    r"^\W*(?:and|but|so|also|then|ok(?:ay)?\s+(?:and|so|but)|what\s+about|how\s+about|why(?:\s+not)?\??$|tell\s+me\s+more|more\s+(?:on|about)"
    r"|go\s+on|continue|elaborate|can\s+you\s+(?:elaborate|expand|explain\s+(?:that|it|more))|explain\s+(?:that|it|more)|and\s+then"
    r"|what\s+else|any\s+other|example|for\s+example|such\s+as|really|why\s+is\s+that|how\s+so|in\s+what\s+way)\b", re.I)
_PERSONAL_Q = re.compile(
    r"\b(?:what(?:'s|\s+is|\s+are|\s+was)\s+my|what\s+am\s+i\b|where\s+(?:do|did|am)\s+i|who\s+am\s+i|do\s+you\s+(?:know|remember)\s+(?:my|me|where|what|who|how)"
    r"|^\W*(?:am|was|do|did|have)\s+i\s+\w+|how\s+old\s+am\s+i|my\s+(?:name|age|job|email|address|birthday|editor|allerg\w*|preferences?)\b)", re.I)
_QUESTION = re.compile(
    r"\?\s*$|^\W*(?:what|how|why|when|where|who|which|whom|whose|is|are|does|do|can|could|should|would|will|explain|define|describe"
    r"|compare|list|show|tell\s+me|give\s+me|find|summari[sz]e)\b", re.I)


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'’]+", text)


#: A greeting is at most this many characters (and 8 words): longer text is never one, and the
#: pattern is never tried on it (issue 27, H1).
GREETING_MAX_CHARS = 200


def is_greeting(text: str) -> bool:
    """The whole message is a greeting, thanks or goodbye (at most 8 words)."""
    t = normalise((text or "").strip(), GREETING_MAX_CHARS + 1)
    return bool(t) and len(t) <= GREETING_MAX_CHARS and len(_words(t)) <= 8 and bool(_GREETING.match(t))


def _search(rx: re.Pattern[str], parts: list[tuple[int, str]]) -> re.Match[str] | None:
    """The first match of ``rx`` in the windows of a text (engine/guard.py), or None."""
    for _, part in parts:
        tick()
        m = rx.search(part)
        if m:
            return m
    return None


def fast_path(text: str, has_history: bool = False, facts: list | None = None) -> dict[str, Any] | None:
    """The design's pre-heuristics in its order (greeting, profile statement, privacy,
    continuation; privacy is tried before the profile statement so that "delete my name"
    is privacy). ``facts``: the profile facts the text states (engine.profile_facts), if the
    caller already has them. None when no fast path matches."""
    # (issue 27, H1: the patterns see the normalised text, window by window; engine/guard.py)
    t = normalise((text or "").strip())
    if not t:
        return {"intent": "general", "confidence": FAST_PATHS["greeting"], "rule": "empty", "needs_llm": False}
    if is_greeting(t):
        return {"intent": "general", "confidence": FAST_PATHS["greeting"], "rule": "greeting", "needs_llm": False}
    parts = list(windows(t))
    if _search(_PRIVACY, parts):
        return {"intent": "privacy", "confidence": FAST_PATHS["privacy"], "rule": "privacy", "needs_llm": False}
    if facts is None:
        facts = detect_facts(t)
    if facts:
        return {"intent": "profile", "confidence": FAST_PATHS["profile_statement"], "rule": "profile_statement",
                "needs_llm": False, "facts": facts}
    if not has_history:
        return None
    words = _words(t)
    ref = _BACKREF.search(t) if len(words) <= 25 else None
    # a back-reference counts in a short message, or near the start of a longer one (in "how does
    # pgvector build its index", "its" refers to the message's own subject)
    if len(words) <= 25 and (_FOLLOW_UP.match(t) or (ref and (len(words) <= 12 or len(_words(t[:ref.start()])) < 4))):
        return {"intent": "continuation", "confidence": FAST_PATHS["continuation"], "rule": "continuation",
                "needs_llm": False}
    return None


def fallback(text: str) -> dict[str, Any]:
    """pgmem's offline guess when no fast path matched (needs_llm stays True)."""
    t = normalise((text or "").strip())
    parts = list(windows(t))
    # _QUESTION is anchored at the text's start (its first window) or end ("?")
    question = bool(parts) and (_QUESTION.search(parts[0][1]) or parts[-1][1].rstrip().endswith("?"))
    if _search(_PERSONAL_Q, parts) and (question or "?" in t):
        return {"intent": "profile", "confidence": FALLBACK["personal_question"], "rule": "personal_question", "needs_llm": True}
    if question:
        return {"intent": "knowledge_base", "confidence": FALLBACK["question"], "rule": "question", "needs_llm": True}
    return {"intent": "general", "confidence": FALLBACK["default"], "rule": "default", "needs_llm": True}


def classify(text: str, has_history: bool = False, facts: list | None = None) -> dict[str, Any]:
    """A fast path when one matches, else the offline fallback (``needs_llm`` True)."""
    return fast_path(text, has_history, facts) or fallback(text)


# ----------------------------------------------------------------------------- LLM fallback
SYSTEM_PROMPT = """\
You classify ONE user message sent to an AI assistant into exactly one intent:
"general": greetings, opinions, open questions, small talk;
"knowledge_base": factual or technical questions that benefit from document retrieval;
"continuation": a follow-up that refers to earlier messages of the conversation ("it", "that", "those");
"profile": the user shares personal information ("My name is Alex") or asks about it ("What's my name?");
"privacy": questions about what data is stored, deletion requests, tracking concerns.
Reply with a single JSON object and nothing else: {"intent": "<one of the five>", "confidence": <0..1>}."""


def llm_payload(text: str, model: str, recent: list[str] | None = None) -> dict[str, Any]:
    """The chat-completions request body for classifying ``text`` (with up to three earlier
    user messages as context, so the model can tell a continuation)."""
    user: dict[str, Any] = {"message": text}
    if recent:
        user["earlier_messages"] = list(recent)[-3:]
    return {"model": model, "temperature": 0, "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                         {"role": "user", "content": json.dumps(user, ensure_ascii=False)}]}


def parse_llm(obj: Any) -> dict[str, Any] | None:
    """{"intent", "confidence"} from the model's JSON object, or None if unusable (an unknown
    intent; a confidence outside [0, 1] or missing becomes 0.7)."""
    if not isinstance(obj, dict):
        return None
    intent = str(obj.get("intent") or obj.get("category") or "").strip().lower().replace(" ", "_").replace("-", "_")
    if intent not in INTENTS:
        return None
    try:
        conf = float(obj.get("confidence"))  # type: ignore[arg-type]  # None/str: the except below
    except (TypeError, ValueError):
        conf = 0.7
    if not 0.0 <= conf <= 1.0:
        conf = 0.7
    return {"intent": intent, "confidence": round(conf, 4)}


# What pgmem._engine may call from SQL (module 'intent').
SQL_API = {"classify": classify}
