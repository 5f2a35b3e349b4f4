"""What differs between the two flavours of the ``opensearch`` store: how documents are kept.

``store.OpenSearchMemoryStore`` is one store: the port's searches, listings and
the erase fence are shared, and every request that depends on how documents
are identified and changed goes to its ``Documents``:

- ``managed.ManagedDocuments`` (a managed domain, service ``es``): the store
  names each document's ``_id``, retires a version with a compare-and-set
  (``if_seq_no``), asks for refreshes and erases with delete-by-query; the
  erase fence is a marker document read in real time.
- ``serverless.ServerlessDocuments`` (a serverless vector-search collection,
  service ``aoss``): the collection assigns ids, nothing is updated in place
  (a change is a new copy with a higher ``revision``), reads collapse copies,
  erase deletes by ``_id`` until nothing is left; the fence is the STM's
  erasure log.

A new flavour is one module implementing ``Documents`` and one branch in
``OpenSearchMemoryStore.from_settings``.
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol

from memstack.adapters.opensearch.index import Op
from memstack.errors import Conflict, DependencyFailed
from memstack.models import MemoryRecord
from memstack.ports.tenant_config import TenantConfigStore

#: the bulk item statuses of a write that landed
OK = (200, 201)


class Documents(Protocol):
    """How one flavour identifies, writes, reads by id and erases memory documents.

    The store calls these after making sure the index exists; writes return the bulk operations
    that undo them, which the store sends when the erase fence takes a write back.
    """

    #: hits to read for one memory's successor (a collection may briefly show several copies)
    successor_window: int

    def ensure_index(self) -> None: ...

    def reindex(self) -> str: ...

    def drop_index(self) -> None: ...

    def erased_at(self, tenant: str, user_id: str) -> float | None:
        """When the user was last erased (epoch seconds), read consistently; ``None``: never."""
        ...

    def record_erasure(self, tenant: str, user_id: str) -> None: ...

    def put(self, records: builtins.list[MemoryRecord]) -> builtins.list[Op]: ...

    def supersede(self, tenant: str, user_id: str, old_id: str, new: MemoryRecord) -> builtins.list[Op]: ...

    def mark(self, tenant: str, user_id: str, ids: builtins.list[str], fields: dict[str, object]) -> int: ...

    def link_conflicts(self, tenant: str, user_id: str, links: dict[str, builtins.list[str]]) -> int:
        """Add ids to each memory's ``conflicts_with``; returns how many documents changed."""
        ...

    def erase(self, tenant: str, user_id: str) -> int:
        """Delete every document of the user; returns how many."""
        ...

    def tenant_config_store(self) -> TenantConfigStore:
        """Tenants' configurations on this flavour (``ports.tenant_config``), in ``<alias>-config``."""
        ...

    def source(self, tenant: str, user_id: str, memory_id: str) -> dict[str, Any] | None:
        """The current document of one memory, without vectors."""
        ...

    def sources(
        self, tenant: str, user_id: str, ids: builtins.list[str], *, embedding: bool
    ) -> dict[str, dict[str, Any]]:
        """The current document of each memory found, by memory id (``embedding``: with its vector)."""
        ...

    def collapse(self, hits: builtins.list[dict[str, Any]]) -> builtins.list[MemoryRecord]:
        """One record per memory among search hits, in the hits' order."""
        ...


def write_failure(result: dict[str, Any], what: str) -> Exception:
    """The error for a bulk item that did not land: ``Conflict`` for a 409, else ``DependencyFailed``."""
    if result.get("status") == 409:
        return Conflict(what)
    reason = (result.get("error") or {}).get("reason", "unknown error")
    return DependencyFailed(f"OpenSearch rejected the write: {reason}")
