"""The operator's view of ``pgmem serve`` (issue 34, item 4): Prometheus metrics at /metrics
(requests and latency per route template, per SQL function, and memories per state, queue depth
and job runs read from the views at scrape time), who may read them, a liveness route that
needs no token and says nothing about the database, and OpenTelemetry spans of the server's
requests and the client's SQL calls (an in-memory exporter)."""
from __future__ import annotations

import re
import uuid

import pytest

from conftest import TEMPLATE, _janitor
from webhelpers import Running, embedder, llm, make_app, request  # noqa: F401  (fixtures)

pytest.importorskip("prometheus_client")


@pytest.fixture(scope="module")
def db(cluster):
    j = _janitor(cluster, f"t_metrics_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    from pgmem.mcp_server import TokenStore

    store = TokenStore(tmp_path_factory.mktemp("metrics") / "tokens.json")
    return {"path": store.path, "acme": store.add("acme"), "beta": store.add("beta")}


@pytest.fixture(scope="module")
def web(db, tokens, llm):  # noqa: F811
    running = Running(make_app(db, tokens, None, llm, embed=False, mcp=False))
    yield running
    running.stop()


def samples(text: str) -> dict[str, float]:
    """{'name{labels}': value} of a Prometheus text page."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def test_metrics_need_the_scrapers_token_or_the_public_setting(web, tokens, monkeypatch):
    monkeypatch.delenv("PGMEM_METRICS_TOKEN", raising=False)
    monkeypatch.delenv("PGMEM_METRICS_PUBLIC", raising=False)
    st, _, got = request(web.url + "/metrics")
    assert st == 403 and "PGMEM_METRICS_TOKEN" in got["message"] and "PGMEM_METRICS_PUBLIC=1" in got["message"]
    st, _, _ = request(web.url + "/metrics", token=tokens["acme"])  # a tenant's token: the numbers cross tenants
    assert st == 403
    monkeypatch.setenv("PGMEM_METRICS_TOKEN", "scrape-secret-1")
    assert request(web.url + "/metrics")[0] == 401
    assert request(web.url + "/metrics", token=tokens["acme"])[0] == 401
    st, hdrs, text = request(web.url + "/metrics", token="scrape-secret-1")
    assert st == 200 and hdrs["content-type"].startswith("text/plain") and "pgmem_http_requests_total" in text
    monkeypatch.delenv("PGMEM_METRICS_TOKEN")
    monkeypatch.setenv("PGMEM_METRICS_PUBLIC", "1")
    assert request(web.url + "/metrics")[0] == 200


def test_liveness_needs_no_token_and_says_nothing_of_the_database(web):
    st, _, got = request(web.url + "/livez")
    assert st == 200 and got == {"status": "ok"}
    assert request(web.url + "/api/health")[0] == 401  # health (what is wrong) needs a token


def test_requests_sql_calls_and_the_views_at_scrape_time(web, tokens, db, monkeypatch):
    import psycopg

    monkeypatch.setenv("PGMEM_METRICS_PUBLIC", "1")
    for text in ("Maya likes green tea", "Maya's dog is called Pixel", "Bob flies to Oslo on Friday"):
        st, _, got = request(web.url + "/api/remember", "POST", {"content": text}, tokens["acme"])
        assert st == 200, got
    st, _, got = request(web.url + "/api/remember", "POST", {"content": "beta's only memory"}, tokens["beta"])
    assert st == 200, got
    assert request(web.url + "/api/search", "POST", {"query": "tea", "k": 3}, tokens["acme"])[0] == 200
    assert request(web.url + "/api/memories/424242424", "GET", token=tokens["acme"])[0] == 404
    with psycopg.connect(db, autocommit=True) as c:  # one memory archived, as the lifecycle would
        c.execute("update pgmem.memories set state = 'archived' where content = 'Bob flies to Oslo on Friday'")
        active = c.execute("select count(*) from pgmem.memories where state = 'active'").fetchone()[0]
        queued = c.execute("select count(*) from pgmem.embedding_queue").fetchone()[0]
    st, _, text = request(web.url + "/metrics")
    assert st == 200
    s = samples(text)
    # per route template (never the raw path) and status
    assert s['pgmem_http_requests_total{method="POST",route="/api/remember",status="200"}'] == 4
    routes = set(re.findall(r'route="([^"]+)"', text))
    assert "/api/memories/424242424" not in routes and any("{" in r for r in routes if r.startswith("/api/memories/"))
    assert s['pgmem_http_request_duration_seconds_count{method="POST",route="/api/search"}'] == 1
    assert s['pgmem_http_request_duration_seconds_bucket{le="+Inf",method="POST",route="/api/search"}'] == 1
    # per SQL function the server called
    assert s['pgmem_sql_calls_total{function="remember",outcome="ok"}'] >= 4
    assert s['pgmem_sql_call_duration_seconds_count{function="search"}'] >= 1
    # from the views, over every tenant the server's login sees
    assert s["pgmem_scrape_database_ok"] == 1
    assert s['pgmem_memories{state="active"}'] == active == 3 and s['pgmem_memories{state="archived"}'] == 1
    assert s["pgmem_embedding_queue"] == queued == 4  # no embedder in this server: all wait for the worker


def test_a_failed_scrape_statement_still_serves_the_rest(web, monkeypatch):
    from pgmem.web import metrics

    monkeypatch.setenv("PGMEM_METRICS_PUBLIC", "1")
    monkeypatch.setattr(metrics, "SCRAPE_SQL", "select * from pgmem.no_such_view")
    st, _, text = request(web.url + "/metrics")
    s = samples(text)
    assert st == 200 and s["pgmem_scrape_database_ok"] == 0 and "pgmem_http_requests_total" in text


def test_opentelemetry_spans_of_the_server_and_the_client(db, tokens, llm):  # noqa: F811
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from pgmem import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = telemetry._tracer
    telemetry._tracer = provider.get_tracer("pgmem")  # (the global provider can be set once per process)
    try:
        running = Running(make_app(db, tokens, None, llm, embed=False, mcp=False))
        try:
            parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            st, _, _ = request(running.url + "/api/search", "POST", {"query": "tea", "k": 3}, tokens["acme"],
                               headers={"traceparent": parent})
            assert st == 200
        finally:
            running.stop()
    finally:
        telemetry._tracer = before
    spans = exporter.get_finished_spans()
    server = [s for s in spans if s.name == "POST /api/search"]
    assert len(server) == 1 and server[0].kind == trace.SpanKind.SERVER
    assert server[0].attributes["http.route"] == "/api/search" and server[0].attributes["http.response.status_code"] == 200
    assert format(server[0].context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"  # the caller's trace
    calls = [s for s in spans if s.name == "pgmem.search"]
    assert calls and calls[0].kind == trace.SpanKind.CLIENT
    assert calls[0].attributes["db.system.name"] == "postgresql"
    assert calls[0].parent is not None and calls[0].parent.span_id == server[0].context.span_id


def test_client_spans_record_a_failed_call(dsn):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    from pgmem import MemoryClient, telemetry
    from pgmem.errors import InvalidInput

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = telemetry._tracer
    telemetry._tracer = provider.get_tracer("pgmem")
    try:
        with MemoryClient(dsn, tenant="acme", embedder=None) as mem:
            with pytest.raises(InvalidInput):
                mem.search("x", k=0)
    finally:
        telemetry._tracer = before
    failed = [s for s in exporter.get_finished_spans() if s.name == "pgmem.search"]
    assert failed and failed[0].status.status_code == StatusCode.ERROR
    assert failed[0].attributes["error.type"] == "InvalidInput" and failed[0].attributes["db.response.status_code"] == "22023"
