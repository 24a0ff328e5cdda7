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


# ------------------------------------------------------------------------------ the command
def _require_web() -> None:
    import importlib.util

    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        from ..config import DISTRIBUTION
        from ..errors import SetupError

        raise SetupError(f"pgmem serve needs {' and '.join(missing)}: pip install '{DISTRIBUTION}[web]'")


def _check_host(host: str) -> None:
    import ipaddress
    import logging

    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        logging.getLogger("pgmem.web").warning(
            "serving on %s, beyond this machine, over plain HTTP: bearer tokens travel in clear text; put a TLS "
            "reverse proxy in front of it", host)


def load_hooks(spec: str):
    """``module:attribute`` -> a :class:`pgmem.web.chat.Hooks` (or a callable returning one)."""
    import importlib

    from ..errors import ConfigError
    from .chat import Hooks

    mod, _, attr = spec.partition(":")
    if not mod or not attr:
        raise ConfigError(f"--hooks takes module:attribute (a pgmem.web.chat.Hooks), got {spec!r}")
    try:
        obj = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"--hooks {spec}: {e}") from None
    if callable(obj) and not isinstance(obj, Hooks):
        obj = obj()
    if not isinstance(obj, Hooks):
        raise ConfigError(f"--hooks {spec} is a {type(obj).__name__}, not a pgmem.web.chat.Hooks")
    return obj


def _state_files():
    from ..config import home

    h = home()
    return h / "serve.pid", h / "serve.log", h / "serve.url"


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _answers(host: str, port: int) -> bool:
    import socket

    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def running_server() -> tuple[int, str] | None:
    """(pid, url) of the detached server of this pgmem home, when it runs."""
    pid_file, _, url_file = _state_files()
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    if not _alive(pid):
        return None
    return pid, url_file.read_text().strip() if url_file.exists() else ""


def start_detached(argv: list[str], host: str, port: int, timeout: float = 120.0, dsn: str | None = None,
                   wait: bool = True) -> tuple[int, str]:
    """``pgmem serve`` in the background (its own session: it outlives the caller, e.g. make
    demo); with ``wait``, until it answers (it loads the embedding model first: seconds).
    Returns (pid, url); the running one's when this pgmem home already has one."""
    import os
    import subprocess
    import sys
    import time

    from ..errors import SetupError

    got = running_server()
    if got:
        return got
    pid_file, log_file, url_file = _state_files()
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    url = f"http://{host}:{port}/"
    if _answers(host, port):
        raise SetupError(f"port {port} on {host} is taken by another program: pgmem serve --port <another>")
    env = os.environ.copy()
    if dsn:
        env["PGMEM_DSN"] = dsn  # (not on the command line, where ps shows a password)
    # the same pgmem as this process's (a checkout's python/ directory, or site-packages)
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([here] + [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x])
    with open(log_file, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pgmem.cli", "serve", *argv], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    pid_file.write_text(f"{proc.pid}\n")
    url_file.write_text(url + "\n")
    if not wait:
        return proc.pid, url
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_file.read_text(errors="replace")[-800:]
            raise SetupError(f"pgmem serve stopped at start (exit {proc.returncode}); its log {log_file} ends with:\n{tail}")
        if _answers(host, port):
            return proc.pid, url
        time.sleep(0.5)
    raise SetupError(f"pgmem serve did not answer on {url} within {timeout:.0f} s: see {log_file}")


def stop_detached() -> bool:
    import os
    import signal
    import time

    got = running_server()
    pid_file, _, url_file = _state_files()
    if not got:
        pid_file.unlink(missing_ok=True)
        return False
    os.kill(got[0], signal.SIGTERM)
    for _ in range(100):
        if not _alive(got[0]):
            break
        time.sleep(0.1)
    pid_file.unlink(missing_ok=True)
    url_file.unlink(missing_ok=True)
    return True


def _serve_argv(args) -> list[str]:
    """The options of this ``pgmem serve`` call, for the detached process (--detach left out)."""
    argv = ["--host", args.host, "--port", str(args.port)]
    for flag, value in (("--tokens", args.tokens), ("--max-body-bytes", args.max_body_bytes), ("--hooks", args.hooks)):
        if value is not None:
            argv += [flag, str(value)]
    for origin in args.cors_origin or []:
        argv += ["--cors-origin", origin]
    argv += [flag for flag, on in (("--no-mcp", args.no_mcp), ("--no-embed", args.no_embed)) if on]
    return argv


def cmd_serve(args) -> int:
    import sys

    if args.stop:
        print("pgmem serve: stopped" if stop_detached() else "pgmem serve: no detached server runs", file=sys.stderr)
        return 0
    _require_web()
    _check_host(args.host)
    if args.detach:
        pid, url = start_detached(_serve_argv(args), args.host, args.port, dsn=args.dsn)
        print(url)
        print(f"pgmem serve: running in the background (pid {pid}); stop it with: pgmem serve --stop", file=sys.stderr)
        return 0
    from .. import _shutdown

    _shutdown.install("serve")  # a signal while it starts: KeyboardInterrupt, and the deadline armed
    from ..db import connect, require_pgmem
    from .app import build_app

    with connect(args.dsn, connect_timeout=10) as c:  # a one-line error now, rather than a failed start-up later
        require_pgmem(c, c.info.dsn)

    hooks = load_hooks(args.hooks) if args.hooks else None
    embedder = None if args.no_embed else serve_embedder()
    app = build_app(args.dsn, token_file=args.tokens, embed=embedder is not None, embedder=embedder, hooks=hooks,
                    cors_origins=args.cors_origin or None, max_body_bytes=args.max_body_bytes, mcp=not args.no_mcp,
                    host=args.host, port=args.port)
    print(f"pgmem serve: http://{args.host}:{args.port}/ (explorer), /docs (OpenAPI)"
          + (", /mcp (MCP)" if app.state.mcp_mounted else ""), file=sys.stderr, flush=True)
    make_server(app, args.host, args.port).run()
    _shutdown.stopped(0)  # stopped by a signal: end now, not in the interpreter's exit
    return 0


def serve_embedder():
    """The embedder PGMEM_EMBEDDER chooses, as the client and the worker build it (issue 34:
    serve built one only when sentence-transformers was installed, so the app image, which
    ships the int8 ONNX model without torch, searched on words alone): the int8 MiniLM when
    its packages are there, else sentence-transformers, else the HTTP embedder, else None
    (said once: lexical search, the worker embeds later). A model without a load at start-up
    (the ONNX one) is warmed in a daemon thread, so that the first request does not pay for it
    and a stop never waits for it."""
    import threading

    from ..client import _auto_embedder

    embedder = _auto_embedder()
    if embedder is not None and getattr(embedder, "kind", "") == "onnx":  # (the lifespan loads one with .model)
        threading.Thread(target=_warm, args=(embedder,), name="pgmem-embedder-warm-up", daemon=True).start()
    return embedder


def _warm(embedder) -> None:
    import logging

    try:
        embedder.embed("warm up")
    except Exception as e:  # the first request reports it: here only a note
        logging.getLogger("pgmem.web").warning("the embedding model did not load: %s", e)


def make_server(app, host: str, port: int):
    """uvicorn's server, stopping within the deadline of :mod:`pgmem._shutdown` (issue 34): a
    signal arms the watchdog; open connections (chat streams, MCP sessions) get
    ``GRACE_S`` before they are cancelled; a signal during start-up (the embedding model
    loading, the pool opening: nothing served yet) exits at once; a second signal exits at once."""
    import asyncio

    import uvicorn

    from .. import _shutdown

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            _shutdown.arm("serve", sig)  # a second signal ends the process here
            super().handle_exit(sig, frame)

        async def startup(self, sockets=None) -> None:
            # uvicorn waits for the lifespan's start-up (the model load, a thread) before it
            # looks at a signal: watch for one meanwhile
            task = asyncio.ensure_future(super().startup(sockets=sockets))
            while not task.done():
                await asyncio.wait({task}, timeout=0.05)
                if self.should_exit and not task.done():
                    captured = getattr(self, "_captured_signals", None) or [15]
                    sig = captured[-1]
                    _shutdown.force_exit(128 + sig, "pgmem serve: stopped while starting")
            await task

        async def _serve(self, sockets=None) -> None:
            await super()._serve(sockets)
            getattr(self, "_captured_signals", []).clear()  # stopped gracefully: uvicorn need not raise the signal again

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=_shutdown.GRACE_S)
    return Server(config)


def register(sub) -> None:
    """The ``pgmem serve`` command (called by cli.build_parser)."""
    from pathlib import Path as _Path

    p = sub.add_parser("serve", help="the web server: Shadow's chat API, REST over the SQL API, MCP, the explorer page",
                       description="One web server on 127.0.0.1: the memory explorer page (/), Shadow's API "
                                   "(/api/chat, /api/stats, /api/config/apikey, /api/health), a REST route per SQL "
                                   "function (/docs), and the MCP server (/mcp). Every request needs a bearer token "
                                   "(pgmem mcp --new-token) or a signed tenant claim.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--tokens", type=_Path, help="the bearer tokens (default PGMEM_MCP_TOKENS, else .pgmem/mcp-tokens.json; "
                   "make one with: pgmem mcp --new-token --tenant T [--user U])")
    p.add_argument("--cors-origin", action="append", metavar="ORIGIN",
                   help="allow a browser origin (repeatable; default none: CORS off; PGMEM_WEB_CORS_ORIGINS)")
    p.add_argument("--max-body-bytes", type=int, help="largest request body (default 1 MiB; PGMEM_WEB_MAX_BODY_BYTES)")
    p.add_argument("--hooks", metavar="MODULE:ATTR", help="chat hooks: a pgmem.web.chat.Hooks (or a function making one)")
    p.add_argument("--no-mcp", action="store_true", help="do not mount the MCP server at /mcp")
    p.add_argument("--no-embed", action="store_true", help="no local embeddings: lexical search, the worker embeds later")
    p.add_argument("--detach", action="store_true", help="run in the background (log and pid in .pgmem/serve.*), print the URL")
    p.add_argument("--stop", action="store_true", help="stop the server --detach started")
    p.set_defaults(func=cmd_serve)
