"""Input that used to answer 500 or break a user for good: each is now a clear 4xx, or just works.

Every case was found by probing (issue 12, items 2 and 3): extreme timestamps
accepted with 202 then failing every later read of the user; temporal phrases
that overflowed; JSON nested past the recursion limit; forged list cursors.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from memstack.errors import SettingsError
from memstack.models import Kind, MemoryRecord, Message
from memstack.ports.llm import ExtractionOp
from memstack.settings import load_settings

from tests.api.conftest import Api, build_api
from tests.api.test_errors import assert_error, assert_nothing_stored, msg

EXTREME = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "1066-10-14T09:00:00Z", "2999-01-01"]


def assert_user_usable(api: Api, user: str = "alice") -> None:
    """List, search and consolidate of the user all still answer."""
    assert api("GET", "/v1/memories", query={"user_id": user})[0] == 200
    assert api("POST", "/v1/memories/search", body={"user_id": user, "query": "what did I say"})[0] == 200
    assert api("POST", "/v1/consolidations", body={"user_id": user, "sync": True})[0] == 200


@pytest.mark.parametrize("stamp", EXTREME)
def test_extreme_timestamps_are_refused_naming_the_field(api: Api, stamp: str) -> None:
    body = {"user_id": "alice", "messages": [msg("a fine turn"), msg("when was this?", timestamp=stamp)]}
    status, answer = api("POST", "/v1/memories", body=body)
    assert_error(status, answer, 422, "validation_error", "messages[1].timestamp")
    assert "1900-01-01" in answer["error"]["message"]
    assert_nothing_stored(api)
    assert_user_usable(api)


def test_timestamps_inside_the_range_are_kept(api: Api) -> None:
    stamps = ["1900-01-01T00:00:00Z", "1969-07-20T20:17:00Z", "2199-12-31T23:59:59+14:00"]
    body = {"user_id": "alice", "messages": [msg(f"turn {i}", timestamp=t) for i, t in enumerate(stamps)]}
    assert api("POST", "/v1/memories", body=body)[0] == 202
    status, answer = api("GET", "/v1/memories", query={"user_id": "alice"})
    assert status == 200 and len(answer["memories"]) == 3
    assert_user_usable(api)


def test_the_range_is_a_setting(tmp_path) -> None:
    from memstack.factory import build_service

    settings = load_settings(data_dir=tmp_path / "d", embedder="hashing", latest_time="2030-01-01T00:00:00Z")
    service = build_service(settings)
    api = build_api(service, settings)
    status, answer = api(
        "POST", "/v1/memories", body={"user_id": "alice", "messages": [msg("x", timestamp="2031-05-01")]}
    )
    assert_error(status, answer, 422, "validation_error", "messages[0].timestamp")
    assert "2030-01-01" in answer["error"]["message"]
    service.close()
    with pytest.raises(SettingsError, match="MEMSTACK_"):
        load_settings(earliest_time="2030-01-01T00:00:00Z", latest_time="2020-01-01T00:00:00Z")
    with pytest.raises(SettingsError, match="MEMSTACK_LATEST_TIME"):
        load_settings(latest_time="9999-12-31T00:00:00Z")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reference_time": EXTREME[0]}, "reference_time"),
        ({"filters": {"after": EXTREME[1]}}, "filters.after"),
        ({"filters": {"before": EXTREME[0]}}, "filters.before"),
    ],
)
def test_search_times_out_of_range_are_422(api: Api, body: dict, field: str) -> None:
    status, answer = api("POST", "/v1/memories/search", body={"user_id": "alice", "query": "cats", **body})
    assert_error(status, answer, 422, "validation_error", field)


@pytest.mark.parametrize("param", ["after", "before"])
def test_list_times_out_of_range_are_422(api: Api, param: str) -> None:
    status, answer = api("GET", "/v1/memories", query={"user_id": "alice", param: EXTREME[0]})
    assert_error(status, answer, 422, "validation_error", param)
    assert answer["error"]["details"][0]["location"] == "query"


@pytest.mark.parametrize(
    "query",
    [
        "what happened 10000 years ago",
        "what did I do 99999999999999999999999 days ago",
        "anything in the last 99999999999 years",
        "3000 months ago and 800000 weeks ago",
    ],
)
def test_unrepresentable_time_phrases_search_without_a_window(api: Api, query: str) -> None:
    api("POST", "/v1/memories", body={"user_id": "alice", "messages": [msg("I adopted a cat")]})
    status, answer = api("POST", "/v1/memories/search", body={"user_id": "alice", "query": query})
    assert status == 200, answer


def test_unrepresentable_phrase_in_a_message_is_extracted_not_dead_lettered(api: Api, service) -> None:
    text = "I moved to Paris 10000 years ago and sold my car 99999999999999 days ago."
    status, answer = api(
        "POST", "/v1/memories", body={"user_id": "alice", "sync": True, "messages": [msg(text)]}
    )
    assert status == 200 and answer["status"] == "processed", answer
    assert service.queue.dead_letters() == []
    assert_user_usable(api)


def test_event_time_a_model_proposes_out_of_range_is_dropped(service) -> None:
    """An extractor (an LLM) may answer any date: an impossible one is not stored."""
    handler = service.job_handlers["extract"]

    class WildExtractor:
        name = "wild"

        def extract(
            self, message: Message, context: list, neighbours: list[MemoryRecord], guidance: Any = None
        ) -> list:
            far = datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-14)))
            return [ExtractionOp(op="ADD", content="Ann went to the moon", kind=Kind.EVENT, event_time=far)]

    handler.extractor = WildExtractor()
    service.add("t", "ann", [Message(content="I went to the moon")], sync=True)
    records, _ = service.list("t", "ann")
    ltm = [r for r in records if r.tier == "ltm"]
    assert [r.content for r in ltm] == ["Ann went to the moon"]
    assert ltm[0].event_time is not None and ltm[0].event_time.year < 2200  # the message time instead


def test_json_nested_past_the_limit_is_422(api: Api) -> None:
    deep = "[" * 1200 + "]" * 1200
    status, answer = api("POST", "/v1/memories", body='{"user_id": "alice", "messages": ' + deep + "}")
    assert_error(status, answer, 422, "validation_error", "body")
    assert "32" in answer["error"]["message"]
    status, answer = api("POST", "/v1/memories/search", body="{" * 5000)
    assert_error(status, answer, 422, "validation_error", "body")
    assert_nothing_stored(api)


def test_brackets_inside_strings_are_not_nesting(api: Api) -> None:
    text = "[{" * 2000 + ' "quoted \\" [[[ " ' + "}]" * 2000
    status, answer = api("POST", "/v1/memories", body={"user_id": "alice", "messages": [msg(text)]})
    assert status == 202, answer


def _cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        _cursor("1|99999999999999999999999"),
        _cursor("1e400|1"),
        _cursor("nan|1") + ".AAAA",
        "not-base64!",
        ".",
        "x" * 400,
    ],
)
def test_forged_cursors_are_400(api: Api, cursor: str) -> None:
    api("POST", "/v1/memories", body={"user_id": "alice", "messages": [msg("one"), msg("two")]})
    status, answer = api("GET", "/v1/memories", query={"user_id": "alice", "cursor": cursor})
    assert_error(status, answer, 400, "bad_request", "cursor")


def test_cursors_page_through_and_belong_to_their_user(api: Api) -> None:
    for user in ("alice", "bob"):
        body = {"user_id": user, "messages": [msg(f"{user} turn {i}") for i in range(5)]}
        assert api("POST", "/v1/memories", body=body)[0] == 202
    seen, cursor = [], None
    while True:
        query = {"user_id": "alice", "limit": "2", **({"cursor": cursor} if cursor else {})}
        status, page = api("GET", "/v1/memories", query=query)
        assert status == 200
        seen += [m["content"] for m in page["memories"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        foreign = api("GET", "/v1/memories", query={"user_id": "bob", "cursor": cursor})
        assert foreign[0] == 400
    assert sorted(seen) == [f"alice turn {i}" for i in range(5)]


def test_time_bounds_unit() -> None:
    from memstack.domain.time.bounds import TimeBounds

    b = TimeBounds()
    assert b.contains(datetime(2023, 5, 8, tzinfo=UTC)) and b.contains(datetime(2023, 5, 8))
    assert not b.contains(datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14))))
    assert not b.contains(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))))
    assert b.keep(None) is None and b.keep(datetime(1800, 1, 1, tzinfo=UTC)) is None
