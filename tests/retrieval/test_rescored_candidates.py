"""Stage 2 on a store that ranks the coarse hits by their full vectors itself (one round trip)."""

from __future__ import annotations

import numpy as np
from memstack.domain.retrieval.stages.vector import vector_search
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import MemoryFilters, ScoredId
from memstack.ports.store import RescoredCandidates
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


class RanksInTheStore:
    """Only ``rescored_candidates``: stage 2 must neither read vectors nor rank them itself."""

    def __init__(self, inner: MemoryService) -> None:
        self.inner = inner.store
        self.calls: list[np.ndarray] = []

    def rescored_candidates(
        self,
        tenant: str,
        user_id: str,
        query_coarse: np.ndarray,
        query_full: np.ndarray,
        k: int,
        filters: MemoryFilters,
    ) -> list[ScoredId]:
        self.calls.append(query_full)
        hits = self.inner.vector_search(tenant, user_id, query_coarse, k, filters)
        full = self.inner.embeddings(tenant, user_id, [h.id for h in hits])
        scored = [ScoredId(id=h.id, score=float(full[h.id] @ query_full)) for h in hits if h.id in full]
        return sorted(scored, key=lambda h: -h.score)

    def vector_search(self, *args: object) -> list[ScoredId]:
        raise AssertionError("a second read: vector_search")

    def embeddings(self, *args: object) -> dict[str, np.ndarray]:
        raise AssertionError("a second read: embeddings")


def test_stage_two_takes_the_stores_ranking_and_ranks_the_same(service: MemoryService) -> None:
    put(
        service,
        record(service, "I adopted a greyhound called Pixel", "m1"),
        record(service, "My sister lives in Lisbon", "m2"),
        record(service, "Pixel the greyhound hates rain", "m3"),
    )
    req = SearchRequest(tenant=T, user_id=U, query="greyhound", reference_time=REF)
    query = service.embedder.embed(["greyhound"])[0]
    # The embedded store's own two-stage path (not its exact one) is the reference.
    config = service.settings.retrieval.model_copy(update={"vector_candidates": 10, "exact_vector_below": 0})
    store = RanksInTheStore(service)
    assert isinstance(store, RescoredCandidates)

    one, vectors = vector_search(store, req, MemoryFilters(), query, config)  # type: ignore[arg-type]
    two, _ = vector_search(service.store, req, MemoryFilters(), query, config)

    assert len(store.calls) == 1
    np.testing.assert_array_equal(store.calls[0], query)  # the full query vector, not its prefix
    assert [(h.id, round(h.score, 6)) for h in one] == [(h.id, round(h.score, 6)) for h in two]
    assert len(one) == 3 and vectors == {}
