"""Every error case answers 4xx in the one shape, names the field, and stores nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import Api, add_body


def assert_error(status: int, body: Any, expected_status: int, code: str, field: str | None = None) -> None:
    assert status == expected_status, body
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    if field is not None:
        fields = [d["field"] for d in body["error"]["details"]]
        assert field in fields, fields
        assert field in body["error"]["message"]


def assert_nothing_stored(api: Api, user: str = "alice") -> None:
    status, body = api("GET", "/v1/memories", query={"user_id": user})
    assert status == 200 and body["memories"] == []


def msg(content: Any = "hello", **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": content, **extra}


ADD_CASES = {
    "empty content": ({"user_id": "alice", "messages": [msg("")]}, "messages[0].content"),
    "whitespace content": ({"user_id": "alice", "messages": [msg("   \n ")]}, "messages[0].content"),
    "control character": ({"user_id": "alice", "messages": [msg("bad\x00byte")]}, "messages[0].content"),
    "escape character": ({"user_id": "alice", "messages": [msg("bell\x07")]}, "messages[0].content"),
    "content wrong type": ({"user_id": "alice", "messages": [msg(42)]}, "messages[0].content"),
    "user_id wrong type": ({"user_id": 7, "messages": [msg()]}, "user_id"),
    "user_id empty": ({"user_id": "", "messages": [msg()]}, "user_id"),
    "user_id with separator": ({"user_id": "a#b", "messages": [msg()]}, "user_id"),
    "user_id with newline": ({"user_id": "alice\n", "messages": [msg()]}, "user_id"),
    "missing user_id": ({"messages": [msg()]}, "user_id"),
    "missing messages": ({"user_id": "alice"}, "messages"),
    "no messages": ({"user_id": "alice", "messages": []}, "messages"),
    "messages not a list": ({"user_id": "alice", "messages": "hello"}, "messages"),
    "unknown field": ({"user_id": "alice", "messages": [msg()], "tenant": "other"}, "tenant"),
    "unknown message field": ({"user_id": "alice", "messages": [msg(mood="happy")]}, "messages[0].mood"),
    "bad role": ({"user_id": "alice", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    "missing role": ({"user_id": "alice", "messages": [{"content": "x"}]}, "messages[0].role"),
    "bad timestamp": (
        {"user_id": "alice", "messages": [msg(timestamp="yesterday-ish")]},
        "messages[0].timestamp",
    ),
    "infer not a bool": ({"user_id": "alice", "messages": [msg()], "infer": "yes"}, "infer"),
    "bad scope": ({"user_id": "alice", "messages": [msg()], "scope": "GLOBAL"}, "scope"),
    "reserved metadata": (
        {"user_id": "alice", "messages": [msg()], "metadata": {"consolidated": True}},
        "metadata",
    ),
    "nested metadata": ({"user_id": "alice", "messages": [msg()], "metadata": {"a": {"b": 1}}}, "metadata.a"),
    "bad message id": ({"user_id": "alice", "messages": [msg(id="has space")]}, "messages[0].id"),
}


@pytest.mark.parametrize("case", sorted(ADD_CASES))
def test_add_rejects_bad_input_and_stores_nothing(api: Api, case: str) -> None:
    body, field = ADD_CASES[case]
    status, answer = api("POST", "/v1/memories", body=body)
    assert_error(status, answer, 422, "validation_error", field)
    assert_nothing_stored(api)


def test_one_bad_message_among_good_ones_stores_none_of_them(api: Api) -> None:
    body = {"user_id": "alice", "messages": [msg("fine one"), msg("fine two"), msg("bro\x1bken")]}
    status, answer = api("POST", "/v1/memories", body=body)
    assert_error(status, answer, 422, "validation_error", "messages[2].content")
    assert_nothing_stored(api)


@pytest.mark.parametrize(
    "raw", ["{not json", '{"user_id": "alice",}', "", "[1, 2", '"just a string"', "null"]
)
def test_malformed_or_non_object_json(api: Api, raw: str) -> None:
    status, answer = api("POST", "/v1/memories", body=raw)
    assert status in (400, 422), answer
    assert answer["error"]["code"] in ("malformed_json", "validation_error")
    assert_nothing_stored(api)


def test_malformed_json_is_400_and_says_so(api: Api) -> None:
    status, answer = api("POST", "/v1/memories/search", body='{"user_id": ')
    assert_error(status, answer, 400, "malformed_json", "body")


def test_limits_from_settings(small_api: Api) -> None:
    api = small_api
    status, answer = api("POST", "/v1/memories", body=add_body("alice", "a", "b", "c", "d"))
    assert_error(status, answer, 422, "validation_error", "messages")
    assert_nothing_stored(api)
    status, answer = api("POST", "/v1/memories/search", body={"user_id": "alice", "query": "q" * 21})
    assert_error(status, answer, 422, "validation_error", "query")
    status, answer = api(
        "POST", "/v1/memories/search", body={"user_id": "alice", "query": "cats", "top_k": 6}
    )
    assert_error(status, answer, 422, "validation_error", "top_k")
    status, answer = api(
        "POST", "/v1/memories/search", body={"user_id": "alice", "query": "cats", "top_k": 0}
    )
    assert_error(status, answer, 422, "validation_error", "top_k")
    status, answer = api("POST", "/v1/memories", body=add_body("alice", *(["y" * 40] * 60)))
    assert_error(status, answer, 413, "payload_too_large", "body")
    assert_nothing_stored(api)
    status, answer = api(
        "POST", "/v1/memories/search", body={"user_id": "alice", "query": "cats", "top_k": 5}
    )
    assert status == 200
    # A message longer than MEMSTACK_MAX_MESSAGE_CHARS is no error: only the body bounds it.
    status, answer = api("POST", "/v1/memories", body=add_body("alice", "x" * 51, "short"))
    assert status in (200, 201, 202) and len(answer["stored"]) == 2, answer


SEARCH_CASES = {
    "empty query": ({"user_id": "alice", "query": ""}, "query"),
    "control char query": ({"user_id": "alice", "query": "cat\x00"}, "query"),
    "top_k string": ({"user_id": "alice", "query": "cat", "top_k": "5"}, "top_k"),
    "top_k float": ({"user_id": "alice", "query": "cat", "top_k": 2.5}, "top_k"),
    "unknown filter": ({"user_id": "alice", "query": "cat", "filters": {"colour": "red"}}, "filters.colour"),
    "bad kind": ({"user_id": "alice", "query": "cat", "filters": {"kind": "rumour"}}, "filters.kind"),
    "bad reference_time": ({"user_id": "alice", "query": "cat", "reference_time": "soon"}, "reference_time"),
    "explain not bool": ({"user_id": "alice", "query": "cat", "explain": "true"}, "explain"),
}


@pytest.mark.parametrize("case", sorted(SEARCH_CASES))
def test_search_rejects_bad_input(api: Api, case: str) -> None:
    body, field = SEARCH_CASES[case]
    status, answer = api("POST", "/v1/memories/search", body=body)
    assert_error(status, answer, 422, "validation_error", field)


def test_query_parameter_errors(api: Api) -> None:
    assert_error(
        *api("GET", "/v1/memories", query={"user_id": "alice", "limit": "ten"}),
        422,
        "validation_error",
        "limit",
    )
    assert_error(
        *api("GET", "/v1/memories", query={"user_id": "alice", "limit": "0"}),
        422,
        "validation_error",
        "limit",
    )
    assert_error(
        *api("GET", "/v1/memories", query={"user_id": "alice", "tier": "mid"}),
        422,
        "validation_error",
        "tier",
    )
    assert_error(
        *api("GET", "/v1/memories", query={"user_id": "alice", "sort": "asc"}),
        422,
        "validation_error",
        "sort",
    )
    assert_error(*api("GET", "/v1/memories", query={}), 422, "validation_error", "user_id")
    assert_error(*api("GET", "/v1/memories", query={"user_id": "alice", "cursor": "%%%"}), 400, "bad_request")


def test_update_errors(api: Api) -> None:
    api("POST", "/v1/memories", body=add_body("alice", "I live in Lisbon.", infer=False))
    memory = api("GET", "/v1/memories", query={"user_id": "alice"})[1]["memories"][0]
    path = f"/v1/memories/{memory['id']}"
    assert_error(
        *api("PATCH", path, body={"user_id": "alice", "content": ""}), 422, "validation_error", "content"
    )
    status, nothing = api("PATCH", path, body={"user_id": "alice"})
    assert_error(status, nothing, 422, "validation_error")
    assert "give content or metadata" in nothing["error"]["message"]
    assert_error(
        *api("PATCH", path, body={"user_id": "alice", "metadata": {"agent_id": "x"}}),
        422,
        "validation_error",
        "metadata",
    )
    assert_error(
        *api("PATCH", path, body={"user_id": "alice", "content": "x", "version": 9}),
        422,
        "validation_error",
        "version",
    )
    assert_error(
        *api("PATCH", "/v1/memories/nope", body={"user_id": "alice", "content": "x"}), 404, "not_found"
    )
    # Nothing changed by any of the failures.
    assert api("GET", path, query={"user_id": "alice"})[1]["version"] == 1


def test_not_found_cases(api: Api) -> None:
    assert_error(*api("GET", "/v1/memories/does-not-exist", query={"user_id": "alice"}), 404, "not_found")
    assert_error(*api("DELETE", "/v1/memories/does-not-exist", query={"user_id": "alice"}), 404, "not_found")
    assert_error(
        *api("GET", "/v1/memories/does-not-exist/history", query={"user_id": "alice"}), 404, "not_found"
    )
    assert_error(*api("GET", "/v2/anything"), 404, "not_found")
    assert_error(*api("PUT", "/v1/memories", body={}), 405, "method_not_allowed")  # a route, another method


@pytest.mark.parametrize(
    ("headers", "key", "message_part"),
    [
        ({}, None, "missing API key"),
        ({}, "wrong-key", "not valid"),
        ({"Authorization": "Basic YWxpY2U6cHc="}, None, "Bearer"),
        ({"Authorization": "Bearer "}, None, "Bearer"),
    ],
)
def test_unauthenticated_requests_get_401_before_validation(
    api: Api, headers: dict[str, str], key: str | None, message_part: str
) -> None:
    status, answer = api("POST", "/v1/memories", body="{not even json", headers=headers, key=key)
    assert_error(status, answer, 401, "unauthorized")
    assert message_part in answer["error"]["message"]


def test_bearer_token_is_accepted(api: Api) -> None:
    status, _ = api(
        "GET",
        "/v1/memories",
        query={"user_id": "alice"},
        headers={"Authorization": "Bearer acme-key"},
        key=None,
    )
    assert status == 200


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", None])
def test_a_json_body_is_read_as_json_whatever_the_content_type(api: Api, content_type: str | None) -> None:
    # `curl -d` declares form encoding; the body is still this API's JSON.
    headers = {"Content-Type": content_type} if content_type else {}
    status, answer = api(
        "POST",
        "/v1/memories",
        body=json.dumps(add_body("alice", "I grow tomatoes", infer=False)),
        headers=headers,
    )
    assert status == 202, answer
    status, answer = api(
        "POST", "/v1/memories/search", body='{"user_id": "alice", "query": "tomatoes"', headers=headers
    )
    assert_error(status, answer, 400, "malformed_json", "body")
