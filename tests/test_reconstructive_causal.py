"""Causal bindings judged by an LLM (pgmem.causal.link_causes): a real OpenAI-compatible HTTP
server on 127.0.0.1 answers, the database records the judgements."""
from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import pytest

from pgmem import MemoryClient
from pgmem.causal import SYSTEM_PROMPT, link_causes
from pgmem.extraction import LLMExtractor

T0 = datetime(2026, 4, 1, 10, tzinfo=timezone.utc)


@pytest.fixture
def judge():
    """A chat-completions server: A mentions rain -> B is its effect; B says 'because' -> B
    explains A; a turn with 'boom' -> HTTP 500; otherwise not causal."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            pair = json.loads(body["messages"][1]["content"])
            a, b = pair["A"]["text"], pair["B"]["text"]
            if "boom" in a + b:
                status, answer = 500, None
            elif "rain" in a:
                status, answer = 200, {"causal": True, "direction": "forward", "confidence": 0.9}
            elif "because" in b:
                status, answer = 200, {"causal": "true", "direction": "backward", "confidence": "0.7"}
            else:
                status, answer = 200, {"causal": False, "direction": "forward", "confidence": 0.8}
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": json.dumps(answer)}}]}
                              if answer else {"error": "boom"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()
    server.server_close()


def test_an_llm_judges_consecutive_turns(conn, dsn, judge):
    url, seen = judge
    texts = ["The rain flooded the road", "We took the bus instead", "I bought a new umbrella",
             "It was raining all week because of the storm front", "The boom of thunder woke us", "Nice weather today"]
    ids = [conn.execute("select memory_id from pgmem.remember(%s, session_id => 's', created_at => %s, force => true)",
                        (t, T0 + timedelta(minutes=i))).fetchone()[0] for i, t in enumerate(texts)]
    mem = MemoryClient(dsn, tenant="acme", embedder=None)
    try:
        llm = LLMExtractor(base_url=url, model="judge-1", retries=1, backoff=0.01)
        got = link_causes(mem, llm, batch=2)
        # pairs: (0,1) rain -> causal; (1,2) no; (2,3) because -> backward; (3,4), (4,5): boom -> 500
        assert got == {"judged": 3, "causal": 2, "failed": 2}
        causal = {(r[0], r[1]): r[2:] for r in conn.execute(
            "select src_id, dst_id, weight, metadata from pgmem.links where kind = 'causal'")}
        assert set(causal) == {(ids[0], ids[1]), (ids[3], ids[2])}
        assert causal[(ids[0], ids[1])][0] == pytest.approx(0.9)
        assert causal[(ids[3], ids[2])][1] == {"method": "llm", "model": "judge-1", "cause": ids[3], "effect": ids[2]}
        judged = dict(conn.execute("select dst_id, metadata->'causal_judged' from pgmem.links where kind = 'temporal'"))
        assert judged[ids[2]] == {"method": "llm", "model": "judge-1", "causal": False, "confidence": 0.8}
        assert judged[ids[4]] is None and judged[ids[5]] is None  # not answered: judged again later
        assert seen[0]["model"] == "judge-1" and seen[0]["messages"][0]["content"] == SYSTEM_PROMPT
        # a second run asks only about what is left, and the cue-phrase bindings are not asked about again
        n = len(seen)
        assert link_causes(mem, llm) == {"judged": 0, "causal": 0, "failed": 2}
        assert len(seen) - n == 4  # two pairs, each tried twice (retries=1)
    finally:
        mem.close()


def test_record_causal_rejects_what_it_cannot_record(conn):
    a, b = [conn.execute("select memory_id from pgmem.remember(%s, session_id => 's', force => true)", (t,)).fetchone()[0]
            for t in ("first turn", "second turn")]
    for items, msg in (('{"x": 1}', "expects a JSON array"),
                       (f'[{{"first_id": {b}, "second_id": {a}, "causal": true}}]', "no temporal binding"),
                       (f'[{{"first_id": {a}, "second_id": {b}, "causal": "maybe"}}]', '"causal": true|false'),
                       (f'[{{"first_id": {a}, "second_id": {b}, "causal": true, "confidence": 3}}]', "confidence must be between 0 and 1")):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=msg):
            conn.execute("select pgmem.record_causal(%s::jsonb)", (items,))
    assert conn.execute("select count(*) from pgmem.causal_candidates()").fetchone()[0] == 1
