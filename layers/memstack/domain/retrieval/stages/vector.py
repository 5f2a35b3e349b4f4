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

from memstack.domain.chunks import any_passage_id, is_passage_id, passage_owner
from memstack.domain.retrieval import hybrid
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pool import full_vectors
from memstack.domain.retrieval.stage import Search
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, Ranked, ScoredId
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
            return collapse_passages(exact, config.passage_margin), {}
    coarse = coarse_prefix(query_vec, config.coarse_dim)
    if implements(store, RescoredCandidates):  # a remote store: ranked where the vectors are
        rescored = cast(RescoredCandidates, store).rescored_candidates(
            req.tenant, req.user_id, coarse, np.asarray(query_vec, dtype=np.float32), candidates, filters
        )
        return collapse_passages(rescored, config.passage_margin), {}
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
    ranking = [
        ScoredId(id=ids[i], score=score)
        for i, score in zip(order.tolist(), scores[order].tolist(), strict=True)
    ]
    return collapse_passages(ranking, config.passage_margin), full


def collapse_passages(ranking: Sequence[ScoredId], margin: float = 0.0) -> Sequence[ScoredId]:
    """The ranking with each passage hit (``domain/chunks.py``) given to its record: one entry per
    record, at its own cosine or its best passage's less ``margin``, whichever is higher, best
    first; unchanged when it holds no passage."""
    ids = ranking.ids if isinstance(ranking, Ranked) else [h.id for h in ranking]
    if not any_passage_id(ids):
        return ranking
    scores = ranking.scores if isinstance(ranking, Ranked) else np.array([h.score for h in ranking])
    turn = ranking.turn if isinstance(ranking, Ranked) else None
    if margin:
        scores = scores - margin * np.fromiter(map(is_passage_id, ids), dtype=np.float64, count=len(ids))
        order = np.argsort(-scores, kind="stable")
        ids, scores = [ids[i] for i in order.tolist()], scores[order]
        turn = turn[order] if turn is not None else None
    owners = list(map(passage_owner, ids))
    first = dict.fromkeys(owners)  # best first: the first place of each record is its best
    keep = [i for i, owner in enumerate(owners) if first.pop(owner, 0) is None]
    at = np.asarray(keep, dtype=np.int64)
    # The store's rows are those of the passages, not of their records: left out.
    return Ranked([owners[i] for i in keep], scores[at], turn[at] if turn is not None else None)
