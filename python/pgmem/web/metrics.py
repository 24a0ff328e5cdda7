"""The operator's view of ``pgmem serve`` (issue 34): Prometheus metrics, a liveness route and
OpenTelemetry server spans.

``GET /metrics`` (the Prometheus text format):

* ``pgmem_http_requests_total{method, route, status}`` and
  ``pgmem_http_request_duration_seconds{method, route}`` (a histogram): per route *template*
  (``/api/memories/{memory_id}``, never the raw path: a bounded set of series); ``/mcp`` and
  the static files count under their mount;
* ``pgmem_sql_calls_total{function, outcome}`` and ``pgmem_sql_call_duration_seconds{function}``:
  per SQL function this server called (pgmem.telemetry's observer of the client);
* read from the views at scrape time, in one statement, summed over the tenants the server's
  login sees (every tenant for pgmem_owner or pgmem_admin; no tenant label: a SaaS with 10^5
  tenants would have 10^5 series): ``pgmem_memories{state}`` (pgmem.tenant_stats),
  ``pgmem_embedding_queue`` (tenant_stats), ``pgmem_work_queue{task}`` (work_queue_status),
  ``pgmem_job_runs_7d{job}``, ``pgmem_job_failures_7d{job}`` and ``pgmem_job_last_failed{job}``
  (job_status); ``pgmem_scrape_database_ok`` is 0 when that statement failed (the other
  series are still served).

Who may read it: the numbers cross tenants, so a tenant's bearer token does not open it.
``PGMEM_METRICS_TOKEN`` is the scraper's bearer token (Prometheus: ``authorization:
{credentials: ...}`` in the scrape config); ``PGMEM_METRICS_PUBLIC=1`` serves it to anyone who
reaches the port (behind a network policy, as many exporters run). Neither set: 403 naming both.

``GET /livez``: 200 ``{"status": "ok"}`` while the process serves requests; no token, and it
says nothing about the database (that is ``/api/health``, with a token): a liveness probe that
restarts the server when PostgreSQL is down would only add restarts to an outage.

OpenTelemetry: with the API installed (the ``[otel]`` extra) each request is a SERVER span
``METHOD /route`` (the W3C ``traceparent`` of the request continues its trace), and the SQL
calls it makes are CLIENT spans under it (pgmem.telemetry). The application configures the SDK
and exporter as usual (``opentelemetry-instrument``, or a TracerProvider of its own).
"""
from __future__ import annotations

import hmac
import os
import time
from typing import Any

from fastapi import Request

#: Latency buckets (s): the defaults of Prometheus' client, and the minutes of a streamed chat.
BUCKETS = (.005, .01, .025, .05, .075, .1, .25, .5, .75, 1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0, 120.0)

#: The scrape-time statement: one round trip, existing views only.
SCRAPE_SQL = """
select 'memories' as metric, s.state as label, coalesce(sum(s.n), 0)::float8 as value
  from pgmem.tenant_stats t
  cross join lateral (values ('active', t.active), ('archived', t.archived), ('merged', t.merged),
                             ('deleted', t.deleted)) as s(state, n)
 group by s.state
union all
select 'embedding_queue', '', coalesce(sum(t.embedding_queue), 0)::float8 from pgmem.tenant_stats t
union all
select 'work_queue', w.task, sum(w.items)::float8 from pgmem.work_queue_status w group by w.task
union all
select 'job_runs_7d', j.job, sum(j.runs_7d)::float8 from pgmem.job_status j group by j.job
union all
select 'job_failures_7d', j.job, sum(j.failures_7d)::float8 from pgmem.job_status j group by j.job
union all
select 'job_last_failed', j.job, max(case when j.last_status in ('failed', 'interrupted') then 1 else 0 end)::float8
  from pgmem.job_status j group by j.job
"""

_GAUGES = {  # metric -> (name, help, label)
    "memories": ("pgmem_memories", "Memories by state (summed over the tenants the server's login sees)", "state"),
    "embedding_queue": ("pgmem_embedding_queue", "Memories waiting for a vector (the embedding queue)", None),
    "work_queue": ("pgmem_work_queue", "Items of the work queue by task", "task"),
    "job_runs_7d": ("pgmem_job_runs_7d", "Runs of each job in the last 7 days (pgmem.job_status)", "job"),
    "job_failures_7d": ("pgmem_job_failures_7d", "Failed runs of each job in the last 7 days", "job"),
    "job_last_failed": ("pgmem_job_last_failed", "1 when a job's latest run failed or was interrupted", "job"),
}


def metrics_access() -> tuple[str | None, bool]:
    """(PGMEM_METRICS_TOKEN, PGMEM_METRICS_PUBLIC)."""
    token = os.environ.get("PGMEM_METRICS_TOKEN", "").strip() or None
    public = os.environ.get("PGMEM_METRICS_PUBLIC", "").strip().lower() in ("1", "true", "yes", "on")
    return token, public


class _DatabaseCollector:
    """The gauges read from the views at scrape time (prometheus_client's custom collector)."""

    def __init__(self, db: Any):
        self.db = db

    def describe(self):
        return []  # not known before the first scrape (registering must not query the database)

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        families = {k: GaugeMetricFamily(name, text, labels=[label] if label else None)
                    for k, (name, text, label) in _GAUGES.items()}
        ok = GaugeMetricFamily("pgmem_scrape_database_ok", "1 when the scrape's statement read the views")
        try:
            pool = self.db.pool
            if pool is None:
                raise RuntimeError("the pool is not open")
            with pool.connection(timeout=5) as c:
                rows = c.execute(SCRAPE_SQL).fetchall()
            for metric, label, value in rows:
                fam = families[metric]
                if _GAUGES[metric][2]:
                    fam.add_metric([label or ""], value)
                else:
                    fam.add_metric([], value)
            ok.add_metric([], 1)
        except Exception:
            ok.add_metric([], 0)
        yield from families.values()
        yield ok


class Metrics:
    """The registry of one app (a registry per app: tests build several apps in one process)."""

    def __init__(self, db: Any):
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter("pgmem_http_requests", "HTTP requests by route template and status",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("pgmem_http_request_duration_seconds", "HTTP request latency by route template",
                                 ["method", "route"], buckets=BUCKETS, registry=self.registry)
        self.sql_calls = Counter("pgmem_sql_calls", "SQL functions called by this server, by outcome",
                                 ["function", "outcome"], registry=self.registry)
        self.sql_latency = Histogram("pgmem_sql_call_duration_seconds", "Latency of each SQL function this server calls",
                                     ["function"], buckets=BUCKETS, registry=self.registry)
        self.registry.register(_DatabaseCollector(db))

    def observe_sql(self, function: str, seconds: float, outcome: str) -> None:
        self.sql_calls.labels(function, outcome).inc()
        self.sql_latency.labels(function).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _route_of(scope: dict) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None) or getattr(route, "path_format", None)
    if path:
        return path
    root = scope.get("root_path") or ""
    return root or "unmatched"


class RequestMetrics:
    """ASGI middleware: each HTTP request counted and timed by route template, and a SERVER
    span when OpenTelemetry is installed."""

    def __init__(self, app, metrics: "Metrics | None" = None):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from .. import telemetry

        status = {"code": 500}

        async def sending(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        tracer = telemetry.tracer()
        span = None
        if tracer is not None:
            from opentelemetry import context, propagate, trace
            from opentelemetry.trace import SpanKind

            carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}
            span = tracer.start_span(scope["method"], context=propagate.extract(carrier), kind=SpanKind.SERVER,
                                     attributes={"http.request.method": scope["method"], "url.path": scope["path"]})
            attached = context.attach(trace.set_span_in_context(span))
        started = time.perf_counter()
        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            route = _route_of(scope)
            if self.metrics is not None:
                self.metrics.requests.labels(scope["method"], route, str(status["code"])).inc()
                self.metrics.latency.labels(scope["method"], route).observe(seconds)
            if span is not None:
                span.update_name(f"{scope['method']} {route}")
                span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status["code"])
                if status["code"] >= 500:
                    from opentelemetry.trace import Status, StatusCode

                    span.set_status(Status(StatusCode.ERROR))
                span.end()
                context.detach(attached)


def _weak_observer(metrics: Metrics):
    import weakref

    from .. import telemetry

    ref = weakref.ref(metrics)

    def observe(function: str, seconds: float, outcome: str) -> None:
        m = ref()
        if m is None:
            telemetry.remove_observer(observe)
        else:
            m.observe_sql(function, seconds, outcome)

    return observe


def mount_metrics(app, db) -> None:
    """/metrics, /livez and the request middleware on ``app`` (called by build_app before its
    other routes). Without prometheus-client (the [web] extra installs it), /metrics says so."""
    import importlib.util

    from fastapi.responses import JSONResponse, Response

    from .. import telemetry

    metrics = Metrics(db) if importlib.util.find_spec("prometheus_client") else None
    app.state.metrics = metrics
    if metrics is not None:
        telemetry.add_observer(_weak_observer(metrics))  # gone with the app
    app.add_middleware(RequestMetrics, metrics=metrics)

    @app.get("/livez", include_in_schema=True, tags=["operations"],
             summary="Liveness: 200 while the process serves requests (no token; says nothing about the database)")
    def livez():
        return {"status": "ok"}

    @app.get("/metrics", include_in_schema=True, tags=["operations"],
             summary="Prometheus metrics (PGMEM_METRICS_TOKEN as a bearer token, or PGMEM_METRICS_PUBLIC=1)")
    def prometheus(request: Request):
        token, public = metrics_access()
        if not public:
            if token is None:
                return JSONResponse({"error": "forbidden", "message": "/metrics is closed: set PGMEM_METRICS_TOKEN (the "
                                     "scraper's bearer token) or PGMEM_METRICS_PUBLIC=1 where the server runs"},
                                    status_code=403)
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return JSONResponse({"error": "unauthorized", "message": "/metrics needs Authorization: Bearer "
                                     "<PGMEM_METRICS_TOKEN>"}, status_code=401,
                                    headers={"WWW-Authenticate": 'Bearer realm="pgmem-metrics"'})
        if metrics is None:
            return JSONResponse({"error": "unavailable", "message": "metrics need prometheus-client: "
                                 "pip install 'pgmem-agent[web]'"}, status_code=501)
        body, ctype = metrics.render()
        return Response(body, media_type=ctype)
