"""The small tier's stored snapshot: a cold container loads it from S3, catches up; erase removes it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from memstack.adapters.dynamodb import packed, writelog
from memstack.adapters.dynamodb.snapshot_objects import SnapshotObjects, user_prefix
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters
from moto import mock_aws

from ..conformance.conftest import TABLE, create_memories_table, dynamodb_client
from .test_dynamodb_store import EMB, rec

BUCKET = "memstack-snapshots-test"


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        dynamodb = dynamodb_client()
        create_memories_table(dynamodb)
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        yield dynamodb, s3


def _counted(client: Any) -> Counter[str]:
    counter: Counter[str] = Counter()
    client.meta.events.register("before-call.*.*", lambda model, **_: counter.update([model.name]))
    return counter


def _store(aws: tuple[Any, Any], *, compact_writes: int = 3, part_bytes: int = 4096) -> DynamoDBMemoryStore:
    dynamodb, s3 = aws
    objects = SnapshotObjects(BUCKET, s3, part_bytes=part_bytes, connections=4)
    return DynamoDBMemoryStore(TABLE, dynamodb, snapshots=objects, compact_writes=compact_writes)


def _objects(aws: tuple[Any, Any]) -> list[str]:
    listed = aws[1].list_objects_v2(Bucket=BUCKET, Prefix=user_prefix("t1", "u1"))
    return [o["Key"] for o in listed.get("Contents", [])]


def _answers(store: DynamoDBMemoryStore, query: str = "tea garden") -> list[dict[str, float]]:
    """BM25, exact vector and coarse vector hits (every match: k above the partition's size), by id.

    By id: rows scoring exactly alike are ordered by their row, which differs between a
    snapshot read from the partition (in key order) and one that followed the writes.
    """
    view = store.read_view("t1", "u1")  # one META read for the three
    vector = EMB.embed([query])[0]
    filters = MemoryFilters()
    ranked = [
        view.bm25_search("t1", "u1", query, 1000, filters),
        store.exact_vector_search("t1", "u1", vector, 1000, filters, below=10**6) or [],
        view.vector_search("t1", "u1", coarse_prefix(vector, 8), 1000, filters),
    ]
    for hits in ranked:
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    return [{h.id: pytest.approx(h.score, rel=1e-5) for h in hits} for hits in ranked]


def _logged(aws: tuple[Any, Any]) -> int:
    return len(writelog.logged_keys(aws[0], TABLE, "t1", "u1", 10**9))


def test_a_cold_container_loads_the_stored_snapshot_and_reads_only_the_log_after_it(aws: Any) -> None:
    writer = _store(aws)
    for i in range(4):  # four writes: a compaction is due after three
        writer.put([rec(f"note {i} {j} about tea and the garden") for j in range(10)])
    assert writer.compact_user("t1", "u1") is True
    assert writer.compact_user("t1", "u1") is False  # not due again until three more writes
    (key,) = _objects(aws)
    head = writelog.read_head(aws[0], TABLE, "t1", "u1")
    assert (head.snap_seq, head.snap_key) == (4, key)
    writer.put([rec("a later note on green tea")])
    writer.supersede(
        "t1", "u1", writer.list("t1", "u1", MemoryFilters(), 1)[0][0].id, rec("a newer tea note")
    )

    cold = _store(aws)
    dynamodb_calls, s3_calls = _counted(aws[0]), _counted(aws[1])
    loaded = _answers(cold)
    # META, the log since the snapshot, the items it names; the object in byte ranges; never
    # the partition.
    assert dict(dynamodb_calls) == {"GetItem": 2, "Query": 1, "BatchGetItem": 1}  # META: view, exact
    assert set(s3_calls) == {"GetObject"} and s3_calls["GetObject"] > 1
    # The same answers as a container reading the whole partition (no snapshots at all).
    assert loaded == _answers(DynamoDBMemoryStore(TABLE, aws[0]))
    assert len(cold.list("t1", "u1", MemoryFilters(), 100)[0]) == 41


def test_a_compaction_replaces_the_object_and_prunes_the_log_the_old_one_covered(aws: Any) -> None:
    store = _store(aws)
    for i in range(3):
        store.put([rec(f"first {i} tea")])
    assert store.compact_user("t1", "u1")
    first = _objects(aws)
    assert _logged(aws) == 3  # the log of the first snapshot stays until the next one replaces it
    for i in range(3):
        store.put([rec(f"second {i} tea")])
    assert store.compact_user("t1", "u1")
    second = _objects(aws)
    assert len(second) == 1 and second != first
    assert _logged(aws) == 3  # writes 4-6; 1-3 are covered by both snapshots and gone
    cold = _store(aws)
    assert _answers(cold) == _answers(DynamoDBMemoryStore(TABLE, aws[0]))


def test_a_warm_container_behind_the_pruned_log_loads_the_stored_snapshot(aws: Any) -> None:
    warm, writer = _store(aws), _store(aws)
    writer.put([rec("tea at first")])
    _answers(warm)  # holds a snapshot at write 1
    for round_ in range(2):
        for i in range(3):
            writer.put([rec(f"tea round {round_} note {i}")])
        assert writer.compact_user("t1", "u1")
    partition_reads: list[int] = []
    aws[0].meta.events.register(
        "provide-client-params.dynamodb.Query",
        lambda params, **_: (
            partition_reads.append(1) if ":mem" in params["ExpressionAttributeValues"] else None
        ),
    )
    assert _answers(warm) == _answers(DynamoDBMemoryStore(TABLE, aws[0]))
    assert partition_reads == [1]  # only the comparison store read the partition


def test_erase_removes_every_stored_snapshot_and_a_later_write_starts_afresh(aws: Any) -> None:
    store = _store(aws, compact_writes=1)
    store.put([rec("my secret tea recipe")])
    assert store.compact_user("t1", "u1")
    store.put([rec("another tea")])
    # A stray object (a compaction that crashed before naming or deleting it) goes with the rest.
    aws[1].put_object(Bucket=BUCKET, Key=user_prefix("t1", "u1") + "stray/000000000009", Body=b"x")
    counts = store.erase_user("t1", "u1")
    assert counts["snapshots"] == 2 and _objects(aws) == []
    store.put([rec("after the erase")])
    assert [h.id for h in store.bm25_search("t1", "u1", "secret recipe", 5, MemoryFilters())] == []
    cold = _store(aws)
    assert [h.id for h in cold.bm25_search("t1", "u1", "erase", 5, MemoryFilters())] != []
    assert [h.id for h in cold.bm25_search("t1", "u1", "secret recipe", 5, MemoryFilters())] == []


def test_a_compaction_that_loses_to_an_erase_deletes_its_own_object(aws: Any) -> None:
    store = _store(aws, compact_writes=1)
    store.put([rec("tea before the erase")])
    objects = store.snapshots
    assert objects is not None
    original_save = objects.save

    def save_then_erase(key: str, data: bytes) -> None:
        original_save(key, data)
        _store(aws).erase_user("t1", "u1")  # META and the first listing are gone before it is named

    objects.save = save_then_erase  # type: ignore[method-assign]
    assert store.compact_user("t1", "u1") is False
    assert _objects(aws) == []


def test_a_stored_snapshot_that_is_gone_or_not_the_named_one_is_never_used(aws: Any) -> None:
    store = _store(aws, compact_writes=1)
    store.put([rec("green tea")])
    assert store.compact_user("t1", "u1")
    (key,) = _objects(aws)
    aws[1].delete_object(Bucket=BUCKET, Key=key)  # replaced meanwhile: the container reads the partition
    assert _answers(_store(aws)) == _answers(DynamoDBMemoryStore(TABLE, aws[0]))


def test_a_stored_snapshot_this_code_cannot_read_is_passed_over_and_replaced(aws: Any) -> None:
    """One a newer release wrote (another format line) before a rollback: searches and the
    workers' compaction read the partition instead of failing on it."""
    store = _store(aws, compact_writes=1)
    store.put([rec("green tea")])
    assert store.compact_user("t1", "u1")
    (key,) = _objects(aws)
    body = aws[1].get_object(Bucket=BUCKET, Key=key)["Body"].read()
    newer = body.replace(packed.MAGIC, b"memstack-snapshot/9\n", 1)
    assert len(newer) == len(body) and newer != body
    aws[1].put_object(Bucket=BUCKET, Key=key, Body=newer)
    store.put([rec("more tea")])
    assert _answers(_store(aws)) == _answers(DynamoDBMemoryStore(TABLE, aws[0]))
    assert _store(aws, compact_writes=1).compact_user("t1", "u1") is True  # a worker's container
    (replaced,) = _objects(aws)
    assert replaced != key
    assert _answers(_store(aws)) == _answers(DynamoDBMemoryStore(TABLE, aws[0]))


def test_the_restore_runbooks_meta_update_makes_every_container_read_the_partition_afresh(aws: Any) -> None:
    """docs/operations.md: items copied back write no log; a new epoch and no named snapshot fix that."""
    import uuid

    from memstack.adapters.dynamodb import items

    warm, writer = _store(aws), _store(aws, compact_writes=1)
    writer.put([rec("tea before the restore")])
    assert len(_answers(warm)[0]) == 1  # cached at write 1
    writer.put([rec("more tea")])
    writer.put([rec("even more tea")])
    assert writer.compact_user("t1", "u1")
    copied = rec("tea copied back from the restored table")
    aws[0].put_item(TableName=TABLE, Item=items.to_item(copied))  # the runbook's BatchWriteItem
    aws[0].update_item(
        TableName=TABLE,
        Key={"pk": {"S": "t1#u1"}, "sk": {"S": "META"}},
        UpdateExpression="SET gen = :g, epoch = :e REMOVE snap_seq, snap_key, snap_size",
        ExpressionAttributeValues={":g": {"S": uuid.uuid4().hex}, ":e": {"S": uuid.uuid4().hex}},
    )
    for store in (warm, _store(aws)):
        assert copied.id in _answers(store)[0]


def test_one_compaction_prunes_a_bounded_part_of_a_long_log(aws: Any, monkeypatch: Any) -> None:
    from memstack.adapters.dynamodb import store as store_module

    monkeypatch.setattr(store_module, "PRUNE_MAX", 1)
    store = _store(aws)
    for i in range(6):
        store.put([rec(f"tea {i}")])
        if i in (2, 5):
            assert store.compact_user("t1", "u1")
    assert _logged(aws) == 5  # of writes 1-3 (covered by both snapshots) only the oldest went
    for i in range(3):
        store.put([rec(f"more tea {i}")])
    assert store.compact_user("t1", "u1")
    assert _logged(aws) == 7  # writes 3-9: one more of the old ones a compaction


def test_a_failing_compaction_is_a_dependency_failure_not_a_botocore_error(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError
    from memstack.errors import DependencyFailed

    def refuse(*_: Any, **__: Any) -> bool:
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "UpdateItem")

    store = _store(aws, compact_writes=1)
    store.put([rec("tea")])
    monkeypatch.setattr(writelog, "point_at_snapshot", refuse)
    with pytest.raises(DependencyFailed):
        store.compact_user("t1", "u1")
