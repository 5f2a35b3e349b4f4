"""Stage 2's exact path: below ``exact_vector_below`` memories it ranks every full vector.

The records' coarse vectors are unrelated to their full ones, so the two-stage
path (the coarse prefix picks candidates) and the exact path disagree: a test
that passed with stage 2 not wired to ``ExactVectors`` would be wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.vectors import coarse_prefix, normalise
from memstack.models import MemoryFilters, MemoryRecord, Tier
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put

N = 300


def _unit(rng: np.random.Generator, dim: int) -> list[float]:
    return normalise(rng.standard_normal(dim).astype(np.float32)).tolist()


@pytest.fixture
def stored(service: MemoryService) -> list[MemoryRecord]:
    rng = np.random.default_rng(5)
    full_dim, coarse_dim = service.settings.embedding.embedding_dim, service.settings.embedding.coarse_dim
    records = [
        MemoryRecord(
            tenant=T,
            user_id=U,
            content=f"memory {i}",
            source_ids=[f"m{i}"],
            tier=Tier.LTM if i % 3 else Tier.STM,
            event_time=REF,
            embedding_full=_unit(rng, full_dim),
            embedding_coarse=_unit(rng, coarse_dim),
        )
        for i in range(N)
    ]
    other = MemoryRecord(  # another user's memory, the query's exact match: never a hit
        tenant=T, user_id="u2", content="x", source_ids=["o"], event_time=REF,
        embedding_full=records[0].embedding_full, embedding_coarse=records[0].embedding_coarse,
    )  # fmt: skip
    put(service, *records)
    service.store.put([other])
    return records


def _brute(records: list[MemoryRecord], q: np.ndarray, k: int, tier: Tier | None) -> list[str]:
    pool = [r for r in records if tier is None or r.tier == tier]
    scores = np.array([r.embedding_full for r in pool], dtype=np.float32) @ q
    return [pool[i].id for i in np.argsort(-scores, kind="stable")[:k]]


def _retriever(service: MemoryService, **update: int) -> Retriever:
    config = service.settings.retrieval.model_copy(update={"vector_candidates": 20, **update})
    return Retriever(service.store, service.embedder, config)


@pytest.mark.parametrize("tier", [None, Tier.LTM])
def test_below_the_size_stage_two_is_the_exact_full_vector_top_k(
    service: MemoryService, stored: list[MemoryRecord], tier: Tier | None
) -> None:
    rng = np.random.default_rng(9)
    retriever = _retriever(service, exact_vector_below=N + 1)
    for _ in range(5):
        q = np.asarray(_unit(rng, service.settings.embedding.embedding_dim), dtype=np.float32)
        req = SearchRequest(tenant=T, user_id=U, query="q", filters=MemoryFilters(tier=tier))
        got = retriever.vector_stage(req, q)
        assert [h.id for h in got] == _brute(stored, q, 20, tier)
        assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)


def test_at_the_size_or_switched_off_stage_two_is_two_stage(
    service: MemoryService, stored: list[MemoryRecord]
) -> None:
    rng = np.random.default_rng(11)
    q = np.asarray(_unit(rng, service.settings.embedding.embedding_dim), dtype=np.float32)
    req = SearchRequest(tenant=T, user_id=U, query="q")
    exact = [h.id for h in _retriever(service, exact_vector_below=N + 1).vector_stage(req, q)]
    assert exact == _brute(stored, q, 20, None)
    # The two-stage answer: the 20 best by coarse cosine, ranked by full cosine.
    coarse_q = coarse_prefix(q, service.settings.embedding.coarse_dim)
    by_coarse = np.array([r.embedding_coarse for r in stored], dtype=np.float32) @ coarse_q
    picked = [stored[i] for i in np.argsort(-by_coarse, kind="stable")[:20]]
    expected = _brute(picked, q, 20, None)
    assert expected != exact  # unrelated coarse vectors: the two paths must disagree
    for below in (N, 0):  # the user has N memories: N is not below; 0 turns it off
        assert [h.id for h in _retriever(service, exact_vector_below=below).vector_stage(req, q)] == expected
