#!/usr/bin/env python
"""A prototype of search's fused ranking over LoCoMo, for ablations (issue 29).

`bench/locomo.py` measures pgmem as a user calls it; trying a signal that way means a change
to the SQL and a run per variant. This prototype dumps, once, what the ranking statement sees
for every dev question (each memory's signals from `pgmem.search_exact`, which on LoCoMo's
small tenants scores exactly what `search` does, plus the memories' vectors, lexemes, sessions,
speakers, and temporal links), then recomputes the fusion in numpy, so that a variant costs
seconds. `--check` verifies that the numpy fusion reproduces the SQL scores.

    PGMEM_HOME=$PWD/.pgmem PGMEM_PORT=54496 .venv/bin/python bench/locomo_proto.py dump --db locomo_onnx
    .venv/bin/python bench/locomo_proto.py eval [--check]

The dump (`bench/.cache/locomo-proto.pkl`, git-ignored) holds LoCoMo text (lexemes): it stays
on this machine, like the embedding cache.
"""
from __future__ import annotations

import argparse
import os
import pickle
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(HERE.parent / "python"))
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

import locomo as L  # noqa: E402

DUMP = HERE / ".cache" / "locomo-proto.pkl"
SIGNALS = ("semantic", "lexical", "recency", "actor", "spatial", "usage", "time", "session", "neighbour")


def dump(args) -> None:
    import psycopg
    from pgvector.psycopg import register_vector

    from pgmem.cluster import default_cluster

    convs = L.load_locomo(Path(args.data or L.default_data()))
    emb = L.make_embedder(L.CACHE)
    c = default_cluster()
    conn = psycopg.connect(c.dsn(args.db), autocommit=True)
    register_vector(conn)
    out = {"db": args.db, "model": emb.model_name, "convs": {}}
    for conv in convs:
        conn.execute("select set_config('pgmem.tenant', %s, false)", (conv.tenant,))
        tmap = L.turn_memory_map(conn, conv)
        rows = conn.execute(
            "select m.id, m.session_id, m.who, extract(epoch from pgmem.event_time(m)), m.embedding,"
            " tsvector_to_array(m.tsv), m.entities, m.topics, m.content, (m.metadata->>'session')::int"
            " from pgmem.memories m where m.tenant = %s and m.state = 'active' order by m.id", (conv.tenant,)).fetchall()
        ids = [r[0] for r in rows]
        mem = {"ids": np.array(ids), "session": [r[1] for r in rows], "who": [r[2] for r in rows],
               "t": np.array([float(r[3]) for r in rows]), "E": np.vstack([np.asarray(r[4].to_numpy(), np.float32) for r in rows]),
               "lex": [list(r[5]) for r in rows], "entities": [list(r[6] or []) for r in rows],
               "topics": [list(r[7] or []) for r in rows], "content": [r[8] for r in rows],
               "sess_no": [r[9] for r in rows]}
        links = conn.execute("select src_id, dst_id, kind, weight from pgmem.links where tenant = %s",
                             (conv.tenant,)).fetchall()
        df = dict(conn.execute("select lexeme, df from pgmem._lexicon_df(%s, '', "
                               "(select array_agg(distinct x) from pgmem.memories m, unnest(tsvector_to_array(m.tsv)) x"
                               " where m.tenant = %s) || ''::text)", (conv.tenant, conv.tenant)).fetchall())
        qs = []
        for q in conv.questions:
            qtext = conn.execute("select pgmem.query_embedding_text(%s)", (q.question,)).fetchone()[0] or q.question
            v = emb.embed(qtext)
            hits = conn.execute(
                "select id, score, semantic, lexical, recency, actor, spatial, usage, time, session, neighbour"
                " from pgmem.search_exact(%s, %s, k => 1000)", (q.question, v)).fetchall()
            qr = conn.execute("select (q).lexemes, (q).actors, (q).time_from, (q).time_to, (q).time_tau, (q).time_month,"
                              " (q).w_semantic, (q).w_lexical, (q).w_recency, (q).w_actor, (q).w_spatial, (q).w_usage,"
                              " (q).w_time, (q).w_session, (q).w_neighbour, (q).terms::text[], (q).idf"
                              " from (select pgmem._query('search', %s, %s, 10, null, null, null, null, null, null, null)"
                              " as q) x", (q.question, v)).fetchone()
            qs.append({"index": q.index, "category": q.category, "question": q.question, "qtext": qtext,
                       "evidence": q.evidence, "evidence_ids": [tmap.get(e) for e in q.evidence], "qvec": v,
                       "hits": np.array([[float(x) if x is not None else np.nan for x in h] for h in hits]),
                       "lexemes": list(qr[0] or []), "actors": list(qr[1] or []),
                       "time": qr[2:6], "w": dict(zip(SIGNALS, [float(x or 0) for x in qr[6:15]])),
                       "terms": list(qr[15] or []), "idf": list(qr[16] or [])})
        out["convs"][conv.sample_id] = {"mem": mem, "links": links, "df": df, "questions": qs,
                                        "speakers": conv.speakers}
        L.log(f"{conv.sample_id}: {len(rows)} memories, {len(qs)} questions")
    emb.save()
    DUMP.parent.mkdir(parents=True, exist_ok=True)
    with open(DUMP, "wb") as f:
        pickle.dump(out, f)
    L.log(f"wrote {DUMP}")


def load():
    with open(DUMP, "rb") as f:
        return pickle.load(f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--db", default="locomo_onnx")
    d.add_argument("--data", default=None)
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        dump(args)


if __name__ == "__main__":
    main()
