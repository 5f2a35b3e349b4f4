"""Mem0 users at home: run_id is session_id, agent_id and metadata travel onto extracted memories."""

from __future__ import annotations

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


def test_agent_id_is_not_forgeable_through_metadata(api: Api) -> None:
    message = [{"role": "user", "content": "hi"}]
    status, err = api(
        "POST", "/v1/memories", body={"user_id": "ann", "messages": message, "metadata": {"agent_id": "x"}}
    )
    assert status == 422 and "reserved" in err["error"]["message"]
