"""A LangGraph ``BaseStore`` on pgmem (``pip install 'pgmem-agent[langgraph]'``).

    from pgmem.integrations.langgraph import PgmemStore
    store = PgmemStore(tenant="acme")                 # PGMEM_DSN, else the embedded cluster
    graph = builder.compile(store=store)              # nodes get it as `store: BaseStore`
    store.put(("memories", "maya"), "k1", {"content": "Maya is allergic to peanuts"})
    store.search(("memories", "maya"), query="what is maya allergic to")   # pgmem's fused search

An item is a memory (pgmem.put_item): its namespace and key select it, its value (a JSON
object) is kept whole in the memory's metadata, and its text (the fields named by ``index``,
else the value's ``content``/``text`` field, else the JSON) is embedded and searched with the
fused ranking, filters on the value's fields included. Putting a key again updates the
memory (history keeps every value); deleting forgets it (restorable). Nothing here decides
anything: each operation is one call of sql/128_integrations.sql.

Namespaces map onto pgmem's scopes: ``scope`` names, position by position, what a namespace
label is (default ``("user_id",)`` after a leading collection label: ``("memories", "maya")``
stores for user maya). A ``"tenant"`` position picks the tenant (one client per tenant,
each bound by the login's grants). Labels beyond the scope are only part of the namespace.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._util import make_client, require

_base = require("langgraph.store.base", "langgraph")
if TYPE_CHECKING:  # the class itself, for the type checker (at run time: imported by require, naming the extra)
    from langgraph.store.base import BaseStore
else:
    BaseStore = _base.BaseStore
Item, SearchItem = _base.Item, _base.SearchItem
GetOp, PutOp, SearchOp, ListNamespacesOp = _base.GetOp, _base.PutOp, _base.SearchOp, _base.ListNamespacesOp

SCOPE_FIELDS = ("tenant", "user_id", "agent_id", "session_id", None)


class PgmemStore(BaseStore):
    """LangGraph's BaseStore over pgmem's items (sync ``batch`` and async ``abatch``).

    ``client``: a MemoryClient (or dsn/tenant/embedder to make one). ``scope``: what each
    namespace label is, by position: "tenant", "user_id", "agent_id", "session_id" or None
    (only a label); default ``(None, "user_id", "agent_id", "session_id")``, LangGraph's usual
    ``("memories", user_id)``. ``index``: LangGraph's index config; only its ``fields`` are
    used (the text to embed, default the whole value): pgmem's embedder and dimension apply.
    """

    def __init__(self, client: Any = None, *, dsn: str | None = None, tenant: str | None = None,
                 embedder: Any = "auto", scope: Sequence[str | None] = (None, "user_id", "agent_id", "session_id"),
                 index: dict | None = None):
        bad = [s for s in scope if s not in SCOPE_FIELDS]
        if bad:
            raise ValueError(f"scope names {bad}: use tenant, user_id, agent_id, session_id or None")
        self._client = make_client(client, dsn=dsn, tenant=tenant, embedder=embedder)
        self._clients: dict[str, Any] = {self._client.tenant: self._client}
        self.scope = tuple(scope)
        self.index_fields = list((index or {}).get("fields") or ["$"])

    # ------------------------------------------------------------------ mapping
    def _client_for(self, namespace: Sequence[str]):
        if "tenant" in self.scope and len(namespace) > self.scope.index("tenant"):
            tenant = namespace[self.scope.index("tenant")]
            if tenant not in self._clients:
                from ..client import MemoryClient

                self._clients[tenant] = MemoryClient(self._client.dsn, tenant=tenant, embedder=self._client.embedder)
            return self._clients[tenant]
        return self._client

    def _scope_args(self, namespace: Sequence[str]) -> dict:
        return {f: namespace[i] for i, f in enumerate(self.scope)
                if f not in (None, "tenant") and i < len(namespace)}

    def _text(self, value: dict, index) -> str | None:
        """The text pgmem embeds for a value: LangGraph's index fields (``$`` = the whole value)."""
        fields = self.index_fields if index is None else index
        if fields == ["$"] or not fields:
            return None  # put_item's own choice: the value's content/text field, else its JSON
        parts = []
        for path in fields:
            v: Any = value
            for step in path.split("."):
                v = v.get(step) if isinstance(v, dict) else None
            if v is not None:
                parts.append(v if isinstance(v, str) else json.dumps(v))
        return " ".join(parts) or None

    @staticmethod
    def _item(row: dict, cls=Item, **extra):
        return cls(namespace=tuple(row["namespace"]), key=row["key"], value=row["value"],
                   created_at=row["created_at"], updated_at=row["updated_at"], **extra)

    # ------------------------------------------------------------------ operations
    def _op(self, op):
        if isinstance(op, GetOp):
            row = self._client_for(op.namespace).get_item(op.namespace, op.key)
            return None if row is None else self._item(row)
        if isinstance(op, PutOp):
            c = self._client_for(op.namespace)
            if op.value is None:
                c.delete_item(op.namespace, op.key)
                return None
            c.put_item(op.namespace, op.key, op.value, content=self._text(op.value, op.index),
                       embed=op.index is not False, **self._scope_args(op.namespace))
            return None
        if isinstance(op, SearchOp):
            rows = self._client_for(op.namespace_prefix).search_items(
                op.namespace_prefix, op.query, filter=op.filter or None, k=op.limit, skip=op.offset)
            return [self._item(r, SearchItem, score=r["score"]) for r in rows]
        if isinstance(op, ListNamespacesOp):
            prefix = suffix = None
            for cond in op.match_conditions or ():
                if cond.match_type == "prefix":
                    prefix = list(cond.path)
                else:
                    suffix = list(cond.path)
            return self._client.list_item_namespaces(prefix, suffix, op.max_depth, op.limit, op.offset)
        raise ValueError(f"unknown store operation {type(op).__name__}")

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        """Runs each operation (one SQL call each), in order."""
        return [self._op(op) for op in ops]

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        """``batch`` on a worker thread: the event loop keeps running while the database answers."""
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
