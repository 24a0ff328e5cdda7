#!/usr/bin/env python
"""A shared conversation (a group chat, an agent team): W writers call context_for on ONE
conversation at once, N messages each (issue 35, L7: at least 10 messages/s with 4 writers).

    .venv/bin/python bench/shared_conversation.py --writers 4 --messages 10

Runs against the embedded cluster (PGMEM_HOME) in a tenant of its own, with the int8 ONNX
embedder; prints messages/s and the mean call time, and appends the figure with the load
average to bench/results/shared-conversation-<timestamp>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(HERE.parent / "python"))


def main(argv=None) -> int:
    from pgmem import MemoryClient
    from pgmem.cluster import default_cluster

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--messages", type=int, default=10, help="messages per writer")
    args = ap.parse_args(argv)
    c = default_cluster()
    c.start()
    c.wait_ready()
    dsn = c.owner_dsn()
    tenant = "shared-" + uuid.uuid4().hex[:8]
    warm = MemoryClient(dsn, tenant=tenant, embedder="onnx")
    warm.context_for("warm up", conversation_id="warm", user_id="team")
    warm.close()
    took: dict[int, float] = {}
    errors: list[str] = []

    def writer(i: int) -> None:
        m = MemoryClient(dsn, tenant=tenant, embedder="onnx")
        t = time.perf_counter()
        try:
            for j in range(args.messages):
                m.context_for(f"Writer {i} says: note {j} about the garden plan and the seeds for bed {j}",
                              conversation_id="group", user_id="team")
        except Exception as e:  # reported, and the run fails
            errors.append(f"writer {i}: {e}")
        took[i] = time.perf_counter() - t
        m.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    n = args.writers * args.messages
    out = {"writers": args.writers, "messages": n, "wall_s": round(wall, 2), "messages_per_s": round(n / wall, 1),
           "mean_call_ms": round(sum(took.values()) / n * 1000, 1), "loadavg_start": load0,
           "loadavg_end": os.getloadavg()[0], "errors": errors,
           "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    print(json.dumps(out))
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    (res / f"shared-conversation-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json").write_text(json.dumps(out, indent=1))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
