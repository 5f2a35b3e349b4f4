"""The fused candidates of one search, as columns, until the few returned become ``SearchHit`` s.

Stages 4-8 rank about a hundred candidates and return ten. They read a few
fields of each candidate (tier, time, flags, sources, vector: ``Candidates``)
and keep a score and the per-stage values explain shows; records are loaded
only for what needs their text (the reranker's head, coverage) and for the
hits returned. Candidate ``j`` is row ``j`` of every column; ``order`` is the
ranking so far.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import cast

import numpy as np

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval.types import SearchHit
from memstack.models import MemoryRecord, Tier
from memstack.ports.store import (
    CandidateReader,
    Candidates,
    Derived,
    MemoryStore,
    RecordsWithVectors,
    SourcesInOneRead,
    implements,
)


def read_candidates(
    store: MemoryStore,
    tenant: str,
    user_id: str,
    ids: list[str],
    known: Mapping[str, np.ndarray],
    rows: np.ndarray | None = None,
) -> tuple[Candidates, dict[str, MemoryRecord]]:
    """The candidates' columns, and the records read on the way (none from a ``CandidateReader``).

    ``known``: full vectors already read (stage 2's), so a store without the
    extra is asked only for the others. ``rows``: the store's rows of ``ids``, as its
    rankings gave them (``models.Ranked.rows``), for a ``CandidateReader``.
    """
    if implements(store, CandidateReader):
        return cast(CandidateReader, store).candidates(tenant, user_id, ids, rows), {}
    if implements(store, RecordsWithVectors):  # one read for both (postgres)
        records, read = cast(RecordsWithVectors, store).records_with_vectors(
            tenant, user_id, ids, [i for i in ids if i not in known]
        )
        return Candidates.from_records(ids, records, {**known, **read}), records
    records = store.get_many(tenant, user_id, ids)
    missing = [i for i in ids if i in records and i not in known]
    vectors = {**known, **store.embeddings(tenant, user_id, missing)} if missing else known
    return Candidates.from_records(ids, records, vectors), records


def full_vectors(
    store: MemoryStore, tenant: str, user_id: str, ids: list[str]
) -> tuple[list[str], np.ndarray, dict[str, np.ndarray]]:
    """(the ids that have a full vector, those vectors as one matrix, the vectors read by id).

    A ``CandidateReader`` slices them from its index as one matrix (the dict is
    then empty); any other store is read through ``embeddings``.
    """
    if implements(store, CandidateReader):
        found, matrix = cast(CandidateReader, store).full_vectors(tenant, user_id, ids)
        return found, matrix, {}
    full = store.embeddings(tenant, user_id, ids)
    found, matrix = stacked(ids, full)
    return found, matrix, full


def stacked(ids: list[str], full: Mapping[str, np.ndarray]) -> tuple[list[str], np.ndarray]:
    """(the ids that have a full vector, in order; those vectors as one matrix)."""
    found = [i for i in ids if i in full]
    return found, np.vstack([full[i] for i in found]) if found else np.zeros((0, 1), np.float32)


def derivations(
    store: MemoryStore, tenant: str, user_id: str, sources: list[str]
) -> dict[str, list[Derived]]:
    """For each source id, the LTM memories made from it (``CandidateReader.derived``)."""
    if not sources:
        return {}
    if implements(store, CandidateReader):
        return cast(CandidateReader, store).derived(tenant, user_id, sources)
    # One read for every source on a store that can (postgres: one statement, not one each).
    found = (
        cast(SourcesInOneRead, store).find_by_sources(tenant, user_id, sources)
        if implements(store, SourcesInOneRead)
        else {source: store.find_by_source(tenant, user_id, source) for source in sources}
    )
    return {
        source: [
            Derived(r.id, r.replaces_id, r.is_current)
            for r in found.get(source, [])
            if r.tier == Tier.LTM and source in r.source_ids
        ]
        for source in sources
    }


#: the stage values a block holds (a search through the eight stages writes at most about 35)
_COLUMNS = 48


class Pool:
    def __init__(self, facts: Candidates, records: dict[str, MemoryRecord]) -> None:
        self.facts = facts
        self.ids = facts.ids
        n = len(facts)
        self.score: list[float] = [0.0] * n
        self.order: list[int] = list(range(n))
        self.superseded: list[bool] = [False] * n
        # The flags the stages test one candidate at a time, as lists (a numpy element is slow to read).
        self.stm: list[bool] = facts.stm.tolist()
        self.current: list[bool] = facts.current.tolist()
        self.deleted: list[bool] = facts.deleted.tolist()
        self.n_sources: list[int] = facts.n_sources.tolist()
        self.has_vector: list[bool] = facts.has_vector.tolist()
        #: per-stage values, in the order explain lists them: value ``_stages[name]`` is one row
        #: of float64 per candidate (NaN where the stage set none) in blocks of ``_COLUMNS`` rows
        #: (a search allocates one; a row never moves), read out only for the hits returned
        self._stages: dict[str, int] = {}
        self._blocks = [np.full((_COLUMNS, n), np.nan)]
        self._records = records

    def __len__(self) -> int:
        return len(self.ids)

    # ------------------------------------------------------------ stage values
    def column(self, name: str) -> np.ndarray:
        """The values ``name`` per candidate (NaN: none set; a view to write them in), made on first use."""
        at = self._stages.get(name)
        if at is None:
            at = self._stages[name] = len(self._stages)
            if at == _COLUMNS * len(self._blocks):  # a stage of its own named more: another block
                self._blocks.append(np.full((_COLUMNS, len(self.ids)), np.nan))
        return self._blocks[at // _COLUMNS][at % _COLUMNS]

    def put(self, name: str, j: int, value: float) -> None:
        self.column(name)[j] = value

    def get(self, name: str, j: int, default: float) -> float:
        at = self._stages.get(name)
        value = float(self._blocks[at // _COLUMNS][at % _COLUMNS, j]) if at is not None else math.nan
        return default if math.isnan(value) else value

    def rescore(self, j: int, score: float) -> None:
        self.score[j] = score
        self.put(col.SCORE, j, score)

    def ranked(self, stage: str, sort: bool = True) -> None:
        """Best first (ties keep their order), each candidate's place after ``stage`` recorded."""
        if sort:
            self.order = sorted(self.order, key=self.score.__getitem__, reverse=True)
        ranks = self.column(col.rank_after(stage))
        ranks[self.order] = np.arange(1, len(self.order) + 1, dtype=np.float64)

    def stages_of(self, rows: list[int]) -> list[dict[str, float]]:
        """Each of ``rows``' stage values (the ones set), in the order explain lists them."""
        if not rows or not self._stages:
            return [{} for _ in rows]
        names = list(self._stages)
        block = self._blocks[0] if len(self._blocks) == 1 else np.vstack(self._blocks)
        values = block[: len(names), rows].T.tolist()
        # NaN (not set) is the one value unequal to itself
        return [{n: v for n, v in zip(names, row, strict=True) if v == v} for row in values]

    # ---------------------------------------------------------------- records
    def records(
        self, store: MemoryStore, tenant: str, user_id: str, rows: Iterable[int]
    ) -> dict[int, MemoryRecord]:
        """The records of candidates ``rows`` (read once, then kept); a record gone since is left out."""
        rows = list(rows)
        wanted = [self.ids[j] for j in rows]
        missing = [i for i in wanted if i not in self._records]
        if missing:
            self._records.update(store.get_many(tenant, user_id, missing))
        return {j: r for j in rows if (r := self._records.get(self.ids[j])) is not None}

    def hits(self, store: MemoryStore, tenant: str, user_id: str, rows: list[int]) -> list[SearchHit]:
        """``SearchHit`` s of candidates ``rows``, in that order, with their records and stage values."""
        records = self.records(store, tenant, user_id, rows)
        found = [j for j in rows if j in records]
        return [
            SearchHit(record=records[j], score=self.score[j], stages=stages, superseded=self.superseded[j])
            for j, stages in zip(found, self.stages_of(found), strict=True)
        ]
