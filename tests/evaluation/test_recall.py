"""Recall@k by distinct source ids, against hand-computed values."""

from __future__ import annotations

import pytest
from memstack.evaluation.recall import RecallTable, distinct_sources, recall_at


def test_distinct_sources_keep_result_order_and_skip_repeats() -> None:
    results = [["D1:1"], ["D1:2", "D1:1"], ["D1:3"], ["D1:2"], ["D1:4"]]
    assert distinct_sources(results, 3) == ["D1:1", "D1:2", "D1:3"]
    assert distinct_sources(results, 10) == ["D1:1", "D1:2", "D1:3", "D1:4"]


def test_recall_at_k_is_the_share_of_evidence_found() -> None:
    ranked = ["a", "b", "c", "d"]
    assert recall_at(ranked, ["b", "d"], 2) == 0.5
    assert recall_at(ranked, ["b", "d"], 4) == 1.0
    assert recall_at(ranked, ["x"], 4) == 0.0
    with pytest.raises(ValueError):
        recall_at(ranked, [], 4)


def test_table_means_per_category_and_overall() -> None:
    table = RecallTable([1, 2])
    table.add("temporal", ["a", "b"], ["a"])  # @1: 1, @2: 1
    table.add("single-hop", ["a", "b"], ["b", "c"])  # @1: 0, @2: 0.5
    means = table.means(["single-hop", "temporal", "adversarial"])
    assert means["1"] == {"all": 0.5, "single-hop": 0.0, "temporal": 1.0, "adversarial": None}
    assert means["2"] == {"all": 0.75, "single-hop": 0.5, "temporal": 1.0, "adversarial": None}
