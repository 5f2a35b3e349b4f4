"""``GET /v1/users/{id}/export`` and ``POST /v1/users/{id}/import`` over REST, on every backend (issue 26).

The service is built on each backend's store and reached through the REST API in this
process (``MemoryClient`` over the API's WSGI app). A user's history is exported page by
page as behind API Gateway (and whole, streamed, as ``memstack serve`` sends it), then
imported as another user in many small requests, so version chains, a raw turn and the
summary it was consolidated into, and a key's chain each cross pages and requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memstack.client.in_process import in_process_client, wsgi_api
from memstack.client.sync import MemoryClient
from memstack.domain import keyed, versions
from memstack.domain.ingest import stm_memory_id
from memstack.errors import PayloadTooLarge
from memstack.models import MemoryFilters, Scope, Tier
from memstack.service import MemoryService

from .conftest import COARSE_DIM, FULL_DIM
from .test_import_as_new_user import EMB
from .test_store_conformance import rec

#: versions in the history below (each chain's versions and its tombstone count)
VERSIONS = 26


def history(store: Any) -> None:
    """u1's history: 16 notes, a raw turn consolidated into a summary, a key with two versions,
    a memory edited twice, one deleted, one in a session."""
    turn = rec("raw turn about tea", minutes=1, tier=Tier.STM, source_ids=["m1"])
    turn = turn.model_copy(update={"id": stm_memory_id("t1", "u1", "m1")})
    summary = rec("summary: likes green tea", minutes=2, source_ids=["m1"])
    turn.metadata = {"consolidated_into": summary.id}
    named = rec("diet: vegetarian", minutes=3, metadata={keyed.KEY_FIELD: "diet"})
    named = named.model_copy(update={"id": keyed.keyed_id("t1", "u1", "diet")})
    edited = rec("lives in Lisbon", minutes=4)
    gone = rec("dislikes olives", minutes=5)
    session = rec("project codename falcon", minutes=6, scope=Scope.CONTEXT, session_id="s1")
    notes = [rec(f"note number {n} about hiking trails", minutes=10 + n) for n in range(16)]
    store.put([turn, summary, named, edited, gone, session, *notes])
    store.supersede("t1", "u1", named.id, _next(named, "diet: vegan"))
    porto = _next(edited, "lives in Porto")
    store.supersede("t1", "u1", edited.id, porto)
    store.supersede("t1", "u1", porto.id, _next(porto, "lives in Braga"))
    store.supersede("t1", "u1", gone.id, _next(gone, None))


def _next(old: Any, text: str | None) -> Any:
    deleted = text is None
    return versions.new_version(
        old, content=text, embedder=None if deleted else EMB, coarse_dim=COARSE_DIM, deleted=deleted
    )


@pytest.fixture
def client(service: MemoryService) -> Iterator[MemoryClient]:
    """The REST API over this backend's service, as tenant t1."""
    api = wsgi_api(service, service.settings, "t1")
    rest = in_process_client(api)
    yield rest
    rest.close()
    api.close()


def shape(lines: list[str]) -> list[tuple[Any, ...]]:
    """The records of an export, whoever owns them: what each says and where it stands in its chain."""
    records = [json.loads(line) for line in lines[1:]]
    return sorted(
        (r["content"], r["version"], r["is_current"], r["deleted"], r["tier"], r["session_id"])
        for r in records
    )


def test_a_paged_export_imports_as_another_user_in_small_requests(
    store: Any, service: MemoryService, client: MemoryClient
) -> None:
    history(store)
    paged = list(client.export_user("u1", page_size=4))
    header = json.loads(paged[0])
    assert header == {
        "format": "memstack-export",
        "version": 1,
        "user_id": "u1",
        "embedder": service.embedder.name,
        "embedding_dim": service.embedder.dim,
    }  # no tenant: the caller's credential is the tenant
    assert len(paged) == 1 + VERSIONS and len({json.loads(line)["id"] for line in paged[1:]}) == VERSIONS
    assert all("tenant" not in json.loads(line) for line in paged[1:])
    streamed = list(client.export_user("u1"))  # no page size: memstack serve streams it whole
    assert streamed[0] == paged[0] and sorted(streamed[1:]) == sorted(paged[1:])

    report = client.import_user("u2", paged, request_bytes=2048)  # a few records per request
    assert (report.imported, report.skipped_existing, report.reembedded) == (VERSIONS, 0, 0)
    copy = list(client.export_user("u2", page_size=5))
    assert shape(copy) == shape(paged)
    # Chains that crossed pages and requests hold for the new owner.
    braga = next(m for m in client.iter_memories(user_id="u2") if m.content == "lives in Braga")
    chain = client.history(braga.id, user_id="u2")
    assert [m.content for m in chain] == ["lives in Lisbon", "lives in Porto", "lives in Braga"]
    assert client.get_key("diet", user_id="u2").content == "diet: vegan"
    assert [m.version for m in client.history(client.get_key("diet", user_id="u2").id, user_id="u2")] == [
        1,
        2,
    ]
    turn = client.get(stm_memory_id("t1", "u2", "m1"), user_id="u2")
    summary = next(m for m in client.iter_memories(user_id="u2") if m.content.startswith("summary"))
    assert turn.metadata["consolidated_into"] == summary.id
    olives = store.list("t1", "u2", MemoryFilters(include_superseded=True), 100)[0]
    dislike = next(r for r in olives if r.content == "dislikes olives")
    assert store.successor("t1", "u2", dislike.id).deleted
    # The original is untouched; sending the import again writes nothing.
    assert shape(list(client.export_user("u1"))) == shape(paged)
    again = client.import_user("u2", streamed, request_bytes=4096)
    assert (again.imported, again.skipped_existing, again.reembedded) == (0, VERSIONS, 0)


def test_an_export_without_embeddings_is_embedded_again_on_import(
    store: Any, service: MemoryService, client: MemoryClient
) -> None:
    history(store)
    bare = list(client.export_user("u1", embeddings=False, page_size=10))
    assert all(json.loads(line)["embedding_full"] is None for line in bare[1:])
    report = client.import_user("u3", bare)
    assert report.imported == VERSIONS and report.reembedded == VERSIONS - 1  # the tombstone has no vector
    hit = client.search("hiking trails", user_id="u3", top_k=3).results
    assert hit and "hiking" in hit[0].content
    vectors = store.embeddings("t1", "u3", [h.id for h in hit])
    assert all(len(v) == service.embedder.dim for v in vectors.values())


def test_pages_stay_within_their_byte_bound(store: Any, service: MemoryService) -> None:
    history(store)
    every: list[str] = []
    cursor = None
    while True:
        lines, cursor = service.export_page("t1", "u1", limit=50, cursor=cursor, max_bytes=4000, size=len)
        assert lines and sum(map(len, lines)) <= 4000
        every += lines
        if cursor is None:
            break
    assert len(every) == VERSIONS == len(set(every))
    with pytest.raises(PayloadTooLarge, match="more than an export page holds"):
        service.export_page("t1", "u1", limit=50, max_bytes=100, size=len)


def test_opensearch_at_the_request_level(tmp_path: Path) -> None:
    """The real OpenSearch store and client, answered by a recording wire that keeps what is written.

    No cluster runs here: the wire evaluates term filters only and pages nothing, so each
    export is one page; what is checked is the requests the store sends for an export and
    an import over REST, and that what one writes the other reads back.
    """
    from memstack.adapters.opensearch.store import OpenSearchMemoryStore
    from memstack.factory import build_service
    from memstack.settings import load_settings

    from tests.infra.opensearch_wire import Wire

    wire = Wire()
    store = OpenSearchMemoryStore.managed(
        wire.client(), alias="memstack", embedding_dim=FULL_DIM, coarse_dim=COARSE_DIM
    )
    settings = load_settings(
        data_dir=tmp_path / "data", embedder="hashing", embedding_dim=FULL_DIM, coarse_dim=COARSE_DIM
    )
    service = build_service(settings, store=store)
    api = wsgi_api(service, settings, "t1")
    client = in_process_client(api)
    try:
        history(store)
        wire.recorder.requests.clear()
        exported = list(client.export_user("u1", page_size=100))
        assert len(exported) == 1 + VERSIONS
        reads = list(wire.recorder.requests)
        # Every read the export sent is the tenant's and the user's: filtered searches, owned ids.
        for request in reads:
            assert request.method in ("GET", "POST") and request.path.endswith(("/_search", "/_mget")), (
                request
            )
            if request.path.endswith("/_search"):
                owners = request.body["query"]["bool"]["filter"][:2]
                assert owners == [{"term": {"tenant": "t1"}}, {"term": {"user_id": "u1"}}], request.body
        listing = next(r for r in reads if "sort" in r.body)
        assert {"term": {"is_current": True}} not in listing.body["query"]["bool"]["filter"]  # every version
        wire.recorder.requests.clear()
        report = client.import_user("u2", exported, request_bytes=4096)
        assert (report.imported, report.skipped_existing) == (VERSIONS, 0)
        created = [
            line
            for request in wire.recorder.requests
            if request.path.endswith("/_bulk")
            for line in request.lines
            if "memory_id" in line
        ]
        assert len(created) == VERSIONS
        assert {(d["tenant"], d["user_id"]) for d in created} == {("t1", "u2")}
        assert {d["memory_id"] for d in created}.isdisjoint(json.loads(line)["id"] for line in exported[1:])
        wire.recorder.requests.clear()
        again = client.import_user("u2", exported)
        assert (again.imported, again.skipped_existing) == (0, VERSIONS)
        assert not [r for r in wire.recorder.requests if r.path.endswith("/_bulk")]  # read, nothing written
        assert shape(list(client.export_user("u2", page_size=100))) == shape(exported)
    finally:
        client.close()
        api.close()
        service.close()
