"""The DynamoDB short-term store against moto: key schema, TTL, conditional writes, pagination."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from memstack.adapters.dynamodb.stm import (
    PART_BYTES,
    PART_PREFIX,
    DynamoDbShortTermStore,
    create_stm_table,
    text_parts,
)
from memstack.models import Message
from memstack.ports.stm import StmEntry
from moto import mock_aws

TABLE = "memstack-stm"
# Relative to the wall clock: ``get`` checks expiry against the real time.
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_stm_table(client, TABLE)
        yield client


@pytest.fixture
def stm(ddb: Any) -> DynamoDbShortTermStore:
    return DynamoDbShortTermStore(TABLE, client=ddb)


def entry(
    mid: str, *, user: str = "u1", tenant: str = "t1", at: datetime = NOW, ttl_days: float = 30
) -> StmEntry:
    return StmEntry(
        tenant=tenant,
        user_id=user,
        session_id="s1",
        message=Message(id=mid, content=f"message {mid}", speaker="Ann", timestamp=at),
        received_at=at,
        expires_at=int((at + timedelta(days=ttl_days)).timestamp()),
    )


def test_table_has_ttl_and_the_contract_key_schema(ddb: Any, stm: DynamoDbShortTermStore) -> None:
    ttl = ddb.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    stm.append([entry("m1")])
    items = ddb.scan(TableName=TABLE)["Items"]
    by_sk = {i["sk"]["S"]: i for i in items}
    entry_item = by_sk[f"{NOW.isoformat(timespec='microseconds')}#m1"]
    assert entry_item["pk"]["S"] == "t1#u1"
    assert entry_item["pending"]["S"] == "t1#u1"
    assert int(entry_item["expires_at"]["N"]) == int((NOW + timedelta(days=30)).timestamp())
    assert "msg#m1" in by_sk  # the message-id guard


def test_append_never_overwrites_an_existing_message_id(stm: DynamoDbShortTermStore) -> None:
    assert stm.append([entry("m1"), entry("m2")]) == ["m1", "m2"]
    # A retry arrives later (a different timestamp, so a different entry key) with new content.
    retry = entry("m1", at=NOW + timedelta(minutes=5))
    retry.message.content = "rewritten"
    assert stm.append([retry, entry("m3")]) == ["m3"]
    got = stm.get("t1", "u1", "m1")
    assert got is not None and got.message.content == "message m1"
    assert len(stm.unconsolidated("t1", "u1", NOW)) == 3


def test_expired_items_are_invisible_to_every_read(stm: DynamoDbShortTermStore) -> None:
    old = NOW - timedelta(days=40)
    stm.append([entry("old", at=old), entry("fresh")])  # "old" expired ten days ago, TTL has not run
    assert stm.get("t1", "u1", "old") is None
    assert [e.message.id for e in stm.unconsolidated("t1", "u1", NOW)] == ["fresh"]
    assert [(t, u, n) for t, u, n, _ in stm.users_with_pending(NOW)] == [("t1", "u1", 1)]
    assert stm.purge_expired(NOW) == 1
    assert stm.erase_user("t1", "u1") == 1


def test_reads_paginate_and_keep_arrival_order(ddb: Any, stm: DynamoDbShortTermStore) -> None:
    # Real pages are 1 MB; force small ones through the client to exercise LastEvaluatedKey.
    entries = [entry(f"m{i:03d}", at=NOW + timedelta(seconds=i)) for i in range(24)]
    stm.append(entries)
    original_query = ddb.query
    pages = []

    def small_pages(**kwargs: Any) -> Any:
        kwargs["Limit"] = 5
        page = original_query(**kwargs)
        pages.append(page)
        return page

    ddb.query = small_pages
    got = stm.unconsolidated("t1", "u1", NOW)
    assert [e.message.id for e in got] == [e.message.id for e in entries]
    assert len(pages) >= 5
    assert [e.message.id for e in stm.unconsolidated("t1", "u1", NOW, limit=10)] == [
        f"m{i:03d}" for i in range(10)
    ]


def test_mark_consolidated_leaves_the_pending_index_and_is_idempotent(stm: DynamoDbShortTermStore) -> None:
    stm.append([entry("m1"), entry("m2"), entry("x1", user="u2")])
    assert stm.mark_consolidated("t1", "u1", ["m1", "nope"]) == 1
    assert stm.mark_consolidated("t1", "u1", ["m1"]) == 0
    assert [e.message.id for e in stm.unconsolidated("t1", "u1", NOW)] == ["m2"]
    marked = stm.get("t1", "u1", "m1")
    assert marked is not None and marked.consolidated
    pending = {(t, u): n for t, u, n, _ in stm.users_with_pending(NOW)}
    assert pending == {("t1", "u1"): 1, ("t1", "u2"): 1}


def test_users_are_isolated(stm: DynamoDbShortTermStore) -> None:
    stm.append([entry("m1", user="u1"), entry("m1", user="u2"), entry("m1", tenant="t2")])
    assert stm.get("t1", "u2", "m1") is not None
    assert stm.mark_consolidated("t1", "u1", ["m1"]) == 1
    assert len(stm.unconsolidated("t1", "u2", NOW)) == 1
    assert len(stm.unconsolidated("t2", "u1", NOW)) == 1
    assert stm.erase_user("t1", "u1") == 1
    assert stm.get("t1", "u1", "m1") is None
    assert stm.get("t1", "u2", "m1") is not None


def test_the_service_consolidates_from_the_dynamodb_stm(ddb: Any, tmp_path: Any) -> None:
    from memstack.factory import build_service
    from memstack.settings import load_settings

    from tests.consolidation.conftest import conversation

    settings = load_settings(
        data_dir=tmp_path / "data", embedder="hashing", stm_backend="dynamodb", stm_table=TABLE
    )
    svc = build_service(settings, dynamodb=ddb)
    try:
        assert isinstance(svc.stm, DynamoDbShortTermStore)
        messages = conversation()
        assert svc.add("t1", "u1", messages, infer=False).stored == [m.id for m in messages]
        assert svc.add("t1", "u1", messages, infer=False).stored == []  # a retried request stores nothing
        report = svc.consolidate("t1", "u1", now=NOW)
        assert (report["read"], report["marked"]) == (25, 25)
        assert svc.stm.unconsolidated("t1", "u1", NOW) == []
        assert svc.stm.users_with_pending(NOW) == []
        assert svc.consolidate("t1", "u1", now=NOW)["status"] == "nothing_to_do"
        assert svc.erase_user("t1", "u1")["stm"] == 25
    finally:
        svc.close()


def _long(mid: str, text: str, at: datetime = NOW, ttl_days: float = 30) -> StmEntry:
    e = entry(mid, at=at, ttl_days=ttl_days)
    e.message.content = text
    return e


#: ~1 MB of text with two- and four-byte characters, so parts are cut between a character's bytes
LONG = ("Log line é " * 30_000) + ("🙂 " * 60_000) + "the end"


def test_text_parts_cut_between_characters_and_join_back() -> None:
    parts = text_parts(LONG)
    assert len(parts) > 1 and "".join(parts) == LONG
    assert all(len(p.encode()) <= PART_BYTES for p in parts)
    assert text_parts("short") == ["short"]


def test_a_message_longer_than_an_item_is_stored_in_parts_and_read_whole(
    ddb: Any, stm: DynamoDbShortTermStore
) -> None:
    assert stm.append([_long("big", LONG), entry("m2")]) == ["big", "m2"]
    items = ddb.scan(TableName=TABLE)["Items"]
    # Every item fits DynamoDB's 400 KB (its attribute names and values, as DynamoDB counts them).
    assert max(sum(len(k) + len(str(v)) for k, v in i.items()) for i in items) < 400_000
    assert sum(1 for i in items if i["sk"]["S"].startswith(PART_PREFIX)) == len(text_parts(LONG))
    got = stm.get("t1", "u1", "big")
    assert got is not None and got.message.content == LONG and got.message.speaker == "Ann"
    pending = {e.message.id: e.message.content for e in stm.unconsolidated("t1", "u1", NOW)}
    assert pending == {"big": LONG, "m2": "message m2"}
    assert stm.append([_long("big", "a retry")]) == []  # stored once
    assert stm.erase_user("t1", "u1") == 2
    left = [i["sk"]["S"] for i in ddb.scan(TableName=TABLE)["Items"]]
    assert left == ["ERASED"]  # only the erasure marker: no part outlives the user


def test_an_expired_long_message_is_purged_with_its_parts(ddb: Any, stm: DynamoDbShortTermStore) -> None:
    stm.append([_long("old", LONG, at=NOW - timedelta(days=40))])
    assert stm.get("t1", "u1", "old") is None
    assert stm.purge_expired(NOW) == 1
    assert ddb.scan(TableName=TABLE)["Items"] == []
