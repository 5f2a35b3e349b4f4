"""Consolidation's summaries and syntheses never push specific turns and memories out (issue 21 item 8)."""

from __future__ import annotations

from typing import Any

from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.models import Tier
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


def search(service: MemoryService, query: str, **kw: Any) -> SearchResult:
    return service.search(
        SearchRequest(tenant=T, user_id=U, query=query, reference_time=REF, explain=True, **kw)
    )


def summary(service: MemoryService, content: str, sources: list[str], kind: str = "summary") -> Any:
    rec = record(service, content, sources[0], source_ids=sources)
    rec.metadata.update(consolidation=kind)
    return rec


QUERY = "pottery class clay bowl glaze"


def test_a_summary_ranks_below_the_turn_and_memory_it_was_built_from(service: MemoryService) -> None:
    turn, memory, rollup, _ = put(
        service,
        record(service, "I started a pottery class and made a clay bowl", "m1", tier=Tier.STM),
        record(service, "The user glazes pottery bowls", "m2"),
        summary(service, "pottery class clay bowl glaze kiln pottery clay glaze", ["m1", "m2", "m3"]),
        record(service, "My sister lives in Lisbon", "m9"),
    )
    hits = search(service, QUERY, top_k=10).hits
    ids = [h.record.id for h in hits]
    assert ids.index(rollup.id) > max(ids.index(turn.id), ids.index(memory.id))
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    moved = next(h for h in hits if h.record.id == rollup.id)
    assert moved.stages["rollup_from"] >= moved.score


def test_at_most_one_summary_ranks_among_the_specific_hits(service: MemoryService) -> None:
    put(
        service,
        record(service, "I made a clay bowl at the pottery class", "m1", tier=Tier.STM),
        record(service, "We chatted after class about the weather", "m4", tier=Tier.STM),
        record(service, "The user likes a green glaze", "m3"),
        summary(service, "pottery class clay bowl glaze, pottery clay glaze", ["m5", "m6"]),
        summary(service, "pottery clay bowl glaze class, glaze pottery", ["m7", "m8"], kind="synthesis"),
    )
    hits = search(service, QUERY, top_k=10).hits
    kinds = [h.record.metadata.get("consolidation") for h in hits]
    # The summary keeps its place (nothing it was built from was found); the synthesis, a
    # second rollup, waits below every specific hit, with a score no higher than theirs.
    assert kinds == [None, "summary", None, None, "synthesis"]
    assert hits[-1].score <= min(h.score for h in hits[:-1])


def test_without_summaries_nothing_moves(service: MemoryService) -> None:
    put(
        service,
        record(service, "I made a clay bowl at the pottery class", "m1", tier=Tier.STM),
        record(service, "The user glazes pottery bowls", "m2"),
    )
    result = search(service, QUERY, top_k=10)
    assert not any("rollup_from" in h.stages for h in result.hits)
    assert "summaries" not in result.stage_status["history"]
