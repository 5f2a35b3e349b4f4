"""Memory records <-> DynamoDB items.

Kept apart from the store so the marshalling can be read and tested on its own (the filter
rule applied in-process is ``domain.record_filter``'s, as numpy columns in the snapshot).
"""

from __future__ import annotations

import json
from typing import Any

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

from memstack.adapters.stored_fields import FIELD_NAMES, record_from_fields, stored_fields
from memstack.domain.vectors import to_blob
from memstack.models import MemoryRecord

MEMORY_PREFIX = "MEM#"
META_SK = "META"
#: a tenant's user directory (GET /v1/users): partition "<tenant>#", one item per user. No memory
#: partition can be named so: its "<tenant>#<user_id>" would need a user id ending in "#", which
#: the API refuses.
USER_PREFIX = "USER#"

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

#: what a snapshot holds of a memory item: every attribute but the coarse vector (the snapshot
#: ranks the full vectors, exactly, and derives a coarse pass from them when asked for one)
SEARCH_ATTRIBUTES = ("pk", "sk", "id", *FIELD_NAMES, "metadata", "emb_full")
#: the attributes of a record without either vector (get, get_many)
RECORD_ATTRIBUTES = tuple(a for a in SEARCH_ATTRIBUTES if a != "emb_full")


def partition_key(tenant: str, user_id: str) -> str:
    return f"{tenant}#{user_id}"


def memory_key(tenant: str, user_id: str, memory_id: str) -> dict[str, Any]:
    return {"pk": {"S": partition_key(tenant, user_id)}, "sk": {"S": MEMORY_PREFIX + memory_id}}


def meta_key(tenant: str, user_id: str) -> dict[str, Any]:
    return {"pk": {"S": partition_key(tenant, user_id)}, "sk": {"S": META_SK}}


def directory_partition(tenant: str) -> str:
    return f"{tenant}#"


def directory_key(tenant: str, user_id: str) -> dict[str, Any]:
    return {"pk": {"S": directory_partition(tenant)}, "sk": {"S": USER_PREFIX + user_id}}


def live_counts(records: list[MemoryRecord]) -> dict[str, int]:
    """How many current, not deleted records of each tier ``records`` holds (the directory's counters)."""
    counts = {"stm": 0, "ltm": 0}
    for r in records:
        if r.is_current and not r.deleted:
            counts[str(r.tier)] += 1
    return counts


def projection(attributes: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """A ProjectionExpression with every name aliased (many of ours are reserved words)."""
    names = {f"#p{i}": name for i, name in enumerate(attributes)}
    return ", ".join(names), names


def to_item(record: MemoryRecord) -> dict[str, Any]:
    """The low-level (typed) item of a record; absent optional values are left out."""
    plain: dict[str, Any] = {
        "pk": partition_key(record.tenant, record.user_id),
        "sk": MEMORY_PREFIX + record.id,
        "id": record.id,
        **stored_fields(record),
        # JSON, not a map: metadata may hold floats, which a DynamoDB map would need as Decimals.
        "metadata": json.dumps(record.metadata, sort_keys=True),
        "emb_full": to_blob(record.embedding_full),
        "emb_coarse": to_blob(record.embedding_coarse),
    }
    return {k: _serializer.serialize(v) for k, v in plain.items() if v is not None}


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def binary(value: Any) -> bytes | None:
    if value is None:
        return None
    return bytes(value.value) if isinstance(value, Binary) else bytes(value)


def from_item(item: dict[str, Any]) -> MemoryRecord:
    """A record (without vectors) from a low-level item."""
    return record_from_fields(_plain(item), id_key="id", load_metadata=lambda raw: json.loads(raw or "{}"))
