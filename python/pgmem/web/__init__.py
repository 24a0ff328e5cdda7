"""``pgmem serve``: pgmem on the web (issue 25). One ASGI app (FastAPI on uvicorn) that serves

- Shadow's API in its design's shapes (seeds/shadow-memory-system.md, "Frontend Integration"):
  ``POST /api/chat``, ``GET /api/stats``, ``POST /api/config/apikey``, ``GET /api/health``;
- a REST route per SQL function (remember, search, activate, recall, context, context_for,
  memories, history, restore, revert, forget, profile, fact history, threads, insights,
  clusters, jobs, export_user, erase_user): each route calls one SQL function;
- chat through an OpenAI-compatible LLM, streamed in the layered design's protocol over SSE
  (seeds/layered-memory-architecture.md, "Streaming Stage Protocol"), with hooks;
- the OpenAPI document (``/openapi.json``, ``/docs``), the MCP server (``/mcp``), and the
  memory explorer page (``/``).

Every request is bound to a tenant by a bearer token (the MCP server's token map, ``pgmem mcp
--new-token``) or a signed tenant claim (pgmem.claims), exactly as the database binds logins.
The modules: :mod:`.app` (routes), :mod:`.auth` (tenancy), :mod:`.chat` (the pipeline and its
hooks), :mod:`.llm` (the OpenAI-compatible client), ``static/`` (the page: no build step, no Node).
"""
from __future__ import annotations

import re
from pathlib import Path

DEFAULT_PORT = 8780


def expected_revision() -> str | None:
    """The head of this installation's Alembic revisions (migrations/versions/*.py), read from
    the files: the revision no other revision names as its down_revision."""
    from ..config import migrations_dir

    revs: dict[str, str | None] = {}
    for p in sorted(Path(migrations_dir(), "versions").glob("*.py")):
        text = p.read_text()
        rev = re.search(r'^revision\s*=\s*["\']([^"\']+)["\']', text, re.M)
        down = re.search(r'^down_revision\s*=\s*(?:["\']([^"\']+)["\']|None)', text, re.M)
        if rev:
            revs[rev.group(1)] = down.group(1) if down else None
    heads = set(revs) - {d for d in revs.values() if d}
    return heads.pop() if len(heads) == 1 else None
