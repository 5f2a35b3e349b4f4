"""PATCH of a memory's metadata, and ``DELETE /v1/memories?agent_id=&run_id=`` (Mem0's ``delete_all``).

Through the REST resolver and through both Python clients against the live server.
"""

from __future__ import annotations

import asyncio

import pytest
from memstack.client import AsyncMemoryClient, MemoryApiError, MemoryClient

from tests.api.conftest import Api, add_body


def _add(api: Api, content: str, **extra: object) -> str:
    status, body = api("POST", "/v1/memories", body=add_body("ann", content, infer=False, **extra))
    assert status == 202, body
    return str(body["accepted"][0])


def _memory(api: Api, content: str) -> dict:
    page = api("GET", "/v1/memories", query={"user_id": "ann"})[1]["memories"]
    return next(m for m in page if m["content"] == content)


def test_patch_metadata_replaces_the_labels_and_keeps_the_text(api: Api) -> None:
    _add(api, "I cook risotto", agent_id="chef", metadata={"topic": "food", "stars": 2})
    old = _memory(api, "I cook risotto")
    status, new = api(
        "PATCH", f"/v1/memories/{old['id']}", body={"user_id": "ann", "metadata": {"topic": "rice"}}
    )
    assert status == 200, new
    assert new["content"] == "I cook risotto" and new["version"] == old["version"] + 1
    assert new["metadata"]["topic"] == "rice" and "stars" not in new["metadata"]
    assert new["agent_id"] == "chef"  # the agent is the system's key: it stays
    found = api(
        "POST",
        "/v1/memories/search",
        body={"user_id": "ann", "query": "risotto", "filters": {"metadata": {"topic": "rice"}}},
    )[1]
    assert [r["id"] for r in found["results"]] == [new["id"]]


def test_delete_by_agent_and_by_run(api: Api) -> None:
    _add(api, "chef in run one", agent_id="chef", run_id="r1")
    _add(api, "chef in run two", agent_id="chef", run_id="r2")
    _add(api, "coach in run one", agent_id="coach", run_id="r1")
    _add(api, "nobody in run two", run_id="r2")
    status, gone = api("DELETE", "/v1/memories", query={"user_id": "ann", "agent_id": "chef", "run_id": "r1"})
    assert status == 200 and gone["deleted"] == 1 and len(gone["ids"]) == 1
    status, gone = api("DELETE", "/v1/memories", query={"user_id": "ann", "run_id": "r2"})
    assert status == 200 and gone["deleted"] == 2
    left = api("GET", "/v1/memories", query={"user_id": "ann"})[1]["memories"]
    assert [m["content"] for m in left] == ["coach in run one"]
    # No selector: that is erasing the user, which has its own route.
    status, err = api("DELETE", "/v1/memories", query={"user_id": "ann"})
    assert status == 422 and "DELETE /v1/users/" in err["error"]["message"]
    assert len(api("GET", "/v1/memories", query={"user_id": "ann"})[1]["memories"]) == 1
    status, err = api("DELETE", "/v1/memories", query={"user_id": "ann", "agent_id": "a", "colour": "red"})
    assert status == 422 and err["error"]["details"][0]["field"] == "colour"


def test_both_clients_edit_metadata_and_delete_by_agent(live_server: str) -> None:
    with MemoryClient(live_server, api_key="acme-key") as client:
        for content, agent in [
            ("I swim on Mondays", "coach"),
            ("I run on Fridays", "coach"),
            ("I bake", "chef"),
        ]:
            client.add(content, user_id="bea", agent_id=agent, infer=False, metadata={"topic": "x"})
        swim = next(m for m in client.list(user_id="bea").memories if m.content == "I swim on Mondays")
        new = client.update(swim.id, user_id="bea", metadata={"topic": "water"})
        assert new.content == swim.content and new.metadata["topic"] == "water" and new.agent_id == "coach"
        with pytest.raises(MemoryApiError) as nothing:
            client.update(new.id, user_id="bea")
        assert nothing.value.status == 422

    async def run() -> tuple[int, list[str]]:
        async with AsyncMemoryClient(live_server, api_key="acme-key") as aclient:
            gone = await aclient.delete_all(user_id="bea", agent_id="coach")
            page = await aclient.list(user_id="bea")
            return gone.deleted, [m.content for m in page.memories]

    assert asyncio.run(run()) == (2, ["I bake"])
