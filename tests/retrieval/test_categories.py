"""Category affinity: a soft signal of what kind of thing a query asks about."""

from __future__ import annotations

import numpy as np
import pytest
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain.retrieval.category_affinity import DESCRIPTIONS, CategoryPrototypes
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


def test_query_weights_are_a_distribution_peaked_on_the_named_category() -> None:
    embedder = HashingEmbedder(256)
    protos = CategoryPrototypes(embedder)
    q = embedder.embed(["what are her hobbies and activities"])[0]
    p = protos.query_weights(q)
    assert p.shape == (len(DESCRIPTIONS),) and p.sum() == pytest.approx(1.0)
    assert DESCRIPTIONS[int(p.argmax())].startswith("hobbies and activities")
    # A candidate that reads like the hobbies description is closer to this query's categories.
    hobby, money = embedder.embed(["hobbies and activities", "money and finances"])
    a = protos.affinity(p, np.vstack([hobby, money]))
    assert a[0] > a[1]
    assert protos.affinity(p, np.zeros((0, 256))).shape == (0,)


def test_affinity_enters_the_score_only_with_a_weight(service: MemoryService) -> None:
    put(service, record(service, "hobbies and activities: swimming", "a"), record(service, "bank loan", "b"))
    req = SearchRequest(tenant=T, user_id=U, query="her hobbies", top_k=2, reference_time=REF)
    off = Retriever(service.store, service.embedder, RetrievalConfig()).search(req)
    assert all("category" not in h.stages for h in off.hits)
    explained = Retriever(service.store, service.embedder, RetrievalConfig()).search(
        SearchRequest(tenant=T, user_id=U, query="her hobbies", top_k=2, reference_time=REF, explain=True)
    )
    assert all("category" in h.stages for h in explained.hits)
    assert [h.score for h in explained.hits] == [h.score for h in off.hits]
