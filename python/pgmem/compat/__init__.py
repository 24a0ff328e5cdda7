"""A mem0-compatible client: ``from pgmem.compat import Memory`` instead of ``from mem0 import
Memory``, and a script written for mem0 2.x runs unchanged (issue 26). The method names,
arguments and result shapes are mem0's ``Memory`` (tests/test_integrations_mem0.py checks the
signatures against the installed ``mem0ai``); the memory behind them is pgmem's: the surprise
gate, the fused search, history, tenants. Nothing of mem0 is imported.

    from pgmem.compat import Memory
    m = Memory()                                       # PGMEM_DSN / PGMEM_TENANT, or Memory.from_config
    m.add("I'm allergic to peanuts", user_id="maya")   # {"results": [{"id": "17", "memory": "...", "event": "ADD"}]}
    m.search("what is maya allergic to", filters={"user_id": "maya"})["results"][0]["memory"]

Mapping (each method is one or a few calls of pgmem's SQL API; it adds no logic of its own):

* ids are pgmem's memory ids as strings (another id is refused, naming it); ``run_id`` is
  pgmem's ``session_id``;
* ``Memory()`` needs a tenant (PGMEM_TENANT, or ``{"pgmem": {"tenant": ...}}``); a mem0 config's
  vector_store (pgvector), embedder (openai, huggingface) and llm (OpenAI-compatible) are
  mapped, anything else refused in one line;
* ``add(messages, infer=True)``: the statements of one speaker (the user's with a user_id, the
  agent's with an agent_id alone) are remembered with 5W1H extraction behind the surprise gate
  (pgmem.remember_many); greetings, fillers and questions are no facts and are dropped (issue
  32). A new fact is ``ADD``, a repeat or an unsurprising one ``NONE`` (mem0 asks an LLM to
  decide; pgmem's gate decides); ``infer=False`` stores each message as it is (forced past the
  gate);
* ``search``: pgmem.search (fused ranking) with the entity ids and metadata as filters,
  ``score`` its fused score, ``threshold`` applied to it;
* ``get_all``: pgmem.list_memories, newest first; ``update``: pgmem.update_memory (history keeps
  the old text); ``delete``/``delete_all``: pgmem.forget (restorable); ``history``: pgmem.history
  as mem0's rows (ADD, UPDATE, DELETE; a refused repeat changed nothing and is no row);
  ``reset``: forgets every memory of the tenant.
"""
from __future__ import annotations

import hashlib
import os
import re
from typing import Any

__all__ = ["AsyncMemory", "Memory"]

# pgmem's history ops as mem0's events; a repeat the gate refused (duplicate, reject) changed nothing: NONE
_EVENT = {"add": "ADD", "update": "UPDATE", "delete": "DELETE", "merge": "DELETE", "restore": "ADD",
          "duplicate": "NONE", "reject": "NONE"}
_ENTITY = {"user_id": "user_id", "agent_id": "agent_id", "run_id": "session_id"}
_PROMOTED = ("user_id", "agent_id", "run_id", "actor_id", "role")


def _ids(user_id=None, agent_id=None, run_id=None, *, what: str) -> dict:
    ids = {k: v.strip() for k, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id))
           if isinstance(v, str) and v.strip()}
    if not ids:
        raise ValueError(f"{what}: at least one of 'user_id', 'agent_id', or 'run_id' must be provided")
    return ids


_OPS = {"eq": "==", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _jp(v: Any) -> str:
    """A JSON value as a SQL/JSON path literal (strings, numbers, booleans, null)."""
    import json

    if isinstance(v, (dict, list)):
        raise ValueError(f"a filter value must be a string, number, boolean or null, got {v!r}")
    return json.dumps(v)


def _condition(key: str, spec: Any, what: str) -> str:
    """One mem0 condition on a metadata key as a SQL/JSON path predicate."""
    import json

    k = "$." + json.dumps(key)
    if not isinstance(spec, dict):
        return f"{k} == {_jp(spec)}"
    parts = []
    for op, v in spec.items():
        if op in _OPS:
            if op == "ne":  # (a memory without the key is not equal to v: mem0 keeps it)
                parts.append(f"!exists({k} ? (@ == {_jp(v)}))")
            else:
                parts.append(f"{k} {_OPS[op]} {_jp(v)}")
        elif op in ("in", "nin"):
            if not isinstance(v, list) or not v:
                raise ValueError(f"{what}: filter {key}: '{op}' takes a non-empty list, got {v!r}")
            anyof = "exists(" + k + " ? (" + " || ".join(f"@ == {_jp(x)}" for x in v) + "))"
            parts.append(anyof if op == "in" else "!" + anyof)
        elif op in ("contains", "icontains"):
            import re as _re

            flag = ' flag "i"' if op == "icontains" else ""
            parts.append(f"({k} like_regex {json.dumps(_re.escape(str(v)))}{flag} || exists({k}[*] ? (@ == {_jp(v)})))")
        else:
            raise ValueError(f"{what}: filter {key}: unknown operator {op!r} (mem0's: eq, ne, gt, gte, lt, lte, in, nin, "
                             "contains, icontains)")
    return " && ".join(parts) if len(parts) == 1 else "(" + " && ".join(parts) + ")"


def _predicate(f: dict, what: str) -> str:
    """mem0's metadata conditions (keys, AND / OR / NOT lists) as one SQL/JSON path predicate."""
    parts = []
    for k, v in f.items():
        if k in ("AND", "OR", "NOT"):
            if not isinstance(v, list) or not v or not all(isinstance(x, dict) for x in v):
                raise ValueError(f"{what}: filter {k} takes a non-empty list of conditions, got {v!r}")
            subs = [_predicate(x, what) for x in v]
            joined = "(" + (" || " if k == "OR" else " && ").join(subs) + ")"
            parts.append("!" + joined if k == "NOT" else joined)
        elif k in _ENTITY or k in _PROMOTED:
            raise ValueError(f"{what}: filter {k} inside AND/OR/NOT: give user_id, agent_id and run_id at the top level")
        else:
            parts.append(_condition(k, v, what))
    return " && ".join(parts) if len(parts) == 1 else "(" + " && ".join(parts) + ")"


def _filters(filters: dict | None, what: str) -> dict:
    """mem0's filters as pgmem's: the entity ids as scope filters (a value, {"eq": v} or
    {"in": [...]}); the other keys, and AND / OR / NOT, as one SQL/JSON path predicate over the
    metadata (pgmem's filter metadata_path), with mem0's operators eq, ne, gt, gte, lt, lte, in,
    nin, contains and icontains."""
    f = dict(filters or {})
    if not any(k in f for k in _ENTITY):
        raise ValueError("filters must contain at least one of: user_id, agent_id, run_id. Example: filters={'user_id': 'u1'}")
    out: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for k, v in f.items():
        if k in _ENTITY:
            if isinstance(v, dict):
                if set(v) == {"eq"}:
                    v = v["eq"]
                elif set(v) == {"in"}:
                    v = list(v["in"])
                else:
                    raise ValueError(f"{what}: filter {k}={v!r}: user_id, agent_id and run_id take a value, "
                                     "{'eq': v} or {'in': [...]}")
            out[_ENTITY[k]] = v
        else:
            rest[k] = v
    if rest:
        out["metadata_path"] = _predicate(rest, what)
    return out


def _item(row: dict, score: float | None = None) -> dict:
    """A pgmem memory as mem0's MemoryItem dict (with the promoted entity ids)."""
    meta = dict(row.get("metadata") or {})
    text = row.get("content") or ""
    out: dict[str, Any] = {"id": str(row["id"]), "memory": text, "hash": hashlib.md5(text.encode()).hexdigest(),
                           "metadata": None, "score": score,
                           "created_at": _iso(row.get("created_at")), "updated_at": _iso(row.get("updated_at"))}
    if score is None:
        out.pop("score")
    for key, col in (("user_id", "user_id"), ("agent_id", "agent_id"), ("run_id", "session_id")):
        if row.get(col):
            out[key] = row[col]
    if row.get("who") in ("user", "assistant"):
        out["role"] = row["who"]
    meta = {k: v for k, v in meta.items() if k not in _PROMOTED and k not in ("extracted_by", "facts")}
    out["metadata"] = meta or None
    return out


def _mid(memory_id) -> int:
    """A memory id as mem0 passes it (a string) as pgmem's (a number), or a clear error."""
    if isinstance(memory_id, bool):
        raise ValueError(f"memory_id must be a pgmem memory id (a number, or its string), got {memory_id!r}")
    if isinstance(memory_id, int):
        return memory_id
    if isinstance(memory_id, str) and memory_id.strip().isdigit():
        return int(memory_id.strip())
    raise ValueError(f"memory_id {str(memory_id)[:80]!r} is not a pgmem memory id: pgmem's ids are numbers as strings "
                     "('17'), as add() and search() return them (mem0's UUIDs do not carry over)")


# ------------------------------------------------------------------ what add() keeps
# mem0's add(infer=True) asks its LLM for the facts in the messages: statements about the user
# (with a user_id), or about the agent (an agent_id alone). Without an LLM, pgmem keeps the
# messages of that speaker that state something, and drops greetings, fillers and questions
# (the same rules as context_for's: sql/620_intent.sql, _is_question and _is_filler).
_QUESTION = re.compile(
    r"[?？¿]|^\W*(?:(?:please\s+)?(?:tell|show|give)\s+(?:me|us)|explain|describe|define|summari[sz]e|compare|list"
    r"|remind\s+me|can\s+you|could\s+you|would\s+you|will\s+you)\b"
    r"|^\W*(?:who|whom|whose|what|when|where|which|why|how)\b(?!\s+an?\b)"
    r"|^\W*(?:do|does|did|is|are|was|were|can|could|would|should|will|shall|may|might|have|has|had|am)\s+"
    r"(?:i|you|he|she|it|we|they|there|this|that|these|those|my|your|his|her|its|our|their|the|a|an|any)\b",
    re.IGNORECASE)
_FILLER = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|k|sure|yes|yeah|yep|no|nope|cool|nice|great|awesome|perfect|fine|right|alright|got it|"
    r"i see|makes sense|sounds good|good|hmm+|lol|haha(?:ha)*|thanks|thank you|thx|np|no problem|noted)(?:\W+|$))+$",
    re.IGNORECASE)


def _states_something(text: str) -> bool:
    from ..engine.intent import is_greeting

    t = text.strip()
    return bool(t) and not is_greeting(t) and not _QUESTION.search(t) and not (len(t) <= 40 and _FILLER.match(t))


# ------------------------------------------------------------------ a mem0 config
_SUPPORTED = ("vector_store", "embedder", "llm", "version", "history_db_path", "pgmem")


def _from_mem0_config(config: dict) -> dict:
    """A mem0 config dict as MemoryClient's arguments: vector_store pgvector -> the DSN,
    embedder openai / huggingface -> pgmem's embedder (its dimension checked against the
    database at the first call), llm openai-compatible -> the LLM extractor. Anything else is
    refused in one line naming it: pgmem never ignores a setting silently."""
    out: dict[str, Any] = {}
    unknown = [k for k, v in config.items() if k not in _SUPPORTED and v not in (None, {}, "")]
    if unknown:
        raise ValueError(f"mem0 config: {', '.join(sorted(unknown))} not supported by pgmem's Memory "
                         f"(it takes {', '.join(_SUPPORTED[:3])}; graphs, rerankers and custom prompts are mem0's own)")
    vs = config.get("vector_store") or {}
    if vs:
        prov, c = vs.get("provider", "pgvector"), dict(vs.get("config") or {})
        if prov != "pgvector":
            raise ValueError(f"mem0 config: vector_store provider {prov!r} not supported: pgmem keeps memories in "
                             "PostgreSQL (provider 'pgvector' with connection_string, or PGMEM_DSN)")
        if c.get("connection_string"):
            out["dsn"] = c["connection_string"]
        elif c.get("dbname") or c.get("host"):
            from psycopg.conninfo import make_conninfo

            out["dsn"] = make_conninfo(**{k: v for k, v in (("dbname", c.get("dbname")), ("user", c.get("user")),
                                                            ("password", c.get("password")), ("host", c.get("host")),
                                                            ("port", c.get("port"))) if v})
    em = config.get("embedder") or {}
    if em:
        prov, c = em.get("provider", "openai"), dict(em.get("config") or {})
        if prov == "openai":
            from ..embedding import HttpEmbedder

            out["embedder"] = HttpEmbedder(c.get("model"), base_url=c.get("openai_base_url") or os.environ.get("OPENAI_BASE_URL"),
                                           api_key=c.get("api_key"), dimensions=c.get("embedding_dims"))
        elif prov in ("huggingface", "sentence_transformers"):
            from ..embedding import make_embedder

            out["embedder"] = make_embedder("local", model=c.get("model")) if c.get("model") else make_embedder("local")
        else:
            raise ValueError(f"mem0 config: embedder provider {prov!r} not supported (openai-compatible: 'openai' with "
                             "openai_base_url; local models: 'huggingface')")
    llm = config.get("llm") or {}
    if llm:
        prov, c = llm.get("provider", "openai"), dict(llm.get("config") or {})
        if prov not in ("openai", "ollama", "lmstudio", "vllm", "litellm"):
            raise ValueError(f"mem0 config: llm provider {prov!r} not supported: pgmem speaks the OpenAI-compatible "
                             "chat API ('openai', 'ollama', 'lmstudio', 'vllm' with their base URL)")
        from ..extraction.llm import LLMExtractor

        base = (c.get("openai_base_url") or c.get("ollama_base_url") or c.get("lmstudio_base_url")
                or c.get("vllm_base_url") or os.environ.get("OPENAI_BASE_URL"))
        if prov == "ollama" and base and not base.rstrip("/").endswith("/v1"):
            base = base.rstrip("/") + "/v1"
        out["extractor"] = LLMExtractor(base, c.get("model"), c.get("api_key") or os.environ.get("OPENAI_API_KEY"))
    return out


def _iso(v) -> str | None:
    return v.isoformat() if hasattr(v, "isoformat") else v


def _messages(messages) -> list[dict]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, dict):
        return [messages]
    if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
        return messages
    raise ValueError("messages must be a string, a message dict, or a list of message dicts")


class Memory:
    """mem0's ``Memory`` over pgmem. ``Memory()`` reads PGMEM_DSN (else the embedded cluster) and
    PGMEM_TENANT (required: never a shared default); ``Memory.from_config({"pgmem": {"dsn": ...,
    "tenant": ...}})`` or ``Memory(client=MemoryClient(...))`` choose. mem0's vector_store
    (pgvector), embedder and llm keys are mapped (_from_mem0_config); others are refused."""

    def __init__(self, config: Any = None, *, client: Any = None):
        from ..client import MemoryClient

        if client is not None:
            self.client = client
            return
        if config is not None and not isinstance(config, dict):
            config = config.model_dump() if hasattr(config, "model_dump") else dict(vars(config))
        config = dict(config or {})
        cfg = dict(config.get("pgmem") or {})
        mapped = _from_mem0_config(config)
        tenant = cfg.get("tenant") or os.environ.get("PGMEM_TENANT")
        if not tenant:
            raise ValueError("pgmem's mem0 Memory needs a tenant (the memory space it reads and writes): set "
                             "PGMEM_TENANT, or Memory.from_config({'pgmem': {'tenant': 'my-app'}})")
        self.client = MemoryClient(cfg.get("dsn") or mapped.get("dsn"), tenant=tenant,
                                   embedder=cfg.get("embedder") or mapped.get("embedder", "auto"),
                                   extractor=mapped.get("extractor"))
        if mapped.get("extractor") is not None:  # the same endpoint decides mem0's ADD / UPDATE / DELETE / NONE
            from ..layered import LayeredLLM

            ex = mapped["extractor"]
            self.client.llm = LayeredLLM(ex.url.rsplit("/chat/completions", 1)[0], ex.model, ex.api_key)

    @classmethod
    def from_config(cls, config_dict: dict[str, Any]):
        return cls(config_dict)

    # ------------------------------------------------------------------ write
    def add(self, messages, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
            metadata: dict[str, Any] | None = None, timestamp: Any = None, expiration_date: Any = None,
            infer: bool = True, memory_type: str | None = None, prompt: str | None = None):
        if timestamp is not None:
            raise ValueError("timestamp is a mem0 platform feature: pgmem takes a message's time as its 'created_at'")
        ids = _ids(user_id, agent_id, run_id, what="add()")
        meta = {k: v for k, v in (metadata or {}).items() if k not in _PROMOTED}
        if memory_type:
            meta["memory_type"] = memory_type
        events = []
        # infer=True: the facts of one speaker (the user's with a user_id, else the agent's),
        # never greetings, fillers or questions; infer=False: every message as it is
        speaker = "user" if "user_id" in ids else "assistant"
        for msg in _messages(messages):
            role, content = msg.get("role", "user"), msg.get("content")
            if role == "system" or not isinstance(content, str) or not content.strip():
                continue
            if infer and (role != speaker or not _states_something(content)):
                continue
            ev = {"content": content, "who": msg.get("name") or role, "metadata": dict(meta),
                  "user_id": ids.get("user_id"), "agent_id": ids.get("agent_id"), "session_id": ids.get("run_id")}
            if expiration_date is not None:
                ev["expires_at"] = str(expiration_date)
            if not infer:
                ev["force"] = True
            if msg.get("created_at"):
                ev["created_at"] = msg["created_at"]
            events.append(ev)
        llm = self.client.llm if infer else None
        if llm is not None:
            got = self._add_with_llm(llm, _messages(messages), ids, meta, speaker)
            if got is not None:
                return {"results": got}
        if not events:
            return {"results": []}
        if infer:
            results = self.client.remember_many(events, progress=False)
        else:
            results = [self.client.remember(e["content"], extract=False,
                                            **{k: v for k, v in e.items() if v is not None and k != "content"})
                       for e in events]
        out = []
        for ev, r in zip(events, results):
            if r.decision == "stored" and r.id is not None:
                out.append({"id": str(r.id), "memory": ev["content"], "event": "ADD"})
            else:  # a repeat, or below the surprise gate: nothing new stored
                known = r.id or r.nearest_id
                out.append({"id": str(known) if known else None, "memory": ev["content"], "event": "NONE"})
        return {"results": out}

    def _add_with_llm(self, llm, messages: list[dict], ids: dict, meta: dict, speaker: str) -> list[dict] | None:
        """mem0's add with an LLM: the facts of the conversation, then ADD / UPDATE / DELETE /
        NONE against the memories of the same scope nearest each fact (pgmem.search), applied
        through pgmem.remember, update_memory and forget (every change in history). None when
        the LLM fails: the caller keeps the statements instead."""
        facts = llm.facts([m for m in messages if m.get("role") != "system"], speaker)
        if facts is None:
            return None
        if not facts:
            return []
        scope = {_ENTITY[k]: v for k, v in ids.items()}
        near: dict[int, str] = {}
        for f in facts:
            for h in self.client.search(f, k=5, filters=scope):
                near.setdefault(h.id, h.content)
        local = {str(i): mid for i, mid in enumerate(near)}  # mem0 shows the LLM small ids, never the real ones
        decisions = llm.memory_decisions(facts, [{"id": k, "text": near[v]} for k, v in local.items()])
        if decisions is None:
            decisions = [{"id": "", "text": f, "event": "ADD"} for f in facts]
        out = []
        for d in decisions:
            mid = local.get(d["id"])
            if d["event"] == "ADD" and d["text"].strip():
                r = self.client.remember(d["text"], who=speaker, metadata=dict(meta), user_id=ids.get("user_id"),
                                         agent_id=ids.get("agent_id"), session_id=ids.get("run_id"), force=True)
                out.append({"id": str(r.id), "memory": d["text"], "event": "ADD"})
            elif d["event"] == "UPDATE" and mid is not None and d["text"].strip():
                changes: dict[str, Any] = {"content": d["text"]}
                if self.client.embedder is not None:
                    changes["embedding"] = self.client.embedder.embed(d["text"]).tolist()
                    changes["embedding_model"] = self.client.embedder.model_name
                self.client.update_memory(mid, changes, reason="mem0 update (llm)")
                out.append({"id": str(mid), "memory": d["text"], "event": "UPDATE", "previous_memory": near[mid]})
            elif d["event"] == "DELETE" and mid is not None:
                self.client.forget(mid, reason="mem0 delete (llm)")
                out.append({"id": str(mid), "memory": near[mid], "event": "DELETE"})
        return out

    def update(self, memory_id, text: str | None = None, metadata: dict[str, Any] | None = None,
               expiration_date: Any = ..., data: str | None = None):
        text = text if text is not None else data
        if text is None and metadata is None and expiration_date is ...:
            raise ValueError("At least one of text, metadata, or expiration_date must be provided.")
        changes: dict[str, Any] = {}
        if text is not None:
            changes["content"] = text
            if self.client.embedder is not None:
                changes["embedding"] = self.client.embedder.embed(text).tolist()
                changes["embedding_model"] = self.client.embedder.model_name
        if metadata is not None:
            old = (self.client.get(_mid(memory_id)) or {}).get("metadata") or {}
            changes["metadata"] = {**old, **{k: v for k, v in metadata.items() if k not in _PROMOTED}}
        if expiration_date is not ...:
            changes["expires_at"] = None if expiration_date is None else str(expiration_date)
        self.client.update_memory(_mid(memory_id), changes, reason="mem0 update")
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id):
        from ..errors import NotFound

        try:
            self.client.forget(_mid(memory_id), reason="mem0 delete")
        except NotFound:
            raise ValueError(f"Memory with id {memory_id} not found") from None
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None):
        ids = _ids(user_id, agent_id, run_id, what="delete_all()")
        filters = {_ENTITY[k]: v for k, v in ids.items()}
        while True:
            rows = self.client.list_memories(filters, k=1000)
            if not rows:
                break
            for r in rows:
                self.client.forget(r["id"], reason="mem0 delete_all")
        return {"message": "Memories deleted successfully!"}

    def reset(self):
        """Forgets every memory of the tenant (restorable: pgmem.restore; erase for good with
        pgmem.erase_user)."""
        while True:
            rows = self.client.list_memories(None, k=1000)
            if not rows:
                break
            for r in rows:
                self.client.forget(r["id"], reason="mem0 reset")

    # ------------------------------------------------------------------ read
    def get(self, memory_id):
        row = self.client.get(_mid(memory_id))
        if row is None or row.get("state") != "active":
            return None
        return _item(row)

    def get_all(self, *, filters: dict[str, Any] | None = None, top_k: int = 20, show_expired: bool = False, **kwargs):
        _reject_entity_kwargs(kwargs, "get_all")
        f = _filters(filters, "get_all()")
        rows = self.client.list_memories(f, k=top_k)
        return {"results": [_item(r) for r in rows]}

    def search(self, query: str, *, top_k: int = 20, filters: dict[str, Any] | None = None, threshold: float = 0.1,
               rerank: bool = False, explain: bool = False, reference_date: Any = None, show_expired: bool = False,
               **kwargs):
        _reject_entity_kwargs(kwargs, "search")
        f = _filters(filters, "search()")
        hits = self.client.search(query, k=top_k, filters=f)
        out = []
        for h in hits:
            if threshold is not None and h.score < threshold:
                continue
            row = {"id": h.id, "content": h.content, "metadata": h.metadata, "created_at": h.created_at,
                   "updated_at": h.extra.get("updated_at"), "who": h.who, "user_id": h.extra.get("user_id"),
                   "agent_id": h.extra.get("agent_id"), "session_id": h.extra.get("session_id")}
            item = _item(row, score=h.score)
            if explain:
                item["score_details"] = h.signals
            out.append(item)
        return {"results": out}

    def history(self, memory_id):
        rows = self.client.history(_mid(memory_id))
        out = []
        for r in rows:
            if _EVENT.get(r["op"]) == "NONE":  # a repeat the gate refused changed nothing: no event in mem0's history
                continue
            before, after = r.get("before") or {}, r.get("after") or {}
            out.append({"id": str(r["id"]), "memory_id": str(memory_id), "old_memory": before.get("content"),
                        "new_memory": after.get("content"), "event": _EVENT.get(r["op"], r["op"].upper()),
                        "created_at": _iso(r.get("at")), "updated_at": _iso(r.get("at")),
                        "is_deleted": r["op"] == "delete", "actor_id": None, "role": after.get("who")})
        return out

    def chat(self, query):
        raise NotImplementedError("Chat function not implemented yet.")  # as mem0's Memory.chat

    def close(self) -> None:
        self.client.close()


def _reject_entity_kwargs(kwargs: dict, what: str) -> None:
    bad = [k for k in ("user_id", "agent_id", "run_id") if k in kwargs]
    if bad:
        raise ValueError(f"{what}() takes {', '.join(bad)} in filters, not as arguments: "
                         f"filters={{'{bad[0]}': ...}}")
    if kwargs:
        raise TypeError(f"{what}() got unexpected keyword arguments {sorted(kwargs)}")


class AsyncMemory:
    """mem0's ``AsyncMemory``: the same methods as coroutines (each runs Memory's on a worker thread)."""

    def __init__(self, config: Any = None, *, client: Any = None):
        self._sync = Memory(config, client=client)

    @classmethod
    def from_config(cls, config_dict: dict[str, Any]):
        return cls(config_dict)

    def __getattr__(self, name):
        import asyncio

        fn = getattr(self._sync, name)
        if not callable(fn):
            return fn

        async def run(*a, **kw):
            return await asyncio.to_thread(fn, *a, **kw)

        return run
