"""Stage 6 by provenance: a raw turn and the memory made from it are one result, not two."""

from __future__ import annotations

from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import Tier
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


def test_a_turn_is_merged_into_the_memory_made_from_it(service: MemoryService) -> None:
    turn = record(service, "Sam: I am allergic to peanuts and shellfish", "m1", tier=Tier.STM)
    memory = record(service, "Sam is allergic to peanuts", "m1")
    other = record(service, "Sam: peanuts are in the satay sauce I made", "m2", tier=Tier.STM)
    put(service, turn, memory, other)
    result = service.search(
        SearchRequest(
            tenant=T, user_id=U, query="peanuts shellfish allergy", reference_time=REF, explain=True
        )
    )
    ids = [h.record.id for h in result.hits]
    assert turn.id not in ids  # the turn is represented by the memory...
    assert ids[0] == memory.id  # ...which takes the turn's better place
    assert other.id in ids  # a turn no memory came from stays
    assert "turns merged" in result.stage_status["dedup"]


def test_merging_by_source_can_be_switched_off(service: MemoryService) -> None:
    turn = record(service, "Sam: I am allergic to peanuts and shellfish", "m1", tier=Tier.STM)
    memory = record(service, "Sam is allergic to peanuts", "m1")
    put(service, turn, memory)
    keep_both = Retriever(service.store, service.embedder, RetrievalConfig(dedup_by_source=False))
    result = keep_both.search(SearchRequest(tenant=T, user_id=U, query="peanuts allergy", reference_time=REF))
    assert {turn.id, memory.id} <= {h.record.id for h in result.hits}


def test_a_superseded_memory_does_not_hide_its_turn(service: MemoryService) -> None:
    turn = record(service, "Sam: I live in Tokyo", "m1", tier=Tier.STM)
    old = record(service, "Sam lives in Tokyo", "m1", is_current=False)
    put(service, turn, old)
    result = service.search(
        SearchRequest(tenant=T, user_id=U, query="where does Sam live Tokyo", reference_time=REF)
    )
    assert turn.id in [h.record.id for h in result.hits]


def test_an_updated_memory_merges_only_its_newest_turn(service: MemoryService) -> None:
    tokyo = record(service, "Sam: I live in Tokyo", "m1", tier=Tier.STM)
    osaka_turn = record(service, "Sam: I moved to Osaka", "m2", tier=Tier.STM)
    memory = record(service, "Sam lives in Osaka", "m1", source_ids=["m1", "m2"], version=2)
    put(service, tokyo, osaka_turn, memory)
    result = service.search(
        SearchRequest(tenant=T, user_id=U, query="where does Sam live", reference_time=REF)
    )
    ids = [h.record.id for h in result.hits]
    assert osaka_turn.id not in ids and memory.id in ids
    assert tokyo.id in ids  # what was said before stays findable
