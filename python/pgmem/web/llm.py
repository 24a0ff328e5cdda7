"""The chat model: an OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM,
llama.cpp server, LM Studio all serve it), or Anthropic's Messages API (``provider=
"anthropic"``, or an anthropic.com URL), batch or streamed, with the standard library only.

Configured by ``OPENAI_BASE_URL``, ``OPENAI_MODEL`` and ``OPENAI_API_KEY``
(:func:`pgmem.config.openai_settings`), the names seeds/shadow-memory-system.md gives them; a
key a tenant stored with ``POST /api/config/apikey`` (pgmem.set_api_key), or one sent with a
chat request, takes the place of OPENAI_API_KEY for that call. A loopback server is reached
without any HTTP proxy. Errors name the server and the model, never the key, and never relay
the provider's own error body (it is logged).

Every call is bounded (issue 35, H1): ``max_tokens`` is sent, each read waits at most
``timeout`` seconds, the whole call at most ``deadline`` seconds, and a reply over
``max_reply_bytes`` is refused as the upstream's fault (502). An :class:`Upstream` handle lets
another thread close the connection (the client went away): the blocked read returns at once.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import PgmemError

log = logging.getLogger("pgmem.web.llm")

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
LINE_LIMIT = 1 << 20  # one SSE line (a chunk of a streamed reply) is far smaller
ANTHROPIC_VERSION = "2023-06-01"


class LLMError(PgmemError):
    """The chat model could not answer: the message names the server, the model and the fix."""


def is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Upstream:
    """The connection of one LLM call, closable from any thread (:meth:`abort`): the chat
    route aborts it when its client disconnects, and the call's deadline does too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.aborted: str | None = None   # why: "client gone", "deadline"
        self.closed = False

    def attach(self, resp: Any) -> None:
        sock = getattr(getattr(getattr(resp, "fp", None), "raw", None), "_sock", None)
        with self._lock:
            self._sock = sock if isinstance(sock, socket.socket) else None
            if self.aborted:
                self._shutdown()

    def abort(self, why: str = "client gone") -> None:
        with self._lock:
            if self.aborted is None:
                self.aborted = why
            self._shutdown()

    def _shutdown(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def set_read_timeout(self, seconds: float) -> None:
        with self._lock:
            if self._sock is not None:
                try:
                    self._sock.settimeout(max(0.01, seconds))
                except OSError:
                    pass


@dataclass(frozen=True)
class ChatModel:
    """One OpenAI-compatible chat endpoint and model. ``api_key`` may be None for a local server.
    ``timeout``: seconds one read may wait; ``deadline``: seconds the whole call may take;
    ``max_tokens``: sent with every request; ``max_reply_bytes``: the largest reply accepted
    (the documented content limit of a memory, which the reply becomes)."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    temperature: float | None = 0.7
    deadline: float = 120.0
    max_tokens: int | None = 1024
    max_reply_bytes: int = 262144
    provider: str = "auto"  # "openai" (chat completions), "anthropic" (Messages API), "auto": by the URL

    @classmethod
    def from_env(cls, api_key: str | None = None) -> "ChatModel":
        from ..config import openai_settings

        s = openai_settings()
        return cls(s["base_url"] or OPENAI_DEFAULT_URL, s["model"] or "gpt-4o-mini", api_key or s["api_key"])

    def with_key(self, api_key: str | None) -> "ChatModel":
        return self if not api_key else dataclasses.replace(self, api_key=api_key)

    def __repr__(self) -> str:  # never the key
        return f"ChatModel(base_url={self.base_url!r}, model={self.model!r}, key={'set' if self.api_key else 'none'})"

    @property
    def anthropic(self) -> bool:
        """Anthropic's Messages API: provider "anthropic", or "auto" and an anthropic.com URL."""
        if self.provider != "auto":
            return self.provider == "anthropic"
        host = urllib.parse.urlsplit(self.base_url).hostname or ""
        return host == "anthropic.com" or host.endswith(".anthropic.com")

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        if self.anthropic:
            if base.endswith("/messages"):
                return base
            return base + ("/messages" if base.endswith("/v1") else "/v1/messages")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    def _payload(self, messages: list[dict[str, Any]], stream: bool) -> tuple[dict[str, Any], dict[str, str]]:
        """The request body and headers: OpenAI's chat completions, or Anthropic's Messages API
        (the system messages joined into ``system``, the turns alternating from a user turn,
        ``max_tokens`` required, the key in ``x-api-key``)."""
        headers = {"Content-Type": "application/json", "User-Agent": "pgmem-serve",
                   "Accept": "text/event-stream" if stream else "application/json"}
        if not self.anthropic:
            payload: dict[str, Any] = {"model": self.model, "messages": messages, "stream": stream}
            if self.max_tokens:
                payload["max_tokens"] = self.max_tokens
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
        else:
            system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
            turns: list[dict[str, Any]] = []
            for m in messages:
                role = m.get("role")
                if role not in ("user", "assistant") or not m.get("content"):
                    continue
                if turns and turns[-1]["role"] == role:  # the API wants the roles to alternate
                    turns[-1]["content"] += "\n\n" + str(m["content"])
                else:
                    turns.append({"role": role, "content": str(m["content"])})
            if not turns or turns[0]["role"] != "user":
                turns.insert(0, {"role": "user", "content": "(the conversation so far)"})
            payload = {"model": self.model, "messages": turns, "stream": stream, "max_tokens": self.max_tokens or 1024}
            if system:
                payload["system"] = system
            headers["anthropic-version"] = ANTHROPIC_VERSION
            if self.api_key:
                headers["x-api-key"] = self.api_key
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        return payload, headers

    def check_key(self) -> None:
        """A hosted API needs a key: say where to put one before any request is made."""
        if not self.api_key and not is_loopback(self.url):
            raise LLMError(f"no API key for {self.base_url} (model {self.model}): set one with POST /api/config/apikey, "
                           "send apiKey with the chat request, or set OPENAI_API_KEY (or point OPENAI_BASE_URL at a "
                           "local server such as Ollama)")

    # ------------------------------------------------------------------ bounds
    def _too_slow(self, upstream: Upstream) -> LLMError:
        if upstream.aborted == "client gone":
            return LLMError(f"the chat call to {self.base_url} was closed: the client disconnected")
        return LLMError(f"the chat model at {self.base_url} (model {self.model}) did not finish its reply within "
                        f"{self.deadline:g} s: the provider is slow or stuck; try again, or use a faster model")

    def _too_big(self) -> LLMError:
        return LLMError(f"the chat model at {self.base_url} (model {self.model}) answered more than "
                        f"{self.max_reply_bytes} bytes, the largest reply pgmem serve accepts: the provider ignored "
                        "max_tokens; lower it or check the server")

    def _open(self, messages: list[dict[str, Any]], stream: bool, upstream: Upstream):
        self.check_key()
        payload, headers = self._payload(messages, stream)
        req = urllib.request.Request(self.url, data=json.dumps(payload).encode(), headers=headers, method="POST")
        opener = (urllib.request.build_opener(urllib.request.ProxyHandler({})) if is_loopback(self.url)
                  else urllib.request.build_opener())
        ends = time.monotonic() + self.deadline
        # the deadline holds while the request waits for its headers too: a timer aborts it
        timer = threading.Timer(self.deadline, upstream.abort, kwargs={"why": "deadline"})
        timer.daemon = True
        timer.start()
        try:
            resp = opener.open(req, timeout=min(self.timeout, self.deadline))
        except urllib.error.HTTPError as e:
            try:
                detail = e.read(300).decode("utf-8", "replace").strip()
            except Exception:
                detail = ""
            if self.api_key:
                detail = detail.replace(self.api_key, "<key>")
            # the provider's body is logged, not relayed: it may echo the prompt or name the account
            log.warning("chat model %s answered HTTP %s: %s", self.base_url, e.code, detail[:300])
            fix = {401: "the API key was refused: store the right one (POST /api/config/apikey) or set OPENAI_API_KEY",
                   403: "the API key may not use this model", 404: f"check OPENAI_BASE_URL and OPENAI_MODEL ({self.model})",
                   429: "the provider is rate-limiting: try again later"}.get(
                       e.code, "see the server's log for the provider's message")
            raise LLMError(f"the chat model at {self.base_url} answered HTTP {e.code}: {fix}") from None
        except (urllib.error.URLError, OSError) as e:
            if upstream.aborted:
                raise self._too_slow(upstream) from None
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise LLMError(f"the chat model at {self.base_url} (model {self.model}) did not answer within "
                               f"{min(self.timeout, self.deadline):g} s: is it overloaded?") from None
            raise LLMError(f"cannot reach the chat model at {self.base_url} ({reason}): is the server running? "
                           "(OPENAI_BASE_URL)") from None
        finally:
            timer.cancel()
        upstream.attach(resp)
        timer = threading.Timer(max(0.0, ends - time.monotonic()), upstream.abort, kwargs={"why": "deadline"})
        timer.daemon = True
        timer.start()
        return resp, ends, timer

    def _read(self, resp, upstream: Upstream, ends: float, reader) -> Any:
        """One bounded read: at most ``timeout`` s, never past the deadline."""
        remaining = ends - time.monotonic()
        if remaining <= 0 or upstream.aborted:
            raise self._too_slow(upstream)
        upstream.set_read_timeout(min(self.timeout, remaining))
        try:
            got = reader()
        except (OSError, ValueError) as e:  # a timeout, the socket shut by abort(), a closed file
            if upstream.aborted or time.monotonic() >= ends:
                raise self._too_slow(upstream) from None
            if isinstance(e, (TimeoutError, socket.timeout)):
                raise LLMError(f"the chat model at {self.base_url} sent nothing for {self.timeout:g} s: "
                               "is it overloaded?") from None
            raise LLMError(f"the connection to the chat model at {self.base_url} broke mid-reply ({type(e).__name__})") from None
        if upstream.aborted:  # a shut socket reads as the end of the reply
            raise self._too_slow(upstream)
        return got

    def complete(self, messages: list[dict[str, Any]], upstream: Upstream | None = None) -> str:
        """The whole reply of one chat completion (at most ``max_reply_bytes`` of text, read
        within ``deadline`` seconds)."""
        upstream = upstream or Upstream()
        resp, ends, timer = self._open(messages, False, upstream)
        # JSON escapes can double the text: the body may be a little more than twice the reply
        limit = 2 * self.max_reply_bytes + 65536
        try:
            chunks: list[bytes] = []
            size = 0
            while True:
                chunk = self._read(resp, upstream, ends, lambda: resp.read(65536))
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise self._too_big()
                chunks.append(chunk)
        finally:
            timer.cancel()
            resp.close()
        obj = _json(b"".join(chunks), self.base_url)
        text = _anthropic_content(obj) if self.anthropic else _content(obj)
        if len(text.encode("utf-8", "surrogatepass")) > self.max_reply_bytes:
            raise self._too_big()
        return text

    def stream(self, messages: list[dict[str, Any]], upstream: Upstream | None = None) -> Iterator[str]:
        """The reply's text as it comes (server-sent events ``data: {...}``, ``data: [DONE]``).
        A server that ignores ``stream`` and answers with one JSON body yields it whole. Closing
        the generator (or :meth:`Upstream.abort`) closes the connection."""
        upstream = upstream or Upstream()
        resp, ends, timer = self._open(messages, True, upstream)
        try:
            ctype = resp.headers.get("Content-Type", "")
            if "text/event-stream" not in ctype:
                limit = 2 * self.max_reply_bytes + 65536
                raw = self._read(resp, upstream, ends, lambda: resp.read(limit + 1))
                if len(raw) > limit:
                    raise self._too_big()
                obj = _json(raw, self.base_url)
                text = _anthropic_content(obj) if self.anthropic else _content(obj)
                if len(text.encode("utf-8", "surrogatepass")) > self.max_reply_bytes:
                    raise self._too_big()
                if text:
                    yield text
                return
            size = 0
            while True:
                raw = self._read(resp, upstream, ends, lambda: resp.readline(LINE_LIMIT))
                if not raw:
                    return  # the server closed without [DONE]: what came is the reply
                if len(raw) >= LINE_LIMIT and not raw.endswith(b"\n"):
                    raise self._too_big()
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue  # comments, event names, blank separators
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                obj = _json(data.encode(), self.base_url)
                if isinstance(obj.get("error"), dict):
                    log.warning("chat model %s failed mid-stream: %s", self.base_url, str(obj["error"])[:300])
                    raise LLMError(f"the chat model at {self.base_url} failed mid-stream (its message is in the "
                                   "server's log)")
                if self.anthropic:  # message_start, content_block_delta (text_delta), ..., message_stop
                    if obj.get("type") == "message_stop":
                        return
                    delta = obj.get("delta") if obj.get("type") == "content_block_delta" else None
                    pieces = [delta.get("text")] if isinstance(delta, dict) and delta.get("type") == "text_delta" else []
                else:
                    pieces = [(choice.get("delta") or {}).get("content") for choice in obj.get("choices") or []
                              if isinstance(choice, dict)]
                for piece in pieces:
                    if piece and isinstance(piece, str):
                        size += len(piece.encode("utf-8", "surrogatepass"))
                        if size > self.max_reply_bytes:
                            raise self._too_big()
                        yield piece
        finally:
            timer.cancel()
            upstream.closed = True
            resp.close()


def _json(raw: bytes, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError:
        log.warning("chat model %s answered something that is not JSON: %r", where, raw[:300])
        raise LLMError(f"the chat model at {where} answered something that is not JSON ({len(raw)} bytes; "
                       "the start is in the server's log)") from None
    if not isinstance(obj, dict):
        raise LLMError(f"the chat model at {where} answered {type(obj).__name__}, not a JSON object")
    return obj


def _anthropic_content(obj: dict[str, Any]) -> str:
    """The text blocks of a Messages API answer (``content: [{"type": "text", "text": ...}]``)."""
    blocks = obj.get("content")
    if not isinstance(blocks, list):
        raise LLMError("the chat model's answer has no content blocks (Anthropic Messages API)")
    return "".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                   and isinstance(b.get("text"), str))


def _content(obj: dict[str, Any]) -> str:
    try:
        content = obj["choices"][0]["message"]["content"] or ""
    except (KeyError, IndexError, TypeError):
        raise LLMError("the chat model's answer has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise LLMError("the chat model's choices[0].message.content is not text")
    return content
