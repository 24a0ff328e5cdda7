"""Memory-augmented chat: the layered pipeline with Shadow's memory context, one LLM call, and
the layered design's stream.

One turn (seeds/layered-memory-architecture.md, "The Pipeline"; seeds/shadow-memory-system.md,
"MemoryAugmentedAgent"):

1. ``pgmem.context_for`` (SQL, through the client: its LLM intent fallback included): steps
   1-7 of the layered pipeline (classify, topic gate, remember the user's turn, state and
   behaviour, thread, research, policy, history, retrieval). Its memories are what search
   finds (issue 32): search's ranking until the token budget is spent, the message itself, the
   history window and the chat's own questions and answers never among them.
2. Shadow's memory context from it (:func:`memory_context_of`): the memories carried are the
   activated ones (✓), the next best the budget left out the candidates (○), and the
   "HIGHLY RELEVANT / POTENTIALLY RELEVANT [Score: n%]" block (``pgmem.format_context``).
3. The policy's flags decide what goes into the prompt (inject_rag, inject_profile,
   inject_qa_history, privacy_mode), and one of pgmem serve's: ``inject_memories``, whether
   Shadow's block goes in (:func:`memory_flag`). Hook ``policy_override`` (step 5) may change
   any of them.
4. :func:`build_messages` (step 9's build_messages): behaviour, personality, length hint,
   precision, thread and research context, profile, privacy frame, the memory block (when the
   policy injects retrieval), the knowledge base's excerpts (when it injects RAG), earlier Q&A,
   the curated history, the message.
5. Hook ``before_generation`` (step 8), then the LLM (streamed or not), then
   ``after_generation`` and ``before_persist`` (step 10).
6. ``pgmem.observe_reply`` (SQL) stores the reply (a message of the conversation and a
   memory), and the activated (✓) memories the prompt carried are recorded as used
   (:func:`record_use`), never the ○ candidates.

No database connection is held while the LLM generates.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

log = logging.getLogger("pgmem.web.chat")

SYSTEM_PROMPT = ("You are a helpful assistant with long-term memory. Use the relevant memories below naturally, "
                 "without listing them or mentioning scores; when a memory contradicts what the user says now, "
                 "trust the user.")
POLICY_FLAGS = ("inject_rag", "inject_profile", "inject_qa_history", "privacy_mode")
# intents whose turns get Shadow's memory block even when the layered policy injects no
# retrieval (see memory_flag)
MEMORY_INTENTS = ("knowledge_base", "profile", "continuation")
HOOK_POINTS = ("policy_override", "before_generation", "after_generation", "before_persist")


class HookError(Exception):
    """A registered hook raised: the server's operator's code, reported by name."""


class Hooks:
    """Python callables around generation (layered design, steps 5, 8 and 10), registered on
    the server: ``build_app(hooks=hooks)`` or ``pgmem serve --hooks module:attribute``.

        hooks = Hooks()

        @hooks.before_generation
        def add_house_rules(turn):
            turn.messages.insert(1, {"role": "system", "content": "Answer in French."})

        @hooks.policy_override
        def never_profile_for_guests(turn):
            if turn.user_id is None:
                turn.policy["inject_profile"] = False

    Each gets the :class:`ChatTurn` and changes it in place: ``policy_override`` its
    ``policy`` flags (inject_memories, inject_rag, inject_profile, inject_qa_history,
    privacy_mode), ``before_generation`` its ``messages``, ``after_generation`` its
    ``reply``, ``before_persist`` its ``reply`` or ``persist`` (False: the reply is not stored).
    """

    def __init__(self) -> None:
        self._fns: dict[str, list[Callable[["ChatTurn"], Any]]] = {p: [] for p in HOOK_POINTS}

    def _add(self, point: str, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"a {point} hook must be callable, got {fn!r}")
        self._fns[point].append(fn)
        return fn

    def policy_override(self, fn: Callable) -> Callable:
        return self._add("policy_override", fn)

    def before_generation(self, fn: Callable) -> Callable:
        return self._add("before_generation", fn)

    def after_generation(self, fn: Callable) -> Callable:
        return self._add("after_generation", fn)

    def before_persist(self, fn: Callable) -> Callable:
        return self._add("before_persist", fn)

    def run(self, point: str, turn: "ChatTurn") -> None:
        for fn in self._fns[point]:
            try:
                fn(turn)
            except Exception as e:
                name = getattr(fn, "__qualname__", repr(fn))
                log.exception("%s hook %s failed", point, name)
                raise HookError(f"the {point} hook {name} failed ({type(e).__name__}); see the server's log") from e

    def __len__(self) -> int:
        return sum(len(v) for v in self._fns.values())


@dataclass
class ChatTurn:
    """One chat message on its way through the pipeline; hooks read and change it."""

    message: str
    conversation_id: str
    user_id: str | None
    tenant: str
    context_type: str = "conversation"
    context: dict[str, Any] = field(default_factory=dict)         # pgmem.context_for's document
    memory_context: dict[str, Any] = field(default_factory=dict)  # pgmem.memory_context's document
    policy: dict[str, bool] = field(default_factory=dict)
    messages: list[dict[str, str]] = field(default_factory=list)
    reply: str = ""
    persist: bool = True
    stored: dict[str, Any] | None = None   # pgmem.observe_reply's document
    used_ids: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)   # free for hooks

    @property
    def stage_doc(self) -> dict[str, Any]:
        return {s.get("stage"): s for s in self.context.get("stages", [])}

    @property
    def injected(self) -> bool:
        """Whether the prompt carries the memory block."""
        return bool(self.policy.get("inject_memories")) and bool(self.memory_context.get("formatted"))

    # -------------------------------------------------------------- what the client sees
    def memory_context_json(self) -> dict[str, Any]:
        """Shadow's memoryContext, with what pgmem adds (threshold, injected, usedMemoryIds)."""
        mc = self.memory_context
        return {"activatedMemories": mc.get("activatedMemories", []), "candidateMemories": mc.get("candidateMemories", []),
                "totalMemories": mc.get("totalMemories", 0), "avgActivationScore": mc.get("avgActivationScore"),
                "threshold": mc.get("threshold"), "contextType": mc.get("contextType"), "queryId": mc.get("queryId"),
                "injected": self.injected, "usedMemoryIds": self.used_ids, "formatted": mc.get("formatted", "")}

    def annotations(self) -> list[dict[str, Any]]:
        """The three stage annotations streamed before the first token (layered design,
        "Streaming Stage Protocol"): classified, retrieved, generating."""
        st = self.stage_doc
        c = st.get("classified", {})
        qa = self.context.get("context", {}).get("qa_history") or []
        mc = self.memory_context
        return [{"stage": "classified", "intent": c.get("intent"), "confidence": c.get("confidence")},
                {"stage": "retrieved", "retrieval_info": {
                    "num_docs": len(self.used_ids), "similar_queries": len(qa) if self.policy.get("inject_qa_history") else 0,
                    "activated": len(mc.get("activatedMemories", [])), "candidates": len(mc.get("candidateMemories", []))}},
                {"stage": "generating"}]

    def final(self) -> dict[str, Any]:
        """The final annotation: everything the turn decided, for the page."""
        c = self.stage_doc.get("classified", {})
        return {"stage": "complete", "intent": self.context.get("intent"), "confidence": c.get("confidence"),
                "conversationId": self.conversation_id, "userId": self.context.get("user_id"),
                "storedMemoryId": (self.context.get("memory") or {}).get("id"),
                "replyMemoryId": (self.stored or {}).get("memory_id"), "persisted": self.stored is not None,
                "policy": self.policy, "memoryContext": self.memory_context_json()}

    def response(self) -> dict[str, Any]:
        """Shadow's POST /api/chat answer: {content, memoryContext, storedMemoryId} (+ pgmem's)."""
        f = self.final()
        return {"content": self.reply, "memoryContext": f["memoryContext"], "storedMemoryId": f["storedMemoryId"],
                "replyMemoryId": f["replyMemoryId"], "conversationId": self.conversation_id, "intent": f["intent"],
                "stages": self.annotations()}


# ------------------------------------------------------------------ the prompt
def memory_flag(doc: dict[str, Any]) -> bool:
    """Whether Shadow's memory block goes into the prompt. The two designs disagree: Shadow
    sends every activated memory to the LLM ("Activated: passed threshold, sent to LLM"), the
    layered policy injects retrieval for knowledge_base turns only (profile turns get the
    profile, continuations the history). pgmem serve sends the block when the policy injects
    retrieval, and for profile and continuation turns too: what the user told about
    themselves is in episodic memories as much as in profile facts ("what is my dog called"),
    and Shadow's threshold already keeps weak matches out. Not for general turns (greetings,
    small talk: "system prompt + query only"), nor privacy turns (the transparency frame), nor
    when the behaviour mode asks for no retrieval (retrieval_depth 0)."""
    stages = {s.get("stage"): s for s in doc.get("stages", [])}
    policy = stages.get("policy", {})
    if (stages.get("behaviour") or {}).get("retrieval_depth") == 0 or policy.get("privacy_mode"):
        return False
    return bool(policy.get("inject_rag")) or doc.get("intent") in MEMORY_INTENTS


def build_messages(turn: ChatTurn) -> list[dict[str, str]]:
    """The layered design's build_messages (step 9) with Shadow's memory block: system prompt
    with behaviour, personality, length hint and precision; thread and research context;
    profile; privacy frame; memories; earlier Q&A; history; the message."""
    ctx = turn.context.get("context", {}) or {}
    sys_lines = [SYSTEM_PROMPT]
    if ctx.get("behaviour_context"):
        sys_lines.append(f"Conversation: {ctx['behaviour_context']}")
    if ctx.get("personality_mode") and ctx["personality_mode"] != "default":
        sys_lines.append(f"Personality: {ctx['personality_mode']}.")
    if ctx.get("response_length_hint"):
        sys_lines.append(f"Answer length: {ctx['response_length_hint']}.")
    if ctx.get("precision_mode"):
        sys_lines.append(f"Precision: {ctx['precision_mode']}.")
    messages = [{"role": "system", "content": "\n".join(sys_lines)}]

    def system(text: str) -> None:
        messages.append({"role": "system", "content": text})

    thread = ctx.get("thread") or {}
    if thread.get("summary") or thread.get("label"):
        system("Current topic thread: " + " - ".join(str(x) for x in (thread.get("label"), thread.get("summary")) if x))
    research = ctx.get("research") or {}
    insights = research.get("insights") or []
    if insights:
        system("Related research notes from earlier threads:\n"
               + "\n".join(f"- [{i.get('type')}] {i.get('content')}" for i in insights[:5]))
    if turn.policy.get("inject_profile") and ctx.get("profile"):
        system("What you know about the user (their profile):\n"
               + "\n".join(f"- {k}: {_plain(v)}" for k, v in ctx["profile"].items()))
    if turn.policy.get("privacy_mode") and ctx.get("privacy"):
        system("The user asks what is stored about them. Explain it plainly from this summary, and how to export "
               "or erase it:\n" + json.dumps(ctx["privacy"], default=str)[:4000])
    if turn.injected:
        system(turn.memory_context["formatted"])
    documents = ctx.get("documents") or []
    if turn.policy.get("inject_rag") and documents:
        system(knowledge_block(documents))
    if turn.policy.get("inject_qa_history") and ctx.get("qa_history"):
        system("Earlier, similar questions and the answers given:\n"
               + "\n".join(f"Q: {q.get('question')}\nA: {q.get('answer') or '(no answer)'}" for q in ctx["qa_history"]))
    for h in ctx.get("history") or []:
        if h.get("role") in ("user", "assistant") and h.get("content"):
            messages.append({"role": h["role"], "content": h["content"]})
    messages.append({"role": "user", "content": turn.message})
    return messages


DOCUMENT_EXCERPT_CHARS = 2000   # one excerpt in the prompt
DOCUMENT_BLOCK_CHARS = 8000     # all of them


def knowledge_block(documents: list[dict[str, Any]]) -> str:
    """The "Knowledge base" block of the prompt: the documents' chunks context_for (or
    pgmem.search_documents) found, best first, each with its title, cut to fit."""
    lines = ["Knowledge base (excerpts of the tenant's documents; cite the title when you use one):"]
    used = 0
    for d in documents:
        text = " ".join(str(d.get("content") or "").split())[:DOCUMENT_EXCERPT_CHARS]
        if not text or used + len(text) > DOCUMENT_BLOCK_CHARS:
            continue
        used += len(text)
        lines.append(f"[{d.get('title') or 'untitled'}] {text}")
    return "\n".join(lines)


def _plain(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, default=str)


# ------------------------------------------------------------------ recording use
def memory_context_of(session, doc: dict[str, Any], context_type: str = "conversation",
                      max_candidates: int = 3) -> dict[str, Any]:
    """Shadow's memoryContext (activatedMemories, candidateMemories, the formatted block) from
    a context_for document: the memories it carried are the activated ones (✓), the best it
    left out ("candidates") are shown below them (○). Their scores are search's."""
    ctx = doc.get("context") or {}

    def item(m: dict, activated: bool) -> dict[str, Any]:
        return {"memoryId": m["id"], "activationScore": m["score"], "activated": activated, "relevanceType": "search",
                "confidence": m["score"], "summary": m["content"], "content": m["content"], "who": m.get("who"),
                "category": m.get("category"), "createdAt": m.get("created_at"), "signals": {"search": m["score"]}}

    carried = [item(m, True) for m in ctx.get("memories") or []]
    below = [item(m, False) for m in (ctx.get("candidates") or [])[:max_candidates]]
    everything = carried + below
    formatted = session.scalar("format_context", memories=json.dumps(everything),
                               max_candidates=max_candidates) if everything else ""
    scores = [m["activationScore"] for m in everything]
    return {"activatedMemories": carried, "candidateMemories": everything, "totalMemories": len(everything),
            "avgActivationScore": round(sum(scores) / len(scores), 4) if scores else None,
            # (the cut: the least score the context carried)
            "threshold": min(m["activationScore"] for m in carried) if carried else None, "contextType": context_type,
            "queryId": None, "formatted": formatted or "", "formattedIds": [m["memoryId"] for m in everything],
            "recordedIds": [m["memoryId"] for m in carried]}


def record_use(session, ids: list[int]) -> None:
    """The memories a chat packed into the LLM's context are recorded as used: the one place
    the web server does it, so that a change of the SQL API (issue 24 turns pgmem.touch into
    an append-only log) is one line here."""
    if ids:
        session.client.use(ids, source="chat", conn=session.conn)


# ------------------------------------------------------------------ the pipeline
class ChatPipeline:
    """The turn's database steps around the LLM call. ``session`` (app.Session): a client
    bound to the request's tenant, and a pooled connection."""

    def __init__(self, hooks: Hooks | None = None, *, k: int = 10, max_candidates: int = 3, documents_k: int = 4):
        self.hooks = hooks if hooks is not None else Hooks()
        self.k = k
        self.max_candidates = max_candidates
        self.documents_k = documents_k

    def prepare(self, session, message: str, conversation_id: str, user_id: str | None,
                context_type: str = "conversation") -> ChatTurn:
        """Steps 1-4: memory context, context_for, policy override, messages, before_generation."""
        # embedded as search embeds a question (without the names it names: issue 32)
        emb = session.embed(session.scalar("query_embedding_text", p_text=message, p_user_id=user_id) or message)
        turn = ChatTurn(message=message, conversation_id=conversation_id, user_id=user_id, tenant=session.tenant,
                        context_type=context_type)
        result = session.client.context_for(message, conversation_id=conversation_id, user_id=user_id, embedding=emb,
                                            conn=session.conn)
        turn.context = result.doc
        turn.memory_context = memory_context_of(session, result.doc, context_type, self.max_candidates)
        turn.policy = {f: bool(result.policy.get(f)) for f in POLICY_FLAGS}
        turn.policy["inject_memories"] = memory_flag(result.doc)
        self.hooks.run("policy_override", turn)
        ctx = turn.context.setdefault("context", {})
        user = turn.context.get("user_id")
        if turn.policy.get("inject_profile") and ctx.get("profile") is None and user:
            # the override asked for the profile, which the SQL policy did not fetch
            ctx["profile"] = {r["key"]: r["value"] for r in session.client.call("profile", user_id=user, conn=session.conn)}
        if turn.policy.get("inject_rag") and not ctx.get("documents"):
            # knowledge-base excerpts (issue 32 item 8; issue 36 L28): context_for returns them
            # when it retrieves (k > 0); the chat asks for them itself when it did not
            ctx["documents"] = session.client.search_documents(message, embedding=emb, k=self.documents_k,
                                                               user_id=user, conn=session.conn)
        # what the prompt carried counts as used: the activated (✓) memories of the block, never
        # the ○ candidates listed below them (issue 32 item 7). context_for has recorded them
        # (sql/690_context_for.sql); the chat records no second use of them (record_use).
        activated = {int(m["memoryId"]) for m in turn.memory_context.get("activatedMemories", [])}
        turn.used_ids = sorted(activated) if turn.injected else []
        turn.messages = build_messages(turn)
        self.hooks.run("before_generation", turn)
        return turn

    def finish(self, session, turn: ChatTurn) -> ChatTurn:
        """Steps after generation: after_generation, before_persist, observe_reply, record use."""
        self.hooks.run("after_generation", turn)
        self.hooks.run("before_persist", turn)
        if turn.persist and turn.reply.strip():
            turn.stored = session.client.observe_reply(turn.conversation_id, turn.reply, conn=session.conn)
        # (the memories context_for carried are recorded as used by context_for itself; a hook
        # that adds memories of its own to turn.used_ids has those recorded here)
        record_use(session, [i for i in turn.used_ids if i not in turn.memory_context.get("recordedIds", [])])
        return turn


# ------------------------------------------------------------------ the stream
def data_line(code: str, value: Any) -> str:
    """One part of the layered design's stream protocol (the Vercel AI SDK data stream):
    ``8:[{...}]`` annotations, ``0:"text"`` tokens, ``3:"error"``, ``e:``/``d:`` finish."""
    return f"{code}:{json.dumps(value, separators=(',', ':'), default=str)}"


def sse(line: str) -> str:
    return f"data: {line}\n\n"


def stream_turn(turn: ChatTurn, tokens: Iterator[str], finish: Callable[[ChatTurn], None]) -> Iterator[str]:
    """The SSE body of a streamed turn: the three stage annotations, the tokens, the final
    annotation, then ``e:`` and ``d:`` with the finish reason. An error after the stream began
    becomes a ``3:`` part and finishReason "error" (the HTTP status is already sent)."""
    for a in turn.annotations():
        yield sse(data_line("8", [a]))
    reason = "stop"
    try:
        try:
            for piece in tokens:
                turn.reply += piece
                yield sse(data_line("0", piece))
        finally:
            close = getattr(tokens, "close", None)
            if close is not None:
                close()  # the LLM's connection, at once (the client may have gone)
        finish(turn)
    except Exception as e:  # LLMError, HookError, a database error while persisting
        from ..errors import PgmemError

        log.warning("chat stream failed: %s", e, exc_info=not isinstance(e, (PgmemError, HookError)))
        message = str(e) if isinstance(e, (PgmemError, HookError)) else "the reply could not be completed (see the server's log)"
        yield sse(data_line("3", message))
        reason = "error"
    yield sse(data_line("8", [turn.final()]))
    yield sse(data_line("e", {"finishReason": reason}))
    yield sse(data_line("d", {"finishReason": reason}))
