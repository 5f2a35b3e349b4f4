"""Custom categories and extraction rules end to end: configured over REST, used by the offline
extraction, by filters and by keyed writes, per tenant."""

from __future__ import annotations

import asyncio

import pytest
from memstack.client import AsyncMemoryClient, MemoryApiError, MemoryClient

from tests.api.conftest import Api

CONFIG = {
    "categories": {
        "custom": [
            {"name": "pets", "description": "the user's pets and their care", "keywords": ["dog", "vet"]}
        ]
    },
    "extraction": {
        "instructions": "Never store health data.",
        "ignore": {"categories": ["health"], "keywords": ["password"]},
    },
}
TURNS = [
    "I took my dog Biscuit to the vet on Monday.",
    "I was diagnosed with asthma last year.",
    "My email password is hunter2.",
    "I play the cello every weekend.",
]


def _add(api: Api, key: str = "acme-key") -> None:
    body = {
        "user_id": "maya",
        "sync": True,
        "messages": [{"role": "user", "speaker": "Maya", "content": t} for t in TURNS],
    }
    status, answer = api("POST", "/v1/memories", body=body, key=key)
    assert status == 200 and answer["status"] == "processed", answer


def _memories(api: Api, key: str = "acme-key", **query: str) -> list[dict]:
    status, page = api("GET", "/v1/memories", query={"user_id": "maya", "tier": "ltm", **query}, key=key)
    assert status == 200, page
    return page["memories"]


def test_extraction_files_under_the_tenants_categories_and_honours_its_rules(api: Api) -> None:
    assert api("PUT", "/v1/config", body=CONFIG)[0] == 200
    _add(api)
    memories = _memories(api)
    texts = " ".join(m["content"] for m in memories)
    assert "Biscuit" in texts and "cello" in texts
    assert "asthma" not in texts and "hunter2" not in texts  # never stored as memories
    [pet] = _memories(api, category="pets")
    assert "Biscuit" in pet["content"]
    # The raw turns stay as sent (the rules govern what extraction remembers): documented.
    raw = api("GET", "/v1/memories", query={"user_id": "maya", "tier": "stm"})[1]["memories"]
    assert len(raw) == len(TURNS)

    # Another tenant, no configuration: the built-in categories, everything remembered.
    _add(api, key="globex-key")
    theirs = " ".join(m["content"] for m in _memories(api, key="globex-key"))
    assert "asthma" in theirs
    status, error = api(
        "GET", "/v1/memories", query={"user_id": "maya", "category": "pets"}, key="globex-key"
    )
    assert status == 422 and error["error"]["code"] == "validation_error"
    assert "'pets' is not a category of this tenant" in error["error"]["message"]


def test_filters_and_keyed_writes_take_the_tenants_categories_and_refuse_others(api: Api) -> None:
    api("PUT", "/v1/config", body=CONFIG)
    status, keyed = api(
        "PUT",
        "/v1/memories/keys/dog",
        body={"user_id": "ann", "content": "Rex is a collie", "category": "pets"},
    )
    assert status == 201 and keyed["category"] == "pets", keyed
    search = {"user_id": "ann", "query": "collie", "filters": {"category": "pets"}}
    assert [r["id"] for r in api("POST", "/v1/memories/search", body=search)[1]["results"]] == [keyed["id"]]
    where = {
        "user_id": "ann",
        "query": "collie",
        "filters": {"OR": [{"category": "pets"}, {"category": "cars"}]},
    }
    status, error = api("POST", "/v1/memories/search", body=where)
    assert status == 422 and "where.category: 'cars'" in error["error"]["message"], error
    status, error = api(
        "PUT", "/v1/memories/keys/car", body={"user_id": "ann", "content": "A Golf", "category": "cars"}
    )
    assert status == 422 and error["error"]["details"][0]["field"] == "category"
    status, error = api("GET", "/v1/memories", query={"user_id": "ann", "category": "Not A Name"})
    assert status == 422 and error["error"]["details"][0]["field"] == "category"
    # A well-formed name the tenant does not have: the detail says where it was sent.
    status, error = api("GET", "/v1/memories", query={"user_id": "ann", "category": "cars"})
    assert status == 422 and error["error"]["details"][0] == {
        "field": "category",
        "location": "query",
        "message": "unknown category",
        "type": "unknown_category",
    }
    status, error = api("POST", "/v1/memories/search", body={**search, "filters": {"category": "cars"}})
    assert status == 422 and error["error"]["details"][0]["location"] == "body"


def test_consolidation_is_held_to_the_same_rules(api: Api) -> None:
    api("PUT", "/v1/config", body={"extraction": {"ignore": {"categories": ["health"]}}})
    turns = [
        "My asthma got worse and the doctor changed my medication.",
        "The new inhaler medication helps my asthma.",
        "I play the cello every weekend.",
        "My cello teacher is called Rui.",
    ]
    for key in ("acme-key", "globex-key"):
        body = {"user_id": "kim", "infer": False, "messages": [{"role": "user", "content": t} for t in turns]}
        assert api("POST", "/v1/memories", body=body, key=key)[0] == 202
        status, report = api("POST", "/v1/consolidations", body={"user_id": "kim", "sync": True}, key=key)
        assert status == 200 and report["read"] == len(turns), report

    def summaries(key: str) -> str:
        page = api("GET", "/v1/memories", query={"user_id": "kim", "tier": "ltm"}, key=key)[1]["memories"]
        return " ".join(m["content"] for m in page)

    assert "cello" in summaries("acme-key") and "asthma" not in summaries("acme-key")
    assert "asthma" in summaries("globex-key")  # no rules there: the health summary is written


def test_both_python_clients_configure_use_and_filter_on_the_tenants_categories(live_server: str) -> None:
    with MemoryClient(live_server, api_key="acme-key") as client:
        assert client.put_config(CONFIG).version == 1
        added = client.add([{"role": "user", "content": t} for t in TURNS], user_id="maya", sync=True)
        assert added.status == "processed"
        [pet] = client.list(user_id="maya", tier="ltm", category="pets").memories
        assert "Biscuit" in pet.content and pet.category == "pets"
        kept = " ".join(m.content for m in client.iter_memories(user_id="maya", tier="ltm"))
        assert "cello" in kept and "asthma" not in kept and "hunter2" not in kept
        found = client.search("Biscuit the dog", user_id="maya", filters={"category": "pets"}).results
        assert [h.id for h in found] == [pet.id]
        with pytest.raises(MemoryApiError) as caught:
            client.list(user_id="maya", category="cars")
        assert caught.value.status == 422 and "not a category of this tenant" in caught.value.message

    async def other_tenant() -> None:
        async with AsyncMemoryClient(live_server, api_key="globex-key") as client:
            with pytest.raises(MemoryApiError) as caught:  # acme's categories are acme's
                await client.search("Biscuit", user_id="maya", filters={"category": "pets"})
            assert caught.value.status == 422
            await client.patch_config(
                {"categories": {"mode": "replace", "custom": CONFIG["categories"]["custom"]}}
            )
            keyed = await client.put_key(
                "dog", "Rex is a collie who sees the vet", user_id="ann", category="pets"
            )
            page = await client.list(user_id="ann", category="pets")
            assert [m.id for m in page.memories] == [keyed.id]
            with pytest.raises(MemoryApiError) as caught:  # replaced: the built-in names are unknown
                await client.list(user_id="ann", category="hobbies")
            assert caught.value.status == 422

    asyncio.run(other_tenant())
