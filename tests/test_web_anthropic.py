"""The chat's native Anthropic client (issue 36, L35), against a local server speaking
Anthropic's Messages API (POST /v1/messages: x-api-key, anthropic-version, a top-level system,
alternating turns, max_tokens; batch answers and the SSE events content_block_delta ...
message_stop), through pgmem serve's chat."""
from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import TEMPLATE, _janitor
from webhelpers import Running, embedder, request  # noqa: F401  (fixtures)

KEY = "sk-ant-test-key-0001"


class AnthropicServer:
    def __init__(self):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _json(self, status: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                       "body": body})
                if self.path != "/v1/messages":
                    return self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
                if self.headers.get("x-api-key") != KEY:
                    return self._json(401, {"type": "error", "error": {"type": "authentication_error",
                                                                       "message": "invalid x-api-key SECRET-DETAIL"}})
                if not self.headers.get("anthropic-version") or "max_tokens" not in body:
                    return self._json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                       "message": "missing header or max_tokens"}})
                roles = [m["role"] for m in body["messages"]]
                if roles[0] != "user" or any(a == b for a, b in zip(roles, roles[1:])) or "system" in roles:
                    return self._json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                       "message": f"bad roles {roles}"}})
                text = "Claude heard: " + body["messages"][-1]["content"]
                if not body.get("stream"):
                    return self._json(200, {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                                            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()

                def event(name, data):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

                event("message_start", {"type": "message_start", "message": {"id": "msg_2", "content": []}})
                event("content_block_start", {"type": "content_block_start", "index": 0,
                                              "content_block": {"type": "text", "text": ""}})
                event("ping", {"type": "ping"})
                for w in text.split(" "):
                    event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                  "delta": {"type": "text_delta", "text": w + " "}})
                event("content_block_stop", {"type": "content_block_stop", "index": 0})
                event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
                event("message_stop", {"type": "message_stop"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def claude():
    s = AnthropicServer()
    yield s
    s.close()


@pytest.fixture(scope="module")
def db(cluster):
    j = _janitor(cluster, f"t_webant_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    from pgmem.mcp_server import TokenStore

    store = TokenStore(tmp_path_factory.mktemp("webant") / "tokens.json")
    return {"path": store.path, "maya": store.add("acme", "maya")}


def test_url_and_provider():
    from pgmem.web.llm import ChatModel

    assert ChatModel("https://api.anthropic.com", "claude").url == "https://api.anthropic.com/v1/messages"
    assert ChatModel("https://api.anthropic.com/v1", "claude").anthropic
    assert not ChatModel("https://api.openai.com/v1", "gpt").anthropic
    assert ChatModel("http://127.0.0.1:9/v1", "c", provider="anthropic").url == "http://127.0.0.1:9/v1/messages"


def test_chat_through_the_messages_api(db, tokens, embedder, claude):
    from pgmem.web.app import build_app
    from pgmem.web.llm import ChatModel

    app = build_app(db, token_file=tokens["path"], embedder=embedder, mcp=False,
                    model=ChatModel(claude.url, "claude-test", KEY, provider="anthropic"))
    srv = Running(app)
    try:
        maya = tokens["maya"]
        request(srv.url + "/api/remember", "POST", {"content": "My dog Pixel is a border collie"}, maya)
        st, _, got = request(srv.url + "/api/chat", "POST", {"message": "What breed is Pixel?", "conversation_id": "c1"}, maya)
        assert st == 200 and got["content"] == "Claude heard: What breed is Pixel?", got
        sent = claude.requests[-1]
        assert sent["path"] == "/v1/messages" and sent["headers"]["x-api-key"] == KEY
        assert sent["headers"]["anthropic-version"] and "authorization" not in sent["headers"]
        body = sent["body"]
        assert body["model"] == "claude-test" and body["max_tokens"] == 1024 and "border collie" in body["system"]
        assert [m["role"] for m in body["messages"]][-1] == "user"
        # a second turn: the history alternates user / assistant
        st, _, text = request(srv.url + "/api/chat", "POST", {"message": "And its age?", "conversation_id": "c1",
                                                              "stream": True}, maya)
        assert st == 200 and '"finishReason":"stop"' in text, text
        tokens_text = "".join(json.loads(line[len("data: 0:"):]) for line in text.splitlines()
                              if line.startswith("data: 0:"))
        assert tokens_text.strip() == "Claude heard: And its age?"
        roles = [m["role"] for m in claude.requests[-1]["body"]["messages"]]
        assert roles[0] == "user" and all(a != b for a, b in zip(roles, roles[1:])) and len(roles) >= 3
        # a refused key: 502 naming the provider's status, not its body
        bad = Running(build_app(db, token_file=tokens["path"], embedder=embedder, mcp=False,
                                model=ChatModel(claude.url, "claude-test", "sk-ant-wrong-key", provider="anthropic")))
        try:
            st, _, got = request(bad.url + "/api/chat", "POST", {"message": "hi"}, maya)
            assert st == 502 and "HTTP 401" in got["message"] and "SECRET-DETAIL" not in got["message"], got
        finally:
            bad.stop()
    finally:
        srv.stop()
