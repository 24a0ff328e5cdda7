"""The chat model: an OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM,
llama.cpp server, LM Studio all serve it), batch or streamed, with the standard library only.

Configured by ``OPENAI_BASE_URL``, ``OPENAI_MODEL`` and ``OPENAI_API_KEY``
(:func:`pgmem.config.openai_settings`), the names seeds/shadow-memory-system.md gives them; a
key a tenant stored with ``POST /api/config/apikey`` (pgmem.set_api_key), or one sent with a
chat request, takes the place of OPENAI_API_KEY for that call. A loopback server is reached
without any HTTP proxy. Errors name the server and the model, never the key.
"""
from __future__ import annotations

import ipaddress
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import PgmemError

log = logging.getLogger("pgmem.web.llm")

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


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


@dataclass(frozen=True)
class ChatModel:
    """One OpenAI-compatible chat endpoint and model. ``api_key`` may be None for a local server."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 120.0
    temperature: float | None = 0.7

    @classmethod
    def from_env(cls, api_key: str | None = None) -> "ChatModel":
        from ..config import openai_settings

        s = openai_settings()
        return cls(s["base_url"] or OPENAI_DEFAULT_URL, s["model"] or "gpt-4o-mini", api_key or s["api_key"])

    def with_key(self, api_key: str | None) -> "ChatModel":
        return self if not api_key else ChatModel(self.base_url, self.model, api_key, self.timeout, self.temperature)

    def __repr__(self) -> str:  # never the key
        return f"ChatModel(base_url={self.base_url!r}, model={self.model!r}, key={'set' if self.api_key else 'none'})"

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    def check_key(self) -> None:
        """A hosted API needs a key: say where to put one before any request is made."""
        if not self.api_key and not is_loopback(self.url):
            raise LLMError(f"no API key for {self.base_url} (model {self.model}): set one with POST /api/config/apikey, "
                           "send apiKey with the chat request, or set OPENAI_API_KEY (or point OPENAI_BASE_URL at a "
                           "local server such as Ollama)")

    def _open(self, messages: list[dict[str, Any]], stream: bool):
        self.check_key()
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "stream": stream}
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        headers = {"Content-Type": "application/json", "User-Agent": "pgmem-serve",
                   "Accept": "text/event-stream" if stream else "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=json.dumps(payload).encode(), headers=headers, method="POST")
        opener = (urllib.request.build_opener(urllib.request.ProxyHandler({})) if is_loopback(self.url)
                  else urllib.request.build_opener())
        try:
            return opener.open(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            try:
                detail = e.read(300).decode("utf-8", "replace").strip()
            except Exception:
                detail = ""
            if self.api_key:
                detail = detail.replace(self.api_key, "<key>")
            fix = {401: "the API key was refused: store the right one (POST /api/config/apikey) or set OPENAI_API_KEY",
                   403: "the API key may not use this model", 404: f"check OPENAI_BASE_URL and OPENAI_MODEL ({self.model})",
                   429: "the provider is rate-limiting: try again later"}.get(e.code, "see the provider's message")
            raise LLMError(f"the chat model at {self.base_url} answered HTTP {e.code}: {fix}"
                           + (f" ({detail[:200]})" if detail else "")) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise LLMError(f"cannot reach the chat model at {self.base_url} ({reason}): is the server running? "
                           "(OPENAI_BASE_URL)") from None

    def complete(self, messages: list[dict[str, Any]]) -> str:
        """The whole reply of one chat completion."""
        with self._open(messages, stream=False) as resp:
            raw = resp.read()
        return _content(_json(raw, self.base_url))

    def stream(self, messages: list[dict[str, Any]]) -> Iterator[str]:
        """The reply's text as it comes (server-sent events ``data: {...}``, ``data: [DONE]``).
        A server that ignores ``stream`` and answers with one JSON body yields it whole."""
        with self._open(messages, stream=True) as resp:
            ctype = resp.headers.get("Content-Type", "")
            if "text/event-stream" not in ctype:
                text = _content(_json(resp.read(), self.base_url))
                if text:
                    yield text
                return
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue  # comments, event names, blank separators
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                obj = _json(data.encode(), self.base_url)
                if isinstance(obj.get("error"), dict):
                    raise LLMError(f"the chat model at {self.base_url} failed mid-stream: "
                                   f"{str(obj['error'].get('message', obj['error']))[:200]}")
                for choice in obj.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        yield piece


def _json(raw: bytes, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError:
        raise LLMError(f"the chat model at {where} answered something that is not JSON: {raw[:120]!r}") from None
    if not isinstance(obj, dict):
        raise LLMError(f"the chat model at {where} answered {type(obj).__name__}, not a JSON object")
    return obj


def _content(obj: dict[str, Any]) -> str:
    try:
        return obj["choices"][0]["message"]["content"] or ""
    except (KeyError, IndexError, TypeError):
        raise LLMError(f"the chat model's answer has no choices[0].message.content: {json.dumps(obj)[:200]}") from None
