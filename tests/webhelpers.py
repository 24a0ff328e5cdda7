"""What the tests of ``pgmem serve`` share (tests/test_web_api.py, tests/test_web_browser.py):
a local OpenAI-compatible chat server (batch and streamed), uvicorn serving an app in a thread,
one real HTTP request, the app, and the module-scoped fixtures ``llm`` and ``embedder``.
"""
from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["FakeLLM", "Running", "request", "free_port", "make_app", "llm", "embedder"]


# ------------------------------------------------------------------------------ a local LLM server
class FakeLLM:
    """An OpenAI-compatible chat-completions server on 127.0.0.1: answers from what the prompt
    holds (the first line under HIGHLY RELEVANT MEMORIES), streamed as SSE chunks when asked;
    records every request (headers and payload)."""

    def __init__(self):
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.delay = 0.0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "authorization": self.headers.get("Authorization"),
                                       "payload": body})
                if outer.delay:
                    time.sleep(outer.delay)
                if outer.status != 200:
                    self.send_response(outer.status)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(json.dumps({"error": {"message": "the fake model is down"}}).encode())
                    return
                reply = outer.answer(body["messages"])
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    words = reply.split(" ")
                    for i, w in enumerate(words):
                        piece = w if i == len(words) - 1 else w + " "
                        chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                out = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @staticmethod
    def answer(messages: list[dict]) -> str:
        for m in messages:
            if m["role"] == "system" and m["content"].startswith("HIGHLY RELEVANT MEMORIES:"):
                first = m["content"].splitlines()[1].split("] ", 1)[1]
                return f"From memory: {first}"
        return "I have no memory of that."

    def last_system_text(self) -> str:
        return "\n".join(m["content"] for m in self.requests[-1]["payload"]["messages"] if m["role"] == "system")

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def llm():
    server = FakeLLM()
    yield server
    server.close()


# ------------------------------------------------------------------------------ the server
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Running:
    """uvicorn serving an app in a thread of this process (so the test shares its embedder)."""

    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=20)


def request(url: str, method: str = "GET", body: Any = None, token: str | None = None,
            headers: dict | None = None, raw: bytes | None = None) -> tuple[int, dict, Any]:
    """(status, headers, JSON or text) of one real HTTP request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Content-Type": "application/json"} if data is not None else {}
    if token:
        h["Authorization"] = f"Bearer {token}"
    h.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=60) as r:
            status, hdrs, text = r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        status, hdrs, text = e.code, dict(e.headers), e.read().decode()
    try:
        return status, hdrs, json.loads(text)
    except ValueError:
        return status, hdrs, text


@pytest.fixture(scope="module")
def embedder():
    from pgmem.embedding import Embedder

    e = Embedder()
    e.embed("warm up")
    return e


def make_app(db, tokens, embedder, llm, **kw):
    from pgmem.web.app import build_app
    from pgmem.web.llm import ChatModel

    kw.setdefault("model", ChatModel(llm.url, "fake-model"))
    return build_app(db, token_file=tokens["path"], embedder=embedder, **kw)
