"""The erase fence on DynamoDB (the marker and the condition on it), shared by the memory and STM tables."""

from __future__ import annotations

import time
from typing import Any

from memstack.domain.erasure import RETENTION_SECONDS, Fence, erasure_key

#: erasure markers (domain/erasure.py) live in their own partitions, keyed by a hash of the user
ERASED_PREFIX = "ERASED#"


def marker_key(tenant: str, user_id: str) -> dict[str, Any]:
    """The memory table's erasure marker of one user."""
    return {"pk": {"S": ERASED_PREFIX + erasure_key(tenant, user_id)}, "sk": {"S": "ERASED"}}


def mark_erased(client: Any, table: str, marker_key: dict[str, Any]) -> float:
    """Write the user's erasure marker (kept ``RETENTION_SECONDS``, then TTL); returns its time."""
    now = time.time()
    client.put_item(
        TableName=table,
        Item={
            **marker_key,
            "erased_at": {"N": repr(now)},
            "expires_at": {"N": str(int(now + RETENTION_SECONDS))},
        },
    )
    return now


def not_erased_since(table: str, marker_key: dict[str, Any], fence: Fence | None) -> list[dict[str, Any]]:
    """The write's condition that the user was not erased after the work writing began (``fence``).

    One ``ConditionCheck`` on the user's erasure marker, to put in the write's own
    transaction; none without a fence (a direct API write).
    """
    if fence is None:
        return []
    began = fence.began
    return [
        {
            "ConditionCheck": {
                "TableName": table,
                "Key": marker_key,
                "ConditionExpression": "attribute_not_exists(pk) OR erased_at < :began",
                "ExpressionAttributeValues": {":began": {"N": repr(began)}},
            }
        }
    ]
