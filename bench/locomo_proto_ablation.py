"""Ablations of search's fusion on LoCoMo's dev file (bench/EVAL.md, round 3; issue 29).

Reads the dump of bench/locomo_proto.py (`dump` first), recomputes the fusion of sql/205_search.sql
in numpy (it reproduces search_exact's ranking exactly) and prints recall@k for each variant:

    .venv/bin/python bench/locomo_proto_ablation.py
"""
import sys, pickle, numpy as np, math
from collections import defaultdict
from pathlib import Path
D = pickle.load(open(Path(__file__).resolve().parent / ".cache" / "locomo-proto.pkl", "rb"))
CATS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
OWN = ("semantic", "lexical", "recency", "actor", "spatial", "usage", "time")
COL = {n: i + 2 for i, n in enumerate(("semantic", "lexical", "recency", "actor", "spatial", "usage", "time", "session", "neighbour"))}

def prep():
    for sid, cv in D["convs"].items():
        m = cv["mem"]; ids = m["ids"]; pos = {int(i): j for j, i in enumerate(ids)}; cv["pos"] = pos
        n = len(ids)
        sess = m["session"]; su = sorted(set(sess)); cv["sess_idx"] = np.array([su.index(s) for s in sess]); cv["nsess"] = len(su)
        nb = [[] for _ in range(n)]
        for s, d, k, w in cv["links"]:
            if k == "temporal" and s in pos and d in pos:
                nb[pos[s]].append(pos[d]); nb[pos[d]].append(pos[s])
        cv["nb"] = nb
        En = m["E"] / np.linalg.norm(m["E"], axis=1, keepdims=True); m["En"] = En
        for q in cv["questions"]:
            h = q["hits"]; S = np.full((n, 11), np.nan)
            for row in h: S[pos[int(row[0])]] = row
            q["S"] = S
            q["ev"] = [pos.get(e) if e is not None else None for e in q["evidence_ids"]]
            qv = np.asarray(q["qvec"], np.float32); q["qn"] = qv / np.linalg.norm(qv)
prep()

def fuse(cv, q, w=None, sig=None, ws=None, wn=None):
    """own/session/neighbour fusion as sql/205; sig: dict of signal arrays (override), w: weights"""
    w = dict(q["w"]) if w is None else w
    S = q["S"]; n = S.shape[0]
    sig = sig or {}
    own = np.zeros(n); ownw = np.zeros(n)
    for k in w:
        if k in ("session", "neighbour"): continue
        v = sig[k] if k in sig else (S[:, COL[k]] if k in COL else None)
        if v is None: continue
        pres = ~np.isnan(v)
        own += np.where(pres, w[k] * np.nan_to_num(v), 0); ownw += np.where(pres, w[k], 0)
    on = own / np.where(ownw > 0, ownw, np.nan)
    si = cv["sess_idx"]; smax = np.full(cv["nsess"], -np.inf); np.maximum.at(smax, si, on)
    sess = smax[si]
    nbv = np.array([max((on[j] for j in cv["nb"][i]), default=np.nan) for i in range(n)])
    ws = w.get("session", 0) if ws is None else ws; wn = w.get("neighbour", 0) if wn is None else wn
    tot = own + ws * sess + wn * np.nan_to_num(nbv)
    totw = ownw + ws + np.where(np.isnan(nbv), 0, wn)
    return tot / totw

def ranks(score):
    return np.argsort(-score, kind="stable")

def evaluate(scorer, name="", verbose=True, ks=(1, 5, 10, 20)):
    g = defaultdict(list)
    for sid, cv in D["convs"].items():
        for q in cv["questions"]:
            order = scorer(cv, q)
            rk = np.empty(len(order), int); rk[order] = np.arange(1, len(order) + 1)
            evr = [rk[e] if e is not None else None for e in q["ev"]]
            r = {k: sum(1 for x in evr if x is not None and x <= k) / len(evr) for k in ks}
            g["all"].append(r); g[CATS[q["category"]]].append(r)
    out = {gg: {k: np.mean([r[k] for r in rs]) for k in ks} for gg, rs in g.items()}
    if verbose:
        a = out["all"]
        print(f"{name:<40} R@1 {a[1]:.3f} R@5 {a[5]:.3f} R@10 {a[10]:.3f} R@20 {a[20]:.3f} | MH {out['multi-hop'][10]:.3f} T {out['temporal'][10]:.3f} OD {out['open-domain'][10]:.3f} SH {out['single-hop'][10]:.3f}")
    return out

def sql_scorer(cv, q):
    return ranks(np.nan_to_num(q["S"][:, 1], nan=-1) + 0 )

def _prevnext():
    for sid, cv in D["convs"].items():
        n = len(cv["mem"]["ids"]); prev = np.full(n, -1); nxt = np.full(n, -1)
        si = cv["sess_idx"]
        for i in range(1, n):
            if si[i] == si[i - 1]: prev[i] = i - 1; nxt[i - 1] = i
        cv["prev"], cv["next"] = prev, nxt
_prevnext()

def own_norm(cv, q, w=None, sig=None):
    w = dict(q["w"]) if w is None else w
    S = q["S"]; n = S.shape[0]; sig = sig or {}
    own = np.zeros(n); ownw = np.zeros(n)
    for k in w:
        if k in ("session", "neighbour"): continue
        v = sig[k] if k in sig else (S[:, COL[k]] if k in COL else None)
        if v is None: continue
        pres = ~np.isnan(v)
        own += np.where(pres, w[k] * np.nan_to_num(v), 0); ownw += np.where(pres, w[k], 0)
    return own, ownw

def shift(cv, v, steps):
    """v at the turn `steps` after (positive) or before (negative); nan outside the session"""
    idx = np.arange(len(v))
    for _ in range(abs(steps)):
        idx = np.where(idx >= 0, (cv["next"] if steps > 0 else cv["prev"])[np.maximum(idx, 0)], -1)
    return np.where(idx >= 0, v[np.maximum(idx, 0)], np.nan)

def fuse2(cv, q, w=None, sig=None, nbw=(1, 1), extra=None, sess_fn=None):
    """fusion with a configurable neighbour: nbw = factors for (prev, next, prev2, next2, ...)"""
    w = dict(q["w"]) if w is None else w
    own, ownw = own_norm(cv, q, w, sig)
    on = own / np.where(ownw > 0, ownw, np.nan)
    si = cv["sess_idx"]
    if sess_fn is None:
        smax = np.full(cv["nsess"], -np.inf); np.maximum.at(smax, si, on); sess = smax[si]
    else:
        sess = sess_fn(cv, q, on)
    cands = []
    steps = [-1, 1, -2, 2, -3, 3]
    for f, st in zip(nbw, steps):
        if f: cands.append(f * shift(cv, on, st))
    nbv = np.nanmax(np.vstack(cands), 0) if cands else np.full(len(on), np.nan)
    ws = w.get("session", 0); wn = w.get("neighbour", 0)
    tot = own + ws * sess + wn * np.nan_to_num(nbv); totw = ownw + ws + np.where(np.isnan(nbv), 0, wn)
    if extra:
        for k, (wk, v) in extra.items():
            pres = ~np.isnan(v); tot += np.where(pres, wk * np.nan_to_num(v), 0); totw += np.where(pres, wk, 0)
    return tot / totw


# ======================================================================= the variants (bench/EVAL.md, round 3)
import re  # noqa: E402

NUM = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a few|a couple of|several)"
UNIT = r"(?:day|week|month|year|weekend|hour|minute|decade)s?"
WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tues?|wed|thu(?:rs)?|fri|sat|sun)"
MONTH = r"(?:january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)"
ANSWER = {
    "time": re.compile(rf"\b(?:yesterday|today|tonight|tomorrow|this morning|last night|recently|lately|ago|since|soon|"
                       rf"(?:last|next|this|past|coming|previous) (?:{UNIT}|{WEEKDAY}|summer|winter|spring|fall|autumn|christmas|year)|"
                       rf"{NUM} {UNIT}|{WEEKDAY}|{MONTH}\b|(?:19|20)\d\d|when i was|as a (?:kid|child|teen)|years? old)\b", re.I),
    "duration": re.compile(rf"\b(?:for {NUM} {UNIT}|{NUM} {UNIT}|since|ever since|years?|months?|weeks?|ago|long time)\b", re.I),
    "number": re.compile(r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|dozen|hundred|thousand|"
                         r"couple|few|several|both|all|first|second|third)\b", re.I),
    "frequency": re.compile(r"\b(?:every|each|times? a|daily|weekly|monthly|once|twice|always|usually|often|regularly|per)\b", re.I),
}


def answer_kind(question):
    t = question.lower()
    if re.match(r"\s*how long\b", t): return "duration"
    if re.match(r"\s*how (many|much)\b", t): return "number"
    if re.match(r"\s*how often\b", t): return "frequency"
    if re.match(r"\s*(when|what (year|month|day|date|time)|since when|in what year|in which (year|month))\b", t): return "time"
    return None


for _cv in D["convs"].values():
    _cv["has"] = {k: np.array([1.0 if r.search(c) else 0.0 for c in _cv["mem"]["content"]]) for k, r in ANSWER.items()}


def context_sem(cv, q, a=1.0, b=0.0):
    """(1 + cos(question, vector + a * previous turn's + b * next turn's)) / 2 (sql/202_signals.sql, _jam_context)."""
    E = cv["mem"]["En"]; prev, nxt = cv["prev"], cv["next"]
    V = E.copy()
    V[prev >= 0] += a * E[prev[prev >= 0]]
    V[nxt >= 0] += b * E[nxt[nxt >= 0]]
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    return (1 + V @ q["qn"]) / 2


ROUND3 = {"semantic": .27, "lexical": .06, "recency": .02, "actor": .10, "spatial": .01, "usage": .01, "time": .05,
          "session": .125, "neighbour": .195, "answer": 0, "context": .16}


def round3(W=ROUND3, nbw=(1, 1, 0.9, 0.9)):
    """The default of round 3 (weights W, neighbour factors for prev, next, prev2, next2), with the
    answer-type signal when W['answer'] > 0."""
    def f(cv, q):
        w = {k: (W[k] if (k in ("answer", "context") or q["w"][k] > 0) else 0) for k in W}
        k = answer_kind(q["question"])
        a = cv["has"][k] if k else np.zeros(len(q["S"]))
        if k is None: w["answer"] = 0
        t = sum(w.values()); w = {x: v / t for x, v in w.items()}
        return ranks(fuse2(cv, q, w=w, sig={"answer": a, "context": context_sem(cv, q)}, nbw=nbw))
    return f


def prf(m=5, beta=0.3):
    """Dense pseudo-relevance feedback: the semantic signal of query + beta x the top m's centroid."""
    def f(cv, q):
        En = cv["mem"]["En"]; top = ranks(fuse(cv, q))[:m]
        c = En[top].mean(0); c /= np.linalg.norm(c)
        q2 = q["qn"] + beta * c; q2 /= np.linalg.norm(q2)
        return ranks(fuse(cv, q, sig={"semantic": (1 + En @ q2) / 2}))
    return f


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore")
    evaluate(lambda cv, q: ranks(fuse(cv, q)), "main (reproduces search_exact)")
    evaluate(round3(dict(ROUND3, context=0), nbw=(1, 1)), "round-3 weights, main's signals")
    evaluate(round3(), "round 3 (the default)")
    evaluate(round3(dict(ROUND3, context=0)), "  - context")
    evaluate(round3(nbw=(1, 1)), "  - second neighbours")
    evaluate(round3(dict(ROUND3, answer=0.03)), "  + answer type (regex)")
    for m, beta in ((3, 0.3), (5, 0.3), (5, 0.6), (10, 0.3)):
        evaluate(prf(m, beta), f"main + dense PRF m{m} beta{beta}")
