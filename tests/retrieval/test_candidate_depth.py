"""How deep stages 2 and 3 read: 400 candidates each by default (chosen on LoCoMo and BEAM together)."""

from __future__ import annotations

from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


def test_each_ranking_reads_400_candidates_by_default(service: MemoryService) -> None:
    # More memories than the old depth (200) and the new one (400), every one matching the query.
    put(service, *(record(service, f"a walk by the lake, day {i}", f"s{i}") for i in range(450)))
    req = SearchRequest(tenant=T, user_id=U, query="walk by the lake", top_k=10, reference_time=REF)
    result = Retriever(service.store, service.embedder, RetrievalConfig()).search(req)
    assert result.stage_status["vector"] == "ok: 400 candidates"
    assert result.stage_status["bm25"] == "ok: 400 candidates"
    shallow = RetrievalConfig(vector_candidates=200, bm25_candidates=200)
    assert Retriever(service.store, service.embedder, shallow).search(req).stage_status["bm25"] == (
        "ok: 200 candidates"
    )
