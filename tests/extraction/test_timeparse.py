"""Message timestamps in every accepted form become aware datetimes; bad ones are clear errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from memstack.domain.time.parse import parse_timestamp
from memstack.models import Message
from pydantic import ValidationError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08T15:56:00+02:00", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (1683554160, datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (1683554160000, datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("1683554160", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("May 8, 2023 1:56 PM", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("8 May 2023", datetime(2023, 5, 8, tzinfo=UTC)),
    ],
)
def test_accepted_forms(value: object, expected: datetime) -> None:
    parsed = parse_timestamp(value, "UTC")
    assert parsed == expected
    assert parsed.tzinfo is not None


def test_naive_times_are_read_in_the_configured_zone() -> None:
    tokyo = parse_timestamp("2023-05-08 13:56", "Asia/Tokyo")
    assert tokyo.utcoffset() == timedelta(hours=9)
    assert tokyo.astimezone(UTC) == datetime(2023, 5, 8, 4, 56, tzinfo=UTC)
    human = parse_timestamp("1:56 pm on 8 May, 2023", "Asia/Tokyo")
    assert human.astimezone(UTC) == datetime(2023, 5, 8, 4, 56, tzinfo=UTC)


def test_message_validator_parses_human_forms_and_uses_context_zone() -> None:
    msg = Message(content="hi", timestamp="1:56 pm on 8 May, 2023")  # type: ignore[arg-type]
    assert msg.timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    paris = Message.model_validate(
        {"content": "hi", "timestamp": "2023-05-08 13:56"}, context={"timezone": "Europe/Paris"}
    )
    assert paris.timestamp is not None
    assert paris.timestamp.astimezone(UTC) == datetime(2023, 5, 8, 11, 56, tzinfo=UTC)
    assert Message(content="hi").timestamp is None


def test_a_service_in_another_zone_sets_no_process_wide_default(tmp_path: Path) -> None:
    from memstack.factory import build_service
    from memstack.settings import load_settings

    service = build_service(load_settings(data_dir=tmp_path, embedder="hashing", timezone="America/New_York"))
    try:
        # The zone reaches only what is given it (the API, the CLI, the model providers): a Message
        # read without one is in UTC, whatever service this process built before.
        msg = Message(content="hi", timestamp="2023-01-10 09:00")  # type: ignore[arg-type]
        assert msg.timestamp == datetime(2023, 1, 10, 9, 0, tzinfo=UTC)
    finally:
        service.close()


@pytest.mark.parametrize("provider", ["bedrock", "openai"])
def test_a_models_naive_event_time_is_read_in_the_configured_zone(provider: str) -> None:
    from memstack.adapters.llm.providers.bedrock_extractor import BedrockExtractor
    from memstack.adapters.llm.providers.openai_provider import openai_extractor
    from memstack.adapters.llm.providers.structured import validate_operations
    from memstack.adapters.llm.providers.tools import ToolAnswer
    from memstack.settings import load_settings

    settings = load_settings(
        timezone="Asia/Tokyo", openai_base_url="http://127.0.0.1:9", aws_region="us-east-1"
    )
    extractor = (
        BedrockExtractor.from_settings(settings, client=object())
        if provider == "bedrock"
        else (openai_extractor(settings, client=object()))
    )
    assert extractor.timezone == "Asia/Tokyo"
    answer = ToolAnswer(
        input={
            "operations": [{"op": "ADD", "content": "the user flies out", "event_time": "2023-05-08 13:56"}]
        },
        usage={},
    )
    (op,) = validate_operations(answer, Message(content="I fly out on Monday"), set(), extractor.timezone)
    assert op.event_time is not None
    assert op.event_time.astimezone(UTC) == datetime(2023, 5, 8, 4, 56, tzinfo=UTC)


@pytest.mark.parametrize("value", ["not a time at all, sorry", "", True, [2023]])
def test_bad_timestamps_are_validation_errors(value: object) -> None:
    with pytest.raises(ValidationError) as info:
        Message(content="hi", timestamp=value)  # type: ignore[arg-type]
    assert info.value.errors()[0]["loc"] == ("timestamp",)


def test_unknown_timezone_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown timezone"):
        parse_timestamp("2023-05-08 13:56", "Mars/Olympus")
