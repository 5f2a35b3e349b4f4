"""Mem0 users at home: run_id is session_id, agent_id and metadata travel onto extracted memories."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import Api


def test_metadata_and_agent_are_carried_onto_the_extracted_memories(api: Api) -> None:
    body = {
        "user_id": "ann",
        "agent_id": "travel-bot",
        "run_id": "trip-42",
        "metadata": {"channel": "sms", "priority": 2},
        "sync": True,
        "messages": [{"role": "user", "content": "I am allergic to peanuts."}],
    }
    status, added = api("POST", "/v1/memories", body=body)
    assert status == 200 and added["status"] == "processed"
    status, page = api("GET", "/v1/memories", query={"user_id": "ann", "run_id": "trip-42"})
    assert status == 200
    by_tier = {m["tier"]: m for m in page["memories"]}
    assert set(by_tier) == {"stm", "ltm"}
    for memory in by_tier.values():
        assert memory["session_id"] == "trip-42"
        assert memory["agent_id"] == "travel-bot"
        assert memory["metadata"]["channel"] == "sms" and memory["metadata"]["priority"] == 2
        assert "op_key" not in memory["metadata"]  # extraction's bookkeeping is not the caller's
    assert "peanuts" in by_tier["ltm"]["content"]


def test_run_id_is_an_alias_of_session_id(api: Api) -> None:
    message = [{"role": "user", "content": "I like tea."}]
    body = {"user_id": "ann", "session_id": "a", "run_id": "b", "messages": message}
    status, err = api("POST", "/v1/memories", body=body)
    assert status == 422 and "alias of session_id" in err["error"]["message"]
    status, _ = api(
        "POST",
        "/v1/memories",
        body={"user_id": "ann", "run_id": "s1", "scope": "CONTEXT", "messages": message},
    )
    assert status == 202
    status, found = api(
        "POST", "/v1/memories/search", body={"user_id": "ann", "query": "tea", "run_id": "s1"}
    )
    assert status == 200 and [r["session_id"] for r in found["results"]] == ["s1"]
    status, found = api(
        "POST", "/v1/memories/search", body={"user_id": "ann", "query": "tea", "run_id": "other"}
    )
    assert found["results"] == []  # CONTEXT memories are seen only in their session


@pytest.mark.parametrize("key", ["agent_id", "op_key"])
def test_system_keys_are_not_forgeable_through_metadata(api: Api, key: str) -> None:
    message = [{"role": "user", "content": "hi"}]
    status, err = api(
        "POST", "/v1/memories", body={"user_id": "ann", "messages": message, "metadata": {key: "x"}}
    )
    assert status == 422 and "reserved" in err["error"]["message"]


# --------------------------------------------------------------------- filters on search and list
def _add(api: Api, content: str, **body: Any) -> None:
    status, _ = api(
        "POST",
        "/v1/memories",
        body={"user_id": "ann", "infer": False, "messages": [{"role": "user", "content": content}], **body},
    )
    assert status == 202


#: what _seed stores, by the memory each filter case expects back
PORTO, RAMEN, OSAKA = (
    "I booked the train to Porto",
    "I booked a table for ramen",
    "I booked a flight to Osaka",
)


def _seed(api: Api) -> None:
    _add(api, PORTO, agent_id="travel-bot", metadata={"topic": "travel", "n": 1})
    _add(api, RAMEN, agent_id="food-bot", metadata={"topic": "food", "n": "1"})
    _add(api, OSAKA, metadata={"topic": "travel", "urgent": True})


def _search(api: Api, **body: Any) -> tuple[int, Any]:
    return api("POST", "/v1/memories/search", body={"user_id": "ann", "query": "booked", **body})


def _contents(answer: Any, key: str = "results") -> set[str]:
    return {m["content"] for m in answer[key]}


def test_search_and_list_filter_on_agent_and_metadata(api: Api) -> None:
    _seed(api)
    cases: list[tuple[dict[str, Any], set[str]]] = [
        ({"agent_id": "travel-bot"}, {PORTO}),
        ({"filters": {"metadata": {"topic": "travel"}}}, {PORTO, OSAKA}),
        ({"filters": {"metadata": {"topic": {"in": ["food", "music"]}}}}, {RAMEN}),
        ({"agent_id": "travel-bot", "filters": {"metadata": {"topic": "food"}}}, set()),
        ({"filters": {"metadata": {"n": 1.0}}}, {PORTO}),  # 1.0 is 1; "1" is not
        ({"filters": {"metadata": {"urgent": True}, "tier": "stm"}}, {OSAKA}),
        ({"filters": {"metadata": {}}}, {PORTO, RAMEN, OSAKA}),  # no condition
    ]
    for body, want in cases:
        status, found = _search(api, **body)
        assert status == 200, found
        assert _contents(found) == want, body
        query = {"user_id": "ann"}
        if "agent_id" in body:
            query["agent_id"] = body["agent_id"]
        metadata = body.get("filters", {}).get("metadata")
        if metadata is not None:
            query["metadata"] = json.dumps(metadata)
        status, page = api("GET", "/v1/memories", query=query)
        assert status == 200, page
        assert _contents(page, "memories") == want, query


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"topic": None}, "null matches nothing"),
        ({"topic": ["a", "b"]}, 'written {"in": [values]}'),
        ({"topic": {"between": "a"}}, "unknown operator 'between'"),
        ({"topic": {"gt": True}}, "compares numbers or strings, not booleans"),
        ({"topic": {}}, "a condition is a value"),
        ({"topic": {"in": []}}, '"in" takes a list of 1 to 100 values'),
        ({"topic": {"in": ["x"] * 101}}, '"in" takes a list of 1 to 100 values'),
        ({"topic": {"in": [{"a": 1}]}}, "must be a string, number, boolean"),
        ({"bad key!": "x"}, "should match pattern"),
        ({f"k{i}": i for i in range(21)}, "at most 20 items"),
        ({"topic": "x" * 1001}, "at most 1000 characters"),
    ],
)
def test_bad_filters_are_422_naming_the_field(api: Api, metadata: dict[str, Any], message: str) -> None:
    status, err = _search(api, filters={"metadata": metadata})
    assert status == 422 and err["error"]["code"] == "validation_error"
    assert message in err["error"]["message"]
    assert err["error"]["details"][0]["field"].startswith("filters.metadata")
    status, err = api("GET", "/v1/memories", query={"user_id": "ann", "metadata": json.dumps(metadata)})
    assert status == 422 and message in err["error"]["message"], err
    assert err["error"]["details"][0]["field"].startswith("metadata")
    assert err["error"]["details"][0]["location"] == "query"


def test_list_metadata_that_is_not_json_and_agent_given_twice_are_422(api: Api) -> None:
    status, err = api("GET", "/v1/memories", query={"user_id": "ann", "metadata": "topic=food"})
    assert status == 422 and "not JSON" in err["error"]["message"]
    status, err = api("GET", "/v1/memories", query={"user_id": "ann", "metadata": "[" * 5000})
    assert status == 422  # too long for the parameter, never a parser crash
    status, err = api("GET", "/v1/memories", query={"user_id": "ann", "metadata": "[" * 4000})
    assert status == 422 and "not JSON" in err["error"]["message"]
    status, err = _search(api, agent_id="a", filters={"metadata": {"agent_id": "b"}})
    assert status == 422 and "agent_id is given twice" in err["error"]["message"]
    status, err = _search(api, agent_id="not an id!")
    assert status == 422 and err["error"]["details"][0]["field"] == "agent_id"


# ------------------------------------------------------------- logic and comparisons (filters.where)
def test_search_and_list_take_logic_and_comparisons_in_mem0s_shape(api: Api) -> None:
    _seed(api)
    concert = "I booked a concert ticket"
    _add(api, concert, metadata={"topic": "music", "n": 5, "priority": 3})
    cases: list[tuple[dict[str, Any], set[str]]] = [
        # metadata with operators: once answered "unknown operator"
        ({"metadata": {"n": {"gt": 1}}}, {concert}),  # "1" is a string: never greater than a number
        ({"metadata": {"n": {"gte": 1, "lt": 5}}}, {PORTO}),
        ({"metadata": {"topic": {"ne": "travel"}}}, {RAMEN, concert}),
        ({"metadata": {"topic": {"nin": ["travel", "music"]}}}, {RAMEN}),
        ({"metadata": {"topic": {"contains": "av"}}}, {PORTO, OSAKA}),
        # Mem0's top-level AND / OR / NOT, on metadata and on the record's fields
        ({"OR": [{"agent_id": "food-bot"}, {"metadata": {"priority": {"gte": 3}}}]}, {RAMEN, concert}),
        ({"AND": [{"NOT": {"agent_id": "travel-bot"}}, {"metadata.topic": "travel"}]}, {OSAKA}),
        ({"where": {"created_at": {"lt": "2000-01-01T00:00:00Z"}}}, set()),
        ({"where": {"kind": "fact", "metadata": {"urgent": True}}, "tier": "stm"}, {OSAKA}),  # raw turns
        ({"NOT": {"created_at": {"lt": "2000-01-01T00:00:00Z"}}, "metadata": {"topic": "food"}}, {RAMEN}),
    ]
    for filters, want in cases:
        status, found = _search(api, filters=filters)
        assert status == 200, found
        assert _contents(found) == want, filters
        query = {"user_id": "ann"}
        plain = {k: v for k, v in filters.items() if k not in ("AND", "OR", "NOT", "where")}
        logic = filters.get("where") or {k: v for k, v in filters.items() if k in ("AND", "OR", "NOT")}
        for name, value in plain.items():
            query[name] = json.dumps(value) if isinstance(value, dict) else value
        if logic:
            query["where"] = json.dumps(logic)
        status, page = api("GET", "/v1/memories", query=query)
        assert status == 200, page
        assert _contents(page, "memories") == want, query


def test_a_record_fields_condition_given_directly_in_filters_is_read_as_where(api: Api) -> None:
    """Mem0 writes {"category": {"in": [...]}} or {"created_at": {"gte": ...}} at the top of filters."""
    _seed(api)
    cases: list[tuple[dict[str, Any], set[str]]] = [
        ({"agent_id": "food-bot"}, {RAMEN}),
        ({"agent_id": {"in": ["food-bot", "travel-bot"]}, "tier": "stm"}, {PORTO, RAMEN}),
        ({"created_at": {"lt": "2000-01-01T00:00:00Z"}}, set()),
        (
            {"created_at": {"gte": "2000-01-01T00:00:00Z"}, "tier": "stm", "metadata": {"urgent": True}},
            {OSAKA},
        ),
        ({"kind": {"in": ["fact"]}, "tier": "stm", "metadata": {"topic": "food"}}, {RAMEN}),
        ({"category": {"nin": ["travel"]}, "tier": "stm"}, {PORTO, RAMEN, OSAKA}),  # raw turns: no category
    ]
    for filters, want in cases:
        status, found = _search(api, filters=filters)
        assert status == 200, (filters, found)
        assert _contents(found) == want, filters
    status, err = _search(api, filters={"category": {"lt": "travel"}})
    assert status == 422 and "category takes eq, ne, in, nin, contains" in err["error"]["message"], err


@pytest.mark.parametrize(
    ("where", "message", "field"),
    [
        ({"colour": "red"}, "unknown field 'colour'", "filters.where"),
        ({"created_at": {"gt": "soon"}}, "'soon' is not an ISO 8601 time", "filters.where"),
        ({"OR": "x"}, "takes a non-empty list of filters", "filters.where"),
        ({"kind": {"lt": "fact"}}, "kind takes eq, ne, in, nin, contains", "filters.where"),
    ],
)
def test_a_bad_expression_is_422_saying_what_is_wrong(api: Api, where: Any, message: str, field: str) -> None:
    status, err = _search(api, filters={"where": where})
    assert status == 422 and err["error"]["code"] == "validation_error", err
    assert message in err["error"]["message"] and err["error"]["details"][0]["field"] == field
    status, err = _search(api, filters=where if "OR" in where else {"AND": [where]})
    assert status == 422 and message in err["error"]["message"]
    status, err = api("GET", "/v1/memories", query={"user_id": "ann", "where": json.dumps(where)})
    assert status == 422 and message in err["error"]["message"], err
    assert err["error"]["details"][0]["location"] == "query"
    status, err = api("GET", "/v1/memories", query={"user_id": "ann", "where": "{"})
    assert status == 422 and "where: not JSON" in err["error"]["message"]


def test_session_id_and_run_id_restrict_list_and_search_to_that_session(api: Api) -> None:
    for session, content in [("s1", "I booked a room in Porto"), ("s2", "I booked a room in Osaka")]:
        _add(api, content, run_id=session)
    _add(api, "I booked a room in Lima")  # no session
    for name in ("session_id", "run_id"):
        status, found = _search(api, **{name: "s1"})
        assert status == 200 and _contents(found) == {"I booked a room in Porto"}
        status, page = api("GET", "/v1/memories", query={"user_id": "ann", name: "s2"})
        assert status == 200 and _contents(page, "memories") == {"I booked a room in Osaka"}
    # session_mode=visible: the view from inside the session (every USER memory, its CONTEXT ones)
    status, found = _search(api, session_id="s1", session_mode="visible")
    assert _contents(found) == {
        "I booked a room in Porto",
        "I booked a room in Osaka",
        "I booked a room in Lima",
    }
    query = {"user_id": "ann", "session_id": "s1", "session_mode": "visible"}
    status, page = api("GET", "/v1/memories", query=query)
    assert status == 200 and len(page["memories"]) == 3
    status, err = _search(api, session_id="s1", session_mode="all")
    assert status == 422 and err["error"]["details"][0]["field"] == "session_mode"
