"""Bounds on the engine's work (issue 27, H1: no call a tenant makes can hold a core).

The engine's rules are regular expressions, and Python's ``re`` backtracks: a pattern with two
quantifiers that can match the same characters (``\\s*(?:'ve)?\\s*``) tries every way of
splitting a run between them, so a word followed by 12,000 spaces cost ``detect_facts`` 23 s.
PL/Python checks for a cancel only between Python calls, and one ``re`` call is one C call: no
``statement_timeout``, ``pg_cancel_backend`` or ``pg_terminate_backend`` stopped it.

Three bounds, each enough alone for the common case, together for the rest:

* **the input is capped** (:data:`MAX_TEXT_CHARS`; the SQL entry points refuse longer input
  with a clear error first, this is the engine's own guard) and **normalised**
  (:func:`normalise`): every run of whitespace becomes one space (or one new line when it
  held one), and a run of eight or more punctuation marks and spaces keeps only its first
  and last three characters. No rule means anything by the length of such a run;
* **the rules run over windows** (:func:`windows`): whole sentences, at most
  :data:`WINDOW_CHARS` characters each (a longer sentence is cut at a space). A rule that is
  still quadratic in its window costs at most a window squared, a few milliseconds;
* **cancellation is checked between windows** (:func:`tick`): inside PostgreSQL, pgmem._engine
  installs a check (a prepared ``select 1``, whose executor processes a pending cancel or
  timeout) that runs at most every :data:`CHECK_SECONDS`. Long numeric work (t-SNE, k-means)
  runs under :func:`cancellable`, which calls the same check from a profile hook between the
  library's own Python steps.

The patterns themselves are written so that no two adjacent quantifiers share characters
(tests/test_hostile_input.py holds every pattern of the engine and the extractor to a time
bound on long runs of whitespace, punctuation and repeated words).

Standard library only (runs in PL/Python and in the client).
"""
from __future__ import annotations

import re
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["MAX_TEXT_CHARS", "WINDOW_CHARS", "normalise", "windows", "tick", "set_check", "cancellable"]

#: The most characters of one text the engine reads (the SQL entry points refuse more, naming
#: the argument and the setting; max_content_bytes is 262144 by default).
MAX_TEXT_CHARS = 262144
#: Rules match within windows of at most this many characters (whole sentences where they fit).
WINDOW_CHARS = 1000
#: How often, at most, :func:`tick` runs the installed check.
CHECK_SECONDS = 0.02

_check: Callable[[], object] | None = None
_last = 0.0

_WS = re.compile(r"\s+")
# a run of 8 or more characters that are neither word characters nor new lines (punctuation and
# spaces, after _WS): its first and last three are kept, which is all any rule looks at
_RUN = re.compile(r"[^\w\n]{8,}")
# a sentence: up to and including its end mark(s) and the space after, or a new line
_SENTENCE_END = re.compile(r"[.!?;]+(?:\s|$)|\n")


def set_check(fn: Callable[[], object] | None) -> None:
    """Install the cancellation check (None: none; the client's default)."""
    global _check
    _check = fn


def tick() -> None:
    """Run the installed check if :data:`CHECK_SECONDS` have passed since the last one. Inside
    PostgreSQL it raises the pending cancel or timeout (SQLSTATE 57014) as an exception."""
    global _last
    if _check is None:
        return
    now = time.monotonic()
    if now - _last >= CHECK_SECONDS:
        _last = now
        _check()


def _ws(m: re.Match[str]) -> str:
    return "\n" if "\n" in m.group(0) else " "


def normalise(text: str | None, limit: int = MAX_TEXT_CHARS) -> str:
    """The text the rules see: at most ``limit`` characters, each run of whitespace one space
    (one new line when it held one), each run of 8 or more other non-word characters its first
    and last three. Linear in the input."""
    if not text:
        return ""
    t = text[:limit]
    t = _WS.sub(_ws, t)
    return _RUN.sub(lambda m: m.group(0)[:3] + m.group(0)[-3:], t)


def windows(text: str, size: int = WINDOW_CHARS) -> Iterator[tuple[int, str]]:
    """(offset, window) pairs covering a normalised text in order: consecutive whole sentences
    of at most ``size`` characters together; a longer sentence is cut at its last space before
    ``size`` (or at ``size``). :func:`tick` runs before each window."""
    n = len(text)
    start = 0
    while start < n:
        tick()
        if n - start <= size:
            yield start, text[start:]
            return
        # the last sentence end within the window, else the last space, else a hard cut
        end = -1
        for m in _SENTENCE_END.finditer(text, start, start + size):
            end = m.end()
        if end <= start:
            end = text.rfind(" ", start + 1, start + size)
            end = end + 1 if end > start else start + size
        yield start, text[start:end]
        start = end


@contextmanager
def cancellable() -> Iterator[None]:
    """Run a block of long numeric work (scikit-learn's t-SNE or k-means) so that the installed
    check runs between its Python-level steps: a profile hook (``sys.setprofile``) calls
    :func:`tick` on function calls. The check's exception ends the block; the hook is removed
    on the way out either way. Without an installed check this only runs the block."""
    if _check is None:
        yield
        return
    previous = sys.getprofile()
    count = 0

    def hook(frame, event, arg):  # noqa: ARG001
        nonlocal count
        count += 1
        if count & 63 == 0:
            tick()

    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(previous)


# What pgmem._engine may call from SQL (module 'guard'): nothing; the other modules import it.
SQL_API: dict[str, Callable] = {}
