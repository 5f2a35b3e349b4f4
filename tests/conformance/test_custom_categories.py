"""A tenant's own categories on every backend: stored, filtered on (listing, both searches, expressions),
and held to the tenant's configuration by the service (an unknown category is a clear 422)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from memstack.domain import filter_expr
from memstack.domain.retrieval.types import SearchRequest
from memstack.errors import ValidationFailed
from memstack.models import MemoryFilters

from tests.infra.opensearch_wire import Wire

from .conftest import COARSE_DIM, FULL_DIM
from .opensearch_wire_stores import WIRE_ALIAS, opensearch_serverless_wire, opensearch_wire
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


WIRES = {"opensearch-managed": opensearch_wire, "opensearch-serverless": opensearch_serverless_wire}


@pytest.fixture(params=sorted(WIRES))
def wire_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Wire]]:
    """The service on an OpenSearch store whose requests a ``Wire`` answers (no cluster needed)."""
    from memstack.factory import build_service
    from memstack.settings import load_settings

    settings = load_settings(
        data_dir=tmp_path / "data", embedder="hashing", embedding_dim=FULL_DIM, coarse_dim=COARSE_DIM
    )
    wire = Wire()
    for store in WIRES[request.param](tmp_path, wire):
        svc = build_service(settings, store=store)
        yield svc, wire
        svc.close()


def _memory_index_requests(wire: Wire, since: int) -> list[Any]:
    """The requests for the memories' alias (not its ``-config`` index) after ``since``: by their
    path, or for a bulk, by the index its lines name."""
    calls = zip(wire.recorder.requests, wire.calls, strict=True)
    return [r for r, call in list(calls)[since:] if WIRE_ALIAS in (call.path.split("/")[1], *call.indexes)]


def test_opensearch_writes_filters_and_refuses_custom_categories_at_the_request_level(
    wire_service: tuple[Any, Wire],
) -> None:
    service, wire = wire_service
    service.tenant_configs.replace("t1", CONFIG, datetime.now(UTC))

    sent = len(wire.recorder.requests)
    service.put_key("t1", "u1", "dog", "Biscuit is a beagle", category="pets")
    written = [
        line
        for r in _memory_index_requests(wire, sent)
        if r.path.endswith("/_bulk")
        for line in r.lines
        if "content" in line
    ]
    assert [(w["content"], w["category"]) for w in written] == [("Biscuit is a beagle", "pets")]

    # A listing filters with a term on the name; the wire evaluates it, so the memory comes back.
    sent = len(wire.recorder.requests)
    found, _ = service.list("t1", "u1", MemoryFilters(category="pets"))
    assert [r.category for r in found] == ["pets"]
    (listing,) = [r.body for r in _memory_index_requests(wire, sent) if r.path.endswith("/_search")]
    assert {"term": {"category": "pets"}} in listing["query"]["bool"]["filter"]

    # A search sends the expression's names as a terms filter in both the k-NN and the BM25 query.
    sent = len(wire.recorder.requests)
    where = filter_expr.parse({"category": {"in": ["pets", "house_plants"]}})
    hits = service.search(SearchRequest("t1", "u1", "beagle", filters=MemoryFilters(where=where))).hits
    assert [h.record.content for h in hits] == ["Biscuit is a beagle"]  # by BM25 (the wire finds no k-NN)
    # (in one _msearch with the term counts: each search body after its header line)
    sent_searches = _memory_index_requests(wire, sent)
    searches = [json.dumps(r.body) for r in sent_searches if r.path.endswith("/_search")]
    searches += [json.dumps(b) for r in sent_searches if r.path.endswith("/_msearch") for b in r.lines[1::2]]
    terms = json.dumps({"terms": {"category": ["pets", "house_plants"]}})
    assert [s for s in searches if '"knn"' in s and terms in s]
    assert [s for s in searches if '"multi_match"' in s and terms in s]

    # Names the tenant does not have are refused before anything reaches the cluster.
    sent = len(wire.recorder.requests)
    with pytest.raises(ValidationFailed, match="'cars' is not a category of this tenant"):
        service.list("t1", "u1", MemoryFilters(category="cars"))
    cars = MemoryFilters(where=filter_expr.parse({"NOT": {"category": {"in": ["cars"]}}}))
    with pytest.raises(ValidationFailed, match=r"where\.category: 'cars'"):
        service.search(SearchRequest("t1", "u1", "beagle", filters=cars))
    with pytest.raises(ValidationFailed):
        service.put_key("t1", "u1", "car", "A red Golf", category="cars")
    # Another tenant (its own configuration, read from the config index) has only the built-in ones.
    with pytest.raises(ValidationFailed, match="'pets' is not a category of this tenant"):
        service.list("t2", "u1", MemoryFilters(category="pets"))
    assert _memory_index_requests(wire, sent) == []
