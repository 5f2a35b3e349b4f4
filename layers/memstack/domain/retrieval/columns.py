"""The names of the per-stage values ``explain`` shows for each hit (``SearchHit.stages``).

They are the public explain keys (API, CLI ``--explain``, the calibration script,
the golden file): a stage writes its values under these names, or under names it
declares itself (a stage's ``columns``: a new stage names its values in its own
module), never under a string literal used once, so a rename is one edit and
shows in review.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# stage 2 and 3: each ranking's rank and raw score
VECTOR_RANK = "vector_rank"
VECTOR = "vector"
BM25_RANK = "bm25_rank"
BM25 = "bm25"
BM25_PRF_RANK = "bm25_prf_rank"
#: dense feedback's rank (a question that asks for several things: ``dense_feedback``)
VECTOR_PRF_RANK = "vector_prf_rank"
#: the neighbour turns' rank (a turn said just before or after one of the first hits: ``neighbours``)
NEIGHBOUR_RANK = "neighbour_rank"

# stage 4: the signals of the calibrated score, and the score it gives
COSINE = "cosine"
COVERAGE = "coverage"
CATEGORY = "category"
#: the RRF value the score is computed from: the unit's for its best member, else the record's own
RRF = "rrf"
#: the fused value of the record's evidence unit (its turn and the memories made from it)
UNIT_RRF = "unit_rrf"
RECORD_RRF = "record_rrf"
UNIT_SIZE = "unit_size"
RRF_SCALED = "rrf_scaled"
QUERY_COSINE = "query_cosine"
QUERY_COVERAGE = "query_coverage"
#: what the query found at all, the same for each of its results (explain only: signals measured as
#: an evidence factor, docs/retrieval.md): the best cosine of a pooled raw turn, and how far the
#: vector stage's first result stands above its tenth
QUERY_TURN_COSINE = "query_turn_cosine"
QUERY_COSINE_MARGIN = "query_cosine_margin"
#: the BM25 stage's first score and its margin over the tenth, as a share of the first
QUERY_BM25_TOP = "query_bm25_top"
QUERY_BM25_MARGIN = "query_bm25_margin"
FUSED = "fused"
#: the search's ``evidence`` and its second signal (``evidence``; explain shows them on each hit)
QUERY_IDF_COVERAGE = "query_idf_coverage"
EVIDENCE = "evidence"

# stage 5
TEMPORAL = "temporal"
TEMPORAL_FACTOR = "temporal_factor"
CONSOLIDATED_WEIGHT = "consolidated_weight"
#: the score so far (after stage 5, and wherever a later stage rescored a hit)
SCORE = "score"

# stage 6
MERGED_TURN_SCORE = "merged_turn_score"
#: a memory citing several turns kept at a share of its newest turn's score: its score before
MULTI_TURN_FROM = "multi_turn_from"

# stage 7
RERANK = "rerank"

# stage 8
SUPERSEDED_TURN = "superseded_turn"
SUPERSEDED_FROM = "superseded_from"
#: a consolidation summary/synthesis moved below the specific hits it was built from: its score before
ROLLUP_FROM = "rollup_from"
HISTORY_VERSION = "history_version"
#: a newer statement of the same thing moved above an older one (present-tense query): its score before
NEWER_FROM = "newer_from"


def rank_after(stage: str) -> str:
    """The column of each candidate's place after ``stage`` ("rank_after_fusion", ...)."""
    return f"rank_after_{stage}"


def named(stages: Iterable[Any]) -> set[str]:
    """Every explain key a search through ``stages`` may show: the names above, each stage's
    ``rank_after_<name>``, and the ``columns`` a stage declares of its own (``Stage.columns``)."""
    shared = {value for name, value in globals().items() if name.isupper() and isinstance(value, str)}
    for stage in stages:
        shared.add(rank_after(stage.name))
        shared.update(getattr(stage, "columns", ()))
    return shared
