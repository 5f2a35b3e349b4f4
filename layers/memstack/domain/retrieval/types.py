"""The retrieval pipeline's configuration, request and answer types."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import Field

from memstack.domain.retrieval.calibration import ScoreModel
from memstack.domain.retrieval.units import FieldWeights
from memstack.domain.scoring import RrfWeights
from memstack.domain.vectors import Matryoshka
from memstack.models import MemoryFilters, MemoryRecord


class RetrievalConfig(Matryoshka, RrfWeights):
    """Every parameter of the eight stages: the ``retrieval`` section of ``Settings`` (``MEMSTACK_*``).

    Defaults are from the Cognis paper unless measured better (docs/retrieval.md).
    ``coarse_dim`` (stage 2) and ``rrf_k`` / ``weight_vector`` / ``weight_bm25``
    (stage 4) are shared with the sections that cut and fuse the same way.
    """

    # stage 2: Matryoshka two-stage vector search
    vector_candidates: int = Field(200, ge=1, le=10_000)
    # A store holding the full vectors in memory (embedded) ranks them all below this size: the
    # exact top-k, where the 128-d prefix of a model not trained for it misses some (200
    # candidates: MiniLM finds 0.85 of the top 10 at 10,000 memories, hashing 0.45;
    # docs/retrieval.md, "Exact vector search"). 0 keeps the two-stage path at every size.
    exact_vector_below: int = Field(
        200_000,
        ge=0,
        le=10_000_000,
        description="memories per user below which stage 2 ranks every full vector (embedded store)",
    )
    # stage 3: BM25
    bm25_candidates: int = Field(200, ge=1, le=10_000)
    # Off by default: +0.003 recall@10 / +0.007 @25 with extraction on LoCoMo, for a second BM25
    # query that made each search ~1.5x slower (docs/retrieval.md); MEMSTACK_PRF_TERMS=10 turns it on.
    prf_terms: int = Field(0, ge=0, le=50, description="terms pseudo-relevance feedback adds (0: off)")
    prf_docs: int = Field(5, ge=1, le=50, description="first BM25 hits the feedback terms come from")
    prf_min_docs: int = Field(2, ge=1, le=50, description="feedback hits a term must occur in")
    # stage 4: weighted RRF (rrf_k, weight_vector, weight_bm25: RrfWeights)
    weight_prf: float = Field(0.3, ge=0.0, description="RRF weight of the BM25 feedback query's ranking")
    # A memory whose turn is a candidate too is a second view of it: its embedding adds much,
    # its BM25 little (LoCoMo, extraction on: docs/retrieval.md, "Evidence units").
    weight_vector_memory: float = Field(0.3, ge=0.0, description="RRF weight of a memory's vector rank")
    weight_bm25_memory: float = Field(0.1, ge=0.0, description="RRF weight of a memory's BM25 rank")
    candidate_pool: int = Field(
        100,
        ge=1,
        le=10_000,
        alias="retrieval_pool",
        description="fused candidates carried into the temporal/dedup/rerank stages",
    )
    #: the calibrated score of stage 4 (a probability of relevance): MEMSTACK_SCORE_*
    score_model: ScoreModel = Field(default_factory=ScoreModel)
    # stage 5: temporal boost
    temporal_window_days: float = Field(30.0, gt=0.0)
    temporal_blend: float = Field(0.6, ge=0.0, le=1.0, description="share of the fused score in the blend")
    temporal_report_lag_days: float = Field(
        7.0, ge=0.0, le=365.0, description="days after a query's window a memory still counts as inside it"
    )
    consolidated_stm_weight: float = Field(
        0.5, ge=0.0, le=1.0, description="score factor for STM already consolidated (0 hides it)"
    )
    # stage 6: near-duplicate removal
    dedup_threshold: float = Field(0.99, gt=0.0, le=1.0)
    dedup_by_source: bool = Field(
        True, description="drop a raw turn when an LTM memory made from it is also a result"
    )
    # stage 7: rerank
    rerank_candidates: int = Field(50, ge=1, le=1000)
    # stage 8: history
    history_max_versions: int = Field(
        20, ge=1, le=1000, description="versions per chain a history query shows"
    )
    superseded_turns_last: bool = Field(
        True, description="rank raw turns whose memories were all replaced below current memories"
    )

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
    #: what category affinity embeds for the tenant's categories (``None``: the built-in ones)
    categories: tuple[str, ...] | None = None


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
