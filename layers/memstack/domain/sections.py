"""The ``Settings`` sections of ingest, indexing, extraction, consolidation and profiles, and the
two bases other sections share (``Matryoshka``, ``RrfWeights``).

They live apart from the code that uses them because ``memstack.settings`` reads them at every
cold start: this module imports only pydantic and ``memstack.section``, so a function that needs
its settings but not the pipelines (the cost report, the store upgrade) loads neither numpy nor
the domain (``memstack bench coldstart``; ``tests/api/test_cold_import.py``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import Field, model_validator

from memstack.domain.time.bounds import TimeBounds
from memstack.section import Section, fixed


class Matryoshka(Section):
    """The coarse prefix every part that stores or searches vectors cuts (one variable for all of them)."""

    coarse_dim: int = Field(128, ge=8, le=4096, description="Matryoshka prefix for the coarse pass")


class RrfWeights(Section):
    """Weighted RRF of a vector and a BM25 ranking: retrieval's stage 4 and extraction's neighbours."""

    # The paper's k=10 and 0.7/0.3 measured worse with the offline MiniLM model on
    # LoCoMo (recall@10 0.60 against 0.79 with these); see docs/retrieval.md.
    rrf_k: int = Field(5, ge=1)
    weight_vector: float = Field(0.3, ge=0.0)
    weight_bm25: float = Field(0.7, ge=0.0)

    @model_validator(mode="after")
    def _some_weight(self) -> RrfWeights:
        if self.weight_vector + self.weight_bm25 <= 0:
            raise ValueError("weight_vector + weight_bm25 must be positive")
        return self


class IndexingConfig(Section):
    """The ``indexing`` section of ``Settings`` (``MEMSTACK_INDEX_*``)."""

    context_turns: int = Field(
        2,
        ge=0,
        le=10,
        alias="index_context_turns",
        description="earlier turns of the same batch indexed (BM25) with each turn",
    )
    context_after: int = Field(
        0,
        ge=0,
        le=10,
        alias="index_context_after",
        description="later turns of the same batch indexed (BM25) with each turn",
    )
    context_in_embedding: bool = Field(
        False, alias="index_context_embedding", description="embed each turn with that context too"
    )
    date_in_text: bool = Field(
        True,
        alias="index_date_in_text",
        description='index each turn\'s date ("8 May 2023") with its text (BM25)',
    )
    context_max_chars: int = Field(
        1000,
        ge=0,
        alias="index_context_max_chars",
        description="a turn longer than this (characters) is never another turn's context (0: no limit)",
    )
    assistant_text: bool = Field(
        False,
        alias="index_assistant_text",
        description="index (BM25) an assistant turn's words; off: it is found by its embedding alone",
    )


class IngestConfig(Matryoshka):
    """The ``ingest`` section of ``Settings``: how long raw turns live, and what text indexes them."""

    stm_ttl_days: int = Field(30, ge=1)
    chunk_chars: int = Field(
        8000,
        ge=500,
        le=100_000,
        alias="index_chunk_chars",
        description="a turn longer than this is indexed in chunks of at most this many characters",
    )
    passage_chars: int = Field(
        0,
        ge=0,
        le=100_000,
        alias="index_passage_chars",
        description="a turn (or chunk) longer than this also gets one vector-only record per further "
        "passage of at most this many characters, so its whole text is embedded (0: off)",
    )
    passage_roles: Literal["assistant", "all"] = Field(
        "assistant",
        alias="index_passage_roles",
        description="whose long turns get passages: the assistant's replies, or every turn",
    )
    indexing: IndexingConfig = Field(default_factory=IndexingConfig)
    #: the API's MEMSTACK_EARLIEST_TIME / LATEST_TIME (the factory sets it)
    time_bounds: TimeBounds = fixed(default_factory=TimeBounds)


class ExtractionConfig(Matryoshka, RrfWeights):
    """The ``extraction`` section of ``Settings``: neighbours are fused as retrieval fuses (one RRF_K)."""

    neighbours: int = Field(
        10, ge=1, le=100, alias="extraction_neighbours", description="similar memories the extractor is shown"
    )
    max_chars: int = Field(
        16_000,
        ge=500,
        le=1_000_000,
        alias="extraction_max_chars",
        description="the extractor reads this many characters of a message at most (its start); "
        "all of it is stored and searchable",
    )
    #: earlier turns of the session given to the extractor as context
    context_turns: int = fixed(6)
    #: an event time outside this range (a model's or a phrase's) is dropped, never stored
    #: (the API's MEMSTACK_EARLIEST_TIME / LATEST_TIME: the factory sets it)
    time_bounds: TimeBounds = fixed(default_factory=TimeBounds)
    #: a turn's stored vector is the embedding of its own text (``turn_text``), so the job may
    #: reuse it as its neighbour query; False when ingest embeds context with each turn
    #: (MEMSTACK_INDEX_CONTEXT_EMBEDDING: the factory sets it)
    turn_vector_reusable: bool = fixed(True)


class ConsolidationConfig(Matryoshka):
    """The ``consolidation`` section of ``Settings`` (what one run of one user does)."""

    summary_max_tokens: int = Field(300, ge=16)
    synthesis_max_tokens: int = Field(400, ge=16)
    window_hours: float = Field(
        24.0, gt=0, alias="consolidation_window_hours", description="longest time span one summary covers"
    )
    group_size: int = Field(
        20, ge=1, le=500, alias="consolidation_group_size", description="most STM turns one summary covers"
    )
    max_entries: int = Field(
        500,
        ge=1,
        alias="consolidation_max_entries",
        description="most STM turns one job reads (oldest first; the next run takes the rest)",
    )
    duplicate_threshold: float = Field(
        0.95,
        gt=0.0,
        le=1.0,
        alias="consolidation_duplicate_threshold",
        description="cosine at which a summary is already known (NONE)",
    )
    synthesis_similarity: float = Field(
        0.6,
        ge=0.0,
        le=1.0,
        alias="consolidation_synthesis_similarity",
        description="cosine at which summaries and memories are synthesised together",
    )
    #: the nearest memories a summary is compared with (the same number extraction is shown)
    neighbours: int = Field(10, ge=1, le=100, alias="extraction_neighbours")
    #: the per-user lease: one run at a time, renewed every third of it while the run lasts
    lease_seconds: float = Field(
        120.0,
        ge=5.0,
        le=3600.0,
        alias="consolidation_lease_seconds",
        description="per-user consolidation lease; renewed while the run lasts",
    )

    @property
    def window(self) -> timedelta:
        return timedelta(hours=self.window_hours)


class ProfileConfig(Matryoshka):
    """The ``profiles`` section of ``Settings``."""

    # Off by default: measured on LoCoMo with consolidation, recall did not gain (docs/retrieval.md).
    enabled: bool = Field(
        False,
        alias="profile_memories",
        description="consolidation keeps one profile memory per person and category (cross-session)",
    )
    min_items: int = Field(
        2, ge=1, le=100, alias="profile_min_items", description="memories a profile needs to be written"
    )
    max_items: int = Field(
        12,
        ge=1,
        le=100,
        alias="profile_max_items",
        description="most memories (newest first) one profile lists",
    )
