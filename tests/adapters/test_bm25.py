"""The pure-Python Okapi BM25 the DynamoDB backend ranks with."""

from __future__ import annotations

import math

import numpy as np
from memstack.domain.bm25 import K1, B, Bm25Index


def okapi(tf: int, df: int, n: int, length: int, avg: float) -> float:
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))


def test_scores_match_the_okapi_formula() -> None:
    docs = ["tea tea with lemon", "coffee with milk", "green tea"]
    index = Bm25Index(docs)
    avg = (4 + 3 + 2) / 3
    expected = [okapi(2, 2, 3, 4, avg), 0.0, okapi(1, 2, 3, 2, avg)]
    np.testing.assert_allclose(index.scores("tea"), expected, rtol=1e-6)
    # Two query terms add up; stopwords in the query are dropped ("with" is one).
    both = index.scores("tea with lemon")
    assert both[0] == np.float32(okapi(2, 2, 3, 4, avg) + okapi(1, 1, 3, 4, avg))


def test_rare_terms_outweigh_common_ones_and_repeats_saturate() -> None:
    docs = ["cat " * 1 + "zebra", "cat cat cat cat cat cat", "dog"]
    index = Bm25Index(docs)
    top = index.top("cat zebra", 3)
    assert top[0][0] == 0  # the only document with the rare term wins
    many = Bm25Index(["cat " * 50, "cat"]).scores("cat")
    assert many[0] < 2.5 * many[1]  # term frequency saturates (k1), it does not grow linearly


def test_top_applies_the_mask_and_never_returns_non_matches() -> None:
    index = Bm25Index(["alpha beta", "alpha", "gamma"])
    assert [d for d, _ in index.top("alpha", 10)] == [1, 0]
    assert [d for d, _ in index.top("alpha", 10, np.array([True, False, True]))] == [0]
    assert index.top("delta", 10) == []
    assert index.top("alpha", 0) == []


def test_hostile_and_empty_inputs() -> None:
    assert Bm25Index([]).top("anything", 5) == []
    index = Bm25Index(["", "emoji 🐶 puppy", 'quote "x" AND NEAR(y)'])
    assert index.top("", 5) == []
    assert [d for d, _ in index.top("🐶 puppy", 5)] == [1]
    assert [d for d, _ in index.top('"x" AND', 5)] == [2]
    assert index.top("z" * 10_000, 5) == []
