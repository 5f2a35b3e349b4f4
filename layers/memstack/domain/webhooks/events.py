"""What a webhook delivers: one event per memory written (created, updated, deleted) or job failed.

An event carries ids and labels, never what the user said: a receiver that
wants a memory's text reads it with ``GET /v1/memories/{id}?user_id=``, with its
own credential. Raw turns (tier ``stm``) make no events: every message would,
and a new turn is already the answer of the add that stored it. No event
names its tenant: it goes to that tenant's own URL only.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from memstack.models import MemoryRecord, Tier
from memstack.ports.job_status import JobStatus

EventType = Literal["memory.created", "memory.updated", "memory.deleted", "job.failed"]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)


def new_event_id() -> str:
    return f"evt_{uuid.uuid4().hex}"


class WebhookEvent(BaseModel):
    id: str = Field(default_factory=new_event_id)
    type: EventType
    created_at: datetime
    user_id: str
    data: dict[str, Any]

    def body(self) -> bytes:
        """The delivered JSON (compact, so the signed bytes are the bytes sent)."""
        return json.dumps(self.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False).encode()


def memory_event(record: MemoryRecord, now: datetime) -> WebhookEvent | None:
    """The event of one written version: a tombstone deletes, a later version updates, a first creates."""
    if record.tier != Tier.LTM:
        return None
    if record.deleted:
        kind: EventType = "memory.deleted"
        data: dict[str, Any] = {"memory_id": record.replaces_id, "tombstone_id": record.id}
    else:
        kind = "memory.updated" if record.replaces_id else "memory.created"
        data = {
            "memory_id": record.id,
            "replaces_id": record.replaces_id,
            "kind": str(record.kind),
            "category": str(record.category) if record.category else None,
            "session_id": record.session_id,
            "agent_id": record.metadata.get("agent_id"),
            "source_ids": list(record.source_ids),
        }
    data["version"] = record.version
    return WebhookEvent(type=kind, created_at=now, user_id=record.user_id, data=data)


def memory_events(records: Iterable[MemoryRecord], now: datetime) -> list[WebhookEvent]:
    return [e for e in (memory_event(r, now) for r in records) if e is not None]


def job_failed_event(status: JobStatus, now: datetime) -> WebhookEvent:
    return WebhookEvent(
        type="job.failed",
        created_at=now,
        user_id=status.user_id,
        data={
            "job_id": status.id,
            "job_type": status.type,
            "attempts": status.attempts,
            "error": status.error.model_dump() if status.error else None,
        },
    )
