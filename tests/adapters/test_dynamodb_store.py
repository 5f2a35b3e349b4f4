"""The DynamoDB store beyond the shared contract: item layout, the partition cache, concurrency."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.stub import Stubber
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain import versions
from memstack.domain.vectors import coarse_prefix
from memstack.errors import Conflict, DependencyFailed, SettingsError
from memstack.models import MemoryFilters, MemoryRecord
from moto import mock_aws

from ..conformance.conftest import TABLE, create_memories_table, dynamodb_client

EMB = HashingEmbedder(32)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        c = dynamodb_client()
        create_memories_table(c)
        yield c


@pytest.fixture
def calls(client: Any) -> Iterator[Counter[str]]:
    """Count the DynamoDB operations the (shared) client makes, via botocore's own event hook."""
    counter: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        counter.update([model.name])

    client.meta.events.register("before-call.dynamodb.*", count)
    yield counter
    client.meta.events.unregister("before-call.dynamodb.*", count)


@pytest.fixture
def partition_reads(client: Any) -> Iterator[list[int]]:
    """How many Queries read the memory items (``MEM#``), not the write log."""
    seen: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        if ":mem" in params.get("ExpressionAttributeValues", {}):
            seen.append(1)

    client.meta.events.register("provide-client-params.dynamodb.Query", count)
    yield seen
    client.meta.events.unregister("provide-client-params.dynamodb.Query", count)


def rec(content: str, user: str = "u1", **kw: Any) -> MemoryRecord:
    vec = EMB.embed([content])[0]
    return MemoryRecord(
        tenant="t1",
        user_id=user,
        content=content,
        created_at=T0,
        embedding_full=vec.tolist(),
        embedding_coarse=coarse_prefix(vec, 8).tolist(),
        **kw,
    )


def test_items_follow_the_documented_layout(client: Any) -> None:
    store = DynamoDBMemoryStore(TABLE, client)
    r = rec("I keep bees", source_ids=["m1"], metadata={"score": 0.25})
    store.put([r])
    item = client.get_item(TableName=TABLE, Key={"pk": {"S": "t1#u1"}, "sk": {"S": f"MEM#{r.id}"}})["Item"]
    assert item["emb_full"]["B"] == np.asarray(r.embedding_full, dtype=np.float32).tobytes()
    assert len(item["emb_coarse"]["B"]) == 8 * 4
    assert item["is_current"] == {"BOOL": True}
    assert item["created_at"] == {"S": "2026-01-01T00:00:00+00:00"}
    assert item["source_ids"] == {"L": [{"S": "m1"}]}
    assert item["metadata"] == {"S": '{"score": 0.25}'}
    assert "session_id" not in item  # absent optionals are left out, not stored as NULL
    meta = client.get_item(TableName=TABLE, Key={"pk": {"S": "t1#u1"}, "sk": {"S": "META"}})["Item"]
    assert len(meta["gen"]["S"]) == 32


def test_repeated_searches_reuse_the_cached_partition_until_a_write(client: Any, calls: Counter[str]) -> None:
    store = DynamoDBMemoryStore(TABLE, client)
    store.put([rec(f"note {i} about gardening") for i in range(5)])
    calls.clear()
    q = coarse_prefix(EMB.embed(["gardening"])[0], 8)
    for _ in range(3):
        assert len(store.bm25_search("t1", "u1", "gardening", 10, MemoryFilters())) == 5
        assert len(store.vector_search("t1", "u1", q, 10, MemoryFilters())) == 5
    assert calls["Query"] == 1  # one partition read; every other search only read META
    assert calls["GetItem"] == 6
    store.put([rec("a new note about gardening")])
    calls.clear()
    assert len(store.bm25_search("t1", "u1", "gardening", 10, MemoryFilters())) == 6
    # After a write: META, the write log since the snapshot, the item it names; not the partition.
    assert dict(calls) == {"GetItem": 1, "Query": 1, "BatchGetItem": 1}


def test_a_snapshot_brought_forward_answers_as_one_read_from_scratch(
    client: Any, partition_reads: list[int]
) -> None:
    warm = DynamoDBMemoryStore(TABLE, client)
    writer = DynamoDBMemoryStore(TABLE, client)
    writer.put([rec(f"note {i} about tea and gardening") for i in range(20)])
    q = coarse_prefix(EMB.embed(["tea garden"])[0], 8)
    warm.bm25_search("t1", "u1", "tea", 5, MemoryFilters())
    partition_reads.clear()
    for step in range(6):
        listed, _ = writer.list("t1", "u1", MemoryFilters(), 3)
        writer.put([rec(f"fresh tea {step}"), rec(f"garden {step}")])
        new = versions.new_version(listed[0], content=f"tea, version {step}", embedder=EMB, coarse_dim=8)
        writer.supersede("t1", "u1", listed[0].id, new)
        writer.mark("t1", "u1", [listed[1].id], consolidated=True)
        assert warm.bm25_search("t1", "u1", "tea", 50, MemoryFilters())
    assert len(partition_reads) == 1  # the writer's first list; the warm store never re-read
    cold = DynamoDBMemoryStore(TABLE, client)

    def scored(hits: list[Any]) -> list[tuple[float, str]]:  # ties come in row order, which differs
        return sorted((-round(h.score, 5), h.id) for h in hits)

    for query in ("tea", "garden version", "fresh"):
        assert scored(warm.bm25_search("t1", "u1", query, 50, MemoryFilters())) == scored(
            cold.bm25_search("t1", "u1", query, 50, MemoryFilters())
        )
    assert scored(warm.vector_search("t1", "u1", q, 50, MemoryFilters())) == scored(
        cold.vector_search("t1", "u1", q, 50, MemoryFilters())
    )
    assert warm.list("t1", "u1", MemoryFilters(), 100) == cold.list("t1", "u1", MemoryFilters(), 100)


def test_an_erase_then_more_writes_than_before_is_never_carried_forward(client: Any) -> None:
    reader, writer = DynamoDBMemoryStore(TABLE, client), DynamoDBMemoryStore(TABLE, client)
    writer.put([rec("the secret is cats")])
    writer.put([rec("cats again")])
    assert len(reader.bm25_search("t1", "u1", "cats", 5, MemoryFilters())) == 2
    writer.erase_user("t1", "u1")
    for i in range(4):  # the new partition's sequence passes the reader's snapshot's
        writer.put([rec(f"cats, new life {i}")])
    hits = reader.bm25_search("t1", "u1", "cats", 10, MemoryFilters())
    assert sorted(reader.get("t1", "u1", h.id).content for h in hits) == [
        f"cats, new life {i}" for i in range(4)
    ]


def test_a_write_from_another_container_invalidates_the_cache(client: Any) -> None:
    reader, writer = DynamoDBMemoryStore(TABLE, client), DynamoDBMemoryStore(TABLE, client)
    writer.put([rec("the old fact about cats")])
    assert len(reader.bm25_search("t1", "u1", "cats", 5, MemoryFilters())) == 1
    writer.put([rec("another fact about cats")])
    assert len(reader.bm25_search("t1", "u1", "cats", 5, MemoryFilters())) == 2
    # An erase then the same number of writes must not look like the old partition.
    writer.erase_user("t1", "u1")
    writer.put([rec("cats are back"), rec("more cats")])
    hits = reader.bm25_search("t1", "u1", "cats", 5, MemoryFilters())
    assert {reader.get("t1", "u1", h.id).content for h in hits} == {"cats are back", "more cats"}


def test_of_two_concurrent_updates_exactly_one_wins(client: Any) -> None:
    a, b = DynamoDBMemoryStore(TABLE, client), DynamoDBMemoryStore(TABLE, client)
    old = rec("I live in Berlin")
    a.put([old])
    seen_by_a = a.get("t1", "u1", old.id)
    seen_by_b = b.get("t1", "u1", old.id)
    assert seen_by_a is not None and seen_by_b is not None
    first = versions.new_version(seen_by_a, content="I live in Lisbon", embedder=EMB, coarse_dim=8)
    second = versions.new_version(seen_by_b, content="I live in Porto", embedder=EMB, coarse_dim=8)
    a.supersede("t1", "u1", old.id, first)
    with pytest.raises(Conflict):
        b.supersede("t1", "u1", old.id, second)
    current, _ = b.list("t1", "u1", MemoryFilters(), 10)
    assert [r.content for r in current] == ["I live in Lisbon"]
    assert b.get("t1", "u1", second.id) is None


def test_large_writes_are_split_into_transactions(client: Any, calls: Counter[str]) -> None:
    store = DynamoDBMemoryStore(TABLE, client)
    store.put([rec(f"memory {i}") for i in range(60)])
    assert calls["TransactWriteItems"] == 3
    assert len(store.list("t1", "u1", MemoryFilters(), 100)[0]) == 60


def test_duplicate_ids_in_one_write_are_refused_before_anything_is_written(client: Any) -> None:
    store = DynamoDBMemoryStore(TABLE, client)
    r = rec("twice")
    with pytest.raises(Conflict):
        store.put([r, r])
    assert store.get("t1", "u1", r.id) is None


def test_erase_pages_through_a_partition_larger_than_one_batch(client: Any) -> None:
    store = DynamoDBMemoryStore(TABLE, client)
    store.put([rec(f"memory {i}") for i in range(70)])
    store.put([rec("someone else", user="u2")])
    assert store.erase_user("t1", "u1") == {"memories": 70}
    remaining = client.scan(TableName=TABLE)["Items"]
    # What stays: the other user (its records and its entry in the tenant's user directory, "t1#"),
    # and the erasure marker, keyed by a hash (no user id in it).
    markers = {i["pk"]["S"] for i in remaining if i["pk"]["S"].startswith("ERASED#")}
    assert {i["pk"]["S"] for i in remaining} - markers == {"t1#u2", "t1#"}
    assert [i["sk"]["S"] for i in remaining if i["pk"]["S"] == "t1#"] == ["USER#u2"]
    assert len(markers) == 1 and not any("u1" in str(i) for i in remaining if i["pk"]["S"] in markers)


def test_a_missing_table_is_a_dependency_failure(client: Any) -> None:
    store = DynamoDBMemoryStore("no-such-table", client)
    with pytest.raises(DependencyFailed):
        store.put([rec("lost")])


def test_the_table_name_is_required() -> None:
    with pytest.raises(SettingsError, match="MEMSTACK_MEMORIES_TABLE"):
        DynamoDBMemoryStore("", None)


def test_hybrid_candidates_read_the_partition_once(client: Any, calls: Counter[str]) -> None:
    store = DynamoDBMemoryStore(TABLE, client)
    store.put([rec("tea with lemon"), rec("coffee with milk")])
    calls.clear()
    q = coarse_prefix(EMB.embed(["tea"])[0], 8)
    bm25, vec = store.hybrid_candidates("t1", "u1", "tea", q, 5, 5, MemoryFilters())
    assert len(bm25) == 1 and len(vec) == 2
    assert bm25 == store.bm25_search("t1", "u1", "tea", 5, MemoryFilters())
    assert calls["GetItem"] == 2  # one META read for the pair, one for the check after


def test_a_search_reads_the_partition_state_once(client: Any, calls: Counter[str]) -> None:
    from memstack.domain.retrieval.config import RetrievalConfig
    from memstack.domain.retrieval.pipeline import Retriever
    from memstack.domain.retrieval.types import SearchRequest

    store = DynamoDBMemoryStore(TABLE, client)
    store.put([rec(f"note {i} about tea and gardening") for i in range(30)])
    retriever = Retriever(store, HashingEmbedder(32), RetrievalConfig(coarse_dim=8, vector_candidates=20))
    request = SearchRequest(tenant="t1", user_id="u1", query="where did I drink tea before?", top_k=5)
    calls.clear()
    first = retriever.search(request)
    # META once, the partition once (with the full vectors: the exact vector stage, the
    # rescoring and the near-duplicate check read them from the snapshot, not the table).
    # Records and version chains (a history query) come from the snapshot too.
    assert dict(calls) == {"GetItem": 1, "Query": 1}
    calls.clear()
    second = retriever.search(request)
    assert dict(calls) == {"GetItem": 1}  # the same state: the cached snapshot
    assert [h.record.id for h in second.hits] == [h.record.id for h in first.hits]
    store.put([rec("fresh tea notes")])
    calls.clear()
    retriever.search(request)
    # META, the write log since the snapshot, the new item
    assert dict(calls) == {"GetItem": 1, "Query": 1, "BatchGetItem": 1}


class WithoutHybrid:
    """The store (and its per-search view) without ``hybrid_candidates``: each search asked alone."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "hybrid_candidates":
            raise AttributeError(name)
        return getattr(self._store, name)

    def read_view(self, tenant: str, user_id: str) -> WithoutHybrid:
        return WithoutHybrid(self._store.read_view(tenant, user_id))


def test_the_two_stage_search_takes_both_candidate_lists_from_hybrid_candidates_with_the_same_results(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstack.domain.retrieval.config import RetrievalConfig
    from memstack.domain.retrieval.pipeline import Retriever
    from memstack.domain.retrieval.types import SearchRequest

    store = DynamoDBMemoryStore(TABLE, client)
    store.put([rec(f"note {i} about {('tea', 'gardening', 'rain')[i % 3]}") for i in range(12)])
    asked: list[tuple[str, int, int]] = []
    hybrid = DynamoDBMemoryStore.hybrid_candidates

    def spy(
        self: Any, tenant: str, user_id: str, query: str, coarse: Any, k_bm25: int, k_vec: int, f: Any
    ) -> Any:
        asked.append((query, k_bm25, k_vec))
        return hybrid(self, tenant, user_id, query, coarse, k_bm25, k_vec, f)

    monkeypatch.setattr(DynamoDBMemoryStore, "hybrid_candidates", spy)
    # exact_vector_below=0: the two-stage path a user above the exact pass's size takes
    config = RetrievalConfig(coarse_dim=8, vector_candidates=20, bm25_candidates=15, exact_vector_below=0)
    request = SearchRequest(
        tenant="t1", user_id="u1", query="tea in the rain", explain=True, reference_time=T0
    )
    together = Retriever(store, EMB, config).search(request)
    assert asked == [("tea in the rain", 15, 20)]
    separate = Retriever(WithoutHybrid(store), EMB, config).search(request)  # type: ignore[arg-type]
    assert len(asked) == 1
    assert together.stage_status["bm25"] == "ok: 8 candidates"
    assert [(h.record.id, h.score, h.stages) for h in together.hits] == [
        (h.record.id, h.score, h.stages) for h in separate.hits
    ]
    assert together.evidence == separate.evidence > 0


def _cancelled(stubber: Stubber, *codes: str) -> None:
    stubber.add_client_error(
        "transact_write_items",
        service_error_code="TransactionCanceledException",
        service_message="Transaction cancelled",
        http_status_code=400,
        modeled_fields={"CancellationReasons": [{"Code": c} for c in codes]},
    )


def test_a_transaction_conflict_with_another_writer_is_retried() -> None:
    client = boto3.client("dynamodb", region_name="us-east-1")
    with Stubber(client) as stubber:
        stubber.add_response("get_item", {})  # the partition's write sequence
        _cancelled(stubber, "None", "TransactionConflict")
        stubber.add_response("transact_write_items", {})
        DynamoDBMemoryStore(TABLE, client).put([rec("written on the second try")])
        stubber.assert_no_pending_responses()


def test_a_failed_condition_is_a_conflict_not_a_retry() -> None:
    client = boto3.client("dynamodb", region_name="us-east-1")
    with Stubber(client) as stubber:
        stubber.add_response("get_item", {})  # the old version's tier, for the user directory's counts
        stubber.add_response("get_item", {})  # the partition's write sequence (writelog)
        _cancelled(stubber, "ConditionalCheckFailed", "None", "None", "None", "None")
        with pytest.raises(Conflict, match="is not the current version"):
            DynamoDBMemoryStore(TABLE, client).supersede("t1", "u1", "old", rec("new"))
        stubber.assert_no_pending_responses()


def test_a_partition_over_one_megabyte_is_read_page_by_page(client: Any, calls: Counter[str]) -> None:
    store = DynamoDBMemoryStore(TABLE, client)
    # ~30 kB each: 40 of them exceed the 1 MB a single Query returns.
    store.put([MemoryRecord(tenant="t1", user_id="u1", content=f"word{i} " * 4000) for i in range(40)])
    calls.clear()
    listed, _ = store.list("t1", "u1", MemoryFilters(), 500)
    assert len(listed) == 40
    assert calls["Query"] == 2


def test_a_conflict_in_a_later_chunk_takes_back_the_earlier_ones(client: Any) -> None:
    store = DynamoDBMemoryStore(TABLE, client)
    existing = rec("already here")
    store.put([existing])
    fresh = [rec(f"fresh {i}") for i in range(30)]  # the first 25 go in one transaction
    with pytest.raises(Conflict, match=existing.id):
        store.put([*fresh, existing])
    listed, _ = store.list("t1", "u1", MemoryFilters(), 100)
    assert [r.id for r in listed] == [existing.id]


def test_a_write_that_lost_its_sequence_number_takes_the_next(client: Any, monkeypatch: Any) -> None:
    from memstack.adapters.dynamodb import writelog

    store = DynamoDBMemoryStore(TABLE, client)
    first, second = rec("first"), rec("second")
    store.put([first])
    real = writelog.read_head
    stale = iter([writelog.Head(token=None, seq=0, epoch=None)])  # as if read before `first` committed
    monkeypatch.setattr(writelog, "read_head", lambda *args: next(stale, None) or real(*args))
    store.put([second])
    assert real(client, TABLE, "t1", "u1").seq == 2
    assert writelog.changed_since(client, TABLE, "t1", "u1", 0, 2) == [first.id, second.id]
    assert writelog.changed_since(client, TABLE, "t1", "u1", 0, 3) is None  # write 3 has not happened
