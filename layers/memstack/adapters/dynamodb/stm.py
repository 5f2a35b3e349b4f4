"""The short-term store on DynamoDB (one table; E provisions it with exactly this schema).

Items of one user share the partition ``pk = "<tenant>#<user_id>"``:

* an **entry** per message, ``sk = "<ISO UTC timestamp>#<message id>"``, so a
  partition reads in arrival order; while unconsolidated it carries
  ``pending = pk``, which puts it in the sparse GSI ``pending`` (the
  consolidation scheduler and jobs read only that index);
* a **guard** per message id, ``sk = "msg#<message id>"``, written in the same
  transaction as the entry with ``attribute_not_exists``: the entry key holds a
  timestamp, so only the guard can refuse a second write of the same message id
  (a retried request) and find the entry again by message id.

Both carry the TTL attribute ``expires_at`` (epoch seconds). DynamoDB deletes
expired items late (up to days), so every read here filters expired items out
itself, and every read paginates.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from memstack.errors import DependencyFailed, SettingsError
from memstack.models import Message
from memstack.ports.stm import StmEntry

PENDING_INDEX = "pending"
GUARD_PREFIX = "msg#"
_ser = TypeSerializer()
_de = TypeDeserializer()


def partition_key(tenant: str, user_id: str) -> str:
    return f"{tenant}#{user_id}"


def entry_sort_key(received_at: datetime, message_id: str) -> str:
    # Fixed-width UTC ISO form, so string order is time order.
    ts = received_at.astimezone(UTC).isoformat(timespec="microseconds")
    return f"{ts}#{message_id}"


def _item(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in values.items() if v is not None}


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _de.deserialize(v) for k, v in item.items()}


def _entry(item: dict[str, Any]) -> StmEntry:
    v = _plain(item)
    return StmEntry(
        tenant=v["tenant"],
        user_id=v["user_id"],
        session_id=v.get("session_id"),
        scope=v["scope"],
        message=Message.model_validate_json(v["message"]),
        received_at=datetime.fromisoformat(v["received_at"]),
        expires_at=int(v["expires_at"]),
        consolidated=bool(v["consolidated"]),
    )


def create_stm_table(client: Any, table_name: str) -> None:
    """Create the table as the CDK stack does (tests, DynamoDB Local); TTL on ``expires_at``."""
    client.create_table(
        TableName=table_name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "pending", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": PENDING_INDEX,
                "KeySchema": [
                    {"AttributeName": "pending", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    client.get_waiter("table_exists").wait(TableName=table_name)
    client.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )


class DynamoDbShortTermStore:
    def __init__(self, table_name: str, client: Any = None, region: str | None = None) -> None:
        if not table_name:
            raise SettingsError("stm_backend=dynamodb needs MEMSTACK_STM_TABLE")
        self.table = table_name
        self._client = client
        self._region = region

    @property
    def client(self) -> Any:
        if self._client is None:  # created on first use: importing this module costs nothing
            import boto3

            self._client = boto3.client("dynamodb", region_name=self._region)
        return self._client

    # ------------------------------------------------------------------ helpers
    def _pages(self, method: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item of a Query or Scan, following ``LastEvaluatedKey``."""
        call = getattr(self.client, method)
        while True:
            page = call(TableName=self.table, **kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _entry_key(self, tenant: str, user_id: str, message_id: str) -> dict[str, Any] | None:
        guard = self.client.get_item(
            TableName=self.table,
            Key=_item({"pk": partition_key(tenant, user_id), "sk": GUARD_PREFIX + message_id}),
            ConsistentRead=True,
        ).get("Item")
        if guard is None:
            return None
        g = _plain(guard)
        # "<tenant>#<user>" is ambiguous when an id contains '#': the stored owner decides.
        if g.get("tenant", tenant) != tenant or g.get("user_id", user_id) != user_id:
            return None
        return _item({"pk": partition_key(tenant, user_id), "sk": g["entry_sk"]})

    def _delete_keys(self, keys: list[dict[str, Any]]) -> int:
        for start in range(0, len(keys), 25):
            requests: list[dict[str, Any]] = [{"DeleteRequest": {"Key": k}} for k in keys[start : start + 25]]
            pending: dict[str, Any] = {self.table: requests}
            for attempt in range(8):
                out = self.client.batch_write_item(RequestItems=pending)
                pending = out.get("UnprocessedItems") or {}
                if not pending:
                    break
                time.sleep(min(0.05 * 2**attempt, 2.0))
            else:
                raise DependencyFailed("DynamoDB kept throttling deletes from the STM table")
        return len(keys)

    # ----------------------------------------------------------------- the port
    def append(self, entries: list[StmEntry]) -> list[str]:
        stored: list[str] = []
        for e in entries:
            pk = partition_key(e.tenant, e.user_id)
            sk = entry_sort_key(e.received_at, e.message.id)
            entry = _item(
                {
                    "pk": pk,
                    "sk": sk,
                    "tenant": e.tenant,
                    "user_id": e.user_id,
                    "message_id": e.message.id,
                    "session_id": e.session_id,
                    "scope": str(e.scope),
                    "received_at": e.received_at.astimezone(UTC).isoformat(),
                    "expires_at": e.expires_at,
                    "consolidated": e.consolidated,
                    "message": e.message.model_dump_json(),
                    "pending": None if e.consolidated else pk,
                }
            )
            guard = _item(
                {
                    "pk": pk,
                    "sk": GUARD_PREFIX + e.message.id,
                    "entry_sk": sk,
                    "tenant": e.tenant,
                    "user_id": e.user_id,
                    "expires_at": e.expires_at,
                }
            )
            try:
                self.client.transact_write_items(
                    TransactItems=[
                        {
                            "Put": {
                                "TableName": self.table,
                                "Item": guard,
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                        {
                            "Put": {
                                "TableName": self.table,
                                "Item": entry,
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                    ]
                )
            except self.client.exceptions.TransactionCanceledException as exc:
                reasons = exc.response.get("CancellationReasons", [])
                if any(r.get("Code") == "ConditionalCheckFailed" for r in reasons):
                    continue  # this message id is already stored: leave it untouched
                raise DependencyFailed(f"could not store STM entry {e.message.id}: {exc}") from exc
            stored.append(e.message.id)
        return stored

    def get(self, tenant: str, user_id: str, message_id: str) -> StmEntry | None:
        key = self._entry_key(tenant, user_id, message_id)
        if key is None:
            return None
        item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        if item is None:
            return None
        entry = _entry(item)
        return entry if entry.expires_at > time.time() else None

    def unconsolidated(
        self, tenant: str, user_id: str, now: datetime, limit: int | None = None
    ) -> list[StmEntry]:
        now_s = int(now.timestamp())
        out: list[StmEntry] = []
        items = self._pages(
            "query",
            IndexName=PENDING_INDEX,
            KeyConditionExpression="pending = :p",
            FilterExpression="expires_at > :now",
            ExpressionAttributeValues=_item({":p": partition_key(tenant, user_id), ":now": now_s}),
            ScanIndexForward=True,
        )
        for item in items:
            entry = _entry(item)
            # The index is keyed by tenant#user, but the stored fields are checked too:
            # a user id containing '#' must never read another user's partition.
            if entry.tenant != tenant or entry.user_id != user_id or entry.expires_at <= now_s:
                continue
            out.append(entry)
            if limit is not None and len(out) >= limit:
                break
        return out

    def mark_consolidated(self, tenant: str, user_id: str, message_ids: list[str]) -> int:
        changed = 0
        for mid in message_ids:
            key = self._entry_key(tenant, user_id, mid)
            if key is None:
                continue
            try:
                self.client.update_item(
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET consolidated = :t REMOVE pending",
                    ConditionExpression="attribute_exists(pk) AND consolidated = :f",
                    ExpressionAttributeValues=_item({":t": True, ":f": False}),
                )
            except self.client.exceptions.ConditionalCheckFailedException:
                continue  # already consolidated (or gone): marking is idempotent
            changed += 1
        return changed

    def users_with_pending(self, now: datetime) -> list[tuple[str, str, int, datetime]]:
        # A scan of the sparse index reads only unconsolidated entries, never the whole table.
        found: dict[tuple[str, str], tuple[int, datetime]] = {}
        items = self._pages(
            "scan",
            IndexName=PENDING_INDEX,
            FilterExpression="expires_at > :now",
            ProjectionExpression="tenant, user_id, received_at",
            ExpressionAttributeValues=_item({":now": int(now.timestamp())}),
        )
        for item in items:
            v = _plain(item)
            key = (v["tenant"], v["user_id"])
            received = datetime.fromisoformat(v["received_at"])
            n, oldest = found.get(key, (0, received))
            found[key] = (n + 1, min(oldest, received))
        return [(t, u, n, oldest) for (t, u), (n, oldest) in sorted(found.items())]

    def erase_user(self, tenant: str, user_id: str) -> int:
        keys = list(
            self._pages(
                "query",
                KeyConditionExpression="pk = :pk",
                ProjectionExpression="pk, sk",
                ExpressionAttributeValues=_item({":pk": partition_key(tenant, user_id)}),
                ConsistentRead=True,
            )
        )
        entries = sum(1 for k in keys if not _plain(k)["sk"].startswith(GUARD_PREFIX))
        self._delete_keys(keys)
        return entries

    def purge_expired(self, now: datetime) -> int:
        """Housekeeping: delete expired entries still in the pending index (and their guards).

        DynamoDB TTL removes everything else on its own; this pass only keeps
        expired-but-unconsolidated entries from lingering in the index the
        scheduler scans. (Reads ignore expired items either way.)
        """
        keys: list[dict[str, Any]] = []
        items = self._pages(
            "scan",
            IndexName=PENDING_INDEX,
            FilterExpression="expires_at <= :now",
            ProjectionExpression="pk, sk, message_id",
            ExpressionAttributeValues=_item({":now": int(now.timestamp())}),
        )
        entries = 0
        for item in items:
            v = _plain(item)
            keys.append(_item({"pk": v["pk"], "sk": v["sk"]}))
            keys.append(_item({"pk": v["pk"], "sk": GUARD_PREFIX + v["message_id"]}))
            entries += 1
        self._delete_keys(keys)
        return entries
