"""A tenant's own categories on every backend: stored, filtered on (listing, both searches, expressions),
and held to the tenant's configuration by the service (an unknown category is a clear 422)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from memstack.domain import filter_expr
from memstack.domain.retrieval import SearchRequest
from memstack.errors import ValidationFailed
from memstack.models import MemoryFilters

from .test_metadata_filters import bm25, listed, vector
from .test_store_conformance import rec

NOTES = {
    "note dog walk": "pets",
    "note vet visit": "pets",
    "note fern repotted": "house_plants",
    "note ramen": "dietary",
    "note nothing filed": None,
}
CONFIG = {
    "categories": {
        "custom": [
            {"name": "pets", "description": "the user's pets", "keywords": ["dog", "vet"]},
            {"name": "house_plants", "description": "plants at home", "keywords": ["fern"]},
        ]
    }
}


def put_notes(store: Any) -> None:
    store.put(
        [rec(content, minutes=i, category=category) for i, (content, category) in enumerate(NOTES.items())]
    )


def of(*categories: str | None) -> set[str]:
    return {content for content, category in NOTES.items() if category in categories}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (MemoryFilters(category="pets"), of("pets")),
        (MemoryFilters(category="house_plants"), of("house_plants")),
        (MemoryFilters(category="dietary"), of("dietary")),
        (MemoryFilters(category="never_stored"), set()),
        (
            MemoryFilters(where=filter_expr.parse({"category": {"in": ["pets", "house_plants"]}})),
            of("pets", "house_plants"),
        ),
        (
            MemoryFilters(where=filter_expr.parse({"category": {"ne": "pets"}})),
            of("house_plants", "dietary", None),
        ),
        (MemoryFilters(where=filter_expr.parse({"category": {"contains": "plant"}})), of("house_plants")),
    ],
)
def test_custom_categories_are_stored_and_filtered_everywhere(
    store: Any, filters: MemoryFilters, expected: set[str]
) -> None:
    put_notes(store)
    records, _ = store.list("t1", "u1", MemoryFilters(), 100)
    assert {r.content: r.category for r in records} == NOTES  # read back as stored
    assert listed(store, filters) == expected
    assert bm25(store, filters) == expected
    assert vector(store, filters) == expected


def test_the_service_holds_filters_and_writes_to_the_tenants_categories(service: Any) -> None:
    now = datetime.now(UTC)
    with pytest.raises(ValidationFailed, match="'pets' is not a category of this tenant"):
        service.list("t1", "u1", MemoryFilters(category="pets"))
    service.tenant_configs.replace("t1", CONFIG, now)
    record, _ = service.put_key("t1", "u1", "dog", "Biscuit is a beagle", category="pets")
    assert record.category == "pets"
    found, _ = service.list("t1", "u1", MemoryFilters(category="pets"))
    assert [r.content for r in found] == ["Biscuit is a beagle"]
    hits = service.search(SearchRequest("t1", "u1", "beagle", filters=MemoryFilters(category="pets"))).hits
    assert [h.record.content for h in hits] == ["Biscuit is a beagle"]

    # Unknown names, in a filter, an expression or a write, are 422s that name what is allowed.
    with pytest.raises(ValidationFailed, match="'plants' is not a category of this tenant") as caught:
        service.list("t1", "u1", MemoryFilters(category="plants"))
    assert "pets" in caught.value.message and "house_plants" in caught.value.message
    where = MemoryFilters(
        where=filter_expr.parse({"OR": [{"category": "pets"}, {"category": {"in": ["cars"]}}]})
    )
    with pytest.raises(ValidationFailed, match=r"where\.category: 'cars'"):
        service.search(SearchRequest("t1", "u1", "beagle", filters=where))
    with pytest.raises(ValidationFailed):
        service.put_key("t1", "u1", "car", "A red Golf", category="cars")
    # Another tenant of the same store has only the built-in categories.
    with pytest.raises(ValidationFailed):
        service.list("t2", "u1", MemoryFilters(category="pets"))
    assert service.list("t2", "u1", MemoryFilters(category="travel"))[0] == []

    # Replacing the built-in categories: a built-in name is unknown from then on.
    service.tenant_configs.patch("t1", {"categories": {"mode": "replace"}}, now)
    with pytest.raises(ValidationFailed, match="'travel' is not a category"):
        service.list("t1", "u1", MemoryFilters(category="travel"))
