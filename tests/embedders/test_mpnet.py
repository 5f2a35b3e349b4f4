"""The numpy MPNet embedder reproduces sentence-transformers' vectors for all-mpnet-base-v2.

The reference vectors (tests/fixtures/mpnet_reference.json) were computed once by
sentence-transformers on torch (scripts/make_mpnet_reference.py); torch is not
needed to run these tests. The model-loading tests need the five model packages
(requirements-mpnet.txt, installed by make install) and are skipped, with the
reason shown, without them.
"""

from __future__ import annotations

import io
import json
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from memstack.adapters.embedders import mpnet
from memstack.adapters.embedders.install import ModelNotInstalled
from memstack.adapters.embedders.mpnet import MPNetEmbedder, _JoinedParts, relative_position_buckets

from tests.embedders.padded_forward import mpnet_padded

REFERENCE = Path(__file__).resolve().parent.parent / "fixtures" / "mpnet_reference.json"


def _installed() -> bool:
    try:
        for part in mpnet.PARTS:
            metadata.distribution(part)
    except metadata.PackageNotFoundError:
        return False
    return True


needs_model = pytest.mark.skipif(
    not _installed(),
    reason="all-mpnet-base-v2 not installed (make install, or memstack models install mpnet)",
)


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> MPNetEmbedder:
    return MPNetEmbedder(cache_dir=tmp_path_factory.mktemp("models"))


@needs_model
@pytest.mark.slow
def test_reproduces_sentence_transformers_vectors(embedder: MPNetEmbedder) -> None:
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))["items"]
    texts = [item["text"] for item in reference]
    expected = np.array([item["vector"] for item in reference], dtype=np.float64)
    got = embedder.embed(texts).astype(np.float64)
    assert got.shape == (len(texts), 768)
    cosines = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    worst = int(cosines.argmin())
    assert cosines.min() >= 0.9999, f"cosine {cosines[worst]:.6f} for {texts[worst][:60]!r}"
    assert np.abs(got - expected).max() < 1e-4
    # Alone, each text is padded to nothing; together, short ones are padded to the long ones.
    alone = np.vstack([embedder.embed([t]) for t in texts[:4]])
    assert np.abs(alone - got[:4]).max() < 1e-5


@needs_model
@pytest.mark.slow
def test_packed_pass_matches_the_padded_pass(embedder: MPNetEmbedder) -> None:
    model = embedder._get_model()
    texts = ["", "ok", "the stack trace points at the pool " * 4, "word " * 400, "I moved to Osaka in May."]
    expected = mpnet_padded(model, texts)
    for batch_size in (2, 64):
        got = MPNetEmbedder(batch_size=batch_size, cache_dir=embedder._cache_dir).embed(texts)
        assert np.abs(got - expected).max() < 2e-6


@needs_model
@pytest.mark.slow
def test_truncates_at_max_seq_length(embedder: MPNetEmbedder) -> None:
    base = " ".join(["memory"] * 450)  # 384 tokens: <s> + 382 words + </s>
    v_base, v_longer = embedder.embed([base, base + " trailing words past the limit"])
    assert np.abs(v_base - v_longer).max() < 1e-6


def test_relative_position_buckets_follow_t5() -> None:
    b = relative_position_buckets(300)
    # Keys before the query (context - memory > 0) take buckets 0..15, after it 16..31.
    assert b[5, 5] == 0 and b[5, 4] == 1 and b[5, 0] == 5 and b[7, 0] == 7
    assert b[0, 1] == 17 and b[0, 7] == 23
    # From 8 on, log-spaced: 8 + floor(log(n / 8) / log(16) * 8), capped at 15.
    assert b[20, 0] == 8 + int(np.log(20 / 8) / np.log(16) * 8)
    assert b[299, 0] == 15 and b[0, 299] == 31
    assert b.shape == (300, 300) and b.min() == 0 and b.max() == 31


def test_joined_parts_read_a_split_archive(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("model/a.txt", "x" * 5000)
        archive.writestr("model/b.txt", "hello")
    data = buffer.getvalue()
    parts = []
    for i, start in enumerate(range(0, len(data), 700)):
        part = tmp_path / f"m.zip.{i:03d}"
        part.write_bytes(data[start : start + 700])
        parts.append(part)
    with _JoinedParts(parts) as joined, zipfile.ZipFile(joined) as archive:
        assert archive.read("model/a.txt") == b"x" * 5000 and archive.read("model/b.txt") == b"hello"


def test_weights_that_are_not_the_published_ones_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in mpnet._MODEL_FILES:
            archive.writestr(f"all-mpnet-base-v2/{name}", "{}" if name.endswith(".json") else "not weights")
    data = buffer.getvalue()
    chunk = len(data) // 5 + 1
    files = {}
    for i, name in enumerate(mpnet.PARTS):
        files[name] = tmp_path / f"part{i}"
        files[name].write_bytes(data[i * chunk : (i + 1) * chunk])
    monkeypatch.setattr(mpnet, "_part_file", files.__getitem__)
    with pytest.raises(RuntimeError, match="sha256"):
        mpnet.extract_model(tmp_path / "cache")
    # Nothing half-extracted is left where a later run would take it for the model.
    assert not list((tmp_path / "cache").glob("all-mpnet-base-v2-*"))


def test_missing_packages_are_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(mpnet, "PARTS", ("memstack-no-such-model-part",))
    with pytest.raises(ModelNotInstalled, match=r"memstack models install mpnet"):
        MPNetEmbedder(cache_dir=tmp_path).embed(["x"])
