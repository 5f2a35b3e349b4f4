"""Metadata filters (``MemoryFilters.metadata``), the same on every backend (see conftest.py for the list).

Equality and ``in`` on keys, typed as JSON values are (``"1"``, ``1`` and
``true`` differ, ``1`` equals ``1.0``), ANDed across keys, in listings and in
both candidate searches, exact top-k under the filter, and current after
``mark``, supersede, tombstones and erase.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from memstack.domain import metadata_filter, versions
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, MemoryRecord
from memstack.ports.store import HybridCandidates, ReadView, pinned

from .conftest import COARSE_DIM, FULL_DIM
from .test_store_conformance import EMB, random_record, rec

# (content, metadata): every memory mentions "note", so any BM25 query for it finds them all.
NOTES: list[tuple[str, dict[str, Any]]] = [
    ("note about ramen for dinner", {"topic": "food", "agent_id": "chef", "n": 1}),
    ("note about sushi for lunch", {"topic": "food", "agent_id": "travel", "n": 1.0}),
    ("note about trains to Porto", {"topic": "travel", "agent_id": "travel", "n": "1"}),
    ("note about a flight to Osaka", {"topic": "travel", "n": True, "urgent": True}),
    ("note about the piano lesson", {"topic": "music", "n": 2.5, "urgent": False}),
    ("note with nothing attached", {}),
    ("note with a list attached", {"topic": ["food", "travel"], "n": None}),
]


def put_notes(store: Any, tenant: str = "t1", user: str = "u1") -> dict[str, MemoryRecord]:
    records = {c: rec(c, tenant, user, minutes=i, metadata=m) for i, (c, m) in enumerate(NOTES)}
    store.put(list(records.values()))
    return records


def meta(**conditions: Any) -> MemoryFilters:
    """Filters from ``key=value`` (equality) or ``key=[values]`` (any of them)."""
    as_tuples = {k: tuple(v) if isinstance(v, list) else (v,) for k, v in conditions.items()}
    return MemoryFilters(metadata=as_tuples)


def listed(store: Any, filters: MemoryFilters, tenant: str = "t1", user: str = "u1") -> set[str]:
    records, cursor = store.list(tenant, user, filters, 100)
    assert cursor is None
    return {r.content for r in records}


def bm25(store: Any, filters: MemoryFilters, k: int = 20) -> set[str]:
    hits = store.bm25_search("t1", "u1", "note", k, filters)
    return {content_by_id(store, h.id) for h in hits}


def vector(store: Any, filters: MemoryFilters, k: int = 20) -> set[str]:
    hits = store.vector_search("t1", "u1", _coarse("note"), k, filters)
    return {content_by_id(store, h.id) for h in hits}


def content_by_id(store: Any, memory_id: str) -> str:
    record = store.get("t1", "u1", memory_id)
    assert record is not None
    return str(record.content)


def _coarse(text: str) -> np.ndarray:
    return coarse_prefix(EMB.embed([text])[0], COARSE_DIM)


def expected(filters: MemoryFilters) -> set[str]:
    """The reference answer: ``domain.metadata_filter.matches`` over the notes."""
    return {c for c, m in NOTES if metadata_filter.matches(m, filters.metadata)}


CASES = {
    "equality": meta(topic="food"),
    "in": meta(topic=["music", "travel"]),
    "and-across-keys": meta(topic="travel", agent_id="travel"),
    "number-equals-integral-float": meta(n=1),
    "float-equals-int": meta(n=1.0),
    "string-is-not-a-number": meta(n="1"),
    "bool-is-not-a-number": meta(n=True),
    "false-is-a-value": meta(urgent=False),
    "non-integral-number": meta(n=2.5),
    "in-mixing-types": meta(n=["1", 2.5]),
    "missing-key": meta(colour="red"),
    "no-value-matches": meta(topic="sport"),
}


@pytest.mark.parametrize("filters", CASES.values(), ids=CASES.keys())
def test_list_and_both_searches_keep_exactly_the_matching_memories(
    store: Any, filters: MemoryFilters
) -> None:
    put_notes(store)
    want = expected(filters)
    assert listed(store, filters) == want
    assert bm25(store, filters) == want
    assert vector(store, filters) == want


def test_the_reference_rule_is_what_the_cases_say() -> None:
    """The rule itself, spelled out (so a wrong rule cannot make every backend agree on it)."""
    assert expected(meta(n=1)) == {NOTES[0][0], NOTES[1][0]}
    assert expected(meta(n="1")) == {NOTES[2][0]}
    assert expected(meta(n=True)) == {NOTES[3][0]}
    assert expected(meta(topic=["music", "travel"])) == {NOTES[2][0], NOTES[3][0], NOTES[4][0]}
    assert expected(meta(topic="travel", agent_id="travel")) == {NOTES[2][0]}
    assert expected(meta(topic="food")) == {NOTES[0][0], NOTES[1][0]}  # not the list value


def test_metadata_filters_combine_with_the_other_filters(store: Any) -> None:
    records = put_notes(store)
    filters = MemoryFilters(metadata={"topic": ("food", "travel")}, before=records[NOTES[2][0]].created_at)
    want = {NOTES[0][0], NOTES[1][0]}
    assert listed(store, filters) == want
    assert bm25(store, filters) == vector(store, filters) == want


def test_vector_search_under_a_filter_is_the_exact_top_k_of_the_matching_memories(store: Any) -> None:
    rng = np.random.default_rng(5)
    records = [
        random_record(rng, f"note {i}", metadata={"agent_id": "a" if i % 5 == 0 else "b"}) for i in range(80)
    ]
    store.put(records)
    query = coarse_prefix(rng.normal(size=FULL_DIM).astype(np.float32), COARSE_DIM)
    hits = store.vector_search("t1", "u1", query, 5, meta(agent_id="a"))
    kept = [r for r in records if r.metadata["agent_id"] == "a"]
    matrix = np.asarray([r.embedding_coarse for r in kept], dtype=np.float32)
    best = np.argsort(-(matrix @ query))[:5]
    # Five results although 4 in 5 memories are filtered out: the top 5 of the 16 that pass.
    assert [h.id for h in hits] == [kept[i].id for i in best]
    words = store.bm25_search("t1", "u1", "note", 50, meta(agent_id="a"))
    assert {h.id for h in words} == {r.id for r in kept}


def test_mark_changes_what_a_filter_finds(store: Any) -> None:
    records = put_notes(store)
    ramen, sushi = records[NOTES[0][0]], records[NOTES[1][0]]
    assert store.mark("t1", "u1", [ramen.id], consolidated=True, topic="dinner") == 1
    assert listed(store, meta(consolidated=True)) == {ramen.content}
    assert bm25(store, meta(topic="dinner")) == vector(store, meta(topic="dinner")) == {ramen.content}
    # The old value is gone from the filter; the memory's other values still match.
    assert listed(store, meta(topic="food")) == {sushi.content}
    assert listed(store, meta(agent_id="chef")) == {ramen.content}


def test_superseded_versions_match_only_with_include_superseded_and_tombstones_never(store: Any) -> None:
    records = put_notes(store)
    ramen, sushi = records[NOTES[0][0]], records[NOTES[1][0]]
    new = versions.new_version(
        ramen, content="note about udon for dinner", embedder=EMB, coarse_dim=COARSE_DIM
    )
    store.supersede("t1", "u1", ramen.id, new)
    tomb = versions.new_version(sushi, content=None, embedder=None, coarse_dim=COARSE_DIM, deleted=True)
    store.supersede("t1", "u1", sushi.id, tomb)
    food = meta(topic="food")
    assert listed(store, food) == {new.content}  # the new version kept the metadata
    history = food.model_copy(update={"include_superseded": True})
    assert listed(store, history) == {new.content, ramen.content, sushi.content}
    assert vector(store, history) == {new.content, ramen.content, sushi.content}
    assert bm25(store, food) == {new.content}


def test_filters_never_reach_another_user_and_erase_takes_the_terms_too(store: Any) -> None:
    put_notes(store, "t1", "u1")
    put_notes(store, "t1", "u2")
    put_notes(store, "t2", "u1")
    food = meta(topic="food")
    assert store.erase_user("t1", "u1")["memories"] == len(NOTES)
    assert listed(store, food) == set()
    assert store.bm25_search("t1", "u1", "note", 10, food) == []
    assert store.vector_search("t1", "u1", _coarse("note"), 10, food) == []
    assert listed(store, food, "t1", "u2") == listed(store, food, "t2", "u1") == expected(food)
    # The user starts again: only the new memories match.
    fresh = rec("note about pancakes", metadata={"topic": "food"})
    store.put([fresh])
    assert listed(store, food) == {fresh.content}
    assert bm25(store, food) == vector(store, food) == {fresh.content}


def test_combined_candidates_and_read_views_filter_as_the_store_does(store: Any) -> None:
    put_notes(store)
    filters = meta(topic=["food", "music"])
    q = _coarse("note")
    separate = (
        store.bm25_search("t1", "u1", "note", 10, filters),
        store.vector_search("t1", "u1", q, 10, filters),
    )
    assert {content_by_id(store, h.id) for h in separate[1]} == expected(filters)
    if isinstance(store, HybridCandidates):
        assert store.hybrid_candidates("t1", "u1", "note", q, 10, 10, filters) == separate
    if isinstance(store, ReadView):
        view = pinned(store, "t1", "u1")
        assert view.bm25_search("t1", "u1", "note", 10, filters) == separate[0]
        assert view.vector_search("t1", "u1", q, 10, filters) == separate[1]
        assert view.list("t1", "u1", filters, 50) == store.list("t1", "u1", filters, 50)


def test_a_filtered_listing_pages_through_every_match_once(store: Any) -> None:
    records = [rec(f"note {i}", minutes=i, metadata={"agent_id": "a" if i % 3 else "b"}) for i in range(25)]
    store.put(records)
    seen: list[str] = []
    cursor = None
    while True:
        page, cursor = store.list("t1", "u1", meta(agent_id="a"), 4, cursor)
        seen += [r.id for r in page]
        if cursor is None:
            break
    want = [
        r.id
        for r in sorted(records, key=lambda r: r.created_at, reverse=True)
        if r.metadata["agent_id"] == "a"
    ]
    assert seen == want
