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
    def append(self, entries: list[StmEntry], *, fence: Fence | None = None) -> list[str]:
        """Durably store entries; an existing message id is left untouched.

        Returns the ids newly stored (a retried request stores nothing twice). With a
        ``fence``, raises ``Erased`` and stores none when the add began before the last
        erasure of an entry's user (the check in the same transaction as the write).
        """
        ...

    def withdraw(self, tenant: str, user_id: str, message_ids: list[str]) -> int:
        """Take back entries an add just stored, when the rest of that add failed; returns how many.

        Only the ids ``append`` returned to that add (its own new entries) are
        ever passed, so an entry another request stored is never touched.
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
