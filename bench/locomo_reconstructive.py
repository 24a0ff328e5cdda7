#!/usr/bin/env python
"""Does spreading activation help retrieval on LoCoMo? (issue 16, item 8)

bench/locomo.py with the reconstructive rankings registered. Before a conversation's first
question the bindings of its tenant are written (pgmem.refresh_bindings over every memory,
the work the ENCODE items of the ingest would do; `--rebind` rewrites them after a change of
the binding settings). Rankings, besides locomo.py's (`search`, `bm25`, ...):

  reconstruct             pgmem.reconstruct with the design's defaults: the 10 best search hits as
                          seeds at activation 1.0, spread 3 iterations at decay .5, score =
                          activation × strength (noise 0: the ranking itself, not its variance),
                          members in score order
  reconstruct/<opts>      the same with options, e.g. reconstruct/levels=score/seeds=20/it=2
  spread/<opts>           pgmem.search_spread: the search's best hits spread over the bindings;
                          score = (1 - w) fused + w activation; e.g. spread/w=0.2/seeds=10/it=1
                          /kinds=temporal+semantic/decay=0.5
  options: w (spread_weight), seeds, it (iterations), decay, kinds (+-separated),
           levels (reconstruct: one | score), weights (binding kind weights, kind:value+...),
           self (spread: a seed's own level counts too, received_only => false)

    PGMEM_PORT=... .venv/bin/python bench/locomo_reconstructive.py --reuse \
        --rankings search,reconstruct,spread/w=0.2
    ... --set 'semantic_binding={"threshold": 0.5, "neighbours": 8}' --rebind

`--set key=json` writes a tenant setting for every LoCoMo tenant (removed again with
`--set key=`). Results: bench/results/locomo-<timestamp>.json, as locomo.py.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import locomo  # noqa: E402

PREPARED: set[str] = set()
OPTIONS = {"rebind": False, "settings": {}}
DERIVED = ("semantic", "causal", "concept", "supersedes")


def prepare(ctx) -> None:
    """The tenant's bindings, once per run: written when missing (or with --rebind)."""
    t = ctx.conv.tenant
    if t in PREPARED:
        return
    conn = ctx.conn
    for key, value in OPTIONS["settings"].items():
        conn.execute("delete from pgmem.settings where tenant = %s and key = %s", (t, key))
        if value:
            conn.execute("insert into pgmem.settings (tenant, key, value) values (%s, %s, %s::jsonb)", (t, key, value))
    have = conn.execute("select count(*) from pgmem.links where tenant = %s and kind = 'semantic'", (t,)).fetchone()[0]
    if OPTIONS["rebind"] or have == 0:
        conn.execute("delete from pgmem.links where tenant = %s and kind = any(%s)", (t, list(DERIVED)))
        ids = [r[0] for r in conn.execute("select id from pgmem.memories where tenant = %s and state = 'active' order by id", (t,))]
        written: dict[str, int] = {}
        for i in range(0, len(ids), 1000):
            for kind, n in conn.execute("select * from pgmem.refresh_bindings(%s::bigint[])", (ids[i:i + 1000],)):
                written[kind] = written.get(kind, 0) + n
        conn.execute("delete from pgmem.work_queue where tenant = %s and task = 'bind'", (t,))
        locomo.log(f"{ctx.conv.sample_id}: bindings of {len(ids)} memories written: {written}")
    PREPARED.add(t)


def parse_opts(spec: str) -> dict:
    out = {}
    for part in spec.split("/")[1:]:
        k, _, v = part.partition("=")
        out[k] = v
    return out


def _weights(v: str | None):
    if not v:
        return None
    return json.dumps({k: float(x) for k, x in (p.split(":") for p in v.split("+"))})


CASTS = {"query_embedding": "::vector", "kinds": "::text[]", "weights": "::jsonb", "as_of": "::timestamptz"}


def _args(ctx, q, o: dict, **more) -> dict:
    """The arguments every ranking passes: the question, its embedding, k, as_of, the options' kinds and weights."""
    args = {"query_text": q.question, "query_embedding": ctx.qvec[q.index], "k": ctx.k,
            "seeds": int(o.get("seeds", 10)), "decay": float(o.get("decay", 0.5)), **more}
    if ctx.as_of is not None:
        args["as_of"] = ctx.as_of
    if o.get("kinds"):
        args["kinds"] = o["kinds"].split("+")
    if o.get("weights"):
        args["weights"] = _weights(o["weights"])
    return args


def _call(ctx, fn: str, args: dict, columns: str) -> list:
    sql = f"select {columns} from pgmem.{fn}(" + ", ".join(f"{a} => %({a})s{CASTS.get(a, '')}" for a in args) + ") as r"
    return ctx.conn.execute(sql, args).fetchall()


def reconstruct_ranking(spec: str) -> locomo.Ranking:
    o = parse_opts(spec)

    def run(ctx, q):
        prepare(ctx)
        args = _args(ctx, q, o, noise=0.0, iterations=int(o.get("it", 3)), seed_levels=o.get("levels", "one"), log=False)
        r = _call(ctx, "reconstruct", args, "r")[0][0]
        return [m["id"] for m in sorted(r["members"], key=lambda m: m["rank"])]
    return locomo.Ranking(spec, "pgmem", run, f"pgmem.reconstruct {o or '(design defaults)'}, members in score order")


def spread_ranking(spec: str) -> locomo.Ranking:
    o = parse_opts(spec)

    def run(ctx, q):
        prepare(ctx)
        args = _args(ctx, q, o, spread_weight=float(o.get("w", 0.3)), iterations=int(o.get("it", 2)),
                     received_only="self" not in o)
        return [r[0] for r in _call(ctx, "search_spread", args, "id")]
    return locomo.Ranking(spec, "pgmem", run, f"pgmem.search_spread {o}")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--rebind" in argv:
        argv.remove("--rebind")
        OPTIONS["rebind"] = True
    while "--set" in argv:
        i = argv.index("--set")
        key, _, value = argv[i + 1].partition("=")
        OPTIONS["settings"][key] = value
        del argv[i:i + 2]
    if "--rankings" in argv:
        i = argv.index("--rankings")
        for name in argv[i + 1].split(","):
            name = name.strip()
            if name.startswith("reconstruct") and name not in locomo.RANKINGS:
                locomo.RANKINGS[name] = reconstruct_ranking(name)
            elif name.startswith("spread") and name not in locomo.RANKINGS:
                locomo.RANKINGS[name] = spread_ranking(name)
    else:
        locomo.RANKINGS["reconstruct"] = reconstruct_ranking("reconstruct")
        locomo.RANKINGS["spread"] = spread_ranking("spread")
    return locomo.main(argv)


if __name__ == "__main__":
    sys.exit(main())
