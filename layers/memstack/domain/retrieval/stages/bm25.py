"""Stage 3: BM25 (always filtered by tenant and user), and optionally a second, RM3-style feedback query."""

from __future__ import annotations

from memstack.domain.retrieval.feedback import expanded_query, expansion_terms
from memstack.domain.retrieval.stage import Search
from memstack.models import ScoredId


class Bm25Search:
    name = "bm25"

    def run(self, search: Search) -> str:
        cfg, req = search.config, search.req
        search.bm25 = search.store.bm25_search(
            req.tenant, req.user_id, req.query, cfg.bm25_candidates, search.filters
        )
        terms: list[str] = []
        if cfg.prf_terms > 0 and cfg.weight_prf > 0 and search.bm25:
            search.prf, terms = feedback_search(search)
        return f"ok: {len(search.bm25)} candidates" + (
            f"; feedback query (+{len(terms)} terms): {len(search.prf)} candidates" if terms else ""
        )


def feedback_search(search: Search) -> tuple[list[ScoredId], list[str]]:
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
    return store.bm25_search(req.tenant, req.user_id, query, cfg.bm25_candidates, search.filters), terms
