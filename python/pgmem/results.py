"""What the client's calls return: a stored memory's verdict (:class:`RememberResult`) and a
ranked memory with the per-signal scores that explain its rank (:class:`Hit`), built from the
rows of the SQL API (pgmem.remember / remember_many, pgmem.search / activate / recall).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Sequence

__all__ = ["RememberResult", "Hit", "SEARCH_SIGNALS", "ACTIVATE_SIGNALS", "RECALL_SIGNALS", "hit_from_row",
           "remember_result"]


@dataclass
class RememberResult:
    """The surprise gate's verdict on one memory (pgmem.remember): ``decision`` is stored,
    duplicate, merged, ... with the scores that decided it."""

    id: int | None
    decision: str
    surprise: float | None
    importance: float | None
    salience: float | None
    nearest_id: int | None = None
    nearest_similarity: float | None = None
    details: dict = field(default_factory=dict)

    @property
    def stored(self) -> bool:
        return self.decision == "stored"


@dataclass
class Hit:
    """One ranked memory with the per-signal scores that explain its rank."""

    id: int
    score: float
    signals: dict[str, float]
    content: str
    summary: str | None = None
    who: str | None = None
    what: str | None = None
    when: datetime | None = None
    where: str | None = None
    why: str | None = None
    how: str | None = None
    category: str | None = None
    created_at: datetime | None = None
    metadata: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


#: the signal columns of each ranking's rows (sql/205_search.sql, 220_activate.sql, 230_recall.sql)
SEARCH_SIGNALS = ("semantic", "lexical", "recency", "actor", "spatial", "usage", "time", "session", "neighbour",
                  "context")
ACTIVATE_SIGNALS = ("embedding_sim", "metadata_sim", "summary_sim", "temporal")
RECALL_SIGNALS = ("relevance", "decayed_importance", "recency", "access_frequency")

#: the row's columns a Hit has a field for (the rest go to ``Hit.extra``)
_HIT_FIELDS = {"id", "score", "content", "summary", "memory_summary", "who", "what", "happened_at", "location", "why",
               "how", "category", "created_at", "metadata"}


def hit_from_row(row: Mapping[str, Any], signal_names: Sequence[str]) -> Hit:
    """A ranking's row as a Hit: the named signals that are present, the 5W1H fields, and
    every other column in ``extra``."""
    signals = {s: float(row[s]) for s in signal_names if s in row and row[s] is not None}
    extra = {k: v for k, v in row.items() if k not in _HIT_FIELDS and k not in signals}
    return Hit(id=row["id"], score=float(row["score"]), signals=signals, content=row["content"],
               summary=row.get("summary", row.get("memory_summary")), who=row.get("who"), what=row.get("what"),
               when=row.get("happened_at"), where=row.get("location"), why=row.get("why"), how=row.get("how"),
               category=row.get("category"), created_at=row.get("created_at"), metadata=row.get("metadata") or {},
               extra=extra)


def remember_result(row: Mapping[str, Any]) -> RememberResult:
    """A row of pgmem.remember / pgmem.remember_many as a RememberResult."""
    return RememberResult(id=row["memory_id"], decision=row["decision"], surprise=row["surprise"],
                          importance=row["importance"], salience=row["salience"], nearest_id=row.get("nearest_id"),
                          nearest_similarity=row.get("nearest_similarity"), details=row.get("details") or {})
