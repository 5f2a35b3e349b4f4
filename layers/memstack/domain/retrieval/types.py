"""The retrieval pipeline's configuration, request and answer types."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstack.models import MemoryFilters, MemoryRecord


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
    #: probability that the store holds evidence for the query (``retrieval.evidence``), 0-1; beside
    #: the per-result scores, for deciding to abstain
    evidence: float = 0.0
