"""The retrieval stages, one module each, and the order every search runs them in (``PIPELINE``).

Adding a stage: a module here with a class that has a ``name`` and a
``run(search) -> status`` (``memstack.domain.retrieval.stage.Stage``), its
parameters in ``RetrievalConfig``, its explain values named in its module (its
``columns``), and one entry below (docs/architecture.md walks through it).
"""

from __future__ import annotations

from memstack.domain.retrieval.stage import Stage
from memstack.domain.retrieval.stages.bm25 import Bm25Search
from memstack.domain.retrieval.stages.dedup import Dedup
from memstack.domain.retrieval.stages.fusion import Fusion
from memstack.domain.retrieval.stages.history import History
from memstack.domain.retrieval.stages.query_analysis import AnalyseQuery
from memstack.domain.retrieval.stages.rerank import Rerank
from memstack.domain.retrieval.stages.temporal import TemporalBoost
from memstack.domain.retrieval.stages.vector import VectorSearch

#: the eight stages of docs/architecture.md, in the order every search runs them
PIPELINE: tuple[Stage, ...] = (
    AnalyseQuery(),
    VectorSearch(),
    Bm25Search(),
    Fusion(),
    TemporalBoost(),
    Dedup(),
    Rerank(),
    History(),
)

#: their names: the keys of ``stage_status`` and ``stage_durations`` (plus "total")
STAGES: tuple[str, ...] = tuple(stage.name for stage in PIPELINE)

__all__ = ["PIPELINE", "STAGES", "Stage"]
