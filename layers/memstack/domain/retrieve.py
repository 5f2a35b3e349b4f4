"""Retrieval: hybrid BM25 + vector search fused by weighted RRF, filtered by tenant and user."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from memstack.domain.scoring import weighted_rrf
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, MemoryRecord, ScoredId
from memstack.ports.embedder import Embedder
from memstack.ports.reranker import Reranker
from memstack.ports.store import MemoryStore


@dataclass(frozen=True)
class RetrievalConfig:
    vector_candidates: int = 200
    bm25_candidates: int = 200
    rrf_k: int = 10
    weight_vector: float = 0.7
    weight_bm25: float = 0.3
    coarse_dim: int = 128


@dataclass
class SearchRequest:
    tenant: str
    user_id: str
    query: str
    top_k: int = 10
    filters: MemoryFilters = field(default_factory=MemoryFilters)
    reference_time: datetime | None = None
    explain: bool = False
    include_history: bool = False


@dataclass
class SearchHit:
    record: MemoryRecord
    score: float
    stages: dict[str, float] = field(default_factory=dict)


@dataclass
class SearchResult:
    hits: list[SearchHit]
    degraded: list[str] = field(default_factory=list)
    stage_durations: dict[str, float] = field(default_factory=dict)


class Retriever:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        config: RetrievalConfig,
        reranker: Reranker | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.reranker = reranker

    def vector_stage(self, req: SearchRequest, query_vec: np.ndarray) -> list[ScoredId]:
        """Matryoshka two-stage search: coarse prefix candidates, full-dimension rescoring."""
        cfg = self.config
        coarse = coarse_prefix(query_vec, cfg.coarse_dim)
        candidates = self.store.vector_search(
            req.tenant, req.user_id, coarse, cfg.vector_candidates, req.filters
        )
        if not candidates:
            return []
        full = self.store.embeddings(req.tenant, req.user_id, [c.id for c in candidates])
        rescored = [
            ScoredId(id=c.id, score=float(np.dot(full[c.id], query_vec))) for c in candidates if c.id in full
        ]
        rescored.sort(key=lambda s: s.score, reverse=True)
        return rescored

    def search(self, req: SearchRequest) -> SearchResult:
        durations: dict[str, float] = {}
        t0 = time.perf_counter()
        query_vec = self.embedder.embed([req.query])[0]
        vector = self.vector_stage(req, query_vec)
        t1 = time.perf_counter()
        durations["vector"] = (t1 - t0) * 1000
        bm25 = self.store.bm25_search(
            req.tenant, req.user_id, req.query, self.config.bm25_candidates, req.filters
        )
        t2 = time.perf_counter()
        durations["bm25"] = (t2 - t1) * 1000
        fused = weighted_rrf(
            {"vector": vector, "bm25": bm25},
            {"vector": self.config.weight_vector, "bm25": self.config.weight_bm25},
            self.config.rrf_k,
        )
        ranked = sorted(fused.items(), key=lambda kv: kv[1], reverse=True)[: req.top_k]
        records = self.store.get_many(req.tenant, req.user_id, [i for i, _ in ranked])
        vec_scores = {s.id: s.score for s in vector}
        bm25_scores = {s.id: s.score for s in bm25}
        hits = [
            SearchHit(
                record=records[i],
                score=score,
                stages={"vector": vec_scores.get(i, 0.0), "bm25": bm25_scores.get(i, 0.0), "rrf": score},
            )
            for i, score in ranked
            if i in records
        ]
        durations["fusion"] = (time.perf_counter() - t2) * 1000
        return SearchResult(hits=hits, stage_durations=durations)
