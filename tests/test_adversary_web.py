"""Attacks on ``pgmem serve`` (issue 35): one tenant's chats against a hostile LLM must not
stall the server for anyone else (H1), a token bound to a user stays in its lane (M4), and
malformed input is a 4xx naming the problem, never a 500 (L2).

The hostile LLM is a real HTTP server on 127.0.0.1 (:class:`HostileLLM`): *trickle* sends a
token every 50 ms forever (a slow or endless reply), *stall* sends its headers and then
nothing, *huge* answers a 60 MB body. It records when the server closed its connection.
"""
from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import TEMPLATE, _janitor
from webhelpers import Running, embedder, request  # noqa: F401  (fixtures)


# ------------------------------------------------------------------------------ the hostile LLM
class HostileLLM:
    def __init__(self):
        self.mode = "trickle"
        self.requests: list[dict] = []
        self.open = 0          # connections being answered now
        self.closed_by_peer = 0  # answers cut short because pgmem serve closed the connection
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                with outer.lock:
                    outer.open += 1
                try:
                    self.answer(body)
                except (BrokenPipeError, ConnectionResetError):
                    with outer.lock:
                        outer.closed_by_peer += 1
                finally:
                    with outer.lock:
                        outer.open -= 1
                    self.close_connection = True

            def answer(self, body):
                mode = outer.mode
                if mode == "huge":
                    text = "x" * (60 << 20)
                    out = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})
                    data = out.encode()
                    del out, text
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    for i in range(0, len(data), 1 << 20):
                        self.wfile.write(data[i:i + (1 << 20)])
                    return
                if mode == "huge_line":  # one SSE line with no end
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    self.wfile.write(b"data: ")
                    for _ in range(64):
                        self.wfile.write(b"y" * (1 << 20))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" if body.get("stream") else "application/json")
                self.end_headers()
                self.wfile.flush()
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    time.sleep(0.05)
                    if mode == "stall":
                        self.wfile.write(b"")  # nothing: a write of nothing never fails
                        continue
                    if body.get("stream"):
                        chunk = {"choices": [{"index": 0, "delta": {"content": "more "}}]}
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    else:
                        self.wfile.write(b" ")  # a JSON body that never ends
                    self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait(self, what, timeout: float = 10.0) -> bool:
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            if what():
                return True
            time.sleep(0.05)
        return False

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def hostile():
    server = HostileLLM()
    yield server
    server.close()


@pytest.fixture(scope="module")
def db(cluster):
    j = _janitor(cluster, f"t_advweb_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    from pgmem.mcp_server import TokenStore

    store = TokenStore(tmp_path_factory.mktemp("advweb") / "tokens.json")
    return {"path": store.path, "a": store.add("web_a"), "a2": store.add("web_a"), "maya": store.add("web_a", "maya"),
            "b": store.add("web_b")}


def small_pool(app, threads: int = 4):
    """The app with AnyIO's shared pool scaled to ``threads`` (the probe's setting)."""
    import anyio.to_thread

    async def wrapped(scope, receive, send):
        if scope["type"] == "lifespan":
            anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        await app(scope, receive, send)
    return wrapped


@pytest.fixture(scope="module")
def web(db, tokens, embedder, hostile):
    from pgmem.web.app import build_app
    from pgmem.web.llm import ChatModel

    model = ChatModel(hostile.url, "hostile", deadline=4.0, timeout=3.0)
    app = build_app(db, token_file=tokens["path"], embedder=embedder, model=model, mcp=False,
                    chats_per_token=2, chats_per_tenant=3, chat_threads=6)
    running = Running(small_pool(app))
    yield running
    running.stop()


def start_chat(url: str, token: str, message: str, *, stream: bool = True) -> http.client.HTTPConnection:
    """A chat request whose answer is left unread (the client holds, or drops, the connection)."""
    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", "/api/chat", json.dumps({"message": message, "conversation_id": f"c-{uuid.uuid4().hex[:8]}",
                                                  "stream": stream}),
                 {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    return conn


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# ------------------------------------------------------------------------------ H1
def test_h1_slow_chats_of_one_tenant_do_not_stall_another(web, tokens, hostile):
    """Tenant A's chats hang on a trickling LLM; with the routes' pool at 4 threads, tenant B's
    requests are answered meanwhile, and A's chats past its limit are 429."""
    hostile.mode = "trickle"
    held = [start_chat(web.url, tokens["a"], "tell me everything"), start_chat(web.url, tokens["a"], "and more"),
            start_chat(web.url, tokens["a2"], "a third one")]
    try:
        responses = [c.getresponse() for c in held]
        assert all(r.status == 200 for r in responses), [(r.status, r.read(500)) for r in responses]
        for r in responses:
            r.read(200)  # the stream has begun: the LLM is trickling
        assert hostile.wait(lambda: hostile.open >= 3)
        st, hdrs, got = request(web.url + "/api/chat", "POST", {"message": "one more", "stream": True}, tokens["a2"])
        assert st == 429 and got["error"] == "too_many_chats" and "web_a" in got["message"] and hdrs["retry-after"]
        for path in ("/api/session", "/api/jobs", "/api/stats", "/api/session", "/api/jobs"):
            t0 = time.monotonic()
            st, _, got = request(web.url + path, token=tokens["b"])
            assert st == 200, (path, got)
            assert time.monotonic() - t0 < 10
    finally:
        for c in held:
            c.close()
    # the dropped streams closed their upstream connections, and freed their slots
    assert hostile.wait(lambda: hostile.open == 0, 5), hostile.open


def test_h1_upstream_is_closed_when_the_client_drops(web, tokens, hostile):
    for stream in (True, False):
        hostile.mode = "trickle"
        before = hostile.closed_by_peer
        n = len(hostile.requests)
        conn = start_chat(web.url, tokens["b"], "go on forever", stream=stream)
        assert hostile.wait(lambda n=n: len(hostile.requests) > n and hostile.open >= 1)
        time.sleep(0.3)
        conn.close()
        t0 = time.monotonic()
        assert hostile.wait(lambda before=before: hostile.closed_by_peer > before, 3), f"stream={stream}: upstream still open"
        assert time.monotonic() - t0 < 3
    # the slots came back: the token chats again (and meets the deadline, not a 429)
    hostile.mode = "stall"
    st, _, got = request(web.url + "/api/chat", "POST", {"message": "still there?"}, tokens["b"])
    assert st == 502 and got["error"] == "llm_unavailable"


def test_h1_deadline_ends_an_endless_reply(web, tokens, hostile):
    """deadline=4 s: an endless stream ends with an error part, a stalled batch call is 502."""
    for mode in ("trickle", "stall"):
        hostile.mode = mode
        t0 = time.monotonic()
        st, _, text = request(web.url + "/api/chat", "POST", {"message": "tell me a long story", "stream": True},
                              tokens["b"])
        took = time.monotonic() - t0
        assert st == 200 and took < 12, (mode, took)
        parts = [json.loads(line[len("data: 3:"):]) for line in text.splitlines() if line.startswith("data: 3:")]
        assert parts and ("within 4 s" in parts[0] or "sent nothing" in parts[0]), (mode, parts)
        assert '"finishReason":"error"' in text
        t0 = time.monotonic()
        st, _, got = request(web.url + "/api/chat", "POST", {"message": "and a short one"}, tokens["b"])
        assert st == 502 and got["error"] == "llm_unavailable" and time.monotonic() - t0 < 12, got
        assert "within" in got["message"] or "sent nothing" in got["message"]
    assert hostile.requests[-1]["max_tokens"] == 1024


def test_h1_huge_reply_is_the_upstreams_fault_and_rss_stays_flat(web, tokens, hostile):
    hostile.mode = "huge"
    request(web.url + "/api/session", token=tokens["b"])
    before = rss_mb()
    st, _, got = request(web.url + "/api/chat", "POST", {"message": "say a lot"}, tokens["b"])
    assert st == 502 and got["error"] == "llm_unavailable", got
    assert "more than 262144 bytes" in got["message"] and hostile.url in got["message"]
    st, _, text = request(web.url + "/api/chat", "POST", {"message": "say a lot, streamed", "stream": True}, tokens["b"])
    assert st == 200 and "more than 262144 bytes" in text
    hostile.mode = "huge_line"
    st, _, text = request(web.url + "/api/chat", "POST", {"message": "one long line", "stream": True}, tokens["b"])
    assert st == 200 and "more than 262144 bytes" in text
    grew = rss_mb() - before
    print(f"H1: RSS {before:.0f} MB before, grew {grew:.1f} MB over three 60 MB replies")
    assert grew < 60, f"RSS grew {grew:.0f} MB for a 60 MB reply"


# ------------------------------------------------------------------------------ M4
def test_m4_a_user_bound_token_stays_in_its_lane(web, tokens):
    """maya's token (tenant web_a, user maya) may not set or remove the tenant's LLM key, nor
    read the tenant-wide jobs, statistics, clusters or map: 403 naming why."""
    maya = tokens["maya"]
    attempts = [("/api/config/apikey", "POST", {"apiKey": "sk-maya-replaces-the-tenant-key"}),
                ("/api/config/apikey?provider=openai", "DELETE", None),
                ("/api/jobs", "GET", None), ("/api/stats", "GET", None), ("/api/clusters", "GET", None),
                ("/api/map", "GET", None), ("/api/map/project", "POST", {"method": "pca"})]
    for path, method, body in attempts:
        st, _, got = request(web.url + path, method, body, maya)
        assert st == 403 and got["error"] == "forbidden" and "whole tenant" in got["message"], (path, st, got)
    # the whole tenant's token may
    for path, method, body in attempts[2:]:
        assert request(web.url + path, method, body, tokens["a"])[0] == 200, path
    st, _, got = request(web.url + "/api/config/apikey", "POST", {"apiKey": "sk-tenant-key-0001"}, tokens["a"])
    assert st == 200 and got["success"] is True
    assert request(web.url + "/api/stats", token=tokens["a"])[2]["hasStoredApiKey"] is True
    # maya still reaches her own lane
    assert request(web.url + "/api/session", token=maya)[2]["user"] == "maya"
    assert request(web.url + "/api/profile/maya", token=maya)[0] == 200


# ------------------------------------------------------------------------------ M5
def test_m5_remember_takes_content_up_to_256_kb_with_extraction(web, tokens):
    """The heuristic extractor cuts what/why/how to 8 KB (max_field_bytes) as it cuts the
    summary: a 250 KB memory is stored through the web with extract=True."""
    from pgmem.extraction.heuristic import FIELD_BYTES, HeuristicExtractor

    words = " ".join(f"word{i}" for i in range(40000))
    text = ("I moved to Lisbon because " + words)[:250_000]
    ex = HeuristicExtractor().extract(text)
    assert len(ex.what.encode()) <= FIELD_BYTES and ex.what.endswith("…") and ex.what.startswith("I moved to Lisbon")
    assert ex.why is None or len(ex.why.encode()) <= FIELD_BYTES
    wide = "é" * 9000 + " ünïcödé"  # two bytes a letter: the cut counts bytes
    assert len(HeuristicExtractor().extract(wide).what.encode()) <= FIELD_BYTES
    st, _, got = request(web.url + "/api/remember", "POST", {"content": text, "extract": True}, tokens["b"])
    assert st == 200 and got["decision"] == "stored", got
    st, _, m = request(web.url + f"/api/memories/{got['id']}", token=tokens["b"])
    assert len(m["content"]) == len(text) and len(m["what"].encode()) <= FIELD_BYTES


# ------------------------------------------------------------------------------ L2
def _claim(exp) -> str:
    """A claim for tenant web_b signed with a made-up key, with the given exp."""
    import base64
    import hashlib
    import hmac

    def b64(d: bytes) -> str:
        return base64.urlsafe_b64encode(d).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps({"tenant": "web_b", "exp": exp}).encode())
    sig = b64(hmac.new(b"k" * 32, f"{head}.{body}".encode(), hashlib.sha256).digest())
    return f"{head}.{body}.{sig}"


@pytest.mark.parametrize("case", ["nan", "infinity", "nul", "surrogate", "pct00", "blank_chat", "crlf_key",
                                  "exp_1e300", "nul_search", "nan_metadata"])
def test_l2_malformed_input_is_a_4xx_naming_the_problem(web, tokens, case):
    b = tokens["b"]
    if case == "nan":
        st, _, got = request(web.url + "/api/remember", "POST", raw=b'{"content": "x", "importance": NaN}', token=b)
    elif case == "infinity":
        st, _, got = request(web.url + "/api/search", "POST", raw=b'{"query": "x", "k": Infinity}', token=b)
    elif case == "nul":
        st, _, got = request(web.url + "/api/remember", "POST", {"content": "null \u0000 byte"}, b)
    elif case == "surrogate":
        st, _, got = request(web.url + "/api/remember", "POST", raw=b'{"content": "lone \\ud800 surrogate"}', token=b)
    elif case == "pct00":
        st, _, got = request(web.url + "/api/profile/a%00b", token=b)
    elif case == "blank_chat":
        st, _, got = request(web.url + "/api/chat", "POST", {"message": "   \n\t "}, b)
    elif case == "crlf_key":
        st, _, got = request(web.url + "/api/chat", "POST", {"message": "hi", "apiKey": "sk-abc\r\nX-Evil: 1"}, b)
    elif case == "exp_1e300":
        st, _, got = request(web.url + "/api/session", token=_claim(1e300))
        assert st == 401, got
        return
    elif case == "nan_metadata":
        st, _, got = request(web.url + "/api/remember", "POST", raw=b'{"content": "x", "metadata": {"a": NaN}}', token=b)
    else:
        st, _, got = request(web.url + "/api/search", "POST", {"query": "a\u0000b"}, b)
    assert 400 <= st < 500, (case, st, got)
    assert isinstance(got, dict) and got.get("message"), got


# ------------------------------------------------------------------------------ L8
@pytest.mark.parametrize("bad", ["bob\u202eevil", "a\nb", "tab\there", "x\u2066y", "del\x7f"])
def test_l8_ids_with_control_or_bidi_characters_are_refused(web, tokens, bad):
    b = tokens["b"]
    for path, body in (("/api/remember", {"content": "something to keep", "user_id": bad}),
                       ("/api/chat", {"message": "hello", "conversation_id": bad}),
                       ("/api/context_for", {"query": "hello", "conversation_id": bad})):
        st, _, got = request(web.url + path, "POST", body, b)
        assert st == 422 and got["error"] == "invalid_request", (path, st, got)
    import urllib.parse

    st, _, got = request(web.url + "/api/profile/" + urllib.parse.quote(bad, safe=""), token=b)
    assert st == 422, got
    # an ordinary id with spaces, dots and letters of any script is fine
    assert request(web.url + "/api/profile/" + urllib.parse.quote("Zoë Ünal-李.2", safe=""), token=b)[0] == 200
