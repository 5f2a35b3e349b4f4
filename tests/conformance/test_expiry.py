"""Per-memory expiry on every backend: an expired memory is never returned, and the sweep deletes it.

moto has no TTL expiry and no backend deletes on its own, so the read-side
filter and the sweep are tested directly, with times either side of now.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from memstack.domain import expiry
from memstack.domain.retrieval.types import SearchRequest
from memstack.errors import NotFound
from memstack.models import MemoryFilters
from memstack.service import Expiry, MemoryService

from .test_metadata_filters import listed
from .test_store_conformance import rec

NOW = datetime.now(UTC)
PAST, FUTURE = NOW - timedelta(hours=1), NOW + timedelta(days=1)


def _seed(store: Any) -> dict[str, str]:
    notes = [
        rec("note kept forever", minutes=1),
        rec("note expired an hour ago", minutes=2, metadata=expiry.with_expiry({}, PAST)),
        rec("note expires tomorrow", minutes=3, metadata=expiry.with_expiry({"topic": "x"}, FUTURE)),
        rec("note expired just now", minutes=4, metadata=expiry.with_expiry({}, NOW - timedelta(seconds=1))),
    ]
    store.put(notes)
    return {n.content: n.id for n in notes}


ALIVE = {"note kept forever", "note expires tomorrow"}


def test_expired_memories_are_never_listed_searched_or_read(store: Any, service: MemoryService) -> None:
    ids = _seed(store)
    page, _ = service.list("t1", "u1", MemoryFilters(), limit=2)
    # The two newest are expired: the page is still full, of live ones.
    assert [r.content for r in page] == ["note expires tomorrow", "note kept forever"]
    hits = service.search(SearchRequest(tenant="t1", user_id="u1", query="note", top_k=10)).hits
    assert {h.record.content for h in hits} == ALIVE
    with pytest.raises(NotFound):
        service.get("t1", "u1", ids["note expired an hour ago"])
    with pytest.raises(NotFound):
        service.history("t1", "u1", ids["note expired just now"])
    assert service.get("t1", "u1", ids["note expires tomorrow"]).content == "note expires tomorrow"


def test_the_sweep_finds_the_expired_in_the_store_and_deletes_them(
    store: Any, service: MemoryService
) -> None:
    ids = _seed(store)
    assert listed(store, MemoryFilters(where=expiry.due(NOW))) == {
        "note expired an hour ago",
        "note expired just now",
    }
    assert listed(store, MemoryFilters(where=expiry.alive(NOW))) == ALIVE
    swept = service.sweep_expired("t1", "u1", NOW)
    assert set(swept) == {ids["note expired an hour ago"], ids["note expired just now"]}
    assert listed(store, MemoryFilters()) == ALIVE  # straight from the store: tombstoned
    assert service.sweep_expired("t1", "u1", NOW) == []
    # Later, tomorrow's goes too.
    assert service.sweep_expired("t1", "u1", FUTURE) == [ids["note expires tomorrow"]]


def test_an_edit_sets_moves_or_removes_the_expiry(store: Any, service: MemoryService) -> None:
    ids = _seed(store)
    later = service.update("t1", "u1", ids["note kept forever"], expires=Expiry(FUTURE))
    assert expiry.expires_at(later) == FUTURE
    # A relabel keeps the expiry (it is a system key); removing it makes the memory permanent.
    relabelled = service.update("t1", "u1", later.id, metadata={"topic": "y"})
    assert expiry.expires_at(relabelled) == FUTURE and relabelled.metadata["topic"] == "y"
    forever = service.update("t1", "u1", relabelled.id, expires=Expiry(None))
    assert expiry.expires_at(forever) is None
    assert forever.id not in service.sweep_expired("t1", "u1", FUTURE + timedelta(days=1))
