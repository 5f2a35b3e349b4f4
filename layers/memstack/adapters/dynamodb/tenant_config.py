"""Tenants' configurations in the memories table: item ``pk = "<tenant>#"``, ``sk = "CONFIG"``.

The tenant's directory partition (``items.directory_partition``) holds it
beside the ``USER#`` items; "CONFIG" sorts before "USER#", so the user
listing (``sk > "USER#..."``) never reads it, and the directory backfill scans
only ``MEM#`` items. Attributes: ``document`` (the JSON text), ``version``
(N), ``updated_at`` (ISO 8601). A write is one conditional ``PutItem`` on the
version it read (``attribute_not_exists`` for the first), read back with
``ConsistentRead``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from memstack.adapters.dynamodb.items import directory_partition
from memstack.errors import Conflict
from memstack.ports.tenant_config import NO_CONFIG, StoredConfig

CONFIG_SK = "CONFIG"


def config_key(tenant: str) -> dict[str, Any]:
    return {"pk": {"S": directory_partition(tenant)}, "sk": {"S": CONFIG_SK}}


class DynamoDbTenantConfigStore:
    """``client`` is a callable giving the boto3 client (the memory store's, created lazily)."""

    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self._client = client

    @property
    def client(self) -> Any:
        return self._client() if callable(self._client) else self._client

    def get(self, tenant: str) -> StoredConfig:
        item = self.client.get_item(TableName=self.table, Key=config_key(tenant), ConsistentRead=True).get(
            "Item"
        )
        if not item:
            return NO_CONFIG
        return StoredConfig(
            document=json.loads(item["document"]["S"]),
            version=int(item["version"]["N"]),
            updated_at=datetime.fromisoformat(item["updated_at"]["S"]),
        )

    def put(
        self, tenant: str, document: dict[str, Any], expected_version: int, now: datetime
    ) -> StoredConfig:
        version = expected_version + 1
        condition: dict[str, Any] = (
            {"ConditionExpression": "attribute_not_exists(#pk)", "ExpressionAttributeNames": {"#pk": "pk"}}
            if expected_version == 0
            else {
                "ConditionExpression": "#v = :expected",
                "ExpressionAttributeNames": {"#v": "version"},
                "ExpressionAttributeValues": {":expected": {"N": str(expected_version)}},
            }
        )
        try:
            self.client.put_item(
                TableName=self.table,
                Item={
                    **config_key(tenant),
                    "document": {"S": json.dumps(document, ensure_ascii=False, separators=(",", ":"))},
                    "version": {"N": str(version)},
                    "updated_at": {"S": now.isoformat()},
                },
                **condition,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise Conflict(f"the configuration is no longer at version {expected_version}") from exc
            raise
        return StoredConfig(document=document, version=version, updated_at=now)
