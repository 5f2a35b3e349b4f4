"""Stage 3: BM25 (always filtered by tenant and user), and optionally a second, RM3-style feedback query;
then, for a question that asks for several things, dense feedback (``dense_feedback``); last, the turns
around the first hits (``neighbours``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from memstack.domain.retrieval import hybrid
from memstack.domain.retrieval.feedback import expanded_query, expansion_terms
from memstack.domain.retrieval.stage import Search
from memstack.domain.retrieval.stages import dense_feedback, neighbours
from memstack.models import ScoredId
from memstack.ports.store import RankedBm25, implements


class Bm25Search:
    name = "bm25"

    def run(self, search: Search) -> str:
        cfg, req = search.config, search.req
        search.bm25 = bm25_ranking(search, req.query)
        terms: list[str] = []
        if cfg.prf_terms > 0 and cfg.weight_prf > 0 and search.bm25:
            search.prf, terms = feedback_search(search)
        status = f"ok: {len(search.bm25)} candidates" + (
            f"; feedback query (+{len(terms)} terms): {len(search.prf)} candidates" if terms else ""
        )
        if dense_feedback.runs_for(search):
            search.vector_prf = dense_feedback.feedback_ranking(search)
            status += f"; dense feedback: {len(search.vector_prf)} candidates"
        if neighbours.runs_for(search):
            search.neighbours = neighbours.neighbour_ranking(search)
            if search.neighbours:  # none: turns ingested one per add, or memories only
                status += f"; neighbour turns: {len(search.neighbours)} candidates"
        return status


def feedback_search(search: Search) -> tuple[Sequence[ScoredId], list[str]]:
    """The feedback query's ranking and the terms it added to the query (none: no second query)."""
    cfg, req, store = search.config, search.req, search.store
    head = search.bm25[: cfg.prf_docs]
    records = store.get_many(req.tenant, req.user_id, [h.id for h in head])
    feedback = [
        (records[h.id].search_text or records[h.id].content, h.score) for h in head if h.id in records
    ]
    terms = expansion_terms(req.query, feedback, cfg.prf_terms, cfg.prf_min_docs)
    if not terms:
        return [], []
    query = expanded_query(req.query, terms)
    return bm25_ranking(search, query), terms


def bm25_ranking(search: Search, query: str) -> Sequence[ScoredId]:
    """The store's BM25 top ``bm25_candidates``, as columns from a store that has them (or as stage 2
    received it, when the store sent this query with its own: ``hybrid``)."""
    store, req, k = search.store, search.req, search.config.bm25_candidates
    received = hybrid.bm25_ranking(search, query, k)
    if received is None:  # a store that sends the evidence's term counts with this ranking
        received = hybrid.bm25_with_counts(search, query, k)
    if received is not None:
        return received
    if implements(store, RankedBm25):
        return cast(RankedBm25, store).bm25_ranked(req.tenant, req.user_id, query, k, search.filters)
    return store.bm25_search(req.tenant, req.user_id, query, k, search.filters)
