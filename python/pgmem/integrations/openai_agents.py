"""An OpenAI Agents SDK ``Session`` on pgmem (``pip install 'pgmem-agent[openai-agents]'``).

    from agents import Agent, Runner
    from pgmem.integrations.openai_agents import PgmemSession, memory_tool
    session = PgmemSession("chat-42", user_id="maya", tenant="acme")
    await Runner.run(agent, "I'm allergic to peanuts", session=session)

    # a later session of the same user remembers (issue 32): its input is seeded with what
    # pgmem.context_for retrieves for the new message, and the agent can search on its own
    later = PgmemSession("chat-43", user_id="maya", tenant="acme")
    agent = Agent(..., tools=[memory_tool(later)])
    await Runner.run(agent, "What am I allergic to?", session=later,
                     run_config=RunConfig(session_input_callback=later.recall_input))

The SDK's items (messages, tool calls, tool results: JSON objects) are kept in order in
pgmem's conversation tier (pgmem.session_items), exactly as given; ``pop_item`` and
``clear_session`` mark them removed (the rows stay). With ``remember=True`` (the default) each
user and assistant text turn is also remembered as a memory of the user (pgmem.remember,
session_id = the session): the conversation becomes long-term memory that pgmem.search finds
from any later session. Each method is one call of sql/128_integrations.sql.
"""
from __future__ import annotations

import asyncio
from typing import Any

from ._util import make_client, require

require("agents.memory", "openai-agents")


class PgmemSession:
    """The SDK's ``Session`` protocol (``session_id``, ``get_items``, ``add_items``,
    ``pop_item``, ``clear_session``) over pgmem. ``client``: a MemoryClient (or dsn/tenant to
    make one). The calls run on a worker thread, so the event loop never waits on the database."""

    session_settings = None

    def __init__(self, session_id: str, client: Any = None, *, user_id: str | None = None, remember: bool = True,
                 dsn: str | None = None, tenant: str | None = None):
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError("session_id must be a non-empty string (e.g. the conversation's id)")
        self.session_id = session_id
        self.user_id = user_id
        self.remember = remember
        self.client = make_client(client, dsn=dsn, tenant=tenant, embedder="auto")

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items in order; with ``limit``, the latest ``limit`` of them."""
        return await asyncio.to_thread(self.client.session_get_items, self.session_id, limit)

    async def add_items(self, items: list[Any]) -> None:
        if items:
            await asyncio.to_thread(self._add_items, [dict(i) for i in items])

    def _add_items(self, items: list[dict]) -> None:
        # the text turns embedded here (as remember() embeds a memory) when the client has an
        # embedder: a later session finds them by meaning at once (issue 32)
        embeddings = None
        if self.remember and self.client.embedder is not None:
            texts = [_item_text(i) if i.get("role") in ("user", "assistant") else None for i in items]
            todo = [(n, t) for n, t in enumerate(texts) if t and t.strip()]
            if todo:
                vecs = self.client.embedder.embed_many([self.client._text_of({"content": t, "who": items[n]["role"]})
                                                        for n, t in todo])
                embeddings = [None] * len(items)
                for (n, _), v in zip(todo, vecs):
                    embeddings[n] = v
        self.client.session_add_items(self.session_id, items, user_id=self.user_id, remember=self.remember,
                                      embeddings=embeddings)

    async def pop_item(self) -> Any | None:
        return await asyncio.to_thread(self.client.session_pop_item, self.session_id)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self.client.session_clear, self.session_id)

    # ------------------------------------------------------------------ recall (issue 32)
    def recall(self, text: str) -> str | None:
        """What pgmem knows for a message, as one system message's text: the user's profile
        and the memories pgmem.context_for retrieves for it (search's ranking, the token budget
        deciding how many; the chat's own questions and answers are not among them). The
        message is not stored by this call: add_items does that. None when nothing is known."""
        if not text or not text.strip():
            return None
        r = self.client.context_for(text, conversation_id=self.session_id, user_id=self.user_id, remember=False)
        ctx = r.context or {}
        lines = []
        if ctx.get("profile"):
            lines.append("What you know about the user:")
            lines += [f"- {k}: {v}" for k, v in ctx["profile"].items()]
        mems = ctx.get("memories") or []
        if mems:
            lines.append("Memories from earlier conversations, most relevant first:")
            lines += [f"- [{str(m.get('created_at') or '')[:10]}] {m.get('who') or 'someone'}: {m['content']}" for m in mems]
        return "\n".join(lines) or None

    async def recall_input(self, history: list[Any], new_items: list[Any]) -> list[Any]:
        """A ``session_input_callback`` for ``RunConfig``: the session's history, then a system
        message with what pgmem recalls for the new message (:meth:`recall`), then the new
        input. The SDK stores only the new input in the session."""
        text = _last_user_text(new_items)
        note = await asyncio.to_thread(self.recall, text) if text else None
        return list(history) + ([{"role": "system", "content": note}] if note else []) + list(new_items)

    def close(self) -> None:
        self.client.close()


def _item_text(it: dict) -> str | None:
    """A message item's text: its content, or the text parts of its content list (as
    pgmem.session_add_items reads it)."""
    c = it.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return " ".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("text")) or None
    return None


def _last_user_text(items: list[Any]) -> str | None:
    for it in reversed(items or []):
        it = dict(it) if not isinstance(it, dict) else it
        if it.get("role") == "user":
            return _item_text(it)
    return None


def memory_tool(session: PgmemSession, *, k: int = 8):
    """A function tool the agent calls to search the user's long-term memory
    (``search_memory(query)``): pgmem.search over the user's memories, best first, the agent
    loop's own questions and answers stepped back. One call of the SQL API."""
    from agents import function_tool

    @function_tool
    def search_memory(query: str) -> str:
        """Search what you remember about the user from earlier conversations.

        Args:
            query: what to look for, in a few words (e.g. "allergies", "where they live").
        """
        filters = {"user_id": session.user_id} if session.user_id else {}
        hits = session.client.search(query, k=k, filters=filters)
        if not hits:
            return "Nothing remembered about that."
        return "\n".join(f"- [{str(h.created_at)[:10]}] {h.who or 'someone'}: {h.content}" for h in hits)

    return search_memory
