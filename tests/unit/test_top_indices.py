"""Exact top-k with ties broken by position: the same ranking on every machine."""

from __future__ import annotations

import numpy as np
import pytest
from memstack.domain.vectors import top_indices


def _reference(scores: np.ndarray, n: int) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:n]


@pytest.mark.parametrize("seed", range(20))
def test_equals_a_sort_by_score_then_position_with_many_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 5, size=200).astype(np.float32)  # every score shared by ~40 rows
    for n in (1, 3, 10, 57, 199, 200, 500):
        assert top_indices(scores, n).tolist() == _reference(scores, n)


def test_rows_tied_at_the_cut_are_taken_in_position_order() -> None:
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1], dtype=np.float32)
    assert top_indices(scores, 2).tolist() == [1, 0]
    assert top_indices(scores, 3).tolist() == [1, 0, 2]


def test_nothing_asked_or_nothing_there() -> None:
    assert top_indices(np.array([0.3], dtype=np.float32), 0).tolist() == []
    assert top_indices(np.zeros(0, dtype=np.float32), 5).tolist() == []
