"""Weighted RRF and min-max scaling against hand-computed values."""

from __future__ import annotations

import pytest
from memstack.domain.scoring import temporal_factor, weighted_rrf
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
