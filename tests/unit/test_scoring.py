"""Weighted RRF and min-max scaling against hand-computed values; near-duplicates against the rule."""

from __future__ import annotations

import numpy as np
import pytest
from memstack.domain.scoring import _may_have_near_duplicates, near_duplicates, temporal_factor, weighted_rrf
from memstack.models import ScoredId


def ranking(*ids: str) -> list[ScoredId]:
    return [ScoredId(id=i, score=1.0) for i in ids]


def test_weighted_rrf_matches_hand_computed_values() -> None:
    fused = weighted_rrf(
        {"vector": ranking("a", "b", "c"), "bm25": ranking("c", "a")},
        {"vector": 0.7, "bm25": 0.3},
        k=10,
    )
    # a: 0.7/(10+1) + 0.3/(10+2); b: 0.7/(10+2); c: 0.7/(10+3) + 0.3/(10+1)
    assert fused["a"] == pytest.approx(0.7 / 11 + 0.3 / 12)
    assert fused["b"] == pytest.approx(0.7 / 12)
    assert fused["c"] == pytest.approx(0.7 / 13 + 0.3 / 11)
    assert sorted(fused, key=fused.__getitem__, reverse=True) == ["a", "c", "b"]


def test_zero_weight_ranking_contributes_nothing() -> None:
    fused = weighted_rrf({"vector": ranking("a"), "bm25": ranking("b")}, {"vector": 1.0, "bm25": 0.0}, k=60)
    assert fused == {"a": pytest.approx(1 / 61)}


def test_temporal_factor() -> None:
    assert temporal_factor(1.0, 0.6) == 1.0
    assert temporal_factor(0.1, 0.6) == 0.64
    assert temporal_factor(0.5, 1.0) == 1.0  # blend 1: time never counts


def _greedy_near_duplicates(matrix: np.ndarray, threshold: float) -> list[int]:
    """The rule, one row at a time: drop a row like any better-ranked row that was kept."""
    similar = (matrix @ matrix.T) >= threshold
    kept: list[int] = []
    dropped = []
    for row in range(len(matrix)):
        if kept and bool(similar[row, kept].any()):
            dropped.append(row)
        else:
            kept.append(row)
    return dropped


@pytest.mark.parametrize("seed", range(20))
def test_near_duplicates_drop_what_the_one_by_one_rule_drops(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(int(rng.integers(0, 60)), 24)).astype(np.float32)
    # Chains of near-copies: b like a, c like b but maybe not like a, so the order of decisions counts.
    rows = []
    for v in base:
        rows.append(v)
        for _ in range(int(rng.integers(0, 3))):
            rows.append(rows[-1] + rng.normal(scale=0.08, size=24).astype(np.float32))
    matrix = np.array(rows, dtype=np.float32).reshape(len(rows), 24)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    matrix = matrix[rng.permutation(len(matrix))]
    for threshold in (0.97, 0.99, 0.995):
        assert near_duplicates(matrix, threshold) == _greedy_near_duplicates(matrix, threshold)


@pytest.mark.parametrize("seed", range(20))
def test_near_duplicates_of_full_size_vectors_drop_what_the_one_by_one_rule_drops(seed: int) -> None:
    """Embedder-sized rows: most pools are ruled out by the prefix bound without the full product
    (``_may_have_near_duplicates``); a pool with near-copies (some just above or below the
    threshold) is never ruled out, and drops exactly what the rule drops."""
    rng = np.random.default_rng(seed)
    n, dim = int(rng.integers(2, 120)), 384
    matrix = rng.normal(size=(n, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    assert not _may_have_near_duplicates(matrix, 0.99)  # unrelated rows: no full product made
    assert near_duplicates(matrix, 0.99) == []
    copies = rng.integers(0, n, size=int(rng.integers(1, 6)))
    noisy = matrix[copies] + rng.normal(scale=0.005, size=(len(copies), dim)).astype(np.float32)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    matrix = np.vstack([matrix, noisy])[rng.permutation(n + len(copies))]
    similar = matrix @ matrix.T
    for threshold in (0.97, 0.99, 0.995, float(np.median(similar[similar < 0.999999]))):
        want = _greedy_near_duplicates(matrix, threshold)
        if want:
            assert _may_have_near_duplicates(matrix, threshold)
        assert near_duplicates(matrix, threshold) == want
