"""``pgmem serve`` in an install like the app image's (issue 34, item 3): the int8 ONNX model
without sentence-transformers or torch. It built no embedder there, so the web chat, search and
/mcp ran on words alone. Here sentence-transformers and torch cannot be imported (a
``sitecustomize`` refuses them, as an image without them would), PGMEM_EMBEDDER is unset (the
image's default resolution), and the server must embed what it stores and find a memory by
meaning, with no word in common with the question."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT
from webhelpers import free_port, request

pytest.importorskip("onnxruntime")

NO_TORCH = """
import sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "sentence_transformers", "transformers"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())

import importlib.util as _u

_find_spec = _u.find_spec


def _absent(name, package=None):  # as find_spec answers for a package that is not installed
    if name.split(".")[0] in ("torch", "sentence_transformers", "transformers"):
        return None
    return _find_spec(name, package)


_u.find_spec = _absent
"""


def test_serve_uses_the_onnx_embedder_without_sentence_transformers(dsn, tmp_path):
    from pgmem.mcp_server import TokenStore

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(NO_TORCH)
    store = TokenStore(tmp_path / "tokens.json")
    token = store.add("acme")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGMEM_", "OPENAI_"))}
    env.update(PYTHONPATH=f"{tmp_path / 'site'}{os.pathsep}{ROOT / 'python'}", PGMEM_DSN=dsn, HF_HUB_OFFLINE="1")
    p = subprocess.Popen([sys.executable, "-m", "pgmem.cli", "serve", "--port", str(port), "--tokens",
                          str(store.path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert p.poll() is None and time.monotonic() < deadline, "".join(lines)
            try:
                if request(url + "/livez")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        assert not any("no local embeddings" in x or "no embedding model" in x for x in lines), lines
        st, _, health = request(url + "/api/health", token=token)
        assert st == 200 and health["server"]["embeddings"] is True and health["server"]["mcp"] is True, health
        for text in ("My sister Ana teaches violin at the conservatory", "The boiler in the basement was replaced"):
            st, _, got = request(url + "/api/remember", "POST", {"content": text}, token)
            assert st == 200 and got["decision"] == "stored", got
        st, _, got = request(url + "/api/search", "POST", {"query": "which relative is a music teacher?", "k": 1},
                             token)
        assert st == 200, got
        top = got["memories"][0]
        assert top["content"].startswith("My sister Ana") and top["signals"]["semantic"] > 0.5, top
    finally:
        p.terminate()
        p.wait(timeout=60)
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as c:  # stored with the image's model's vectors
        models = {r[0] for r in c.execute("select embedding_model from pgmem.memories").fetchall()}
    assert models == {"sentence-transformers/all-MiniLM-L6-v2:onnx-int8"}, models
