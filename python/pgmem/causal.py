"""Causal bindings judged by an LLM (issue 16, fragment-reconstructive-memory.md bindings).

In the database, a turn that opens with a cue phrase ("so", "that's why", "because", ...) is
bound to the previous turn of its session as cause and effect (sql/130_bindings.sql). When an
OpenAI-compatible model is configured (PGMEM_LLM_BASE_URL, PGMEM_LLM_MODEL; the same endpoint
as the LLM extractor), ``link_causes`` asks it about the other consecutive turns:

    from pgmem import MemoryClient
    from pgmem.causal import link_causes
    mem = MemoryClient(tenant="acme")
    link_causes(mem)            # {'judged': 120, 'causal': 17, 'failed': 0}

Each pair is judged once (pgmem.record_causal keeps the verdict on the temporal binding), and a
pair judged causal gets a causal binding (src = cause, dst = effect, weight = confidence). A pair
the model could not answer (timeouts, errors after the retries) stays unjudged for a later run.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any

log = logging.getLogger("pgmem.causal")

SYSTEM_PROMPT = """You judge whether two consecutive turns of a conversation are linked as cause and effect.
Turn A came first, then turn B. Answer with one JSON object and nothing else:
{"causal": true or false, "direction": "forward" if A is the cause of (or the reason for) B,
 "backward" if B is the cause of (or the reason for) A, "confidence": a number between 0 and 1}
Only a real causal or explanatory link counts (because, so, therefore, as a result, that is why),
not mere succession or a change of topic."""


def _judge(llm, first: dict, second: dict) -> dict | None:
    """The model's verdict on (first, second), or None when it could not give one."""
    from .extraction.llm import _Fatal, _Retryable

    user = json.dumps({"A": {"who": first["who"], "text": first["content"]},
                       "B": {"who": second["who"], "text": second["content"]}}, ensure_ascii=False)
    payload = {"model": llm.model, "temperature": 0, "response_format": {"type": "json_object"},
               "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]}
    for attempt in range(llm.retries + 1):
        try:
            obj = llm._post(payload)
        except _Fatal as e:
            log.warning("causal judgement of %s -> %s failed: %s", first["id"], second["id"], e)
            return None
        except _Retryable as e:
            if attempt == llm.retries:
                log.warning("causal judgement of %s -> %s failed after %d attempts: %s",
                            first["id"], second["id"], attempt + 1, e)
                return None
            time.sleep(llm.backoff * (2 ** attempt))
            continue
        causal = obj.get("causal")
        if isinstance(causal, str):
            causal = causal.strip().lower() in ("true", "yes")
        if not isinstance(causal, bool):
            if attempt == llm.retries:
                log.warning("causal judgement of %s -> %s: no boolean 'causal' in %s", first["id"], second["id"], obj)
                return None
            continue
        direction = obj.get("direction") if obj.get("direction") in ("forward", "backward") else "forward"
        conf = obj.get("confidence", 1.0)
        try:
            conf = min(1.0, max(0.0, float(conf)))
        except (TypeError, ValueError):
            conf = 1.0
        return {"causal": causal, "direction": direction, "confidence": conf}
    return None


def link_causes(client, llm=None, *, batch: int = 50, limit: int | None = None, conn=None) -> dict[str, Any]:
    """Ask the LLM about the consecutive turns of the client's tenant not judged yet (in batches
    of ``batch``, at most ``limit`` pairs) and record its answers. ``llm``: an LLMExtractor (its
    endpoint, model, key, timeout and retries); by default one from the PGMEM_LLM_* variables."""
    if llm is None:
        from .extraction import LLMExtractor

        llm = LLMExtractor()
    judged = causal = failed = 0
    skipped: set[tuple[int, int]] = set()
    while limit is None or judged + failed < limit:
        n = batch if limit is None else min(batch, limit - judged - failed)
        pairs = [p for p in client.call("causal_candidates", conn=conn, batch=n + len(skipped))
                 if (p["first_id"], p["second_id"]) not in skipped][:n]
        if not pairs:
            break
        items = []
        for p in pairs:
            first = {"id": p["first_id"], "who": p["first_who"], "content": p["first_content"]}
            second = {"id": p["second_id"], "who": p["second_who"], "content": p["second_content"]}
            v = _judge(llm, first, second)
            if v is None:
                failed += 1
                skipped.add((p["first_id"], p["second_id"]))
                continue
            items.append({"first_id": p["first_id"], "second_id": p["second_id"], "model": llm.model, **v})
        if items:
            causal += client.call("record_causal", conn=conn, items=json.dumps(items))[0]["record_causal"]
            judged += len(items)
    return {"judged": judged, "causal": causal, "failed": failed}
