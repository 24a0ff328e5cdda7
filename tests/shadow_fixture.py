"""Shadow's activation fixture (tests/test_activate_recall.py, tests/test_design_rows.py): five
memories whose activation against one question is computed by hand in test_activate_recall.py
(a: .705 semantic, between mixed .65 and query .75; d: .55 mixed, ...), the ``act`` fixture
that stores them, and ``activate`` with that question's arguments.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from sqlhelpers import call

DIM = 384
LN2 = math.log(2)
T = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
THRESHOLDS = {"query": 0.75, "task": 0.8, "conversation": 0.3, "document": 0.6, "mixed": 0.65}
SHADOW = {"embedding": 0.6, "metadata": 0.2, "summary": 0.15, "temporal": 0.05}
ENGRAM = {"relevance": 0.5, "importance": 0.3, "recency": 0.2, "access_frequency": 0.0}


def unit(*pairs: tuple[int, float]) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    for i, x in pairs:
        v[i] = x
    return v


def cos(a, b) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def tokens(text: str) -> set[str]:
    """Engram tokenize (pgmem.tokens): lower-case alphanumeric words, as a set."""
    return {t for t in re.split(r"[^0-9a-z]+", text.lower()) if t}


def jaccard(a: set, b: set) -> float:
    return 0.0 if not a and not b else len(a & b) / len(a | b)


def exp_decay(days: float, half_life: float = 30.0) -> float:
    return math.exp(-LN2 * max(days, 0.0) / half_life)


def remember(conn, content: str, **kw) -> int:
    r = call(conn, "remember", content, force=True, **kw)[0]
    assert r["decision"] == "stored", r
    return r["memory_id"]


Q_VEC = unit((0, 1.0))
Q_TOPICS = ["Lisbon", "Wedding"]
Q_SUMMARY = "trip to lisbon"
Q_TEXT = "Where is the hotel for the Lisbon wedding?"

# name: content, vector, topics, entities, summary, age (days)
ACT = {
    # .6*.8 + .2*.5 + .15*.5 + .05*1 = 0.705 (between mixed .65 and query .75)
    "a": ("Booked the Casa do Largo hotel for the wedding", unit((0, 0.8), (1, 0.6)), ["lisbon", "hotel"],
          ["Wedding", "Ines"], "trip to lisbon alfama hotel booked", 0.0),
    # contextual: no semantic similarity, full metadata and summary overlap
    "b": ("Ines sent the wedding invitation", unit((1, 1.0)), ["lisbon"], ["wedding"], "trip to lisbon", 30.0),
    # temporal: nothing in common but brand new
    "c": ("Unrelated note about gardening", unit((2, 1.0)), [], [], None, 0.0),
    # mixed: .24 semantic, .26 contextual, .05 temporal (none has half of .55)
    "d": ("Comparing city trips", unit((0, 0.4), (3, math.sqrt(0.84))), ["wedding", "lisbon"], [],
          "trip to porto rome", 0.0),
    # negative cosine is clipped to 0
    "e": ("Tax return filed", unit((0, -0.5), (4, math.sqrt(0.75))), [], [], None, 60.0),
}


@pytest.fixture
def act(conn):
    out = {}
    for name, (content, vec, topics, entities, summary, age) in ACT.items():
        out[name] = remember(conn, content, embedding=vec, topics=topics, entities=entities, summary=summary,
                             created_at=T - timedelta(days=age))
    return out


def activate(conn, **kw):
    kw.setdefault("query_text", Q_TEXT)
    kw.setdefault("query_embedding", Q_VEC)
    kw.setdefault("topics", Q_TOPICS)
    kw.setdefault("summary", Q_SUMMARY)
    kw.setdefault("as_of", T)
    return call(conn, "activate", **kw)
