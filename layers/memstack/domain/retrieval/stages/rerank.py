"""Stage 7: a cross-encoder rescores the head of the pool (skipped when none is configured).

A reranker outage never fails the search: the fused order is kept and the
stage is listed in ``degraded``.
"""

from __future__ import annotations

import logging

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval.stage import Search
from memstack.models import MemoryRecord
from memstack.ports.reranker import Reranker

logger = logging.getLogger(__name__)


class Rerank:
    name = "rerank"

    def run(self, search: Search) -> str:
        reranker = search.models.reranker
        if reranker is None:
            return "skipped: no reranker configured"
        req, pool, limit = search.req, search.pool, search.config.rerank_candidates
        head = pool.order[:limit]
        records = pool.records(search.store, req.tenant, req.user_id, head)
        head = [j for j in head if j in records]  # a record erased since the pool was read is gone
        try:
            scores = rerank(reranker, req.query, [records[j] for j in head])
        except Exception as exc:  # a reranker outage must never fail the search
            search.degraded.append(self.name)
            logger.warning("rerank failed; fused order kept", extra={"error": repr(exc)})
            return f"failed: {type(exc).__name__}: {exc}"
        for j, score in zip(head, scores, strict=True):
            pool.put(col.RERANK, j, score)
            pool.score[j] = score
        head = sorted(head, key=pool.score.__getitem__, reverse=True)
        pool.order = head + pool.order[limit:]
        pool.ranked(self.name, sort=False)
        return f"ok: {reranker.name}"


def rerank(reranker: Reranker, query: str, records: list[MemoryRecord]) -> list[float]:
    """The cross-encoder's score of each record's text for the query.

    Raises whatever the reranker raises; the stage records it as degraded.
    """
    if not records:
        return []
    passages = [f"{r.speaker}: {r.content}" if r.speaker else r.content for r in records]
    scores = reranker.rerank(query, passages)
    if len(scores) != len(records):
        raise ValueError(f"reranker returned {len(scores)} scores for {len(records)} passages")
    return [float(score) for score in scores]
