"""How much of the exact full-dimension top-k the vector stage finds (``memstack bench search``).

The vector stage (stage 2) ranks the user's memories by the full vector only
among the candidates its coarse pass (the Matryoshka prefix) picked, unless the
store ranks them all exactly. This compares, query by query, its top ``k``
with the exact top ``k`` by full-dimension cosine over every memory the same
search may see, brute force in numpy: recall = the share of the exact top
``k`` the stage returned. It costs one full scan per query and runs outside
the timed searches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memstack.bench.stats import median
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import MemoryFilters
from memstack.service import MemoryService


def _exact_rows(service: MemoryService, tenant: str, user: str) -> tuple[list[str], np.ndarray] | None:
    """(ids, full vectors) of every memory a plain search may see; None off the embedded store."""
    index = getattr(service.store, "index", None)
    if not callable(index):
        return None
    view = index(tenant, user)
    allowed = view.columns.mask(MemoryFilters()) & view.has_full[: view.size]
    rows = np.flatnonzero(allowed)
    return [view.ids[i] for i in rows.tolist()], view.full[rows]


def vector_recall(
    service: MemoryService, tenant: str, user: str, queries: Sequence[str], k: int = 10
) -> tuple[float, float] | None:
    """(median, mean) over ``queries`` of |stage 2's top k ∩ the exact full-dim top k| / k.

    The mean is the figure to read: the median is 1.0 as soon as most queries are perfect.
    """
    exact = _exact_rows(service, tenant, user)
    if exact is None:
        return None
    ids, full = exact
    if not ids:
        return None
    recalls = []
    for query in queries:
        q = service.embedder.embed([query])[0]
        scores = full @ np.asarray(q, dtype=np.float32)
        n = min(k, len(ids))
        best = np.argpartition(-scores, n - 1)[:n]
        want = {ids[i] for i in best.tolist()}
        req = SearchRequest(tenant=tenant, user_id=user, query=query, top_k=k)
        got = {hit.id for hit in service.retriever.vector_stage(req, q)[:n]}
        recalls.append(len(want & got) / n)
    return round(median(recalls), 4), round(sum(recalls) / len(recalls), 4)
