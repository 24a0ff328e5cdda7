"""Memory commands of the ``pgmem`` CLI: remember, ingest, search, activate, recall,
history, get, forget, restore, worker, jobs."""
from __future__ import annotations

import json
import re
import sys
from collections import Counter

from .errors import PgmemError


def _client(args, embed: bool = True):
    """The client of a command: --tenant (else PGMEM_TENANT, else 'default'), or the signed
    claim of PGMEM_TENANT_CLAIM; the embedder PGMEM_EMBEDDER chooses."""
    from .client import MemoryClient
    from .config import tenant_claim

    claim = tenant_claim()
    return MemoryClient(args.dsn, tenant=None if claim else args.tenant, tenant_claim=claim,
                        embedder="auto" if embed else None)


def _fmt(v, width: int | None = None) -> str:
    if v is None:
        s = ""
    elif isinstance(v, float):
        s = f"{v:.3f}"
    else:
        s = str(v).replace("\n", " ")
    if width and len(s) > width:
        s = s[: width - 1] + "…"
    return s


def print_table(rows: list[dict], columns: list[str], widths: dict[str, int] | None = None, out=None) -> None:
    out = out or sys.stdout
    widths = widths or {}
    cells = [[_fmt(r.get(c), widths.get(c)) for c in columns] for r in rows]
    w = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w[i]) for i, c in enumerate(columns)), file=out)
    print("  ".join("-" * w[i] for i in range(len(columns))), file=out)
    for row in cells:
        print("  ".join(v.ljust(w[i]) for i, v in enumerate(row)), file=out)


def cmd_remember(args) -> int:
    mem = _client(args, embed=not args.no_embed)
    meta = json_option("--metadata", args.metadata)
    r = mem.remember(args.text, who=args.who, what=args.what, when=args.when, where=args.where, why=args.why,
                     how=args.how, category=args.category, importance=args.importance, metadata=meta,
                     session_id=args.session, user_id=args.user, agent_id=args.agent, extract=not args.no_extract,
                     embed=not args.no_embed)
    print(json.dumps({"id": r.id, "decision": r.decision, "surprise": r.surprise, "importance": r.importance,
                      "salience": r.salience, "nearest_id": r.nearest_id,
                      "reason": r.details.get("reason")}, default=str))
    return 0


def read_jsonl(path: str, err=sys.stderr, on_bad=None):
    """Yield (line_number, event) for good lines; report bad ones with their line number.
    Lines are decoded one by one, so an invalid UTF-8 byte costs only its own line."""
    f = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                if on_bad is not None:
                    on_bad()
                print(f"pgmem: {path}:{n}: skipped, not valid UTF-8 ({e.reason} at byte {e.start})", file=err)
                continue
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError as e:
                if on_bad is not None:
                    on_bad()
                print(f"pgmem: {path}:{n}: skipped, not JSON ({e.msg} at column {e.colno})", file=err)
                continue
            except RecursionError:  # json's decoder recurses once per level of nesting
                if on_bad is not None:
                    on_bad()
                print(f"pgmem: {path}:{n}: skipped, not JSON (nested too deeply for the decoder)", file=err)
                continue
            if not isinstance(ev, dict):
                if on_bad is not None:
                    on_bad()
                print(f"pgmem: {path}:{n}: skipped, a line must be a JSON object, got {type(ev).__name__}", file=err)
                continue
            content = ev.get("content") or ev.get("text")
            if not isinstance(content, str) or not content.strip():
                if on_bad is not None:
                    on_bad()
                print(f"pgmem: {path}:{n}: skipped, no \"content\" text", file=err)
                continue
            yield n, ev
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def json_option(name: str, text: str | None, *, kind: type = dict):
    """The JSON value of an option (--filters, --metadata), or one line naming the problem."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise PgmemError(f"{name} is not JSON ({e.msg} at column {e.colno}): give an object, "
                         f"e.g. {name} '{{\"user_id\": \"maya\"}}'") from None
    if not isinstance(value, kind):
        raise PgmemError(f"{name} must be a JSON {'object' if kind is dict else kind.__name__}, "
                         f"not {type(value).__name__}: e.g. {name} '{{\"user_id\": \"maya\"}}'")
    return value


# event fields checked against pgmem.write_limits() before anything is embedded
_FIELD_KEYS = {"who": ("who", "actor", "role"), "what": ("what",), "where": ("where", "location"), "why": ("why",),
               "how": ("how",)}
_ID_KEYS = ("user_id", "agent_id", "session_id", "event_id", "event_key")


def oversize(ev: dict, limits: dict) -> str | None:
    """Why an event is over a write limit (pgmem.write_limits), or None: checked before the
    event is extracted or embedded, so a line the database would refuse costs nothing."""
    def nbytes(v) -> int:
        return len(v.encode("utf-8")) if isinstance(v, str) else 0

    def over(what: str, n: int, key: str, fix: str) -> str | None:
        lim = limits.get(key)
        return f"{what} is {n:,} bytes, more than {key} ({int(lim):,}): {fix}" if lim is not None and n > int(lim) else None

    content = ev.get("content") or ev.get("text")
    checks = [over("content", nbytes(content), "max_content_bytes", "split the text into several events")]
    for field, keys in _FIELD_KEYS.items():
        value = next((ev.get(k) for k in keys if ev.get(k)), None)
        checks.append(over(field, nbytes(value), "max_field_bytes", f"shorten \"{field}\""))
    checks.append(over("summary", nbytes(ev.get("summary")), "max_summary_bytes", "shorten \"summary\""))
    if isinstance(ev.get("metadata"), dict):
        checks.append(over("metadata", len(json.dumps(ev["metadata"], ensure_ascii=False).encode("utf-8")),
                           "max_metadata_bytes", "keep less in \"metadata\""))
    for key in _ID_KEYS:
        checks.append(over(key, nbytes(ev.get(key)), "max_id_bytes", f"use a shorter {key}"))
    return next((c for c in checks if c), None)


def content_key(ev: dict) -> str:
    """The event key of a line without event_id: derived from everything the line says, so
    the same line ingested again is replayed rather than stored twice."""
    import hashlib

    body = json.dumps({k: v for k, v in ev.items() if k != "embedding"}, sort_keys=True, ensure_ascii=False,
                      default=str)
    return "line:" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:40]


def _count_lines(path: str) -> int | None:
    """Non-blank lines of a file (the progress bar's total); None for stdin."""
    if path == "-":
        return None
    n = 0
    with open(path, "rb") as f:
        for raw in f:
            if raw.strip():
                n += 1
    return n


def cmd_ingest(args) -> int:
    """Stream a JSONL file of events into pgmem. Each line is checked against the write limits
    before anything is done with it; lines are extracted and embedded once, in batches (a
    replayed event_id is not embedded at all), and sent through remember_many; a batch the
    database refuses is sent again item by item with the same vectors, so only the bad items
    are skipped. A bad line is reported with its number. A line without event_id gets a key
    derived from its content: re-running the file is safe."""
    from ._progress import progress_bar
    from .client import event_to_args

    if args.batch_size < 1:
        raise PgmemError(f"--batch-size must be at least 1, got {args.batch_size}")
    total = _count_lines(args.file)  # a missing file: one line, before anything is loaded
    mem = _client(args, embed=not args.no_embed)
    limits = mem.write_limits() or {}  # also the first contact with the server
    batch_size = min(args.batch_size, int(limits.get("max_batch_items", 1000)))
    extractor = None
    if not args.no_extract:
        from .client import _default_extractor

        extractor = _default_extractor()
    counts: Counter = Counter()
    derived = 0
    batch: list[tuple[int, dict]] = []
    bar = progress_bar(total=total, unit="line", desc="ingest", disable=not (sys.stderr.isatty() or args.progress))

    def skip(n: int, why: str) -> None:
        counts["bad"] += 1
        print(f"pgmem: {args.file}:{n}: skipped, {why}", file=sys.stderr)

    def flush():
        if not batch:
            return
        items, nums = [], []
        for n, ev in batch:
            try:
                items.append(event_to_args(ev, extractor))
                nums.append(n)
            except PgmemError as e:
                skip(n, str(e))
        keys = [a["event_key"] for a in items if isinstance(a.get("event_key"), str)]
        known = mem.known_event_keys(keys) if keys else set()
        mem._embed_items(items, embed=not args.no_embed,
                         skip=[i for i, a in enumerate(items) if a.get("event_key") in known])  # each line once
        try:
            results = mem._remember_prepared(items)
            counts.update(r.decision for r in results)
        except Exception as e:
            if not (isinstance(e, PgmemError) or _is_data_error(e)) or _is_connection_error(e):
                raise
            for n, a in zip(nums, items):  # the same vectors, one item at a time
                try:
                    counts.update(r.decision for r in mem._remember_prepared([a]))
                except Exception as e1:
                    if not (isinstance(e1, PgmemError) or _is_data_error(e1)) or _is_connection_error(e1):
                        raise
                    # sent alone: "item 1 of remember_many" would name the batch, not the line
                    skip(n, re.sub(r"^item 1 of remember_many: ", "", _message(e1)))
        bar.update(len(batch))
        batch.clear()

    def bad_line() -> None:  # a line read_jsonl skipped (it says why)
        counts["bad"] += 1
        bar.update(1)

    try:
        for n, ev in read_jsonl(args.file, on_bad=bad_line):
            why = oversize(ev, limits)
            if why:
                skip(n, why)
                bar.update(1)
                continue
            if not (ev.get("event_id") or ev.get("event_key")):
                ev["event_id"] = content_key(ev)
                derived += 1
            batch.append((n, ev))
            if len(batch) >= batch_size:
                flush()
        flush()
    finally:
        bar.close()
    if derived:
        print(f"pgmem: {derived} line(s) had no event_id: each got a key derived from its content (line:<sha256>), "
              "so ingesting them again replays them instead of storing them twice", file=sys.stderr)
    print(json.dumps({k: counts[k] for k in ("stored", "duplicate", "rejected", "replayed", "bad")}))
    return 0 if counts["bad"] == 0 else 2


def _is_connection_error(e: Exception) -> bool:
    from .errors import ServerUnavailable

    return isinstance(e, (ServerUnavailable, ConnectionError))


def _is_data_error(e: Exception) -> bool:
    import psycopg

    return isinstance(e, (psycopg.errors.DataError, psycopg.errors.IntegrityError, psycopg.errors.RaiseException,
                          psycopg.errors.InvalidParameterValue, psycopg.errors.InvalidTextRepresentation,
                          psycopg.errors.InvalidDatetimeFormat, psycopg.errors.DatetimeFieldOverflow,
                          psycopg.errors.CharacterNotInRepertoire, psycopg.errors.UntranslatableCharacter))


def _message(e: Exception) -> str:
    diag = getattr(e, "diag", None)
    return (diag.message_primary if diag is not None and diag.message_primary else str(e)).strip()


SEARCH_COLUMNS = ["id", "score", "semantic", "lexical", "recency", "actor", "spatial", "usage", "who", "content"]


def cmd_search(args) -> int:
    mem = _client(args)
    hits = mem.search(args.query, k=args.k, actor=args.actor, location=args.where, profile=args.profile,
                      touch=args.touch, filters=json_option("--filters", args.filters))
    if args.json:
        print(json.dumps([h.__dict__ for h in hits], default=str, indent=2))
        return 0
    rows = [{"id": h.id, "score": h.score, **h.signals, "who": h.who, "content": h.content} for h in hits]
    print_table(rows, SEARCH_COLUMNS, {"content": 70, "who": 14})
    if args.explain:
        print()
        ex = mem.explain_search(args.query, k=args.k, actor=args.actor, location=args.where, profile=args.profile)
        print_table(ex, ["id", "rank", "signal", "value", "weight", "contribution"])
    return 0


def cmd_activate(args) -> int:
    mem = _client(args)
    hits = mem.activate(args.query, context_type=args.context_type, k=args.k, threshold=args.threshold)
    rows = [{"id": h.id, "score": h.score, "activated": "✓" if h.extra.get("activated") else "○",
             "type": h.extra.get("relevance_type"), "confidence": h.extra.get("confidence"), **h.signals,
             "summary": h.summary or h.content} for h in hits]
    print_table(rows, ["id", "score", "activated", "type", "confidence", "embedding_sim", "metadata_sim",
                       "summary_sim", "temporal", "summary"], {"summary": 60})
    return 0


def cmd_recall(args) -> int:
    mem = _client(args)
    hits = mem.recall(args.query, k=args.k)
    rows = [{"id": h.id, "score": h.score, **h.signals, "content": h.content} for h in hits]
    print_table(rows, ["id", "score", "relevance", "decayed_importance", "recency", "access_frequency", "content"],
                {"content": 70})
    return 0


def cmd_history(args) -> int:
    mem = _client(args, embed=False)
    rows = mem.history(args.id)
    if not rows:
        raise PgmemError(f"no history for memory {args.id} in tenant {args.tenant!r}")
    for r in rows:
        changed = ""
        if r["before"] and r["after"]:
            keys = [k for k in r["after"] if r["before"].get(k) != r["after"].get(k)
                    and k not in ("updated_at", "state_changed_at", "embedded_at")]
            changed = ", ".join(f"{k}: {_fmt(r['before'].get(k), 40)!s} → {_fmt(r['after'].get(k), 40)!s}" for k in keys)
        elif r["after"]:
            changed = _fmt(r["after"].get("content"), 80)
        print(f"{r['id']:>6}  {r['at']:%Y-%m-%d %H:%M:%S}  {r['op']:<9} {r['actor']:<10} {changed}")
        reason = (r["details"] or {}).get("reason")
        if reason:
            print(f"{'':>6}  reason: {reason}")
    return 0


def cmd_get(args) -> int:
    mem = _client(args, embed=False)
    m = mem.get(args.id)
    if m is None:
        raise PgmemError(f"memory {args.id} does not exist for tenant {args.tenant!r}")
    m.pop("embedding", None)
    m.pop("tsv", None)
    print(json.dumps(m, default=str, indent=2))
    return 0


def cmd_forget(args) -> int:
    m = _client(args, embed=False).forget(args.id, args.reason)
    print(f"memory {m['id']} is {m['state']} (restore with: pgmem restore {m['id']})")
    return 0


def cmd_restore(args) -> int:
    m = _client(args, embed=False).restore(args.id, args.reason)
    print(f"memory {m['id']} is {m['state']}")
    return 0


def cmd_ingest_doc(args) -> int:
    """A knowledge-base document (a text or Markdown file, or - for stdin): chunked by the
    database, embedded here, stored with pgmem.ingest_document."""
    from pathlib import Path

    if args.file == "-":
        text, name = sys.stdin.read(), "stdin"
    else:
        p = Path(args.file)
        if not p.is_file():
            raise PgmemError(f"{args.file}: no such file (give a text or Markdown file, or - for stdin)")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise PgmemError(f"{args.file} is not UTF-8 text: convert it first (e.g. pdftotext for a PDF)") from None
        name = p.name
    if not text.strip():
        raise PgmemError(f"{args.file} is empty: a document needs some text")
    title = args.title or next((line.strip().lstrip("#").strip() for line in text.splitlines() if line.strip()), name)[:500]
    mem = _client(args, embed=not args.no_embed)
    r = mem.ingest_document(title, text, source=args.source or (None if args.file == "-" else str(Path(args.file).resolve())),
                            user_id=args.user, max_tokens=args.max_tokens, embed=not args.no_embed)
    print(f"document {r['document_id']} {r['decision']}: {r['chunks']} chunk(s), {r['tokens']} tokens ({title!r})")
    return 0


def cmd_archive(args) -> int:
    rows = _client(args, embed=False).archive(args.ids, args.reason)
    for m in rows:
        print(f"memory {m['id']} is {m['state']} (restore with: pgmem restore {m['id']})")
    return 0


def cmd_jobs_vacuum(args) -> int:
    """VACUUM (and, with --reindex, REINDEX CONCURRENTLY of the invalid indexes compact reports)
    cannot run inside a function: run here as their own statements, in autocommit."""
    from .db import connect

    with connect(args.dsn, autocommit=True) as c:
        cmd = c.execute("select pgmem.vacuum_command()").fetchone()[0]
        print(cmd)
        c.execute(cmd)
        if args.reindex:
            for (idx,) in c.execute("select format('%%I.%%I', n.nspname, x.relname) from pg_index i "
                                    "join pg_class x on x.oid = i.indexrelid join pg_namespace n on n.oid = x.relnamespace "
                                    "where n.nspname = 'pgmem' and not i.indisvalid order by 1").fetchall():
                print(f"REINDEX INDEX CONCURRENTLY {idx}")
                c.execute(f"REINDEX INDEX CONCURRENTLY {idx}")
    return 0


def cmd_worker(args) -> int:
    import logging

    from .worker import EmbeddingWorker

    logging.getLogger("pgmem.worker").setLevel(logging.INFO)
    w = EmbeddingWorker(args.dsn, batch=args.batch, tenant=args.only_tenant, poll_interval=args.poll, hard_stop=True)
    w.run(until_empty=args.once)
    print(json.dumps({"embedded": w.embedded, "reembedded": w.reembedded, "failed": w.failed}))
    from . import _shutdown

    _shutdown.stopped(0)  # stopped by a signal: end now, not in the interpreter's exit
    return 0


def cmd_reembed(args) -> int:
    """Move the tenant to the configured embedding model: start the move (pgmem.reembed), then
    embed its memories here (unless --no-wait: then `pgmem worker` processes with that model do)
    until the database swaps the vectors. Search keeps working throughout."""
    from ._progress import progress_bar
    from .worker import EmbeddingWorker

    with _client(args) as mem:
        if args.status or args.cancel:
            if args.cancel:
                m = mem.cancel_reembed()
                print(f"cancelled the move to {m['model']}: every memory keeps its vector")
                return 0
            print_table(mem.reembed_status(), ["move_id", "model", "state", "total", "embedded", "pending",
                                               "started_at", "finished_at"])
            return 0
        if mem.embedder is None:
            raise PgmemError("reembed needs an embedder in this install: pip install 'pgmem-agent[embed]' "
                             "(or [onnx], or [http] with PGMEM_EMBED_BASE_URL)")
        model = mem.embedder.model_name
        move = mem.reembed(model)
        print(f"moving tenant {args.tenant!r} to {model}: {move['total']} memories to embed (move {move['id']})",
              file=sys.stderr)
        if move["state"] == "done" or args.no_wait:
            print(json.dumps({"move_id": move["id"], "model": model, "state": move["state"], "total": move["total"]}))
            return 0
        bar = progress_bar(total=move["total"], unit="mem", desc="reembed", disable=not sys.stderr.isatty())
        w = EmbeddingWorker(args.dsn, embedder=mem.embedder, batch=args.batch, tenant=args.tenant, embed=False)
        try:
            while True:
                n = w.run_once()
                bar.update(n)
                st = next((r for r in mem.reembed_status() if r["move_id"] == move["id"]), None)
                if st is None or st["state"] != "running":
                    break
                if n == 0:  # another worker holds the rest, or they are done: wait for the swap
                    import time

                    time.sleep(0.5)
        finally:
            bar.close()
    print(json.dumps({"move_id": move["id"], "model": model, "state": st["state"] if st else "gone",
                      "total": st["total"] if st else move["total"]}))
    return 0 if st and st["state"] == "done" else 2


def register(sub) -> None:
    def common(p):
        p.add_argument("--tenant", default=None, help="tenant (default: PGMEM_TENANT or 'default')")

    p = sub.add_parser("remember", help="store one memory")
    p.add_argument("text")
    for f in ("who", "what", "when", "where", "why", "how", "session", "user", "agent", "metadata"):
        p.add_argument(f"--{f}")
    p.add_argument("--category")
    p.add_argument("--importance", type=float)
    p.add_argument("--no-extract", action="store_true", help="do not fill 5W1H with the extractor")
    p.add_argument("--no-embed", action="store_true", help="leave the embedding to 'pgmem worker'")
    common(p)
    p.set_defaults(func=cmd_remember)

    p = sub.add_parser("ingest", help="store the events of a JSONL file (one event per line)")
    p.add_argument("file", help="JSONL file, or - for stdin (format: examples/README.md)")
    p.add_argument("--batch-size", type=int, default=64, help="events extracted, embedded and sent together (default 64)")
    p.add_argument("--no-extract", action="store_true")
    p.add_argument("--no-embed", action="store_true")
    p.add_argument("--progress", action="store_true", help="show the progress bar even when not on a terminal")
    common(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("search", help="fused search over ten signals (semantic, lexical, recency, actor, spatial, usage, time, context, "
                       "session, neighbour) with per-signal scores")
    p.add_argument("query")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--actor")
    p.add_argument("--where")
    p.add_argument("--profile")
    p.add_argument("--filters", help='JSON, e.g. {"user_id": "maya", "category": "fact"}')
    p.add_argument("--touch", action="store_true", help="record the access (usage signal, rehearsal)")
    p.add_argument("--explain", action="store_true", help="also print each signal's weight and contribution")
    p.add_argument("--json", action="store_true")
    common(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("activate", help="Shadow activation: activated vs candidate memories")
    p.add_argument("query")
    p.add_argument("--context-type", default="conversation",
                   choices=["query", "task", "conversation", "document", "mixed"])
    p.add_argument("--threshold", type=float)
    p.add_argument("--k", type=int, default=20)
    common(p)
    p.set_defaults(func=cmd_activate)

    p = sub.add_parser("recall", help="Engram ranking")
    p.add_argument("query")
    p.add_argument("--k", type=int, default=10)
    common(p)
    p.set_defaults(func=cmd_recall)

    for name, fn, helptext in (("history", cmd_history, "every change to a memory"),
                               ("get", cmd_get, "one memory as JSON")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("id", type=int)
        common(p)
        p.set_defaults(func=fn)
    for name, fn, helptext in (("forget", cmd_forget, "soft-delete a memory (restorable)"),
                               ("restore", cmd_restore, "bring a deleted/archived memory back")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("id", type=int)
        p.add_argument("--reason")
        common(p)
        p.set_defaults(func=fn)

    p = sub.add_parser("ingest-doc", help="add a knowledge-base document (chunked, embedded; context_for retrieves it)")
    p.add_argument("file", help="a UTF-8 text or Markdown file, or - for stdin")
    p.add_argument("--title", help="default: the first line of the file")
    p.add_argument("--source", help="where it comes from (default: the file's path)")
    p.add_argument("--user", help="one user's own document (default: the tenant's knowledge base, for every user)")
    p.add_argument("--max-tokens", type=int, help="largest chunk (default: setting document_chunk_tokens, 200)")
    p.add_argument("--no-embed", action="store_true", help="store the chunks without vectors (full-text retrieval only)")
    common(p)
    p.set_defaults(func=cmd_ingest_doc)

    p = sub.add_parser("archive", help="archive memories by hand (Shadow's manual archival; pgmem restore brings one back)")
    p.add_argument("ids", type=int, nargs="+")
    p.add_argument("--reason")
    common(p)
    p.set_defaults(func=cmd_archive)

    p = sub.add_parser("worker", help="embed queued memories (FOR UPDATE SKIP LOCKED; several may run)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--once", action="store_true", help="stop when the queue is empty")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between polls of an empty queue")
    p.add_argument("--only-tenant", help="embed only this tenant's memories (default: all; needs pgmem_admin)")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("reembed", help="move the tenant to the configured embedding model (search keeps working)")
    p.add_argument("--no-wait", action="store_true", help="only start the move: `pgmem worker` processes with the new "
                   "model embed the memories")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--status", action="store_true", help="show the tenant's moves and stop")
    p.add_argument("--cancel", action="store_true", help="cancel the running move (every memory keeps its vector)")
    common(p)
    p.set_defaults(func=cmd_reembed)

    register_jobs(sub)
    register_layered(sub)


# ------------------------------------------------------------------------------ jobs
JOB_COLUMNS = {
    "merge": ["survivor_id", "merged_id", "similarity", "same_category", "method", "applied"],
    "prune": ["memory_id", "reason", "decayed_importance", "applied"],
    "archive": ["memory_id", "reason", "age_days", "activation", "last_accessed_at", "applied"],
    "delete_archived": ["memory_id", "archived_at", "applied"],
    "compact": ["relation", "live_rows", "dead_rows", "changed_since_analyze", "last_vacuum", "action", "applied"],
    "tune": ["tenant_id", "context_type", "old_value", "new_value", "false_positive_rate", "false_negative_rate", "feedback_count"],
    "purge": ["memory_id", "deleted_at", "applied"],
    "index": ["indexed", "dropped", "queued"],
    "cluster": ["tenant_id", "phase", "examined", "changed", "more"],
}


def _params(pairs: list[str]) -> dict:
    out = {}
    for p in pairs or []:
        if "=" not in p:
            raise PgmemError(f"--param {p!r} is not NAME=VALUE")
        k, v = p.split("=", 1)
        out[k.strip()] = v
    return out


def cmd_jobs_run(args) -> int:
    from .client import MemoryClient

    mem = MemoryClient(args.dsn, tenant=args.tenant, embedder=None)
    params = _params(args.param)
    if args.dry_run:
        params["dry_run"] = True
    rows = mem.run_job(args.job, **params)
    print_table(rows, JOB_COLUMNS[args.job])
    print(f"\n{len(rows)} row(s){' (dry run: nothing changed)' if args.dry_run else ''}")
    return 0


def _cron_connection(dsn):
    """A connection to the database pg_cron lives in (cron.database_name) on the same server."""
    import psycopg.conninfo as ci

    from .db import connect, resolve_dsn

    dsn = resolve_dsn(dsn)
    with connect(dsn, autocommit=True) as c:
        cron_db = c.execute("select current_setting('cron.database_name', true)").fetchone()[0]
        here = c.execute("select current_database()").fetchone()[0]
    if not cron_db:
        raise PgmemError("pg_cron is not loaded on this server (cron.database_name is unset): "
                         "add pg_cron to shared_preload_libraries, or run jobs by hand with 'pgmem jobs run'")
    params = ci.conninfo_to_dict(dsn)
    params["dbname"] = cron_db
    return connect(ci.make_conninfo(**params), autocommit=True), here


def cmd_jobs_schedule(args) -> int:
    """pg_cron runs a job as the role that scheduled it: scheduled by a superuser, pgmem's jobs
    are given to pgmem_owner (SECURITY.md: the jobs run as the owner, never as postgres)."""
    from .db import connect

    cron, here = _cron_connection(args.dsn)
    with connect(args.dsn, autocommit=True) as c:
        cmds = c.execute("select * from pgmem.job_schedule_commands(merge => %s, prune => %s, archive => %s, "
                         "tune => %s, purge => %s)", (args.merge, args.prune, args.archive, args.tune, args.purge)).fetchall()
    with cron:
        superuser, owner_login = cron.execute(
            "select rolsuper, coalesce((select rolcanlogin from pg_roles where rolname = 'pgmem_owner'), false) "
            "from pg_roles where rolname = current_user").fetchone()
        as_role = "pgmem_owner" if superuser and owner_login else None
        if superuser and not owner_login:
            print("pgmem: warning: the jobs are scheduled as a superuser and would run as it: give pgmem_owner a login "
                  "(README, \"Step by step\", step 2) and schedule them again as pgmem_owner", file=sys.stderr)
        for name, sched, command, db in cmds:
            jobid = cron.execute("select cron.schedule_in_database(%s, %s, %s, %s, %s)",
                                 (name, sched, command, db, as_role)).fetchone()[0]
            print(f"scheduled {name:<28} {sched:<14} {command}  (pg_cron job {jobid})")
    if as_role:
        print("(scheduled by a superuser: the jobs run as pgmem_owner)")
    return 0


def cmd_jobs_unschedule(args) -> int:
    cron, here = _cron_connection(args.dsn)
    with cron:
        rows = cron.execute("select cron.unschedule(jobid), jobname from cron.job where jobname like 'pgmem-%%' and database = %s",
                            (here,)).fetchall()
    print(f"removed {len(rows)} schedule(s): {', '.join(r[1] for r in rows) or '-'}")
    return 0


def cmd_jobs_status(args) -> int:
    from psycopg.rows import dict_row

    from .db import connect

    with connect(args.dsn, autocommit=True) as c:
        rows = c.cursor(row_factory=dict_row).execute("select * from pgmem.job_status order by job, tenant").fetchall()
    print_table(rows, ["job", "tenant", "last_status", "last_started_at", "last_duration_s", "last_examined",
                       "last_changed", "failures_7d", "last_error"], {"last_error": 50})
    try:
        cron, here = _cron_connection(args.dsn)
        with cron:
            sched = cron.execute("select jobname, schedule, command, active from cron.job where database = %s "
                                 "and jobname like 'pgmem-%%' order by jobname", (here,)).fetchall()
        print("\nschedules:" if sched else "\nno pg_cron schedules (pgmem jobs schedule installs them)")
        for s in sched:
            print(f"  {s[0]:<28} {s[1]:<14} {s[2]}{'' if s[3] else '  (inactive)'}")
    except PgmemError as e:
        print(f"\n({e})")
    return 0


def register_jobs(sub) -> None:
    p = sub.add_parser("jobs", help="maintenance jobs: run now, schedule with pg_cron, status")
    js = p.add_subparsers(dest="jobs_command", required=True)
    r = js.add_parser("run", help="run a job now (one batch; CALL pgmem.run_job for a full run)")
    r.add_argument("job", choices=sorted(JOB_COLUMNS))
    r.add_argument("--dry-run", action="store_true", help="list what would change, change nothing")
    r.add_argument("--param", action="append", metavar="NAME=VALUE", help="job argument, e.g. threshold=0.8")
    r.add_argument("--tenant", default=None)
    r.set_defaults(func=cmd_jobs_run)
    s = js.add_parser("schedule", help="install pg_cron schedules (also from another database than pg_cron's)")
    s.add_argument("--merge", default="0 * * * *")
    s.add_argument("--prune", default="15 3 * * *")
    s.add_argument("--archive", default="30 3 * * *")
    s.add_argument("--tune", default="45 3 * * *")
    s.add_argument("--purge", default=None)
    s.set_defaults(func=cmd_jobs_schedule)
    js.add_parser("unschedule", help="remove pgmem's pg_cron schedules").set_defaults(func=cmd_jobs_unschedule)
    js.add_parser("status", help="latest run of each job, and the schedules").set_defaults(func=cmd_jobs_status)
    v = js.add_parser("vacuum", help="VACUUM (ANALYZE) pgmem's tables now (what the nightly vacuum schedule runs)")
    v.add_argument("--reindex", action="store_true", help="also REINDEX CONCURRENTLY the invalid indexes compact reports")
    v.set_defaults(func=cmd_jobs_vacuum)


# ------------------------------------------------------------------------------ layered tiers
# layered-memory-architecture.md (issue 15): one chat turn's context, the assistant's reply,
# profile facts, insights, and what is stored about a user.
def _stage_line(s: dict) -> str:
    name = s.get("stage")
    rest = {k: v for k, v in s.items() if k != "stage" and v not in (None, [], {})}
    if name == "state":
        rest = {k: rest[k] for k in ("message_count", "current_topic", "emotional_tone", "interaction_pattern",
                                     "precision_mode", "dynamic_personality_mode", "topic_similarity") if k in rest}
    return f"{name:<11} " + ", ".join(f"{k}={_fmt(v, 60)}" for k, v in rest.items())


def cmd_context(args) -> int:
    with _client(args) as mem:
        r = mem.context_for(args.text, conversation_id=args.conversation, user_id=args.user, k=args.k,
                            remember=not args.no_remember)
    if args.json:
        print(json.dumps(r.doc, default=str, indent=2))
        return 0
    for s in r.stages:
        print(_stage_line(s))
    ctx = r.context
    print()
    if ctx.get("behaviour_context"):
        print(f"behaviour: {ctx['behaviour_context']}")
    for h in ctx.get("history") or []:
        print(f"history    {h['seq']:>3} {h['role']:<9} ({h['why']}) {_fmt(h['content'], 80)}")
    for m in ctx.get("memories") or []:
        print(f"memory     {m['id']:>5} {m['score']:.3f} {_fmt(m['content'], 80)}")
    for q in ctx.get("qa_history") or []:
        print(f"earlier Q  {q['similarity']:.3f} {_fmt(q['question'], 50)} -> {_fmt(q['answer'], 40)}")
    if ctx.get("profile"):
        print("profile    " + ", ".join(f"{k}={v}" for k, v in ctx["profile"].items()))
    if ctx.get("privacy"):
        print(json.dumps(ctx["privacy"], default=str, indent=2))
    return 0


def cmd_reply(args) -> int:
    with _client(args) as mem:
        out = mem.observe_reply(args.conversation, args.text, remember=not args.no_remember)
    print(json.dumps(out, default=str))
    return 0


def cmd_profile(args) -> int:
    with _client(args, embed=False) as mem:
        if args.history:
            print_table(mem.fact_history(args.user, args.key),
                        ["fact_id", "key", "value", "valid_from", "valid_to", "status", "source", "statement"],
                        {"statement": 40, "value": 30})
            return 0
        facts = mem.profile(args.user, as_of=args.as_of, known_at=args.known_at)
    print(json.dumps(facts, default=str, indent=None if args.json else 2))
    return 0


def cmd_fact(args) -> int:
    if args.end:
        with _client(args, embed=False) as mem:
            print(json.dumps(mem.end_fact(args.user, args.key, valid_to=args.valid_from), default=str))
        return 0
    if args.value is None:
        raise PgmemError("give the fact's value (or --end to end it)")
    try:
        value = json.loads(args.value)
    except json.JSONDecodeError:
        value = args.value  # a plain word is a string
    with _client(args, embed=False) as mem:
        out = mem.set_fact(args.user, args.key, value, valid_from=args.valid_from, statement=args.statement)
    print(json.dumps(out, default=str))
    return 0


def cmd_insights(args) -> int:
    with _client(args) as mem:
        hits = mem.search_insights(args.query, user_id=args.user, k=args.k, types=args.type)
    print_table(hits, ["id", "type", "confidence", "score", "thread_label", "content"], {"content": 70, "thread_label": 24})
    return 0


def cmd_mydata(args) -> int:
    if args.erase and not args.yes:
        raise PgmemError(f"erase deletes everything stored about {args.user!r} for good: add --yes to confirm")
    with _client(args, embed=False) as mem:
        if args.erase:
            out = mem.erase_user(args.user)
        elif args.export:
            out = mem.export_user(args.user)
        else:
            out = mem.user_data(args.user)
    print(json.dumps(out, default=str, indent=None if args.erase else 2))
    return 0


def register_layered(sub) -> None:
    def common(p):
        p.add_argument("--tenant", default=None, help="tenant (default: PGMEM_TENANT or 'default')")

    p = sub.add_parser("context", help="one chat turn through the layered pipeline (pgmem.context_for): stages and context")
    p.add_argument("text", help="the user's message")
    p.add_argument("--conversation", required=True, help="conversation id (one per chat session)")
    p.add_argument("--user", help="user id (profile facts, privacy)")
    p.add_argument("--k", type=int, help="at most this many memories (default: the token budget, context_memory_tokens, at the behaviour mode's depth)")
    p.add_argument("--no-remember", action="store_true", help="do not store the message as an episodic memory")
    p.add_argument("--json", action="store_true", help="the whole document")
    common(p)
    p.set_defaults(func=cmd_context)

    p = sub.add_parser("reply", help="record the assistant's reply (thread, insights, concepts)")
    p.add_argument("text")
    p.add_argument("--conversation", required=True)
    p.add_argument("--no-remember", action="store_true")
    common(p)
    p.set_defaults(func=cmd_reply)

    p = sub.add_parser("profile", help="a user's profile facts (now, --as-of a time, or --history)")
    p.add_argument("user")
    p.add_argument("--as-of", help="the facts in force then (ISO time)")
    p.add_argument("--known-at", help="as pgmem knew them then (ISO time)")
    p.add_argument("--history", action="store_true", help="every row ever recorded, with both times")
    p.add_argument("--key", help="with --history: one key")
    p.add_argument("--json", action="store_true")
    common(p)
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("fact", help="set (or --end) a user's profile fact; the old value is kept")
    p.add_argument("user")
    p.add_argument("key")
    p.add_argument("value", nargs="?", help="JSON, or a plain word")
    p.add_argument("--valid-from", help="when it became true (ISO time; default now); with --end: when it stopped")
    p.add_argument("--statement", help="the words that stated it")
    p.add_argument("--end", action="store_true", help="end the fact without a new value")
    common(p)
    p.set_defaults(func=cmd_fact)

    p = sub.add_parser("insights", help="research insights across every thread")
    p.add_argument("query")
    p.add_argument("--user")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--type", action="append", choices=["decision", "conclusion", "hypothesis", "open_question", "observation"])
    common(p)
    p.set_defaults(func=cmd_insights)

    p = sub.add_parser("mydata", help="what is stored about a user, tier by tier (--export everything, --erase it)")
    p.add_argument("user")
    p.add_argument("--export", action="store_true")
    p.add_argument("--erase", action="store_true")
    p.add_argument("--yes", action="store_true", help="confirm --erase")
    common(p)
    p.set_defaults(func=cmd_mydata)

