"""Conversation state: the StateTracker of layered-memory-architecture.md ("Conversation
State (conversation_state.py)" and Step 4b), as a pure function of the previous state and
one user message.

``update(state, text, ...)`` returns the new values of the 19 ConversationState fields
(except dynamic_personality_mode, which the behaviour engine decides from them) and the
message's own features (``turn``), which the behaviour and policy rules read.

What the design fixes: repetition is Jaccard >= 0.7; interaction_pattern is one of
rapid_fire, exploratory, deep_dive, standard; precision_mode is one of concise, analytical,
speculative, implementation, adversarial. What it leaves open, pgmem decides here, in the
constants below:

* topic: a message whose cosine to the conversation's topic vector is at least the topic
  gate (0.35) keeps the topic (topic_turns_stable + 1), below it is a drift
  (topic_drift_count + 1, topic_turns_stable = 0). The first message sets the topic.
* interaction_pattern: rapid_fire after 3 short messages (<= 4 words) in a row; exploratory
  when 2 of the last 4 messages drifted; deep_dive after 3 stable turns with a substantial
  message (>= 8 words); standard otherwise, in that order.
* emotional_tone: the message's tone from small word lists (frustrated, anxious, confused,
  positive, curious, in that order of precedence), neutral otherwise; a change of tone
  counts in tone_shift_count.
* testing_flag: set by a testing or adversarial message and kept for 2 more messages.
* precision_mode: adversarial (testing), implementation, speculative, analytical or concise
  from the message's words; a message with none of them keeps the previous mode.

Standard library and engine.intent only (runs in PL/Python and in the client).
"""
from __future__ import annotations

import re
from typing import Any

from pgmem.engine.guard import MAX_TEXT_CHARS, normalise, tick, windows
from pgmem.engine.intent import is_greeting

__all__ = ["update", "tokens", "jaccard", "keywords", "tone", "SQL_API"]

SHORT_QUERY_WORDS = 4
RAPID_FIRE_STREAK = 3
EXPLORATORY_DRIFTS = 2      # of the last EXPLORATORY_WINDOW messages
EXPLORATORY_WINDOW = 4
DEEP_DIVE_STABLE = 3
DEEP_DIVE_WORDS = 8
TESTING_STICKY_TURNS = 2
RECENT_QUERIES = 5          # repetition compares with this many earlier user messages
RECENT_QUERY_CHARS = 2000   # ...each kept to its first this many characters (the state stays small)
INTENT_HISTORY = 10

_STOP = frozenset("""
a about above after again all also am an and any are as at be because been before being between both but by
can could did do does doing done down during each few for from further had has have having he her here hers him
his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other our
ours out over own same she should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
yours hi hello hey thanks thank please ok okay yes yeah tell know think want like get got make need let us im ive
dont doesnt cant whats thats really much many well way thing things something anything one two
""".split())

_TONES: list[tuple[str, re.Pattern[str]]] = [
    ("frustrated", re.compile(r"\b(?:frustrat\w*|annoy\w*|useless|doesn'?t\s+work|does\s+not\s+work|not\s+working|still\s+(?:broken|wrong|failing|not)"
                              r"|wtf|ugh+|argh+|ridiculous|terrible|hate|stupid|waste\s+of\s+time|sick\s+of|fed\s+up|come\s+on|give\s+up)\b|!!|\?!", re.I)),
    ("anxious", re.compile(r"\b(?:worr(?:y|ied)|nervous|anxious|scared|afraid|urgent\w*|asap|deadline|panic\w*|stressed)\b", re.I)),
    ("confused", re.compile(r"\b(?:confus\w*|(?:don'?t|do\s+not)\s+(?:understand|get\s+it)|makes\s+no\s+sense|what\s+do\s+you\s+mean|lost\s+me|unclear|huh)\b|\?\?", re.I)),
    ("positive", re.compile(r"\b(?:thanks|thank\s+you|great|awesome|perfect|love|nice|excellent|cool|brilliant|amazing|helpful|works\s+now|glad)\b", re.I)),
    ("curious", re.compile(r"\b(?:curious|wonder\w*|interesting|fascinat\w*|how\s+come|i'?d\s+like\s+to\s+know)\b", re.I)),
]
_TESTING = re.compile(
    r"\b(?:are\s+you\s+(?:a\s+|an\s+)?(?:bot|robot|ai|human|real|sentient|conscious|chatgpt|gpt)|ignore\s+(?:all\s+|your\s+|the\s+)?(?:previous|prior|above)\s+(?:instructions|prompts?)"
    r"|system\s+prompt|jailbreak|what\s+(?:model|llm)\s+are\s+you|(?:i'?m|just)\s+test(?:ing)?\s+you|this\s+is\s+a\s+test|prove\s+(?:that\s+)?you"
    r"|repeat\s+after\s+me|pretend\s+(?:to\s+be|you\s+are)|developer\s+mode|say\s+something\s+(?:wrong|false)|can\s+you\s+lie|trick\s+question)\b", re.I)
_META = re.compile(
    r"\b(?:you\s+(?:just\s+)?(?:said|told\s+me|mentioned|keep|kept|already|misunderstood|misread|are\s+wrong|were\s+wrong|didn'?t\s+(?:answer|listen|read)|ignored|forgot|repeated)"
    r"|your\s+(?:answer|response|reply|last\s+message|previous\s+answer|explanation)|that'?s\s+not\s+what\s+i\s+(?:asked|meant|said)|why\s+did\s+you"
    r"|stop\s+(?:repeating|saying|doing)|you'?re\s+(?:not\s+listening|repeating)|as\s+i\s+(?:said|mentioned)|i\s+already\s+(?:said|told|asked)"
    r"|answer\s+(?:my|the)\s+question|read\s+(?:my|the)\s+question)\b", re.I)
_PRECISION: list[tuple[str, re.Pattern[str]]] = [
    ("implementation", re.compile(r"`|\b(?:implement\w*|code|function|class|method|script|snippet|bug|error|exception|traceback|stack\s+trace|compile|deploy\w*"
                                  r"|install\w*|configur\w*|set\s*up|sql|query|api|endpoint|fix|debug\w*|refactor\w*|write\s+(?:a|the|me)|how\s+(?:do|can|should)\s+i)\b", re.I)),
    ("speculative", re.compile(r"\b(?:what\s+if|imagine|hypothetical(?:ly)?|suppose|speculate|could\s+it\s+be|might|would\s+it\s+be\s+possible|in\s+the\s+future|predict|wonder\s+(?:if|whether))\b", re.I)),
    ("analytical", re.compile(r"\b(?:compare|comparison|analy[sz]e|analysis|why|trade-?offs?|pros\s+and\s+cons|evaluate|difference\s+between|versus|vs\.?|explain|reasons?|impact|better|worse|assess)\b", re.I)),
    ("concise", re.compile(r"\b(?:tl;?dr|briefly|in\s+short|short\s+answer|one\s+line|quick(?:ly)?|summar\w*)\b", re.I)),
]
_PERSONAL = re.compile(r"\b(?:my|mine|myself|for\s+me|about\s+me|should\s+i|do\s+i|am\s+i|can\s+i|would\s+i|i\s+like|i\s+prefer)\b", re.I)
_QUESTION = re.compile(r"\?|^\W*(?:what|how|why|when|where|who|which|is|are|does|do|can|could|should|would|explain|tell\s+me)\b", re.I)


def tokens(text: str) -> set[str]:
    """Lower-case alphanumeric tokens (as pgmem.tokens in SQL)."""
    return {t for t in re.split(r"[^0-9a-z]+", (text or "").lower()) if t}


def jaccard(a: set[str], b: set[str]) -> float:
    """|A ∩ B| / |A ∪ B|; 0 when both are empty (as pgmem.jaccard)."""
    return len(a & b) / len(a | b) if a or b else 0.0


_KEYWORD = re.compile(r"[A-Za-z][A-Za-z0-9_+#.-]*[A-Za-z0-9+#]|[A-Za-z]")


def keywords(text: str, limit: int = 3) -> list[str]:
    """The first ``limit`` distinct content words of a text, longest first on ties of order."""
    seen: list[str] = []
    # (the words one by one, stopping at ``limit``: a list of every distinct word of a long text,
    # searched for each word, was quadratic; issue 27, H1)
    for m in _KEYWORD.finditer((text or "")[:MAX_TEXT_CHARS]):
        # a word is kept to its first 64 characters: the topic ("my name is " + a 40 KB word) stays
        # a label, within behaviour_decision's features limit (issue 35, M3)
        lw = m.group(0).lower().strip(".")[:64]
        if len(lw) > 2 and lw not in _STOP and lw not in seen:
            seen.append(lw)
            if len(seen) >= limit:
                break
    return seen


def _parts(text: str | list[tuple[int, str]]) -> list[tuple[int, str]]:
    return text if isinstance(text, list) else list(windows(normalise(text or "")))


def _found(rx: re.Pattern[str], parts: list[tuple[int, str]]) -> bool:
    """Whether ``rx`` matches in a window of the text (engine/guard.py, issue 27 H1)."""
    for _, part in parts:
        tick()
        if rx.search(part):
            return True
    return False


def tone(text: str | list[tuple[int, str]]) -> str:
    """The message's tone (precedence frustrated > anxious > confused > positive > curious)."""
    parts = _parts(text)
    caps = sum(1 for _, part in parts for w in re.findall(r"\b[A-Z]{3,}\b", part)
               if w not in ("API", "SQL", "HTTP", "JSON", "HNSW", "CPU", "GPU", "URL"))
    if caps >= 2:
        return "frustrated"
    for name, rx in _TONES:
        if _found(rx, parts):
            return name
    return "neutral"


def _precision(parts: list[tuple[int, str]], testing: bool, short: bool) -> str | None:
    if testing:
        return "adversarial"
    for name, rx in _PRECISION:
        if _found(rx, parts):
            return name
    return "concise" if short else None


def update(state: dict[str, Any], text: str, topic_similarity: float | None = None, intent: str | None = None,
           gate: float = 0.35, repetition_threshold: float = 0.7) -> dict[str, Any]:
    """The state after one user message. ``state`` holds the previous 19 fields (missing ones
    take their defaults) and ``tracker`` (the bounded working memory: recent queries and
    drifts); ``topic_similarity`` is the cosine of the message to the topic vector *before*
    this message (None when the conversation has none yet). Returns ``{"state": {...},
    "turn": {...}}``; ``state`` includes the new ``tracker``."""
    s = dict(state or {})
    tr = dict(s.get("tracker") or {})
    t = (text or "").strip()
    parts = list(windows(normalise(t)))  # what the patterns see (engine/guard.py, issue 27 H1)
    words = re.findall(r"[\w'’]+", t)
    n = int(s.get("message_count") or 0) + 1
    short = len(words) <= SHORT_QUERY_WORDS

    # repetition: Jaccard of token sets >= 0.7 with one of the last user messages (Step 4b)
    toks = tokens(t)
    recent = list(tr.get("recent_queries") or [])
    best = max((jaccard(toks, tokens(q)) for q in recent), default=0.0)
    repetition = best >= repetition_threshold

    testing_now = _found(_TESTING, parts)
    left = TESTING_STICKY_TURNS if testing_now else max(0, int(tr.get("testing_turns_left") or 0) - 1)
    testing_flag = testing_now or (bool(s.get("testing_flag")) and int(tr.get("testing_turns_left") or 0) > 0)
    meta = _found(_META, parts)
    turn_tone = tone(parts)
    prev_tone = s.get("emotional_tone") or "neutral"

    # topic: stable / drift against the gate threshold
    if topic_similarity is None:
        drift, stable, drifts = False, 0, int(s.get("topic_drift_count") or 0)
    elif topic_similarity >= gate:
        drift, stable, drifts = False, int(s.get("topic_turns_stable") or 0) + 1, int(s.get("topic_drift_count") or 0)
    else:
        drift, stable, drifts = True, 0, int(s.get("topic_drift_count") or 0) + 1
    recent_drifts = (list(tr.get("recent_drifts") or []) + [drift])[-EXPLORATORY_WINDOW:]
    topic = s.get("current_topic")
    if drift or topic_similarity is None or not topic:
        topic = " ".join(keywords(t)) or topic

    short_streak = int(s.get("short_query_streak") or 0) + 1 if short else 0
    if short_streak >= RAPID_FIRE_STREAK:
        pattern = "rapid_fire"
    elif sum(recent_drifts) >= EXPLORATORY_DRIFTS:
        pattern = "exploratory"
    elif stable >= DEEP_DIVE_STABLE and len(words) >= DEEP_DIVE_WORDS:
        pattern = "deep_dive"
    else:
        pattern = "standard"

    last_intent = s.get("last_intent")
    history = (list(s.get("intent_history") or []) + ([intent] if intent else []))[-INTENT_HISTORY:]
    streak = (int(s.get("intent_streak") or 0) + 1 if intent and intent == last_intent else 1) if intent else int(s.get("intent_streak") or 0)
    avg = float(s.get("avg_query_length") or 0.0)
    avg = avg + (len(t) - avg) / n

    # the tracker's own mode persists in the tracker: the column may hold a behaviour rule's override
    precision = _precision(parts, testing_flag, short) or tr.get("precision") or s.get("precision_mode") or "analytical"
    tr.update(recent_queries=(recent + [t[:RECENT_QUERY_CHARS]])[-RECENT_QUERIES:], recent_drifts=recent_drifts, testing_turns_left=left,
              precision=precision)
    new = {
        "current_topic": topic,
        "topic_turns_stable": stable,
        "topic_drift_count": drifts,
        "emotional_tone": turn_tone,
        "tone_shift_count": int(s.get("tone_shift_count") or 0) + (1 if n > 1 and turn_tone != prev_tone else 0),
        "interaction_pattern": pattern,
        "testing_flag": testing_flag,
        "repetition_count": int(s.get("repetition_count") or 0) + (1 if repetition else 0),
        "meta_comment_count": int(s.get("meta_comment_count") or 0) + (1 if meta else 0),
        "last_intent": intent or last_intent,
        "intent_history": history,
        "intent_streak": streak,
        "message_count": n,
        "avg_query_length": round(avg, 3),
        "short_query_streak": short_streak,
        "precision_mode": precision,
        "tracker": tr,
    }
    turn = {
        "text_length": len(t), "word_count": len(words), "short_query": short, "question": _found(_QUESTION, parts),
        "tone": turn_tone, "repetition": repetition, "repetition_similarity": round(best, 4), "testing": testing_now,
        "meta_comment": meta, "drift": drift, "topic_similarity": topic_similarity,
        "greeting": is_greeting(t), "personal_reference": _found(_PERSONAL, parts), "keywords": keywords(t, 5),
    }
    return {"state": new, "turn": turn}


# What pgmem._engine may call from SQL (module 'conversation').
SQL_API = {"update": update}
