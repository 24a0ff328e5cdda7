"""One conversation, many writers (issue 27, M3).

Before: 4 workers x 200 operations on one conversation (context_for for a user message,
observe_reply for the assistant's) ended with 109 of 200 observe_reply and 31 of 200
context_for calls failing with 40P01: context_for locked the user's write lock (remember) and
then the conversation (observe_turn); observe_reply the conversation and then the write lock.
Both now take the conversation first. The same workload ends with no error at all, and every
call's message is in the conversation, numbered without gap or repeat.
"""
from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import psycopg
import pytest

from conftest import DIM, connect

WORKERS = 4
OPS = 200


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


@pytest.mark.slow
def test_context_for_and_observe_reply_on_one_conversation_never_deadlock(dsn):
    with connect(dsn) as c:
        c.execute("select pgmem.context_for('Hello, I am starting a conversation.', conversation_id => 'conv', "
                  "user_id => 'u1')")
    errors: Counter = Counter()
    done: Counter = Counter()
    lock = threading.Lock()

    def worker(w: int) -> None:
        rng = np.random.default_rng(w)
        with connect(dsn) as c:
            c.execute("set statement_timeout = '60s'")
            for j in range(OPS):
                try:
                    if (w + j) % 2 == 0:
                        c.execute("select pgmem.context_for(%s, %s::vector, conversation_id => 'conv', user_id => 'u1')",
                                  (f"Worker {w} asks question {j} about the garden and the harbor", unit(rng)))
                        kind = "context_for"
                    else:
                        c.execute("select pgmem.observe_reply('conv', %s, %s::vector)",
                                  (f"Worker {w} answers {j}: water the plants twice a week", unit(rng)))
                        kind = "observe_reply"
                    with lock:
                        done[kind] += 1
                except psycopg.Error as e:
                    with lock:
                        errors[(e.sqlstate, str(e).splitlines()[0][:120])] += 1

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not any(t.is_alive() for t in threads)
    assert errors == Counter(), errors              # no 40P01, nor anything else
    assert done == {"context_for": WORKERS * OPS // 2, "observe_reply": WORKERS * OPS // 2}
    with connect(dsn) as c:
        seqs = [r[0] for r in c.execute("select seq from pgmem.messages where conversation_id = 'conv' order by seq")]
        roles = Counter(r[0] for r in c.execute("select role from pgmem.messages where conversation_id = 'conv'"))
    # nothing lost: one message per call (and the first context_for's), numbered 1..n
    assert seqs == list(range(1, WORKERS * OPS + 2))
    assert roles == {"user": WORKERS * OPS // 2 + 1, "assistant": WORKERS * OPS // 2}
