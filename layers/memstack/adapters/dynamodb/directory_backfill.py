"""The user directory's upgrade path: write every user's ``GET /v1/users`` entry from their partition.

Tables written before the directory existed have memory partitions and no
``<tenant>#`` / ``USER#<user_id>`` items, so those users are missing from the
list until their next write, and that write's counter deltas then start from
zero. This walks the table once (a projected ``Scan`` of the memory items, the
only way to find every partition without an index), counts each partition the
way the writes count (current, not deleted, per tier; ``last_write`` the newest
``created_at``) and writes the entry when it is missing or differs.

Safe while the API writes. The entry is written in one transaction with two
checks: the partition's ``META`` token is the one read before counting (every
write changes it in the same transaction that moves the counters), and the
entry is still what was read. A write between the read and the put cancels it
and the partition is counted again; an erase since the user's count began
cancels it too (the erase fence). Nothing newer is ever overwritten, and a
second run finds every entry equal and writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from memstack.adapters.dynamodb import calls, items, writelog
from memstack.adapters.dynamodb.fence import marker_key, not_erased_since
from memstack.domain.erasure import Fence
from memstack.errors import DependencyFailed

#: re-counts of one partition whose entry kept losing to concurrent writes; then the next run's
_ATTEMPTS = 5
_COUNTED = ("tier", "is_current", "deleted", "created_at")


@dataclass
class BackfillReport:
    """What one run found and did (``complete`` is False when it stopped at its deadline)."""

    users: int = 0
    created: int = 0
    corrected: int = 0
    unchanged: int = 0
    #: conditional writes cancelled by a concurrent write or erase (the partition was counted again)
    raced: int = 0
    #: users still racing after every attempt: left as they are for the next run
    busy: int = 0
    #: users erased while the run went (their partition emptied): no entry written
    gone: int = 0
    complete: bool = True

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Entry:
    stm: int
    ltm: int
    last_write: str | None

    @staticmethod
    def of(item: dict[str, Any] | None) -> _Entry | None:
        if item is None:
            return None
        return _Entry(
            int(item.get("stm", {}).get("N", 0)),
            int(item.get("ltm", {}).get("N", 0)),
            item["last_write"]["S"] if "last_write" in item else None,
        )

    def same_as(self, other: _Entry | None) -> bool:
        return (
            other is not None
            and (self.stm, self.ltm) == (other.stm, other.ltm)
            and _instant(self.last_write) == _instant(other.last_write)
        )


def _instant(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def backfill_directory(
    client: Any,
    table: str,
    *,
    dry_run: bool = False,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> BackfillReport:
    """Write every user's directory entry that is missing or wrong; ``dry_run`` only counts them.

    ``deadline`` (on ``clock``) stops the walk before the next user once passed, with
    ``complete=False``: a deploy-time run must answer CloudFormation in time; a rerun finishes.
    """
    report = BackfillReport()
    for tenant, user_id in _users(client, table):
        if deadline is not None and clock() >= deadline:
            report.complete = False
            break
        report.users += 1
        _backfill_user(client, table, tenant, user_id, report, dry_run=dry_run)
    return report


def _users(client: Any, table: str) -> Iterator[tuple[str, str]]:
    """(tenant, user) of every partition holding a memory item, each once, as the scan finds them."""
    seen: set[str] = set()
    kwargs: dict[str, Any] = {
        "TableName": table,
        "ProjectionExpression": "#pk, #t, #u",
        "FilterExpression": "begins_with(#sk, :mem)",
        "ExpressionAttributeNames": {"#pk": "pk", "#sk": "sk", "#t": "tenant", "#u": "user_id"},
        "ExpressionAttributeValues": {":mem": {"S": items.MEMORY_PREFIX}},
    }
    try:
        for page in client.get_paginator("scan").paginate(**kwargs):
            for row in page.get("Items", []):
                pk = row["pk"]["S"]
                if pk not in seen:
                    seen.add(pk)
                    yield row["tenant"]["S"], row["user_id"]["S"]
    except ClientError as exc:
        raise DependencyFailed(f"DynamoDB scan of {table} failed: {exc}") from exc


def _count(client: Any, table: str, tenant: str, user_id: str) -> _Entry:
    """The entry the writes would have built: live records per tier, the newest ``created_at``."""
    counts = {"stm": 0, "ltm": 0}
    newest: str | None = None
    for row in calls.query_partition(client, table, tenant, user_id, _COUNTED):
        created = row["created_at"]["S"]
        if newest is None or _instant(created) > _instant(newest):  # type: ignore[operator]
            newest = created
        live = row.get("is_current", {}).get("BOOL", True) and not row.get("deleted", {}).get("BOOL", False)
        tier = row.get("tier", {}).get("S")
        if live and tier in counts:
            counts[tier] += 1
    return _Entry(counts["stm"], counts["ltm"], newest)


def _backfill_user(
    client: Any, table: str, tenant: str, user_id: str, report: BackfillReport, *, dry_run: bool
) -> None:
    key = items.directory_key(tenant, user_id)
    # Taken once: an erase after the user's first count cancels every later attempt's write too.
    fence = Fence(time.time())
    for _attempt in range(_ATTEMPTS):
        head = writelog.read_head(client, table, tenant, user_id)
        read = client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        existing = _Entry.of(read)
        truth = _count(client, table, tenant, user_id)
        if truth.last_write is None:  # no memory left: erased since the scan found it
            report.gone += 1
            return
        if truth.same_as(existing):
            report.unchanged += 1
            return
        if dry_run:
            report.created += existing is None
            report.corrected += existing is not None
            return
        actions = [
            _unchanged_partition(table, tenant, user_id, head.token),
            _put_entry(table, key, user_id, truth, existing),
            *not_erased_since(table, marker_key(tenant, user_id), fence),
        ]
        try:
            client.transact_write_items(TransactItems=actions)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise DependencyFailed(
                    f"DynamoDB write of {user_id}'s directory entry failed: {exc}"
                ) from exc
            report.raced += 1
            continue
        report.created += existing is None
        report.corrected += existing is not None
        return
    report.busy += 1


def _unchanged_partition(table: str, tenant: str, user_id: str, token: str | None) -> dict[str, Any]:
    """No write since the count: ``META`` still holds the token read before it (or still none)."""
    check: dict[str, Any] = {"TableName": table, "Key": items.meta_key(tenant, user_id)}
    if token is None:
        check["ConditionExpression"] = "attribute_not_exists(pk)"
    else:
        check["ConditionExpression"] = "#g = :g"
        check["ExpressionAttributeNames"] = {"#g": "gen"}
        check["ExpressionAttributeValues"] = {":g": {"S": token}}
    return {"ConditionCheck": check}


def _put_entry(
    table: str, key: dict[str, Any], user_id: str, truth: _Entry, existing: _Entry | None
) -> dict[str, Any]:
    """The entry as counted, on the condition that it is still the one read (or still absent)."""
    item = {
        **key,
        "user_id": {"S": user_id},
        "stm": {"N": str(truth.stm)},
        "ltm": {"N": str(truth.ltm)},
    }
    if truth.last_write is not None:
        item["last_write"] = {"S": truth.last_write}
    put: dict[str, Any] = {"TableName": table, "Item": item}
    if existing is None:
        put["ConditionExpression"] = "attribute_not_exists(pk)"
    else:
        names = {"#s": "stm", "#l": "ltm", "#w": "last_write"}
        values: dict[str, Any] = {":s": {"N": str(existing.stm)}, ":l": {"N": str(existing.ltm)}}
        same_write = "attribute_not_exists(#w)"
        if existing.last_write is not None:
            values[":w"] = {"S": existing.last_write}
            same_write = "#w = :w"
        put["ConditionExpression"] = f"#s = :s AND #l = :l AND {same_write}"
        put["ExpressionAttributeNames"] = names
        put["ExpressionAttributeValues"] = values
    return {"Put": put}
