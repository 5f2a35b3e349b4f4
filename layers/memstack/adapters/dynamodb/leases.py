"""Leases as conditional items in the short-term table: ``pk = "<tenant>#<user>"``, ``sk = "lease#<name>"``.

Taking a lease is one conditional ``PutItem`` (no item, an expired one, or
our own); renewing and releasing are conditioned on the owner. The item
carries the table's TTL attribute (a day after the lease ends), so a lease
left behind is also cleaned away; it is not in the ``pending`` index, so no
reader of the short-term entries ever sees it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memstack.adapters.aws_errors import aws_dependency
from memstack.adapters.dynamodb.stm import LEASE_PREFIX, partition_key
from memstack.errors import SettingsError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.adapters.embedded.database import Database
    from memstack.settings import Settings

LEASES = "DynamoDB (leases)"
_KEEP_SECONDS = 86_400  # how long after its end an expired lease item may linger before TTL


class DynamoDbLeases:
    def __init__(
        self,
        table_name: str,
        client: Any = None,
        region: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not table_name:
            raise SettingsError("leases on DynamoDB need MEMSTACK_STM_TABLE")
        self.table = table_name
        self._client = client
        self._region = region
        self.clock = clock

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("dynamodb", region_name=self._region)
        return self._client

    def _key(self, tenant: str, user_id: str, name: str) -> dict[str, Any]:
        return {"pk": {"S": partition_key(tenant, user_id)}, "sk": {"S": LEASE_PREFIX + name}}

    @aws_dependency(LEASES)
    def acquire(self, tenant: str, user_id: str, name: str, owner: str, seconds: float) -> bool:
        now = self.clock()
        until = now + seconds
        try:
            self.client.put_item(
                TableName=self.table,
                Item={
                    **self._key(tenant, user_id, name),
                    "owner": {"S": owner},
                    "tenant": {"S": tenant},
                    "user_id": {"S": user_id},
                    "lease_until": {"N": repr(until)},
                    "expires_at": {"N": str(int(until) + _KEEP_SECONDS)},
                },
                ConditionExpression="attribute_not_exists(pk) OR lease_until < :now OR #o = :me",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":now": {"N": repr(now)}, ":me": {"S": owner}},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    @aws_dependency(LEASES)
    def renew(self, tenant: str, user_id: str, name: str, owner: str, seconds: float) -> bool:
        until = self.clock() + seconds
        try:
            self.client.update_item(
                TableName=self.table,
                Key=self._key(tenant, user_id, name),
                UpdateExpression="SET lease_until = :until, expires_at = :ttl",
                ConditionExpression="#o = :me",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={
                    ":until": {"N": repr(until)},
                    ":ttl": {"N": str(int(until) + _KEEP_SECONDS)},
                    ":me": {"S": owner},
                },
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    @aws_dependency(LEASES)
    def release(self, tenant: str, user_id: str, name: str, owner: str) -> None:
        try:
            self.client.delete_item(
                TableName=self.table,
                Key=self._key(tenant, user_id, name),
                ConditionExpression="#o = :me",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":me": {"S": owner}},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return  # no longer ours: nothing to give up

    def erase_user(self, tenant: str, user_id: str) -> int:
        return 0  # the items live in the user's STM partition, which the STM erase deletes whole


def build(settings: Settings, clients: Mapping[str, Any], db: Database | None) -> DynamoDbLeases:
    """Leases beside the DynamoDB STM, in its table (``factory.LEASES``)."""
    return DynamoDbLeases(
        settings.aws.stm_table or "", client=clients.get("dynamodb"), region=settings.aws.aws_region
    )
