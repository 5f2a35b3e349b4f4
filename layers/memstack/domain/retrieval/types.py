"""The retrieval pipeline's configuration, request and answer types."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstack.domain.retrieval.calibration import DEFAULT_SCORE_MODEL, ScoreModel
from memstack.domain.retrieval.units import FieldWeights
from memstack.models import MemoryFilters, MemoryRecord


@dataclass(frozen=True)
class RetrievalConfig:
    """Every parameter of the eight stages (``factory.retrieval_config`` fills it from Settings)."""

    # stage 2: Matryoshka two-stage vector search
    vector_candidates: int = 200
    coarse_dim: int = 128
    # stage 3: BM25
    bm25_candidates: int = 200
    #: pseudo-relevance feedback: terms added to a second BM25 query (0 turns it off; 10 when on)
    prf_terms: int = 0
    #: the best first-query hits the terms are drawn from
    prf_docs: int = 5
    #: a term must occur in this many of them
    prf_min_docs: int = 2
    # stage 4: weighted RRF
    rrf_k: int = 5
    weight_vector: float = 0.3
    weight_bm25: float = 0.7
    #: RRF weight of the feedback query's ranking
    weight_prf: float = 0.3
    #: weights of the memory field (LTM memories whose turn is also a candidate: ``units``)
    weight_vector_memory: float = 0.3
    weight_bm25_memory: float = 0.1
    #: fused candidates carried into stages 5-7 (loaded as records)
    candidate_pool: int = 100
    #: the calibrated score of stage 4 (a probability of relevance)
    score_model: ScoreModel = DEFAULT_SCORE_MODEL
    # stage 5: temporal boost
    temporal_window_days: float = 30.0
    temporal_blend: float = 0.6
    #: a memory dated up to this long after the query's window still counts as inside it
    temporal_report_lag_days: float = 7.0
    consolidated_stm_weight: float = 0.5
    # stage 6: near-duplicate removal
    dedup_threshold: float = 0.99
    #: a raw turn (tier stm) and a current LTM memory made from it are one fact: keep the memory
    dedup_by_source: bool = True
    # stage 7: rerank
    rerank_candidates: int = 50
    # stage 8: history
    history_max_versions: int = 20
    #: raw turns whose memories were all replaced rank below current memories (non-history queries)
    superseded_turns_last: bool = True

    @property
    def field_weights(self) -> FieldWeights:
        """The RRF weight of each ranking in each field (the feedback query's follows BM25's ratio)."""
        memory_prf = self.weight_prf * self.weight_bm25_memory / self.weight_bm25 if self.weight_bm25 else 0.0
        return FieldWeights(
            turns={"vector": self.weight_vector, "bm25": self.weight_bm25, "bm25_prf": self.weight_prf},
            memories={
                "vector": self.weight_vector_memory,
                "bm25": self.weight_bm25_memory,
                "bm25_prf": memory_prf,
            },
        )


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
    #: only results scoring at least this (the calibrated score, or the reranker's when one ran)
    min_score: float | None = None


@dataclass
class SearchHit:
    record: MemoryRecord
    score: float
    #: the score of every stage that touched this hit (``explain``)
    stages: dict[str, float] = field(default_factory=dict)
    #: True for an older version returned by the history stage (not the current fact)
    superseded: bool = False


@dataclass
class SearchResult:
    hits: list[SearchHit]
    #: stages that failed and were skipped (the request still succeeded), e.g. ["rerank"]
    degraded: list[str] = field(default_factory=list)
    #: milliseconds per stage, plus "total"
    stage_durations: dict[str, float] = field(default_factory=dict)
    #: what each stage did: "ok", or "skipped: <why>", or "failed: <why>"
    stage_status: dict[str, str] = field(default_factory=dict)
    #: stage 1's reading of the query (temporal window, history intent)
    analysis: dict[str, Any] = field(default_factory=dict)
