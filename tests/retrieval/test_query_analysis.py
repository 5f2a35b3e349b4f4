"""Stage 1: temporal windows and history intent, resolved against a fixed reference time."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from memstack.domain.query_analysis import analyse_query
from memstack.domain.time.windows import TimeWindow, resolve_window, temporal_score

REF = datetime(2023, 8, 20, 14, 0, tzinfo=UTC)  # a Sunday


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did I do last week", date(2023, 8, 7), date(2023, 8, 13)),
        ("plans from last weekend", date(2023, 8, 12), date(2023, 8, 13)),
        ("the concert in May 2023", date(2023, 5, 1), date(2023, 5, 31)),
        ("where did we go last summer", date(2022, 6, 1), date(2022, 8, 31)),
        ("the job I had two years ago", date(2021, 1, 1), date(2021, 12, 31)),
        ("what did I buy earlier this month", date(2023, 8, 1), date(2023, 8, 20)),
        ("the call on 8 May 2023", date(2023, 5, 8), date(2023, 5, 8)),
        ("what happened yesterday", date(2023, 8, 19), date(2023, 8, 19)),
        ("3 days ago at the gym", date(2023, 8, 17), date(2023, 8, 17)),
        ("last month's book club", date(2023, 7, 1), date(2023, 7, 31)),
        ("anything in the past two weeks", date(2023, 8, 6), date(2023, 8, 20)),
        ("the trip in 2022", date(2022, 1, 1), date(2022, 12, 31)),
    ],
)
def test_time_phrases_resolve_to_windows(query: str, start: date, end: date) -> None:
    window = resolve_window(query, REF)
    assert window is not None
    assert (window.start.date(), window.end.date()) == (start, end)


@pytest.mark.parametrize("query", ["I may go hiking", "what is her dog called", "When did Ana adopt Pixel?"])
def test_no_window_without_a_time_phrase(query: str) -> None:
    assert resolve_window(query, REF) is None


def test_when_questions_have_temporal_intent_but_no_window() -> None:
    analysis = analyse_query("When did Ana adopt Pixel?", REF)
    assert analysis.temporal_intent and analysis.window is None and not analysis.history_intent


@pytest.mark.parametrize(
    "query",
    [
        "where I used to live",
        "what was my job previously",
        "what did I say about the diet at first",
        "has my address changed",
        "which team did I support before?",
    ],
)
def test_history_intent(query: str) -> None:
    assert analyse_query(query, REF).history_intent


@pytest.mark.parametrize(
    "query", ["where do I live", "what is my job", "before the wedding, what did we book"]
)
def test_no_history_intent(query: str) -> None:
    assert not analyse_query(query, REF).history_intent


def test_temporal_score_matches_the_formula() -> None:
    window = TimeWindow(datetime(2023, 8, 7, tzinfo=UTC), datetime(2023, 8, 13, 23, 59, tzinfo=UTC), "x")
    assert window.distance_days(datetime(2023, 8, 10, tzinfo=UTC)) == 0.0
    assert window.distance_days(datetime(2023, 8, 2, tzinfo=UTC)) == pytest.approx(5.0)
    # max(0.1, 1 - |d| / window_days)
    assert temporal_score(0.0, 30) == 1.0
    assert temporal_score(6.0, 30) == pytest.approx(0.8)
    assert temporal_score(-15.0, 30) == pytest.approx(0.5)
    assert temporal_score(40.0, 30) == pytest.approx(0.1)


def test_a_memory_said_soon_after_the_window_is_not_far_from_it() -> None:
    window = TimeWindow(datetime(2023, 8, 7, tzinfo=UTC), datetime(2023, 8, 13, tzinfo=UTC), "last week")
    said = datetime(2023, 8, 17, tzinfo=UTC)  # "last week we went camping", said 4 days after
    assert window.distance_days(said) == pytest.approx(4.0)
    assert window.distance_days(said, report_lag_days=7) == 0.0
    assert window.distance_days(datetime(2023, 8, 23, tzinfo=UTC), report_lag_days=7) == pytest.approx(3.0)
    # Before the window there is no such lag: nothing is said before it happens.
    assert window.distance_days(datetime(2023, 8, 5, tzinfo=UTC), report_lag_days=7) == pytest.approx(2.0)


def test_naive_times_are_read_as_utc() -> None:
    window = TimeWindow(datetime(2023, 8, 7, tzinfo=UTC), datetime(2023, 8, 13, tzinfo=UTC), "x")
    assert window.distance_days(datetime(2023, 8, 14)) == pytest.approx(1.0)
