"""Stopping within a deadline (issue 34): ``pgmem serve`` and ``pgmem worker`` exit within
:data:`DEADLINE_S` (2.5 s, plus a fraction of a second) of SIGINT or SIGTERM, whatever they
are doing.

A graceful stop is tried first: the web server stops accepting, gives open connections
:data:`GRACE_S` to finish, cancels what is left and runs its shutdown (the pool, the MCP
sessions); the worker finishes its batch. But some work cannot be interrupted from Python:
a thread blocked in a model load, in an LLM's stream that never ends, in a query, or the
interpreter joining such a thread at exit (``make test`` once saw ``pgmem serve`` still alive
60 s after SIGINT under load). So the first signal also arms a watchdog: a daemon thread that,
if the process is still there at the deadline, runs the ``atexit`` functions (for at most
:data:`ATEXIT_S`) and ends the process with ``os._exit(128 + signal)``. Nothing is lost that a
stop may not lose: a transaction cut short is rolled back by PostgreSQL (the worker's batch
is retried), a chat cut short was not persisted. A second signal exits at once. When the
graceful stop is over, :func:`stopped` ends the process at once rather than in the
interpreter's exit (which would join the blocked threads and tear down every module).

``PGMEM_STOP_DEADLINE`` (seconds, 0.5 to 600) changes the deadline.
"""
from __future__ import annotations

import os
import sys
import threading
import time

#: Seconds from the first signal to the forced exit (PGMEM_STOP_DEADLINE). Well under 5 s: on a
#: machine whose cores are busy (make test on 2 cores) the process gets a fraction of a core,
#: and what little it still does after the deadline (the atexit functions, the exit) takes
#: seconds of wall time there.
DEADLINE_S = 2.5
#: Seconds the web server gives open connections (streams, MCP sessions) before cancelling them.
GRACE_S = 1
#: Seconds the atexit functions get before the forced exit.
ATEXIT_S = 0.3

_lock = threading.Lock()
_armed: dict[str, float | int | str] = {}


def deadline() -> float:
    raw = os.environ.get("PGMEM_STOP_DEADLINE", "")
    try:
        value = float(raw) if raw.strip() else DEADLINE_S
    except ValueError:
        return DEADLINE_S
    return min(max(value, 0.5), 600.0)


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except Exception:  # a closed stderr must not keep the process alive
        pass


def _run_atexit(limit: float) -> None:
    import atexit

    t = threading.Thread(target=atexit._run_exitfuncs, name="pgmem-stop-atexit", daemon=True)
    t.start()
    t.join(limit)


def force_exit(code: int, why: str = "") -> None:
    """Ends the process now: the atexit functions (bounded), flushed streams, ``os._exit``."""
    if why:
        _say(why)
    _run_atexit(ATEXIT_S)
    _flush_and_exit(code)


def _flush_and_exit(code: int) -> None:
    """The streams flushed, then ``os._exit``: the end of force_exit and stopped."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _watch(what: str, signum: int, limit: float) -> None:
    time.sleep(limit)  # daemon: gone with the process when the graceful stop was quicker
    force_exit(128 + signum, f"pgmem {what}: still stopping {limit:g} s after the signal: exiting now")


def arm(what: str, signum: int) -> bool:
    """Called on a stop signal: starts the watchdog (the first time: returns True) or, on a
    second signal, exits at once."""
    with _lock:
        first = not _armed
        if first:
            _armed.update(what=what, signum=signum, at=time.monotonic())
    if not first:
        force_exit(128 + signum, f"pgmem {what}: second signal: exiting now")
        return False
    threading.Thread(target=_watch, args=(what, signum, deadline()), name="pgmem-stop-watchdog",
                     daemon=True).start()
    return True


def armed() -> bool:
    return bool(_armed)


def stopped(code: int = 0) -> None:
    """Called when a command's graceful stop is over: after a signal, the process ends here
    (the atexit functions, flushed streams, ``os._exit``) instead of in the interpreter's own
    exit, which joins every thread still blocked (an LLM's stream, a query) and tears down
    every module: seconds on a busy machine, and a daemon thread, the watchdog, cannot run
    once that teardown has begun. Without a signal it returns."""
    if not _armed:
        return
    import atexit

    atexit._run_exitfuncs()  # here, unbounded: the watchdog still ends the process at the deadline
    _flush_and_exit(code)


def install(what: str, on_stop=None) -> None:
    """SIGINT and SIGTERM handlers for a command's main thread: arm the watchdog, then
    ``on_stop(signum)`` (default: raise KeyboardInterrupt, which unwinds a starting command)."""
    import signal

    def handler(signum, frame):
        arm(what, signum)
        if on_stop is None:
            raise KeyboardInterrupt
        on_stop(signum)

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, handler)
