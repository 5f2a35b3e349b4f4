"""The numpy MiniLM embedder reproduces sentence-transformers' vectors for the same model.

The reference vectors (tests/fixtures/minilm_reference.json) were computed by
sentence-transformers on torch (scripts/make_minilm_reference.py); torch is not
needed to run these tests.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest
from memstack.adapters.embedders import minilm
from memstack.adapters.embedders.encoder import gelu_rows_
from memstack.adapters.embedders.minilm import MiniLMEmbedder, erf, gelu_

from tests.embedders.padded_forward import minilm_padded

REFERENCE = Path(__file__).resolve().parent.parent / "fixtures" / "minilm_reference.json"


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def reference() -> list[dict]:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))["items"]


def test_reproduces_sentence_transformers_vectors(embedder: MiniLMEmbedder, reference: list[dict]) -> None:
    texts = [item["text"] for item in reference]
    expected = np.array([item["vector"] for item in reference], dtype=np.float64)
    got = embedder.embed(texts).astype(np.float64)
    cosines = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    worst = int(cosines.argmin())
    assert cosines.min() >= 0.9999, f"cosine {cosines[worst]:.6f} for {texts[worst]!r}"
    # Rounding the reference to 6 decimals is the only expected difference, give or take float32.
    assert np.abs(got - expected).max() < 1e-4


def test_batching_and_padding_do_not_change_vectors(embedder: MiniLMEmbedder, reference: list[dict]) -> None:
    texts = [item["text"] for item in reference]
    together = embedder.embed(texts)
    # alone, each text is padded to nothing; together, short ones are padded to the long ones
    one_by_one = np.vstack([embedder.embed([t]) for t in texts])
    assert np.abs(together - one_by_one).max() < 1e-5


def test_shape_dtype_and_unit_norm(embedder: MiniLMEmbedder) -> None:
    vectors = embedder.embed(["hello", "", "a much longer sentence about the weather in Lisbon in May"])
    assert vectors.shape == (3, embedder.dim) == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_paraphrase_is_closer_than_unrelated(embedder: MiniLMEmbedder) -> None:
    a, para, other = embedder.embed(
        [
            "I adopted a puppy named Biscuit last weekend.",
            "Last weekend I got a new dog and called him Biscuit.",
            "The quarterly tax filing is due on the fifteenth of April.",
        ]
    )
    assert float(a @ para) > 0.6
    assert float(a @ para) > float(a @ other) + 0.4


def test_truncates_at_max_seq_length(embedder: MiniLMEmbedder) -> None:
    # Both texts share their first 256 tokens ([CLS] + 254 words + [SEP]), so the model sees the same input.
    base = " ".join(["memory"] * 300)
    longer = base + " completely different trailing words that fall past the limit"
    short = " ".join(["memory"] * 200)
    v_base, v_longer, v_short = embedder.embed([base, longer, short])
    assert np.abs(v_base - v_longer).max() < 1e-6
    assert float(v_base @ v_short) < 0.99999  # a genuinely shorter input does differ


def test_model_loads_once_per_process_across_threads_and_instances() -> None:
    from threadpoolctl import threadpool_info

    # Load the model first: loading can bring in native libraries of its own, and
    # the comparison below is about the limit being restored, not about new libraries.
    MiniLMEmbedder(batch_size=8).embed(["warm up"])
    blas_threads = [lib["num_threads"] for lib in threadpool_info()]
    instances = [MiniLMEmbedder(batch_size=8) for _ in range(4)]
    results: list[np.ndarray] = [np.empty(0)] * len(instances)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = instances[i].embed(["thread safety", f"instance {i}"])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(instances))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({id(e._get_model()) for e in instances}) == 1
    assert len(minilm._MODELS) == 1
    # embed runs on one BLAS thread; the process's own setting is restored afterwards
    assert [lib["num_threads"] for lib in threadpool_info()] == blas_threads
    for r in results[1:]:
        assert np.abs(r[0] - results[0][0]).max() < 1e-6


def test_erf_matches_math_erf() -> None:
    xs = np.linspace(-8, 8, 20001, dtype=np.float32)
    exact = np.array([math.erf(float(x)) for x in xs])
    # A&S is within 1.5e-7; float32 evaluation adds a few ulp of 1.0 near zero.
    assert np.abs(erf(xs).astype(np.float64) - exact).max() < 1e-6


def test_gelu_is_the_exact_erf_form() -> None:
    xs = np.linspace(-12, 12, 4801, dtype=np.float32)
    exact = np.array([0.5 * float(x) * (1.0 + math.erf(float(x) / math.sqrt(2.0))) for x in xs])
    got = gelu_(xs.copy()).astype(np.float64)
    assert np.abs(got - exact).max() < 1e-6
    # not the tanh approximation, which is off by up to ~2e-4 near |x| = 2
    tanh_form = 0.5 * xs * (1 + np.tanh(np.sqrt(2 / np.pi) * (xs + 0.044715 * xs**3)))
    assert np.abs(tanh_form - exact).max() > 1e-4


def test_weights_are_contiguous_input_major(embedder: MiniLMEmbedder) -> None:
    # x @ W with W a transposed view is 1.3-1.5x slower for the few-token passes of ingest
    for layer in embedder._get_model().layers:
        for w in (layer.qkv_w, layer.out_w, layer.inter_w, layer.ffn_out_w):
            assert w.flags.c_contiguous


def test_gelu_by_blocks_of_rows_equals_one_pass() -> None:
    # 300 rows: two whole blocks of 128 and a partial one
    x = np.random.default_rng(7).normal(0, 3, (300, 1536)).astype(np.float32)
    assert np.array_equal(gelu_rows_(x.copy()), gelu_(x.copy()))


def test_bad_model_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        MiniLMEmbedder(model_dir=tmp_path).embed(["x"])
    with pytest.raises(ValueError, match="batch_size"):
        MiniLMEmbedder(batch_size=0)


# Short and long, so a pass packs texts of very different lengths (and one fills 256 tokens).
MIXED_LENGTHS = [
    "",
    "ok",
    "Caroline went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: I painted a lake sunrise last year! " * 3,
    "word " * 400,
    "The deploy failed again; the stack trace points at the connection pool, not the migration.",
]


def test_packed_pass_matches_the_padded_pass(embedder: MiniLMEmbedder) -> None:
    model = embedder._get_model()
    for texts in (MIXED_LENGTHS, MIXED_LENGTHS[2:4], MIXED_LENGTHS[1:2]):
        expected = minilm_padded(model, texts)
        # batch_size 2 and 64: texts packed in twos, and all in one pass
        for batch_size in (2, 64):
            got = MiniLMEmbedder(batch_size=batch_size).embed(texts)
            assert np.abs(got - expected).max() < 2e-6
