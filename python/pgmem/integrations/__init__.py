"""pgmem where agent builders already are (issue 26). Each integration is an optional extra
and adds no logic of its own: it maps the framework's calls onto pgmem's SQL API (through
:class:`pgmem.MemoryClient`), and everything it does can be done in SQL too
(sql/128_integrations.sql).

* :mod:`pgmem.integrations.langgraph`: :class:`PgmemStore`, a LangGraph ``BaseStore``
  (``pip install 'pgmem-agent[langgraph]'``);
* :mod:`pgmem.integrations.openai_agents`: :class:`PgmemSession`, an OpenAI Agents SDK
  ``Session`` (``pip install 'pgmem-agent[openai-agents]'``);
* :mod:`pgmem.compat`: ``Memory``, with mem0's method names, arguments and result shapes
  (``pip install 'pgmem-agent[mem0]'`` only to check the signatures; it needs nothing of mem0).
"""


def __getattr__(name: str):
    if name == "PgmemStore":
        from .langgraph import PgmemStore

        return PgmemStore
    if name == "PgmemSession":
        from .openai_agents import PgmemSession

        return PgmemSession
    raise AttributeError(name)


__all__ = ["PgmemSession", "PgmemStore"]
