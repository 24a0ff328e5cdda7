#!/usr/bin/env python
"""pgmem retrieval-quality evaluation: `make eval` (format and metrics: bench/EVAL.md).

One run:

  1. database: the embedded cluster (pgmem.cluster.default_cluster(): PGMEM_HOME/PGMEM_PORT),
     started if needed; database `pgmem_eval` dropped, recreated and migrated; tenant 'eval'.
  2. ingest: every conversation of the data set (DIR/conversations/*.jsonl, JSONL events in the
     examples/README.md format) through MemoryClient.remember_many: heuristic 5W1H extraction,
     the real MiniLM embedder, the surprise gate. Each event_id is then mapped to a memory:
     its own (memories.event_key), or, when the gate stored nothing for it, the memory it
     duplicates (history rows op 'duplicate'/'reject': after->>'event_key', memory_id).
  3. retrieval: each question (DIR/questions.json) with every method, scoped to the
     question's user(s), as of the question's time: lexical (tsvector + ts_rank), dense (exact
     cosine kNN), jam (pgmem.search), shadow (pgmem.activate, context 'query'), engram
     (pgmem.recall) and build_context when it exists.
  4. metrics (JAM's definitions): recall@k, precision@k, NDCG@k for k = 1, 5, 10, intra-list
     diversity of the top 10 on the memory embeddings, success@k, the newer-wins rate of
     questions with superseded events, and for questions without an answer the top score
     (and, for shadow, whether anything was activated); overall and per question type.
  5. bench/results/eval-<timestamp>.json, bench/results/eval-latest.json and a table.

    .venv/bin/python bench/eval.py                 # bench/data
    .venv/bin/python bench/eval.py --data DIR      # any data set in the same format
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

TENANT = "eval"
KS = (1, 5, 10)
K_FETCH = 100  # each method returns this many; metrics use the top 10, diagnostics the rest
TYPES = ("single-fact", "multi-hop", "temporal", "preference-update", "no-answer")
METHODS = ("lexical", "dense", "jam", "shadow", "engram", "build_context")
RESULTS = HERE / "results"
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# ================================================================================ data
def load_dataset(data: Path) -> tuple[dict, list]:
    """{conversation: [event, ...]} and the questions. Conversations: DIR/conversations/*.jsonl
    (or DIR/*.jsonl); questions: DIR/questions.json (or every DIR/questions/*.json)."""
    conv_dir = data / "conversations" if (data / "conversations").is_dir() else data
    convs = {}
    for f in sorted(conv_dir.glob("*.jsonl")):
        convs[f.stem] = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not convs:
        raise SystemExit(f"no conversations (*.jsonl) in {conv_dir}")
    qfiles = [data / "questions.json"] if (data / "questions.json").exists() else sorted((data / "questions").glob("*.json"))
    if not qfiles:
        raise SystemExit(f"no questions: expected {data / 'questions.json'} or {data / 'questions'}/*.json")
    questions = []
    for f in qfiles:
        questions += json.loads(f.read_text(encoding="utf-8"))
    events = {e["event_id"]: (name, e) for name, evs in convs.items() for e in evs}
    owners = defaultdict(set)
    for name, evs in convs.items():
        for e in evs:
            owners[e.get("user_id")].add(name)
    for u, names in owners.items():
        if len(names) > 1:
            log(f"warning: user {u!r} has events in several conversations ({', '.join(sorted(names))}): "
                "they share one memory scope")
    problems = []
    for q in questions:
        for f in ("id", "conversation", "type", "question", "user_id", "relevant"):
            if f not in q:
                problems.append(f"question {q.get('id')}: missing {f}")
        if q.get("type") not in TYPES:
            problems.append(f"question {q.get('id')}: type {q.get('type')!r} is not one of {', '.join(TYPES)}")
        if q.get("conversation") not in convs:
            problems.append(f"question {q.get('id')}: unknown conversation {q.get('conversation')!r}")
        for eid in list(q.get("relevant", {})) + list(q.get("superseded", [])):
            if eid not in events:
                problems.append(f"question {q.get('id')}: unknown event {eid}")
    if problems:
        raise SystemExit("invalid data set:\n  " + "\n  ".join(problems))
    return convs, questions


def default_as_of(events: list) -> str:
    """A question without as_of is asked one day after the last event of its conversation
    (not 'now': the recency signals would drift with the wall clock)."""
    last = max(datetime.fromisoformat(e["ts"].replace("Z", "+00:00")) for e in events)
    return (last + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


# ============================================================================ database
def setup_database(dbname: str) -> str:
    from pgmem import migrate
    from pgmem.cluster import default_cluster, save_state

    c = default_cluster()
    created = c.init()
    c.start()
    if created:
        save_state(c)
    c.wait_ready()
    with psycopg.connect(c.dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'drop database if exists "{dbname}" with (force)')
    c.ensure_database(dbname, tenant=TENANT)
    dsn = c.dsn(dbname)
    for w in migrate.upgrade(dsn):
        log(f"migrate: {w}")
    log(f"database {dbname} on port {c.port} ({c.home}), migrated")
    return dsn


def ingest(mem, convs: dict) -> dict:
    decisions = Counter()
    per_conv = {}
    t = time.perf_counter()
    for name, evs in convs.items():
        t1 = time.perf_counter()
        res = mem.remember_many(evs, batch_size=128, progress=False)
        c = Counter(r.decision for r in res)
        decisions.update(c)
        per_conv[name] = {"events": len(evs), **dict(c), "seconds": round(time.perf_counter() - t1, 2)}
        log(f"ingested {name}: {len(evs)} events {dict(c)}")
    return {"decisions": dict(decisions), "per_conversation": per_conv, "seconds": round(time.perf_counter() - t, 2)}


def map_events(conn, convs: dict) -> dict:
    """event_id -> (memory_id | None, how): 'stored' (its own memory), 'duplicate' (an exact
    duplicate: the memory it repeats), 'rejected' (surprise below the threshold: the nearest
    memory, which the gate judged it redundant with) or 'unmapped'. A memory that a merge job
    folded into another (state 'merged') is followed to the survivor ('+merged')."""
    info = {i: (st, into) for i, st, into in conn.execute(
        "select id, state, merged_into from pgmem.memories where tenant = %s", (TENANT,)).fetchall()}

    def survivor(mid):
        seen = set()
        while mid in info and info[mid][0] == "merged" and info[mid][1] and mid not in seen:
            seen.add(mid)
            mid = info[mid][1]
        return mid, bool(seen)

    out = {}
    found = [(k, i, "stored") for k, i in conn.execute(
        "select event_key, id from pgmem.memories where tenant = %s and event_key is not null", (TENANT,)).fetchall()]
    found += [(k, i, "duplicate" if op == "duplicate" else "rejected") for k, i, op in conn.execute(
        "select after->>'event_key', memory_id, op from pgmem.history where tenant = %s and op in ('duplicate', 'reject') "
        "and after ? 'event_key' order by id", (TENANT,)).fetchall()]
    for key, mid, how in found:
        if key and key not in out and mid is not None:
            mid, merged = survivor(mid)
            out[key] = (mid, how + ("+merged" if merged else ""))
    for evs in convs.values():
        for e in evs:
            out.setdefault(e["event_id"], (None, "unmapped"))
    return out


def build_context_proc(conn) -> str | None:
    r = conn.execute("select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace "
                     "where n.nspname = 'pgmem' and p.proname = 'build_context' limit 1").fetchone()
    return r[0] if r else None


# ========================================================================== embeddings
class CachedEmbedder:
    """The real embedder (pgmem.embedding.Embedder, MiniLM) behind a file cache keyed by model
    and text (bench/.cache/eval-embeddings.npz): a second run of the same data set skips the
    model (and its load) entirely. --no-cache turns it off; the vectors are the same."""

    def __init__(self, path: Path | None):
        from pgmem.embedding import DEFAULT_MODEL_NAME, Embedder, resolve_model

        self._inner = None
        self._make = Embedder
        self.path = path
        # the configured embedder's model (PGMEM_EMBEDDER: the int8 build by default) keys the cache
        # (issue 26): its name is known without loading it
        probe = Embedder()
        self.model_name = probe.model_name or DEFAULT_MODEL_NAME
        self._resolved = getattr(probe, "model_path", None) if probe.kind == "local" else self.model_name
        if self._resolved is None:
            self._resolved = resolve_model(None)
        self.cache: dict = {}
        self.hits = self.misses = 0
        self.used: set = set()
        self._dirty = False
        if path and path.exists():
            try:
                z = np.load(path, allow_pickle=False)
                if str(z["model"]) == self._resolved or str(z["model"]) == self.model_name:
                    self.cache = dict(zip((str(t) for t in z["texts"]), z["vectors"]))
            except (OSError, ValueError, KeyError):
                self.cache = {}

    @property
    def inner(self):
        if self._inner is None:
            self._inner = self._make()
            self.model_name = self._inner.model_name
        return self._inner

    def embed(self, text: str) -> np.ndarray:
        return self.embed_many([text])[0]

    def embed_many(self, texts, batch_size=None, show_progress=False) -> np.ndarray:
        texts = list(texts)
        self.used.update(texts)
        todo = sorted({t for t in texts if t not in self.cache})
        self.hits += len(texts) - sum(1 for t in texts if t in todo)
        if todo:
            self.misses += len(todo)
            for t, v in zip(todo, self.inner.embed_many(todo)):
                self.cache[t] = np.asarray(v, dtype=np.float32)
            self._dirty = True
        return np.vstack([self.cache[t] for t in texts])

    def save(self) -> None:
        """Write the vectors of this run's texts (older entries are dropped, so the file
        does not grow with every edit of the data set)."""
        if self.path and (self._dirty or set(self.cache) != self.used):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            texts = sorted(self.used)
            tmp = self.path.with_suffix(".tmp.npz")
            np.savez(tmp, model=np.array(self.model_name), texts=np.array(texts),
                     vectors=np.vstack([self.cache[t] for t in texts]))
            tmp.replace(self.path)


# ============================================================================= methods
def _users(q) -> list | None:
    """The question's scope: a list of user ids, or None (user_id null: the whole tenant)."""
    u = q.get("user_id")
    return None if u is None else u if isinstance(u, list) else [u]


def run_lexical(mem, conn, q, vec, as_of):
    rows = conn.execute("""
        select id, ts_rank(tsv, pgmem.query_tsquery(%(q)s), 1)::float8 as score from pgmem.memories
         where tenant = %(t)s and (%(u)s::text[] is null or user_id = any(%(u)s)) and state = 'active'
           and created_at <= %(as_of)s and tsv @@ pgmem.query_tsquery(%(q)s)
         order by score desc, id limit %(k)s""",
                        {"q": q["question"], "t": TENANT, "u": _users(q), "as_of": as_of, "k": K_FETCH}).fetchall()
    return [(r[0], r[1], {"ts_rank": r[1]}, {}) for r in rows]


def run_dense(mem, conn, q, vec, as_of):
    # exact kNN: the materialised CTE scores every eligible memory (no HNSW approximation)
    rows = conn.execute("""
        with d as materialized (
          select id, embedding <=> %(v)s as dist from pgmem.memories
           where tenant = %(t)s and (%(u)s::text[] is null or user_id = any(%(u)s)) and state = 'active'
             and created_at <= %(as_of)s and embedding is not null)
        select id, 1 - dist from d order by dist, id limit %(k)s""",
                        {"v": vec, "t": TENANT, "u": _users(q), "as_of": as_of, "k": K_FETCH}).fetchall()
    return [(r[0], float(r[1]), {"cosine": float(r[1])}, {}) for r in rows]


def _filters(q) -> dict:
    u = _users(q)
    return {} if u is None else {"user_id": u}


def run_jam(mem, conn, q, vec, as_of):
    hits = mem.search(q["question"], embedding=vec, k=K_FETCH, actor=q.get("actor"), location=q.get("location"),
                      filters=_filters(q), as_of=as_of, conn=conn)
    return [(h.id, h.score, h.signals, {}) for h in hits]


def run_shadow(mem, conn, q, vec, as_of):
    hits = mem.activate(q["question"], embedding=vec, context_type="query", k=K_FETCH, filters=_filters(q),
                        as_of=as_of, conn=conn)
    return [(h.id, h.score, h.signals, {"activated": bool(h.extra.get("activated")),
                                        "relevance_type": h.extra.get("relevance_type")}) for h in hits]


def run_engram(mem, conn, q, vec, as_of):
    hits = mem.recall(q["question"], embedding=vec, k=K_FETCH, filters=_filters(q), as_of=as_of, conn=conn)
    return [(h.id, h.score, h.signals, {}) for h in hits]


def run_build_context(mem, conn, q, vec, as_of):
    """pgmem.build_context with its defaults (candidates, token budget, λ) and the question's
    text, embedding, filters and as_of; the ranking is the order of the rows it returns (the
    packed context first, in MMR order, then the candidates left out). Written against the
    signature (query_text, query_embedding, ..., filters, as_of) and rows with id (or
    memory_id), score and selected; anything else is reported and the row skipped."""
    rows = mem.call("build_context", conn=conn, query_text=q["question"], query_embedding=vec,
                    filters=json.dumps(_filters(q)), as_of=as_of)
    out = []
    for r in rows:
        mid = r.get("id", r.get("memory_id"))
        if mid is not None:
            extra = {"selected": bool(r["selected"])} if "selected" in r else {}
            if r.get("token_count") is not None:
                extra["tokens"] = int(r["token_count"])
            sig = {k: float(r[k]) for k in ("mmr_score", "value") if r.get(k) is not None}
            out.append((mid, float(r.get("score") or 0.0), sig, extra))
    return out


RUNNERS = {"lexical": run_lexical, "dense": run_dense, "jam": run_jam, "shadow": run_shadow,
           "engram": run_engram, "build_context": run_build_context}


# ============================================================================= metrics
def dcg(grades) -> float:
    return sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(grades))


def ild(ids, emb: dict) -> float | None:
    """JAM intra-list diversity: mean pairwise 1 - cosine similarity of the memory embeddings."""
    vs = [emb[i] for i in ids if i in emb]
    if len(vs) < 2:
        return None
    m = np.vstack(vs)
    m = m / np.linalg.norm(m, axis=1, keepdims=True)
    sims = m @ m.T
    iu = np.triu_indices(len(vs), 1)
    return float(np.mean(1 - sims[iu]))


def question_metrics(qtype, ranked, grades: dict, superseded: set, emb: dict) -> dict:
    rel = {m for m, g in grades.items() if g > 0}
    answers = {m for m, g in grades.items() if g == 2}
    ideal = sorted(grades.values(), reverse=True)
    out = {}
    for k in KS:
        top = ranked[:k]
        hit = [m for m in top if m in rel]
        out[f"recall@{k}"] = len(hit) / len(rel)
        out[f"precision@{k}"] = len(hit) / k
        out[f"ndcg@{k}"] = dcg([grades.get(m, 0) for m in top]) / dcg(ideal[:k])
        got = answers & set(top)
        out[f"success@{k}"] = float(got == answers if qtype == "multi-hop" else bool(got))
    out["ild@10"] = ild(ranked[:10], emb)
    pos = {m: i + 1 for i, m in enumerate(ranked)}
    first = min((pos[m] for m in rel if m in pos), default=None)
    out["first_relevant_rank"] = first
    if superseded:
        r_new = min((pos[m] for m in answers if m in pos), default=None)
        r_old = min((pos[m] for m in superseded if m in pos), default=None)
        out["newer_rank"], out["older_rank"] = r_new, r_old
        out["newer_wins"] = float(r_new is not None and r_new <= 10 and (r_old is None or r_new < r_old))
        out["older_above_newer"] = float(r_old is not None and r_old <= 10 and (r_new is None or r_old < r_new))
    return out


def auroc(pos: list, neg: list) -> float | None:
    """P(top score of an answerable question > that of a question without an answer); ties 1/2."""
    if not pos or not neg:
        return None
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def best_threshold(pos: list, neg: list) -> tuple:
    """The score threshold that best separates answerable (score >= t) from unanswerable
    questions (score < t), by balanced accuracy: (threshold, balanced accuracy)."""
    if not pos or not neg:
        return None, None
    best = max(((sum(p >= t for p in pos) / len(pos) + sum(n < t for n in neg) / len(neg)) / 2, -t)
               for t in sorted(set(pos + neg)))
    return -best[1], best[0]


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


METRIC_KEYS = [f"{m}@{k}" for m in ("recall", "precision", "ndcg") for k in KS] + ["success@5", "success@10", "ild@10"]


def aggregate(rows: list) -> dict:
    """rows: [(question, result)] of one method over answerable questions."""
    out = {"n": len(rows)}
    for key in METRIC_KEYS:
        out[key] = mean([r["metrics"].get(key) for _, r in rows])
    nw = [r["metrics"]["newer_wins"] for _, r in rows if "newer_wins" in r["metrics"]]
    out["newer_wins"] = mean(nw)
    out["older_above_newer"] = mean([r["metrics"]["older_above_newer"] for _, r in rows if "older_above_newer" in r["metrics"]])
    out["n_superseded"] = len(nw)
    out["top_score"] = mean([r["top_score"] for _, r in rows])
    out["latency_ms"] = mean([r["ms"] for _, r in rows])
    return out


# ================================================================================ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=HERE / "data", help="data set directory (default bench/data)")
    ap.add_argument("--db", default="pgmem_eval", help="database to (re)create on the embedded cluster")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results directory (default bench/results)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--no-cache", action="store_true", help="compute every embedding with the model (no bench/.cache)")
    ap.add_argument("--failures", type=int, default=30, help="print up to N jam failures with their signals (0: none)")
    args = ap.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in RUNNERS:
            raise SystemExit(f"unknown method {m!r}: known are {', '.join(METHODS)}")

    convs, questions = load_dataset(args.data)
    log(f"data set {args.data}: {len(convs)} conversations, {sum(map(len, convs.values()))} events, {len(questions)} questions")
    dsn = setup_database(args.db)

    from pgmem import MemoryClient
    from pgmem.extraction import HeuristicExtractor

    embedder = CachedEmbedder(None if args.no_cache else HERE / ".cache" / "eval-embeddings.npz")
    mem = MemoryClient(dsn, tenant=TENANT, embedder=embedder, extractor=HeuristicExtractor())
    ing = ingest(mem, convs)

    conn = psycopg.connect(dsn, autocommit=True, options=f"-c pgmem.tenant={TENANT}")
    from pgvector.psycopg import register_vector

    register_vector(conn)
    mapping = map_events(conn, convs)
    how = Counter(h for _, h in mapping.values())
    log(f"event -> memory: {dict(how)}")
    emb = {i: np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32) for i, v in conn.execute(
        "select id, embedding from pgmem.memories where tenant = %s and embedding is not null", (TENANT,)).fetchall()}
    mem_events = defaultdict(list)
    for eid, (mid, _) in mapping.items():
        if mid is not None:
            mem_events[mid].append(eid)
    contents = dict(conn.execute("select id, content from pgmem.memories where tenant = %s", (TENANT,)).fetchall())

    bc_proc = build_context_proc(conn)
    notes = {}
    if "build_context" in methods and bc_proc is None:
        methods.remove("build_context")
        notes["build_context"] = "skipped: pgmem.build_context does not exist yet (no such function in pg_proc)"
        log(notes["build_context"])
    elif bc_proc and "build_context" in methods:
        notes["build_context"] = (f"found {bc_proc}; called with query_text, query_embedding, filters, as_of and its "
                                  "defaults (50 candidates, lambda 0.5, budget 8192-512-1024); ranking = the rows in the "
                                  "order returned (packed context first)")

    # labels: events -> memories (grade = the highest grade of the events a memory stands for)
    conv_as_of = {name: default_as_of(evs) for name, evs in convs.items()}
    label_notes = []
    for q in questions:
        grades = {}
        for eid, g in q["relevant"].items():
            mid, h = mapping[eid]
            if mid is None:
                label_notes.append(f"{q['id']}: relevant {eid} has no memory ({h})")
                continue
            if h != "stored":
                label_notes.append(f"{q['id']}: relevant {eid} -> memory {mid} ({h})")
            grades[mid] = max(grades.get(mid, 0), int(g))
        sup = set()
        for eid in q.get("superseded", []):
            mid, h = mapping[eid]
            if mid is None:
                continue
            if mid in grades:
                # the gate folded a newer event into the memory of an older one (or the other way
                # round): the memory holds the text of the event that created it, so it counts as
                # superseded when that event is the superseded one, else as relevant
                if h == "stored":
                    del grades[mid]
                    label_notes.append(f"{q['id']}: memory {mid} stands for superseded {eid} and for a relevant "
                                       "event the gate did not store: counted as superseded")
                else:
                    label_notes.append(f"{q['id']}: superseded {eid} was folded into relevant memory {mid}: counted as relevant")
                    continue
            sup.add(mid)
        q["_grades"], q["_superseded"] = grades, sup
        q["_as_of"] = q.get("as_of") or conv_as_of[q["conversation"]]
        if q["type"] != "no-answer" and not grades:
            label_notes.append(f"{q['id']}: no relevant memory left after mapping: left out of the metrics")
    for n in label_notes:
        log("label: " + n)

    vecs = embedder.embed_many([q["question"] for q in questions])
    embedder.save()
    log(f"embedded {len(questions)} questions (embeddings: {embedder.misses} computed with {embedder.model_name}, "
        f"{embedder.hits} from the cache); running {', '.join(methods)}")

    per_q = []
    for q, vec in zip(questions, vecs):
        vec = np.asarray(vec, dtype=np.float32)
        rec = {"id": q["id"], "conversation": q["conversation"], "type": q["type"], "question": q["question"],
               "user_id": q["user_id"], "as_of": q["_as_of"],
               "relevant_memories": {str(m): g for m, g in q["_grades"].items()},
               "superseded_memories": sorted(q["_superseded"]), "results": {}}
        for m in methods:
            t = time.perf_counter()
            try:
                hits = RUNNERS[m](mem, conn, q, vec, q["_as_of"])
            except Exception as e:  # build_context of unknown shape: note it, skip the row
                if m != "build_context":
                    raise
                notes["build_context"] = f"skipped: {bc_proc} failed: {type(e).__name__}: {str(e).splitlines()[0]}"
                methods.remove(m)
                log(notes["build_context"])
                continue
            ms = (time.perf_counter() - t) * 1000
            ranked = [h[0] for h in hits]
            r = {"ms": round(ms, 2), "top_score": hits[0][1] if hits else 0.0,
                 "top": [{"id": h[0], "score": round(h[1], 6), "events": mem_events.get(h[0], []),
                          "signals": {k: round(v, 6) for k, v in h[2].items()}, **h[3],
                          "content": (contents.get(h[0]) or "")[:160]} for h in hits[:10]]}
            if m == "shadow":
                r["activated_any"] = any(h[3].get("activated") for h in hits)
                r["activated_relevant"] = any(h[3].get("activated") for h in hits if h[0] in q["_grades"])
            if m == "build_context":
                r["packed"] = sum(1 for h in hits if h[3].get("selected"))
                r["packed_tokens"] = sum(h[3].get("tokens") or 0 for h in hits if h[3].get("selected"))
                r["packed_relevant"] = sum(1 for h in hits if h[3].get("selected") and h[0] in q["_grades"])
            if q["type"] != "no-answer" and q["_grades"]:
                r["metrics"] = question_metrics(q["type"], ranked, q["_grades"], q["_superseded"], emb)
                pos = {h[0]: (i + 1, h) for i, h in enumerate(hits)}
                r["relevant_ranks"] = {str(mid): ({"rank": pos[mid][0], "score": round(pos[mid][1][1], 6),
                                                  "signals": {k: round(v, 6) for k, v in pos[mid][1][2].items()}}
                                                 if mid in pos else None) for mid in q["_grades"]}
            rec["results"][m] = r
        per_q.append(rec)
    log("retrieval done")

    # exact ranks and signals of the answers jam missed (pgmem.search_exact over every memory)
    failures = []
    if "jam" in methods:
        for q, rec, vec in zip(questions, per_q, vecs):
            r = rec["results"]["jam"]
            if "metrics" not in r or r["metrics"]["success@10"] == 1.0:
                continue
            ex = mem.search_exact(q["question"], embedding=np.asarray(vec, dtype=np.float32), k=1000,
                                  filters=_filters(q), as_of=q["_as_of"], conn=conn)
            pos = {h.id: (i + 1, h) for i, h in enumerate(ex)}
            r["exact"] = {
                "top1": {"id": ex[0].id, "signals": {k: round(v, 4) for k, v in ex[0].signals.items()}} if ex else None,
                "answers": {str(mid): ({"rank": pos[mid][0], "signals": {k: round(v, 4) for k, v in pos[mid][1].signals.items()}}
                                       if mid in pos else None)
                            for mid, g in q["_grades"].items() if g == 2}}
            failures.append((q, r))

    # ------------------------------------------------------------------ aggregate
    answerable = [(q, rec) for q, rec in zip(questions, per_q) if q["type"] != "no-answer" and q["_grades"]]
    noans = [(q, rec) for q, rec in zip(questions, per_q) if q["type"] == "no-answer"]
    overall, by_type, no_answer = {}, {t: {} for t in TYPES}, {}
    for m in methods:
        overall[m] = aggregate([(q, rec["results"][m]) for q, rec in answerable])
        for t in TYPES[:-1]:
            by_type[t][m] = aggregate([(q, rec["results"][m]) for q, rec in answerable if q["type"] == t])
        pos_s = [rec["results"][m]["top_score"] for _, rec in answerable]
        neg_s = [rec["results"][m]["top_score"] for _, rec in noans]
        no_answer[m] = {"n": len(noans), "top_score_no_answer": mean(neg_s), "top_score_answerable": mean(pos_s),
                        "max_top_score_no_answer": max(neg_s) if neg_s else None, "auroc": auroc(pos_s, neg_s)}
        no_answer[m]["best_threshold"], no_answer[m]["balanced_accuracy"] = best_threshold(pos_s, neg_s)
        if m == "shadow":
            no_answer[m]["false_activation_rate"] = mean([float(rec["results"][m]["activated_any"]) for _, rec in noans])
            no_answer[m]["activation_rate_answerable"] = mean([float(rec["results"][m]["activated_any"]) for _, rec in answerable])
            no_answer[m]["relevant_activated_rate"] = mean([float(rec["results"][m]["activated_relevant"]) for _, rec in answerable])
        if m == "build_context":
            no_answer[m]["packed_no_answer"] = mean([rec["results"][m]["packed"] for _, rec in noans])
            no_answer[m]["packed_answerable"] = mean([rec["results"][m]["packed"] for _, rec in answerable])
            no_answer[m]["packed_tokens_answerable"] = mean([rec["results"][m]["packed_tokens"] for _, rec in answerable])
            no_answer[m]["relevant_packed_recall"] = mean([rec["results"][m]["packed_relevant"] / len(q["_grades"])
                                                           for q, rec in answerable])
        by_type["no-answer"][m] = no_answer[m]

    for m in METHODS:
        if m not in methods and m not in notes:
            notes[m] = "not requested (--methods)"

    profiles = {r["name"]: {"method": r["method"], "weights": r["weights"], "params": r["params"]} for r in
                conn.cursor(row_factory=dict_row).execute(
                    "select name, method, weights, params from pgmem.profiles where tenant = '*' order by name").fetchall()}
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "sql"], capture_output=True,
                                    text=True).stdout.strip())
    except OSError:
        commit, dirty = None, None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    R = {
        "kind": "pgmem-eval", "timestamp": stamp, "git_commit": commit, "sql_dirty": dirty, "data": str(args.data),
        "database": args.db, "tenant": TENANT, "embedding_model": embedder.model_name,
        "embeddings": {"computed": embedder.misses, "from_cache": embedder.hits}, "extractor": "heuristic",
        "k": list(KS), "k_fetch": K_FETCH,
        "dataset": {"conversations": {n: len(e) for n, e in convs.items()}, "questions": len(questions),
                    "per_type": dict(Counter(q["type"] for q in questions)), "default_as_of": conv_as_of},
        "ingest": ing, "event_mapping": dict(how), "label_notes": label_notes,
        "methods": {m: ({"ran": True} if m in methods else {"ran": False}) | ({"note": notes[m]} if m in notes else {})
                    for m in METHODS},
        "profiles": profiles, "overall": overall, "by_type": by_type, "no_answer": no_answer,
        "wall_s": round(time.perf_counter() - T0, 1), "questions": per_q,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(R, indent=1, default=str, ensure_ascii=False) + "\n"
    (args.out / f"eval-{stamp}.json").write_text(text, encoding="utf-8")
    (args.out / "eval-latest.json").write_text(text, encoding="utf-8")
    conn.close()
    mem.close()

    print(report(R, methods, notes))
    if args.failures and failures:
        print(failure_report(failures, contents, args.failures))
    print(f"\nwall time {R['wall_s']:.0f} s; results in {args.out / ('eval-' + stamp + '.json')} (and eval-latest.json)")
    return 0


# ============================================================================== report
def _f(v, w=6, p=3):
    return f"{'-':>{w}}" if v is None else f"{v:>{w}.{p}f}"


def metric_table(rows: dict, methods: list, title: str) -> list:
    head = (f"{'method':<14}{'n':>4} " + "".join(f"{c:>7}" for c in
            ("R@1", "R@5", "R@10", "P@1", "P@5", "P@10", "N@1", "N@5", "N@10", "S@10", "ILD10", "newer")))
    out = [f"\n{title}", head, "-" * len(head)]
    for m in methods:
        a = rows.get(m)
        if not a:
            continue
        vals = [a[f"recall@{k}"] for k in KS] + [a[f"precision@{k}"] for k in KS] + [a[f"ndcg@{k}"] for k in KS] + \
               [a["success@10"], a["ild@10"], a["newer_wins"]]
        out.append(f"{m:<14}{a['n']:>4} " + "".join(_f(v, 7) for v in vals))
    return out


def report(R: dict, methods: list, notes: dict) -> str:
    ds = R["dataset"]
    L = [f"\npgmem eval: {sum(ds['conversations'].values())} events in {len(ds['conversations'])} conversations "
         "(" + ", ".join(f"{k} {v}" for k, v in ds["conversations"].items()) + f"), {ds['questions']} questions "
         "(" + ", ".join(f"{t} {ds['per_type'].get(t, 0)}" for t in TYPES) + ")",
         f"ingest {R['ingest']['seconds']} s: {R['ingest']['decisions']}; event -> memory: {R['event_mapping']}",
         "R = recall, P = precision, N = NDCG (JAM gains (2^g-1)/log2(i+2), ideal over all labels), S@10 = every needed answer "
         "in the top 10, ILD10 = intra-list diversity of the top 10, newer = newer-wins rate (questions with superseded events)"]
    L += metric_table(R["overall"], methods, "ALL ANSWERABLE QUESTIONS")
    for t in TYPES[:-1]:
        L += metric_table(R["by_type"][t], methods, f"type {t}")
    head = (f"{'method':<14}{'top score: no-answer':>22}{'answerable':>12}{'max no-ans':>12}{'AUROC':>8}{'best thr.':>11}"
            f"{'bal. acc.':>11}{'false act.':>12}{'act. (ans.)':>12}")
    L += [f"\nNO-ANSWER QUESTIONS ({R['no_answer'][methods[0]]['n'] if methods else 0}): the right behaviour is a low top score "
          "(AUROC: how well the top score separates answerable from unanswerable questions)", head, "-" * len(head)]
    for m in methods:
        a = R["no_answer"][m]
        L.append(f"{m:<14}{_f(a['top_score_no_answer'], 22)}{_f(a['top_score_answerable'], 12)}{_f(a['max_top_score_no_answer'], 12)}"
                 f"{_f(a['auroc'], 8)}{_f(a['best_threshold'], 11)}{_f(a['balanced_accuracy'], 11)}"
                 f"{_f(a.get('false_activation_rate'), 12)}{_f(a.get('activation_rate_answerable'), 12)}")
    L.append("(scores are on each method's own scale: ts_rank for lexical, cosine for dense, the fused score for the profiles;"
             " best thr. = the top-score threshold that best separates the two groups, bal. acc. = its balanced accuracy;"
             " false act. = something activated for a question without an answer, act. (ans.) = the same for answerable ones)")
    if "build_context" in R["no_answer"]:
        a = R["no_answer"]["build_context"]
        L.append(f"build_context packs {a['packed_answerable']:.1f} memories ({a['packed_tokens_answerable']:.0f} tokens) per "
                 f"answerable question, {a['relevant_packed_recall']:.3f} of the relevant ones; {a['packed_no_answer']:.1f} "
                 "memories for questions without an answer")
    lat = "  ".join(f"{m} {R['overall'][m]['latency_ms']:.1f}" for m in methods)
    L.append(f"\nmean latency per question, ms (k={K_FETCH}, one client): {lat}")
    for m, n in notes.items():
        L.append(f"note: {m}: {n}")
    return "\n".join(L)


def failure_report(failures: list, contents: dict, limit: int) -> str:
    L = [f"\nJAM FAILURES (not every needed answer in the top 10): {len(failures)}; per-signal scores from pgmem.search_exact "
         "(sem = semantic, lex = lexical, rec = recency)"]
    for q, r in failures[:limit]:
        ex = r.get("exact") or {}
        t1 = ex.get("top1") or {}
        s = t1.get("signals", {})
        L.append(f"- {q['id']} ({q['type']}) {q['question']!r}")
        L.append(f"    top1 #{t1.get('id')}: sem {s.get('semantic', 0):.3f} lex {s.get('lexical', 0):.3f} rec {s.get('recency', 0):.3f}"
                 f"  {(contents.get(t1.get('id')) or '')[:70]!r}")
        for mid, a in (ex.get("answers") or {}).items():
            if a is None:
                L.append(f"    answer #{mid}: not eligible")
                continue
            s = a["signals"]
            L.append(f"    answer #{mid} rank {a['rank']}: sem {s.get('semantic', 0):.3f} lex {s.get('lexical', 0):.3f} "
                     f"rec {s.get('recency', 0):.3f}  {(contents.get(int(mid)) or '')[:70]!r}")
    if len(failures) > limit:
        L.append(f"  ... {len(failures) - limit} more in the JSON (questions[].results.jam.exact)")
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
