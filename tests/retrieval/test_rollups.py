"""Consolidation's summaries and syntheses never push specific turns and memories out (issue 21 item 8)."""

from __future__ import annotations

from typing import Any

from memstack.domain.retrieval.pipeline import Retriever
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
    # Moved below them by stage 8, or ranked there already by its own evidence.
    assert moved.stages.get("rollup_from", moved.score) >= moved.score


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
    # The summary (nothing it was built from was found) ranks by its own ranks, weighed as a
    # memory's second view of its turns: here below the specific hits. The synthesis, a second
    # rollup, is not in the evidence rankings at all: it waits below every specific hit, with a
    # score no higher than theirs.
    assert kinds == [None, None, None, "summary", "synthesis"]
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


def _search_with(service: MemoryService, query: str, top_k: int, **config: Any) -> SearchResult:
    retriever = Retriever(service.store, service.embedder, service.retriever.config.model_copy(update=config))
    return retriever.search(SearchRequest(tenant=T, user_id=U, query=query, reference_time=REF, top_k=top_k))


def test_summaries_do_not_take_the_evidence_places_in_the_candidate_pool(service: MemoryService) -> None:
    # Three rollups say the query's words more often than the two specific memories: fused record by
    # record they would fill a pool of three, and the evidence would never be seen.
    rollups = [
        summary(service, f"pottery class clay bowl glaze pottery clay glaze {n}", [f"s{n}"], kind=kind)
        for n, kind in (("one", "summary"), ("two", "synthesis"), ("three", "summary"))
    ]
    evidence = put(
        service,
        record(service, "The user made a clay bowl at the pottery class", "m1"),
        record(service, "The user chose a green glaze", "m2"),
        *rollups,
    )[:2]
    hits = _search_with(service, QUERY, top_k=3, candidate_pool=3).hits
    ids = [h.record.id for h in hits]
    assert all(e.id in ids for e in evidence), [h.record.content for h in hits]
    # At most one rollup among the specific hits, as before.
    assert sum(1 for h in hits if h.record.metadata.get("consolidation")) <= 1


def test_further_summaries_are_still_found_when_nothing_else_is(service: MemoryService) -> None:
    put(
        service,
        summary(service, "pottery class clay bowl glaze", ["s1"]),
        summary(service, "pottery clay glaze kiln", ["s2"], kind="synthesis"),
    )
    hits = _search_with(service, QUERY, top_k=5, candidate_pool=3).hits
    assert len(hits) == 2


def test_a_summary_never_swallows_a_turn_it_cites(service: MemoryService) -> None:
    # A memory made from a turn merges the turn into itself (stage 6); a summary citing the turn last
    # restates twenty turns in general words, not that turn's fact: the turn stays a result.
    turn, _ = put(
        service,
        record(service, "I made a clay bowl at the pottery class", "m3", tier=Tier.STM),
        summary(service, "pottery class clay bowl glaze kiln pottery clay glaze", ["m1", "m2", "m3"]),
    )
    hits = search(service, QUERY, top_k=10).hits
    assert turn.id in [h.record.id for h in hits]


def test_a_rollup_whose_sources_were_found_ranks_below_every_specific_hit(service: MemoryService) -> None:
    # The summary found one of its turns (m1): that turn states it specifically, and the summary's
    # other turns (m5, m6) would take the places of the hits below it. It ranks below all of them,
    # not just right after its own turn.
    put(
        service,
        record(service, "I made a clay bowl at the pottery class", "m1", tier=Tier.STM),
        record(service, "The user chose a green glaze", "m2"),
        record(service, "The user's sister lives in Lisbon", "m3"),  # ranked below the summary by its words
    )
    rollup = summary(service, "pottery class clay bowl glaze kiln pottery clay glaze", ["m1", "m5", "m6"])
    put(service, rollup)
    hits = search(service, QUERY, top_k=10).hits
    ids = [h.record.id for h in hits]
    assert len(hits) == 4 and ids[-1] == rollup.id, [h.record.content for h in hits]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_a_rollup_whose_sources_were_not_found_keeps_its_place(service: MemoryService) -> None:
    # Its turns are gone from the short-term store (or no ranking found them): it is the evidence left.
    unrelated, _ = put(
        service,
        record(service, "The user's sister lives in Lisbon", "m8"),
        record(service, "The user likes a green glaze", "m2"),
    )
    rollup = summary(service, "pottery class clay bowl glaze kiln pottery clay glaze", ["m5", "m6"])
    put(service, rollup)
    hits = search(service, QUERY, top_k=10).hits
    ids = [h.record.id for h in hits]
    assert ids.index(rollup.id) < ids.index(unrelated.id), [h.record.content for h in hits]
    assert "rollup_from" not in hits[ids.index(rollup.id)].stages
