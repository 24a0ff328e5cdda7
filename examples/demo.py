"""`make demo`: pgmem end to end on a fresh machine.

Starts the embedded cluster (.pgmem/), ingests a bundled multi-session conversation
(examples/demo_conversation.jsonl), runs the demo queries and prints ranked memories with
their per-signal scores, a Shadow activation listing, the decay state and the lifecycle moving
(uses recorded, a superseded turn stepping back, a memory archived). The cluster keeps
running with the data: explore it with `.venv/bin/pgmem search "..."` or `make db` + psql, or
in the memory explorer: the demo starts `pgmem serve` in the background at its end and prints
the link (`pgmem serve --stop` stops it).
"""
from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

from pgmem import migrate  # noqa: E402
from pgmem.cli_memory import print_table  # noqa: E402
from pgmem.cluster import default_cluster, save_state  # noqa: E402

TENANT = "default"


def demo_search(mem, q: dict, k: int):
    """search as the demo asks a query of examples/demo_queries.json (its user, actor, location, as_of)."""
    return mem.search(q["query"], k=k, actor=q.get("actor"), location=q.get("location"),
                      filters={"user_id": q["user_id"]} if q.get("user_id") else None, as_of=q.get("as_of"))


def expected_ranks(mem, queries: list[dict], events: list[dict], results, k: int = 3) -> list[tuple[dict, int | None]]:
    """For each demo query, the best rank (1-based) in search's top k of a memory holding one of
    its intended answers (expect_event_ids; an event stored as a duplicate counts as the memory
    it duplicates), None when none is there. Used by the demo's ✓/✗ and tests/test_demo_search.py."""
    memory_of = {ev.get("event_id"): (r.id or r.nearest_id) for ev, r in zip(events, results)}
    out = []
    for q in queries:
        want = {memory_of.get(e) for e in q.get("expect_event_ids", [])} - {None}
        ranks = [i for i, h in enumerate(demo_search(mem, q, k), start=1) if h.id in want]
        out.append((q, min(ranks) if ranks else None))
    return out


def banner(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}")


# The two places the demo names the cluster: the DSNs are printed with the password masked
# (issue 14, L5b); tests/test_demo.py checks them with a known password.
def running_line(c) -> str:
    return f"running: {c.owner_dsn(mask=True)}"


def explore_hint(c, memory_id: int) -> str:
    return f"""  .venv/bin/pgmem search "what editor does maya use" --explain
  .venv/bin/pgmem activate "trip to japan" --context-type task
  .venv/bin/pgmem history {memory_id}
  .venv/bin/pgmem context "Where do I live?" --conversation demo-layered --user maya
  .venv/bin/pgmem profile maya --history
  psql '{c.dsn(mask=True)}' -c "select * from pgmem.search('peanut allergy', k => 3)"
  .venv/bin/pgmem db down      # stop it"""


# ------------------------------------------------------------------ the lifecycle (issue 24)
def lifecycle_demo(mem, events, results, user: str = "maya") -> None:
    """Memory that moves with use: a context's memories recorded as uses (folded by the access
    job into their access counts), a superseded turn stepping back in search, and Shadow's
    lifecycle: what the nightly archive job would archive and why, a memory archived by hand and
    restored."""
    memory_of = {ev.get("event_id"): (r.id or r.nearest_id) for ev, r in zip(events, results)}
    neovim, vscode = memory_of["demo-s09-t015"], memory_of["demo-s01-t010"]
    q, mine = "which editor does maya use now", {"user_id": user}

    # uses: what a context packs is appended to the access log; the access job folds it
    ctx = [r for r in mem.build_context(q, token_budget=120, filters=mine) if r["selected"]]
    before = {r["id"]: mem.get(r["id"])["access_count"] for r in ctx}
    folded = mem.call("fold_access_log")[0]["fold_access_log"]
    print(f"uses: build_context packed {len(ctx)} memories for {q!r}; the access job folded {folded} log rows")
    for r in ctx:
        print(f"  memory {r['id']}: access_count {before[r['id']]} -> {mem.get(r['id'])['access_count']}"
              f"  {r['content'][:60]!r}")

    # current beats stale: the Neovim turn supersedes the VS Code one (a profile fact changed)
    hits = mem.search(q, k=500, filters=mine)
    rank = {h.id: (i, h.score) for i, h in enumerate(hits, start=1)}
    print(f"\nsuperseded: memory {neovim} (\"switched from VS Code to Neovim\") supersedes memory {vscode} "
          f"(\"My editor is VS Code ...\"):")
    for mid in (neovim, vscode):
        r = rank.get(mid)
        print(f"  memory {mid}: " + (f"rank {r[0]}, score {r[1]:.3f}" if r else "not in the top 500")
              + (f"  (superseded: it keeps half its score, {2 * r[1]:.3f}; setting superseded_factor .5)"
                 if mid == vscode and r else ""))
    current = [h.id for h in mem.search(q, k=20, filters={**mine, "current_only": True})]
    print(f"  with filters current_only: memory {vscode} {'is left out' if vscode not in current else 'is still there'}")

    # Shadow's lifecycle: the archive job's triggers (age > 90 days, activation < .125, the cap),
    # as a dry run: nothing changes until the jobs are scheduled (pgmem jobs schedule) or run
    act = mem.memory_activation(vscode)
    print(f"\nlifecycle: memory {vscode} has activation {act['activation']:.3f} (threshold {act['threshold']}; "
          f"decayed importance {act['decayed_importance']:.3f}, last use {act['last_use'] or 'never'})")
    dry = mem.run_job("archive", dry_run=True)
    by_reason = Counter(r["reason"] for r in dry)
    print(f"  the nightly archive job would archive {len(dry)} memories now: "
          + (", ".join(f"{n} by {k}" for k, n in sorted(by_reason.items())) or "none")
          + " (a dry run: the demo schedules no job)")
    archived = mem.archive([vscode], reason="the editor changed: Neovim now")[0]
    gone = vscode not in {h.id for h in mem.search(q, k=20, filters=mine)}
    print(f"  pgmem.archive: memory {vscode} is {archived['state']}"
          + (", out of search" if gone else "") + f"; history: {[h['op'] for h in mem.history(vscode)]}")
    print(f"  pgmem.restore: memory {vscode} is {mem.restore(vscode, reason='the demo puts it back')['state']} again")


# ------------------------------------------------------------------ layered tiers (issue 15)
# (issue 32: the same question twice gets the facts both times, never itself; "Hi again!" is no
# memory; "Tell me more about it" stays in the thread of the question before it)
LAYERED_CHAT = ["Hi again!", "I moved to Lisbon last month.", "What am I allergic to?", "What do you know about me?",
                "How should I tune the HNSW index for the order search?", "Tell me more about it",
                "What am I allergic to?"]


def layered_demo(mem, user: str = "maya") -> None:
    """One short chat through pgmem.context_for: each message's stages as a server would
    stream them, the selected context, and the profile before and after the move."""
    before = mem.profile(user)
    for text in LAYERED_CHAT:
        r = mem.context_for(text, conversation_id="demo-layered", user_id=user)
        c, th, pol = r.stage("classified"), r.stage("thread"), r.policy
        flags = [k for k in ("inject_rag", "inject_qa_history", "inject_profile", "privacy_mode") if pol[k]]
        print(f"\n{text!r}\n  intent {c['intent']} ({c['confidence']:.2f}, {c['source']})"
              + (f", demoted from {c['demoted_from']}" if c.get("demoted_from") else "")
              + f"; behaviour {r.stage('behaviour')['mode']}; thread {th['decision']} #{th['thread_id']}"
              + f"; policy {', '.join(flags) or 'no retrieval'}; retrieved {r.stage('retrieved')['retrieval_info']}"
              + f" within {r.stage('retrieved').get('budget')}")
        stored = r.doc.get("memory") or {}
        print(f"  stored: {'no memory (' + stored['skipped'] + ')' if stored.get('skipped') else stored.get('kind')}"
              + (f" #{stored['id']}" if stored.get("id") else ""))
        for line in r.annotations()[:2]:
            print(f"  stream {line}")
        if r.context.get("privacy"):
            for tier, v in r.context["privacy"]["tiers"].items():
                print(f"  stored ({tier}): " + ", ".join(f"{k}={json.dumps(x)[:60]}" for k, x in v.items() if k != "table"))
        for m in (r.context.get("memories") or [])[:3]:
            print(f"  memory {m['id']} ({m['score']:.3f}): {m['content'][:80]}")
    print(f"\nprofile before: {before}\nprofile now:    {mem.profile(user)}")


def main() -> int:
    t0 = time.monotonic()
    banner("1. embedded PostgreSQL (pgvector, plpython3u, pg_cron) under .pgmem/")
    c = default_cluster()
    c.init()
    c.start()
    save_state(c)
    c.wait_ready()
    c.ensure_database()
    for w in migrate.upgrade(c.dsn()):
        print("warning:", w)
    c.ensure_owner_login()
    scheduled = c.ensure_jobs_scheduled()  # (issue 32: uses folded, clusters formed, the map drawn)
    print(running_line(c) + (f"; {scheduled} pg_cron jobs scheduled" if scheduled else ""))

    from pgmem import MemoryClient

    mem = MemoryClient(c.owner_dsn(), tenant=TENANT)  # the owner role, not the superuser
    events = [json.loads(line) for line in (HERE / "demo_conversation.jsonl").read_text().splitlines() if line.strip()]
    banner(f"2. ingest {len(events)} events (heuristic 5W1H extraction, MiniLM embeddings, surprise gate)")
    t = time.monotonic()
    results = mem.remember_many(events, batch_size=64, progress=True)
    counts = Counter(r.decision for r in results)
    print(f"{dict(counts)} in {time.monotonic() - t:.1f}s "
          "(a second run replays: every event_id is an idempotency key)")
    for r, ev in zip(results, events):
        if r.decision in ("duplicate", "rejected"):
            print(f"  {r.decision:<9} surprise={r.surprise:.3f} nearest={r.nearest_id}  {ev['content'][:70]!r}")

    queries = json.loads((HERE / "demo_queries.json").read_text())
    banner("3. fused search (default profile pgmem: JAM's signals with BM25, the actors a question names, "
           "its time window, and the session around each memory)")
    # the intended answer of every demo query in search's top 3 (tests/test_demo_search.py asserts it)
    checked = expected_ranks(mem, queries, events, results, k=3)
    for q, rank in checked:
        print(f"  {'✓' if rank else '✗'} {q['query']!r}: " + (f"an intended answer at rank {rank}" if rank
                                                              else "no intended answer in the top 3"))
    for q in queries[:6]:
        as_of = q.get("as_of")
        hits = demo_search(mem, q, 5)
        print(f"\nquery: {q['query']!r}" + (f"  (user {q['user_id']})" if q.get("user_id") else "")
              + (f"  as of {as_of}" if as_of else ""))
        rows = [{"id": h.id, "score": h.score, **{n: v for n, v in h.signals.items() if v is not None},
                 "who": h.who, "content": h.content} for h in hits]
        cols = ["id", "score", "semantic", "lexical", "recency", "actor", "spatial", "usage", "time", "session",
                "neighbour", "who", "content"]
        print_table(rows, [c_ for c_ in cols if c_ in ("id", "score", "who", "content") or any(c_ in r for r in rows)],
                    {"content": 64, "who": 12})
        mem.touch([h.id for h in hits])  # the shown memories were used: the usage signal

    banner("4. Shadow activation (context 'conversation', threshold .30): activated ✓ vs candidate ○")
    q = queries[0]
    hits = mem.activate(q["query"], context_type="conversation", k=8,
                        filters={"user_id": q["user_id"]} if q.get("user_id") else None)
    print(f"query: {q['query']!r}")
    print_table([{"id": h.id, "score": h.score, "state": "✓" if h.extra["activated"] else "○",
                  "type": h.extra["relevance_type"], "conf": h.extra["confidence"], **h.signals,
                  "summary": h.summary or h.content} for h in hits],
                ["id", "score", "state", "type", "conf", "embedding_sim", "metadata_sim", "summary_sim", "temporal",
                 "summary"], {"summary": 60})
    print("the same memories as a 'query' context (threshold .75) activate only when the match is strong:")
    strict = mem.activate(q["query"], context_type="query", k=8,
                          filters={"user_id": q["user_id"]} if q.get("user_id") else None)
    print(f"  activated for conversation: {sum(h.extra['activated'] for h in hits)}, for query: "
          f"{sum(h.extra['activated'] for h in strict)}")

    banner("5. Engram recall: .5 relevance + .3 decayed importance + .2 linear 90-day recency")
    hits = mem.recall(queries[1]["query"], k=5)
    print(f"query: {queries[1]['query']!r}")
    print_table([{"id": h.id, "score": h.score, **h.signals, "content": h.content} for h in hits],
                ["id", "score", "relevance", "decayed_importance", "recency", "access_frequency", "content"],
                {"content": 70})

    banner("6. decay state (view pgmem.memory_health), most and least alive")
    with mem.connection() as conn:
        from psycopg.rows import dict_row

        cur = conn.cursor(row_factory=dict_row)
        rows = cur.execute("""
            (select id, category, age_days, recency, decayed_importance, strength, access_count
               from pgmem.memory_health where tenant = %(t)s and state = 'active' order by strength desc limit 5)
            union all
            (select id, category, age_days, recency, decayed_importance, strength, access_count
               from pgmem.memory_health where tenant = %(t)s and state = 'active' order by strength asc limit 3)""",
                           {"t": TENANT}).fetchall()
        print_table(rows, ["id", "category", "age_days", "recency", "decayed_importance", "strength", "access_count"])
        st = cur.execute("select * from pgmem.tenant_stats where tenant = %s", (TENANT,)).fetchone()
        print(f"\ntenant {TENANT!r}: {st['memories']} memories ({st['active']} active), {st['users']} users, "
              f"{st['sessions']} sessions, embedding queue {st['embedding_queue']}")

    banner("7. the lifecycle moving: uses recorded, a superseded turn stepping back, a memory archived")
    lifecycle_demo(mem, events, results)

    banner("8. layered pipeline (pgmem.context_for): intent, topic gate, state, thread, policy, selective retrieval")
    layered_demo(mem)

    # (issue 32: pg_cron runs these on their schedules, the cluster job hourly; once now, so that
    # the explorer's map shows the clusters at once)
    mem.call("fold_access_log")
    mem.run_job("cluster")
    print(f"\nthe jobs once now (pg_cron runs them on their schedules): uses folded, "
          f"{len(mem.call('list_clusters'))} clusters formed for the explorer's map")

    banner(f"done in {time.monotonic() - t0:.1f}s; the cluster keeps running with the data")
    print(explore_hint(c, results[0].id))
    banner("9. the memory explorer (pgmem serve, in the background)")
    print(web_hint())
    return 0


# ------------------------------------------------------------------ the web (issue 25)
WEB_PORT = 8780


def web_hint(user: str = "maya") -> str:
    """Starts `pgmem serve` detached (its own session: make demo returns at once, the server
    keeps running with the cluster), with a bearer token for the demo's tenant and user kept
    in .pgmem/demo-web-token, and returns the link that signs the page in."""
    from pgmem.config import home
    from pgmem.errors import PgmemError
    from pgmem.mcp_server import TokenStore, default_token_file

    cmd = f".venv/bin/pgmem serve --port {WEB_PORT}"
    try:
        from pgmem.web import _require_web, start_detached

        _require_web()
        store, kept = TokenStore(default_token_file()), home() / "demo-web-token"
        token = kept.read_text().strip() if kept.exists() else ""
        if not token or TokenStore.digest(token) not in store.principals():
            token = store.add(TENANT, user)
            kept.write_text(token + "\n")
            kept.chmod(0o600)
        pid, url = start_detached(["--port", str(WEB_PORT)], "127.0.0.1", WEB_PORT, wait=False)
    except PgmemError as e:
        return f"  the web server did not start ({e}); start it yourself: {cmd}"
    return (f"  open {url}#token={token}\n"
            f"  (chat, search with its signals, memories with history and restore, the profile timeline, the clusters\n"
            f"   map, jobs and health; ready a few seconds after this line, log in .pgmem/serve.log)\n"
            f"  .venv/bin/pgmem serve --stop   # stop it; {cmd} runs it in the foreground")


if __name__ == "__main__":
    from pgmem.errors import PgmemError

    try:
        sys.exit(main())
    except PgmemError as e:
        print(f"demo: {e}", file=sys.stderr)
        sys.exit(1)
