"""The LoCoMo loader on a hand-written fixture: turns, dates, captions, evidence normalisation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from memstack.evaluation.locomo import (
    LocomoFormatError,
    load_locomo,
    normalise_evidence,
    parse_session_time,
)

FIXTURE = Path(__file__).parent.parent / "fixtures" / "locomo-tiny.json"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D3:5", ["D3:5"]),
        ("D:11:26", ["D11:26"]),
        ("D30:05", ["D30:5"]),
        ("D8:6; D9:17", ["D8:6", "D9:17"]),
        ("D", []),
        ("", []),
    ],
)
def test_malformed_evidence_ids_are_normalised(raw: str, expected: list[str]) -> None:
    assert normalise_evidence(raw) == expected


def test_session_dates_are_read_as_utc() -> None:
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_time("9:15 am on 3 March, 2024") == datetime(2024, 3, 3, 9, 15, tzinfo=UTC)
    with pytest.raises(LocomoFormatError):
        parse_session_time("not a date at all")


def test_fixture_turns_questions_and_evidence() -> None:
    [conv] = load_locomo(FIXTURE)
    assert conv.sample_id == "tiny-1" and conv.speakers == ("Ana", "Ben")
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2", "D2:3", "D2:4"]
    # Empty sessions (even one without a date) are skipped, not an error.
    assert sorted(conv.sessions) == [1, 2]
    assert conv.last_session_time == datetime(2024, 4, 20, 18, 40, tzinfo=UTC)
    cello = conv.turns[3]
    assert cello.timestamp == datetime(2024, 3, 3, 9, 15, tzinfo=UTC)
    assert "a photo of a cello leaning on a chair" in cello.content and cello.content.startswith("I started")
    by_text = {q.text: q for q in conv.questions}
    assert by_text["What is the name of Ana's dog and what does she like?"].evidence == ("D1:3", "D1:1")
    assert by_text["When did Ana run the charity race?"].evidence == ("D2:2",)
    assert by_text["Which instrument is Ben learning?"].evidence == ("D1:4", "D2:3")
    lisbon = by_text["Where is Ana going with her sister?"]
    assert lisbon.evidence == ("D2:4",) and lisbon.dropped_evidence == ("D9:9",)
    assert lisbon.category_name == "open-domain"
    # "D" names no turn: the question cannot be scored and is counted as unusable.
    assert "What is Ben's favourite film?" not in by_text and conv.unusable == 1
    assert len(conv.questions) == 6


def test_bad_files_give_clear_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(LocomoFormatError, match="not valid JSON"):
        load_locomo(broken)
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps([{"sample_id": "x", "conversation": {"speaker_a": "A"}}]))
    with pytest.raises(LocomoFormatError, match="x: missing 'speaker_b'"):
        load_locomo(missing)
    undated = tmp_path / "undated.json"
    undated.write_text(
        json.dumps(
            [
                {
                    "conversation": {
                        "speaker_a": "A",
                        "speaker_b": "B",
                        "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
                    }
                }
            ]
        )
    )
    with pytest.raises(LocomoFormatError, match="session_1 has no session_1_date_time"):
        load_locomo(undated)
