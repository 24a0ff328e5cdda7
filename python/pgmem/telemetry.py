"""The operator's view of the client (issue 34): every SQL function the client calls is

* an OpenTelemetry span (kind CLIENT, named ``pgmem.<function>``) when the OpenTelemetry API is
  installed (the ``[otel]`` extra); without an SDK configured by the application the API's
  tracer does nothing, so the cost is a function call. Spans follow the database semantic
  conventions: ``db.system.name`` postgresql, ``db.operation.name`` the function, and the
  error's type and SQLSTATE when it failed;
* reported to the observers added with :func:`add_observer` (``pgmem serve``'s Prometheus
  histogram per SQL function, :mod:`pgmem.web.metrics`): ``observer(function, seconds, outcome)``
  with outcome ``ok`` or the error's class name.

The transport (``_transport.Transport._call_ops``) calls :func:`call_started` and
:func:`call_ended` around each call; nothing here imports psycopg.
"""
from __future__ import annotations

import time
from typing import Any, Callable

Observer = Callable[[str, float, str], None]

_observers: list[Observer] = []
_tracer: Any = None  # None: not looked up yet; False: no OpenTelemetry


def add_observer(fn: Observer) -> None:
    if fn not in _observers:
        _observers.append(fn)


def remove_observer(fn: Observer) -> None:
    if fn in _observers:
        _observers.remove(fn)


def tracer() -> Any:
    """OpenTelemetry's tracer for pgmem, or None without the OpenTelemetry API."""
    global _tracer
    if _tracer is None:
        try:
            from opentelemetry import trace

            from . import __version__

            _tracer = trace.get_tracer("pgmem", __version__)
        except ImportError:
            _tracer = False
    return _tracer or None


def call_started(function: str) -> tuple[str, float, Any]:
    t = tracer()
    span = None
    if t is not None:
        from opentelemetry.trace import SpanKind

        span = t.start_span(f"pgmem.{function}", kind=SpanKind.CLIENT,
                            attributes={"db.system.name": "postgresql", "db.system": "postgresql",
                                        "db.operation.name": f"pgmem.{function}"})
    return function, time.perf_counter(), span


def call_ended(token: tuple[str, float, Any], error: BaseException | None) -> None:
    function, started, span = token
    seconds = time.perf_counter() - started
    outcome = "ok" if error is None else type(error).__name__
    if span is not None:
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", outcome)
            state = getattr(error, "sqlstate", None)
            if state:
                span.set_attribute("db.response.status_code", state)
            span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
        span.end()
    for fn in list(_observers):
        try:
            fn(function, seconds, outcome)
        except Exception:  # an observer never breaks a call
            pass
