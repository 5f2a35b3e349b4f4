"""The store on an OpenSearch Serverless VECTORSEARCH collection: the exact requests, and recorded answers.

What AWS documents for vector-search collections, asserted on the wire:
no ``_id`` in any write (the collection assigns ids; reads go by the
``doc_id`` field), no ``refresh`` parameter anywhere, no delete-by-query,
and supersede/erase that stay correct without either.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from memstack.adapters.opensearch import mapping
from memstack.adapters.opensearch.permissions import calls
from memstack.adapters.opensearch.serverless import ServerlessDocuments
from memstack.adapters.opensearch.store import OpenSearchMemoryStore
from memstack.errors import BadRequest, Conflict
from memstack.models import MemoryRecord
from memstack.settings import load_settings

from . import opensearch_recorded as rec
from .opensearch_fake import Recorder, Request, recording_client
from .test_opensearch_store import METADATA_VALUES_FIELD

INDEX = "memstack-memories"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OWNER = [{"term": {"tenant": "t1"}}, {"term": {"user_id": "u1"}}]
NO_VECTORS = {"excludes": ["embedding_full", "embedding_coarse"]}
#: the opensearch-py API each request path is (to compare with the permissions table)
API_OF = {
    ("HEAD", f"/{INDEX}"): "indices.exists",
    ("PUT", f"/{INDEX}"): "indices.create",
    ("PUT", f"/{INDEX}/_mapping"): "indices.put_mapping",
    ("POST", "/_bulk"): "bulk",
    ("POST", f"/{INDEX}/_search"): "search",
    ("POST", "/_msearch"): "msearch",
}


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def make_store(recorder: Recorder, *, ready: bool = True) -> tuple[OpenSearchMemoryStore, list[float]]:
    sleeps: list[float] = []
    ticks = iter(range(1_000, 2_000))
    store = OpenSearchMemoryStore.serverless(
        recording_client(recorder),
        alias=INDEX,
        embedding_dim=4,
        coarse_dim=2,
        sleep=sleeps.append,
        auto_create=not ready,
        visibility_seconds=12.0,
        clock=lambda: next(ticks),
    )
    return store, sleeps


def documents(store: OpenSearchMemoryStore) -> ServerlessDocuments:
    assert isinstance(store.documents, ServerlessDocuments)
    return store.documents


def record(memory_id: str, content: str = "Alex moved to Lisbon", **kw: Any) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        tenant="t1",
        user_id="u1",
        content=content,
        created_at=T0,
        embedding_full=[0.5, 0.5, 0.5, 0.5],
        embedding_coarse=[0.6, 0.8],
        **kw,
    )


def did(memory_id: str) -> str:
    return mapping.doc_id("t1", "u1", memory_id)


def source(r: MemoryRecord, revision: int) -> dict[str, Any]:
    return {**mapping.to_doc(r), "doc_id": did(r.id), "revision": revision}


def hits(*copies: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A search answer holding these (assigned _id, _source) copies."""
    answer = rec.search_answer([])
    answer["hits"]["hits"] = [{"_index": INDEX, "_id": i, "_score": None, "_source": s} for i, s in copies]
    return answer


def bulk_items(*items: tuple[str, str, int]) -> dict[str, Any]:
    return rec.bulk(*(rec.bulk_item(action, i, status) for action, i, status in items))


def assert_serverless_safe(requests: list[Request]) -> None:
    """Nothing a vector-search collection refuses: no refresh, no explicit ids, only supported APIs."""
    for r in requests:
        assert "refresh" not in r.params, (r.method, r.path, r.params)
        assert (r.method, r.path) in API_OF, (r.method, r.path)
        if r.path == "/_bulk":
            for line in r.lines:
                if "index" in line or "create" in line:
                    assert "_id" not in next(iter(line.values())), line
    used = {API_OF[(r.method, r.path)] for r in requests}
    assert used <= set(calls("runtime", "aoss"))  # every call has its data-access permission


def by_doc_ids(*memory_ids: str, vectors: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "size": 1000,
        "query": {"bool": {"filter": [*OWNER, {"terms": {"doc_id": [did(m) for m in memory_ids]}}]}},
        "sort": [{"revision": {"order": "desc"}}],
    }
    if not vectors:
        body["_source"] = NO_VECTORS
    return body


# ------------------------------------------------------------------------- index
def test_first_use_creates_the_index_with_its_mappings_and_no_template_or_alias(recorder: Recorder) -> None:
    store, _ = make_store(recorder, ready=False)
    recorder.reply(404, {})
    recorder.reply(200, {"acknowledged": True, "index": INDEX})
    recorder.reply(200, hits())
    assert store.get("t1", "u1", "m1") is None
    head, create, lookup = recorder.requests
    assert (head.method, head.path) == ("HEAD", f"/{INDEX}")
    assert (create.method, create.path) == ("PUT", f"/{INDEX}")
    assert create.body["settings"] == {"index": {"knn": True}}
    properties = create.body["mappings"]["properties"]
    assert properties["doc_id"] == {"type": "keyword"} and properties["revision"] == {"type": "long"}
    assert lookup.body == by_doc_ids("m1")  # a read by id is a query on the doc_id field
    assert_serverless_safe(recorder.requests)


def test_the_factory_picks_the_serverless_store_for_aoss() -> None:
    settings = load_settings(
        store_backend="opensearch",
        opensearch_endpoint="https://x.us-east-1.aoss.amazonaws.com",
        opensearch_service="aoss",
        opensearch_refresh="wait_for",  # ignored: a collection refuses it
        embedder="hashing",
    )
    store = OpenSearchMemoryStore.from_settings(settings, client=object())
    assert isinstance(store.documents, ServerlessDocuments) and store.index.refresh is None
    assert store.documents.visibility_seconds == settings.opensearch.visibility_seconds


def test_reindex_is_refused_with_the_way_to_do_it(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    with pytest.raises(BadRequest, match="no _reindex"):
        store.reindex()


# ------------------------------------------------------------------------- writes
def test_put_checks_the_ids_are_free_then_indexes_without_ids_or_refresh(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    recorder.reply(200, hits())
    recorder.reply(200, bulk_items(("index", "aoss-1", 201), ("index", "aoss-2", 201)))
    store.put([record("m1"), record("m2", "Alex keeps bees")])
    lookup, write = recorder.requests
    assert lookup.body == by_doc_ids("m1", "m2")
    assert write.lines == [
        {"index": {"_index": INDEX}},
        source(record("m1"), 1000),
        {"index": {"_index": INDEX}},
        source(record("m2", "Alex keeps bees"), 1000),
    ]
    assert_serverless_safe(recorder.requests)


def test_put_of_a_known_id_is_a_conflict_and_writes_nothing(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    recorder.reply(200, hits(("aoss-1", source(record("m1"), 5))))
    with pytest.raises(Conflict, match="m1"):
        store.put([record("m1")])
    assert len(recorder.requests) == 1


def test_a_partly_failed_put_deletes_what_it_wrote(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    recorder.reply(200, hits())
    recorder.reply(
        200,
        rec.bulk(
            rec.bulk_item("index", "aoss-1", 201), rec.bulk_item("index", "", 400, error="mapper_parsing")
        ),
    )
    recorder.reply(200, bulk_items(("delete", "aoss-1", 200)))
    with pytest.raises(Exception, match="mapper parsing"):
        store.put([record("m1"), record("m2")])
    undo = recorder.requests[-1]
    assert undo.lines == [{"delete": {"_index": INDEX, "_id": "aoss-1"}}]


def test_supersede_writes_the_retired_copy_and_the_new_version_and_deletes_the_old_copy(
    recorder: Recorder,
) -> None:
    """No update in place: a higher revision replaces the copy, in one bulk with the new version."""
    store, _ = make_store(recorder)
    old = record("m1")
    new = record("m2", "Alex moved to Porto", replaces_id="m1", version=2)
    recorder.reply(200, hits(("aoss-old", source(old, 7))))
    recorder.reply(200, hits())
    recorder.reply(
        200,
        bulk_items(("index", "aoss-retired", 201), ("index", "aoss-new", 201), ("delete", "aoss-old", 200)),
    )
    store.supersede("t1", "u1", "m1", new)
    read_old, new_is_free, write = recorder.requests
    assert read_old.body == by_doc_ids("m1", vectors=True)
    assert new_is_free.body == by_doc_ids("m2")
    retired = {**source(old, 1000), "is_current": False, "superseded_at": new.created_at.isoformat()}
    assert write.lines == [
        {"index": {"_index": INDEX}},
        retired,
        {"index": {"_index": INDEX}},
        source(new, 1000),
        {"delete": {"_index": INDEX, "_id": "aoss-old"}},
    ]
    assert_serverless_safe(recorder.requests)


def test_supersede_of_a_retired_version_is_a_conflict(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    retired = {**source(record("m1"), 9), "is_current": False}
    recorder.reply(200, hits(("aoss-9", retired), ("aoss-3", source(record("m1"), 3))))
    recorder.reply(200, bulk_items(("delete", "aoss-3", 200)))
    with pytest.raises(Conflict, match="not the current version"):
        store.supersede("t1", "u1", "m1", record("m2", replaces_id="m1"))
    # The older copy (revision 3, still "current") lost to revision 9 and was deleted on the way.
    assert recorder.requests[1].lines == [{"delete": {"_index": INDEX, "_id": "aoss-3"}}]


def test_when_the_new_version_fails_the_retired_copy_is_taken_back(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    recorder.reply(200, hits(("aoss-old", source(record("m1"), 7))))
    recorder.reply(200, hits())
    recorder.reply(
        200,
        rec.bulk(
            rec.bulk_item("index", "aoss-retired", 201),
            rec.bulk_item("index", "", 429, error="too_many_requests"),
            rec.bulk_item("delete", "aoss-old", 200),
        ),
    )
    recorder.reply(200, bulk_items(("index", "aoss-new", 201)))  # the 429 item, sent again
    store.supersede("t1", "u1", "m1", record("m2", replaces_id="m1"))
    retry = recorder.requests[-1]
    assert retry.lines[0] == {"index": {"_index": INDEX}} and retry.lines[1]["doc_id"] == did("m2")


# ------------------------------------------------------------------------- reads
def test_reads_take_the_newest_copy_and_delete_the_stale_one(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    recorder.reply(
        200,
        hits(
            ("aoss-b", source(record("m1", "Alex moved to Porto"), 20)),
            ("aoss-a", source(record("m1"), 10)),
        ),
    )
    recorder.reply(200, bulk_items(("delete", "aoss-a", 200)))
    got = store.get("t1", "u1", "m1")
    assert got is not None and got.content == "Alex moved to Porto"
    assert recorder.requests[1].lines == [{"delete": {"_index": INDEX, "_id": "aoss-a"}}]
    assert_serverless_safe(recorder.requests)


def test_mark_rewrites_metadata_as_a_new_revision(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    recorder.reply(200, hits(("aoss-1", source(record("m1"), 4))))
    recorder.reply(200, bulk_items(("index", "aoss-2", 201), ("delete", "aoss-1", 200)))
    assert store.mark("t1", "u1", ["m1"], consolidated=True) == 1
    write = recorder.requests[-1]
    assert write.lines[1]["metadata"] == {"consolidated": True} and write.lines[1]["revision"] == 1000
    assert write.lines[1]["metadata_terms"] == ["consolidated=b:true"]  # what metadata filters read
    assert write.lines[1]["metadata_values"] == [{"key": "consolidated", "b": True}]  # and expressions
    assert write.lines[2] == {"delete": {"_index": INDEX, "_id": "aoss-1"}}


def test_link_conflicts_writes_a_new_revision_with_the_longer_list(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    recorder.reply(200, hits(("aoss-1", source(record("m1"), 4))))
    recorder.reply(200, bulk_items(("index", "aoss-2", 201), ("delete", "aoss-1", 200)))
    assert store.link_conflicts("t1", "u1", {"m1": ["m2"]}) == 1
    write = recorder.requests[-1]
    assert write.lines[1]["conflicts_with"] == ["m2"] and write.lines[1]["revision"] == 1000
    assert write.lines[1]["content"] == "Alex moved to Lisbon"  # the rest of the document as it was
    assert write.lines[2] == {"delete": {"_index": INDEX, "_id": "aoss-1"}}
    assert_serverless_safe(recorder.requests)


def test_an_index_made_before_metadata_terms_gets_the_field_added(recorder: Recorder) -> None:
    store, _ = make_store(recorder, ready=False)
    recorder.reply(200, {})  # the index exists
    recorder.reply(200, {"acknowledged": True})
    store.ensure_index()
    _head, put_mapping = recorder.requests
    assert (put_mapping.method, put_mapping.path) == ("PUT", f"/{INDEX}/_mapping")
    assert put_mapping.body == {
        "properties": {
            "metadata_terms": {"type": "keyword"},
            "metadata_values": METADATA_VALUES_FIELD,
            "conflicts_with": {"type": "keyword"},
        }
    }
    assert_serverless_safe(recorder.requests)


# ------------------------------------------------------------------------- erase
def test_erase_deletes_by_id_then_looks_again_after_the_collection_refreshes(recorder: Recorder) -> None:
    """No delete-by-query: search, delete by _id; a write not yet searchable is caught on the second look."""
    store, sleeps = make_store(recorder)
    owner_ids = {"size": 1000, "_source": False, "query": {"bool": {"filter": OWNER}}}
    recorder.reply(200, hits(("aoss-1", {}), ("aoss-2", {})))
    recorder.reply(200, bulk_items(("delete", "aoss-1", 200), ("delete", "aoss-2", 200)))
    recorder.reply(200, hits())
    recorder.reply(200, hits(("aoss-3", {})))  # written just before the erase, visible after the refresh
    recorder.reply(200, bulk_items(("delete", "aoss-3", 200)))
    recorder.reply(200, hits())
    recorder.reply(200, hits())
    assert store.erase_user("t1", "u1") == {"memories": 3}
    searches = [r for r in recorder.requests if r.path.endswith("/_search")]
    assert all(r.body == owner_ids for r in searches)
    assert sleeps == [12.0, 12.0]  # one refresh wait per look, and it stopped after a clean one
    assert_serverless_safe(recorder.requests)


def test_hybrid_search_is_one_msearch_without_refresh_and_one_hit_per_memory(recorder: Recorder) -> None:
    import numpy as np
    from memstack.models import MemoryFilters

    store, _ = make_store(recorder)
    bm25 = rec.search_answer([("aoss-1", "m1", 3.0), ("aoss-0", "m1", 2.5)])  # a copy not yet deleted
    knn = rec.search_answer([("aoss-1", "m1", 0.9)])
    recorder.reply(200, {"took": 4, "responses": [bm25, knn]})
    bm25_hits, knn_hits = store.hybrid_candidates(
        "t1", "u1", "where does Alex live", np.array([0.6, 0.8]), 10, 10, MemoryFilters()
    )
    assert [h.id for h in bm25_hits] == ["m1"] and [h.id for h in knn_hits] == ["m1"]
    assert_serverless_safe(recorder.requests)


# -------------------------------------------------------------------- erase fence
class Log:
    """An erasure log answering from a script: one answer per read (the last one repeats)."""

    def __init__(self, *answers: float | None) -> None:
        self.answers = list(answers)
        self.reads = 0

    def erased_at(self, tenant: str, user_id: str) -> float | None:
        assert (tenant, user_id) == ("t1", "u1")
        self.reads += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_a_job_begun_before_the_erase_writes_nothing(recorder: Recorder) -> None:
    from memstack.domain.erasure import Erased, Fence

    store, _ = make_store(recorder)
    documents(store).erasure_log = Log(T0.timestamp() + 5)
    with pytest.raises(Erased):
        store.put([record("m1")], fence=Fence.at(T0))
    assert recorder.requests == []  # refused before anything was sent


def test_a_write_landing_while_the_erase_runs_is_deleted_by_its_assigned_id(recorder: Recorder) -> None:
    from memstack.domain.erasure import Erased, Fence

    store, _ = make_store(recorder)
    documents(store).erasure_log = log = Log(None, T0.timestamp() + 1)  # the erase came between the two reads
    recorder.reply(200, hits())
    recorder.reply(200, bulk_items(("index", "aoss-7", 201)))
    recorder.reply(200, bulk_items(("delete", "aoss-7", 200)))
    with pytest.raises(Erased):
        store.put([record("m1")], fence=Fence.at(T0))
    undo = recorder.requests[-1]
    assert undo.lines == [{"delete": {"_index": INDEX, "_id": "aoss-7"}}]
    assert log.reads == 2
    assert_serverless_safe(recorder.requests)


def test_work_begun_after_the_erase_writes_and_reads_the_log_twice(recorder: Recorder) -> None:
    from memstack.domain.erasure import Fence

    store, _ = make_store(recorder)
    documents(store).erasure_log = log = Log(T0.timestamp() - 60)
    recorder.reply(200, hits())
    recorder.reply(200, bulk_items(("index", "aoss-1", 201)))
    store.put([record("m1")], fence=Fence.at(T0))
    assert len(recorder.requests) == 2 and log.reads == 2


def test_the_service_fences_a_collection_with_the_dynamodb_stm_erasure_marker(tmp_path: Any) -> None:
    import boto3
    from memstack.adapters.dynamodb.stm import DynamoDbShortTermStore, create_stm_table
    from memstack.factory import build_service
    from moto import mock_aws

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_stm_table(ddb, "stm")
        stm = DynamoDbShortTermStore("stm", client=ddb)
        settings = load_settings(
            data_dir=tmp_path,
            embedder="hashing",
            store_backend="opensearch",
            opensearch_service="aoss",
            opensearch_endpoint="https://collection.test",
            aws_region="us-east-1",
        )
        # No collection answers here: the start-up embedder check (a read of it) is not what this checks.
        service = build_service(settings, stm=stm, embedder_check=False)
        try:
            documents = service.store.documents  # type: ignore[attr-defined]
            assert isinstance(documents, ServerlessDocuments) and documents.erasure_log is stm
            assert stm.erased_at("t1", "u1") is None
            stm.erase_user("t1", "u1")
            erased = stm.erased_at("t1", "u1")
            assert erased is not None and erased > T0.timestamp()
        finally:
            service.close()
