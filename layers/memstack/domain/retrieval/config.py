"""The retrieval pipeline's ``Settings`` section: every parameter of the eight stages.

Apart from the pipeline (``types``, ``pipeline``, the stages) so that ``memstack.settings``,
read at every cold start, imports no numpy and no stage (see ``domain/sections.py``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from memstack.domain.retrieval.calibration import ScoreModel
from memstack.domain.sections import Matryoshka, RrfWeights

if TYPE_CHECKING:
    from memstack.domain.retrieval.units import FieldWeights


class RetrievalConfig(Matryoshka, RrfWeights):
    """Every parameter of the eight stages: the ``retrieval`` section of ``Settings`` (``MEMSTACK_*``).

    Defaults are from the Cognis paper unless measured better (docs/retrieval.md).
    ``coarse_dim`` (stage 2) and ``rrf_k`` / ``weight_vector`` / ``weight_bm25``
    (stage 4) are shared with the sections that cut and fuse the same way.
    """

    # stage 2: Matryoshka two-stage vector search
    # 400 candidates from each of stages 2 and 3 (200 before): turn recall @10 / @25 up on LoCoMo
    # dev and on BEAM together (docs/retrieval.md, "Recall techniques measured on both benchmarks").
    vector_candidates: int = Field(400, ge=1, le=10_000)
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
    # A long turn's passages (MEMSTACK_INDEX_PASSAGE_CHARS, domain/chunks.py) give it their cosine
    # less this margin: a turn is ranked by its own start unless a later passage matches clearly better.
    passage_margin: float = Field(
        0.0, ge=0.0, le=2.0, description="cosine a passage hit gives up against its turn's own vector"
    )
    # stage 3: BM25
    bm25_candidates: int = Field(400, ge=1, le=10_000)
    # Off by default: +0.003 recall@10 / +0.007 @25 with extraction on LoCoMo, for a second BM25
    # query that made each search ~1.5x slower (docs/retrieval.md); MEMSTACK_PRF_TERMS=10 turns it on.
    prf_terms: int = Field(0, ge=0, le=50, description="terms pseudo-relevance feedback adds (0: off)")
    prf_docs: int = Field(5, ge=1, le=50, description="first BM25 hits the feedback terms come from")
    prf_min_docs: int = Field(2, ge=1, le=50, description="feedback hits a term must occur in")
    # stage 3, after BM25: dense (Rocchio) feedback for questions that ask for several things, filling
    # the places below the first 5: LoCoMo multi-hop @10 0.446 -> 0.462, BEAM @10/@25 +0.001, no
    # category or @5 lower on either (docs/retrieval.md, "Dense feedback for questions asking for several").
    weight_vector_prf: float = Field(0.1, ge=0.0, description="RRF weight of its ranking (0: off)")
    vector_prf_docs: int = Field(3, ge=1, le=50, description="first vector and BM25 hits it reads")
    vector_prf_beta: float = Field(0.5, ge=0.0, le=10.0, description="how far dense feedback moves the query")
    vector_prf_after: int = Field(
        5, ge=0, le=1000, description="first places kept from the fusion without dense feedback (0: none)"
    )
    vector_prf_scope: Literal["several", "all"] = Field(
        "several", description="questions dense feedback runs for: those asking for several things, or all"
    )
    # stage 3, last: neighbour turns (stages/neighbours.py), the turns said just before and after the
    # first 2 turns of the plain fusion, ranked by their own cosine and fused at 0.3: LoCoMo dev @10
    # 0.809 -> 0.824 with no category lower, BEAM 11 @10 0.503 -> 0.508, @25 0.605 -> 0.606; chosen on
    # both (docs/retrieval.md, "Session 8: neighbour turns").
    weight_neighbours: float = Field(
        0.3, ge=0.0, description="RRF weight of the neighbour turns' ranking (0: off)"
    )
    neighbour_head: int = Field(
        2, ge=0, le=100, description="first turns of the plain fusion whose neighbours are candidates"
    )
    neighbour_span: int = Field(
        2, ge=1, le=2, description="turns before and after each of them (at most what ingest records: 2)"
    )
    # stage 4: weighted RRF (rrf_k, weight_vector, weight_bm25: RrfWeights)
    weight_prf: float = Field(0.3, ge=0.0, description="RRF weight of the BM25 feedback query's ranking")
    # A memory whose turn is a candidate too is a second view of it: its embedding adds much,
    # its BM25 little (LoCoMo, extraction on: docs/retrieval.md, "Evidence units").
    weight_vector_memory: float = Field(0.3, ge=0.0, description="RRF weight of a memory's vector rank")
    weight_bm25_memory: float = Field(0.1, ge=0.0, description="RRF weight of a memory's BM25 rank")
    # Credit a BM25 rank earns (credit.py): near-tied scores share their rank, a match covering
    # little of the query's idf mass earns less (measured on small stores and on LoCoMo and BEAM).
    bm25_tie_gap: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="relative BM25 score gap under which ranks share their credit (0: off)",
    )
    bm25_tie_scope: Literal["all", "thin"] = Field(
        "thin",
        description="near-tied BM25 ranks shared by: all, or thin matches only (needs bm25_full_match)",
    )
    bm25_full_match: float = Field(
        0.0,
        ge=0.0,
        le=10.0,
        description="share of the query's idf mass a BM25 score needs for full credit (0: off)",
    )
    vector_full_ratio: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="share of the best cosine a vector hit needs for full RRF credit (0: off)",
    )
    # A memory with no source turn (written by key, a store's put, an import) is its own evidence.
    sourceless_as_turns: bool = Field(
        False, description="a memory without a source turn ranks among the turns too, as its own unit's turn"
    )
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
    # 1.0: with consolidation's summaries kept out of the evidence rankings (stage 4), a turn they
    # cover is still the evidence; at 0.5 it lost to the memories and @10 fell 0.01-0.02 on LoCoMo
    # and BEAM (docs/retrieval.md, "Consolidation").
    consolidated_stm_weight: float = Field(
        1.0, ge=0.0, le=1.0, description="score factor for STM already consolidated (0 hides it)"
    )
    # stage 6: near-duplicate removal
    dedup_threshold: float = Field(0.99, gt=0.0, le=1.0)
    dedup_by_source: bool = Field(
        True, description="drop a raw turn when an LTM memory made from it is also a result"
    )
    # "sole": a turn merges only into a memory citing that turn alone. Merged into an update (a memory
    # citing older turns too), the memory took the turn's place and put the older turns ahead of the
    # one that earned it; now the turn keeps its place and the update ranks at most
    # DEDUP_MULTI_TURN_PLACES below it. 8 places, chosen on both datasets' fresh stores: BEAM @10
    # 0.496 -> 0.503 with top-10 slots citing no new turn under 0.2 (5 places: 0.254), LoCoMo at or
    # above at every depth (docs/retrieval.md, "Session 7").
    dedup_merge_into: Literal["newest", "sole"] = Field(
        "sole",
        description="a turn merges into its best memory always (newest), or only if it cites the turn alone",
    )
    dedup_multi_turn_places: int = Field(
        8,
        ge=0,
        le=1000,
        description="most places below its turn that its best memory, citing older turns too, ranks (0: own)",
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
    # "current": every one only for a question about the present; for others only a turn a hit above
    # already cites (superseded.py). LoCoMo dev @10 0.801 -> 0.805, BEAM @10 0.475 -> 0.483, no
    # category lower (docs/retrieval.md, "Superseded turns for questions not about the present").
    superseded_turns_scope: Literal["all", "current"] = Field(
        "current",
        description="questions superseded turns rank last for: all, or only those about the present",
    )
    newest_first: bool = Field(
        True, description="for a question about the present, rank a newer statement of the same thing first"
    )
    newest_first_similarity: float = Field(
        0.8, gt=0.0, le=1.0, description="cosine at which two hits count as statements of the same thing"
    )
    newest_first_ratio: float = Field(
        0.7, ge=0.0, le=1.0, description="least share of the older hit's score the newer one needs to move up"
    )

    @property
    def field_weights(self) -> FieldWeights:
        """The RRF weight of each ranking in each field (the feedback query's follows BM25's ratio)."""
        return _field_weights(
            self.weight_vector,
            self.weight_bm25,
            self.weight_prf,
            self.weight_vector_prf,
            self.weight_vector_memory,
            self.weight_bm25_memory,
            self.weight_neighbours,
        )


@functools.lru_cache(maxsize=16)
def _field_weights(
    vector: float,
    bm25: float,
    prf: float,
    vector_prf: float,
    vector_memory: float,
    bm25_memory: float,
    neighbours: float,
) -> FieldWeights:
    """``RetrievalConfig.field_weights``, made once per set of weights (every search reads them)."""
    from memstack.domain.retrieval.units import FieldWeights  # the pipeline's: loaded by then

    memory_prf = prf * bm25_memory / bm25 if bm25 else 0.0
    # Dense feedback is a vector ranking: in the memory field it follows the vector stage's ratio.
    vector_ratio = vector_memory / vector if vector else 0.0
    return FieldWeights(
        # Neighbour turns are turns only (a memory is never one).
        turns={
            "vector": vector,
            "bm25": bm25,
            "bm25_prf": prf,
            "vector_prf": vector_prf,
            "neighbours": neighbours,
        },
        memories={
            "vector": vector_memory,
            "bm25": bm25_memory,
            "bm25_prf": memory_prf,
            "vector_prf": vector_prf * vector_ratio,
            "neighbours": 0.0,
        },
    )
