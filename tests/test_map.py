"""The 3-D memory map (jam-journalistic-agent-memory.md, 3D Visualization Pipeline; issue 17,
item 3): projections stored per memory, and the page opened in a real browser (Debian's
chromium, headless) that must draw the points.

Set PGMEM_MAP_SCREENSHOT=<path> to keep the screenshot (docs/images/map.png is made so).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import DIM
from sqlhelpers import rows, scalar
from pgmem.engine import projection

WORDS = {0: "coffee espresso beans", 1: "hiking mountain trail", 2: "python code bug", 3: "garden tomato soil"}



def _world(conn, per_group: int = 25):
    rng = np.random.default_rng(11)
    ids = []
    for axis, words in WORDS.items():
        for i in range(per_group):
            v = np.zeros(DIM)
            v[axis] = 1.0
            v += rng.normal(scale=0.35, size=DIM) / np.sqrt(DIM)
            ids.append(scalar(conn, "insert into pgmem.memories (content, embedding, access_count, happened_at) "
                                    "values (%s, %s, %s, now() - %s * interval '1 day') returning id",
                              (f"{words} note {i}", (v / np.linalg.norm(v)).astype(np.float32), int(rng.integers(0, 9)),
                               int(rng.integers(0, 90)))))
    conn.execute("call pgmem.run_job('cluster', '{}')")
    return ids


def test_pca_in_the_database_equals_the_engine(conn):
    ids = _world(conn, per_group=10)
    assert scalar(conn, "select pgmem.project('pca', 1000)") == len(ids)
    got = {r["memory_id"]: (r["x"], r["y"], r["z"]) for r in rows(conn, "select * from pgmem.memory_coords where method = 'pca'")}
    assert set(got) == set(ids)
    # the same projection outside the database, from the same vectors in the same order
    emb = rows(conn, "select id, embedding::real[] e from pgmem.memories order by created_at desc, id desc")
    P = projection.project(np.array([r["e"] for r in emb], dtype=np.float64), "pca")
    for r, p in zip(emb, P):
        assert got[r["id"]] == pytest.approx(tuple(p), abs=1e-4)
    # deterministic: a second run gives the same coordinates
    conn.execute("select pgmem.project('pca', 1000)")
    again = {r["memory_id"]: (r["x"], r["y"], r["z"]) for r in rows(conn, "select * from pgmem.memory_coords where method = 'pca'")}
    assert again == got
    # the map's points carry the cluster, its label and energy, age and uses
    pts = rows(conn, "select * from pgmem.map_points('pca')")
    assert len(pts) == len(ids) and all(p["label"] and p["cluster_id"] and p["energy"] is not None for p in pts)


def test_projection_choices(conn):
    _world(conn, per_group=5)
    assert scalar(conn, "select pgmem.project('tsne', 50)") == 20
    assert scalar(conn, "select count(*) from pgmem.memory_coords where method = 'tsne'") == 20
    with pytest.raises(Exception, match="UMAP is not computed in the database"):
        conn.execute("select pgmem.project('umap')")
    with pytest.raises(Exception, match='unknown projection "mds"'):
        conn.execute("select pgmem.project('mds')")
    # coordinates from elsewhere (the client's UMAP): only the tenant's memories, finite numbers
    ids = [r[0] for r in conn.execute("select id from pgmem.memories order by id limit 3")]
    assert scalar(conn, "select pgmem.save_coords('umap', %s, %s, %s, %s)",
                  (ids + [10 ** 12], [1.0, 2.0, 3.0, 4.0], [0.0] * 4, [0.0] * 4)) == 3
    with pytest.raises(Exception, match="coordinates must be finite"):
        conn.execute("select pgmem.save_coords('umap', %s, %s, %s, %s)", (ids[:1], [float("nan")], [0.0], [0.0]))


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is not installed (scripts/setup.sh installs it)"
    return exe


def _headless(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--enable-unsafe-swiftshader", "--use-angle=swiftshader", f"--user-data-dir={tmp / 'profile'}",
            "--window-size=1280,900", "--hide-scrollbars", "--virtual-time-budget=5000", *extra, page.as_uri()]
    return subprocess.run(args, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_map_page_draws_the_points_in_a_real_browser(conn, dsn, tmp_path):
    from pgmem.client import MemoryClient
    from pgmem.map import build_map

    ids = _world(conn)
    with MemoryClient(dsn, tenant="acme", embedder=None) as client:
        res = build_map(client, tmp_path / "map.html", method="pca")
    assert res.points == len(ids) and res.clusters == scalar(conn, "select count(*) from pgmem.clusters where state = 'active'")
    page = (tmp_path / "map.html").read_text()
    # self-contained: plotly.js inlined, nothing fetched from the network
    assert "Plotly.newPlot" in page and len(page) > 1_000_000
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    # every memory is on hover, with its cluster's label
    first = rows(conn, "select content from pgmem.memories where id = %s", (ids[0],))[0]["content"]
    # (plotly writes "·" as it is when orjson is installed, as \u00b7 when not)
    label = "hiking · mountain · trail"
    assert first in page and (label in page or json.dumps(label)[1:-1] in page)
    for scheme, scale in (("cluster", "Viridis"), ("energy", "Hot"), ("recency", "Plasma"), ("usage", "Electric")):
        assert f"colour: {scheme} ({scale})" in page

    dom = _headless(tmp_path / "map.html", tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'data-pgmem-points="(\d+)"', dom.stdout)
    assert m and int(m.group(1)) == len(ids), dom.stdout[:500]
    canvas = re.search(r'data-pgmem-canvas="(\d+)x(\d+)"', dom.stdout)
    assert canvas and int(canvas.group(1)) > 0 and int(canvas.group(2)) > 0, "the 3-D scene has no WebGL canvas"

    shot = tmp_path / "map.png"
    r = _headless(tmp_path / "map.html", tmp_path, f"--screenshot={shot}")
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    img = _png_pixels(shot)
    # the points are drawn: coloured pixels (Viridis) in the 3-D scene, left of the colour bar
    # and below the title and menu (white, grey and black are the page, axes and text)
    h, w = img.shape[:2]
    scene = img[120:h, : int(w * 0.75), :3].astype(int)
    coloured = (scene.max(-1) - scene.min(-1)) > 60
    assert coloured.sum() > 400, f"only {coloured.sum()} coloured pixels in the scene: the points were not drawn"
    bar = img[120:h, int(w * 0.75):, :3].astype(int)
    assert ((bar.max(-1) - bar.min(-1)) > 60).sum() > 1000  # and the colour bar
    keep = os.environ.get("PGMEM_MAP_SCREENSHOT")
    if keep:
        Path(keep).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep)


def _png_pixels(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"))


def test_map_command(dsn, conn, tmp_path, monkeypatch):
    from pgmem import cli

    _world(conn, per_group=5)
    monkeypatch.setenv("PGMEM_DSN", dsn)
    out = tmp_path / "m.html"
    assert cli.main(["map", "--tenant", "acme", "-o", str(out), "--color", "energy"]) == 0
    page = out.read_text()
    assert '"colorscale":[[0.0,"rgb(0,0,0)"]' in page.replace(" ", "") or '"Hot"' in page
    # unknown tenant data: a clear message, not a traceback
    assert cli.main(["map", "--tenant", "nobody", "-o", str(out)]) == 2
    assert json.loads(json.dumps({"ok": True}))["ok"]


@pytest.mark.slow
def test_umap_in_the_client_is_stored_per_memory(conn, dsn, tmp_path):
    # Debian does not package umap-learn: the client computes UMAP (n_neighbors 15) and stores it
    from pgmem.client import MemoryClient
    from pgmem.map import build_map

    ids = _world(conn, per_group=8)
    with MemoryClient(dsn, tenant="acme", embedder=None) as client:
        res = build_map(client, tmp_path / "umap.html", method="umap", color="usage")
    assert res.points == len(ids) and res.method == "umap"
    coords = rows(conn, "select memory_id, x, y, z from pgmem.memory_coords where method = 'umap'")
    assert {r["memory_id"] for r in coords} == set(ids)
    # UMAP keeps the groups apart: each memory's nearest neighbour on the map is of its own group
    pos = {r["memory_id"]: np.array([r["x"], r["y"], r["z"]]) for r in coords}
    group = {m: i // 8 for i, m in enumerate(ids)}
    same = 0
    for m in ids:
        nearest = min((o for o in ids if o != m), key=lambda o: np.linalg.norm(pos[o] - pos[m]))
        same += group[nearest] == group[m]
    assert same >= 0.9 * len(ids)


# ------------------------------------------------------------------ the explorer's map timer (issue 36, J30)
TIMER_HARNESS = r"""
const vm = require("vm"), fs = require("fs");
const calls = [], intervals = [];
const el = () => new Proxy({ value: "pca", textContent: "", srcdoc: "" }, {
  get: (t, k) => (k in t ? t[k] : () => el()), set: (t, k, v) => { t[k] = v; return true; } });
const elements = {};
const ctx = {
  document: { hidden: false, addEventListener() {}, createElement: () => el(), createTextNode: () => el(),
              querySelector: (s) => (elements[s] = elements[s] || el()) },
  fetch: async (path, opts) => { calls.push(`${(opts && opts.method) || "GET"} ${path}`);
    return { status: 200, ok: true, text: async () => (path === "/api/clusters" ? '{"clusters": []}' : "<html></html>") }; },
  setInterval: (fn, ms) => { intervals.push([fn, ms]); return intervals.length; },
  clearInterval() {}, setTimeout, Date, JSON, Math, Number, Object, Array, String, Promise, Error, Proxy, console,
  calls, intervals, Node: class Node {},
};
vm.createContext(ctx);
vm.runInContext(fs.readFileSync(process.argv[2], "utf8") + `
;(async () => {
  const tick = () => new Promise((r) => setTimeout(r, 20));
  startMap(); await tick();
  const first = calls.length;
  startMap(); await tick();                       // already running: no second timer
  const [fn, ms] = intervals[0];
  fn(); await tick();                             // 30 s later
  const second = calls.length;
  document.hidden = true; fn(); await tick();     // a hidden page does not refresh
  console.log(JSON.stringify({ ms, timers: intervals.length, first, second, last: calls.length, calls,
                               status: $("#map-status").textContent }));
})();`, ctx);
"""


def test_the_explorer_map_refreshes_every_30_seconds(tmp_path):
    """jam-journalistic-agent-memory.md, Real-time Updates ("auto-refresh every 30 s"): the map tab
    sets one 30 000 ms timer, each tick re-projects and redraws the map (POST /api/map/project,
    GET /api/map, GET /api/clusters), and a hidden page skips its tick. app.js runs in node with a
    stub DOM and a recording fetch and setInterval."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (make setup installs it)")
    harness = tmp_path / "timer.js"
    harness.write_text(TIMER_HARNESS)
    app = Path(__file__).resolve().parents[1] / "python" / "pgmem" / "web" / "static" / "app.js"
    out = subprocess.run([node, str(harness), str(app)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ms"] == 30000 and got["timers"] == 1
    one_refresh = ["POST /api/map/project", "GET /api/map?method=pca&color=pca", "GET /api/clusters"]
    assert got["calls"][:got["first"]] == one_refresh
    assert got["second"] == 2 * got["first"] and got["last"] == got["second"]
    assert "every 30 s while this tab is open" in got["status"]
