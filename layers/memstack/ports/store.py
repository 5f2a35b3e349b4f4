"""The memory store port: records, versions, BM25 and vector search.

Every method takes ``tenant`` and ``user_id`` first, and every implementation
filters every read and write by both: a caller can never reach another
tenant's or user's memories. Search methods return ids with scores; ranking,
fusion and the later stages live in the domain (``memstack.domain.retrieval``).

The erase rule (``memstack.domain.erasure``): ``erase_user`` leaves a marker of
when the user was erased, and every write (``put``, ``supersede``) given a
``fence`` (when the work writing began) earlier than that time is refused
with ``Erased`` *in the same transaction or condition as the write*, so
nothing of it is stored; a fence after the erase, and writes without a fence
(an import, an API edit), are not refused. A job that was running when its user was erased must never bring
the user's data back. tests/conformance/test_erase_fence.py holds the cases
every backend runs.
"""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, Protocol, cast, runtime_checkable

import numpy as np

from memstack.models import (
    PROFILE,
    ROLLUPS,
    ListOrder,
    MemoryFilters,
    MemoryRecord,
    Ranked,
    ScoredId,
    Tier,
    UserSummary,
)


@dataclass(frozen=True)
class Fence:
    """When the work that writes began (epoch seconds): its writes for a user erased later are refused."""

    began: float

    @classmethod
    def at(cls, when: datetime) -> Fence:
        return cls(when.timestamp())


@dataclass(frozen=True)
class TermCounts:
    """Document frequencies of one user's store for a query: what the search's evidence reads.

    ``docs`` is the user's searchable records (current, not deleted: what BM25 indexes);
    ``df`` holds, per term of the query as this store's BM25 analyses it, how many of them
    contain it. A word the store's analyser drops is absent. Counted over this user alone:
    another user's records never change either figure.
    """

    docs: int
    df: dict[str, int]


class MemoryStore(Protocol):
    def put(self, records: list[MemoryRecord], *, fence: Fence | None = None) -> None:
        """Insert new records (with their embeddings). An existing id raises ``Conflict``.

        Raises ``Erased`` (and stores none of them) when ``fence`` began before the last
        ``erase_user`` of a record's user.
        """
        ...

    def supersede(
        self, tenant: str, user_id: str, old_id: str, new: MemoryRecord, *, fence: Fence | None = None
    ) -> None:
        """Atomically insert ``new`` (which replaces ``old_id``) and mark the old one not current.

        Raises ``Conflict`` when ``old_id`` is no longer current (a concurrent update won), and
        ``Erased`` (changing nothing) when ``fence`` began before the user's last erase.
        """
        ...

    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None: ...

    def get_many(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, MemoryRecord]: ...

    def successor(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        """The record whose ``replaces_id`` is ``memory_id``, if any."""
        ...

    def find_by_source(self, tenant: str, user_id: str, source_id: str) -> list[MemoryRecord]:
        """Records (any tier, any version) whose ``source_ids`` contain ``source_id``."""
        ...

    def list(
        self,
        tenant: str,
        user_id: str,
        filters: MemoryFilters,
        limit: int,
        cursor: str | None = None,
        order: ListOrder = "created_at",
    ) -> tuple[builtins.list[MemoryRecord], str | None]:
        """Records newest first (current only unless ``include_superseded``); returns a next cursor.

        ``order`` (``models.ListOrder``): newest written first, or newest event time first
        (``event_time``, else ``created_at``), ties in the store's key order either way. A
        cursor continues the order it came from; the service keeps cursors from crossing orders.
        """
        ...

    def users(
        self, tenant: str, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[UserSummary], str | None]:
        """The tenant's users that have records, by user id ascending, ``limit`` at a time.

        ``cursor`` is the last user id of the previous page (the next cursor this
        returns); only this tenant's users are ever read or counted.
        """
        ...

    def bm25_search(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        """BM25 over the indexed text; user text is never interpreted as query syntax."""
        ...

    def term_counts(self, tenant: str, user_id: str, query: str) -> TermCounts:
        """How many searchable records the user has, and how many hold each content word of
        ``query`` (``domain.text.query_terms``, analysed as this store's BM25 analyses it)."""
        ...

    def vector_search(
        self, tenant: str, user_id: str, query_coarse: np.ndarray, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        """Cosine similarity on the coarse (Matryoshka prefix) vectors: the candidate pass."""
        ...

    def embeddings(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, np.ndarray]:
        """Full-dimension vectors of the given records (for the rescoring pass)."""
        ...

    def mark(self, tenant: str, user_id: str, ids: builtins.list[str], **fields: object) -> int:
        """Set plain metadata fields (``metadata`` keys) on records; returns how many changed."""
        ...

    def link_conflicts(self, tenant: str, user_id: str, links: dict[str, builtins.list[str]]) -> int:
        """Add the ids of ``links[memory_id]`` to that record's ``conflicts_with`` (those not there yet).

        Returns how many records changed; an unknown id changes nothing. Like ``mark``, it
        changes no version: the link says two current statements disagree, not which is right.
        """
        ...

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        """Delete every record of the user in this tenant, and fence later writes of earlier work.

        Reports counts. The fence's marker holds no user id (a hash of tenant and user)
        and lasts ``erasure.RETENTION_SECONDS``.
        """
        ...

    def close(self) -> None: ...


@runtime_checkable
class TenantListing(Protocol):
    """Every tenant with records in the store: maintenance (``memstack reembed``), never a request.

    Every backend has it; it may read much of the store (a DynamoDB scan of the users' directory).
    """

    def tenants(self) -> builtins.list[str]:
        """The tenants that have records, sorted."""
        ...


@runtime_checkable
class HybridCandidates(Protocol):
    """Optional extra of a store: BM25 and coarse-vector candidates in one round trip.

    OpenSearch sends both queries in one ``_msearch``; DynamoDB ranks both from
    one partition snapshot. When stage 2 takes the two-stage path (no exact
    answer, no ``RescoredCandidates``), it asks this with stage 3's first BM25
    query (the request's text, ``bm25_candidates``, the search's filters) and
    stage 3 takes that ranking instead of asking again
    (``memstack.domain.retrieval.hybrid``); without the extra the stages call
    ``vector_search`` and ``bm25_search``. The results are the same.
    """

    def hybrid_candidates(
        self,
        tenant: str,
        user_id: str,
        query: str,
        query_coarse: np.ndarray,
        k_bm25: int,
        k_vector: int,
        filters: MemoryFilters,
    ) -> tuple[builtins.list[ScoredId], builtins.list[ScoredId]]:
        """(BM25 hits, coarse vector hits), each best first, as the two separate methods return them."""
        ...


@runtime_checkable
class HybridWithTermCounts(Protocol):
    """Optional extra of a store: ``hybrid_candidates`` and the query's ``term_counts`` in one round trip.

    A search reads the term counts of its query for its ``evidence``; OpenSearch
    sends their search as a third body of the same ``_msearch``, so a search's
    candidates and counts cost one request. The retrieval prefers it to
    ``HybridCandidates`` and then asks no ``term_counts`` of its own.
    """

    def hybrid_candidates_with_counts(
        self,
        tenant: str,
        user_id: str,
        query: str,
        query_coarse: np.ndarray,
        k_bm25: int,
        k_vector: int,
        filters: MemoryFilters,
    ) -> tuple[builtins.list[ScoredId], builtins.list[ScoredId], TermCounts]:
        """``hybrid_candidates``'s two lists and ``term_counts(tenant, user_id, query)``."""
        ...


@runtime_checkable
class Bm25WithTermCounts(Protocol):
    """Optional extra of a store: ``bm25_search`` and the query's ``term_counts`` in one round trip.

    PostgreSQL reads both from the same postings of the query's lexemes, so one
    statement answers both (one HTTPS call on the Data API instead of two); the
    embedded store counts the terms in the same pass over its postings as it scores.
    Stage 3 asks it for the request's own text when stage 2 did not already
    receive that ranking (``HybridWithTermCounts``), and the evidence then asks
    no ``term_counts`` of its own (``memstack.domain.retrieval.hybrid``).
    """

    def bm25_with_counts(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> tuple[Sequence[ScoredId], TermCounts]:
        """``bm25_search(tenant, user_id, query, k, filters)`` and ``term_counts(tenant, user_id, query)``."""
        ...


@runtime_checkable
class RescoredCandidates(Protocol):
    """Optional extra of a store: the coarse candidates ranked by their full vectors, in the store.

    The two-stage path ranks the coarse pass's candidates by the dot product of
    their full vectors with the full query vector. A remote store (PostgreSQL)
    does that where the vectors are and returns ids and scores only, instead of
    shipping every candidate's full vector to be ranked here (400 vectors of
    384 floats: most of the stage's time). The pipeline uses it when
    ``isinstance(store, RescoredCandidates)``; the ranking is the one
    ``vector_search``, ``embeddings`` and that dot product give (a candidate
    without a full vector left out, ties in the coarse order), up to float32
    rounding in the last place.
    """

    def rescored_candidates(
        self,
        tenant: str,
        user_id: str,
        query_coarse: np.ndarray,
        query_full: np.ndarray,
        k: int,
        filters: MemoryFilters,
    ) -> builtins.list[ScoredId]:
        """``vector_search``'s ``k`` hits that have a full vector, by full dot product, best first."""
        ...


@runtime_checkable
class ExactVectors(Protocol):
    """Optional extra of a store: the full-vector top-k over every memory, when that is cheap.

    A store holding the user's full vectors in memory (embedded) ranks them all
    by cosine with the full query vector: the exact answer the coarse pass plus
    rescoring approximates. It answers None when the user has ``below`` memories
    or more, and the pipeline then takes the two-stage path.
    """

    def exact_vector_search(
        self,
        tenant: str,
        user_id: str,
        query_full: np.ndarray,
        k: int,
        filters: MemoryFilters,
        *,
        below: int,
    ) -> Sequence[ScoredId] | None:
        """The top ``k`` by full-vector cosine, best first; None at ``below`` memories or more."""
        ...


@runtime_checkable
class TurnNeighbours(Protocol):
    """Optional extra of a store: what the neighbour turns (``stages.neighbours``) read of records, from
    the user's index instead of the records (the embedded store; any other is read through
    ``get_many`` with the same answers)."""

    def recorded_adjacent(
        self, tenant: str, user_id: str, ids: builtins.list[str], span: int
    ) -> dict[str, builtins.list[str]]:
        """For each of ``ids`` the store holds: the message ids its metadata records within ``span``
        turns of it (``domain.adjacent.recorded``)."""
        ...

    def visible_vectors(
        self, tenant: str, user_id: str, ids: builtins.list[str], filters: MemoryFilters
    ) -> tuple[builtins.list[str], np.ndarray, np.ndarray]:
        """Those of ``ids`` whose records the store holds, ``filters`` let a search see
        (``record_filter.matches(search=True)``) and have a full vector, in the order given; their
        full vectors (one row each); and the store's rows of them (``models.Ranked.rows``)."""
        ...


@runtime_checkable
class RankedBm25(Protocol):
    """Optional extra of a store: ``bm25_search`` as columns (``models.Ranked``), no object per hit.

    The embedded store ranks in numpy over its per-user index; the pipeline's
    fusion reads the columns as they are (``units.field_ranks``).
    """

    def bm25_ranked(self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters) -> Ranked:
        """``bm25_search``'s answer, the same hits in the same order."""
        ...


@runtime_checkable
class Compacting(Protocol):
    """Optional extra of a store: work that keeps its reads cheap, done in the background.

    The DynamoDB store packs a user's snapshot to S3 after enough writes, so a
    cold container loads it in one round of reads instead of reading the whole
    partition. The workers call it after each job (never a request); it does
    nothing until the work is due, and its failure never fails the job.
    """

    def compact_user(self, tenant: str, user_id: str) -> bool:
        """Do the user's background upkeep if it is due; True when something was written."""
        ...


@runtime_checkable
class SuccessorsInOneRead(Protocol):
    """Optional extra of a store: ``successor`` of several ids in one read.

    A history search walks the version chain of each hit it returns forward
    (``domain.versions.histories``); PostgreSQL answers the next step of every
    chain in one statement instead of one per hit.
    """

    def successors(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, MemoryRecord]:
        """``successor(tenant, user_id, i)`` of each id ``i`` that has one, by ``i``."""
        ...


@runtime_checkable
class RecordsWithVectors(Protocol):
    """Optional extra of a store: ``get_many`` and ``embeddings`` in one read.

    Stage 4 reads its pool's records and the full vectors stage 2 did not give
    (``memstack.domain.retrieval.pool``); PostgreSQL returns both from one
    statement, one round trip (one HTTPS call over the Data API) fewer.
    """

    def records_with_vectors(
        self, tenant: str, user_id: str, ids: builtins.list[str], vectors_of: builtins.list[str]
    ) -> tuple[dict[str, MemoryRecord], dict[str, np.ndarray]]:
        """(``get_many(ids)``, ``embeddings`` of the ids of ``vectors_of`` among them)."""
        ...


@runtime_checkable
class SourcesInOneRead(Protocol):
    """Optional extra of a store: ``find_by_source`` for several message ids in one read.

    Retrieval checks every raw turn among the first hits for superseded
    memories; a remote store answers all of them in one round trip. The
    results are those of ``find_by_source`` for each id.
    """

    def find_by_sources(
        self, tenant: str, user_id: str, source_ids: builtins.list[str]
    ) -> dict[str, builtins.list[MemoryRecord]]:
        """{source id: its records, as ``find_by_source`` orders them}, with every asked id present."""
        ...


@runtime_checkable
class ReadView(Protocol):
    """Optional extra of a store: the reads of one search, on one state of the user's memories.

    DynamoDB reads its ``META`` token once and answers both candidate stages,
    the record fetch and the version chains from that one partition snapshot.
    The embedded store checks the user's generation once and runs both
    candidate stages on that one index (records it still reads by id). A view
    is for reading; the retrieval pipeline makes one per search (``pinned``).
    Asked about another tenant or user, it answers as the store does.
    """

    def read_view(self, tenant: str, user_id: str) -> MemoryStore: ...


def pinned(store: MemoryStore, tenant: str, user_id: str) -> MemoryStore:
    """The store's ``ReadView`` of the user when it has one, else the store itself."""
    return cast(ReadView, store).read_view(tenant, user_id) if implements(store, ReadView) else store


def implements(obj: object, port: type) -> bool:
    """``isinstance(obj, port)`` for a runtime-checkable port (an optional extra of a store), without
    its cost (~8 µs on Python 3.11, a few per search) when ``obj``'s class defines every method the
    port names: that is decided once per class. An object whose class lacks some is looked at itself
    (a proxy's ``__getattr__`` or an instance attribute may supply them): only for the members its
    class lacks, and ``isinstance`` asked only when the object has every one of them."""
    key = (type(obj), port)
    known = _CLASS_LACKS.get(key)
    if known is None:
        known = _CLASS_LACKS[key] = _lacks(key[0], port)
    lacks, plain = known
    if not lacks:
        return True
    # One member missing from the object answers no, as ``isinstance`` would (it asks ``hasattr`` of each).
    if lacks is not _UNKNOWN:
        own = getattr(obj, "__dict__", None) if plain else None
        for name in lacks:
            if plain:  # no ``__getattr__``: only the instance's own attributes can add a member
                if own is None or name not in own:
                    return False
            elif not hasattr(obj, name):
                return False
    return isinstance(obj, port)


def _lacks(cls: type, port: type) -> tuple[tuple[str, ...], bool]:
    """(the port's members ``cls`` does not define, whether its instances look attributes up only in
    the class and their own ``__dict__``). No members: it implements the port; ``_UNKNOWN``: the
    class alone cannot say which (a port with data members, or members ``public_members`` leaves out)."""
    plain = not hasattr(cls, "__getattr__") and cls.__getattribute__ is object.__getattribute__
    try:
        if issubclass(cls, port):
            return (), plain
    except TypeError:  # a port with data members: only an instance can say
        pass
    lacks = tuple(sorted(name for name in public_members(port) if not hasattr(cls, name)))
    return lacks or _UNKNOWN, plain


def public_members(port: type) -> frozenset[str]:
    """The names without a leading underscore that ``port`` and the ports it extends declare (methods,
    annotated attributes): read from their own ``__dict__`` and annotations, no private ``typing`` API.

    Every such name is a member ``isinstance`` asks for; members it leaves out (a dunder such as
    ``__len__``, a ``_private`` method) are never used to answer no, so ``implements`` still asks
    ``isinstance`` about them. A port extends only ports, ``Generic`` and ``object``."""
    return frozenset(
        name
        for base in port.__mro__
        if base not in (object, Generic, Protocol)
        for name in (*vars(base), *inspect.get_annotations(base))
        if not name.startswith("_")
    )


#: ``_lacks``' answer when only ``isinstance`` can say
_UNKNOWN: tuple[str, ...] = ("",)
#: (class, port) -> ``_lacks``' answer for them
_CLASS_LACKS: dict[tuple[type, type], tuple[tuple[str, ...], bool]] = {}


@dataclass(frozen=True)
class Candidates:
    """What the stages after fusion read of each pooled candidate, as columns.

    Entry ``j`` of every column describes ``ids[j]``; ids the store does not hold
    are left out, the others keep the order they were asked in. Stages 4-8 rank
    a hundred candidates on these and load records only for the few returned.
    """

    ids: list[str]
    stm: np.ndarray  # bool: a raw turn (tier stm), else an LTM memory
    current: np.ndarray  # bool
    deleted: np.ndarray  # bool
    when: np.ndarray  # float64: epoch seconds of event_time, else created_at
    consolidated: np.ndarray  # bool: metadata["consolidated"] is set (and truthy)
    #: bool: a consolidation summary or synthesis (metadata["consolidation"] is one of ``ROLLUPS``)
    rollup: np.ndarray
    #: bool: a profile (metadata["consolidation"] is ``PROFILE``): one memory per person and category
    profile: np.ndarray
    n_sources: np.ndarray  # int32: len(source_ids)
    last_source: list[str | None]  # source_ids[-1] (None without sources)
    vectors: np.ndarray  # float32 (n, full dim): zeros where has_vector is False
    has_vector: np.ndarray  # bool
    #: False when no LTM memory of the user has ever been replaced or deleted, so no raw
    #: turn can be outdated (stage 8 then asks nothing); True when unknown
    replaced_ltm: bool = True

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def from_records(
        cls, ids: list[str], records: Mapping[str, MemoryRecord], vectors: Mapping[str, np.ndarray]
    ) -> Candidates:
        """The columns of the ``ids`` found in ``records`` (vectors where ``vectors`` has them)."""
        found = [i for i in ids if i in records]
        rows = [records[i] for i in found]
        dim = next((len(vectors[i]) for i in found if i in vectors), 1)
        matrix = np.zeros((len(found), dim), dtype=np.float32)
        has_vector = np.zeros(len(found), dtype=bool)
        for j, memory_id in enumerate(found):
            vec = vectors.get(memory_id)
            if vec is not None:
                matrix[j], has_vector[j] = vec, True
        return cls(
            ids=found,
            stm=np.array([r.tier == Tier.STM for r in rows], dtype=bool),
            current=np.array([r.is_current for r in rows], dtype=bool),
            deleted=np.array([r.deleted for r in rows], dtype=bool),
            when=np.array([_epoch(r) for r in rows], dtype=np.float64),
            consolidated=np.array([bool(r.metadata.get("consolidated")) for r in rows], dtype=bool),
            rollup=np.array([r.metadata.get("consolidation") in ROLLUPS for r in rows], dtype=bool),
            profile=np.array([r.metadata.get("consolidation") == PROFILE for r in rows], dtype=bool),
            n_sources=np.array([len(r.source_ids) for r in rows], dtype=np.int32),
            last_source=[r.source_ids[-1] if r.source_ids else None for r in rows],
            vectors=matrix,
            has_vector=has_vector,
        )


def _epoch(record: MemoryRecord) -> float:
    when = record.event_time or record.created_at
    # A naive time is UTC, as the temporal stage reads it.
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


@dataclass(frozen=True, slots=True)
class Derived:
    """An LTM memory made from a message: what deciding whether that turn is outdated needs."""

    id: str
    replaces_id: str | None
    is_current: bool


@runtime_checkable
class CandidateReader(Protocol):
    """Optional extra of a store: the pool's columns and the turns' memories without loading records.

    The embedded store answers ``candidates`` from the user's in-memory index
    and ``derived`` with one query; any other store is read through
    ``get_many``, ``embeddings`` and ``find_by_source`` with the same results
    (``memstack.domain.retrieval.pool``).
    """

    def candidates(
        self, tenant: str, user_id: str, ids: builtins.list[str], rows: np.ndarray | None = None
    ) -> Candidates:
        """``rows``: what this store's rankings gave with these ids (``models.Ranked.rows``), a hint
        it may take instead of finding each id (it checks they are the rows of these ids)."""
        ...

    def full_vectors(
        self, tenant: str, user_id: str, ids: builtins.list[str]
    ) -> tuple[builtins.list[str], np.ndarray]:
        """The ids that have a full vector (in the order asked) and those vectors, one row each."""
        ...

    def derived(
        self, tenant: str, user_id: str, source_ids: builtins.list[str]
    ) -> dict[str, builtins.list[Derived]]:
        """For each source id, the LTM memories (any version) listing it among their sources."""
        ...
