"""The short-term memory port: raw recent turns that expire (Memoria's STM)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from memstack.models import Message, Scope
from memstack.ports.store import Fence

#: "none": stored without extraction; "pending": an extraction job is owed (the outbox);
#: "done": an extraction job finished for it.
ExtractionState = Literal["none", "pending", "done"]


class StmEntry(BaseModel):
    tenant: str
    user_id: str
    session_id: str | None = None
    scope: Scope = Scope.USER
    message: Message
    received_at: datetime
    expires_at: int = Field(description="epoch seconds after which the entry is gone")
    consolidated: bool = False
    extraction: ExtractionState = "none"


class ShortTermStore(Protocol):
    def append(
        self, entries: list[StmEntry], *, fence: Fence | None = None, claim: str | None = None
    ) -> list[str]:
        """Durably store entries; an existing message id is left untouched.

        Returns the ids newly stored (a retried request stores nothing twice). With a
        ``fence``, raises ``Erased`` and stores none when the add began before the last
        erasure of an entry's user (the check in the same transaction as the write).
        The new entries carry ``claim`` (a token of the add that stores them): only a
        ``withdraw`` with that claim can take them back, and only until they are adopted.
        """
        ...

    def withdraw(self, tenant: str, user_id: str, message_ids: list[str], claim: str) -> int:
        """Take back entries an add just stored, when the rest of that add failed; returns how many.

        Only entries still held by ``claim`` go: an entry another request stored, or
        one a concurrent duplicate adopted (it may have answered yes on it), stays.
        """
        ...

    def adopt(self, tenant: str, user_id: str, message_ids: list[str]) -> list[str]:
        """Make entries stored by another request permanent: no ``withdraw`` takes them back any more.

        An add that found its messages already stored (a duplicate or a retry) calls
        this before it answers yes. Returns the ids not stored (an entry the storing
        add took back first), which the caller must store again itself.
        """
        ...

    def get(self, tenant: str, user_id: str, message_id: str) -> StmEntry | None: ...

    def unextracted(self, tenant: str, user_id: str, message_ids: list[str]) -> dict[str, datetime]:
        """Of ``message_ids``, the entries still owed an extraction (state "pending"): id -> received_at.

        The outbox: a retried add re-enqueues exactly these, so a message stored
        by a request whose enqueue failed is never left unextracted.
        """
        ...

    def stale_pending(
        self, since: datetime, before: datetime, now: datetime, limit: int
    ) -> list[tuple[str, str, str, datetime]]:
        """Unexpired entries still owed an extraction, received from ``since`` to ``before``, oldest first.

        (tenant, user_id, message_id, received_at), at most ``limit``: what the outbox sweep re-enqueues.
        """
        ...

    def mark_extracted(self, tenant: str, user_id: str, message_ids: list[str]) -> int:
        """Record that extraction finished for these entries (state "done"); returns how many changed."""
        ...

    def unconsolidated(
        self, tenant: str, user_id: str, now: datetime, limit: int | None = None
    ) -> list[StmEntry]:
        """Unexpired, unconsolidated entries of one user, oldest first."""
        ...

    def mark_consolidated(self, tenant: str, user_id: str, message_ids: list[str]) -> int: ...

    def users_with_pending(self, now: datetime) -> list[tuple[str, str, int, datetime]]:
        """(tenant, user_id, unconsolidated count, oldest received_at) for every user with work."""
        ...

    def erase_user(self, tenant: str, user_id: str) -> int: ...

    def purge_expired(self, now: datetime) -> int: ...


@runtime_checkable
class ErasureLog(Protocol):
    """Optional extra of a short-term store: when a user was last erased, read consistently.

    A store with no consistent read of its own (an OpenSearch Serverless
    collection) fences its writes with this log instead (``MemoryStore``'s
    erase rule); the factory hands it the STM when the STM keeps one.
    """

    def erased_at(self, tenant: str, user_id: str) -> float | None:
        """When the user was last erased (epoch seconds); None if never (or the marker expired)."""
        ...
