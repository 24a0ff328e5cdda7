"""Engram's surprise gate over a batch (engram.md, Surprise Detection), in order.

remember_many() asks the database, in one statement, what every item of a batch finds among
the memories already stored (exact duplicate, event_key replay, its nearest neighbours by
embedding, the keyword candidates and their tokens, the count of its category).
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
import re
import struct
from dataclasses import dataclass, field

import numpy as np

# Inside PostgreSQL a backend is one process among many on few cores: BLAS's worker threads
# (OpenBLAS starts one per core and spins them between calls) would take the other core from
# the server's other backends for a matrix product of milliseconds. One thread, for this
# backend's numpy (python3-threadpoolctl comes with python3-sklearn, which setup.sh installs).
try:  # pragma: no cover - depends on the interpreter's BLAS
    from threadpoolctl import threadpool_limits as _threadpool_limits

    _threadpool_limits(1, user_api="blas")
except Exception:  # noqa: BLE001 - without threadpoolctl numpy keeps its default
    pass


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


_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def ascii_tokens(text: str) -> list[str]:
    """pgmem.tokens(text) (the distinct lower-case runs of [:alnum:]) for an ASCII text: the
    database's regex classes and lower() agree with these on ASCII, and only on ASCII, so the
    database tokenizes every other text itself."""
    return sorted({t for t in _NOT_ALNUM.split(text.lower()) if t})


def jaccard(a: frozenset, b: frozenset) -> float:
    """J(A,B) = |A ∩ B| / |A ∪ B| (engram.md, Keyword Novelty); 0 when both are empty
    (pgmem.jaccard)."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def nearest_queued(item_scope: list, item_vecs: list, q_ids: list, q_scope: list, q_vecs: list,
                   k: int) -> list[tuple[int, int]]:
    """For every item with a vector, the ids of the (at most k) memories of its scope that are
    waiting for the HNSW index (pgmem.vector_queue) nearest to it: (item index, memory id)
    pairs. One matrix product per scope for the whole batch, instead of an exact scan of the
    queue per item; the database then computes the exact distance of these few (pgvector's, as
    for every other candidate) and keeps the k nearest of them and of the index's."""
    out: list[tuple[int, int]] = []
    if not q_ids or k < 1:
        return out
    by_scope: dict = {}
    for j, sc in enumerate(q_scope):
        if q_vecs[j] is not None:
            by_scope.setdefault(sc, []).append(j)
    items: dict = {}
    for i, sc in enumerate(item_scope):
        if item_vecs[i] is not None and sc in by_scope:
            items.setdefault(sc, []).append(i)
    for sc, its in items.items():
        js = by_scope[sc]
        Q = np.stack([q_vecs[j] for j in js])
        Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
        X = np.stack([item_vecs[i] for i in its])
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
        S = X @ Q.T
        ids = np.array([q_ids[j] for j in js])
        take = min(len(js), k + 2)  # a margin for float32 rounding: the database re-ranks exactly
        for r, i in enumerate(its):
            row = S[r]
            top = np.argpartition(-row, take - 1)[:take] if take < len(js) else np.arange(len(js))
            for t in top:
                out.append((i, int(ids[t])))
    return out


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


def decide(items: list[dict], *, tokens: dict, threshold: float, weights: dict, weights_no_embedding: dict,
           rarity_cap: int) -> list[Decision]:
    """The gate's decision for every item, in order.

    Each item is a dict with: scope, hash, event_key, category, force, vector (float32 array
    or None), tokens (pgmem.tokens(content)), session, created_at (epoch seconds), and what it
    found among the stored memories: replay_id, dup_id, any (a stored memory in its scope),
    sem (its nearest stored memories by embedding, [(id, cosine distance)] nearest first,
    ties by id), kw_ids (the other keyword candidates: the scope's most recent memories, and
    without an embedding the lexical ones), cat_count (its category in its scope, capped),
    prev_id/prev_seq/prev_at (the latest memory of its session at or before created_at).
    tokens maps the id of every candidate to its tokens (pgmem.tokens of its content).
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
    stored_toks = {k: frozenset(v or ()) for k, v in tokens.items()}
    sims = _batch_similarities(vecs)
    shared, sizes = _batch_shared_tokens(items, toks)

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
            d = _score(i, it, mine, toks, sims, shared, sizes, stored_toks, weights, weights_no_embedding, rarity_cap,
                       by_cat)
            surprise = d.surprise if d.surprise is not None else 1.0  # _score always sets it
            # A restatement with different numbers (a moved date, a new price) is an update,
            # not a repeat: the gate keeps it (pgmem's addition to Engram; bench/EVAL.md).
            if surprise < threshold and not it["force"] and d.nearest is not None:
                if d.nearest.id is None:
                    near_toks = toks[d.nearest.ord] if d.nearest.ord is not None else frozenset()
                else:
                    near_toks = stored_toks.get(d.nearest.id, frozenset())
                d.new_numbers = [t for t in _digits(toks[i]) if t not in near_toks]
            if surprise < threshold and not it["force"] and not d.new_numbers:
                d.decision = "rejected"
                out.append(d)
                continue
            d.decision = "stored"
            d.forced = bool(it["force"]) and surprise < threshold and not d.new_numbers
        # stored: the session's previous memory (the latest at or before this one's time)
        if it["session"] is not None:
            best = None  # (created_at, 0 stored / 1 batch, id or ord)
            if it["prev_id"] is not None:
                best = (it["prev_at"], 0, it["prev_id"])
            for j in by_session.get(it["session"], []):
                if items[j]["created_at"] <= it["created_at"]:
                    cand = (items[j]["created_at"], 1, j)
                    if best is None or cand > best:
                        best = cand
            if best is None:
                d.prev, d.seq = None, 1
            elif best[1] == 0:
                d.prev, d.seq = Ref(id=best[2]), (it["prev_seq"] or 0) + 1
            else:
                d.prev, d.seq = Ref(ord=best[2]), seq_of[best[2]] + 1
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


def _batch_similarities(vecs: list) -> np.ndarray | None:
    """Cosine similarity of every pair of the batch's vectors, as pgvector computes it
    (float32 products, divided in double precision, clipped to [-1, 1]): one matrix product
    instead of one call per pair (a batch of 256 made 32,000 of them)."""
    idx = [i for i, v in enumerate(vecs) if v is not None]
    if len(idx) < 2:
        return None
    V = np.stack([vecs[i] for i in idx]).astype(np.float32)
    G = (V @ V.T).astype(np.float64)
    n = np.sqrt(np.einsum("ij,ij->i", V, V, dtype=np.float32).astype(np.float64))
    S = np.clip(G / np.outer(n, n), -1.0, 1.0)
    full = np.full((len(vecs), len(vecs)), np.nan)
    full[np.ix_(idx, idx)] = S
    return full


def _batch_shared_tokens(items: list[dict], toks: list[frozenset]) -> tuple[np.ndarray, np.ndarray]:
    """How many tokens every pair of the batch's items shares (a sparse product of the
    item x token incidence matrix: what 32,000 set intersections did for a batch of 256), and
    each item's number of tokens."""
    n = len(items)
    sizes = np.array([len(t) for t in toks], dtype=np.float64)
    vocab: dict = {}
    rows, cols = [], []
    for i, t in enumerate(toks):
        for w in t:
            rows.append(i)
            cols.append(vocab.setdefault(w, len(vocab)))
    if not rows:
        return np.zeros((n, n)), sizes
    try:
        from scipy import sparse

        B = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n, len(vocab)))
        shared = (B @ B.T).toarray().astype(np.float64)
    except ImportError:  # pragma: no cover - python3-scipy comes with python3-sklearn
        B = np.zeros((n, len(vocab)), dtype=np.float32)
        B[rows, cols] = 1.0
        shared = (B @ B.T).astype(np.float64)
    return shared, sizes


def _jaccard_len(a: frozenset, b: frozenset) -> float:
    if not a and not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def _score(i, it, mine, toks, sims, shared, sizes, stored_toks, weights, weights_no_embedding, rarity_cap,
           by_cat) -> Decision:
    """Steps 2-5 of Engram's flow for item i against the stored memories (what the database
    found) and the items kept before it in its scope (`mine`, in batch order; `shared` and
    `sizes`: the batch's shared-token counts and token counts, for their Jaccard)."""
    any_memory = bool(it["any"]) or bool(mine)
    v = it["vector"]
    sem_cands = it.get("sem") or []
    nearest: Ref | None = None
    near_sim: float | None = None
    sem = None
    # 2. semantic novelty = 1 - max cosine similarity (1.0 when nothing to compare with)
    if v is not None:
        if any_memory:
            if sem_cands:
                nearest, near_sim = Ref(id=sem_cands[0][0]), 1.0 - float(sem_cands[0][1])
            if mine and sims is not None:
                row = sims[i, mine]
                if not np.isnan(row).all():
                    jj = int(np.argmax(np.where(np.isnan(row), -np.inf, row)))  # ties: the earliest
                    s = float(row[jj])
                    if near_sim is None or s > near_sim:  # ties: the stored memory (lower id)
                        nearest, near_sim = Ref(ord=mine[jj]), s
            sem = 1.0 if nearest is None or near_sim is None else 1.0 - max(0.0, min(1.0, near_sim))
        else:
            sem = 1.0
    # 3. keyword novelty = 1 - max Jaccard, over the semantic neighbours, the scope's recent
    #    memories (and the lexical candidates without an embedding), then the batch's kept items
    if any_memory:
        kw_best, kw_ref = None, None
        ti = toks[i]
        cands = ([c[0] for c in sem_cands] if v is not None else []) + list(it.get("kw_ids") or [])
        for cid in sorted(set(cands)):  # ties: the lower id (as the database's order by)
            s = _jaccard_len(ti, stored_toks.get(cid, frozenset()))
            if kw_best is None or s > kw_best:
                kw_best, kw_ref = s, Ref(id=cid)
        if mine:
            inter = shared[i, mine]
            union = sizes[i] + sizes[mine] - inter
            jac = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
            jj = int(np.argmax(jac))  # ties: the earliest
            if kw_best is None or float(jac[jj]) > kw_best:
                kw_best, kw_ref = float(jac[jj]), Ref(ord=mine[jj])
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
