"""Filter expressions (``MemoryFilters.where``): AND / OR / NOT and comparisons, the same on every backend.

Each case is parsed from the JSON a caller sends and run as a listing and as
both candidate searches; the answer must be ``domain.filter_expr.evaluate``
over the records, and the reference itself is pinned by hand below, so a
wrong rule cannot make every backend agree on it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from memstack.domain import filter_expr, versions
from memstack.models import Category, Kind, MemoryFilters, MemoryRecord

from .conftest import COARSE_DIM
from .test_metadata_filters import bm25, listed, vector
from .test_store_conformance import EMB, T0, rec

# content, metadata, kind, category, minutes after T0 (created_at), event_time offset in days (or None)
NOTES: list[tuple[str, dict[str, Any], Kind, Category | None, int, int | None]] = [
    ("note ramen", {"n": 1, "topic": "food", "agent_id": "chef"}, Kind.FACT, Category.DIETARY, 0, 3),
    (
        "note sushi",
        {"n": 2.5, "topic": "food court", "agent_id": "travel"},
        Kind.PREFERENCE,
        Category.DIETARY,
        1,
        None,
    ),
    ("note train", {"n": "10", "topic": "travel"}, Kind.EVENT, Category.TRAVEL, 2, -2),
    ("note flight", {"n": True, "topic": "Travel plans"}, Kind.EVENT, Category.TRAVEL, 3, 10),
    ("note piano", {"n": 7, "level": "b2"}, Kind.FACT, None, 4, None),
    ("note empty", {}, Kind.FACT, Category.HOBBIES, 5, 0),
]


def put_notes(store: Any) -> dict[str, MemoryRecord]:
    records = {}
    for content, metadata, kind, category, minutes, days in NOTES:
        records[content] = rec(
            content,
            minutes=minutes,
            metadata=metadata,
            kind=kind,
            category=category,
            event_time=None if days is None else T0 + timedelta(days=days),
        )
    store.put(list(records.values()))
    return records


def at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


CASES: dict[str, Any] = {
    "gt-number": {"metadata": {"n": {"gt": 1}}},
    "gte-number-int-float": {"metadata.n": {"gte": 1.0}},
    "lt-number-skips-strings-and-bools": {"metadata": {"n": {"lt": 100}}},
    "range-two-operators": {"metadata": {"n": {"gt": 1, "lte": 7}}},
    "string-comparison": {"metadata": {"topic": {"gte": "food", "lt": "g"}}},
    "string-compares-by-code-point": {"metadata": {"topic": {"lt": "a"}}},
    "contains": {"metadata": {"topic": {"contains": "ood"}}},
    "contains-is-case-sensitive": {"metadata": {"topic": {"contains": "travel"}}},
    "ne-keeps-missing-keys": {"metadata": {"topic": {"ne": "food"}}},
    "nin": {"metadata": {"topic": {"nin": ["food", "travel"]}}},
    "eq-typed": {"metadata": {"n": {"eq": 1}}},
    "in-typed": {"metadata": {"n": {"in": ["10", True]}}},
    "agent-id": {"agent_id": {"in": ["chef", "nobody"]}},
    "agent-id-ne": {"agent_id": {"ne": "chef"}},
    "created-at-range": {"created_at": {"gt": at(1), "lte": at(4)}},
    "created-at-eq": {"created_at": at(2)},
    "event-time-missing-matches-no-comparison": {"event_time": {"gte": at(0)}},
    "event-time-ne-keeps-missing": {"event_time": {"ne": (T0 + timedelta(days=3)).isoformat()}},
    "category": {"category": "travel"},
    "category-in": {"category": {"in": ["dietary", "hobbies"]}},
    "category-nin-keeps-none": {"category": {"nin": ["dietary"]}},
    "category-contains": {"category": {"contains": "ary"}},
    "kind": {"kind": {"ne": "event"}},
    "or": {"OR": [{"kind": "preference"}, {"metadata": {"n": {"gt": 5}}}]},
    "not": {"NOT": {"OR": [{"category": "dietary"}, {"metadata.level": "b2"}]}},
    "not-list-is-not-and": {"NOT": [{"category": "dietary"}, {"kind": "fact"}]},
    "nested": {
        "AND": [
            {"OR": [{"category": "travel"}, {"agent_id": "chef"}]},
            {"NOT": {"metadata": {"n": {"eq": True}}}},
            {"created_at": {"lt": at(10)}},
        ]
    },
    "fields-of-one-object-are-anded": {"kind": "event", "metadata": {"topic": {"contains": "ravel"}}},
    "nothing-matches": {"AND": [{"kind": "fact"}, {"kind": "event"}]},
}


def expected(expr: filter_expr.Node, records: dict[str, MemoryRecord]) -> set[str]:
    return {c for c, r in records.items() if filter_expr.evaluate(expr, r)}


@pytest.mark.parametrize("raw", CASES.values(), ids=CASES.keys())
def test_list_and_both_searches_keep_exactly_what_the_expression_allows(store: Any, raw: Any) -> None:
    records = put_notes(store)
    expr = filter_expr.parse(raw)
    filters = MemoryFilters(where=expr)
    want = expected(expr, records)
    assert listed(store, filters) == want
    assert bm25(store, filters) == want
    assert vector(store, filters) == want


def test_the_reference_rule_is_what_the_cases_say() -> None:
    records = {
        c: rec(
            c,
            minutes=m,
            metadata=md,
            kind=k,
            category=cat,
            event_time=None if d is None else T0 + timedelta(days=d),
        )
        for c, md, k, cat, m, d in NOTES
    }

    def ref(name: str) -> set[str]:
        return {c.removeprefix("note ") for c in expected(filter_expr.parse(CASES[name]), records)}

    assert ref("gt-number") == {"sushi", "piano"}  # not "10" (a string) nor True (a boolean)
    assert ref("gte-number-int-float") == {"ramen", "sushi", "piano"}
    assert ref("string-comparison") == {"ramen", "sushi"}
    assert ref("string-compares-by-code-point") == {"flight"}  # "T" < "a"
    assert ref("contains") == {"ramen", "sushi"}
    assert ref("contains-is-case-sensitive") == {"train"}
    assert ref("ne-keeps-missing-keys") == {"sushi", "train", "flight", "piano", "empty"}
    assert ref("in-typed") == {"train", "flight"}
    assert ref("agent-id-ne") == {"sushi", "train", "flight", "piano", "empty"}
    assert ref("created-at-range") == {"train", "flight", "piano"}
    assert ref("created-at-eq") == {"train"}
    assert ref("event-time-missing-matches-no-comparison") == {"ramen", "flight", "empty"}
    assert ref("event-time-ne-keeps-missing") == {"sushi", "train", "flight", "piano", "empty"}
    assert ref("category-nin-keeps-none") == {"train", "flight", "piano", "empty"}
    assert ref("or") == {"sushi", "piano"}
    assert ref("not") == {"train", "flight", "empty"}
    assert ref("not-list-is-not-and") == {"sushi", "train", "flight", "piano", "empty"}  # all but ramen
    assert ref("nested") == {"ramen", "train"}
    assert ref("fields-of-one-object-are-anded") == {"train", "flight"}
    assert ref("nothing-matches") == set()


def test_expressions_combine_with_plain_filters_and_skip_superseded_versions(store: Any) -> None:
    records = put_notes(store)
    expr = filter_expr.parse({"metadata": {"topic": {"contains": "o"}}})
    filters = MemoryFilters(where=expr, kind=Kind.FACT, metadata={"agent_id": ("chef",)})
    assert listed(store, filters) == {"note ramen"}
    assert bm25(store, filters) == vector(store, filters) == {"note ramen"}
    ramen = records["note ramen"]
    new = versions.new_version(ramen, content="note udon", embedder=EMB, coarse_dim=COARSE_DIM)
    store.supersede("t1", "u1", ramen.id, new)
    assert listed(store, filters) == bm25(store, filters) == vector(store, filters) == {"note udon"}
    history = filters.model_copy(update={"include_superseded": True})
    assert listed(store, history) == {"note udon", "note ramen"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"metadata": {"n": {"between": 1}}}, "unknown operator 'between'"),
        ({"colour": "red"}, "unknown field 'colour'"),
        ({"created_at": {"contains": "2024"}}, "created_at takes eq, ne, gt, gte, lt, lte"),
        ({"created_at": {"gt": "yesterday"}}, "not an ISO 8601 time"),
        ({"category": {"gt": "a"}}, "category takes eq, ne, in, nin, contains"),
        ({"kind": "thought"}, "'thought' is not a kind"),
        ({"metadata": {"n": {"gt": True}}}, "compares numbers or strings, not booleans"),
        ({"metadata": {"n": {"in": []}}}, "takes a list of 1 to"),
        ({"AND": []}, "takes a non-empty list"),
        ({"metadata": {"bad key": 1}}, "a metadata key has"),
        ({"metadata": {"n": None}}, "null matches nothing"),
        ({}, "a filter is"),
    ],
)
def test_a_bad_expression_says_what_is_wrong(raw: Any, message: str) -> None:
    with pytest.raises(filter_expr.FilterError, match=message):
        filter_expr.parse(raw)


def test_expressions_are_bounded() -> None:
    deep: Any = {"kind": "fact"}
    for _ in range(filter_expr.MAX_DEPTH):
        deep = {"NOT": deep}
    with pytest.raises(filter_expr.FilterError, match="nest at most"):
        filter_expr.parse(deep)
    wide = {"OR": [{"metadata": {"n": i}} for i in range(filter_expr.MAX_LEAVES + 1)]}
    with pytest.raises(filter_expr.FilterError, match="at most 50 conditions"):
        filter_expr.parse(wide)
