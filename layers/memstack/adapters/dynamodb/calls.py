"""The paginated and batched DynamoDB calls the store makes, with their retry loops.

``UnprocessedItems``/``UnprocessedKeys`` (what DynamoDB hands back when it is
busy) are sent again with exponential backoff, a bounded number of times.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from memstack.adapters.dynamodb import items
from memstack.errors import DependencyFailed

_BATCH_GET = 100
_UNPROCESSED_RETRIES = 8


def batch_write(client: Any, table: str, requests: list[dict[str, Any]]) -> None:
    """One ``BatchWriteItem`` (at most 25 requests), resending what DynamoDB left unprocessed."""
    pending = {table: requests}
    for attempt in range(_UNPROCESSED_RETRIES):
        response = client.batch_write_item(RequestItems=pending)
        pending = response.get("UnprocessedItems") or {}
        if not pending:
            return
        time.sleep(min(0.05 * 2**attempt, 2.0))
    raise DependencyFailed("DynamoDB kept returning unprocessed deletes; some items were not deleted")


def query_partition(
    client: Any,
    table: str,
    tenant: str,
    user_id: str,
    attributes: tuple[str, ...],
    *,
    memories_only: bool = True,
) -> Iterator[dict[str, Any]]:
    """Every item of one user's partition (memories only, or with ``META``), page by page, projected."""
    expression, names = items.projection(attributes)
    names = {**names, "#pk": "pk"}
    values: dict[str, Any] = {":pk": {"S": items.partition_key(tenant, user_id)}}
    condition = "#pk = :pk"
    if memories_only:
        names["#sk"] = "sk"
        values[":mem"] = {"S": items.MEMORY_PREFIX}
        condition += " AND begins_with(#sk, :mem)"
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": condition,
        "ConsistentRead": True,
        "ProjectionExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    for page in client.get_paginator("query").paginate(**kwargs):
        yield from page.get("Items", [])


def batch_get(
    client: Any, table: str, tenant: str, user_id: str, ids: list[str], attributes: tuple[str, ...]
) -> list[dict[str, Any]]:
    """The given memories of one user (missing ids are simply absent), 100 keys per request."""
    expression, names = items.projection(attributes)
    found: list[dict[str, Any]] = []
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _BATCH_GET):
        keys = [items.memory_key(tenant, user_id, i) for i in unique[start : start + _BATCH_GET]]
        request: dict[str, Any] = {
            table: {
                "Keys": keys,
                "ConsistentRead": True,
                "ProjectionExpression": expression,
                "ExpressionAttributeNames": names,
            }
        }
        for attempt in range(_UNPROCESSED_RETRIES):
            response = client.batch_get_item(RequestItems=request)
            found.extend(response.get("Responses", {}).get(table, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(min(0.05 * 2**attempt, 2.0))
        else:
            raise DependencyFailed("DynamoDB kept returning unprocessed keys")
    return found
