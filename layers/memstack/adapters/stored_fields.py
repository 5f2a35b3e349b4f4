"""The fields of a memory record as the remote stores keep them, and back.

DynamoDB items and OpenSearch documents store the same record fields the same
way (enums as strings, times as ISO 8601); they differ only in the id's name,
how metadata is encoded, and their own extra keys, which each adapter adds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from memstack.models import MemoryRecord

#: the keys of ``stored_fields``, in its order (DynamoDB projects them by name)
FIELD_NAMES = (
    "tenant",
    "user_id",
    "session_id",
    "scope",
    "tier",
    "kind",
    "category",
    "content",
    "search_text",
    "speaker",
    "event_time",
    "created_at",
    "is_current",
    "superseded_at",
    "deleted",
    "replaces_id",
    "version",
    "source_ids",
    "conflicts_with",
)


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def stored_fields(record: MemoryRecord) -> dict[str, Any]:
    """Every field but the id, the metadata and the vectors (``FIELD_NAMES``); ``None`` where absent."""
    return {
        "tenant": record.tenant,
        "user_id": record.user_id,
        "session_id": record.session_id,
        "scope": str(record.scope),
        "tier": str(record.tier),
        "kind": str(record.kind),
        "category": str(record.category) if record.category else None,
        "content": record.content,
        "search_text": record.search_text,
        "speaker": record.speaker,
        "event_time": iso(record.event_time),
        "created_at": iso(record.created_at),
        "is_current": record.is_current,
        "superseded_at": iso(record.superseded_at),
        "deleted": record.deleted,
        "replaces_id": record.replaces_id,
        "version": record.version,
        "source_ids": list(record.source_ids),
        "conflicts_with": list(record.conflicts_with),
    }


def record_from_fields(
    fields: Mapping[str, Any], *, id_key: str, load_metadata: Callable[[Any], dict[str, Any]]
) -> MemoryRecord:
    """A record (without vectors); ``load_metadata`` decodes the stored metadata (None if absent)."""
    return MemoryRecord(
        id=fields[id_key],
        tenant=fields["tenant"],
        user_id=fields["user_id"],
        session_id=fields.get("session_id"),
        scope=fields["scope"],
        tier=fields["tier"],
        kind=fields["kind"],
        category=fields.get("category"),
        content=fields["content"],
        search_text=fields.get("search_text"),
        speaker=fields.get("speaker"),
        event_time=fields.get("event_time"),
        created_at=fields["created_at"],
        is_current=bool(fields["is_current"]),
        superseded_at=fields.get("superseded_at"),
        deleted=bool(fields.get("deleted", False)),
        replaces_id=fields.get("replaces_id"),
        version=int(fields["version"]),
        source_ids=list(fields.get("source_ids") or []),
        conflicts_with=list(fields.get("conflicts_with") or []),
        metadata=load_metadata(fields.get("metadata")),
    )
