"""Engram's surprise gate over a batch (engram.md, Surprise Detection), in order.

remember_many() asks the database, in one statement, what every item of a batch finds among
the memories already stored (exact duplicate, event_key replay, the nearest neighbour from the
HNSW index, the best keyword match among index-driven candidates, the count of its category).
What an item finds among the *earlier items of the same batch* depends on which of those were
stored, so this module walks the batch in order, exactly as one remember() call after the
other would: item i is compared with the stored memories and with the items before it that
the gate kept. The result is the decision of every item; the database then writes the stored
ones with one INSERT ... SELECT.

Within a batch the comparison with earlier items is exact (Engram's "max over existing
memories"): every earlier kept item of the same scope is a semantic and a keyword candidate.

Runs inside PostgreSQL (PL/Python: pgmem.py_modules) and in the venv: standard library + numpy.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import numpy as np


def vector_from_send(b: bytes | None) -> np.ndarray | None:
    """A pgvector value in its binary send format (int16 dim, int16 unused, dim float32, big
    endian) as float32."""
    if b is None:
        return None
    dim = struct.unpack_from(">H", b, 0)[0]
    return np.frombuffer(b, dtype=">f4", count=dim, offset=4).astype(np.float32)


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """pgvector's cosine similarity (vector_cosine_distance = 1 - this), computed as pgvector
    computes it: float32 sums of products, divided in double precision, clipped to [-1, 1]."""
    dot = np.float32(np.dot(a, b))
    na = np.float32(np.dot(a, a))
    nb = np.float32(np.dot(b, b))
    s = float(dot) / math.sqrt(float(na) * float(nb))
    return max(-1.0, min(1.0, s))


def jaccard(a: frozenset, b: frozenset) -> float:
    """J(A,B) = |A ∩ B| / |A ∪ B| (engram.md, Keyword Novelty); 0 when both are empty
    (pgmem.jaccard)."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def rarity(count: int) -> float:
    """engram.md, Category Rarity: 1 / log2(2 + count)."""
    return 1.0 / math.log2(2 + count)


@dataclass
class Ref:
    """A memory an item points at: stored before the batch (id) or kept earlier in it (ord)."""
    id: int | None = None
    ord: int | None = None

    def key(self) -> tuple:
        # memories kept in the batch get ids after every stored one, in batch order
        return (1, self.ord) if self.id is None else (0, self.id)


@dataclass
class Decision:
    decision: str
    memory: Ref | None = None          # duplicate / replayed: the memory it is
    surprise: float | None = None
    semantic_novelty: float | None = None
    keyword_novelty: float | None = None
    rarity: float | None = None
    nearest: Ref | None = None
    nearest_similarity: float | None = None
    new_numbers: list[str] = field(default_factory=list)
    forced: bool = False
    seq: int | None = None
    prev: Ref | None = None


def _digits(tokens) -> list[str]:
    return sorted(t for t in tokens if any(c.isdigit() for c in t))


def decide(items: list[dict], *, threshold: float, weights: dict, weights_no_embedding: dict,
           rarity_cap: int) -> list[Decision]:
    """The gate's decision for every item, in order.

    Each item is a dict with: scope, hash, event_key, category, force, vector (float32 array
    or None), tokens (pgmem.tokens(content)), session, created_at (epoch seconds), and what it
    found among the stored memories: replay_id, dup_id, any (a stored memory in its scope),
    nn_id/nn_sim/nn_tokens (nearest by embedding, HNSW), kw_id/kw_sim/kw_tokens (best Jaccard
    among the keyword candidates; tokens are those of that memory's content), cat_count (its category in its scope, capped),
    prev_id/prev_seq/prev_at (the latest memory of its session at or before created_at).
    """
    kept: list[int] = []                     # ords of the items kept so far
    by_scope: dict[str, list[int]] = {}      # scope -> kept ords
    by_hash: dict[tuple, int] = {}           # (scope, content hash) -> first kept ord
    by_key: dict[str, int] = {}              # event_key -> kept ord
    by_cat: dict[tuple, int] = {}            # (scope, category) -> kept count
    by_session: dict[str, list[int]] = {}    # session -> kept ords
    seq_of: dict[int, int] = {}
    out: list[Decision] = []
    toks = [frozenset(it["tokens"] or ()) for it in items]
    vecs = [it["vector"] for it in items]

    for i, it in enumerate(items):
        scope = it["scope"]
        # idempotent replay: an event_key seen before returns its memory
        if it["replay_id"] is not None:
            out.append(Decision("replayed", memory=Ref(id=it["replay_id"])))
            continue
        if it["event_key"] is not None and it["event_key"] in by_key:
            out.append(Decision("replayed", memory=Ref(ord=by_key[it["event_key"]])))
            continue
        mine = by_scope.get(scope, [])
        # 1. exact duplicate (fast path)
        dup = Ref(id=it["dup_id"]) if it["dup_id"] is not None else (
            Ref(ord=by_hash[(scope, it["hash"])]) if (scope, it["hash"]) in by_hash else None)
        if dup is not None:
            d = Decision("duplicate", memory=dup, surprise=0.0, semantic_novelty=0.0, keyword_novelty=0.0,
                         rarity=None, nearest=dup, nearest_similarity=1.0)
            if not it["force"]:
                out.append(d)
                continue
            d.decision = "stored"
            d.forced = True
        else:
            d = _score(i, it, mine, toks, vecs, threshold, weights, weights_no_embedding, rarity_cap, by_cat)
            # A restatement with different numbers (a moved date, a new price) is an update,
            # not a repeat: the gate keeps it (pgmem's addition to Engram; bench/EVAL.md).
            if d.surprise < threshold and not it["force"] and d.nearest is not None:
                if d.nearest.id is None:
                    near_toks = toks[d.nearest.ord]
                else:
                    near_toks = frozenset((it["nn_tokens"] if d.nearest.id == it["nn_id"] else it["kw_tokens"]) or ())
                d.new_numbers = [t for t in _digits(toks[i]) if t not in near_toks]
            if d.surprise < threshold and not it["force"] and not d.new_numbers:
                d.decision = "rejected"
                out.append(d)
                continue
            d.decision = "stored"
            d.forced = bool(it["force"]) and d.surprise < threshold and not d.new_numbers
        # stored: the session's previous memory (the latest at or before this one's time)
        if it["session"] is not None:
            best = None
            if it["prev_id"] is not None:
                best = ((it["prev_at"], 0, it["prev_id"]), Ref(id=it["prev_id"]), it["prev_seq"] or 0)
            for j in by_session.get(it["session"], []):
                if items[j]["created_at"] <= it["created_at"]:
                    cand = ((items[j]["created_at"], 1, j), Ref(ord=j), seq_of[j])
                    if best is None or cand[0] > best[0]:
                        best = cand
            d.prev = best[1] if best else None
            d.seq = (best[2] if best else 0) + 1
            seq_of[i] = d.seq
            by_session.setdefault(it["session"], []).append(i)
        kept.append(i)
        by_scope.setdefault(scope, []).append(i)
        by_hash.setdefault((scope, it["hash"]), i)
        if it["event_key"] is not None:
            by_key[it["event_key"]] = i
        by_cat[(scope, it["category"])] = by_cat.get((scope, it["category"]), 0) + 1
        out.append(d)
    return out


def _score(i, it, mine, toks, vecs, threshold, weights, weights_no_embedding, rarity_cap, by_cat) -> Decision:
    """Steps 2-5 of Engram's flow for item i against the stored memories (what the database
    found) and the items kept before it in its scope (`mine`)."""
    any_memory = bool(it["any"]) or bool(mine)
    v = vecs[i]
    nearest: Ref | None = None
    near_sim: float | None = None
    sem = None
    # 2. semantic novelty = 1 - max cosine similarity (1.0 when nothing to compare with)
    if v is not None:
        if any_memory:
            if it["nn_id"] is not None:
                nearest, near_sim = Ref(id=it["nn_id"]), float(it["nn_sim"])
            for j in mine:
                if vecs[j] is not None:
                    s = cosine_similarity(v, vecs[j])
                    if near_sim is None or s > near_sim:  # ties: the stored memory (lower id)
                        nearest, near_sim = Ref(ord=j), s
            sem = 1.0 if nearest is None else 1.0 - max(0.0, min(1.0, near_sim))
        else:
            sem = 1.0
    # 3. keyword novelty = 1 - max Jaccard
    if any_memory:
        kw_best, kw_ref = None, None
        if it["kw_id"] is not None:
            kw_best, kw_ref = float(it["kw_sim"]), Ref(id=it["kw_id"])
        for j in mine:
            s = jaccard(toks[i], toks[j])
            if kw_best is None or s > kw_best:
                kw_best, kw_ref = s, Ref(ord=j)
        kw = 1.0 - (kw_best or 0.0)
        if nearest is None:  # without an embedding, the nearest memory is the best keyword match
            nearest, near_sim = kw_ref, kw_best
    else:
        kw = 1.0
    # 4. category rarity = 1 / log2(2 + count of the category), the count capped
    count = min(rarity_cap, int(it["cat_count"] or 0) + by_cat.get((it["scope"], it["category"]), 0))
    rar = rarity(count)
    # 5. combine: 0.6 semantic + 0.3 keyword + 0.1 rarity (0.8 keyword + 0.2 rarity without an embedding)
    if v is not None:
        s = weights["semantic"] * sem + weights["keyword"] * kw + weights["rarity"] * rar
    else:
        s = weights_no_embedding["keyword"] * kw + weights_no_embedding["rarity"] * rar
    return Decision("", surprise=max(0.0, min(1.0, s)), semantic_novelty=sem, keyword_novelty=kw, rarity=rar,
                    nearest=nearest, nearest_similarity=near_sim)
