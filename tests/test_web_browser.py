"""The memory explorer page in a real browser (issue 25): headless Chromium (Debian's) driven by
Playwright, against ``pgmem serve`` on a real cluster with the demo conversation ingested
(real MiniLM embeddings) and a local OpenAI-compatible LLM server (tests/webhelpers.py's FakeLLM).

A person's path through the page: sign in with a token link, chat and see the activated (✓)
and candidate (○) memories with their scores, search and read the signal bars and the
explanation, open a memory and forget and restore it, see a superseded profile fact, the
threads, the clusters map and jobs and health.

Screenshots go to the test's temporary directory, and to ``PGMEM_WEB_SCREENSHOTS`` when set
(``docs/images`` for the README's Web section).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, TEMPLATE, _janitor, connect
from sqlhelpers import scalar
from webhelpers import Running, embedder, llm, make_app, request  # noqa: F401  (module-scoped fixtures)

pytestmark = pytest.mark.slow  # a browser, and the demo conversation embedded (about 45 s)

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is not installed (scripts/setup.sh installs it)"
    return exe


@pytest.fixture(scope="module")
def db(cluster):
    j = _janitor(cluster, f"t_webui_{uuid.uuid4().hex[:10]}", TEMPLATE)
    j.init()
    yield cluster.dsn(j.dbname)
    j.drop()


@pytest.fixture(scope="module")
def world(db, embedder, tmp_path_factory):
    """Tenant acme with the demo conversation (maya's sessions), clustered; a token for maya."""
    from pgmem import MemoryClient
    from pgmem.mcp_server import TokenStore

    events = [json.loads(x) for x in (ROOT / "examples" / "demo_conversation.jsonl").read_text().splitlines() if x.strip()]
    with MemoryClient(db, tenant="acme", embedder=embedder) as mem:
        results = mem.remember_many(events, progress=False)
        assert sum(r.decision == "stored" for r in results) > 200
    with connect(db, tenant="acme") as c:
        c.execute("call pgmem.run_job('cluster')")  # every phase (as the README's map section does)
        c.execute("select * from pgmem.merge_duplicates()").fetchall()  # a job run for the jobs panel
        assert scalar(c, "select count(*) from pgmem.clusters where tenant = 'acme' and state = 'active'") > 0
        facts = c.execute("select value #>> '{}', status from pgmem.fact_history('maya', 'editor')").fetchall()
        old = [v for v, st in facts if st == "past"]
        new = [v for v, st in facts if st == "current"]
        assert old and len(new) == 1 and new[0] not in old, facts  # a superseded editor
    store = TokenStore(tmp_path_factory.mktemp("webui") / "tokens.json")
    return {"tokens": {"path": store.path}, "maya": store.add("acme", "maya"), "acme": store.add("acme"),
            "old_editor": old[0], "new_editor": new[0]}


@pytest.fixture(scope="module")
def server(db, world, embedder, llm):
    running = Running(make_app(db, world["tokens"], embedder, llm))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def page(server, world, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_page(viewport={"width": 1360, "height": 860})
        context.set_default_timeout(60000)
        errors: list[str] = []
        context.on("pageerror", lambda e: errors.append(str(e)))
        context.errors = errors
        yield context
        browser.close()


SHOTS: list[Path] = []


def shot(page, name: str, tmp: Path) -> Path:
    path = tmp / f"web-{name}.png"
    page.screenshot(path=str(path))
    SHOTS.append(path)
    target = os.environ.get("PGMEM_WEB_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)
    return path


def test_sign_in_and_chat_shows_activated_and_candidate_memories(page, server, world, llm, tmp_path):
    # a token in the URL's fragment signs the tab in, and leaves the address bar
    page.goto(f"{server.url}/#token={world['maya']}")
    page.wait_for_function("document.querySelector('#who').textContent.includes('maya')")
    assert "token=" not in page.url
    assert page.locator("#who").inner_text() == "tenant acme · user maya · token"
    page.fill("#chat-input", "What am I allergic to?")
    page.click("#chat-send")
    page.wait_for_selector(".msg.assistant[data-done=true]")
    reply = page.locator(".msg.assistant").last.inner_text()
    assert reply.startswith("From memory:"), reply
    # the stages streamed before the tokens, and the memories of the reply
    stages = page.locator("#chat-stages .stage").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages == ["classified", "retrieved", "generating", "complete"]
    activated = page.locator(".mem-item[data-activated=true]")
    candidates = page.locator(".mem-item[data-activated=false]")
    assert activated.count() >= 1 and candidates.count() >= 1
    first = activated.first
    assert first.locator(".mark").inner_text() == "✓" and candidates.first.locator(".mark").inner_text() == "○"
    assert re.fullmatch(r"\d{1,3}%", first.locator(".score").inner_text())
    # what the page shows is what the model was sent: the activated memory's summary is in the prompt
    summary = first.locator(".sum").inner_text()
    assert summary[:40] in llm.last_system_text()
    assert reply.removeprefix("From memory: ")[:30] in summary or summary[:30] in reply
    assert "activated of" in page.locator("#chat-context .summary-line").inner_text()
    shot(page, "chat", tmp_path)
    assert page.errors == []


def test_search_shows_a_bar_per_signal_and_the_explanation(page, server, tmp_path):
    page.goto(f"{server.url}/#search")
    page.fill("#search-query", "which editor does maya use")
    page.click("#search-go")
    page.wait_for_selector(".hit")
    hit = page.locator(".hit").first
    bars = hit.locator(".signal-bar")
    names = bars.evaluate_all("els => els.map(e => e.dataset.signal)")
    assert {"semantic", "lexical", "recency"} <= set(names)
    widths = {n: w for n, w in zip(names, bars.evaluate_all("els => els.map(e => e.firstChild.style.width)"))}
    values = {n: float(v) for n, v in zip(names, bars.evaluate_all("els => els.map(e => e.dataset.value)"))}
    assert widths["semantic"] == f"{round(min(1, max(0, values['semantic'])) * 100)}%" and values["semantic"] > 0
    explanation = hit.locator(".explanation").inner_text()
    assert explanation.startswith("score ") and "semantic" in explanation and "×" in explanation
    assert "editor" in hit.locator(".hit-content").inner_text().lower() or "neovim" in page.locator("#search-results").inner_text().lower()
    shot(page, "search", tmp_path)


def test_open_a_memory_forget_it_and_restore_it(page, server, tmp_path):
    page.goto(f"{server.url}/#search")
    page.fill("#search-query", "peanut allergy")
    page.click("#search-go")
    page.wait_for_selector(".hit")
    memory_id = page.locator(".hit").first.get_attribute("data-memory-id")
    page.locator(".hit .hit-content").first.click()
    page.wait_for_selector(f".mem[data-memory-id='{memory_id}']")
    assert page.url.endswith(f"#memory/{memory_id}")
    w5h1 = page.locator("table.w5h1").inner_text()
    for k in ("who", "what", "when", "where", "why", "how"):
        assert k in w5h1
    assert page.locator("#memory-state").inner_text() == "active"
    shot(page, "memory", tmp_path)
    page.click("#memory-forget")
    page.wait_for_selector(".mem[data-state=deleted]")
    assert page.locator("#memory-history .hist-item").last.get_attribute("data-op") == "delete"
    assert "Restore" in page.locator("#memory-restore").inner_text()
    page.click("#memory-restore")
    page.wait_for_selector(".mem[data-state=active]")
    assert page.locator("#memory-history .hist-item").last.get_attribute("data-op") == "restore"
    # the page did what the API says
    st, _, m = request(f"{server.url}/api/memories/{memory_id}/history", token=page.evaluate("sessionStorage.getItem('pgmem.token')"))
    assert [x["op"] for x in m["history"]][-2:] == ["delete", "restore"]


def test_profile_timeline_shows_the_superseded_fact(page, server, world, tmp_path):
    page.goto(f"{server.url}/#profile")
    assert page.input_value("#profile-user") == "maya"
    page.click("#profile-form button")
    page.wait_for_selector(".fact-group[data-key=editor]")
    group = page.locator(".fact-group[data-key=editor]")
    old = group.locator(f".fact.superseded[data-value='{world['old_editor']}']")
    new = group.locator(f".fact.current[data-value='{world['new_editor']}']")
    assert old.count() >= 1 and new.count() == 1
    assert old.first.locator(".value").evaluate("e => getComputedStyle(e).textDecorationLine") == "line-through"
    assert "superseded" in old.first.inner_text()
    group.scroll_into_view_if_needed()
    shot(page, "profile", tmp_path)


def test_threads_map_jobs_and_health(page, server, world, tmp_path):
    # threads of the chat's conversation
    page.goto(f"{server.url}/#chat")
    conversation = page.input_value("#chat-conversation")
    page.goto(f"{server.url}/#threads")
    page.fill("#threads-conversation", conversation)
    page.click("#threads-form button")
    page.wait_for_selector(".thread")
    page.click("#insights-form button")
    page.wait_for_selector("#insights-view > *")
    # the map, jobs and statistics are the whole tenant's (issue 35, M4): maya's token sees the
    # health only; a token of the whole tenant sees them all
    page.goto(f"{server.url}/#health")
    page.wait_for_selector("#health-status")
    page.wait_for_function("document.querySelector('#stats-view').textContent.includes('whole tenant')")
    page.goto(f"{server.url}/#token={world['acme']}")
    page.reload()  # (a change of the fragment alone does not load the page again)
    page.wait_for_function("document.querySelector('#who').textContent === 'tenant acme · token'")
    # the clusters map: the existing 3-D map, embedded, drawn by plotly in the frame
    page.goto(f"{server.url}/#map")
    page.wait_for_function("document.querySelector('#map-status').textContent.startsWith('refreshed')")
    frame = page.frame_locator("#map-frame")
    frame.locator("body[data-pgmem-points]").wait_for()
    points = int(frame.locator("body").get_attribute("data-pgmem-points"))
    assert points > 100
    assert page.locator("#clusters-view table tr").count() > 1
    shot(page, "map", tmp_path)
    # jobs and health from the database
    page.goto(f"{server.url}/#health")
    page.wait_for_selector("#health-status")
    assert page.locator("#health-status .badge").inner_text() == "ok"
    page.wait_for_selector("#jobs-table")
    assert "merge" in page.locator("#jobs-table").inner_text()
    assert re.search(r"\d+ active memories", page.locator("#stats-summary").inner_text())
    shot(page, "health", tmp_path)
    assert page.errors == []


def test_screenshots_are_pictures_of_the_page(tmp_path):
    """Each screenshot is a real, non-blank picture (the README shows them)."""
    from PIL import Image

    assert len(SHOTS) >= 5
    for path in SHOTS:
        img = Image.open(path).convert("L")
        assert img.size == (1360, 860)
        lo, hi = img.getextrema()
        assert hi - lo > 100, f"{path.name} is blank"
