"""The one definition of metadata-filter equality: typed terms, equal exactly when the JSON values are."""

from __future__ import annotations

from typing import Any

import pytest
from memstack.domain.metadata_filter import matches, record_terms, term, wanted_terms


@pytest.mark.parametrize(
    ("a", "b"),
    [(1, 1.0), (-0.0, 0), (1e20, 10**20), (2.5, 2.5), ("x", "x"), (True, True), (False, False)],
)
def test_equal_json_values_give_one_term(a: Any, b: Any) -> None:
    assert term("k", a) == term("k", b)


@pytest.mark.parametrize(
    ("a", "b"), [(1, "1"), (1, True), (0, False), ("true", True), (2.5, 2.4999), ("X", "x"), (1, 2)]
)
def test_different_json_values_give_different_terms(a: Any, b: Any) -> None:
    assert term("k", a) != term("k", b)


def test_keys_are_part_of_the_term_and_non_scalars_have_none() -> None:
    assert term("a", "x") != term("b", "x")
    assert term("k", None) is None and term("k", [1]) is None and term("k", {"a": 1}) is None
    assert record_terms({"b": 1, "a": "x", "c": None, "d": [1]}) == ["a=s:x", "b=n:1"]
    assert wanted_terms("n", [1, 1.0, True]) == ["n=b:true", "n=n:1"]


def test_matches_ands_keys_and_ors_values() -> None:
    metadata = {"topic": "food", "n": 1}
    assert matches(metadata, None) and matches(metadata, {})
    assert matches(metadata, {"topic": ("travel", "food")})
    assert matches(metadata, {"topic": ("food",), "n": (1.0,)})
    assert not matches(metadata, {"topic": ("food",), "n": ("1",)})
    assert not matches(metadata, {"missing": ("food",)})
