"""The helpers of the search tests (tests/test_search.py checks JAM as written; test_search_pgmem.py,
test_read_limits.py and test_candidates.py use them too): vectors, JAM's weights and decay,
calls that rank with profile jam unless told otherwise, and the plans a statement runs.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import numpy as np

import sqlhelpers
from sqlhelpers import scalar  # noqa: F401  (the search tests take it from here)

DIM = 384
LN2 = math.log(2)
T = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)  # "now" of every hand-computed query
JAM = {"semantic": 0.55, "lexical": 0.20, "recency": 0.10, "actor": 0.07, "spatial": 0.03, "usage": 0.05}
SIGNALS = tuple(JAM)
JAM_PARAMS = {"recency_half_life_days": 30, "actor_mismatch": 0.3, "usage_half_life_days": 30}


def unit(*pairs: tuple[int, float]) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    for i, x in pairs:
        v[i] = x
    return v


def cos(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


def decay(days: float, half_life: float = 30.0) -> float:
    return math.exp(-LN2 * max(days, 0.0) / half_life)


def path_overlap(a: str | None, b: str | None) -> float:
    """JAM spatial_similarity, with empty components dropped (as documented in 200_search.sql)."""
    if a is None or b is None:
        return 0.0
    pa = [x for x in a.split("/") if x]
    pb = [x for x in b.split("/") if x]
    return len(set(pa) & set(pb)) / max(len(pa), len(pb), 1)


def call(conn, fn: str, **kw) -> list[dict]:
    """select * from pgmem.<fn>(name => value, ...) as a list of dicts. search, search_exact and
    explain_search rank with profile jam unless told otherwise: this file checks JAM as written
    (tests/test_search_pgmem.py checks the default profile, pgmem)."""
    if fn in ("search", "search_exact", "explain_search") and "profile" not in kw:
        kw["profile"] = "jam"
    return sqlhelpers.call(conn, fn, **kw)


def search(conn, **kw) -> list[dict]:
    return call(conn, "search", **kw)


def remember(conn, content: str, **kw) -> int:
    r = sqlhelpers.call(conn, "remember", content, force=True, **kw)[0]
    assert r["decision"] == "stored", r
    return r["memory_id"]


def ids(rows) -> list[int]:
    return [r["id"] for r in rows]


def plans_of(c, sql: str, params=()) -> list[dict]:
    """The plans of every statement that `sql` runs, nested ones included (the ranking statement
    inside a function), as auto_explain logs them (JSON): what the function really executes."""
    notices: list[str] = []
    c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    c.execute("load 'auto_explain'")
    c.execute("set auto_explain.log_min_duration = 0; set auto_explain.log_nested_statements = on; "
              "set auto_explain.log_format = 'json'; set auto_explain.log_level = 'notice'; "
              "set client_min_messages = notice")
    try:
        c.execute(sql, params).fetchall()
    finally:
        c.execute("set auto_explain.log_min_duration = -1")
    return [json.loads(n.split("plan:", 1)[1]) for n in notices if "plan:" in n]


def plan_nodes(plan: dict) -> list[dict]:
    out, todo = [], [plan["Plan"]]
    while todo:
        node = todo.pop()
        out.append(node)
        todo.extend(node.get("Plans", []))
    return out
