"""``expires_at`` / ``ttl`` on add and PATCH: what is stored, what comes back, what is refused.

That an expired memory is never returned, and the sweep, are held on every
backend in tests/conformance/test_expiry.py (time cannot pass in a test here).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstack.client import NEVER, MemoryClient
from memstack.domain import expiry
from memstack.models import MemoryFilters, MemoryRecord
from memstack.service import MemoryService

from tests.api.conftest import Api, add_body


def _only(api: Api, user: str = "ann") -> dict:
    memories = api("GET", "/v1/memories", query={"user_id": user})[1]["memories"]
    assert len(memories) == 1, memories
    return memories[0]


def test_an_add_with_ttl_or_expires_at_lands_on_its_memories_extracted_ones_too(api: Api) -> None:
    before = datetime.now(UTC)
    status, body = api(
        "POST", "/v1/memories", body=add_body("ann", "I moved to Lisbon last spring.", ttl=3600, sync=True)
    )
    assert status == 200, body
    page = api("GET", "/v1/memories", query={"user_id": "ann"})[1]["memories"]
    assert {m["tier"] for m in page} == {"stm", "ltm"}  # the turn and what extraction made of it
    for memory in page:
        when = datetime.fromisoformat(memory["expires_at"])
        assert before + timedelta(seconds=3600) <= when <= datetime.now(UTC) + timedelta(seconds=3600)
    at = "2099-05-01T12:00:00+00:00"
    api("POST", "/v1/memories", body=add_body("bo", "hello there", infer=False, expires_at=at))
    assert datetime.fromisoformat(_only(api, "bo")["expires_at"]) == datetime.fromisoformat(at)
    found = api("POST", "/v1/memories/search", body={"user_id": "bo", "query": "hello"})[1]["results"]
    assert datetime.fromisoformat(found[0]["expires_at"]) == datetime.fromisoformat(at)


def test_patch_sets_and_removes_the_expiry_and_bad_ones_are_422(api: Api) -> None:
    api("POST", "/v1/memories", body=add_body("ann", "hello there", infer=False))
    memory = _only(api)
    assert memory["expires_at"] is None
    path = f"/v1/memories/{memory['id']}"
    status, new = api("PATCH", path, body={"user_id": "ann", "ttl": 60})
    assert status == 200 and new["expires_at"] and new["content"] == "hello there"
    status, forever = api("PATCH", f"/v1/memories/{new['id']}", body={"user_id": "ann", "expires_at": None})
    assert status == 200 and forever["expires_at"] is None
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    for body, field in [
        ({"expires_at": past}, "expires_at"),
        ({"ttl": 0}, "ttl"),
        ({"ttl": 5, "expires_at": "2099-01-01T00:00:00Z"}, "body"),
        ({"metadata": {"expires_at": "2099-01-01"}}, "metadata"),
    ]:
        status, err = api("PATCH", f"/v1/memories/{forever['id']}", body={"user_id": "ann", **body})
        assert status == 422 and field in [d["field"] for d in err["error"]["details"]], (body, err)
    status, err = api("POST", "/v1/memories", body=add_body("ann", "x", expires_at=past))
    assert status == 422
    assert _only(api)["id"] == forever["id"]  # nothing was changed or stored by the refusals


def test_the_client_sends_ttl_expires_at_and_never(live_server: str) -> None:
    with MemoryClient(live_server, api_key="acme-key") as client:
        client.add("I swim on Mondays", user_id="cy", infer=False, ttl=600)
        memory = client.list(user_id="cy").memories[0]
        assert memory.expires_at is not None and memory.expires_at > datetime.now(UTC)
        moved = client.update(memory.id, user_id="cy", expires_at=datetime(2099, 1, 1, tzinfo=UTC))
        assert moved.expires_at == datetime(2099, 1, 1, tzinfo=UTC)
        assert client.update(moved.id, user_id="cy", expires_at=NEVER).expires_at is None


def test_consolidation_sweeps_the_users_expired_memories(service: MemoryService) -> None:
    past = datetime.now(UTC) - timedelta(minutes=5)
    vector = service.embedder.embed(["an old note"])[0].tolist()
    record = MemoryRecord(
        tenant="t1",
        user_id="ann",
        content="an old note",
        metadata=expiry.with_expiry({}, past),
        embedding_full=vector,
        embedding_coarse=vector[: service.settings.embedding.coarse_dim],
    )
    service.store.put([record])
    assert service.consolidate("t1", "ann")["expired"] == 1
    assert service.store.list("t1", "ann", MemoryFilters(), 10)[0] == []
