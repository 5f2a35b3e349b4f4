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
  extraction job finishes), so checking or marking it is one keyed call. And it
  holds the ``claim`` of the add that stored it (a token): that add may take the
  entry back (``withdraw``) while the claim is there; a duplicate of the add that
  answers yes on the entry first removes the claim (``adopt``), so no take-back
  can remove what another request accepted.

A request's messages are written in as few transactions as DynamoDB allows
(up to 44 messages, 100 actions with the erase fence and parts, ~3 MB each), each all-or-nothing; a message id
already stored drops out of its transaction, which is then sent again. If a
later transaction fails, the earlier ones are taken back (``withdraw``) and the
caller gets a 503: nothing of the request is stored, and its retry stores it
all. (An enqueue that fails after every write is another matter: the entries
are stored and owed, and the outbox re-enqueues them.)

A message longer than one item may hold (400 KB) is stored in **parts**,
``sk = "part#<message id>#<n>"``, written in the same transaction as its entry
(whose ``text_parts`` says how many) and read back with it: the entry's ``message``
then carries every field but the text. Parts are never in the pending index.

All carry the TTL attribute ``expires_at`` (epoch seconds). DynamoDB deletes
expired items late (up to days), so every read here filters expired items out
itself, and every read paginates.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from memstack.adapters.aws_errors import aws_dependency
from memstack.adapters.batches import size_batches
from memstack.adapters.dynamodb.fence import mark_erased, not_erased_since
from memstack.domain.erasure import Fence, erased_while_working, erasure_key
from memstack.errors import DependencyFailed, SettingsError
from memstack.models import Message
from memstack.ports.stm import StmEntry

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.adapters.embedded.database import Database
    from memstack.settings import Settings

PENDING_INDEX = "pending"
GUARD_PREFIX = "msg#"
ERASED_PREFIX = "ERASED#"  # erasure markers (domain/erasure.py), keyed by a hash of the user
LEASE_PREFIX = "lease#"  # per-user leases (``adapters.dynamodb.leases``) share the user's partition
PART_PREFIX = "part#"  # the text of a long message, in parts (see the module docstring)
JOB_PREFIX = "job#"  # pointers to the user's job statuses (``adapters.dynamodb.job_status``)
#: UTF-8 bytes of text per part: an item holds 400 KB, keys and attribute names included
PART_BYTES = 300_000
# Two actions each, the erase fence, and the parts: DynamoDB takes at most 100 per transaction.
# A batch's ~3 MB (_approx_bytes counts a text twice) holds at most 10 parts: 44 * 2 + 10 + 1 < 100.
_TX_MESSAGES = 44
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


def text_parts(text: str) -> list[str]:
    """``text`` in consecutive pieces of at most ``PART_BYTES`` UTF-8 bytes, cut between characters."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= PART_BYTES:
        return [text]
    parts, start = [], 0
    while start < len(data):
        end = min(start + PART_BYTES, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # not inside a character's bytes
            end -= 1
        parts.append(data[start:end].decode("utf-8", errors="surrogatepass"))
        start = end
    return parts


def part_key(message_id: str, index: int) -> str:
    return f"{PART_PREFIX}{message_id}#{index:04d}"


def _entry(item: dict[str, Any], text: str | None = None) -> StmEntry:
    """The entry an item holds; ``text`` is the message's, joined from its parts, when it has parts."""
    v = _plain(item)
    if text is None:
        message = Message.model_validate_json(v["message"])
    else:
        message = Message.model_validate({**json.loads(v["message"]), "content": text})
    return StmEntry(
        tenant=v["tenant"],
        user_id=v["user_id"],
        session_id=v.get("session_id"),
        scope=v["scope"],
        message=message,
        received_at=datetime.fromisoformat(v["received_at"]),
        expires_at=int(v["expires_at"]),
        consolidated=bool(v["consolidated"]),
    )


def _by_user(entries: list[StmEntry], message_ids: list[str]) -> dict[tuple[str, str], list[str]]:
    """``message_ids`` (of ``entries``) grouped by the user whose entries they are."""
    wanted = set(message_ids)
    out: dict[tuple[str, str], list[str]] = {}
    for e in entries:
        if e.message.id in wanted:
            out.setdefault((e.tenant, e.user_id), []).append(e.message.id)
    return out


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

    def _batch_get(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The items of ``keys`` that exist: consistent reads, 100 keys a call, unprocessed keys again."""
        found: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):  # BatchGetItem takes at most 100 keys
            request: dict[str, Any] = {
                self.table: {"Keys": keys[start : start + 100], "ConsistentRead": True}
            }
            for attempt in range(8):
                page = self.client.batch_get_item(RequestItems=request)
                found += page.get("Responses", {}).get(self.table, [])
                request = page.get("UnprocessedKeys") or {}
                if not request:
                    break
                time.sleep(min(0.05 * 2**attempt, 2.0))
            else:
                raise DependencyFailed(f"{STM} kept returning unprocessed keys")
        return found

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
    def _items(self, e: StmEntry, claim: str) -> list[dict[str, Any]]:
        """The guard, the entry and (a long message) the parts of one message, in that order."""
        pk = partition_key(e.tenant, e.user_id)
        sk = entry_sort_key(e.received_at, e.message.id)
        parts = text_parts(e.message.content)
        # A parted entry's message is every field but the text (model_copy skips validation).
        message = e.message if len(parts) == 1 else e.message.model_copy(update={"content": ""})
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
                "message": message.model_dump_json(),
                "text_parts": len(parts) if len(parts) > 1 else None,
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
                "claim": claim,
            }
        )
        if len(parts) == 1:
            return [guard, entry]
        pieces = [
            _item(
                {
                    "pk": pk,
                    "sk": part_key(e.message.id, i),
                    "tenant": e.tenant,
                    "user_id": e.user_id,
                    "text": text,
                    "expires_at": e.expires_at,
                }
            )
            for i, text in enumerate(parts)
        ]
        return [guard, entry, *pieces]

    def _texts(self, items: list[dict[str, Any]]) -> dict[str, str]:
        """{entry sort key: the message's text joined from its parts} for the parted entries of ``items``."""
        wanted: dict[str, tuple[str, str, int]] = {}
        for item in items:
            v = _plain(item)
            if int(v.get("text_parts") or 0) > 1:
                wanted[v["sk"]] = (v["pk"], v["message_id"], int(v["text_parts"]))
        if not wanted:
            return {}
        keys = [_item({"pk": pk, "sk": part_key(mid, i)}) for pk, mid, n in wanted.values() for i in range(n)]
        found = {(v["pk"], v["sk"]): v["text"] for v in map(_plain, self._batch_get(keys))}
        out = {}
        for sk, (pk, mid, n) in wanted.items():
            texts = [found.get((pk, part_key(mid, i))) for i in range(n)]
            if any(t is None for t in texts):  # written in one transaction: missing only once expired
                continue
            out[sk] = "".join(t for t in texts if t is not None)
        return out

    def _write_all_new(self, batch: list[StmEntry], fence: Fence | None, claim: str) -> list[str]:
        """One transaction for ``batch``; message ids already stored drop out and it is sent again."""
        todo = list(batch)
        for attempt in range(_TX_ATTEMPTS):
            if not todo:
                return []
            actions = []
            owner = []  # the index in ``todo`` of each action's message
            for n, e in enumerate(todo):
                for item in self._items(e, claim):
                    owner.append(n)
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
                # A failed condition on any item of a message means "already stored".
                known = {
                    owner[i]
                    for i, code in enumerate(codes[: len(actions)])
                    if code == "ConditionalCheckFailed"
                }
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
    def append(
        self, entries: list[StmEntry], *, fence: Fence | None = None, claim: str | None = None
    ) -> list[str]:
        claim = claim or uuid.uuid4().hex  # this call's own, to take back its earlier transactions
        # One transaction may not touch an item twice: a repeated message id is the same message.
        first: dict[tuple[str, str, str], StmEntry] = {}
        for e in entries:
            first.setdefault((e.tenant, e.user_id, e.message.id), e)
        unique = list(first.values())
        stored: list[str] = []
        try:
            for batch in size_batches(unique, _TX_MESSAGES, _TX_BYTES, _approx_bytes):
                stored += self._write_all_new(batch, fence, claim)
        except BaseException:
            # All or nothing across the transactions: a later one failing takes back the earlier ones.
            if stored:
                self._withdraw_all(unique, stored, claim)
            raise
        return stored

    def _withdraw_all(self, entries: list[StmEntry], stored: list[str], claim: str) -> None:
        for (tenant, user_id), ids in _by_user(entries, stored).items():
            self.withdraw(tenant, user_id, ids, claim)

    @aws_dependency(STM)
    def withdraw(self, tenant: str, user_id: str, message_ids: list[str], claim: str) -> int:
        pk = partition_key(tenant, user_id)
        pairs: dict[str, list[dict[str, Any]]] = {}
        n_parts: dict[str, int] = {}
        for message_id in dict.fromkeys(message_ids):
            guard = self._guard(tenant, user_id, message_id)
            if guard is None or guard.get("claim") != claim:
                continue  # gone, or adopted by a request that accepted it: not this add's to take back
            entry_key = _item({"pk": pk, "sk": guard["entry_sk"]})
            entry = self.client.get_item(
                TableName=self.table, Key=entry_key, ConsistentRead=True, ProjectionExpression="text_parts"
            ).get("Item")
            n_parts[message_id] = int(_plain(entry).get("text_parts") or 0) if entry else 0
            pairs[message_id] = [_item({"pk": pk, "sk": GUARD_PREFIX + message_id}), entry_key]
        # Entry and guard go together (one transaction per 50 messages): a guard left without
        # its entry would refuse the message id forever, an entry without its guard be orphaned.
        # The guard goes only while it still holds the claim: an adoption since the read wins.
        taken: list[str] = []
        ids = list(pairs)
        for start in range(0, len(ids), 50):
            taken += self._delete_claimed({m: pairs[m] for m in ids[start : start + 50]}, claim)
        # Then a long message's text parts (no entry points at them any more).
        self._delete_keys([_item({"pk": pk, "sk": part_key(m, i)}) for m in taken for i in range(n_parts[m])])
        return len(taken)

    def _delete_claimed(self, pairs: dict[str, list[dict[str, Any]]], claim: str) -> list[str]:
        """Delete each (guard, entry) pair whose guard still holds ``claim``; the message ids deleted."""
        todo = dict(pairs)
        for attempt in range(_TX_ATTEMPTS):
            if not todo:
                return []
            owner, actions = [], []
            for message_id, (guard_key, entry_key) in todo.items():
                owner += [message_id, message_id]
                actions += [
                    {
                        "Delete": {
                            "TableName": self.table,
                            "Key": guard_key,
                            "ConditionExpression": "claim = :claim",
                            "ExpressionAttributeValues": _item({":claim": claim}),
                        }
                    },
                    {"Delete": {"TableName": self.table, "Key": entry_key}},
                ]
            codes = self._transact(actions)
            if codes is None:
                return list(todo)
            adopted = {owner[i] for i, code in enumerate(codes) if code == "ConditionalCheckFailed"}
            todo = {m: keys for m, keys in todo.items() if m not in adopted}
            if not adopted:
                time.sleep(min(0.05 * 2**attempt, 1.0))  # only transient reasons: send it again
        raise DependencyFailed(f"{STM} kept cancelling the take-back of a failed add")

    def _transact(self, actions: list[dict[str, Any]]) -> list[str] | None:
        """Run one transaction: None when it committed, else each action's cancellation code.

        A refusal other than a failed condition or a transient reason is a ``DependencyFailed``.
        """
        try:
            self.client.transact_write_items(TransactItems=actions)
            return None
        except self.client.exceptions.TransactionCanceledException as exc:
            codes = [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons", [])]
        if not set(codes) <= _TRANSIENT | {"ConditionalCheckFailed"}:
            raise DependencyFailed(f"{STM} refused the write ({', '.join(sorted(set(codes)))})")
        return codes

    @aws_dependency(STM)
    def adopt(self, tenant: str, user_id: str, message_ids: list[str]) -> list[str]:
        pk = partition_key(tenant, user_id)
        unique = list(dict.fromkeys(message_ids))
        missing: list[str] = []
        for start in range(0, len(unique), 100):  # at most 100 actions a transaction
            todo = unique[start : start + 100]
            for attempt in range(_TX_ATTEMPTS):
                if not todo:
                    break
                actions = [
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": _item({"pk": pk, "sk": GUARD_PREFIX + m}),
                            "UpdateExpression": "REMOVE claim",
                            # the guard exists, and is this user's (a '#' in ids makes pk ambiguous)
                            "ConditionExpression": "attribute_exists(pk) AND "
                            "(attribute_not_exists(tenant) OR (tenant = :t AND user_id = :u))",
                            "ExpressionAttributeValues": _item({":t": tenant, ":u": user_id}),
                        }
                    }
                    for m in todo
                ]
                codes = self._transact(actions)
                if codes is None:
                    break
                gone = [m for m, code in zip(todo, codes, strict=True) if code == "ConditionalCheckFailed"]
                missing += gone
                todo = [m for m in todo if m not in gone]
                if not gone:
                    time.sleep(min(0.05 * 2**attempt, 1.0))
            else:
                raise DependencyFailed(f"{STM} kept cancelling the adoption of stored messages")
        return missing

    @aws_dependency(STM)
    def get(self, tenant: str, user_id: str, message_id: str) -> StmEntry | None:
        guard = self._guard(tenant, user_id, message_id)
        if guard is None:
            return None
        key = _item({"pk": partition_key(tenant, user_id), "sk": guard["entry_sk"]})
        item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        if item is None:
            return None
        texts = self._texts([item])
        if _plain(item).get("text_parts") and guard["entry_sk"] not in texts:
            return None  # its parts expired
        entry = _entry(item, texts.get(guard["entry_sk"])).model_copy(
            update={"extraction": guard.get("extraction", "none")}
        )
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
        keys = [_item({"pk": pk, "sk": GUARD_PREFIX + m}) for m in unique]
        for g in map(_plain, self._batch_get(keys)):
            if g.get("extraction") != "pending" or (g.get("tenant"), g.get("user_id")) != (tenant, user_id):
                continue
            message_id = str(g["sk"])[len(GUARD_PREFIX) :]
            out[message_id] = datetime.fromisoformat(str(g["entry_sk"]).split("#", 1)[0])
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
        rows = list(items)
        texts = self._texts(rows)
        for item in rows:
            sk = _plain(item)["sk"]
            if _plain(item).get("text_parts") and sk not in texts:
                continue  # its parts expired
            entry = _entry(item, texts.get(sk))
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
        entries = sum(
            1
            for k in keys
            if not _plain(k)["sk"].startswith((GUARD_PREFIX, LEASE_PREFIX, PART_PREFIX, JOB_PREFIX))
        )
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
            ProjectionExpression="pk, sk, message_id, text_parts",
            ExpressionAttributeValues=_item({":now": int(now.timestamp())}),
        )
        entries = 0
        for item in items:
            v = _plain(item)
            keys.append(_item({"pk": v["pk"], "sk": v["sk"]}))
            keys.append(_item({"pk": v["pk"], "sk": GUARD_PREFIX + v["message_id"]}))
            keys += [
                _item({"pk": v["pk"], "sk": part_key(v["message_id"], i)})
                for i in range(int(v.get("text_parts") or 0))
            ]
            entries += 1
        self._delete_keys(keys)
        return entries


def build(settings: Settings, clients: Mapping[str, Any], db: Database | None) -> DynamoDbShortTermStore:
    """``MEMSTACK_STM_BACKEND=dynamodb``; ``clients["dynamodb"]`` when given (``factory.STMS``)."""
    return DynamoDbShortTermStore(
        settings.aws.stm_table or "", client=clients.get("dynamodb"), region=settings.aws.aws_region
    )
