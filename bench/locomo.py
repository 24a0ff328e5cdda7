#!/usr/bin/env python
"""LoCoMo turn-level evidence recall for pgmem's rankings and two baselines (`make eval LOCOMO=...`).

LoCoMo (Maharana et al., ACL 2024, CC BY-NC 4.0) is read from the file the user gives; no part
of it is written into the repository, and the results JSON holds only ids and figures.

One run (details and options: bench/EVAL.md, section "LoCoMo"):

  1. database `pgmem_locomo` on the embedded cluster (PGMEM_HOME/PGMEM_PORT), dropped, recreated
     and migrated (--reuse keeps a loaded one); each conversation in its own tenant
     `locomo-<sample_id>`.
  2. ingest through the public client, MemoryClient.remember_many (heuristic 5W1H, MiniLM, the
     surprise gate): one memory per turn, speaker as who, the session's date-time as when
     (happened_at) and as the event's ts, a shared photo's caption appended as
     "[shares <caption>]", session id `<sample_id>:session_<n>`, event_key `<sample_id>:<dia_id>`,
     dia_id and session in metadata. A turn the gate did not store stands for the memory it
     was found redundant with (history 'duplicate'/'reject' rows), as in bench/eval.py.
  3. every question of categories 1-4 (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)
     with at least one evidence id naming a turn, through every ranking: pgmem `search`,
     `activate`, `recall`, `build_context` (rows in the order returned) and any
     `sql:<function>` given on the command line; the baselines bm25 (rank_bm25 over
     "speaker: text"), minilm (cosine of all-MiniLM-L6-v2 over "speaker: text") and hybrid
     (0.7 minilm + 0.3 max-normalised bm25), computed on the same turns in the same run.
  4. recall@1/5/10/20 per category: |evidence ∩ top-k turns| / |evidence|, averaged over the
     questions; bench/results/locomo-<timestamp>.json and locomo-latest.json.

    .venv/bin/python bench/locomo.py --data ../shared/eval/locomo-dev.json
    .venv/bin/python bench/locomo.py --rankings search,hybrid --conv conv-26 --questions 0:40 --reuse
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The pgmem measured (its client and the SQL it migrates) is this checkout's, unless PYTHONPATH
# names one: `PYTHONPATH=/other/checkout/python bench/locomo.py` measures another branch.
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

KS = (1, 5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
RESULTS = HERE / "results"
CACHE = HERE / ".cache" / "locomo-embeddings.npz"
DB = "pgmem_locomo"
TENANT_PREFIX = "locomo-"
# where `make eval` looks for the dev half when LOCOMO is not given (relative to the repository)
DEFAULT_DATA = ("../shared/eval/locomo-dev.json", "../../shared/eval/locomo-dev.json")
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# ======================================================================= the data (pure)
@dataclass
class Turn:
    dia_id: str
    session: int
    index: int  # position in the conversation (0-based, in session order)
    speaker: str
    text: str  # the stored text: the turn, plus "[shares <caption>]" for a shared photo
    when: datetime


@dataclass
class Question:
    index: int  # position in the conversation's qa list: the question's id with the sample id
    category: int
    question: str
    evidence: list[str]  # valid dia_ids, in the file's order, without repeats
    dropped: list[str] = field(default_factory=list)  # evidence strings that name no turn


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]  # categories 1-4 with at least one valid evidence id

    @property
    def tenant(self) -> str:
        return TENANT_PREFIX + self.sample_id


_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")


def parse_session_time(text: str) -> datetime:
    """A LoCoMo session date-time ("1:56 pm on 8 May, 2023") as an aware UTC datetime."""
    s = " ".join(text.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(s, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date-time {text!r} (expected like '1:56 pm on 8 May, 2023')")


def turn_text(turn: dict) -> str:
    """The text stored for a turn: a shared photo's caption is appended as LoCoMo's own code does
    ("[shares a photo of ...]": the captions begin with "a photo of")."""
    text = (turn.get("text") or "").strip()
    cap = (turn.get("blip_caption") or "").strip()
    return f"{text} [shares {cap}]" if cap else text


_EVIDENCE_SPLIT = re.compile(r"[,;\s]+")


def parse_evidence(raw, known) -> tuple[list[str], list[str]]:
    """Evidence ids of a question: split on ',', ';' and white space (some entries join ids, e.g.
    "D8:6; D9:17"), keep those naming a turn of the conversation (``known``), in order and without
    repeats; return (valid, dropped). Malformed ids ("D:11:26", "D") are dropped, not guessed."""
    items = raw if isinstance(raw, (list, tuple)) else [raw]
    valid, dropped = [], []
    for item in items:
        for tok in _EVIDENCE_SPLIT.split(str(item)):
            if not tok:
                continue
            if tok in known:
                if tok not in valid:
                    valid.append(tok)
            else:
                dropped.append(tok)
    return valid, dropped


def _session_numbers(conv: dict) -> list[int]:
    return sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))


def parse_conversation(sample: dict) -> Conversation:
    conv = sample["conversation"]
    turns: list[Turn] = []
    for n in _session_numbers(conv):
        when = parse_session_time(conv[f"session_{n}_date_time"])
        for t in conv[f"session_{n}"]:
            turns.append(Turn(dia_id=t["dia_id"], session=n, index=len(turns), speaker=t["speaker"],
                              text=turn_text(t), when=when))
    known = {t.dia_id for t in turns}
    questions = []
    for i, qa in enumerate(sample.get("qa", [])):
        cat = qa.get("category")
        if cat not in CATEGORIES:
            continue
        ev, dropped = parse_evidence(qa.get("evidence") or [], known)
        if ev:
            questions.append(Question(index=i, category=cat, question=qa["question"], evidence=ev, dropped=dropped))
    return Conversation(sample_id=sample["sample_id"], speakers=(conv.get("speaker_a"), conv.get("speaker_b")),
                        turns=turns, questions=questions)


def load_locomo(path: Path) -> list[Conversation]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = [data]
    return [parse_conversation(s) for s in data]


# ===================================================================== the metric (pure)
def recall_at(ranked: list, evidence: list, k: int, key_of: Callable | None = None) -> float:
    """Turn-level evidence recall@k: the share of the evidence turns whose key is among the first
    k keys of ``ranked``. ``key_of`` maps an evidence turn to the key the ranking returns (a memory
    id for pgmem: two turns the gate folded into one memory are both found by that memory);
    identity when None."""
    top = set(ranked[:k])
    keys = [key_of(e) if key_of else e for e in evidence]
    return sum(1 for x in keys if x is not None and x in top) / len(evidence)


def evidence_ranks(ranked: list, evidence: list, key_of: Callable | None = None) -> dict:
    """{dia_id: 1-based rank of its key in ``ranked``, or None when absent}."""
    pos = {}
    for i, x in enumerate(ranked):
        pos.setdefault(x, i + 1)
    return {e: pos.get(key_of(e) if key_of else e) for e in evidence}


def recall_from_ranks(ranks: dict, k: int) -> float:
    return sum(1 for r in ranks.values() if r is not None and r <= k) / len(ranks)


def summarize(rows: list[dict], ks=KS) -> dict:
    """rows: [{"category": c, "ranks": {dia_id: rank|None}}] -> {"all"|category name: {n, R@k...}}."""
    groups = defaultdict(list)
    for r in rows:
        groups["all"].append(r)
        groups[CATEGORIES[r["category"]]].append(r)
    out = {}
    for g in ["all", *CATEGORIES.values()]:
        rs = groups.get(g, [])
        out[g] = {"n": len(rs), **{f"R@{k}": (sum(recall_from_ranks(r["ranks"], k) for r in rs) / len(rs) if rs else None)
                                  for k in ks}}
        if rs and "ctx_n" in rs[0]:  # a loop ranking (context_for): the whole context, and echo
            out[g]["R@ctx"] = sum(recall_from_ranks(r["ranks"], r["ctx_n"]) for r in rs) / len(rs)
            out[g]["mean_ctx"] = sum(r["ctx_n"] for r in rs) / len(rs)
            out[g]["echo@5"] = sum(1 for r in rs if r["echo5"]) / len(rs)
    return out


# ====================================================================== lexical baseline
_TOKEN = re.compile(r"\w+")


def bm25_tokens(text: str) -> list[str]:
    """The baseline's tokens: lower-cased word characters (no stemming, no stop list)."""
    return _TOKEN.findall(text.lower())


def baseline_text(turn: Turn) -> str:
    return f"{turn.speaker}: {turn.text}"


# ========================================================================= embeddings
def make_embedder(path: Path | None):
    """bench/eval.py's CachedEmbedder (the real MiniLM behind a file cache keyed by text), keeping
    every cached vector on save: a run over one conversation must not evict the others."""
    sys.path.insert(0, str(HERE))
    from eval import CachedEmbedder  # noqa: E402

    class KeepAllEmbedder(CachedEmbedder):
        def save(self) -> None:
            if self.path and self._dirty:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                texts = sorted(self.cache)
                tmp = self.path.with_suffix(".tmp.npz")
                np.savez(tmp, model=np.array(self.model_name), texts=np.array(texts),
                         vectors=np.vstack([self.cache[t] for t in texts]))
                tmp.replace(self.path)
                self._dirty = False

    return KeepAllEmbedder(path)


# =========================================================================== database
def setup_database(dbname: str, reuse: bool) -> tuple[str, bool]:
    """(dsn, fresh): the database on the embedded cluster, dropped and migrated unless --reuse
    finds it already there."""
    import psycopg

    from pgmem import migrate
    from pgmem.cluster import default_cluster, save_state

    c = default_cluster()
    created = c.init()
    c.start()
    if created:
        save_state(c)
    c.wait_ready()
    with psycopg.connect(c.dsn("postgres"), autocommit=True) as conn:
        exists = conn.execute("select 1 from pg_database where datname = %s", (dbname,)).fetchone()
        if exists and reuse:
            log(f"database {dbname} on port {c.port}: reused (--reuse)")
            dsn = c.dsn(dbname)
            for w in migrate.upgrade(dsn):
                log(f"migrate: {w}")
            return dsn, False
        conn.execute(f'drop database if exists "{dbname}" with (force)')
    c.ensure_database(dbname, tenant=None)
    dsn = c.dsn(dbname)
    for w in migrate.upgrade(dsn):
        log(f"migrate: {w}")
    log(f"database {dbname} on port {c.port} ({c.home}), migrated")
    return dsn, True


def turn_events(conv: Conversation) -> list[dict]:
    """The events remember_many stores for a conversation (the examples/README.md event format)."""
    return [{"content": t.text, "who": t.speaker, "when": t.when.isoformat(), "ts": t.when.isoformat(),
             "session_id": f"{conv.sample_id}:session_{t.session}", "event_id": f"{conv.sample_id}:{t.dia_id}",
             "metadata": {"locomo": conv.sample_id, "dia_id": t.dia_id, "session": t.session}} for t in conv.turns]


def ingest(mem_for, conv: Conversation) -> dict:
    t = time.perf_counter()
    mem = mem_for(conv)
    res = mem.remember_many(turn_events(conv), batch_size=128, progress=False)
    c = Counter(r.decision for r in res)
    out = {"turns": len(conv.turns), **dict(c), "seconds": round(time.perf_counter() - t, 2)}
    log(f"ingested {conv.sample_id}: {len(conv.turns)} turns {dict(c)} in {out['seconds']} s")
    return out


def turn_memory_map(conn, conv: Conversation) -> dict:
    """dia_id -> memory id: the turn's own memory (event_key), else the memory the gate found it
    a duplicate of or redundant with (history 'duplicate'/'reject'), followed along merged_into."""
    tenant = conv.tenant
    info = {i: (st, into) for i, st, into in conn.execute(
        "select id, state, merged_into from pgmem.memories where tenant = %s", (tenant,)).fetchall()}
    found = list(conn.execute("select event_key, id from pgmem.memories where tenant = %s and event_key is not null",
                              (tenant,)).fetchall())
    found += list(conn.execute(
        "select after->>'event_key', memory_id from pgmem.history where tenant = %s and op in ('duplicate', 'reject') "
        "and after ? 'event_key' order by id", (tenant,)).fetchall())
    prefix = conv.sample_id + ":"
    out = {}
    for key, mid in found:
        if not key or not key.startswith(prefix) or mid is None:
            continue
        seen = set()
        while mid in info and info[mid][0] == "merged" and info[mid][1] and mid not in seen:
            seen.add(mid)
            mid = info[mid][1]
        out.setdefault(key[len(prefix):], mid)
    return out


# =========================================================================== rankings
@dataclass
class Ctx:
    """What a ranking sees for one conversation."""
    conv: Conversation
    k: int
    as_of: datetime | None = None
    mem: object = None  # MemoryClient in the conversation's tenant
    conn: object = None
    qvec: dict = field(default_factory=dict)  # question index -> embedding
    baseline: dict = field(default_factory=dict)  # bm25 / turn vectors of the conversation
    notes: dict = field(default_factory=dict)


@dataclass
class Ranking:
    name: str
    kind: str  # "pgmem" (ranked memory ids) or "baseline" (ranked dia_ids)
    fn: Callable  # (ctx, question) -> ranked keys
    help: str
    # a loop: the questions are asked in order in one chat, each stored as it goes, inside one
    # transaction per conversation that is rolled back at its end (the loaded turns stay as
    # they were for the other rankings and for --reuse)
    loop: bool = False


RANKINGS: dict[str, Ranking] = {}


def ranking(name: str, kind: str, help: str, loop: bool = False):
    """Register a ranking. A pgmem ranking returns memory ids (best first), a baseline dia_ids.
    To measure a new pgmem function, either register it here or pass `sql:<function>`."""
    def deco(fn):
        RANKINGS[name] = Ranking(name, kind, fn, help, loop)
        return fn
    return deco


# pgmem's rankings are called as a user calls them: with the question's text only, so that the
# client embeds the query its own way (through the cached embedder: the same MiniLM vectors).
@ranking("search", "pgmem", "MemoryClient.search: the default profile (JAM fused)")
def rank_search(ctx: Ctx, q: Question) -> list:
    return [h.id for h in ctx.mem.search(q.question, k=ctx.k, as_of=ctx.as_of, conn=ctx.conn)]


@ranking("activate", "pgmem", "MemoryClient.activate, context_type 'query' (Shadow activation score)")
def rank_activate(ctx: Ctx, q: Question) -> list:
    return [h.id for h in ctx.mem.activate(q.question, context_type="query", k=ctx.k, as_of=ctx.as_of, conn=ctx.conn)]


@ranking("recall", "pgmem", "MemoryClient.recall (Engram score)")
def rank_recall(ctx: Ctx, q: Question) -> list:
    return [h.id for h in ctx.mem.recall(q.question, k=ctx.k, as_of=ctx.as_of, conn=ctx.conn)]


@ranking("build_context", "pgmem", "MemoryClient.build_context with its defaults: the packed rows first, then the rest")
def rank_build_context(ctx: Ctx, q: Question) -> list:
    rows = ctx.mem.build_context(q.question, as_of=ctx.as_of, conn=ctx.conn)
    return _ids_of_rows(rows)


LOOP_CONVERSATION = "locomo-loop-"


@ranking("context_for", "pgmem",
         "MemoryClient.context_for as an agent calls it (the web chat, MCP context, pgmem context): the "
         "questions asked in order in one chat, each message stored as it goes; ranked = the memories the "
         "context carries, in its order (R@ctx: all of them; echo@5: a message the loop stored in the top 5)",
         loop=True)
def rank_context_for(ctx: Ctx, q: Question) -> list:
    res = ctx.mem.context_for(q.question, conversation_id=LOOP_CONVERSATION + ctx.conv.sample_id, conn=ctx.conn)
    doc = res.doc if hasattr(res, "doc") else res
    mem = (doc.get("memory") or {})
    if mem.get("id") is not None:
        ctx.notes.setdefault("loop_ids", set()).add(int(mem["id"]))
    ids = [int(m["id"]) for m in ((doc.get("context") or {}).get("memories") or [])]
    ctx.notes["last_intent"] = doc.get("intent")
    return ids


def _ids_of_rows(rows) -> list:
    """Memory ids from a function's rows: an `id` or `memory_id` column; or one json(b) value that
    holds a list of objects with one of them (e.g. a reconstruction's members)."""
    out = []
    for r in rows:
        mid = r.get("id", r.get("memory_id"))
        if mid is not None:
            out.append(int(mid))
            continue
        for v in r.values():
            if isinstance(v, dict):
                v = next((v[k] for k in ("members", "memories", "strand", "items") if isinstance(v.get(k), list)), None)
            if isinstance(v, list):
                out += [int(x.get("id", x.get("memory_id"))) for x in v
                        if isinstance(x, dict) and x.get("id", x.get("memory_id")) is not None]
    return list(dict.fromkeys(out))


def sql_ranking(fn: str) -> Ranking:
    """`sql:<function>`: pgmem.<function>(query_text, query_embedding, k, as_of), ranked in the
    order of its rows (see _ids_of_rows). Arguments it does not take are left out."""
    def run(ctx: Ctx, q: Question) -> list:
        params = _proc_params(ctx.conn, fn)
        if params is None:
            raise LookupError(f"pgmem.{fn} does not exist in this database")
        # a SQL function gets the embedding of the question's text (the client is not involved)
        args = {"query_text": q.question, "query_embedding": ctx.qvec[q.index], "k": ctx.k, "as_of": ctx.as_of}
        args = {a: v for a, v in args.items() if a in params and v is not None}
        return _ids_of_rows(ctx.mem.call(fn, conn=ctx.conn, **args))
    return Ranking(f"sql:{fn}", "pgmem", run, f"pgmem.{fn}(query_text, query_embedding, k, as_of)")


_PROC_CACHE: dict = {}


def _proc_params(conn, fn: str):
    if fn not in _PROC_CACHE:
        r = conn.execute("select p.proargnames from pg_proc p join pg_namespace n on n.oid = p.pronamespace "
                         "where n.nspname = 'pgmem' and p.proname = %s order by p.pronargs desc limit 1", (fn,)).fetchone()
        _PROC_CACHE[fn] = None if r is None else set(r[0] or [])
    return _PROC_CACHE[fn]


@ranking("bm25", "baseline", "rank_bm25 (Okapi, k1 1.5, b .75) over 'speaker: text', lower-cased \\w+ tokens")
def rank_bm25(ctx: Ctx, q: Question) -> list:
    s = ctx.baseline["bm25"].get_scores(bm25_tokens(q.question))
    return _top(ctx, s)


@ranking("minilm", "baseline", "cosine of all-MiniLM-L6-v2 embeddings of 'speaker: text'")
def rank_minilm(ctx: Ctx, q: Question) -> list:
    return _top(ctx, ctx.baseline["vecs"] @ _unit(ctx.qvec[q.index]))


@ranking("hybrid", "baseline", "0.7 minilm cosine + 0.3 bm25 / max bm25 over the conversation's turns")
def rank_hybrid(ctx: Ctx, q: Question) -> list:
    b = np.asarray(ctx.baseline["bm25"].get_scores(bm25_tokens(q.question)))
    b = b / b.max() if b.max() > 0 else b
    return _top(ctx, 0.7 * (ctx.baseline["vecs"] @ _unit(ctx.qvec[q.index])) + 0.3 * b)


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / (np.linalg.norm(v) or 1.0)


def _top(ctx: Ctx, scores) -> list:
    order = np.argsort(-np.asarray(scores), kind="stable")[:ctx.k]
    return [ctx.conv.turns[i].dia_id for i in order]


def prepare_baselines(conv: Conversation, embedder) -> dict:
    from rank_bm25 import BM25Okapi

    texts = [baseline_text(t) for t in conv.turns]
    vecs = np.asarray(embedder.embed_many(texts), dtype=np.float32)
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    return {"bm25": BM25Okapi([bm25_tokens(x) for x in texts]), "vecs": vecs}


# ============================================================================== main
def default_data() -> Path | None:
    for p in DEFAULT_DATA:
        f = (ROOT / p).resolve()
        if f.exists():
            return f
    return None


def parse_slice(s: str | None):
    """'0:40' -> slice(0, 40); '7' -> slice(7, 8); None -> everything."""
    if not s:
        return slice(None)
    if ":" in s:
        a, b = s.split(":", 1)
        return slice(int(a) if a else None, int(b) if b else None)
    return slice(int(s), int(s) + 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=None,
                    help="LoCoMo JSON (locomo10.json format); default ../shared/eval/locomo-dev.json when it exists")
    ap.add_argument("--rankings", default="all",
                    help="comma-separated: " + ",".join(RANKINGS) + ", sql:<function> (default all registered)")
    ap.add_argument("--conv", default=None, help="comma-separated sample ids (e.g. conv-26); default all")
    ap.add_argument("--questions", default=None, help="slice of each conversation's kept questions, e.g. 0:40")
    ap.add_argument("--category", default=None, help="comma-separated categories (1 multi-hop, 2 temporal, "
                    "3 open-domain, 4 single-hop); default all four")
    ap.add_argument("--k", type=int, default=50, help="rows asked of each ranking (default 50; metrics use up to 20)")
    ap.add_argument("--as-of", choices=("now", "after-last"), default="now",
                    help="as_of of the questions: now (default: the call's now(), as a user asks) or one day "
                         "after the conversation's last session")
    ap.add_argument("--db", default=DB, help=f"database on the embedded cluster (default {DB})")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the database when it exists and its conversations are loaded (skip ingest)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results directory (default bench/results)")
    ap.add_argument("--no-cache", action="store_true", help=f"compute every embedding with the model (no {CACHE.name})")
    ap.add_argument("--misses", type=int, default=0,
                    help="print up to N questions the first pgmem ranking missed at 10 (text on the terminal only)")
    args = ap.parse_args(argv)

    data = args.data or default_data()
    if data is None or not Path(data).exists():
        raise SystemExit(f"no LoCoMo file: give --data PATH (LoCoMo's data/locomo10.json from "
                         f"https://github.com/snap-research/LoCoMo); looked for {', '.join(DEFAULT_DATA)}")
    names = list(RANKINGS) if args.rankings == "all" else [r.strip() for r in args.rankings.split(",") if r.strip()]
    chosen: list[Ranking] = []
    for n in names:
        if n.startswith("sql:"):
            chosen.append(sql_ranking(n[4:]))
        elif n in RANKINGS:
            chosen.append(RANKINGS[n])
        else:
            raise SystemExit(f"unknown ranking {n!r}: known are {', '.join(RANKINGS)}, or sql:<function>")
    cats = {int(c) for c in args.category.split(",")} if args.category else set(CATEGORIES)
    if not cats <= set(CATEGORIES):
        raise SystemExit(f"--category: categories are 1-4, got {args.category}")

    convs = load_locomo(Path(data))
    if args.conv:
        want = [c.strip() for c in args.conv.split(",")]
        missing = [w for w in want if w not in {c.sample_id for c in convs}]
        if missing:
            raise SystemExit(f"--conv: no conversation {', '.join(missing)} in {data} "
                             f"(it has {', '.join(c.sample_id for c in convs)})")
        convs = [c for c in convs if c.sample_id in want]
    sl = parse_slice(args.questions)
    for c in convs:
        c.questions = [q for q in c.questions if q.category in cats][sl]
    nq = sum(len(c.questions) for c in convs)
    import pgmem

    log(f"pgmem from {Path(pgmem.__file__).parent}")
    log(f"{data}: {len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, {nq} questions "
        f"(categories {','.join(map(str, sorted(cats)))}); rankings {', '.join(r.name for r in chosen)}")

    embedder = make_embedder(None if args.no_cache else CACHE)
    pg = [r for r in chosen if r.kind == "pgmem"]
    ingest_info, conn, mems = {}, None, {}
    if pg:
        import psycopg
        from pgvector.psycopg import register_vector

        from pgmem import MemoryClient
        from pgmem.extraction import HeuristicExtractor

        dsn, fresh = setup_database(args.db, args.reuse)
        conn = psycopg.connect(dsn, autocommit=True)
        register_vector(conn)
        loaded = dict(conn.execute("select tenant, count(*) from pgmem.memories where tenant like %s group by 1",
                                   (TENANT_PREFIX + "%",)).fetchall())

        def mem_for(conv):
            if conv.sample_id not in mems:
                mems[conv.sample_id] = MemoryClient(dsn, tenant=conv.tenant, embedder=embedder,
                                                    extractor=HeuristicExtractor())
            return mems[conv.sample_id]

        for c in convs:
            if c.tenant in loaded:
                ingest_info[c.sample_id] = {"reused": loaded[c.tenant]}
            else:
                ingest_info[c.sample_id] = ingest(mem_for, c)
        embedder.save()

    qtexts = [q.question for c in convs for q in c.questions]
    qv = np.asarray(embedder.embed_many(qtexts), dtype=np.float32) if qtexts else np.zeros((0, 384), np.float32)
    embedder.save()

    rows = {r.name: [] for r in chosen}
    timing = defaultdict(float)
    notes: dict = {}
    mapping_info = {}
    qi = 0
    for c in convs:
        ctx = Ctx(conv=c, k=args.k)
        ctx.qvec = {q.index: qv[qi + j] for j, q in enumerate(c.questions)}
        qi += len(c.questions)
        if args.as_of == "after-last":
            ctx.as_of = max(t.when for t in c.turns) + timedelta(days=1)
        if any(r.kind == "baseline" for r in chosen):
            ctx.baseline = prepare_baselines(c, embedder)
            embedder.save()
        key_of = None
        if pg:
            ctx.mem, ctx.conn = mem_for(c), conn
            conn.execute("select set_config('pgmem.tenant', %s, false)", (c.tenant,))
            tmap = turn_memory_map(conn, c)
            mapping_info[c.sample_id] = {"turns": len(c.turns), "memories": len(set(tmap.values())),
                                         "unmapped": sum(1 for t in c.turns if t.dia_id not in tmap)}
            key_of = tmap.get
        for r in chosen:
            if r.name in notes:
                continue
            t = time.perf_counter()
            loop_conn = None
            if r.loop:  # one chat per conversation, in a transaction rolled back at its end
                import psycopg
                from pgvector.psycopg import register_vector

                loop_conn = psycopg.connect(dsn)
                register_vector(loop_conn)
                loop_conn.execute("select set_config('pgmem.tenant', %s, false)", (c.tenant,))
                ctx.conn, ctx.notes = loop_conn, {}
            for q in c.questions:
                try:
                    ranked = r.fn(ctx, q)
                except Exception as e:  # a ranking another helper has not landed, or of unknown shape
                    if r.kind != "pgmem":
                        raise
                    notes[r.name] = f"skipped: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    log(f"{r.name}: {notes[r.name]}")
                    rows.pop(r.name, None)
                    break
                row = {"conv": c.sample_id, "q": q.index, "category": q.category,
                       "ranks": evidence_ranks(ranked, q.evidence, key_of if r.kind == "pgmem" else None),
                       "_ranked": ranked}
                if r.loop:
                    # the whole context, and whether its top 5 holds a message the loop stored
                    # (an earlier question: echo)
                    row["ctx_n"] = len(ranked)
                    row["echo5"] = bool(set(ranked[:5]) & ctx.notes.get("loop_ids", set()))
                rows[r.name].append(row)
            timing[r.name] += time.perf_counter() - t
            if loop_conn is not None:
                loop_conn.rollback()
                loop_conn.close()
                ctx.conn = conn
        embedder.save()
        log(f"{c.sample_id}: {len(c.questions)} questions done")

    summary = {name: summarize(rs) for name, rs in rows.items()}
    per_conv = {name: {c.sample_id: summarize([x for x in rs if x["conv"] == c.sample_id])["all"] for c in convs}
                for name, rs in rows.items()}
    print(report(summary, per_conv, {n: timing[n] / max(1, len(rs)) * 1000 for n, rs in rows.items()}, notes))
    if args.misses and pg:
        first = next((r.name for r in chosen if r.kind == "pgmem" and r.name in rows), None)
        if first:
            print(miss_report(first, rows[first], convs, args.misses))

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    try:
        src = Path(pgmem.__file__).resolve().parents[2]  # the checkout whose pgmem is measured
        commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "-C", str(src), "status", "--porcelain", "sql", "python"],
                                    capture_output=True, text=True).stdout.strip())
    except OSError:
        commit, dirty = None, None
    R = {
        "kind": "pgmem-locomo", "timestamp": stamp, "git_commit": commit, "dirty": dirty,
        "pgmem": str(Path(pgmem.__file__).parent),
        "data": str(data), "database": args.db if pg else None, "embedding_model": embedder.model_name,
        "embeddings": {"computed": embedder.misses, "from_cache": embedder.hits}, "extractor": "heuristic",
        "options": {"rankings": [r.name for r in chosen], "conv": args.conv, "questions": args.questions,
                    "category": sorted(cats), "k": args.k, "as_of": args.as_of},
        "metric": "turn-level evidence recall@k = |evidence ∩ top-k turns| / |evidence|, mean over questions",
        "categories": CATEGORIES,
        "dataset": {c.sample_id: {"turns": len(c.turns), "questions": len(c.questions),
                                  "dropped_evidence_ids": sum(len(q.dropped) for q in c.questions)} for c in convs},
        "ingest": ingest_info, "turn_to_memory": mapping_info,
        "rankings": {r.name: {"kind": r.kind, "help": r.help, **({"note": notes[r.name]} if r.name in notes else {})}
                     for r in chosen},
        "summary": summary, "per_conversation": per_conv,
        "latency_ms": {n: round(timing[n] / max(1, len(rs)) * 1000, 2) for n, rs in rows.items()},
        "wall_s": round(time.perf_counter() - T0, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    text = results_json(R, convs, rows)
    (args.out / f"locomo-{stamp}.json").write_text(text, encoding="utf-8")
    (args.out / "locomo-latest.json").write_text(text, encoding="utf-8")
    for m in mems.values():
        m.close()
    if conn is not None:
        conn.close()
    print(f"\nwall time {R['wall_s']:.0f} s; results in {args.out / ('locomo-' + stamp + '.json')} (and locomo-latest.json)")
    return 0


def results_json(R: dict, convs: list, rows: dict) -> str:
    """The run as JSON: the figures indented, then one compact line per question with its
    evidence ids and, per ranking, the rank of each evidence turn (null: not in the top k).
    Ids and ranks only: no LoCoMo text leaves the data file."""
    per_q = {}
    for c in convs:
        for q in c.questions:
            per_q[(c.sample_id, q.index)] = {"conv": c.sample_id, "q": q.index, "category": q.category,
                                             "evidence": q.evidence, "ranks": {}}
    for name, rs in rows.items():
        for x in rs:
            per_q[(x["conv"], x["q"])]["ranks"][name] = [x["ranks"][e] for e in per_q[(x["conv"], x["q"])]["evidence"]]
    head = json.dumps({**R, "questions": None}, indent=1, default=str)
    lines = ",\n".join(" " + json.dumps(v, separators=(",", ":")) for v in per_q.values())
    return head[: head.rindex('"questions": null')] + '"questions": [\n' + lines + "\n ]\n}\n"


def report(summary: dict, per_conv: dict, ms: dict, notes: dict) -> str:
    L = ["\nLoCoMo turn-level evidence recall@k (categories 1-4; each conversation its own tenant)"]
    head = f"{'ranking':<16}{'group':<13}{'n':>5}" + "".join(f"{'R@' + str(k):>7}" for k in KS)
    L += [head, "-" * len(head)]
    for name, s in summary.items():
        for g, a in s.items():
            if not a["n"]:
                continue
            L.append(f"{name if g == 'all' else '':<16}{g:<13}{a['n']:>5}" + "".join(f"{a['R@' + str(k)]:>7.3f}" for k in KS)
                     + (f"   R@ctx {a['R@ctx']:.3f} (mean {a['mean_ctx']:.1f} memories), echo@5 {a['echo@5']:.3f}"
                        if "R@ctx" in a else ""))
    L.append("\nR@10 per conversation")
    convs = list(next(iter(per_conv.values()), {}))
    L.append(f"{'ranking':<16}" + "".join(f"{c:>10}" for c in convs) + f"{'ms/q':>9}")
    for name, pc in per_conv.items():
        L.append(f"{name:<16}" + "".join(f"{pc[c]['R@10'] if pc[c]['n'] else float('nan'):>10.3f}" for c in convs)
                 + f"{ms[name]:>9.1f}")
    for n, note in notes.items():
        L.append(f"note: {n}: {note}")
    return "\n".join(L)


def miss_report(name: str, rows: list, convs: list, limit: int) -> str:
    by = {(c.sample_id, q.index): (c, q) for c in convs for q in c.questions}
    L = [f"\n{name}: questions with evidence outside the top 10 (text shown here only, never saved)"]
    n = 0
    for r in rows:
        if recall_from_ranks(r["ranks"], 10) == 1.0:
            continue
        c, q = by[(r["conv"], r["q"])]
        turns = {t.dia_id: t for t in c.turns}
        L.append(f"- {c.sample_id}#{q.index} [{CATEGORIES[q.category]}] {q.question}")
        for e, rank in r["ranks"].items():
            L.append(f"    {e} rank {rank}: {turns[e].speaker}: {turns[e].text[:100]}")
        n += 1
        if n >= limit:
            break
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
