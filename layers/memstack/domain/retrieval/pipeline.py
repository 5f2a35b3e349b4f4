"""The retrieval pipeline of docs/architecture.md: ``stages.PIPELINE``, run in order on every search.

1 query analysis → 2 Matryoshka vector search → 3 BM25 → 4 weighted RRF →
5 temporal boost → 6 near-duplicate removal → 7 rerank → 8 history.
Each stage is a module of ``memstack.domain.retrieval.stages`` (``stage.Stage``);
the retriever times each, records the status line it returns in
``stage_status``, and lists a stage that failed (only the reranker is allowed
to) in ``degraded``. Each hit records each stage's score (``columns``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval import hybrid
from memstack.domain.retrieval.category_affinity import CategoryPrototypes
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.evidence import DEFAULT_EVIDENCE_MODEL, idf_coverage
from memstack.domain.retrieval.stage import Models, Search, Stage
from memstack.domain.retrieval.stages import PIPELINE
from memstack.domain.retrieval.stages.vector import vector_search
from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.models import ScoredId
from memstack.ports.embedder import Embedder
from memstack.ports.reranker import Reranker
from memstack.ports.store import MemoryStore, pinned

#: configured at the edges (``memstack.logs``); records reach the ``memstack`` logger
logger = logging.getLogger(__name__)


class Retriever:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        config: RetrievalConfig,
        reranker: Reranker | None = None,
        stages: Sequence[Stage] = PIPELINE,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.reranker = reranker
        self.categories = CategoryPrototypes(embedder)
        self.stages = tuple(stages)

    def vector_stage(self, req: SearchRequest, query_vec: np.ndarray) -> Sequence[ScoredId]:
        """Stage 2 alone (the vector-only baseline of the evaluation uses it)."""
        ranking, _ = vector_search(self.store, req, req.filters, query_vec, self.config)
        return ranking

    def search(self, req: SearchRequest) -> SearchResult:
        # Every read of this search sees one state of the user's memories (one
        # partition snapshot on DynamoDB, one generation check on the embedded store).
        search = Search(
            req=req,
            store=pinned(self.store, req.tenant, req.user_id),
            config=self.config,
            models=Models(self.embedder, self.categories.of(req.categories), self.reranker),
        )
        status: dict[str, str] = {}
        durations: dict[str, float] = {}
        started = time.perf_counter()
        for stage in self.stages:
            start = time.perf_counter()
            try:
                status[stage.name] = stage.run(search)
            finally:
                durations[stage.name] = _ms(start)
        evidence = _evidence(search)
        durations["total"] = _ms(started)
        analysis = search.query
        logger.info(
            "memory_retrieval",
            extra={
                "event": "memory_retrieval",
                "stage_durations": durations,
                "hits": len(search.hits),
                "degraded": search.degraded,
                "temporal_window": bool(analysis.window),
                "history": search.history,
            },
        )
        return SearchResult(
            hits=search.hits,
            degraded=search.degraded,
            stage_durations=durations,
            stage_status=status,
            analysis=analysis.as_dict(),
            evidence=evidence,
        )


def _evidence(search: Search) -> float:
    """The search's ``evidence`` (0 when nothing was pooled); with explain, on each hit too."""
    if search.evidence_cosine is None:
        return 0.0
    req = search.req
    coverage = idf_coverage(hybrid.term_counts(search))
    evidence = DEFAULT_EVIDENCE_MODEL.probability(search.evidence_cosine, coverage)
    if req.explain:
        for hit in search.hits:
            hit.stages[col.QUERY_IDF_COVERAGE] = coverage
            hit.stages[col.EVIDENCE] = evidence
    return evidence


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
