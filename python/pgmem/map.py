"""The 3-D memory map (jam-journalistic-agent-memory.md, 3D Visualization Pipeline): one
self-contained HTML page (plotly.js inlined, works offline) of a tenant's memories, placed
by PCA, t-SNE or UMAP and coloured by cluster (Viridis), energy (Hot), recency (Plasma) or
usage (Electric), with each memory shown on hover.

PCA and t-SNE are computed in the database (pgmem.project); UMAP here, with umap-learn
(PyPI only; Debian does not package it), and stored with pgmem.save_coords. Needs plotly
(``pip install plotly``; the ``map`` extra).
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .errors import PgmemError

METHODS = ("pca", "tsne", "umap")
# JAM, Dynamic Coloring Schemes
COLORINGS = {"cluster": "Viridis", "energy": "Hot", "recency": "Plasma", "usage": "Electric"}
RECENCY_HALF_LIFE_DAYS = 30.0  # JAM Stage 2.2, recency: exponential decay with a 30-day half-life


@dataclass
class MapResult:
    path: Path
    points: int
    clusters: int
    method: str


def _need_plotly():
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
    except ImportError:
        raise PgmemError("the map needs plotly: pip install 'pgmem-agent[map]'") from None
    return go, pio


def _wrap(text: str, width: int = 80, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "<br>".join(html.escape(x) for x in lines)


def colour_values(points: Sequence[dict]) -> dict[str, dict[str, Any]]:
    """Per colouring: the marker colour of each point and the colour bar (JAM's colormaps).
    cluster: the cluster's rank among the map's clusters (memories without one come last);
    energy: the cluster's energy in [0, 1]; recency: 2^(-age / 30 days) in [0, 1];
    usage: the access count."""
    cluster_ids = sorted({p["cluster_id"] for p in points if p.get("cluster_id") is not None})
    rank = {c: i for i, c in enumerate(cluster_ids)}
    labels = {p["cluster_id"]: p.get("label") for p in points if p.get("cluster_id") is not None}
    none = len(cluster_ids)
    out = {
        "cluster": {"color": [rank.get(p.get("cluster_id"), none) for p in points], "cmin": 0,
                    "cmax": max(1, none if any(p.get("cluster_id") is None for p in points) else none - 1),
                    "title": "cluster"},
        "energy": {"color": [float(p["energy"]) if p.get("energy") is not None else 0.0 for p in points], "cmin": 0,
                   "cmax": 1, "title": "energy"},
        "recency": {"color": [2.0 ** (-max(0.0, float(p.get("age_days") or 0.0)) / RECENCY_HALF_LIFE_DAYS) for p in points],
                    "cmin": 0, "cmax": 1, "title": "recency"},
        "usage": {"color": [int(p.get("access_count") or 0) for p in points], "cmin": 0,
                  "cmax": max([1] + [int(p.get("access_count") or 0) for p in points]), "title": "uses"},
    }
    if 0 < len(cluster_ids) <= 24:  # name the clusters on the colour bar when they fit
        out["cluster"]["tickvals"] = list(range(len(cluster_ids)))
        out["cluster"]["ticktext"] = [(labels.get(c) or f"cluster {c}")[:40] for c in cluster_ids]
    return out


def _marker(colours: dict, scheme: str) -> dict:
    c = colours[scheme]
    bar = {"title": {"text": c["title"]}, "len": 0.8}
    if "tickvals" in c:
        bar.update(tickvals=c["tickvals"], ticktext=c["ticktext"])
    return {"color": c["color"], "colorscale": COLORINGS[scheme], "cmin": c["cmin"], "cmax": c["cmax"],
            "colorbar": bar, "showscale": True, "size": 4, "opacity": 0.9}


def render_html(points: Sequence[dict], *, method: str = "pca", color: str = "cluster", title: str | None = None) -> str:
    """The page: one Scatter3d trace, a menu to change the colouring, the memory on hover.
    After drawing, the page writes what it drew into <body data-pgmem-points data-pgmem-canvas>
    (for tests and scripts that open it in a headless browser)."""
    if color not in COLORINGS:
        raise PgmemError(f"unknown colouring {color!r}: use {', '.join(COLORINGS)}")
    go, pio = _need_plotly()
    colours = colour_values(points)
    hover = [
        f"<b>#{p['memory_id']}</b> · {html.escape(str(p.get('label') or 'no cluster'))}<br>{_wrap(p.get('content', ''))}"
        f"<br><i>energy {float(p['energy']) if p.get('energy') is not None else 0:.2f} · "
        f"{float(p.get('age_days') or 0):.1f} days old · {int(p.get('access_count') or 0)} uses</i>"
        for p in points]
    fig = go.Figure(go.Scatter3d(
        x=[p["x"] for p in points], y=[p["y"] for p in points], z=[p["z"] for p in points], mode="markers",
        marker=_marker(colours, color), hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", name="memories"))
    buttons = []
    for scheme in COLORINGS:
        m = _marker(colours, scheme)
        buttons.append({"label": f"colour: {scheme} ({COLORINGS[scheme]})", "method": "restyle",
                        "args": [{"marker.color": [m["color"]], "marker.colorscale": m["colorscale"],
                                  "marker.cmin": m["cmin"], "marker.cmax": m["cmax"], "marker.colorbar": m["colorbar"]}]})
    n_clusters = len({p["cluster_id"] for p in points if p.get("cluster_id") is not None})
    fig.update_layout(
        title={"text": title or f"pgmem memory map — {len(points)} memories, {n_clusters} clusters ({method.upper()})"},
        scene={"xaxis": {"title": {"text": f"{method} 1"}}, "yaxis": {"title": {"text": f"{method} 2"}},
               "zaxis": {"title": {"text": f"{method} 3"}}, "aspectmode": "cube",
               "camera": {"eye": {"x": 1.5, "y": 1.5, "z": 1.1}}},
        updatemenus=[{"buttons": buttons, "active": list(COLORINGS).index(color), "x": 0.0, "y": 1.0,
                      "xanchor": "left", "yanchor": "top"}],
        margin={"l": 0, "r": 0, "t": 50, "b": 0}, template="plotly_white")
    status = ("var gd = document.getElementById('{plot_id}');"
              "document.body.setAttribute('data-pgmem-points', String(gd.data[0].x.length));"
              "var cv = gd.querySelector('canvas');"
              "document.body.setAttribute('data-pgmem-canvas', cv ? cv.width + 'x' + cv.height : 'none');")
    return pio.to_html(fig, include_plotlyjs=True, full_html=True, post_script=status,
                       config={"displaylogo": False, "responsive": True})


def _umap_coords(client, max_points: int) -> int:
    """UMAP in the client (umap-learn), stored with pgmem.save_coords."""
    import numpy as np

    from .engine.projection import project

    with client.connection() as c:
        rows = c.execute("select m.id, m.embedding::real[] from pgmem.memories m where m.tenant = %s "
                         "and m.state = 'active' and m.embedding is not null order by m.created_at desc, m.id desc "
                         "limit %s", (client.tenant, max_points)).fetchall()
    if not rows:
        return 0
    P = project(np.array([r[1] for r in rows], dtype=np.float64), "umap")
    res = client.call("save_coords", method="umap", ids=[r[0] for r in rows], xs=P[:, 0].tolist(),
                      ys=P[:, 1].tolist(), zs=P[:, 2].tolist())
    return int(next(iter(res[0].values())))


def build_map(client, out: str | Path = "pgmem-map.html", *, method: str = "pca", color: str = "cluster",
              max_points: int = 5000, compute: bool = True, title: str | None = None) -> MapResult:
    """Computes the coordinates (unless ``compute`` is false: the stored ones), reads the
    points and writes the page to ``out``."""
    if method not in METHODS:
        raise PgmemError(f"unknown projection {method!r}: use {', '.join(METHODS)}")
    if color not in COLORINGS:
        raise PgmemError(f"unknown colouring {color!r}: use {', '.join(COLORINGS)}")
    _need_plotly()
    if compute:
        if method == "umap":
            _umap_coords(client, max_points)
        else:
            client.call("project", method=method, max_points=max_points)
    points = client.call("map_points", method=method, max_points=max_points)
    if not points:
        raise PgmemError(f"no {method} coordinates to draw for tenant {client.tenant!r}: "
                         "the tenant has no embedded memory yet (or run without --no-compute)")
    for p in points:
        for k in ("x", "y", "z"):
            if not math.isfinite(p[k]):
                raise PgmemError(f"memory {p['memory_id']} has a non-finite {k} coordinate: recompute the projection")
    out = Path(out)
    out.write_text(render_html(points, method=method, color=color, title=title), encoding="utf-8")
    return MapResult(out, len(points), len({p["cluster_id"] for p in points if p["cluster_id"] is not None}), method)
