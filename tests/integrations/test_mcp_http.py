"""``/mcp`` on ``memstack serve``: streamable HTTP, the API's own authentication and tenancy."""

from __future__ import annotations

import anyio
import requests

from tests.integrations.conftest import LiveServer
from tests.integrations.mcp_scenario import check_errors, check_filters, check_tool_list, walk_every_tool
from tests.integrations.mcp_session import http_session, ok


def test_every_tool_over_streamable_http(mcp_server: LiveServer) -> None:
    async def scenario() -> None:
        async with http_session(f"{mcp_server.url}/mcp", {"Authorization": "Bearer acme-key"}) as session:
            await check_tool_list(session, erase=True)
            await walk_every_tool(session, {"user_id": "ann"})
            await check_errors(session, {"user_id": "ann"})
            await check_filters(session, {"user_id": "ann"})

    anyio.run(scenario)
    # What the tools wrote belongs to the caller's tenant (acme), as if written over REST.
    records, _ = mcp_server.service.list("acme", "ann")
    assert any("peanuts" in r.content for r in records)


def test_the_tenant_is_the_callers_key(mcp_server: LiveServer) -> None:
    async def scenario() -> None:
        async with http_session(f"{mcp_server.url}/mcp", {"X-Api-Key": "acme-key"}) as acme:
            ok(
                await acme.call_tool(
                    "add_memory", {"content": "My PIN is in the blue notebook.", "user_id": "ann"}
                )
            )
            mine = ok(await acme.call_tool("search_memories", {"query": "blue notebook", "user_id": "ann"}))
            assert mine["results"]
        async with http_session(f"{mcp_server.url}/mcp", {"X-Api-Key": "globex-key"}) as globex:
            theirs = ok(
                await globex.call_tool("search_memories", {"query": "blue notebook", "user_id": "ann"})
            )
            assert theirs["results"] == []
            # A tenant argument is not part of the schema; sending one changes nothing.
            sneaky = await globex.call_tool(
                "search_memories", {"query": "blue notebook", "user_id": "ann", "tenant": "acme"}
            )
            assert sneaky.is_error or sneaky.structured_content["results"] == []

    anyio.run(scenario)


def test_mcp_refuses_callers_the_api_refuses(mcp_server: LiveServer) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    for creds in ({}, {"Authorization": "Bearer stolen"}, {"X-Api-Key": "nope"}):
        r = requests.post(f"{mcp_server.url}/mcp", json=initialize, headers={**headers, **creds}, timeout=30)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthorized"
    r = requests.post(
        f"{mcp_server.url}/mcp", json=initialize, headers={**headers, "X-Api-Key": "acme-key"}, timeout=30
    )
    assert r.status_code == 200 and r.json()["result"]["serverInfo"]["name"] == "memstack"
    assert r.headers["X-Request-Id"]


def test_methods_other_than_post_are_405_not_500(mcp_server: LiveServer) -> None:
    """``GET /mcp`` answered 500 (the SDK's event stream sent a hop-by-hop header the server refuses).

    The endpoint is stateless: no stream to GET, no session to DELETE. 405 with ``Allow: POST``.
    """
    headers = {"X-Api-Key": "acme-key", "Accept": "text/event-stream, application/json"}
    for method in ("GET", "DELETE", "PUT", "PATCH", "HEAD"):
        r = requests.request(method, f"{mcp_server.url}/mcp", headers=headers, timeout=30)
        assert r.status_code == 405, (method, r.status_code, r.text)
        assert r.headers["Allow"] == "POST"
        if method != "HEAD":
            assert r.json()["error"]["code"] == -32600 and "POST" in r.json()["error"]["message"]
    # The caller's credential is still checked first.
    assert requests.get(f"{mcp_server.url}/mcp", timeout=30).status_code == 401
