"""The reliability diagram of ``scripts/calibrate_scores.py --plot``: its score bins and the PNG."""

from __future__ import annotations

from pathlib import Path

import pytest
from memstack.evaluation.plot import plot_reliability, reliability_bins


def test_each_bin_has_its_results_mean_score_and_share_relevant() -> None:
    scores = [0.01, 0.02, 0.12, 0.18, 0.55, 1.0]
    relevant = [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    bins = reliability_bins(scores, relevant, edges=(0.0, 0.05, 0.2, 0.5, 1.0))
    # The empty bin [0.2, 0.5) is left out; the last bin includes a score of exactly 1.
    assert [(b.lo, b.hi, b.results) for b in bins] == [(0.0, 0.05, 2), (0.05, 0.2, 2), (0.5, 1.0, 2)]
    assert [b.mean_score for b in bins] == pytest.approx([0.015, 0.15, 0.775])
    assert [b.relevant for b in bins] == [0.0, 0.5, 1.0]


def test_scores_and_labels_must_pair_up() -> None:
    with pytest.raises(ValueError):
        reliability_bins([0.1, 0.2], [1.0])


def test_the_diagram_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots" / "reliability.png"
    plot_reliability({"a": ([0.1, 0.6, 0.9], [0.0, 1.0, 1.0]), "b": ([0.3], [0.0])}, out, "title")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
