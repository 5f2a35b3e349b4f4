"""The OpenSearch store: the exact requests it builds, and how it reads recorded answers."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from memstack.adapters.opensearch import mapping, queries
from memstack.adapters.opensearch.managed import ManagedDocuments
from memstack.adapters.opensearch.store import OpenSearchMemoryStore
from memstack.domain import filter_expr
from memstack.domain.erasure import Erased, Fence, erasure_key
from memstack.errors import Conflict, DependencyFailed
from memstack.models import Category, Kind, MemoryFilters, MemoryRecord, Scope, Tier

from . import opensearch_recorded as rec
from .opensearch_fake import Recorder, recording_client

ALIAS = "memstack-memories"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OWNER = [{"term": {"tenant": "t1"}}, {"term": {"user_id": "u1"}}]

METADATA_VALUES_FIELD = {
    "type": "nested",
    "properties": {
        "key": {"type": "keyword"},
        "s": {"type": "keyword"},
        "n": {"type": "double"},
        "b": {"type": "boolean"},
    },
}


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def make_store(
    recorder: Recorder, *, ready: bool = True, **kw: Any
) -> tuple[OpenSearchMemoryStore, list[float]]:
    sleeps: list[float] = []
    store = OpenSearchMemoryStore.managed(
        recording_client(recorder),
        alias=ALIAS,
        embedding_dim=4,
        coarse_dim=2,
        sleep=sleeps.append,
        auto_create=not ready,
        **kw,
    )
    return store, sleeps


@pytest.fixture
def store(recorder: Recorder) -> OpenSearchMemoryStore:
    return make_store(recorder)[0]


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


# ------------------------------------------------------------------------- index
def test_first_use_creates_the_template_and_the_aliased_index(recorder: Recorder) -> None:
    store, _ = make_store(recorder, ready=False, engine="lucene", m=24, ef_construction=256)
    recorder.reply(200, {"acknowledged": True})
    recorder.reply(404, {})
    recorder.reply(200, {"acknowledged": True, "shards_acknowledged": True, "index": "memstack-memories-v1"})
    recorder.reply(200, rec.not_found(did("m1")))
    assert store.get("t1", "u1", "m1") is None

    put_template, check_alias, create, get = recorder.requests
    assert (put_template.method, put_template.path) == ("PUT", "/_index_template/memstack-memories")

    def knn(dim: int) -> dict[str, Any]:
        return {
            "type": "knn_vector",
            "dimension": dim,
            "method": {
                "name": "hnsw",
                "engine": "lucene",
                "space_type": "cosinesimil",
                "parameters": {"m": 24, "ef_construction": 256},
            },
        }

    keyword = {"type": "keyword"}
    assert put_template.body == {
        "index_patterns": ["memstack-memories-v*"],
        "template": {
            "settings": {"index": {"knn": True}},
            "mappings": {
                "dynamic": "strict",
                "properties": {
                    "memory_id": keyword,
                    "doc_id": keyword,
                    "tenant": keyword,
                    "user_id": keyword,
                    "session_id": keyword,
                    "scope": keyword,
                    "tier": keyword,
                    "kind": keyword,
                    "category": keyword,
                    "speaker": keyword,
                    "replaces_id": keyword,
                    "source_ids": keyword,
                    "conflicts_with": keyword,
                    "content": {"type": "text"},
                    "search_text": {"type": "text"},
                    "created_at": {"type": "date"},
                    "event_time": {"type": "date"},
                    "superseded_at": {"type": "date"},
                    "effective_time": {"type": "date"},
                    "is_current": {"type": "boolean"},
                    "deleted": {"type": "boolean"},
                    "version": {"type": "integer"},
                    "revision": {"type": "long"},
                    "metadata": {"type": "object", "enabled": False},
                    "metadata_terms": keyword,
                    "metadata_values": METADATA_VALUES_FIELD,
                    "embedding_full": knn(4),
                    "embedding_coarse": knn(2),
                },
            },
        },
        "_meta": {"managed_by": "memstack"},
    }
    assert (check_alias.method, check_alias.path) == ("HEAD", "/_alias/memstack-memories")
    assert (create.method, create.path, create.body) == (
        "PUT",
        "/memstack-memories-v1",
        {"aliases": {"memstack-memories": {}}},
    )
    assert (get.method, get.path) == ("GET", f"/memstack-memories/_doc/{did('m1')}")
    assert get.params["_source_excludes"] == "embedding_full,embedding_coarse"


def test_the_default_engine_is_faiss(recorder: Recorder) -> None:
    store, _ = make_store(recorder)
    assert isinstance(store.documents, ManagedDocuments)
    method = store.documents.template_body()["template"]["mappings"]["properties"]["embedding_full"]["method"]
    assert method == {
        "name": "hnsw",
        "engine": "faiss",
        "space_type": "cosinesimil",
        "parameters": {"m": 16, "ef_construction": 128},
    }


def test_a_concurrent_index_creation_is_not_an_error(recorder: Recorder) -> None:
    store, _ = make_store(recorder, ready=False)
    recorder.reply(200, {"acknowledged": True})
    recorder.reply(404, {})
    recorder.reply(
        400, rec.error(400, "resource_already_exists_exception", "index [memstack-memories-v1] exists")
    )
    store.ensure_index()
    assert len(recorder.requests) == 3


def test_reindex_copies_into_the_next_version_and_swaps_the_alias(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(200, {"memstack-memories-v1": {"aliases": {ALIAS: {}}}})
    recorder.reply(200, {"acknowledged": True})
    recorder.reply(200, {"acknowledged": True, "index": "memstack-memories-v2"})
    recorder.reply(200, {"took": 10, "total": 3, "created": 3, "failures": []})
    recorder.reply(200, {"acknowledged": True})
    assert store.reindex() == "memstack-memories-v2"
    _, _, create, copy, swap = recorder.requests
    assert (create.method, create.path) == ("PUT", "/memstack-memories-v2")
    assert copy.path == "/_reindex" and copy.params == {"wait_for_completion": "true", "refresh": "true"}
    assert copy.body == {
        "source": {"index": "memstack-memories-v1"},
        "dest": {"index": "memstack-memories-v2"},
    }
    assert swap.body == {
        "actions": [
            {"remove": {"index": "memstack-memories-v1", "alias": ALIAS}},
            {"add": {"index": "memstack-memories-v2", "alias": ALIAS}},
        ]
    }


# ------------------------------------------------------------------------- writes
def test_put_sends_one_bulk_of_create_actions_with_the_refresh_policy(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    a = record(
        "m1",
        session_id="s1",
        scope=Scope.CONTEXT,
        tier=Tier.STM,
        kind=Kind.EVENT,
        category=Category.TRAVEL,
        speaker="Alex",
        event_time=datetime(2026, 2, 27, tzinfo=UTC),
        search_text="Alex: Alex moved to Lisbon",
        source_ids=["msg-1"],
        metadata={"role": "user"},
    )
    b = record("m2", "Alex likes tea")
    recorder.reply(
        200, rec.bulk(rec.bulk_item("create", did("m1"), 201), rec.bulk_item("create", did("m2"), 201))
    )
    store.put([a, b])
    (req,) = recorder.requests
    assert (req.method, req.path, req.params) == ("POST", "/_bulk", {"refresh": "wait_for"})
    assert req.lines == [
        {"create": {"_index": ALIAS, "_id": did("m1")}},
        {
            "memory_id": "m1",
            "tenant": "t1",
            "user_id": "u1",
            "session_id": "s1",
            "scope": "CONTEXT",
            "tier": "stm",
            "kind": "event",
            "category": "travel",
            "content": "Alex moved to Lisbon",
            "search_text": "Alex: Alex moved to Lisbon",
            "speaker": "Alex",
            "event_time": "2026-02-27T00:00:00+00:00",
            "created_at": "2026-03-01T12:00:00+00:00",
            "effective_time": "2026-02-27T00:00:00+00:00",
            "is_current": True,
            "deleted": False,
            "version": 1,
            "source_ids": ["msg-1"],
            "conflicts_with": [],
            "metadata": {"role": "user"},
            "metadata_terms": ["role=s:user"],
            "metadata_values": [{"key": "role", "s": "user"}],
            "embedding_full": [0.5, 0.5, 0.5, 0.5],
            "embedding_coarse": [0.6, 0.8],
        },
        {"create": {"_index": ALIAS, "_id": did("m2")}},
        mapping.to_doc(b),
    ]


def test_put_of_an_existing_id_withdraws_the_rest_and_raises_conflict(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(
        200,
        rec.bulk(
            rec.bulk_item("create", did("m1"), 201),
            rec.bulk_item("create", did("m2"), 409, error="version_conflict_engine_exception"),
        ),
    )
    recorder.reply(200, rec.bulk(rec.bulk_item("delete", did("m1"), 200)))
    with pytest.raises(Conflict, match="m2 already exists"):
        store.put([record("m1"), record("m2")])
    undo = recorder.requests[1]
    assert undo.lines == [{"delete": {"_index": ALIAS, "_id": did("m1")}}]


def test_bulk_items_rejected_with_429_are_sent_again(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(
        200,
        rec.bulk(
            rec.bulk_item("create", did("m1"), 201),
            rec.bulk_item("create", did("m2"), 429, error="es_rejected_execution_exception"),
        ),
    )
    recorder.reply(200, rec.bulk(rec.bulk_item("create", did("m2"), 201)))
    store.put([record("m1"), record("m2", "second")])
    retry = recorder.requests[1]
    assert retry.lines == [
        {"create": {"_index": ALIAS, "_id": did("m2")}},
        mapping.to_doc(record("m2", "second")),
    ]


def _stored(memory_id: str, **kw: Any) -> dict[str, Any]:
    return mapping.to_doc(record(memory_id, **kw))


def test_supersede_is_one_bulk_guarded_by_seq_no(store: OpenSearchMemoryStore, recorder: Recorder) -> None:
    new = record("m2", "Alex moved to Porto", version=2, replaces_id="m1")
    new.created_at = datetime(2026, 3, 2, tzinfo=UTC)
    recorder.reply(200, rec.get_doc(did("m1"), _stored("m1"), seq_no=17))
    recorder.reply(
        200, rec.bulk(rec.bulk_item("index", did("m1"), 200, 18), rec.bulk_item("create", did("m2"), 201))
    )
    store.supersede("t1", "u1", "m1", new)
    get, bulk = recorder.requests
    assert (get.method, get.path, get.params) == ("GET", f"/memstack-memories/_doc/{did('m1')}", {})
    assert bulk.params == {"refresh": "wait_for"}
    assert bulk.lines == [
        {"index": {"_index": ALIAS, "_id": did("m1"), "if_seq_no": 17, "if_primary_term": 1}},
        {**_stored("m1"), "is_current": False, "superseded_at": "2026-03-02T00:00:00+00:00"},
        {"create": {"_index": ALIAS, "_id": did("m2")}},
        mapping.to_doc(new),
    ]


def test_supersede_losing_a_race_withdraws_the_new_version(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(200, rec.get_doc(did("m1"), _stored("m1")))
    recorder.reply(
        200,
        rec.bulk(
            rec.bulk_item("index", did("m1"), 409, error="version_conflict_engine_exception"),
            rec.bulk_item("create", did("m2"), 201),
        ),
    )
    recorder.reply(200, rec.bulk(rec.bulk_item("delete", did("m2"), 200)))
    with pytest.raises(Conflict, match="m1 is not the current version"):
        store.supersede("t1", "u1", "m1", record("m2"))
    assert recorder.requests[2].lines == [{"delete": {"_index": ALIAS, "_id": did("m2")}}]


def test_supersede_of_a_retired_version_sends_nothing(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(200, rec.get_doc(did("m1"), {**_stored("m1"), "is_current": False}))
    with pytest.raises(Conflict):
        store.supersede("t1", "u1", "m1", record("m2"))
    recorder.reply(404, rec.not_found(did("m9")))
    with pytest.raises(Conflict):
        store.supersede("t1", "u1", "m9", record("m3"))
    assert [r.method for r in recorder.requests] == ["GET", "GET"]


def test_mark_updates_only_records_that_change(store: OpenSearchMemoryStore, recorder: Recorder) -> None:
    recorder.reply(
        200,
        {
            "docs": [
                rec.get_doc(did("m1"), _stored("m1", metadata={"role": "user"})),
                rec.get_doc(did("m2"), _stored("m2", metadata={"consolidated": True})),
                rec.not_found(did("m3")),
            ]
        },
    )
    recorder.reply(200, rec.bulk(rec.bulk_item("update", did("m1"), 200)))
    assert store.mark("t1", "u1", ["m1", "m2", "m3"], consolidated=True) == 1
    mget, bulk = recorder.requests
    assert (mget.path, mget.body) == ("/memstack-memories/_mget", {"ids": [did("m1"), did("m2"), did("m3")]})
    assert bulk.lines == [
        {"update": {"_index": ALIAS, "_id": did("m1")}},
        # The terms filters read change with the metadata, in the same update.
        {
            "doc": {
                "metadata": {"role": "user", "consolidated": True},
                "metadata_terms": ["consolidated=b:true", "role=s:user"],
                "metadata_values": [{"key": "consolidated", "b": True}, {"key": "role", "s": "user"}],
            }
        },
    ]


def test_link_conflicts_updates_only_the_lists_that_grow(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(
        200,
        {
            "docs": [
                rec.get_doc(did("m1"), _stored("m1", conflicts_with=["m0"])),
                rec.get_doc(did("m2"), _stored("m2", conflicts_with=["m1"])),
                rec.not_found(did("m3")),
            ]
        },
    )
    recorder.reply(200, rec.bulk(rec.bulk_item("update", did("m1"), 200)))
    assert store.link_conflicts("t1", "u1", {"m1": ["m2"], "m2": ["m1"], "m3": ["m1"]}) == 1
    mget, bulk = recorder.requests
    assert (mget.path, mget.body) == ("/memstack-memories/_mget", {"ids": [did("m1"), did("m2"), did("m3")]})
    assert bulk.lines == [
        {"update": {"_index": ALIAS, "_id": did("m1")}},
        {"doc": {"conflicts_with": ["m0", "m2"]}},
    ]


ERASURES = f"{ALIAS}-erasures"


def reply_marker_written(recorder: Recorder) -> None:
    recorder.reply(201, {"_index": ERASURES, "_id": "k", "result": "created", "_shards": rec.SHARDS})


def test_erase_user_marks_refreshes_deletes_by_query_and_expunges(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    reply_marker_written(recorder)
    recorder.reply(200, {"_shards": rec.SHARDS})
    recorder.reply(200, rec.delete_by_query(41, conflicts=1))
    recorder.reply(200, rec.delete_by_query(1))
    recorder.reply(200, {"task": "node:1"})
    before = time.time()
    assert store.erase_user("t1", "u1") == {"memories": 42}
    marker, refresh, first, second, merge = recorder.requests
    # The marker: keyed by a hash of tenant and user (no user id in it), written and refreshed first.
    assert (marker.method, marker.path) == ("PUT", f"/{ERASURES}/_doc/{erasure_key('t1', 'u1')}")
    assert marker.params == {"refresh": "true"}
    assert set(marker.body) == {"erased_at", "expires_at"} and marker.body["erased_at"] >= before
    assert "u1" not in json.dumps(marker.body)
    assert (refresh.method, refresh.path) == ("POST", f"/{ALIAS}/_refresh")
    assert (first.method, first.path) == ("POST", "/memstack-memories/_delete_by_query")
    assert first.params == {"refresh": "true", "wait_for_completion": "true", "conflicts": "proceed"}
    assert first.body == {"query": {"bool": {"filter": OWNER}}}
    assert second.body == first.body  # a version conflict (a racing write): round again
    assert (merge.method, merge.path) == ("POST", f"/{ALIAS}/_forcemerge")
    assert merge.params == {"only_expunge_deletes": "true", "wait_for_completion": "false"}


def test_erase_user_with_failures_raises(store: OpenSearchMemoryStore, recorder: Recorder) -> None:
    reply_marker_written(recorder)
    recorder.reply(200, {"_shards": rec.SHARDS})
    answer = rec.delete_by_query(3)
    answer["failures"] = [
        {"index": rec.INDEX, "id": "x", "cause": {"type": "es_rejected_execution_exception"}}
    ]
    recorder.reply(200, answer)
    with pytest.raises(DependencyFailed, match="could not erase"):
        store.erase_user("t1", "u1")


def marker(erased_at: float) -> dict[str, Any]:
    return {"_index": ERASURES, "_id": "k", "found": True, "_source": {"erased_at": erased_at}}


def test_writes_outside_declared_work_read_no_marker(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(200, rec.bulk(rec.bulk_item("create", did("m1"), 201)))
    store.put([record("m1")])
    assert [r.path for r in recorder.requests] == ["/_bulk"]


def test_a_job_begun_before_the_erase_writes_nothing(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(200, marker(T0.timestamp() + 5))
    with pytest.raises(Erased):
        store.put([record("m1")], fence=Fence.at(T0))
    (read,) = recorder.requests
    assert (read.method, read.path) == ("GET", f"/{ERASURES}/_doc/{erasure_key('t1', 'u1')}")


def test_a_job_begun_after_the_erase_writes_between_two_marker_reads(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(200, marker(T0.timestamp() - 5))
    recorder.reply(200, rec.bulk(rec.bulk_item("create", did("m1"), 201)))
    recorder.reply(404, rec.not_found("k"))  # no marker (or no erasure index yet) is no erasure
    store.put([record("m1")], fence=Fence.at(T0))
    assert [(r.method, r.path) for r in recorder.requests] == [
        ("GET", f"/{ERASURES}/_doc/{erasure_key('t1', 'u1')}"),
        ("POST", "/_bulk"),
        ("GET", f"/{ERASURES}/_doc/{erasure_key('t1', 'u1')}"),
    ]


def test_a_write_landing_while_the_erase_runs_is_taken_back(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    """The erase's marker appears between the write and its second read: the write is deleted again."""
    recorder.reply(404, rec.not_found("k"))
    recorder.reply(200, rec.bulk(rec.bulk_item("create", did("m1"), 201)))
    recorder.reply(200, marker(T0.timestamp() + 1))
    recorder.reply(200, rec.bulk(rec.bulk_item("delete", did("m1"), 200)))
    with pytest.raises(Erased):
        store.put([record("m1")], fence=Fence.at(T0))
    undo = recorder.requests[-1]
    assert undo.lines == [{"delete": {"_index": ALIAS, "_id": did("m1")}}]


def test_a_supersede_of_work_begun_before_the_erase_sends_nothing(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(200, marker(T0.timestamp() + 5))
    with pytest.raises(Erased):
        store.supersede("t1", "u1", "m1", record("m2"), fence=Fence.at(T0))
    assert len(recorder.requests) == 1


# ------------------------------------------------------------------------- search
BM25_FILTER = [
    *OWNER,
    {"term": {"deleted": False}},
    {"term": {"is_current": True}},
    {"term": {"tier": "ltm"}},
    {
        "bool": {
            "should": [{"term": {"scope": "USER"}}, {"term": {"session_id": "s1"}}],
            "minimum_should_match": 1,
        }
    },
]


def test_hybrid_candidates_sends_bm25_and_filtered_knn_in_one_msearch(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(
        200,
        {
            "took": 5,
            "responses": [
                rec.search_answer([(did("m1"), "m1", 7.25), (did("m2"), "m2", 1.5)]),
                rec.search_answer([(did("m2"), "m2", 0.95), (did("m1"), "m1", 0.75)]),
            ],
        },
    )
    filters = MemoryFilters(tier=Tier.LTM, session_id="s1")
    bm25, knn = store.hybrid_candidates(
        "t1", "u1", 'Where did Alex move? "quoted" AND (x)', np.array([0.6, 0.8]), 50, 20, filters
    )
    assert [(h.id, h.score) for h in bm25] == [("m1", 7.25), ("m2", 1.5)]
    # cosinesimil scores are (1 + cos) / 2: the store reports the cosine.
    assert [h.id for h in knn] == ["m2", "m1"]
    assert [h.score for h in knn] == pytest.approx([0.9, 0.5])
    (req,) = recorder.requests
    assert (req.method, req.path) == ("POST", "/_msearch")
    assert req.lines == [
        {"index": ALIAS},
        {
            "size": 50,
            "_source": ["memory_id"],
            "query": {
                "bool": {
                    "must": [
                        {
                            "multi_match": {
                                "query": "alex move quoted x",
                                "fields": ["search_text", "content"],
                                "type": "best_fields",
                                "operator": "or",
                            }
                        }
                    ],
                    "filter": BM25_FILTER,
                }
            },
        },
        {"index": ALIAS},
        {
            "size": 20,
            "_source": ["memory_id"],
            "query": {
                "knn": {
                    "embedding_coarse": {
                        "vector": pytest.approx([0.6, 0.8]),
                        "k": 20,
                        "filter": {"bool": {"filter": BM25_FILTER}},
                    }
                }
            },
        },
    ]


def test_term_counts_count_inside_the_users_current_documents_with_one_filter_aggregation_per_word(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(
        200,
        {
            **rec.search_answer([]),
            "hits": {"total": {"value": 42, "relation": "eq"}, "max_score": None, "hits": []},
            "aggregations": {"t0": {"doc_count": 7}, "t1": {"doc_count": 0}},
        },
    )
    counts = store.term_counts("t1", "u1", 'Where is the "kickoff" AGENDA?')
    assert (counts.docs, counts.df) == (42, {"kickoff": 7, "agenda": 0})
    (req,) = recorder.requests
    assert (req.method, req.path) == ("POST", f"/{ALIAS}/_search")
    # The index's own BM25 statistics span every tenant: the counts are filtered to the user.
    assert req.body == {
        "size": 0,
        "track_total_hits": True,
        "query": {"bool": {"filter": [*OWNER, {"term": {"deleted": False}}, {"term": {"is_current": True}}]}},
        "aggs": {
            "t0": {"filter": {"multi_match": {"query": "kickoff", "fields": ["search_text", "content"]}}},
            "t1": {"filter": {"multi_match": {"query": "agenda", "fields": ["search_text", "content"]}}},
        },
    }


def test_term_counts_without_their_counts_raise(store: OpenSearchMemoryStore, recorder: Recorder) -> None:
    recorder.reply(200, rec.search_answer([]))  # no aggregations: not an answer to this request
    with pytest.raises(DependencyFailed):
        store.term_counts("t1", "u1", "kickoff agenda")


def test_without_a_session_search_sees_only_user_scope_and_time_filters_use_effective_time(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(200, rec.search_answer([]))
    after, before = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)
    filters = MemoryFilters(include_superseded=True, after=after, before=before, kind=Kind.EVENT)
    assert store.vector_search("t1", "u1", np.array([1.0, 0.0]), 5, filters) == []
    knn = recorder.requests[0].body["query"]["knn"]["embedding_coarse"]
    assert knn["filter"]["bool"]["filter"] == [
        *OWNER,
        {"term": {"deleted": False}},
        {"term": {"kind": "event"}},
        {
            "range": {
                "effective_time": {"gte": "2026-01-01T00:00:00+00:00", "lt": "2026-02-01T00:00:00+00:00"}
            }
        },
        {"term": {"scope": "USER"}},
    ]


def test_metadata_filters_are_terms_clauses_on_the_typed_metadata_terms(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    filters = MemoryFilters(metadata={"topic": ("food", "travel"), "n": (1.0,), "urgent": (True,)})
    metadata_clauses = [
        # One clause per key (AND), any of its values (OR); each value typed, 1.0 written as 1.
        {"terms": {"metadata_terms": ["topic=s:food", "topic=s:travel"]}},
        {"terms": {"metadata_terms": ["n=n:1"]}},
        {"terms": {"metadata_terms": ["urgent=b:true"]}},
    ]
    recorder.reply(200, {"took": 1, "responses": [rec.search_answer([]), rec.search_answer([])]})
    store.hybrid_candidates("t1", "u1", "dinner plans", np.array([0.6, 0.8]), 5, 5, filters)
    bm25_body, knn_body = recorder.requests[0].lines[1], recorder.requests[0].lines[3]
    searched = [
        *OWNER,
        {"term": {"deleted": False}},
        {"term": {"is_current": True}},
        *metadata_clauses,
        {"term": {"scope": "USER"}},
    ]
    assert bm25_body["query"]["bool"]["filter"] == searched
    assert knn_body["query"]["knn"]["embedding_coarse"]["filter"] == {"bool": {"filter": searched}}
    recorder.reply(200, rec.search_answer([]))
    store.list("t1", "u1", filters, 10)
    listed = recorder.requests[1].body["query"]["bool"]["filter"]
    assert listed == [*OWNER, {"term": {"deleted": False}}, {"term": {"is_current": True}}, *metadata_clauses]


def test_an_index_made_before_metadata_terms_gets_the_field_added(recorder: Recorder) -> None:
    store, _ = make_store(recorder, ready=False)
    recorder.reply(200, {"acknowledged": True})  # template
    recorder.reply(200, {})  # the alias exists: an index made from an older template
    recorder.reply(200, {"acknowledged": True})  # mapping
    store.ensure_index()
    _, check_alias, put_mapping = recorder.requests
    assert (check_alias.method, check_alias.path) == ("HEAD", "/_alias/memstack-memories")
    assert (put_mapping.method, put_mapping.path) == ("PUT", "/memstack-memories/_mapping")
    assert put_mapping.body == {
        "properties": {
            "metadata_terms": {"type": "keyword"},
            "metadata_values": METADATA_VALUES_FIELD,
            "conflicts_with": {"type": "keyword"},
        }
    }


def test_filter_expressions_are_bool_queries_on_record_fields_terms_and_nested_values(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    expr = filter_expr.parse(
        {
            "OR": [
                {
                    "AND": [
                        {"metadata": {"n": {"gt": 1, "lte": 7}}},
                        {"category": {"in": ["travel", "dietary"]}},
                    ]
                },
                {"NOT": {"metadata": {"topic": {"contains": "a*b"}}}},
                {"created_at": {"gte": "2026-01-01T00:00:00+00:00"}},
                {"event_time": "2026-01-02T00:00:00+00:00"},
                {"agent_id": {"ne": "chef"}},
                {"metadata.level": {"lt": "c"}},
            ]
        }
    )

    def nested(clause: dict[str, object], key: str) -> dict[str, object]:
        return {
            "nested": {
                "path": "metadata_values",
                "query": {"bool": {"filter": [{"term": {"metadata_values.key": key}}, clause]}},
            }
        }

    wanted = {
        "bool": {
            "should": [
                {
                    "bool": {
                        "filter": [
                            # two operators on one key: both must hold
                            {
                                "bool": {
                                    "filter": [
                                        nested({"range": {"metadata_values.n": {"gt": 1}}}, "n"),
                                        nested({"range": {"metadata_values.n": {"lte": 7}}}, "n"),
                                    ]
                                }
                            },
                            {"terms": {"category": ["travel", "dietary"]}},
                        ]
                    }
                },
                {
                    "bool": {
                        "must_not": [
                            nested({"wildcard": {"metadata_values.s": {"value": "*a\\*b*"}}}, "topic")
                        ]
                    }
                },
                {"range": {"created_at": {"gte": "2026-01-01T00:00:00+00:00"}}},
                {
                    "range": {
                        "event_time": {"gte": "2026-01-02T00:00:00+00:00", "lte": "2026-01-02T00:00:00+00:00"}
                    }
                },
                {"bool": {"must_not": [{"term": {"metadata_terms": "agent_id=s:chef"}}]}},
                nested({"range": {"metadata_values.s": {"lt": "c"}}}, "level"),
            ],
            "minimum_should_match": 1,
        }
    }
    recorder.reply(200, {"took": 1, "responses": [rec.search_answer([]), rec.search_answer([])]})
    store.hybrid_candidates("t1", "u1", "dinner plans", np.array([0.6, 0.8]), 5, 5, MemoryFilters(where=expr))
    bm25_body, knn_body = recorder.requests[0].lines[1], recorder.requests[0].lines[3]
    searched = [
        *OWNER,
        {"term": {"deleted": False}},
        {"term": {"is_current": True}},
        wanted,
        {"term": {"scope": "USER"}},
    ]
    assert bm25_body["query"]["bool"]["filter"] == searched
    assert knn_body["query"]["knn"]["embedding_coarse"]["filter"] == {"bool": {"filter": searched}}
    recorder.reply(200, rec.search_answer([]))
    store.list("t1", "u1", MemoryFilters(where=expr), 10)
    listed = recorder.requests[1].body["query"]["bool"]["filter"]
    assert listed == [*OWNER, {"term": {"deleted": False}}, {"term": {"is_current": True}}, wanted]


def test_a_query_without_words_sends_only_the_knn_search(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    assert store.bm25_search("t1", "u1", "?! ...", 5, MemoryFilters()) == []
    assert recorder.requests == []
    recorder.reply(200, {"took": 1, "responses": [rec.search_answer([(did("m1"), "m1", 1.0)])]})
    bm25, knn = store.hybrid_candidates("t1", "u1", "🙂", np.array([0.6, 0.8]), 5, 5, MemoryFilters())
    assert bm25 == [] and [h.id for h in knn] == ["m1"]
    assert len(recorder.requests[0].lines) == 2


def test_term_counts_ride_in_the_same_msearch_as_the_candidates(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    counted = {
        **rec.search_answer([]),
        "hits": {"total": {"value": 42, "relation": "eq"}, "max_score": None, "hits": []},
        "aggregations": {"t0": {"doc_count": 7}},
    }
    bm25_hits, knn_hits = rec.search_answer([(did("m1"), "m1", 2.0)]), rec.search_answer([])
    recorder.reply(200, {"took": 1, "responses": [bm25_hits, knn_hits, counted]})
    bm25, knn, counts = store.hybrid_candidates_with_counts(
        "t1", "u1", "kickoff?", np.array([0.6, 0.8]), 5, 5, MemoryFilters()
    )
    assert [h.id for h in bm25] == ["m1"] and knn == [] and (counts.docs, counts.df) == (42, {"kickoff": 7})
    (req,) = recorder.requests
    assert req.path == "/_msearch"
    assert req.lines[5] == queries.term_counts_body("t1", "u1", "kickoff?")[0]
    # Without words there is no BM25 search; the counts are still the last answer.
    recorder.reply(200, {"took": 1, "responses": [knn_hits, {**counted, "aggregations": {}}]})
    bm25, knn, counts = store.hybrid_candidates_with_counts(
        "t1", "u1", "🙂", np.array([0.6, 0.8]), 5, 5, MemoryFilters()
    )
    assert (bm25, knn, counts.docs, counts.df) == ([], [], 42, {})
    assert len(recorder.requests[1].lines) == 4
    # An answer without the counts is not an answer to this request.
    recorder.reply(200, {"took": 1, "responses": [bm25_hits, knn_hits, rec.search_answer([])]})
    with pytest.raises(DependencyFailed, match="term count"):
        store.hybrid_candidates_with_counts(
            "t1", "u1", "kickoff", np.array([0.6, 0.8]), 5, 5, MemoryFilters()
        )


def test_a_failed_search_inside_msearch_raises(store: OpenSearchMemoryStore, recorder: Recorder) -> None:
    failed = rec.error(400, "search_phase_execution_exception", "all shards failed")
    recorder.reply(200, {"took": 1, "responses": [rec.search_answer([]), failed]})
    with pytest.raises(DependencyFailed, match="search failed"):
        store.hybrid_candidates("t1", "u1", "tea", np.array([0.6, 0.8]), 5, 5, MemoryFilters())


def test_list_pages_with_search_after(store: OpenSearchMemoryStore, recorder: Recorder) -> None:
    def hit(memory_id: str, millis: int) -> dict[str, Any]:
        return {
            "_index": rec.INDEX,
            "_id": did(memory_id),
            "_score": None,
            "_source": _stored(memory_id),
            "sort": [millis, memory_id],
        }

    answer = rec.search_answer([])
    answer["hits"]["hits"] = [hit("m3", 3000), hit("m2", 2000), hit("m1", 1000)]
    recorder.reply(200, answer)
    page, cursor = store.list("t1", "u1", MemoryFilters(), 2)
    assert [r.id for r in page] == ["m3", "m2"]
    assert cursor is not None and json.loads(base64.urlsafe_b64decode(cursor)) == [2000, "m2"]
    recorder.reply(200, rec.search_answer([]))
    store.list("t1", "u1", MemoryFilters(), 2, cursor)
    first, second = recorder.requests
    assert first.body["size"] == 3 and "search_after" not in first.body
    assert first.body["sort"] == [{"created_at": {"order": "desc"}}, {"memory_id": {"order": "desc"}}]
    assert first.body["_source"] == {"excludes": ["embedding_full", "embedding_coarse"]}
    assert second.body["search_after"] == [2000, "m2"]


def test_list_by_event_time_sorts_on_the_effective_time_and_pages_with_its_values(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    answer = rec.search_answer([])
    answer["hits"]["hits"] = [
        {"_index": rec.INDEX, "_id": did(m), "_score": None, "_source": _stored(m), "sort": [t, m]}
        for m, t in (("m1", 9000), ("m3", 5000))
    ]
    recorder.reply(200, answer)
    page, cursor = store.list("t1", "u1", MemoryFilters(), 1, None, "event_time")
    assert [r.id for r in page] == ["m1"]
    recorder.reply(200, rec.search_answer([]))
    store.list("t1", "u1", MemoryFilters(), 1, cursor, "event_time")
    first, second = recorder.requests
    # effective_time is indexed as event_time, else created_at (mapping.to_source).
    assert first.body["sort"] == [{"effective_time": {"order": "desc"}}, {"memory_id": {"order": "desc"}}]
    assert second.body["search_after"] == [9000, "m1"]


def test_users_is_one_composite_aggregation_over_the_tenant_paged_by_its_after_key(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    def bucket(user: str, stm: int, ltm: int, millis: float | None) -> dict[str, Any]:
        tiers = [{"key": k, "doc_count": n} for k, n in (("ltm", ltm), ("stm", stm)) if n]
        return {
            "key": {"user_id": user},
            "doc_count": stm + ltm + 1,
            "last_write": {"value": millis},
            "live": {"doc_count": stm + ltm, "tiers": {"buckets": tiers}},
        }

    answer = rec.search_answer([])
    answer["aggregations"] = {
        "users": {
            "after_key": {"user_id": "cy"},
            "buckets": [
                bucket("ana", 2, 3, 1772366400000.0),
                bucket("bo", 0, 1, None),
                bucket("cy", 1, 0, 0.0),
            ],
        }
    }
    recorder.reply(200, answer)
    page, cursor = store.users("t1", 2)
    assert [(u.user_id, u.stm, u.ltm) for u in page] == [("ana", 2, 3), ("bo", 0, 1)]
    assert page[0].last_write == T0 and page[1].last_write is None
    assert cursor == "bo"  # a third bucket came back: there is a next page, after "bo"
    recorder.reply(200, {**rec.search_answer([]), "aggregations": {"users": {"buckets": []}}})
    assert store.users("t1", 2, cursor) == ([], None)
    first, second = recorder.requests
    assert first.path == f"/{ALIAS}/_search"
    assert first.body == {
        "size": 0,
        "query": {"bool": {"filter": [{"term": {"tenant": "t1"}}]}},
        "aggs": {
            "users": {
                "composite": {"size": 3, "sources": [{"user_id": {"terms": {"field": "user_id"}}}]},
                "aggs": {
                    "last_write": {"max": {"field": "created_at"}},
                    "live": {
                        "filter": {
                            "bool": {"filter": [{"term": {"is_current": True}}, {"term": {"deleted": False}}]}
                        },
                        "aggs": {"tiers": {"terms": {"field": "tier", "size": 2}}},
                    },
                },
            }
        },
    }
    assert second.body["aggs"]["users"]["composite"]["after"] == {"user_id": "bo"}


def test_tenants_pages_a_composite_aggregation_over_every_tenant(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    """``memstack reembed`` finds every tenant with records this way (issue 26)."""

    def answer(tenants: list[str]) -> dict[str, Any]:
        buckets = [{"key": {"tenant": t}, "doc_count": 1} for t in tenants]
        after = {"after_key": {"tenant": tenants[-1]}} if tenants else {}
        return {**rec.search_answer([]), "aggregations": {"tenants": {**after, "buckets": buckets}}}

    recorder.reply(200, answer(["acme", "globex"]))
    recorder.reply(200, answer([]))
    assert store.tenants() == ["acme", "globex"]
    first, second = recorder.requests
    assert first.path == f"/{ALIAS}/_search"
    assert first.body == {
        "size": 0,
        "aggs": {
            "tenants": {"composite": {"size": 500, "sources": [{"tenant": {"terms": {"field": "tenant"}}}]}}
        },
    }
    assert second.body["aggs"]["tenants"]["composite"]["after"] == {"tenant": "globex"}


def test_a_users_answer_without_its_aggregation_raises(
    store: OpenSearchMemoryStore, recorder: Recorder
) -> None:
    recorder.reply(200, rec.search_answer([]))
    with pytest.raises(DependencyFailed):
        store.users("t1", 10)


# ------------------------------------------------------------------------ retries
def test_throttling_and_5xx_are_retried_with_backoff(recorder: Recorder) -> None:
    store, sleeps = make_store(recorder)
    recorder.reply(429, rec.error(429, "too_many_requests", "throttled"))
    recorder.reply(503, rec.error(503, "unavailable", "node left"))
    recorder.reply(200, rec.search_answer([(did("m1"), "m1", 2.0)]))
    assert [h.id for h in store.bm25_search("t1", "u1", "tea", 5, MemoryFilters())] == ["m1"]
    assert len(recorder.requests) == 3
    assert len(sleeps) == 2 and all(0 <= s <= 2.0 for s in sleeps)


def test_retries_are_bounded(recorder: Recorder) -> None:
    store, sleeps = make_store(recorder, attempts=3)
    for _ in range(3):
        recorder.reply(502, rec.error(502, "bad_gateway", "bad gateway"))
    with pytest.raises(DependencyFailed, match="after 3 attempts"):
        store.bm25_search("t1", "u1", "tea", 5, MemoryFilters())
    assert len(recorder.requests) == 3 and len(sleeps) == 2


def test_client_errors_are_not_retried(store: OpenSearchMemoryStore, recorder: Recorder) -> None:
    recorder.reply(400, rec.error(400, "parsing_exception", "bad query"))
    with pytest.raises(DependencyFailed, match="bad query"):
        store.bm25_search("t1", "u1", "tea", 5, MemoryFilters())
    assert len(recorder.requests) == 1


def test_a_malformed_search_answer_raises(store: OpenSearchMemoryStore, recorder: Recorder) -> None:
    recorder.reply(200, {"took": 1})
    with pytest.raises(DependencyFailed, match="without hits"):
        store.vector_search("t1", "u1", np.array([0.6, 0.8]), 5, MemoryFilters())


def test_session_only_is_one_term_on_session_id(store: OpenSearchMemoryStore, recorder: Recorder) -> None:
    recorder.reply(200, rec.search_answer([]))
    store.list("t1", "u1", MemoryFilters(session_id="s1", session_only=True), 10)
    listed = recorder.requests[0].body["query"]["bool"]["filter"]
    assert listed == [
        *OWNER,
        {"term": {"deleted": False}},
        {"term": {"is_current": True}},
        {"term": {"session_id": "s1"}},
    ]
