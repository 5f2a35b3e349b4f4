"""Relative dates resolve against the message time, never the wall clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from memstack.domain.time.relative import resolve_relative_dates

# A Monday in 2023: nothing below may depend on today's date.
SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "rewritten", "event"),
    [
        (
            "I went to the support group yesterday.",
            "I went to the support group on 7 May 2023.",
            datetime(2023, 5, 7, tzinfo=UTC),
        ),
        (
            "Yesterday I went to the LGBTQ support group.",
            "On 7 May 2023 I went",
            datetime(2023, 5, 7, tzinfo=UTC),
        ),
        ("We went hiking last Saturday.", "We went hiking on 6 May 2023.", datetime(2023, 5, 6, tzinfo=UTC)),
        ("We're moving next month.", "We're moving in June 2023.", datetime(2023, 6, 1, tzinfo=UTC)),
        (
            "I adopted a cat two weeks ago.",
            "I adopted a cat on 24 April 2023.",
            datetime(2023, 4, 24, tzinfo=UTC),
        ),
        ("We are hiking on Saturday.", "We are hiking on 13 May 2023.", datetime(2023, 5, 13, tzinfo=UTC)),
        ("I ran a 5k on Saturday.", "I ran a 5k on 6 May 2023.", datetime(2023, 5, 6, tzinfo=UTC)),
        ("I fly out in 3 days.", "I fly out on 11 May 2023.", datetime(2023, 5, 11, tzinfo=UTC)),
        ("She is visiting in July.", "She is visiting in July 2023.", datetime(2023, 7, 1, tzinfo=UTC)),
        ("I started the job last week.", "in the week of 1 May 2023", datetime(2023, 5, 1, tzinfo=UTC)),
        ("I have felt tired since yesterday.", "since 7 May 2023", datetime(2023, 5, 7, tzinfo=UTC)),
        ("The trip is booked for February.", "booked for February 2024", datetime(2024, 2, 1, tzinfo=UTC)),
        ("I graduated three years ago.", "I graduated in 2020.", datetime(2020, 1, 1, tzinfo=UTC)),
        ("We had pizza last night.", "We had pizza on 7 May 2023.", datetime(2023, 5, 7, tzinfo=UTC)),
    ],
)
def test_resolved_against_message_time(text: str, rewritten: str, event: datetime) -> None:
    result = resolve_relative_dates(text, SAID)
    assert rewritten in result.text
    assert result.event_time == event


def test_the_same_words_said_on_another_day_resolve_differently() -> None:
    later = resolve_relative_dates(
        "I went to the support group yesterday.", datetime(2024, 1, 1, 9, tzinfo=UTC)
    )
    assert later.text == "I went to the support group on 31 December 2023."


def test_explicit_dates_are_kept_and_give_the_event_time() -> None:
    result = resolve_relative_dates("We got married on 8 June 2019.", SAID)
    assert result.text == "We got married on 8 June 2019."
    assert result.event_time == datetime(2019, 6, 8, tzinfo=UTC)


def test_text_without_dates_is_unchanged() -> None:
    result = resolve_relative_dates("I may go to the museum, I like art.", SAID)
    assert result.text == "I may go to the museum, I like art."
    assert result.event_time is None


# Tuesday 14 October 2025.
OCTOBER = datetime(2025, 10, 14, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "rewritten"),
    [
        # Meant or hoped for: ahead.
        ("We need to replace it in March.", "in March 2026"),
        ("I hope to hand in my thesis in February.", "in February 2026"),
        # A limit with no tense: ahead.
        ("The lease ends by June.", "by June 2026"),
        # No tense: the nearer of the two.
        ("The office closes in March.", "in March 2026"),
        ("Our anniversary is in August.", "in August 2025"),
        # Told as done: behind.
        ("I moved here in March.", "in March 2025"),
        ("I have lived here since March.", "since March 2025"),
    ],
)
def test_a_month_without_a_year_is_the_one_its_sentence_means(text: str, rewritten: str) -> None:
    assert rewritten in resolve_relative_dates(text, OCTOBER).text


def test_each_sentence_has_its_own_tense() -> None:
    result = resolve_relative_dates("I moved to Ghent in April. We're repainting the hall in May.", OCTOBER)
    assert result.text == "I moved to Ghent in April 2025. We're repainting the hall in May 2026."
    assert result.event_time == datetime(2025, 4, 1, tzinfo=UTC)  # the first date said


def test_a_plural_weekday_is_every_week_not_a_date() -> None:
    assert resolve_relative_dates("I go climbing on Mondays.", OCTOBER).text == "I go climbing on Mondays."


# Sunday 20 April 2025.
APRIL = datetime(2025, 4, 20, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "rewritten", "event"),
    [
        # "later" counts from the date said before it, in its sentence or the one before.
        (
            "We got the keys on 3 March and moved in two weeks later.",
            "moved in on 17 March 2025.",
            datetime(2025, 3, 3, tzinfo=UTC),
        ),
        (
            "I joined Zalando in January 2023. A year later I was promoted to team lead.",
            "In 2024 I was promoted",
            datetime(2023, 1, 1, tzinfo=UTC),
        ),
        (
            "I hope to hand in my thesis in June, the viva would be a month later.",
            "the viva would be in July 2025.",
            datetime(2025, 6, 1, tzinfo=UTC),
        ),
    ],
)
def test_later_counts_from_the_date_it_follows(text: str, rewritten: str, event: datetime) -> None:
    result = resolve_relative_dates(text, APRIL)
    assert rewritten in result.text
    assert result.event_time == event


def test_later_with_no_date_before_it_is_left_as_said() -> None:
    result = resolve_relative_dates("The movers came two weeks later.", APRIL)
    assert result.text == "The movers came two weeks later."
    assert result.event_time is None


def test_the_event_time_is_the_first_date_said_whatever_its_form() -> None:
    result = resolve_relative_dates("My surgery is on 10 June, and the follow-up is on 22 July 2025.", APRIL)
    assert result.event_time == datetime(2025, 6, 10, tzinfo=UTC)
    moved = resolve_relative_dates("I moved to Berlin in May 2024 and started at SAP on 1 June 2024.", APRIL)
    assert moved.event_time == datetime(2024, 5, 1, tzinfo=UTC)


def test_a_year_alone_is_the_event_time_of_a_text_without_a_finer_date() -> None:
    assert resolve_relative_dates("In 2024 I was promoted.", APRIL).event_time == datetime(
        2024, 1, 1, tzinfo=UTC
    )
    assert resolve_relative_dates("I have 2024 photos.", APRIL).event_time is None


def test_the_end_or_start_of_a_month_is_that_month() -> None:
    result = resolve_relative_dates("The lease ends at the end of June.", APRIL)
    assert result.text == "The lease ends at the end of June 2025."
    assert result.event_time == datetime(2025, 6, 1, tzinfo=UTC)
