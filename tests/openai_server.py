"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the tests (no mock of the client):

* ``POST /v1/embeddings``: real all-MiniLM-L6-v2 vectors (the int8 ONNX build, 384-d); with
  ``dimensions`` (or the server's ``dims``) above 384 the vector is repeated to that length,
  which keeps every cosine (a stand-in for a 1536-d model that still means something);
* ``POST /v1/chat/completions``: a deterministic assistant that answers from the request
  (it quotes the user messages it was sent, so a test sees what history reached the model);
* scripted failures: ``fail`` is a list of (status, headers, body) answered before the real
  ones, ``delay`` seconds of sleep before answering (timeouts).

Every request is recorded in ``requests`` (path, JSON body, headers).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


class OpenAIServer:
    def __init__(self, *, dims: int | None = None, api_key: str | None = None):
        from pgmem.embedding import OnnxEmbedder

        self.embedder = OnnxEmbedder(cache_size=0)
        self.dims = dims
        self.api_key = api_key
        self.requests: list[dict] = []
        self.fail: list[tuple[int, dict, str]] = []
        self.delay = 0.0
        # scripted chat answers (else the quoting assistant): a text, or {"tool_call": {"name": ...,
        # "arguments": {...}}} for a call of the agent's tool
        self.chat_answers: list = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _send(self, status: int, body: dict | str, headers: dict | None = None):
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                if server.delay:
                    time.sleep(server.delay)
                if server.fail:
                    status, headers, text = server.fail.pop(0)
                    return self._send(status, text, headers)
                if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    return self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
                if self.path.rstrip("/").endswith("/embeddings"):
                    return self._send(200, server.embeddings(body))
                if self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(200, server.chat(body))
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    # ------------------------------------------------------------------ answers
    def embeddings(self, body: dict) -> dict:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vecs = self.embedder.embed_many(texts)
        want = body.get("dimensions") or self.dims
        if want and want != vecs.shape[1]:
            reps = -(-want // vecs.shape[1])
            vecs = np.tile(vecs, (1, reps))[:, :want]
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return {"object": "list", "model": body.get("model"),
                "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)],
                "usage": {"prompt_tokens": 0, "total_tokens": 0}}

    def chat(self, body: dict) -> dict:
        users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
        users = [u if isinstance(u, str) else " ".join(p.get("text", "") for p in u if isinstance(p, dict)) for u in users]
        answer = self.chat_answers.pop(0) if self.chat_answers else "I heard: " + " | ".join(users)
        if isinstance(answer, dict) and "tool_call" in answer:  # a scripted call of the agent's tool
            call = answer["tool_call"]
            message = {"role": "assistant", "content": None,
                       "tool_calls": [{"id": f"call_{len(self.requests)}", "type": "function",
                                       "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": answer}, "stop"
        return {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "test-model"),
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    def paths(self, suffix: str) -> list[dict]:
        return [r for r in self.requests if r["path"].rstrip("/").endswith(suffix)]
