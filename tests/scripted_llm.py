"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (a real HTTP server, no
mock of the client): a test queues answers (status, body, delay) and reads the request log.
The ``llm`` fixture serves one per test (tests/test_extraction.py, test_layered_pipeline.py,
test_layered_profile.py import it from here).

    def test_x(llm):
        llm.answer(200, completion('{"who": "user"}'))
        ... LLMExtractor(base_url=llm.base_url) ...
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["FakeLLM", "completion", "llm"]


class FakeLLM:
    """State of the fake OpenAI-compatible server: a script of answers and a request log."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: list[tuple[int, Any, float]] = []  # (status, body, delay seconds)
        self.lock = threading.Lock()
        self.base_url = ""

    def answer(self, status: int = 200, body: Any = None, delay: float = 0.0) -> None:
        self.script.append((status, body, delay))

    def next(self) -> tuple[int, Any, float]:
        with self.lock:
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def completion(content: str) -> dict[str, Any]:
    return {"id": "cmpl-1", "object": "chat.completion", "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}]}


@pytest.fixture
def llm():
    state = FakeLLM()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server API
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.lock:
                state.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(raw or b"null")})
            if self.path != "/v1/chat/completions":
                status, body, delay = 404, {"error": "not found"}, 0.0
            else:
                status, body, delay = state.next()
            if callable(body):  # an answer made from the request (e.g. naming what it was shown)
                body = body(json.loads(raw or b"null"))
            time.sleep(delay)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (timeout test)
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()
