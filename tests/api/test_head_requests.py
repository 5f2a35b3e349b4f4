"""HEAD on a GET route is answered as GET without the content (RFC 9110 9.3.2); it answered 405 (issue 25)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from memstack.api.app import close_app
from memstack.service import MemoryService
from memstack.settings import Settings

from tests.api.conftest import add_body, build_api, rest_event
from tests.api.conftest import live_server as live_server  # pytest fixture

GET_ROUTES = [
    ("/v1/health", None),
    ("/openapi.json", None),
    ("/v1/memories", {"user_id": "alice"}),
    ("/v1/users", None),
    ("/v1/memories/keys/city", {"user_id": "alice"}),
    ("/v1/memories/no-such-memory", {"user_id": "alice"}),  # a 404 is a 404 for HEAD too
]


@pytest.fixture
def resolver(service: MemoryService, settings: Settings) -> Iterator[Any]:
    api = build_api(service, settings)
    assert api("POST", "/v1/memories", body=add_body("alice"))[0] == 202
    assert api("PUT", "/v1/memories/keys/city", body={"user_id": "alice", "content": "Lisbon"})[0] == 201
    yield api.app
    close_app(api.app)


def _headers(answer: dict[str, Any]) -> dict[str, list[str]]:
    skip = {"content-length", "x-request-id"}
    return {k: v for k, v in answer["multiValueHeaders"].items() if k.lower() not in skip}


@pytest.mark.parametrize("path, query", GET_ROUTES)
def test_head_answers_what_get_answers_without_the_content(resolver: Any, path: str, query: Any) -> None:
    get = resolver.resolve(rest_event("GET", path, query=query), None)
    head = resolver.resolve(rest_event("HEAD", path, query=query), None)
    assert head["statusCode"] == get["statusCode"]
    assert _headers(head) == _headers(get)
    assert head["body"] == "" and get["body"]
    assert head["multiValueHeaders"]["Content-Length"] == [str(len(get["body"].encode()))]


def test_head_is_authenticated_as_get_is(resolver: Any) -> None:
    head = resolver.resolve(rest_event("HEAD", "/v1/memories", query={"user_id": "alice"}, key=None), None)
    assert head["statusCode"] == 401 and head["body"] == ""


def test_head_where_no_get_route_is_405_and_allow_names_head_beside_get(resolver: Any) -> None:
    head = resolver.resolve(rest_event("HEAD", "/v1/memories/search"), None)
    assert head["statusCode"] == 405 and head["multiValueHeaders"]["Allow"] == ["POST"]
    post = resolver.resolve(rest_event("POST", "/v1/health"), None)
    assert post["statusCode"] == 405
    assert (post["multiValueHeaders"].get("Allow") or [post["headers"].get("Allow")]) == ["GET, HEAD"]


def test_head_over_http_has_get_headers_and_no_body(live_server: str) -> None:
    import requests

    headers = {"X-Api-Key": "acme-key"}
    assert requests.post(f"{live_server}/v1/memories", json=add_body(), headers=headers, timeout=30).ok
    url, params = f"{live_server}/v1/memories", {"user_id": "alice"}
    get = requests.get(url, params=params, headers=headers, timeout=30)
    head = requests.head(url, params=params, headers=headers, timeout=30)
    assert get.status_code == head.status_code == 200
    assert head.content == b""
    assert head.headers["Content-Length"] == str(len(get.content)) != "0"
    assert head.headers["Content-Type"] == get.headers["Content-Type"]
