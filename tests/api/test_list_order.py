"""``GET /v1/memories?order=event_time``: newest event first across pages, cursors kept to their order."""

from __future__ import annotations

import asyncio
from typing import Any

from memstack.client.aio import AsyncMemoryClient
from memstack.client.sync import MemoryClient

from tests.api.conftest import Api

# Written in this order; said at these times (the last one carries none: its write time counts).
SAID = [("summer trip", "2025-06-01T12:00:00Z"), ("first job", "2019-03-01T09:00:00Z"), ("today", None)]


MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": text, **({"timestamp": when} if when else {})} for text, when in SAID
]


def _contents(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["memories"]]


def test_order_event_time_pages_newest_event_first_and_keeps_cursors_to_their_order(api: Api) -> None:
    for message in MESSAGES:  # one add each: three write times in this order
        status, body = api(
            "POST", "/v1/memories", body={"user_id": "ana", "messages": [message], "infer": False}
        )
        assert status == 202, body
    status, written = api("GET", "/v1/memories", query={"user_id": "ana"})
    assert status == 200 and _contents(written) == ["today", "first job", "summer trip"]
    pages, cursor = [], None
    while True:
        query = {
            "user_id": "ana",
            "order": "event_time",
            "limit": "1",
            **({"cursor": cursor} if cursor else {}),
        }
        status, page = api("GET", "/v1/memories", query=query)
        assert status == 200, page
        pages.append(_contents(page))
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert pages == [["today"], ["summer trip"], ["first job"]]
    # A position in one order means nothing in the other: refused, not a wrong page.
    first = api("GET", "/v1/memories", query={"user_id": "ana", "limit": "1"})[1]["next_cursor"]
    status, refused = api(
        "GET", "/v1/memories", query={"user_id": "ana", "order": "event_time", "cursor": first}
    )
    assert status == 400 and refused["error"]["code"] == "bad_request"
    status, bad = api("GET", "/v1/memories", query={"user_id": "ana", "order": "oldest"})
    assert status == 422 and bad["error"]["code"] == "validation_error"


def test_both_clients_list_and_iterate_by_event_time(live_server: str) -> None:
    with MemoryClient(live_server, api_key="acme-key") as client:
        for message in MESSAGES:
            client.add([message], user_id="bo", infer=False)
        page = client.list(user_id="bo", order="event_time", limit=2)
        assert [m.content for m in page.memories] == ["today", "summer trip"] and page.next_cursor
        everything = [m.content for m in client.iter_memories(user_id="bo", order="event_time", page_size=1)]
        assert everything == ["today", "summer trip", "first job"]

    async def run() -> list[str]:
        async with AsyncMemoryClient(live_server, api_key="acme-key") as client:
            first = await client.list(user_id="bo", order="event_time", limit=1)
            assert [m.content for m in first.memories] == ["today"]
            return [
                m.content async for m in client.iter_memories(user_id="bo", order="event_time", page_size=2)
            ]

    assert asyncio.run(run()) == ["today", "summer trip", "first job"]
