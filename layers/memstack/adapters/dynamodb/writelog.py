"""The partition's write sequence and log: how a warm snapshot learns what changed since it was made.

Every write transaction of a user's memories takes the partition's next
sequence number: it sets ``META.seq`` to ``n + 1`` on the condition that it is
still ``n`` (so two writers never take the same number and numbers commit in
order) and puts ``LOG#<n + 1>``, naming the memory ids the write changed. A
container holding a snapshot at sequence ``s`` then reads ``META`` (one item),
the log items after ``s`` (one ``Query`` on the sort key) and the changed
items (one ``BatchGetItem``), instead of the whole partition.

``META.epoch`` is set once, when the partition's ``META`` is created: an erase
deletes every item of the partition, so a later write starts a new epoch and
no snapshot of the erased data can be carried forward, whatever its sequence.

``META.snap_seq`` / ``snap_key`` / ``snap_size`` name the packed snapshot in
S3 that holds the partition up to write ``snap_seq`` (``store.compact_user``
writes it): a cold container loads it and reads the log after it. Log items
the previous snapshot covers are pruned when the next one is written, so the
log holds about two compaction intervals, not every write ever made.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from memstack.adapters.dynamodb import items

LOG_PREFIX = "LOG#"
#: zero-padded so the sort key orders numerically
_WIDTH = 12
#: a snapshot further behind than this re-reads the partition instead of the log
MAX_CATCH_UP = 2_000


@dataclass(frozen=True)
class Head:
    """The partition's ``META`` as one read saw it."""

    token: str | None
    seq: int
    epoch: str | None
    #: the stored snapshot: the write it covers, its object key and size (0 / None: none yet)
    snap_seq: int = 0
    snap_key: str | None = None
    snap_size: int = 0


def log_key(tenant: str, user_id: str, seq: int) -> dict[str, Any]:
    return {"pk": {"S": items.partition_key(tenant, user_id)}, "sk": {"S": f"{LOG_PREFIX}{seq:0{_WIDTH}d}"}}


def head_of(item: dict[str, Any] | None) -> Head:
    item = item or {}
    return Head(
        token=item["gen"]["S"] if "gen" in item else None,
        seq=int(item["seq"]["N"]) if "seq" in item else 0,
        epoch=item["epoch"]["S"] if "epoch" in item else None,
        snap_seq=int(item["snap_seq"]["N"]) if "snap_seq" in item else 0,
        snap_key=item["snap_key"]["S"] if "snap_key" in item else None,
        snap_size=int(item["snap_size"]["N"]) if "snap_size" in item else 0,
    )


def read_head(client: Any, table: str, tenant: str, user_id: str) -> Head:
    """``META`` (token, sequence, epoch), strongly consistent."""
    response = client.get_item(
        TableName=table,
        Key=items.meta_key(tenant, user_id),
        ConsistentRead=True,
        ProjectionExpression="#g, #s, #e, #ss, #sk, #sz",
        ExpressionAttributeNames={
            "#g": "gen",
            "#s": "seq",
            "#e": "epoch",
            "#ss": "snap_seq",
            "#sk": "snap_key",
            "#sz": "snap_size",
        },
    )
    return head_of(response.get("Item"))


def point_at_snapshot(
    client: Any, table: str, tenant: str, user_id: str, *, epoch: str, seq: int, key: str, size: int
) -> bool:
    """Name the snapshot of write ``seq`` in ``META``; False when the partition moved on without it.

    Conditioned on the epoch the snapshot was made in (an erase deletes ``META``, so a
    snapshot of erased data is never named) and on no newer snapshot being named already.
    The token and sequence are left alone: no warm container re-reads anything for it.
    """
    from botocore.exceptions import ClientError

    try:
        client.update_item(
            TableName=table,
            Key=items.meta_key(tenant, user_id),
            UpdateExpression="SET #ss = :s, #sk = :k, #sz = :z",
            ConditionExpression="#e = :e AND (attribute_not_exists(#ss) OR #ss < :s)",
            ExpressionAttributeNames={
                "#e": "epoch",
                "#ss": "snap_seq",
                "#sk": "snap_key",
                "#sz": "snap_size",
            },
            ExpressionAttributeValues={
                ":e": {"S": epoch},
                ":s": {"N": str(seq)},
                ":k": {"S": key},
                ":z": {"N": str(size)},
            },
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False
        raise
    return True


def logged_keys(client: Any, table: str, tenant: str, user_id: str, upto: int) -> list[dict[str, Any]]:
    """The keys of the log items of writes ``1 .. upto`` still stored (what ``prune`` deletes)."""
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :lo AND :hi",
        "ProjectionExpression": "#pk, #sk",
        "ExpressionAttributeNames": {"#pk": "pk", "#sk": "sk"},
        "ExpressionAttributeValues": {
            ":pk": {"S": items.partition_key(tenant, user_id)},
            ":lo": log_key(tenant, user_id, 0)["sk"],
            ":hi": log_key(tenant, user_id, upto)["sk"],
        },
    }
    return [
        item for page in client.get_paginator("query").paginate(**kwargs) for item in page.get("Items", [])
    ]


def next_write(table: str, tenant: str, user_id: str, after: int, ids: list[str]) -> list[dict[str, Any]]:
    """The two actions that make a transaction write number ``after + 1`` of the partition."""
    seq = after + 1
    return [
        {
            "Update": {
                "TableName": table,
                "Key": items.meta_key(tenant, user_id),
                "UpdateExpression": "SET #g = :g, #s = :next, #e = if_not_exists(#e, :epoch)",
                "ConditionExpression": "attribute_not_exists(#s) OR #s = :after",
                "ExpressionAttributeNames": {"#g": "gen", "#s": "seq", "#e": "epoch"},
                "ExpressionAttributeValues": {
                    ":g": {"S": uuid.uuid4().hex},
                    ":next": {"N": str(seq)},
                    ":after": {"N": str(after)},
                    ":epoch": {"S": uuid.uuid4().hex},
                },
            }
        },
        {
            "Put": {
                "TableName": table,
                "Item": {
                    **log_key(tenant, user_id, seq),
                    "ids": {"L": [{"S": i} for i in dict.fromkeys(ids)]},
                },
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
    ]


def changed_since(
    client: Any, table: str, tenant: str, user_id: str, after: int, upto: int
) -> list[str] | None:
    """The memory ids writes ``after + 1 .. upto`` changed; None when a log item is missing."""
    names = {"#pk": "pk", "#sk": "sk", "#ids": "ids"}
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :lo AND :hi",
        "ConsistentRead": True,
        "ProjectionExpression": "#sk, #ids",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {
            ":pk": {"S": items.partition_key(tenant, user_id)},
            ":lo": log_key(tenant, user_id, after + 1)["sk"],
            ":hi": log_key(tenant, user_id, upto)["sk"],
        },
    }
    seen, ids = 0, []
    for page in client.get_paginator("query").paginate(**kwargs):
        for item in page.get("Items", []):
            seen += 1
            ids += [v["S"] for v in item["ids"]["L"]]
    return list(dict.fromkeys(ids)) if seen == upto - after else None
