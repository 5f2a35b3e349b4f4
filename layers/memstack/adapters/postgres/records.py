"""Memory records to and from the portable rows the executors exchange.

Times travel as whole microseconds since the epoch (exact both ways, and a
plain integer on both executors); JSON columns as text; records being
written go as one JSON document per statement (``jsonb_to_recordset``), so a
batch of any size is one round trip.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from memstack.adapters.postgres.executor import Row, json_text, vector_text
from memstack.adapters.stored_fields import record_from_fields, stored_fields
from memstack.models import MemoryRecord

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(value: datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - EPOCH) // timedelta(microseconds=1)


def from_micros(value: int | None) -> datetime | None:
    return EPOCH + timedelta(microseconds=int(value)) if value is not None else None


def time_sql(column: str) -> str:
    """A timestamptz column selected as whole microseconds since the epoch."""
    return f"(extract(epoch FROM {column}) * 1000000)::bigint"


def micros_sql(expression: str) -> str:
    """SQL turning microseconds since the epoch back into a timestamptz."""
    return f"(timestamptz 'epoch' + ({expression}) * interval '1 microsecond')"


#: the select list of a full record (without vectors), on alias ``m``
RECORD_COLUMNS = ", ".join(
    [
        "m.id",
        "m.tenant",
        "m.user_id",
        "m.session_id",
        "m.scope",
        "m.tier",
        "m.kind",
        "m.category",
        "m.content",
        "m.search_text",
        "m.speaker",
        f"{time_sql('m.event_time')} AS event_time",
        f"{time_sql('m.created_at')} AS created_at",
        "m.is_current",
        f"{time_sql('m.superseded_at')} AS superseded_at",
        "m.deleted",
        "m.replaces_id",
        "m.version",
        "m.source_ids::text AS source_ids",
        "m.metadata::text AS metadata",
        "m.conflicts_with::text AS conflicts_with",
        "m.seq",
    ]
)


#: the time fields of a record, which travel as microseconds
TIME_FIELDS = ("event_time", "created_at", "superseded_at")


def record_from_row(row: Row) -> MemoryRecord:
    fields = {**row, **{name: from_micros(row[name]) for name in TIME_FIELDS}}
    fields["source_ids"] = json.loads(row["source_ids"])
    fields["conflicts_with"] = json.loads(row["conflicts_with"])
    return record_from_fields(fields, id_key="id", load_metadata=json.loads)


def record_document(record: MemoryRecord) -> dict[str, Any]:
    """One record as the JSON object ``INSERT_COLUMNS`` reads back with ``jsonb_to_recordset``."""
    return {
        **stored_fields(record),
        **{name: micros(getattr(record, name)) for name in TIME_FIELDS},
        "id": record.id,
        "metadata": record.metadata,
        "embedding_full": vector_text(record.embedding_full),
        "embedding_coarse": vector_text(record.embedding_coarse),
    }


def records_json(records: list[MemoryRecord]) -> str:
    return json_text([record_document(r) for r in records])


def record_batches(records: list[MemoryRecord], max_bytes: int | None) -> list[str]:
    """``records_json`` of consecutive slices, each under ``max_bytes`` when there is a limit."""
    if max_bytes is None:
        return [records_json(records)]
    batches: list[str] = []
    current: list[str] = []
    size = 2
    for record in records:
        doc = json_text(record_document(record))
        if current and size + len(doc.encode()) + 1 > max_bytes:
            batches.append("[" + ",".join(current) + "]")
            current, size = [], 2
        current.append(doc)
        size += len(doc.encode()) + 1
    batches.append("[" + ",".join(current) + "]")
    return batches


#: ``jsonb_to_recordset`` column list for ``record_document`` objects
RECORDSET_TYPES = (
    "tenant text, user_id text, id text, session_id text, scope text, tier text, kind text, "
    "category text, content text, search_text text, speaker text, event_time bigint, "
    "created_at bigint, is_current boolean, superseded_at bigint, deleted boolean, replaces_id text, "
    "version integer, source_ids jsonb, metadata jsonb, embedding_full text, embedding_coarse text, "
    "conflicts_with jsonb"
)

#: target columns of an insert, and the matching select list over recordset alias ``r``
INSERT_COLUMNS = (
    "tenant, user_id, id, session_id, scope, tier, kind, category, content, search_text, speaker, "
    "event_time, created_at, is_current, superseded_at, deleted, replaces_id, version, source_ids, "
    "metadata, embedding_full, embedding_coarse, conflicts_with"
)
INSERT_VALUES = ", ".join(
    [
        "r.tenant",
        "r.user_id",
        "r.id",
        "r.session_id",
        "r.scope",
        "r.tier",
        "r.kind",
        "r.category",
        "r.content",
        "r.search_text",
        "r.speaker",
        micros_sql("r.event_time"),
        micros_sql("r.created_at"),
        "r.is_current",
        micros_sql("r.superseded_at"),
        "r.deleted",
        "r.replaces_id",
        "r.version",
        "r.source_ids",
        "r.metadata",
        "CAST(r.embedding_full AS vector)",
        "CAST(r.embedding_coarse AS vector)",
        "COALESCE(r.conflicts_with, '[]')",
    ]
)
