"""Stage 2: the exact full-vector top-k where the store makes it cheap, else Matryoshka two-stage.

Two-stage: the coarse prefix picks candidates, full-dim cosine ranks them. A store
holding every full vector in memory (``ExactVectors``, the embedded one) ranks
them all instead while the user has fewer than ``exact_vector_below`` memories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import cast

import numpy as np

from memstack.domain.retrieval import hybrid
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pool import full_vectors
from memstack.domain.retrieval.stage import Search
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, ScoredId
from memstack.ports.store import ExactVectors, MemoryStore, RescoredCandidates, implements


class VectorSearch:
    name = "vector"

    def run(self, search: Search) -> str:
        search.query_vec = search.models.embedder.embed([search.req.query])[0]
        search.vector, search.vectors = vector_search(
            search.store,
            search.req,
            search.filters,
            search.query_vec,
            search.config,
            # the store may send stage 3's first query (and the term counts) with the coarse one
            coarse_search=partial(hybrid.coarse_candidates, search),
        )
        return f"ok: {len(search.vector)} candidates"


def vector_search(
    store: MemoryStore,
    req: SearchRequest,
    filters: MemoryFilters,
    query_vec: np.ndarray,
    config: RetrievalConfig,
    coarse_search: Callable[[np.ndarray], Sequence[ScoredId]] | None = None,
) -> tuple[Sequence[ScoredId], dict[str, np.ndarray]]:
    """The ranking (``vector_candidates`` hits, best first), and the full vectors it read by id.

    The pool reuses the vectors; a store that slices them from an index returns none.
    ``coarse_search``: what finds the coarse candidates instead of the store's ``vector_search``
    (called with the coarse query; it asks for ``vector_candidates`` with ``filters``).
    """
    candidates = config.vector_candidates
    if implements(store, ExactVectors) and config.exact_vector_below > 0:
        exact = cast(ExactVectors, store).exact_vector_search(
            req.tenant, req.user_id, query_vec, candidates, filters, below=config.exact_vector_below
        )
        if exact is not None:
            return exact, {}
    coarse = coarse_prefix(query_vec, config.coarse_dim)
    if implements(store, RescoredCandidates):  # a remote store: ranked where the vectors are
        rescored = cast(RescoredCandidates, store).rescored_candidates(
            req.tenant, req.user_id, coarse, np.asarray(query_vec, dtype=np.float32), candidates, filters
        )
        return rescored, {}
    found: Sequence[ScoredId]
    if coarse_search is not None:
        found = coarse_search(coarse)
    else:
        found = store.vector_search(req.tenant, req.user_id, coarse, candidates, filters)
    if not found:
        return [], {}
    ids, matrix, full = full_vectors(store, req.tenant, req.user_id, [c.id for c in found])
    if not ids:
        return [], full
    scores = matrix @ np.asarray(query_vec, dtype=np.float32)
    order = np.argsort(-scores, kind="stable")
    return [
        ScoredId(id=ids[i], score=score)
        for i, score in zip(order.tolist(), scores[order].tolist(), strict=True)
    ], full
