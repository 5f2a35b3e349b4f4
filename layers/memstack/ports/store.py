"""The memory store port: records, versions, BM25 and vector search.

Every method takes ``tenant`` and ``user_id`` first, and every implementation
filters every read and write by both: a caller can never reach another
tenant's or user's memories. Search methods return ids with scores; ranking,
fusion and the later stages live in the domain (``memstack.domain.retrieve``).
"""

from __future__ import annotations

import builtins
from typing import Protocol, runtime_checkable

import numpy as np

from memstack.models import MemoryFilters, MemoryRecord, ScoredId


class MemoryStore(Protocol):
    def put(self, records: list[MemoryRecord]) -> None:
        """Insert new records (with their embeddings). An existing id raises ``Conflict``."""
        ...

    def supersede(self, tenant: str, user_id: str, old_id: str, new: MemoryRecord) -> None:
        """Atomically insert ``new`` (which replaces ``old_id``) and mark the old one not current.

        Raises ``Conflict`` when ``old_id`` is no longer current (a concurrent update won).
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
    ) -> tuple[builtins.list[MemoryRecord], str | None]:
        """Records newest first (current only unless ``include_superseded``); returns a next cursor."""
        ...

    def bm25_search(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        """BM25 over the indexed text; user text is never interpreted as query syntax."""
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

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        """Delete every record of the user in this tenant; report counts."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class HybridCandidates(Protocol):
    """Optional extra of a store: BM25 and coarse-vector candidates in one round trip.

    OpenSearch sends both queries in one ``_msearch``; DynamoDB ranks both from
    one partition snapshot. The retrieval uses it when
    ``isinstance(store, HybridCandidates)`` and otherwise calls
    ``bm25_search`` and ``vector_search``; the results are the same.
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
    return store.read_view(tenant, user_id) if isinstance(store, ReadView) else store
