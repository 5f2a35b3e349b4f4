"""Both Python clients send filter expressions (``where=``, Mem0's ``filters={"AND": ...}``) and operators."""

from __future__ import annotations

import asyncio

import pytest
from memstack.client import AsyncMemoryClient, MemoryApiError, MemoryClient

NOTES = [
    ("I booked the train to Porto", {"topic": "travel", "priority": 1}),
    ("I booked a table for ramen", {"topic": "food", "priority": 3}),
    ("I booked a flight to Osaka", {"topic": "travel", "priority": 5}),
]


def _seed(client: MemoryClient) -> None:
    for content, metadata in NOTES:
        client.add(content, user_id="ann", infer=False, metadata=metadata)


def test_the_sync_client_filters_search_and_list_with_expressions(live_server: str) -> None:
    with MemoryClient(live_server, api_key="acme-key") as client:
        _seed(client)
        urgent_travel = {"AND": [{"metadata.topic": "travel"}, {"metadata": {"priority": {"gte": 2}}}]}
        hits = client.search("booked", user_id="ann", where=urgent_travel)
        assert [h.content for h in hits.results] == ["I booked a flight to Osaka"]
        hits = client.search(
            "booked", user_id="ann", filters={"OR": [{"metadata.priority": 1}, {"metadata.priority": 3}]}
        )
        assert {h.content for h in hits.results} == {
            "I booked the train to Porto",
            "I booked a table for ramen",
        }
        hits = client.search("booked", user_id="ann", metadata={"priority": {"lt": 3}})
        assert [h.content for h in hits.results] == ["I booked the train to Porto"]
        page = client.list(user_id="ann", where={"NOT": {"metadata.topic": "travel"}})
        assert [m.content for m in page.memories] == ["I booked a table for ramen"]
        page = client.list(user_id="ann", metadata={"priority": {"ne": 3}, "topic": "travel"})
        assert {m.content for m in page.memories} == {
            "I booked the train to Porto",
            "I booked a flight to Osaka",
        }
        with pytest.raises(MemoryApiError) as bad:
            client.list(user_id="ann", where={"priority": {"gt": 1}})
        assert bad.value.status == 422 and "unknown field 'priority'" in str(bad.value)
        with pytest.raises(ValueError, match="where is given twice"):
            client.search("x", user_id="ann", where={"kind": "fact"}, filters={"where": {"kind": "event"}})


def test_the_async_client_filters_search_and_list_with_expressions(live_server: str) -> None:
    with MemoryClient(live_server, api_key="acme-key") as client:
        _seed(client)

    async def run() -> tuple[list[str], list[str]]:
        async with AsyncMemoryClient(live_server, api_key="acme-key") as client:
            hits = await client.search("booked", user_id="ann", where={"metadata": {"priority": {"gt": 1}}})
            page = await client.list(user_id="ann", where={"metadata": {"topic": {"contains": "av"}}})
            return sorted(h.content for h in hits.results), sorted(m.content for m in page.memories)

    found, listed = asyncio.run(run())
    assert found == ["I booked a flight to Osaka", "I booked a table for ramen"]
    assert listed == ["I booked a flight to Osaka", "I booked the train to Porto"]
