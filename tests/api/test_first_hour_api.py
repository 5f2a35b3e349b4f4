"""API details a new user tripped over: the browser's icon, a wrong method, an add that waited."""

from __future__ import annotations

import json

from memstack import __version__

from tests.api.conftest import Api, rest_event


def test_api_details(api: Api) -> None:
    status, body = api("GET", "/favicon.ico", key=None)
    assert status == 404 and body["error"]["code"] == "not_found"  # not a 401 for a browser's icon
    result = api.app.resolve(rest_event("PUT", "/v1/memories"), None)
    assert result["statusCode"] == 405
    assert json.loads(result["body"])["error"]["code"] == "method_not_allowed"
    assert result["multiValueHeaders"]["Allow"] == ["DELETE, GET, HEAD, POST"]
    status, _ = api("GET", "/v1/no-such-route")
    assert status == 404
    assert api("GET", "/v1/health", key=None)[1]["version"] == __version__


def test_an_add_that_waited_for_extraction_is_200(api: Api) -> None:
    message = [{"role": "user", "content": "I moved to Osaka."}]
    status, body = api("POST", "/v1/memories", body={"user_id": "ann", "messages": message, "sync": True})
    assert status == 200 and body["status"] == "processed"
    message = [{"role": "user", "content": "I like tea."}]
    status, body = api("POST", "/v1/memories", body={"user_id": "ann", "messages": message})
    assert status == 202 and body["status"] == "queued"


def test_a_fixed_path_is_not_a_memory_id(api: Api) -> None:
    """GET /v1/memories/search answered 404 "memory search not found": it is 405, POST only."""
    for method, query in [
        ("GET", {"user_id": "alice"}),
        ("GET", None),
        ("DELETE", {"user_id": "a"}),
        ("PATCH", None),
    ]:
        result = api.app.resolve(rest_event(method, "/v1/memories/search", query=query), None)
        assert result["statusCode"] == 405, (method, result["body"])
        assert json.loads(result["body"])["error"]["code"] == "method_not_allowed"
        assert result["multiValueHeaders"]["Allow"] == ["POST"]
    result = api.app.resolve(rest_event("DELETE", "/v1/jobs"), None)
    assert result["statusCode"] == 405 and result["multiValueHeaders"]["Allow"] == ["GET, HEAD"]
    # Without credentials it is still a 401 first.
    assert api.app.resolve(rest_event("GET", "/v1/memories/search", key=None), None)["statusCode"] == 401
