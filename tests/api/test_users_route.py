"""``GET /v1/users``: the tenant's users, counts per tier, last write, pages, errors; and both clients."""

from __future__ import annotations

import asyncio

from memstack.client.aio import AsyncMemoryClient
from memstack.client.sync import MemoryClient

from tests.api.conftest import Api, add_body


def _add(api: Api, user: str, *contents: str) -> None:
    status, body = api("POST", "/v1/memories", body=add_body(user, *contents, infer=False))
    assert status == 202, body


def test_users_lists_only_this_tenants_users_with_counts_and_last_write(api: Api) -> None:
    _add(api, "alice", "one", "two")
    _add(api, "bob", "three")
    _add(api, "carol", "another tenant's user")  # acme's too, but erased below
    assert api("DELETE", "/v1/users/carol")[0] == 200
    api("POST", "/v1/memories", body=add_body("dave", "globex only", infer=False), key="globex-key")
    status, body = api("GET", "/v1/users")
    assert status == 200, body
    assert [u["user_id"] for u in body["users"]] == ["alice", "bob"]
    assert body["users"][0]["counts"] == {"stm": 2, "ltm": 0}
    assert body["users"][1]["counts"] == {"stm": 1, "ltm": 0}
    assert body["users"][0]["last_write"].endswith("+00:00")
    assert body["next_cursor"] is None
    assert [u["user_id"] for u in api("GET", "/v1/users", key="globex-key")[1]["users"]] == ["dave"]


def test_users_pages_with_a_cursor_sealed_for_the_tenant(api: Api) -> None:
    for name in ("u1", "u2", "u3"):
        _add(api, name, f"hello from {name}")
    status, first = api("GET", "/v1/users", query={"limit": "2"})
    assert status == 200 and [u["user_id"] for u in first["users"]] == ["u1", "u2"]
    cursor = first["next_cursor"]
    second = api("GET", "/v1/users", query={"limit": "2", "cursor": cursor})[1]
    assert [u["user_id"] for u in second["users"]] == ["u3"] and second["next_cursor"] is None
    # Another tenant's key cannot use it, nor can a hand-edited one.
    status, refused = api("GET", "/v1/users", query={"cursor": cursor}, key="globex-key")
    assert status == 400 and refused["error"]["code"] == "bad_request"
    assert api("GET", "/v1/users", query={"cursor": cursor[:-2] + "xx"})[0] == 400


def test_users_refuses_bad_queries_and_missing_credentials(api: Api) -> None:
    status, body = api("GET", "/v1/users", query={"limit": "0"})
    assert status == 422 and body["error"]["code"] == "validation_error"
    status, body = api("GET", "/v1/users", query={"user_id": "alice"})
    assert status == 422 and "unknown query parameter" in body["error"]["message"]
    assert api("GET", "/v1/users", key=None)[0] == 401


def test_both_clients_list_and_iterate_users(live_server: str) -> None:
    with MemoryClient(live_server, api_key="acme-key") as client:
        for name in ("ann", "ben", "cat"):
            client.add(f"hello, I am {name}", user_id=name, infer=False)
        page = client.list_users(limit=2)
        assert [u.user_id for u in page.users] == ["ann", "ben"] and page.next_cursor
        assert page.users[0].counts.stm == 1
        assert [u.user_id for u in client.iter_users(page_size=2)] == ["ann", "ben", "cat"]

    async def run() -> list[str]:
        async with AsyncMemoryClient(live_server, api_key="acme-key") as client:
            first = await client.list_users(limit=1)
            assert [u.user_id for u in first.users] == ["ann"]
            return [u.user_id async for u in client.iter_users(page_size=2)]

    assert asyncio.run(run()) == ["ann", "ben", "cat"]
