"""What a retrieval stage is (``Stage``) and what the stages of one search share (``Search``).

A stage is one module of ``memstack.domain.retrieval.stages``: an object with a
``name`` (the key of ``stage_status`` and ``stage_durations``) and a ``run``
that reads what earlier stages left on the ``Search`` and adds its own part.
``Retriever`` runs them in the order of ``stages.PIPELINE``, timing each and
recording the status line ``run`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from memstack.domain.query_analysis import QueryAnalysis
from memstack.domain.retrieval.category_affinity import CategoryPrototypes
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.hybrid import Prefetched
from memstack.domain.retrieval.pool import Pool
from memstack.domain.retrieval.types import SearchHit, SearchRequest
from memstack.models import MemoryFilters, ScoredId
from memstack.ports.embedder import Embedder
from memstack.ports.reranker import Reranker
from memstack.ports.store import MemoryStore, TermCounts


class Stage(Protocol):
    """One step of a search. A stage may also declare ``columns``: the explain values it writes
    that ``columns.py`` does not name (a new stage names its own, in its own module)."""

    #: the stage's key in ``stage_status``, ``stage_durations`` and ``rank_after_<name>``
    name: str

    def run(self, search: Search) -> str:
        """Do this stage's part of ``search``; return its status ("ok…", "skipped: …", "failed: …")."""
        ...


@dataclass(frozen=True)
class Models:
    """The models the stages call: the query's embedder, its category prototypes, the reranker (or none)."""

    embedder: Embedder
    categories: CategoryPrototypes
    reranker: Reranker | None = None


@dataclass
class Search:
    """One search as it goes through the stages: the request, and what each stage has found so far."""

    req: SearchRequest
    #: the store as this search reads it (pinned to one state of the user's memories)
    store: MemoryStore
    config: RetrievalConfig
    models: Models
    #: stages that failed and were skipped (the request still succeeds), e.g. ["rerank"]
    degraded: list[str] = field(default_factory=list)
    # stage 1
    analysis: QueryAnalysis | None = None
    #: whether older versions are searched and shown (the query asks for history, or the request does)
    history: bool = False
    filters: MemoryFilters = field(default_factory=MemoryFilters)
    # stages 2 and 3
    query_vec: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    vector: Sequence[ScoredId] = field(default_factory=list)
    #: full vectors stage 2 read, by id (the pool reuses them)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    #: what stage 2 received for stage 3 and the evidence from a store answering them together (``hybrid``)
    prefetched: Prefetched | None = None
    #: the request's term counts once read (``hybrid.term_counts``: the fusion and the evidence read them)
    counts: TermCounts | None = None
    bm25: Sequence[ScoredId] = field(default_factory=list)
    prf: Sequence[ScoredId] = field(default_factory=list)
    #: dense feedback's ranking (``dense_feedback``; empty when it did not run)
    vector_prf: Sequence[ScoredId] = field(default_factory=list)
    #: the turns around the first hits (``neighbours``; empty when it did not run)
    neighbours: Sequence[ScoredId] = field(default_factory=list)
    #: each neighbour turn's head turns: the first hits it was found next to
    neighbour_heads: dict[str, list[str]] = field(default_factory=dict)
    # stages 4-8: the fused candidates, then the hits returned
    #: stage 4: the best cosine of a pooled raw turn (of any pooled record when no raw turn is
    #: pooled; None with an empty pool): the first signal of the search's ``evidence``
    evidence_cosine: float | None = None
    _pool: Pool | None = None
    hits: list[SearchHit] = field(default_factory=list)

    @property
    def pool(self) -> Pool:
        """The fused candidates (stage 4 onwards)."""
        if self._pool is None:
            raise RuntimeError("no candidate pool yet: the fusion stage makes it")
        return self._pool

    @pool.setter
    def pool(self, pool: Pool) -> None:
        self._pool = pool

    @property
    def query(self) -> QueryAnalysis:
        """Stage 1's reading of the query."""
        if self.analysis is None:
            raise RuntimeError("the query has not been analysed: the query_analysis stage does it")
        return self.analysis
