"""Fragment strength and spreading activation (fragment-reconstructive-memory.md, Strength
Decay and Spreading Activation), recomputed by hand and against the design's own Python.

The design's spreading_activation() is written out below as it stands in the design. pgmem's
pgmem.spread() computes the maximum over paths the code intends; on a directed graph whose
seeds have no incoming binding the two agree exactly. On undirected bindings the design's
``activation.update(new_activation)`` lets a path that returns to a seed overwrite its 1.0
(A-B-A: .25); spread() keeps the highest level, which is the same code with the update
replaced by a max (written out below as well).
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import psycopg
import pytest


# ------------------------------------------------------------------ the design's code
class _Fragment:
    def __init__(self, bindings):
        self.bindings = bindings


def spreading_activation(seed_fragments, store, iterations=3, decay=0.5):
    """fragment-reconstructive-memory.md, Spreading Activation, verbatim."""
    activation = {fid: 1.0 for fid in seed_fragments}

    for _ in range(iterations):
        new_activation = {}
        for fid, level in activation.items():
            fragment = store.get(fid)
            for binding_type, bound_ids in fragment.bindings.items():
                for bound_id in bound_ids:
                    spread = level * decay
                    new_activation[bound_id] = max(
                        new_activation.get(bound_id, 0),
                        spread
                    )
        activation.update(new_activation)

    return activation


def spreading_activation_max(seed_fragments, store, iterations=3, decay=0.5, factor=None):
    """The same, keeping every fragment's highest level (max over paths); ``factor(fid,
    bound_id, binding_type)`` multiplies what a binding passes (pgmem's kind weight × strength)."""
    activation = {fid: 1.0 for fid in seed_fragments}
    for _ in range(iterations):
        new_activation = {}
        for fid, level in activation.items():
            for binding_type, bound_ids in store.get(fid).bindings.items():
                for bound_id in bound_ids:
                    f = 1.0 if factor is None else factor(fid, bound_id, binding_type)
                    new_activation[bound_id] = max(new_activation.get(bound_id, 0), level * decay * f)
        for k, v in new_activation.items():
            activation[k] = max(activation.get(k, 0), v)
    return activation


# ------------------------------------------------------------------ helpers
def memories(conn, n: int) -> list[int]:
    return [r[0] for r in conn.execute(
        "insert into pgmem.memories (content) select 'memory ' || g from generate_series(1, %s) g returning id", (n,))]


def link(conn, src: int, dst: int, kind: str, weight: float = 1.0) -> None:
    conn.execute("insert into pgmem.links (tenant, src_id, dst_id, kind, weight) values ('acme', %s, %s, %s, %s)",
                 (src, dst, kind, weight))


def spread(conn, seeds, **kw) -> dict[int, float]:
    args = ", ".join(f"{k} => %({k})s" for k in kw)
    rows = conn.execute(f"select memory_id, activation from pgmem.spread(%(seeds)s::bigint[]{', ' if kw else ''}{args})",
                        {"seeds": seeds, **kw}).fetchall()
    return {r[0]: r[1] for r in rows}


def store_of(edges, ids, directed: bool):
    """The design's store: fragment id -> bindings {type: [bound ids]}."""
    store = {i: _Fragment({}) for i in ids}
    for src, dst, kind, *_ in edges:
        store[src].bindings.setdefault(kind, []).append(dst)
        if not directed:
            store[dst].bindings.setdefault(kind, []).append(src)
    return store


# ------------------------------------------------------------------ strength
def test_fragment_strength_by_hand(conn):
    # salience .6, created 100 hours before as_of, recalled 10 hours and 1 hour before:
    #   .6 / (1 + 100^.5) + .1 / (1 + 10^.3) + .1 / (1 + 1^.3)
    as_of = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    created = as_of - timedelta(hours=100)
    accesses = [as_of - timedelta(hours=10), as_of - timedelta(hours=1)]
    expected = 0.6 / (1 + 100 ** 0.5) + 0.1 / (1 + 10 ** 0.3) + 0.1 / (1 + 1 ** 0.3)
    got = conn.execute("select pgmem.fragment_strength(0.6, %s, %s::timestamptz[], %s)", (created, accesses, as_of)).fetchone()[0]
    assert got == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.6 / 11 + 0.1 / (1 + 10 ** 0.3) + 0.05)
    # an access after as_of does not count yet; the strength is capped at 1
    later = accesses + [as_of + timedelta(hours=1)]
    assert conn.execute("select pgmem.fragment_strength(0.6, %s, %s::timestamptz[], %s)",
                        (created, later, as_of)).fetchone()[0] == pytest.approx(expected, rel=1e-12)
    many = [as_of] * 20  # 20 rehearsals at age 0: 20 × .1 / (1 + 0)
    assert conn.execute("select pgmem.fragment_strength(1.0, %s, %s::timestamptz[], %s)", (as_of, many, as_of)).fetchone()[0] == 1.0


def test_memory_strength_reads_the_access_log(conn):
    as_of = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    (mid,) = memories(conn, 1)
    conn.execute("update pgmem.memories set salience = 0.8, created_at = %s where id = %s", (as_of - timedelta(hours=25), mid))
    for h in (4, 16):
        conn.execute("insert into pgmem.accesses (tenant, memory_id, accessed_at) values ('acme', %s, %s)",
                     (mid, as_of - timedelta(hours=h)))
    expected = 0.8 / (1 + 25 ** 0.5) + 0.1 / (1 + 4 ** 0.3) + 0.1 / (1 + 16 ** 0.3)
    assert conn.execute("select pgmem.memory_strength(%s, %s)", (mid, as_of)).fetchone()[0] == pytest.approx(expected, rel=1e-6)


# ------------------------------------------------------------------ spread vs the design
def test_spread_equals_the_design_code_on_a_directed_graph(conn):
    m = memories(conn, 9)
    a, b, c, d, e, f, g, h, i = m
    edges = [(a, b, "temporal"), (a, c, "semantic"), (b, d, "causal"), (c, d, "concept"), (d, e, "temporal"),
             (e, f, "temporal"), (b, g, "co_access"), (h, e, "semantic"), (i, a, "semantic")]
    for src, dst, kind in edges:
        # every weight and strength 1 (co_access: n/(1+n) -> 1 needs a huge count; use temporal-like 1 instead)
        link(conn, src, dst, kind, 1e9 if kind == "co_access" else 1.0)
    store = store_of(edges, m, directed=True)
    for seeds, iterations, decay in (([a], 3, 0.5), ([a, h], 3, 0.5), ([a], 1, 0.5), ([a], 5, 0.7), ([h, b], 2, 0.3)):
        design = spreading_activation(seeds, store, iterations, decay)
        got = spread(conn, seeds, iterations=iterations, decay=decay, directed=True)
        assert got.keys() == design.keys(), (seeds, got, design)
        for k in design:
            assert got[k] == pytest.approx(design[k], rel=1e-6), (seeds, k, got[k], design[k])
    # by hand, seeds {a}, 3 iterations, decay .5: b, c .5; d, g .25; e .125; f beyond reach
    assert spread(conn, [a], directed=True) == pytest.approx({a: 1, b: .5, c: .5, d: .25, g: .25, e: .125})


def test_spread_is_the_max_over_paths_of_undirected_bindings(conn):
    m = memories(conn, 7)
    a, b, c, d, e, f, g = m
    edges = [(a, b, "temporal"), (b, c, "temporal"), (a, d, "semantic"), (d, c, "semantic"), (c, e, "causal"),
             (e, f, "concept"), (g, b, "temporal")]
    for src, dst, kind in edges:
        link(conn, src, dst, kind)
    store = store_of(edges, m, directed=False)
    for seeds in ([a], [a, f], [c]):
        got = spread(conn, seeds)
        want = spreading_activation_max(seeds, store)
        assert got == pytest.approx(want, rel=1e-6), (seeds, got, want)
        # every seed keeps 1.0 ...
        assert all(got[s] == 1.0 for s in seeds)
    # ... where the design's literal code overwrites it on the way back (a-b-a: 1 -> .25)
    assert spreading_activation([a], store)[a] == pytest.approx(0.25)
    # best paths: the row names the binding and the memory the activation came through
    rows = {r[0]: r for r in conn.execute("select * from pgmem.spread(%s::bigint[])", ([a],))}
    assert rows[e][2:] == (3, "causal", c, [a, b, c, e]) or rows[e][2:] == (3, "causal", c, [a, d, c, e])
    assert rows[a][2:] == (0, None, None, [a])


def test_spread_with_kind_weights_and_binding_strengths(conn):
    m = memories(conn, 6)
    a, b, c, d, e, f = m
    edges = [(a, b, "semantic", 0.8), (a, c, "co_access", 3.0), (b, d, "concept", 0.5), (c, d, "temporal", 1.0),
             (d, e, "causal", 1.0), (b, f, "supersedes", 1.0)]
    for src, dst, kind, w in edges:
        link(conn, src, dst, kind, w)
    kind_w = {"temporal": 0.9, "semantic": 0.7, "causal": 1.0, "concept": 0.4, "co_access": 0.6, "merged": 1.0, "supersedes": 0.0}
    strength = {(s, t): (w / (1 + w) if k == "co_access" else min(1.0, w)) for s, t, k, w in edges}
    strength.update({(t, s): v for (s, t), v in list(strength.items())})

    def factor(src, dst, kind):
        return kind_w[kind] * strength[(src, dst)]

    want = spreading_activation_max([a], store_of([(s, t, k) for s, t, k, _ in edges], m, directed=False), factor=factor)
    want = {k: v for k, v in want.items() if v > 0}  # supersedes weighs 0 here: f is not reached
    got = spread(conn, [a], weights=psycopg.types.json.Jsonb(kind_w))
    assert got == pytest.approx(want, rel=1e-6)
    assert f not in got
    # by hand: d via c = 1 × .5 × (.6 × 3/4) × .5 × .9 = .10125 beats via b = .5 × .7 × .8 × .5 × .4 × .5 = .028
    assert got[d] == pytest.approx(0.10125)
    # kinds restricts the bindings followed; the setting binding_weights is the default
    assert set(spread(conn, [a], kinds=["semantic"])) == {a, b}
    conn.execute("""insert into pgmem.settings (tenant, key, value) values ('acme', 'binding_weights', '{"temporal": 0}')""")
    assert spread(conn, [a], kinds=["co_access", "temporal"]) == pytest.approx({a: 1.0, c: 0.5 * 0.75})


def test_spread_fanout_bounds_a_hub(conn):
    hub, *rest = memories(conn, 101)
    for i, x in enumerate(rest):
        link(conn, hub, x, "semantic", 0.5 + i * 0.004)  # the last ones are the strongest
    got = spread(conn, [hub], iterations=1, fanout=5)
    assert set(got) == {hub, *rest[-5:]}
    assert got[rest[-1]] == pytest.approx(0.5 * (0.5 + 99 * 0.004))
    # the default fan-out is the setting spread_fanout (20); through the hub at depth 2 too
    (seed,) = memories(conn, 1)
    link(conn, seed, hub, "temporal")
    got = spread(conn, [seed], iterations=2)
    # the hub's 20 strongest bindings, not counting the one back to the seed (already on the path)
    assert set(got) == {seed, hub, *rest[-20:]}
    plan = "\n".join(r[0] for r in conn.execute("explain analyze select * from pgmem.spread(array[%s::bigint], iterations => 2)", (seed,)))
    assert "rows=" in plan


def test_spread_skips_memories_that_are_not_active_and_other_tenants(conn, dsn):
    a, b, c = memories(conn, 3)
    link(conn, a, b, "temporal")
    link(conn, b, c, "temporal")
    conn.execute("update pgmem.memories set state = 'deleted' where id = %s", (b,))
    assert spread(conn, [a]) == {a: 1.0}
    from conftest import connect
    with connect(dsn, tenant="other") as other:
        assert other.execute("select count(*) from pgmem.spread(%s::bigint[])", ([a, c],)).fetchone()[0] == 0


@pytest.mark.parametrize("args, message", [
    ("null::bigint[]", "spread needs an array of seed memory ids"),
    ("array[1]::bigint[], iterations => 11", "iterations must be between 0 and 10"),
    ("array[1]::bigint[], decay => 0", "decay must be in (0, 1]"),
    ("array[1]::bigint[], decay => 1.5", "decay must be in (0, 1]"),
    ("array[1]::bigint[], fanout => 0", "fanout must be between 1 and 1000"),
    ("array[1]::bigint[], kinds => array['friendship']", 'unknown binding kind "friendship"'),
    ("""array[1]::bigint[], weights => '{"semantic": 2}'""", 'binding kind "semantic" must be a number between 0 and 1'),
    ("array[1, 2]::bigint[], seed_levels => array[0.5]", "seed_levels must give one level in [0, 1] for each seed id"),
])
def test_spread_bad_input(conn, args, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        conn.execute(f"select * from pgmem.spread({args})")


def test_spread_seed_levels(conn):
    a, b, c = memories(conn, 3)
    link(conn, a, c, "temporal")
    link(conn, b, c, "temporal")
    got = spread(conn, [a, b], seed_levels=[0.4, 0.9], iterations=1)
    assert got == pytest.approx({a: 0.4, b: 0.9, c: 0.45})
    assert math.isclose(got[c], max(0.4, 0.9) * 0.5)


def test_spread_received_only_leaves_out_the_seeds_own_levels(conn):
    a, b, c, d = memories(conn, 4)
    link(conn, a, b, "temporal")
    link(conn, b, c, "temporal")
    # a and b are seeds: b receives .5 × 1.0 from a, a receives .5 × .8 from b; c is reached from b
    got = spread(conn, [a, b], seed_levels=[1.0, 0.8], received_only=True)
    assert got == pytest.approx({a: 0.4, b: 0.5, c: 0.4})
    assert d not in got


def test_search_spread_lifts_what_the_hits_are_bound_to(conn):
    from conftest import at_cos, e
    ids = []
    for i, (text, v) in enumerate([("the kite festival is on the hill", e(1)), ("bring sandwiches and water", e(2)),
                                   ("kites fly well in strong wind", at_cos(1, 3, 0.5)), ("the tax form is due", e(4))]):
        ids.append(conn.execute("select memory_id from pgmem.remember(%s, %s::vector, force => true)", (text, v)).fetchone()[0])
    link(conn, ids[0], ids[1], "temporal")
    # (cosine .5, not .7, for the kites: the default profile shares a memory's weight with its
    # neighbour signal, so at .7 the kites tied with the festival for the seed)
    q = dict(query_text=None, query_embedding=e(1), k=4, seeds=1)
    sql = ("select id, score, fused, activation from pgmem.search_spread(query_embedding => %(query_embedding)s::vector, "
           "k => %(k)s, seeds => %(seeds)s, spread_weight => %(w)s)")
    # search_spread ranks with the tenant's profile unless told otherwise, as search does (issue 24)
    plain = [r[0] for r in conn.execute("select id from pgmem.search(query_embedding => %s::vector, k => 4)",
                                        (e(1),))]
    assert [r[0] for r in conn.execute(sql, {**q, "w": 0.0})] == plain
    rows = {r[0]: r[1:] for r in conn.execute(sql, {**q, "w": 0.5})}
    # the seed passes its level (1.0, the best hit) × decay .5 to what it is bound to
    assert rows[ids[1]][2] == pytest.approx(0.5)
    assert rows[ids[1]][0] == pytest.approx(0.5 * rows[ids[1]][1] + 0.5 * 0.5)
    assert rows[ids[0]][2] == 0  # the seed's own level is not counted again
    order = [r[0] for r in conn.execute(sql, {**q, "w": 0.5})]
    assert order.index(ids[1]) < plain.index(ids[1])
