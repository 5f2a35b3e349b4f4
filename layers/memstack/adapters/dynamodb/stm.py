"""The short-term store on DynamoDB (one table; E provisions it with exactly this schema).

Items of one user share the partition ``pk = "<tenant>#<user_id>"``:

* an **entry** per message, ``sk = "<ISO UTC timestamp>#<message id>"``, so a
  partition reads in arrival order; while unconsolidated it carries
  ``pending = pk``, which puts it in the sparse GSI ``pending`` (the
  consolidation scheduler and jobs read only that index);
* a **guard** per message id, ``sk = "msg#<message id>"``, written in the same
  transaction as the entry with ``attribute_not_exists``: the entry key holds a
  timestamp, so only the guard can refuse a second write of the same message id
  (a retried request) and find the entry again by message id. The guard also
  holds the entry's ``extraction`` state (the outbox: "pending" until an
  extraction job finishes), so checking or marking it is one keyed call.

A request's messages are written in as few transactions as DynamoDB allows
(up to 49 messages, 100 actions with the erase fence, ~3 MB each), each all-or-nothing; a message id
already stored drops out of its transaction, which is then sent again. If a
later transaction fails, the earlier ones stay written and the caller gets a
503: its retry stores the rest, and the outbox re-enqueues what the first
attempt stored but never queued.

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

from memstack.adapters.aws_errors import aws_dependency
from memstack.adapters.batches import size_batches
from memstack.adapters.dynamodb.fence import mark_erased, not_erased_since
from memstack.domain.erasure import Fence, erased_while_working, erasure_key
from memstack.errors import DependencyFailed, SettingsError
from memstack.models import Message
from memstack.ports.stm import StmEntry

PENDING_INDEX = "pending"
GUARD_PREFIX = "msg#"
ERASED_PREFIX = "ERASED#"  # erasure markers (domain/erasure.py), keyed by a hash of the user
LEASE_PREFIX = "lease#"  # per-user leases (``adapters.dynamodb.leases``) share the user's partition
_TX_MESSAGES = 49  # two actions each, and the erase fence: DynamoDB takes at most 100 per transaction
_TX_BYTES = 3_000_000  # of its 4 MB
_TX_ATTEMPTS = 6
#: cancellation reasons that say "send it again", not "your condition failed"
_TRANSIENT = frozenset({"None", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})
STM = "DynamoDB (short-term memory)"
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


def _approx_bytes(e: StmEntry) -> int:
    return 2 * len(e.message.content.encode()) + 2048  # the text (alone and in the JSON) and the keys


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

    def _guard(self, tenant: str, user_id: str, message_id: str) -> dict[str, Any] | None:
        """The guard item of a message id (plain values), if this user stored it."""
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
        return g

    def _entry_key(self, tenant: str, user_id: str, message_id: str) -> dict[str, Any] | None:
        g = self._guard(tenant, user_id, message_id)
        return None if g is None else _item({"pk": partition_key(tenant, user_id), "sk": g["entry_sk"]})

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
    def _items(self, e: StmEntry) -> tuple[dict[str, Any], dict[str, Any]]:
        """(guard, entry) items of one message."""
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
                "extraction": e.extraction,
            }
        )
        return guard, entry

    def _write_all_new(self, batch: list[StmEntry], fence: Fence | None) -> list[str]:
        """One transaction for ``batch``; message ids already stored drop out and it is sent again."""
        todo = list(batch)
        for attempt in range(_TX_ATTEMPTS):
            if not todo:
                return []
            actions = []
            for e in todo:
                for item in self._items(e):
                    actions.append(
                        {
                            "Put": {
                                "TableName": self.table,
                                "Item": item,
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        }
                    )
            check = self._not_erased_since(todo[0].tenant, todo[0].user_id, fence)
            try:
                self.client.transact_write_items(TransactItems=[*actions, *check])
                return [e.message.id for e in todo]
            except self.client.exceptions.TransactionCanceledException as exc:
                codes = [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons", [])]
            if check and codes[len(actions) :] == ["ConditionalCheckFailed"]:
                raise erased_while_working()  # the user was erased after this add began
            if "ConditionalCheckFailed" in codes:
                # Items come in (guard, entry) pairs: a failed condition on either means "already stored".
                known = {i // 2 for i, code in enumerate(codes) if code == "ConditionalCheckFailed"}
                todo = [e for i, e in enumerate(todo) if i not in known]
                continue
            if not set(codes) <= _TRANSIENT:
                raise DependencyFailed(f"{STM} refused the write ({', '.join(sorted(set(codes)))})")
            time.sleep(min(0.05 * 2**attempt, 1.0))
        raise DependencyFailed(f"{STM} kept cancelling the write; retry shortly (nothing is stored twice)")

    def _marker_key(self, tenant: str, user_id: str) -> dict[str, Any]:
        return _item({"pk": ERASED_PREFIX + erasure_key(tenant, user_id), "sk": "ERASED"})

    @aws_dependency(STM)
    def erased_at(self, tenant: str, user_id: str) -> float | None:
        """When the user was last erased (the marker's time), read consistently: the erasure log."""
        item = self.client.get_item(
            TableName=self.table, Key=self._marker_key(tenant, user_id), ConsistentRead=True
        ).get("Item")
        return float(item["erased_at"]["N"]) if item and "erased_at" in item else None

    def _not_erased_since(self, tenant: str, user_id: str, fence: Fence | None) -> list[dict[str, Any]]:
        return not_erased_since(self.table, self._marker_key(tenant, user_id), fence)

    @aws_dependency(STM)
    def append(self, entries: list[StmEntry], *, fence: Fence | None = None) -> list[str]:
        # One transaction may not touch an item twice: a repeated message id is the same message.
        first: dict[tuple[str, str, str], StmEntry] = {}
        for e in entries:
            first.setdefault((e.tenant, e.user_id, e.message.id), e)
        unique = list(first.values())
        stored: list[str] = []
        for batch in size_batches(unique, _TX_MESSAGES, _TX_BYTES, _approx_bytes):
            stored += self._write_all_new(batch, fence)
        return stored

    @aws_dependency(STM)
    def get(self, tenant: str, user_id: str, message_id: str) -> StmEntry | None:
        guard = self._guard(tenant, user_id, message_id)
        if guard is None:
            return None
        key = _item({"pk": partition_key(tenant, user_id), "sk": guard["entry_sk"]})
        item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        if item is None:
            return None
        entry = _entry(item).model_copy(update={"extraction": guard.get("extraction", "none")})
        return entry if entry.expires_at > time.time() else None

    @aws_dependency(STM)
    def stale_pending(
        self, since: datetime, before: datetime, now: datetime, limit: int
    ) -> list[tuple[str, str, str, datetime]]:
        # The extraction state is on the guard items: a filtered scan (the scheduler's, once a pass).
        found = []
        for item in self._pages(
            "scan",
            FilterExpression="extraction = :pending AND expires_at > :now",
            ProjectionExpression="sk, entry_sk, tenant, user_id",
            ExpressionAttributeValues=_item({":pending": "pending", ":now": int(now.timestamp())}),
        ):
            g = _plain(item)
            received = datetime.fromisoformat(str(g["entry_sk"]).split("#", 1)[0])
            if since <= received < before:
                found.append(
                    (str(g["tenant"]), str(g["user_id"]), str(g["sk"])[len(GUARD_PREFIX) :], received)
                )
        return sorted(found, key=lambda f: f[3])[:limit]

    @aws_dependency(STM)
    def unextracted(self, tenant: str, user_id: str, message_ids: list[str]) -> dict[str, datetime]:
        pk = partition_key(tenant, user_id)
        out: dict[str, datetime] = {}
        unique = list(dict.fromkeys(message_ids))
        for start in range(0, len(unique), 100):  # BatchGetItem takes at most 100 keys
            keys = [_item({"pk": pk, "sk": GUARD_PREFIX + m}) for m in unique[start : start + 100]]
            request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": True}}
            for attempt in range(8):
                page = self.client.batch_get_item(RequestItems=request)
                for item in page.get("Responses", {}).get(self.table, []):
                    g = _plain(item)
                    if g.get("extraction") != "pending" or (g.get("tenant"), g.get("user_id")) != (
                        tenant,
                        user_id,
                    ):
                        continue
                    message_id = str(g["sk"])[len(GUARD_PREFIX) :]
                    out[message_id] = datetime.fromisoformat(str(g["entry_sk"]).split("#", 1)[0])
                request = page.get("UnprocessedKeys") or {}
                if not request:
                    break
                time.sleep(min(0.05 * 2**attempt, 2.0))
            else:
                raise DependencyFailed(f"{STM} kept returning unprocessed keys")
        return out

    @aws_dependency(STM)
    def mark_extracted(self, tenant: str, user_id: str, message_ids: list[str]) -> int:
        changed = 0
        for mid in message_ids:
            try:
                self.client.update_item(
                    TableName=self.table,
                    Key=_item({"pk": partition_key(tenant, user_id), "sk": GUARD_PREFIX + mid}),
                    UpdateExpression="SET extraction = :done",
                    ConditionExpression="extraction = :pending",
                    ExpressionAttributeValues=_item({":done": "done", ":pending": "pending"}),
                )
            except self.client.exceptions.ConditionalCheckFailedException:
                continue  # already done, never owed, or erased: marking is idempotent
            changed += 1
        return changed

    @aws_dependency(STM)
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

    @aws_dependency(STM)
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

    @aws_dependency(STM)
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

    @aws_dependency(STM)
    def erase_user(self, tenant: str, user_id: str) -> int:
        # First the marker: an add that began before it stores nothing from now on.
        mark_erased(self.client, self.table, self._marker_key(tenant, user_id))
        keys = list(
            self._pages(
                "query",
                KeyConditionExpression="pk = :pk",
                ProjectionExpression="pk, sk",
                ExpressionAttributeValues=_item({":pk": partition_key(tenant, user_id)}),
                ConsistentRead=True,
            )
        )
        entries = sum(1 for k in keys if not _plain(k)["sk"].startswith((GUARD_PREFIX, LEASE_PREFIX)))
        self._delete_keys(keys)
        return entries

    @aws_dependency(STM)
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
