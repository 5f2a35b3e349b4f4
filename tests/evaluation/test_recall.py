"""Every retrieval metric of the evaluation, against hand-computed values."""

from __future__ import annotations

import math

import pytest
from memstack.evaluation.recall import MetricTable, QuestionResult, distinct_sources, recall_at


def session(turn: str) -> str:
    return turn.split(":")[0]


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


def test_a_memory_citing_many_turns_uses_that_many_places() -> None:
    # The first result cites three turns: the evidence D2:1 (second result) is the fourth distinct turn.
    results = [["D1:1", "D1:2", "D1:3"], ["D2:1"], ["D3:1"]]
    r = QuestionResult.from_results("multi-hop", results, ["D2:1", "D3:1"], session, depth=10)
    assert r.evidence_ranks == (4, 5)
    assert r.value("turn_recall", 3) == 0.0
    assert r.value("turn_recall", 4) == 0.5
    assert r.value("turn_recall", 5) == 1.0
    assert r.value("any", 4) == 1.0 and r.value("all", 4) == 0.0 and r.value("all", 5) == 1.0
    # Distinct turns cited by the first n results: 3, 4, 5.
    assert [r.value("cited", n) for n in (1, 2, 3, 10)] == [3.0, 4.0, 5.0, 5.0]
    # Sessions in order of first citation: D1, D2, D3; the first evidence session is second.
    assert r.session_rank == 2
    assert r.value("session_recall", 1) == 0.0 and r.value("session_recall", 2) == 1.0


def test_ndcg_against_its_definition() -> None:
    results = [["a"], ["x"], ["b"], ["y"]]
    r = QuestionResult.from_results("temporal", results, ["a", "b"], lambda t: t, depth=10)
    dcg = 1 / math.log2(2) + 1 / math.log2(4)
    ideal = 1 / math.log2(2) + 1 / math.log2(3)
    assert r.value("ndcg", 4) == pytest.approx(dcg / ideal)
    # At k=1 the ideal has one relevant turn, and the first result is one: perfect.
    assert r.value("ndcg", 1) == pytest.approx(1.0)
    perfect = QuestionResult.from_results("temporal", [["b"], ["a"]], ["a", "b"], lambda t: t, depth=10)
    assert perfect.value("ndcg", 10) == pytest.approx(1.0)


def test_table_means_per_category_and_overall() -> None:
    table = MetricTable([1, 2])
    table.add(QuestionResult.from_results("temporal", [["a"], ["b"]], ["a"], session, 2))  # @1: 1, @2: 1
    table.add(QuestionResult.from_results("single-hop", [["a"], ["b"]], ["b", "c"], session, 2))  # 0, .5
    means = table.means(["single-hop", "temporal", "adversarial"])
    assert means["1"] == {"all": 0.5, "single-hop": 0.0, "temporal": 1.0, "adversarial": None}
    assert means["2"] == {"all": 0.75, "single-hop": 0.5, "temporal": 1.0, "adversarial": None}
    every = table.all_means(["single-hop", "temporal"])
    assert every["any"]["2"]["all"] == 1.0 and every["all"]["2"]["all"] == 0.5
    with pytest.raises(ValueError):
        QuestionResult.from_results("temporal", [["a"]], [], session, 2)


def test_embedding_cache_returns_the_same_vectors_without_recomputing(tmp_path) -> None:
    import numpy as np
    from memstack.adapters.embedders.hashing import HashingEmbedder
    from memstack.evaluation.embedding_cache import CachedEmbedder

    class Counting(HashingEmbedder):
        calls: list[list[str]] = []

        def embed(self, texts: list[str]) -> np.ndarray:
            self.calls.append(list(texts))
            return super().embed(texts)

    inner = Counting(64)
    first = CachedEmbedder(inner, tmp_path)
    a = first.embed(["one", "two", "one"])
    first.close()
    second = CachedEmbedder(inner, tmp_path)  # a new process would open the same file
    b = second.embed(["two", "three", "one"])
    second.close()
    assert inner.calls == [["one", "two"], ["three"]]
    np.testing.assert_array_equal(a[1], b[0])
    np.testing.assert_array_equal(a[0], b[2])
    assert b.shape == (3, 64) and b.dtype == np.float32
