"""Issue 34, item 1 (the trusted install): the PL/pgSQL twins of the PL/Python engine functions.

pgmem._gate_decide_sql, _gate_queued_sql (sql/101_gate_sql.sql) and _pack_sql
(sql/241_pack_sql.sql) must give the rows of pgmem._gate_decide, _gate_queued and _pack
(python/pgmem/engine/gate.py, packing.py) for the same arguments: same ids, decisions and order,
floats equal to 1e-9 where the Python computes in float64. The one documented exception: the
cosine of two items of a remember batch, which gate.py takes from a float32 matrix product and
the twin from pgvector's float32 <#>. With vectors of small integer components every float32
product and sum is exact, so there everything must be equal (test_gate_twin_exact_vectors); with
real-valued vectors the similarities agree to 1e-5 (test_gate_twin_float_vectors).

The inputs are built as pgmem._remember_core and build_context build them (100_remember.sql,
240_build_context.sql): user scopes as coalesce(user_id, ''), the content hash as a uuid, an ASCII
text as it is and the tokens of another (pgmem.tokens) space-joined, vectors in pgvector's binary
send form, each item's stored neighbours nearest first (by pgvector's cosine distance, ties by
id) and its keyword candidates, the tokens of every candidate once; for the packing the
candidates' vectors concatenated (zeros for a memory not embedded yet), search scores, token
counts and importance. Random batches (hypothesis, derandomized; seeded numpy) with the edge
cases: empty inputs, NULL vectors, exact duplicates inside the batch and among the stored,
event_key replays, forced items, restatements with new numbers, sessions with equal times, ties,
a budget of 0, an item bigger than the budget, budgets beyond the knapsack's grid.
"""
from __future__ import annotations

import hashlib
import json
import math
import struct
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TEMPLATE, _janitor, connect

DIM = 384
SETTINGS = dict(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def tc(cluster):
    name = f"t_twins_{uuid.uuid4().hex[:10]}"
    j = _janitor(cluster, name, TEMPLATE)
    j.init()
    with connect(cluster.dsn(name), tenant=None) as c:
        yield c
    j.drop()


def send(v) -> bytes:
    """pgvector's vector_send: int16 dim, int16 unused, dim float4, big endian."""
    v = np.asarray(v, dtype=np.float32)
    return struct.pack(">HH", len(v), 0) + v.astype(">f4").tobytes()


def cos_distance(a: np.ndarray, b: np.ndarray) -> float:
    """pgvector's cosine distance as vector_cosine_distance computes it (float32 sums)."""
    dot, na, nb = np.float32(np.dot(a, b)), np.float32(np.dot(a, a)), np.float32(np.dot(b, b))
    s = float(dot) / math.sqrt(float(na) * float(nb))
    return 1.0 - max(-1.0, min(1.0, s))


def close(a, b, tol: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol
    return a == b


def assert_rows_equal(py: list, sql: list, tol: float, what: str, near_ties: bool = False) -> None:
    """Row by row, column by column (floats to tol). near_ties: the gate's nearest memory (columns
    8, 9) may differ where the two candidates' similarities (column 10, each implementation's
    maximum) agree to tol: a tie that float32 rounding breaks one way in numpy, the other in
    pgvector (a batch item whose vector is a copy of a stored memory's, say)."""
    assert len(py) == len(sql), f"{what}: {len(py)} rows from PL/Python, {len(sql)} from the twin"
    for r, (a, b) in enumerate(zip(py, sql)):
        bad = [k for k, (x, y) in enumerate(zip(a, b)) if not close(x, y, tol)]
        if near_ties and set(bad) <= {8, 9} and close(a[10], b[10], tol):
            bad = []
        assert not bad, f"{what}: row {r} differs in columns {bad}:\n  PL/Python {a}\n  twin      {b}"


# ------------------------------------------------------------------ the gate
WORDS = ["the", "meeting", "moved", "to", "friday", "maya", "likes", "green", "tea", "price", "is", "flight",
         "at", "pm", "berlin", "café", "naïve", "résumé", "over", "under", "budget", "report", "sent", "call"]
NUMBERS = ["3", "14", "2024", "9am", "42", "7", "100", "v2", "٣"]


def sentence(rng: np.random.Generator, numbers: bool = True) -> str:
    words = list(rng.choice(WORDS, size=int(rng.integers(0, 9))))
    if numbers and rng.random() < 0.5:
        words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(NUMBERS)))
    text = " ".join(words)
    if rng.random() < 0.2:
        text = text.upper() + "!"
    return text


def is_ascii(s: str) -> bool:
    return len(s.encode()) == len(s)


class World:
    """Stored memories and a batch, and the arrays _remember_core would pass to the gate."""

    def __init__(self, tc, rng: np.random.Generator, n: int, stored: int, exact: bool, k: int = 5):
        self.tc, self.rng, self.exact, self.k = tc, rng, exact, k
        scopes = ["", "u1", "u2"]
        cats = ["episode", "fact", "preference"]
        self.mem = []  # stored: id, scope, content, vector, category, session, created_at, seq, event_key
        t0 = 1.7e9
        for i in range(stored):
            content = sentence(rng)
            self.mem.append(dict(id=10 + 3 * i, scope=str(rng.choice(scopes)), content=content, vec=self.vector(),
                                 cat=str(rng.choice(cats)), session=str(rng.choice(["s1", "s2"])) if rng.random() < .5 else None,
                                 at=t0 + float(rng.integers(0, 50)), seq=int(rng.integers(1, 9)),
                                 key=f"k{i}" if rng.random() < .2 else None))
        self.items = []
        for _ in range(n):
            r = rng.random()
            if r < 0.15 and self.items:          # a repeat of an earlier item (duplicate or near one)
                src = self.items[int(rng.integers(0, len(self.items)))]
                it = dict(src)
                r2 = rng.random()
                if r2 < 0.3:                       # a restatement with another number
                    it["content"] = src["content"] + " " + str(rng.choice(NUMBERS))
                elif r2 < 0.6:                     # the same words otherwise written: rejected
                    it["content"] = src["content"].upper() + ("?" if r2 < 0.45 else " ok")
                if rng.random() < 0.5:
                    it["vec"] = None if src["vec"] is None else self.near(src["vec"])
            elif r < 0.25 and self.mem:          # a repeat of a stored memory
                src = self.mem[int(rng.integers(0, len(self.mem)))]
                it = dict(scope=src["scope"], content=src["content"] if rng.random() < .6 else src["content"] + " 42",
                          vec=src["vec"] if rng.random() < .5 else (None if src["vec"] is None else self.near(src["vec"])),
                          cat=src["cat"])
            else:
                it = dict(scope=str(rng.choice(scopes)), content=sentence(rng), vec=self.vector(), cat=str(rng.choice(cats)))
            it["force"] = bool(rng.random() < 0.1)
            it["key"] = (f"k{int(rng.integers(0, max(1, stored)))}" if rng.random() < .5 else f"b{int(rng.integers(0, 4))}") \
                if rng.random() < 0.15 else None
            it["session"] = str(rng.choice(["s1", "s2", "s3"])) if rng.random() < 0.5 else None
            it["at"] = t0 + float(rng.integers(0, 60))   # equal times happen
            self.items.append(it)

    def vector(self):
        rng = self.rng
        if rng.random() < 0.2:
            return None
        if self.exact:  # small integers: every float32 product and sum is exact
            v = rng.integers(-2, 3, size=DIM).astype(np.float32)
            if not v.any():
                v[0] = 1
            return v
        return rng.standard_normal(DIM).astype(np.float32)

    def near(self, v):
        if self.exact:
            w = v.copy()
            w[int(self.rng.integers(0, DIM))] += 1
            return w if w.any() else v
        return (v + 0.05 * self.rng.standard_normal(DIM)).astype(np.float32)

    def tokens_db(self, text: str) -> list[str]:
        return self.tc.execute("select pgmem.tokens(%s)", (text,)).fetchone()[0]

    def args(self, threshold=0.15, cap=1024):
        """The gate's arguments, as _remember_core assembles them (its step 1b)."""
        k, items, mem = self.k, self.items, self.mem
        h = lambda s: str(uuid.UUID(hashlib.md5(s.encode()).hexdigest()))  # noqa: E731
        a = {key: [] for key in ("scope", "hash", "ek", "cat", "force", "vec", "toks", "texts", "session", "at",
                                 "replay", "dup", "any", "catn", "prev_id", "prev_seq", "prev_at")}
        sem_o, sem_i, sem_d, kw_o, kw_i, cand = [], [], [], [], [], set()
        for o, it in enumerate(items, 1):
            mine = [m for m in mem if m["scope"] == it["scope"]]
            ascii_ = is_ascii(it["content"])
            prev = max((m for m in mem if it["session"] is not None and m["session"] == it["session"] and m["at"] <= it["at"]),
                       key=lambda m: (m["at"], m["id"]), default=None)
            row = dict(
                scope=it["scope"], hash=h(it["content"]), ek=it["key"], cat=it["cat"], force=it["force"],
                vec=None if it["vec"] is None else send(it["vec"]),
                toks=None if ascii_ else " ".join(self.tokens_db(it["content"])), texts=it["content"] if ascii_ else None,
                session=it["session"], at=it["at"],
                replay=next((m["id"] for m in mem if it["key"] is not None and m["key"] == it["key"]), None),
                dup=min((m["id"] for m in mine if h(m["content"]) == h(it["content"])), default=None),
                any=bool(mine), catn=min(cap, sum(1 for m in mine if m["cat"] == it["cat"])),
                prev_id=prev and prev["id"], prev_seq=prev and prev["seq"], prev_at=prev and prev["at"])
            for key, value in row.items():
                a[key].append(value)
            if mine and it["vec"] is not None:
                nn = sorted(((cos_distance(it["vec"], m["vec"]), m["id"]) for m in mine if m["vec"] is not None))[:k]
                for d, i in nn:
                    sem_o.append(o)
                    sem_i.append(i)
                    sem_d.append(d)
                    cand.add(i)
            if mine:
                recent = [m["id"] for m in sorted(mine, key=lambda m: -m["at"])[:20]]
                lex = []
                if it["vec"] is None:
                    toks = set(self.tokens_db(it["content"]))
                    lex = [m["id"] for m in mine if toks and toks <= set(self.tokens_db(m["content"]))][:20]
                for i in sorted(recent + lex):
                    kw_o.append(o)
                    kw_i.append(i)
                    cand.add(i)
        by_id = {m["id"]: m for m in mem}
        tok_id = sorted(cand)
        tok = [None if is_ascii(by_id[i]["content"]) else " ".join(self.tokens_db(by_id[i]["content"])) for i in tok_id]
        tok_text = [by_id[i]["content"] if is_ascii(by_id[i]["content"]) else None for i in tok_id]
        return (a["scope"], a["hash"], a["ek"], a["cat"], a["force"], a["vec"], a["toks"], a["texts"], a["session"], a["at"],
                a["replay"], a["dup"], a["any"], a["catn"], a["prev_id"], a["prev_seq"], a["prev_at"],
                sem_o, sem_i, sem_d, kw_o, kw_i, tok_id, tok, tok_text, threshold,
                '{"semantic": 0.6, "keyword": 0.3, "rarity": 0.1}', '{"keyword": 0.8, "rarity": 0.2}', cap)


GATE_CALL = """select * from pgmem.{}(%s::text[], %s::text[], %s::text[], %s::text[], %s::boolean[], %s::bytea[],
  %s::text[], %s::text[], %s::text[], %s::float8[], %s::bigint[], %s::bigint[], %s::boolean[], %s::integer[],
  %s::bigint[], %s::integer[], %s::float8[], %s::integer[], %s::bigint[], %s::float8[], %s::integer[], %s::bigint[],
  %s::bigint[], %s::text[], %s::text[], %s::float8, %s::jsonb, %s::jsonb, %s::integer)"""


def gate_both(tc, args) -> tuple[list, list]:
    return (tc.execute(GATE_CALL.format("_gate_decide"), args).fetchall(),
            tc.execute(GATE_CALL.format("_gate_decide_sql"), args).fetchall())


@settings(**SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), stored=st.integers(0, 30),
       threshold=st.sampled_from([0.15, 0.0, 0.5, 0.9, 1.01]))
def test_gate_twin_exact_vectors(tc, seed, n, stored, threshold):
    """Small integer components: every decision, reference and number equal (floats to 1e-9)."""
    w = World(tc, np.random.default_rng(seed), n, stored, exact=True)
    py, sql = gate_both(tc, w.args(threshold=threshold))
    assert_rows_equal(py, sql, 1e-9, f"gate, seed {seed}")


@settings(**{**SETTINGS, "max_examples": 15})
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), stored=st.integers(0, 30))
def test_gate_twin_float_vectors(tc, seed, n, stored):
    """Real-valued vectors: the same decisions; the cosine of two batch items (float32 sums in
    another order) to 1e-5, and so the nearest memory the same unless two candidates tie to 1e-5."""
    w = World(tc, np.random.default_rng(seed), n, stored, exact=False)
    py, sql = gate_both(tc, w.args())
    assert_rows_equal(py, sql, 1e-5, f"gate, seed {seed}", near_ties=True)


@pytest.mark.parametrize("seed", range(6))
def test_gate_twin_large_batches(tc, seed):
    """Batches of 60 to 128 items against up to 120 stored memories (hypothesis favours small
    ones), small integer components: everything equal."""
    rng = np.random.default_rng(1000 + seed)
    w = World(tc, rng, int(rng.integers(60, 129)), int(rng.integers(0, 121)), exact=True)
    py, sql = gate_both(tc, w.args())
    assert_rows_equal(py, sql, 1e-9, f"gate, large batch {seed}")
    assert {r[1] for r in py} >= {"stored", "duplicate"}


def test_gate_twin_edge_cases(tc):
    """Empty and NULL inputs, a batch of one, every item a duplicate of the first, all forced,
    a rarity cap of 0, NULL vectors only, the same event_key thrice, equal session times."""
    rng = np.random.default_rng(7)
    null_args = (None,) * 25 + (0.15, '{"semantic": 0.6, "keyword": 0.3, "rarity": 0.1}', '{"keyword": 0.8, "rarity": 0.2}', 1024)
    py, sql = gate_both(tc, null_args)
    assert py == sql == []
    empty = tuple([] for _ in range(25)) + null_args[25:]
    py, sql = gate_both(tc, empty)
    assert py == sql == []
    w = World(tc, rng, 1, 0, exact=True)
    assert_rows_equal(*gate_both(tc, w.args()), 1e-9, "one item, nothing stored")
    w = World(tc, rng, 12, 10, exact=True)
    first = w.items[0]
    for it in w.items[1:]:
        it.update(scope=first["scope"], content=first["content"], vec=first["vec"], key=None)
    py, sql = gate_both(tc, w.args())
    assert_rows_equal(py, sql, 1e-9, "duplicates of the first")
    assert [r[1] for r in py[1:]].count("duplicate") + sum(1 for it in w.items[1:] if it["force"]) == 11
    for it in w.items:
        it["force"] = True
    assert_rows_equal(*gate_both(tc, w.args(cap=0)), 1e-9, "all forced, rarity cap 0")
    w = World(tc, rng, 15, 10, exact=True)
    for i, it in enumerate(w.items):
        it.update(vec=None, key="same" if i % 5 == 0 else None, session="s1", at=1.7e9, force=i == 0 or it["force"])
    py, sql = gate_both(tc, w.args())
    assert_rows_equal(py, sql, 1e-9, "no vectors, one event_key, equal times")
    assert [r[1] for r in py].count("replayed") == 2


def test_gate_twin_restatements_keep_new_numbers(tc):
    """A restatement with another number is kept (new_numbers), the same without is rejected:
    both implementations, with the numbers listed in the same order."""
    rng = np.random.default_rng(11)
    w = World(tc, rng, 0, 0, exact=True)
    v = np.ones(DIM, dtype=np.float32)
    base = dict(scope="u1", vec=v, cat="fact", force=False, key=None, session=None, at=1.7e9)
    w.items = [dict(base, content="the flight to berlin is at 9am on 2024"),
               dict(base, content="the flight to berlin is at 9am on 2024 ok"),
               dict(base, content="the flight to berlin is at 9am on 2025 ٣"),
               dict(base, content="THE FLIGHT TO BERLIN IS AT 9AM ON 2024 OK!")]
    py, sql = gate_both(tc, w.args())
    assert_rows_equal(py, sql, 1e-9, "restatements")
    assert [r[1] for r in py] == ["stored", "rejected", "stored", "rejected"]
    assert py[2][11][0] == "2025" and py[1][11] == [] and py[3][11] == []


# ------------------------------------------------------------------ the queue
QUEUED_CALL = "select * from pgmem.{}(%s::text[], %s::bytea[], %s::bigint[], %s::text[], %s::bytea[], %s::integer)"


@settings(**SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 30), q=st.integers(0, 60), k=st.integers(0, 8))
def test_gate_queued_twin(tc, seed, n, q, k):
    """The same (item, memory) pairs; gate.py's order within an item is argpartition's, so the
    pairs are compared as sets (real-valued vectors: no two queued memories tie at the cut)."""
    rng = np.random.default_rng(seed)
    scopes = ["", "u1", "u2"]
    vec = lambda: None if rng.random() < .15 else send(rng.standard_normal(DIM))  # noqa: E731
    args = ([str(rng.choice(scopes)) for _ in range(n)], [vec() for _ in range(n)],
            [int(x) for x in rng.permutation(1000)[:q] + 1], [str(rng.choice(scopes)) for _ in range(q)],
            [vec() for _ in range(q)], k)
    py = tc.execute(QUEUED_CALL.format("_gate_queued"), args).fetchall()
    sql = tc.execute(QUEUED_CALL.format("_gate_queued_sql"), args).fetchall()
    assert sorted(py) == sorted(sql)
    assert sql == sorted(sql, key=lambda r: r[0])  # by item


def test_gate_queued_twin_edge_cases(tc):
    """No items, no queue, k 0, NULL vectors only, a scope with nothing queued, fewer queued than
    k, more than k + 2 (real-valued vectors: no tie at the cut, which argpartition breaks
    arbitrarily)."""
    rng = np.random.default_rng(5)
    v = [send(rng.standard_normal(DIM)) for _ in range(4)]
    cases = [(None, None, None, None, None, 5), ([], [], [], [], [], 5), (["u"], [v[0]], [], [], [], 5),
             (["u"], [v[0]], [7], ["u"], [v[1]], 0), (["u", "u"], [None, None], [7], ["u"], [v[1]], 3),
             (["a", "u"], [v[0], v[1]], [7, 8], ["u", "u"], [v[2], None], 3), (None, [v[0]], [7], [None], [v[1]], 3),
             (["u"] * 3, v[:3], [9, 8, 7, 6], ["u"] * 4, [v[3], v[2], v[1], v[0]], 1)]
    for args in cases:
        py = tc.execute(QUEUED_CALL.format("_gate_queued"), args).fetchall()
        sql = tc.execute(QUEUED_CALL.format("_gate_queued_sql"), args).fetchall()
        assert sorted(py) == sorted(sql), args


# ------------------------------------------------------------------ the packing
PACK_CALL = "select * from pgmem.{}(%s::float8[], %s::bytea, %s, %s::integer[], %s::float8[], %s, %s)"


def pack_both(tc, args) -> tuple[list, list]:
    return tc.execute(PACK_CALL.format("_pack"), args).fetchall(), tc.execute(PACK_CALL.format("_pack_sql"), args).fetchall()


def pack_args(rng, n, budget, lam, *, dim=DIM, ties=False, big_tokens=False, exact=False):
    """As build_context: search scores in rank order, each vector's send form (zeros for a
    memory without an embedding), concatenated; token counts; importance.

    exact: vectors of 16 components ±1 (norm 4), duplicates among them. numpy's float64 product
    of their normalised rows is then exact, and the twin's similarity a function of the integer
    dot product alone, so ties (a duplicate embedding, equal relevance) are ties in both and go
    to the lower index. With real-valued vectors there are no duplicates: numpy's BLAS gives two
    identical columns different roundings (seen: 2e-16), which breaks such a tie arbitrarily."""
    rel = sorted((float(np.round(x, 1 if ties else 12)) for x in rng.random(n)), reverse=True)
    vecs: list[bytes] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.15:
            vecs.append(b"\x00" * (4 + 4 * dim))
        elif r < 0.3 and vecs and exact:
            vecs.append(vecs[int(rng.integers(0, len(vecs)))])  # a duplicate embedding
        elif exact:
            v = np.zeros(dim, dtype=np.float32)
            v[rng.choice(dim, size=min(16, dim), replace=False)] = rng.choice([-1.0, 1.0], size=min(16, dim))
            vecs.append(send(v))
        else:
            vecs.append(send(rng.standard_normal(dim)))
    toks = [int(x) for x in rng.integers(1, 3000 if big_tokens else 120, n)]
    imp = [float(x) for x in (np.round(rng.random(n), 1) if ties else rng.random(n))]
    return rel, b"".join(vecs), dim, toks, imp, budget, lam


@settings(**SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40),
       budget=st.sampled_from([0, 1, 50, 300, 1000, 6656]), lam=st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]),
       ties=st.booleans(), exact=st.booleans())
def test_pack_twin(tc, seed, n, budget, lam, ties, exact):
    py, sql = pack_both(tc, pack_args(np.random.default_rng(seed), n, budget, lam, ties=ties, exact=exact))
    assert_rows_equal(py, sql, 1e-9, f"pack, seed {seed}")


@pytest.mark.parametrize("seed", range(8))
def test_pack_twin_seeded(tc, seed):
    """build_context's usual sizes: 30 to 80 candidates, a budget that takes all, most or few."""
    rng = np.random.default_rng(2000 + seed)
    n = int(rng.integers(30, 81))
    budget = int(rng.choice([0, 200, 1500, 6656]))
    args = pack_args(rng, n, budget, float(rng.choice([0.0, 0.5, 0.7, 1.0])), ties=seed % 2 == 0, exact=seed % 3 == 0)
    py, sql = pack_both(tc, args)
    assert_rows_equal(py, sql, 1e-9, f"pack seeded {seed}")


def test_pack_twin_edge_cases(tc):
    rng = np.random.default_rng(3)
    # no candidate (build_context's array_agg over no rows is NULL)
    assert pack_both(tc, (None, None, DIM, None, None, 100, 0.5)) == ([], [])
    assert pack_both(tc, ([], b"", DIM, [], [], 100, 0.5)) == ([], [])
    # one candidate, bigger than the budget; all relevance equal; every vector missing; zero tokens
    one = pack_args(rng, 1, 10, 0.5)
    py, sql = pack_both(tc, (one[0], one[1], DIM, [11], one[4], 10, 0.5))
    assert_rows_equal(py, sql, 1e-9, "one too big")
    assert py[0][3] is False
    args = pack_args(rng, 20, 200, 0.5)
    same = ([0.5] * 20, b"\x00" * (20 * (4 + 4 * DIM)), DIM, [0] * 5 + args[3][5:], args[4], 200, 0.5)
    assert_rows_equal(*pack_both(tc, same), 1e-9, "equal relevance, no vectors, zero tokens")
    # items of value 0 (importance 0 is floored at 0.05, but an MMR score of 0 is not)
    for lam in (0.0, 1.0):
        args = pack_args(rng, 30, 100, lam, ties=True, exact=True)
        assert_rows_equal(*pack_both(tc, args), 1e-9, f"ties and duplicates, lambda {lam}")
    # a small dimension, and the grid: budgets beyond 8,192 tokens
    assert_rows_equal(*pack_both(tc, pack_args(rng, 12, 40, 0.5, dim=3)), 1e-9, "dim 3")
    for budget in (8192, 8193, 20000):
        args = pack_args(rng, 12, budget, 0.5, big_tokens=True)
        py, sql = pack_both(tc, args)
        assert_rows_equal(py, sql, 1e-9, f"grid, budget {budget}")
        assert sum(t for t, r in zip(args[3], py) if r[3]) <= budget


# ------------------------------------------------------------------ through the real callers
GATE_ARGS = ("p_scope text[], p_hash text[], p_event_key text[], p_category text[], p_force boolean[], p_vector bytea[], "
             "p_tokens text[], p_text text[], p_session text[], p_created_at float8[], p_replay_id bigint[], p_dup_id bigint[], "
             "p_any boolean[], p_cat_count integer[], p_prev_id bigint[], p_prev_seq integer[], p_prev_at float8[], "
             "p_sem_ord integer[], p_sem_id bigint[], p_sem_dist float8[], p_kw_ord integer[], p_kw_id bigint[], "
             "p_tok_id bigint[], p_tok text[], p_tok_text text[], p_threshold float8, p_weights jsonb, "
             "p_weights_no_embedding jsonb, p_rarity_cap integer")
GATE_OUT = ("ord integer, decision text, memory_id bigint, memory_ord integer, surprise float8, semantic_novelty float8, "
            "keyword_novelty float8, rarity float8, nearest_id bigint, nearest_ord integer, nearest_similarity float8, "
            "new_numbers text[], forced boolean, seq integer, prev_id bigint, prev_ord integer")
QUEUED_ARGS = "p_scope text[], p_vector bytea[], p_q_id bigint[], p_q_scope text[], p_q_vector bytea[], p_k integer"
PACK_ARGS = "relevance float8[], embeddings bytea, dim integer, tokens integer[], importance float8[], budget integer, lam float8"


def _names(args: str) -> str:
    return ", ".join(a.split()[0] for a in args.split(", "))


def _types(args: str) -> str:
    return ", ".join(a.split(" ", 1)[1] for a in args.split(", "))


def spy(c, fn: str, args: str, out: str, order: str) -> None:
    """Rename pgmem.<fn> to <fn>_py and put in its place a function that calls it and its twin
    <fn>_sql with the arguments the real caller built, logs both results, and returns the
    original's (in this test's own database only)."""
    c.execute(f"alter function pgmem.{fn}({_types(args)}) rename to {fn}_py")
    c.execute("create table if not exists public.twin_log (n bigserial, fn text, args_n int, py jsonb, tw jsonb)")
    # (the callers are SECURITY DEFINER: the spy runs as pgmem's owner)
    c.execute("grant insert, select on public.twin_log to public; grant usage on sequence public.twin_log_n_seq to public")
    c.execute(f"""
        create function pgmem.{fn}({args}) returns table ({out}) language plpgsql volatile
          set search_path = pgmem, pg_catalog, pg_temp as $f$
        declare v_py jsonb; v_tw jsonb;
        begin
          select jsonb_agg(to_jsonb(x) order by {order}) into v_py from pgmem.{fn}_py({_names(args)}) x;
          select jsonb_agg(to_jsonb(x) order by {order}) into v_tw from pgmem.{fn}_sql({_names(args)}) x;
          insert into public.twin_log (fn, args_n, py, tw) values ('{fn}', cardinality({_names(args).split(", ")[0]}), v_py, v_tw);
          return query select * from pgmem.{fn}_py({_names(args)});
        end $f$""")


def test_twins_agree_inside_remember_many_and_build_context(dsn):
    """The twins called with the very arguments pgmem._remember_core and build_context build, on
    a corpus written in batches (near-repeats, restatements, sessions, memories waiting for the
    HNSW index) and packed under several budgets: the same rows as the originals."""
    rng = np.random.default_rng(42)
    with connect(dsn, tenant="acme") as c:
        spy(c, "_gate_decide", GATE_ARGS, GATE_OUT, "x.ord")
        spy(c, "_gate_queued", QUEUED_ARGS, "ord integer, memory_id bigint", "x.ord, x.memory_id")
        spy(c, "_pack", PACK_ARGS, "idx integer, mmr_score float8, value float8, selected boolean, pick integer", "x.idx")
        topics = [rng.standard_normal(DIM) for _ in range(12)]
        written = []
        for _batch in range(4):
            items = []
            for _ in range(40):
                t = int(rng.integers(0, 12))
                r = rng.random()
                user = str(rng.choice(["maya", "sam"]))
                if written and r < 0.4:   # a repeat, restatement or rewording of an earlier item
                    src = written[int(rng.integers(0, len(written)))]
                    user = src["user_id"]
                    content = (src["content"] + " " + str(rng.choice(NUMBERS)) if r < 0.1
                               else src["content"].upper() + "!" if r < 0.3 else src["content"])
                    vec = np.asarray(src["embedding"]) + 0.01 * rng.standard_normal(DIM)
                else:
                    content = f"topic {t}: " + sentence(rng)
                    vec = topics[t] + 0.8 * rng.standard_normal(DIM)
                item = {"content": content, "user_id": user, "session_id": str(rng.choice(["s1", "s2"])),
                        "category": str(rng.choice(["episode", "fact", "preference"]))}
                if rng.random() > 0.15:
                    item["embedding"] = [float(x) for x in vec.astype(np.float32)]
                items.append(item)
            c.execute("select * from pgmem.remember_many(%s::jsonb)", (json.dumps(items),)).fetchall()
            written += [i for i in items if "embedding" in i]
        for q in range(6):
            qv = topics[q] + 0.3 * rng.standard_normal(DIM)
            c.execute("select * from pgmem.build_context(%s, %s::vector, token_budget => %s, candidates => %s, lambda => %s)",
                      (sentence(rng, numbers=False), str([float(x) for x in qv.astype(np.float32)]),
                       [0, 60, 300, 6656, 20000, 150][q], [50, 20, 50, 80, 30, 50][q], [0.5, 0.7, 0.3, 0.5, 1.0, 0.0][q])).fetchall()
        log = c.execute("select fn, args_n, py, tw from public.twin_log order by n").fetchall()
    seen = {fn for fn, *_ in log}
    assert seen == {"_gate_decide", "_gate_queued", "_pack"}, seen
    decisions = set()
    for fn, n_args, py, tw in log:
        if fn == "_gate_queued":
            assert sorted(map(tuple, (r.values() for r in py or []))) == sorted(map(tuple, (r.values() for r in tw or []))), fn
            continue
        rows_py = [tuple(r.values()) for r in py or []]
        rows_tw = [tuple(r.values()) for r in tw or []]
        assert len(rows_py) == (n_args or 0)
        # real-valued vectors: the cosine of two batch items to 1e-5 (float32 sums in another order)
        assert_rows_equal(rows_py, rows_tw, 1e-5 if fn == "_gate_decide" else 1e-9, fn, near_ties=fn == "_gate_decide")
        if fn == "_gate_decide":
            decisions |= {r["decision"] for r in py}
    assert decisions >= {"stored", "rejected", "duplicate"}, decisions
    assert any(py for fn, _, py, _ in log if fn == "_gate_queued")  # memories were waiting for the index
    packs = [py for fn, _, py, _ in log if fn == "_pack" and py]
    assert any(any(r["selected"] for r in p) and not all(r["selected"] for r in p) for p in packs)
