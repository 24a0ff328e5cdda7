"""An OpenAI Agents SDK ``Session`` on pgmem (``pip install 'pgmem-agent[openai-agents]'``).

    from agents import Agent, Runner
    from pgmem.integrations.openai_agents import PgmemSession
    session = PgmemSession("chat-42", user_id="maya", tenant="acme")
    await Runner.run(agent, "I'm allergic to peanuts", session=session)

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
        self.client = make_client(client, dsn=dsn, tenant=tenant, embedder=None)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items in order; with ``limit``, the latest ``limit`` of them."""
        return await asyncio.to_thread(self.client.session_get_items, self.session_id, limit)

    async def add_items(self, items: list[Any]) -> None:
        if items:
            await asyncio.to_thread(lambda: self.client.session_add_items(
                self.session_id, [dict(i) for i in items], user_id=self.user_id, remember=self.remember))

    async def pop_item(self) -> Any | None:
        return await asyncio.to_thread(self.client.session_pop_item, self.session_id)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self.client.session_clear, self.session_id)

    def close(self) -> None:
        self.client.close()
