"""Tenants' configurations on OpenSearch: the exact requests, on a managed domain and a serverless one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from memstack.adapters.opensearch.store import OpenSearchMemoryStore
from memstack.adapters.opensearch.tenant_config import tenant_key
from memstack.errors import Conflict

from . import opensearch_recorded as rec
from .opensearch_fake import Recorder, recording_client

ALIAS = "memstack-memories"
CONFIG = f"{ALIAS}-config"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 3, 1, 12, 5, tzinfo=UTC)
DOC = {"extraction": {"instructions": "never store health data"}}
KEY = tenant_key("t1")


def source(document: dict[str, Any], version: int, when: datetime = T0, tenant: str = "t1") -> dict[str, Any]:
    return {
        "tenant_key": tenant_key(tenant),
        "tenant": tenant,
        "version": version,
        "updated_at": when.isoformat(),
        "document_json": json.dumps(document),
    }


def options(**kw: Any) -> dict[str, Any]:
    return {"alias": ALIAS, "embedding_dim": 4, "coarse_dim": 2, "sleep": lambda _s: None, **kw}


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def test_managed_reads_are_realtime_gets_of_a_hashed_id(recorder: Recorder) -> None:
    configs = OpenSearchMemoryStore.managed(recording_client(recorder), **options()).tenant_config_store()
    recorder.reply(
        404, rec.error(404, "index_not_found_exception", "no such index [memstack-memories-config]")
    )
    recorder.reply(404, rec.not_found(KEY))
    recorder.reply(200, rec.get_doc(KEY, source(DOC, 3), seq_no=11))
    # A hash collision (or a copied index) never hands one tenant another's document.
    recorder.reply(200, rec.get_doc(KEY, source({"x": 1}, 1, tenant="t2")))
    assert configs.get("t1").version == 0  # no configuration was ever written: no index yet
    assert configs.get("t1").version == 0
    got = configs.get("t1")
    assert (got.document, got.version, got.updated_at) == (DOC, 3, T0)
    assert configs.get("t1").version == 0
    assert {(r.method, r.path) for r in recorder.requests} == {("GET", f"/{CONFIG}/_doc/{KEY}")}
    assert "t1" not in KEY


def test_managed_writes_create_first_then_compare_and_set_on_seq_no(recorder: Recorder) -> None:
    configs = OpenSearchMemoryStore.managed(recording_client(recorder), **options()).tenant_config_store()
    recorder.reply(201, {"_index": CONFIG, "_id": KEY, "result": "created", "_seq_no": 0, "_primary_term": 1})
    assert configs.put("t1", DOC, 0, T0).version == 1
    create = recorder.requests[-1]
    assert (create.method, create.path) == ("PUT", f"/{CONFIG}/_create/{KEY}") or (
        create.method == "PUT" and create.params.get("op_type") == "create"
    )
    assert create.params.get("refresh") == "true"
    assert create.body == source(DOC, 1) | {"document_json": json.dumps(DOC, separators=(",", ":"))}

    # A later write: read the version and its seq_no, then write conditioned on them.
    recorder.reply(200, rec.get_doc(KEY, source(DOC, 1), seq_no=7))
    recorder.reply(200, {"_index": CONFIG, "_id": KEY, "result": "updated", "_seq_no": 8, "_primary_term": 1})
    assert configs.put("t1", {}, 1, T1).version == 2
    read, write = recorder.requests[-2:]
    assert (read.method, read.path) == ("GET", f"/{CONFIG}/_doc/{KEY}")
    assert (write.method, write.path) == ("PUT", f"/{CONFIG}/_doc/{KEY}")
    assert write.params == {"if_seq_no": "7", "if_primary_term": "1", "refresh": "true"}
    assert write.body["version"] == 2 and write.body["document_json"] == "{}"


def test_managed_lost_races_are_conflicts(recorder: Recorder) -> None:
    configs = OpenSearchMemoryStore.managed(recording_client(recorder), **options()).tenant_config_store()
    recorder.reply(409, rec.error(409, "version_conflict_engine_exception", "document already exists"))
    with pytest.raises(Conflict):
        configs.put("t1", DOC, 0, T0)
    recorder.reply(200, rec.get_doc(KEY, source(DOC, 4)))
    with pytest.raises(Conflict):  # stale: the stored version is 4, not 3 (no write sent)
        configs.put("t1", DOC, 3, T0)
    assert recorder.requests[-1].method == "GET"
    recorder.reply(200, rec.get_doc(KEY, source(DOC, 4), seq_no=9))
    recorder.reply(409, rec.error(409, "version_conflict_engine_exception", "seq_no conflict"))
    with pytest.raises(Conflict):  # won between our read and our write
        configs.put("t1", DOC, 4, T0)


def serverless(recorder: Recorder) -> Any:
    store = OpenSearchMemoryStore.serverless(recording_client(recorder), visibility_seconds=0.0, **options())
    return store.tenant_config_store()


def hits(*copies: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"hits": {"total": {"value": len(copies)}, "hits": [{"_id": i, "_source": s} for i, s in copies]}}


def test_serverless_creates_its_index_then_reads_the_highest_version_by_search(recorder: Recorder) -> None:
    configs = serverless(recorder)
    recorder.reply(404, {})  # HEAD: no index yet
    recorder.reply(200, {"acknowledged": True})
    recorder.reply(200, hits(("a", source(DOC, 2)), ("b", source({}, 1))))
    got = configs.get("t1")
    assert (got.document, got.version) == (DOC, 2)
    head, create, search = recorder.requests
    assert (head.method, head.path) == ("HEAD", f"/{CONFIG}")
    assert (create.method, create.path) == ("PUT", f"/{CONFIG}")
    assert create.body["mappings"]["properties"]["tenant_key"] == {"type": "keyword"}
    assert (search.method, search.path) == ("POST", f"/{CONFIG}/_search")
    assert search.body["query"] == {"term": {"tenant_key": KEY}}
    assert search.body["sort"] == [{"version": "desc"}]
    for r in recorder.requests:
        assert "refresh" not in r.params


def test_serverless_writes_a_new_copy_without_an_id_and_deletes_the_ones_it_saw(recorder: Recorder) -> None:
    configs = serverless(recorder)
    recorder.reply(200, {})  # HEAD: the index exists
    recorder.reply(200, hits(("old", source(DOC, 1))))
    recorder.reply(200, rec.bulk(rec.bulk_item("index", "new", 201), rec.bulk_item("delete", "old", 200)))
    assert configs.put("t1", {}, 1, T1).version == 2
    bulk = recorder.requests[-1]
    assert (bulk.method, bulk.path) == ("POST", "/_bulk") and "refresh" not in bulk.params
    index, doc, delete = bulk.lines
    assert index == {"index": {"_index": CONFIG}}  # no _id: the collection assigns it
    assert doc["version"] == 2 and doc["tenant_key"] == KEY
    assert delete == {"delete": {"_index": CONFIG, "_id": "old"}}

    # The collection has not refreshed yet: its search still shows version 1, and this process,
    # which wrote version 2, neither answers the older one nor writes on top of it.
    recorder.reply(200, hits(("old", source(DOC, 1))))
    assert configs.get("t1").version == 2
    recorder.reply(200, hits(("old", source(DOC, 1))))
    with pytest.raises(Conflict):
        configs.put("t1", DOC, 1, T1)
    recorder.reply(200, hits(("old", source(DOC, 1))))
    recorder.reply(200, rec.bulk(rec.bulk_item("index", "newer", 201), rec.bulk_item("delete", "old", 200)))
    assert configs.put("t1", DOC, 2, T1).version == 3


def test_serverless_refuses_a_stale_version_and_never_reads_another_tenants_copy(recorder: Recorder) -> None:
    configs = serverless(recorder)
    recorder.reply(200, {})
    recorder.reply(200, hits(("x", source({"y": 1}, 5, tenant="t2"))))
    assert configs.get("t1").version == 0
    recorder.reply(200, hits(("a", source(DOC, 2))))
    with pytest.raises(Conflict):
        configs.put("t1", {}, 1, T1)
    assert recorder.requests[-1].path.endswith("/_search")  # nothing written
