"""Stage 2's and stage 3's first queries, and the evidence's term counts, in one round trip.

Stage 2 wants the coarse vector candidates, stage 3 the BM25 ranking of the
request's text, and the search's evidence the term counts of that text. A store
with ``HybridCandidates`` (``HybridWithTermCounts`` for the counts too) answers
them together: OpenSearch in one ``_msearch`` instead of three searches. Stage 2
asks it and leaves the BM25 ranking and the counts on the ``Search``
(``Prefetched``); stage 3 and the evidence take them only when they would have
asked the very same question, and otherwise ask the store as before. A store
with ``Bm25WithTermCounts`` (PostgreSQL) sends the counts with stage 3's first
ranking instead: one statement for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from memstack.models import MemoryFilters, ScoredId
from memstack.ports.store import (
    Bm25WithTermCounts,
    HybridCandidates,
    HybridWithTermCounts,
    TermCounts,
    implements,
)

if TYPE_CHECKING:
    from memstack.domain.retrieval.stage import Search


@dataclass(frozen=True)
class Prefetched:
    """What stage 2 (or stage 3's first query) received for later: the BM25 ranking of ``query`` (its
    ``k``, its ``filters``), and the query's term counts when the store sent them too."""

    query: str
    k: int
    filters: MemoryFilters
    bm25: Sequence[ScoredId]
    counts: TermCounts | None


def coarse_candidates(search: Search, coarse: np.ndarray) -> Sequence[ScoredId]:
    """Stage 2's coarse hits (``vector_search``'s); from a store with the extra, with stage 3's first
    BM25 ranking (and the term counts) in the same round trip, left on ``search.prefetched``."""
    store, req, cfg = search.store, search.req, search.config
    k, query = cfg.bm25_candidates, req.query
    args = (req.tenant, req.user_id, query, coarse, k, cfg.vector_candidates, search.filters)
    counts: TermCounts | None = None
    if implements(store, HybridWithTermCounts):
        bm25, found, counts = cast(HybridWithTermCounts, store).hybrid_candidates_with_counts(*args)
    elif implements(store, HybridCandidates):
        bm25, found = cast(HybridCandidates, store).hybrid_candidates(*args)
    else:
        return store.vector_search(req.tenant, req.user_id, coarse, cfg.vector_candidates, search.filters)
    search.prefetched = Prefetched(query, k, search.filters, bm25, counts)
    return found


def bm25_ranking(search: Search, query: str, k: int) -> Sequence[ScoredId] | None:
    """The BM25 ranking stage 2 received for this query, k and the search's filters (None: ask the store)."""
    got = search.prefetched
    if got is None or (got.query, got.k, got.filters) != (query, k, search.filters):
        return None
    return got.bm25


def bm25_with_counts(search: Search, query: str, k: int) -> Sequence[ScoredId] | None:
    """The BM25 ranking of the request's own text with its term counts in the same round trip, from a
    store with ``Bm25WithTermCounts`` (the counts left on ``search.prefetched`` for the evidence);
    None for any other store or query (ask the store as before)."""
    store, req = search.store, search.req
    if query != req.query or search.prefetched is not None or not implements(store, Bm25WithTermCounts):
        return None
    bm25, counts = cast(Bm25WithTermCounts, store).bm25_with_counts(
        req.tenant, req.user_id, query, k, search.filters
    )
    search.prefetched = Prefetched(query, k, search.filters, bm25, counts)
    return bm25


def term_counts(search: Search) -> TermCounts:
    """The term counts of the request's query: those stage 2 received, else the store's answer."""
    req, got = search.req, search.prefetched
    if got is not None and got.counts is not None and got.query == req.query:
        return got.counts
    if search.counts is None:
        search.counts = search.store.term_counts(req.tenant, req.user_id, req.query)
    return search.counts
