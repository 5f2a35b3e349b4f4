"""The first end-to-end path through the service: immediate save, then hybrid search."""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.domain.retrieval.types import SearchRequest
from memstack.models import MemoryFilters, Message, Tier
from memstack.service import MemoryService

MSGS = [
    Message(
        id="m1",
        speaker="Maya",
        content="I adopted a shiba inu called Mochi",
        timestamp=datetime(2026, 3, 1, tzinfo=UTC),
    ),
    Message(id="m2", speaker="Maya", content="My sister Aiko is a nurse in Vancouver"),
    Message(id="m3", speaker="Maya", content="I am allergic to peanuts"),
]


def test_messages_are_stored_as_stm_with_speaker_timestamp_and_embeddings(service: MemoryService) -> None:
    result = service.add("t1", "u1", MSGS, session_id="s1", infer=False)
    assert result.accepted == ["m1", "m2", "m3"] and result.stored == ["m1", "m2", "m3"]
    records, _ = service.list("t1", "u1")
    assert {r.tier for r in records} == {Tier.STM}
    by_source = {r.source_ids[0]: r for r in records}
    assert by_source["m1"].speaker == "Maya"
    assert by_source["m1"].event_time == datetime(2026, 3, 1, tzinfo=UTC)
    assert by_source["m2"].event_time is not None  # stamped with the receive time
    vectors = service.store.embeddings("t1", "u1", [r.id for r in records])
    assert len(vectors) == 3 and all(v.shape == (service.embedder.dim,) for v in vectors.values())
    entry = service.stm.get("t1", "u1", "m1")
    assert entry is not None and entry.session_id == "s1" and not entry.consolidated


def test_resending_the_same_message_ids_stores_nothing_twice(service: MemoryService) -> None:
    service.add("t1", "u1", MSGS, infer=False)
    again = service.add("t1", "u1", MSGS, infer=False)
    assert again.stored == [] and again.accepted == ["m1", "m2", "m3"]
    assert len(service.list("t1", "u1")[0]) == 3


def test_hybrid_search_finds_the_relevant_turn_for_its_user_only(service: MemoryService) -> None:
    service.add("t1", "u1", MSGS, infer=False)
    service.add("t1", "u2", [Message(id="x", content="I am allergic to peanuts and shellfish")], infer=False)
    result = service.search(SearchRequest(tenant="t1", user_id="u1", query="peanut allergy", top_k=2))
    assert result.hits[0].record.source_ids == ["m3"]
    assert all(h.record.user_id == "u1" for h in result.hits)
    assert {"vector", "bm25"} <= set(result.hits[0].stages)


def test_search_respects_filters(service: MemoryService) -> None:
    service.add("t1", "u1", MSGS, infer=False)
    result = service.search(
        SearchRequest(tenant="t1", user_id="u1", query="peanuts", filters=MemoryFilters(tier=Tier.LTM))
    )
    assert result.hits == []
