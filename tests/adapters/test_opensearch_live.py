"""Live checks of what only a real cluster can show: one _msearch round trip and a zero-downtime reindex.

Runs when ``OPENSEARCH_URL`` is set (for example ``http://localhost:9200``);
no OpenSearch server can be installed on the build machines, so otherwise
every test here is skipped with that reason. The full store contract runs
live from ``tests/conformance`` under the same variable.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, MemoryRecord

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get("OPENSEARCH_URL"),
        reason="OPENSEARCH_URL is not set: no OpenSearch cluster to run the live tests on",
    ),
]

EMB = HashingEmbedder(64)


@pytest.fixture
def store() -> Iterator[object]:
    from memstack.adapters.opensearch.client import build_client
    from memstack.adapters.opensearch.store import OpenSearchMemoryStore

    client = build_client(
        os.environ["OPENSEARCH_URL"], service=os.environ.get("OPENSEARCH_SIGV4_SERVICE") or None
    )
    s = OpenSearchMemoryStore.managed(
        client,
        alias=f"memstack-live-{uuid.uuid4().hex[:8]}",
        embedding_dim=64,
        coarse_dim=16,
        refresh="true",
        engine=os.environ.get("OPENSEARCH_ENGINE", "faiss"),
    )
    s.ensure_index()
    yield s
    s.drop_index()
    s.close()


def rec(content: str, minutes: int) -> MemoryRecord:
    vec = EMB.embed([content])[0]
    return MemoryRecord(
        tenant="t1",
        user_id="u1",
        content=content,
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes),
        embedding_full=vec.tolist(),
        embedding_coarse=coarse_prefix(vec, 16).tolist(),
    )


def test_hybrid_candidates_agree_with_the_separate_searches(store) -> None:  # type: ignore[no-untyped-def]
    store.put([rec(t, i) for i, t in enumerate(["tea with lemon", "coffee with milk", "green tea leaves"])])
    q = coarse_prefix(EMB.embed(["tea"])[0], 16)
    bm25, knn = store.hybrid_candidates("t1", "u1", "tea", q, 5, 5, MemoryFilters())
    assert [h.id for h in bm25] == [h.id for h in store.bm25_search("t1", "u1", "tea", 5, MemoryFilters())]
    assert [h.id for h in knn] == [h.id for h in store.vector_search("t1", "u1", q, 5, MemoryFilters())]
    assert len(bm25) == 2 and len(knn) == 3
    assert all(-1.0 <= h.score <= 1.0 for h in knn)


def test_reindex_keeps_every_record_reachable_through_the_alias(store) -> None:  # type: ignore[no-untyped-def]
    records = [rec(f"memory {i}", i) for i in range(12)]
    store.put(records)
    assert store.reindex().endswith("-v2")
    listed, _ = store.list("t1", "u1", MemoryFilters(), 50)
    assert {r.id for r in listed} == {r.id for r in records}
    got = store.embeddings("t1", "u1", [records[0].id])
    np.testing.assert_allclose(got[records[0].id], records[0].embedding_full, rtol=1e-6)
