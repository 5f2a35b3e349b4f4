"""Query time phrases of every kind against the windows they mean (hand-computed).

Reference time: Sunday 15 October 2023, 14:00 UTC. Weeks run Monday to Sunday;
seasons are the northern meteorological ones (winter = December to February,
named by the year it starts in); a phrase that could be past or future means
the past ("in December" is December 2022). Vague amounts cover a span of units
ago ("a couple of" 1-3, "a few" 2-4, "several" 3-7). "early / mid / late" are
days 1-10 / 11-20 / 21-end of a month, and thirds (in months) of a year or
season. "around X" widens X by a quarter of its length on each side, at least
three days. Each case is (text, first day, last day); the negatives at the
end must give no window at all.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from memstack.domain.time.windows import find_windows, resolve_window

REF = datetime(2023, 10, 15, 14, 0, tzinfo=UTC)


def d(text: str) -> date:
    return date.fromisoformat(text)


CASES = [
    # --- days, relative
    ("what did she do yesterday", "2023-10-14", "2023-10-14"),
    ("anything new today?", "2023-10-15", "2023-10-15"),
    ("the day before yesterday at the market", "2023-10-13", "2023-10-13"),
    ("who is she meeting tonight", "2023-10-15", "2023-10-15"),
    ("what did we cook last night", "2023-10-14", "2023-10-14"),
    ("the email she sent this morning", "2023-10-15", "2023-10-15"),
    ("the run 3 days ago", "2023-10-12", "2023-10-12"),
    ("the run three days ago", "2023-10-12", "2023-10-12"),
    ("ten days ago at the dentist", "2023-10-05", "2023-10-05"),
    ("a day ago", "2023-10-14", "2023-10-14"),
    ("2 days ago", "2023-10-13", "2023-10-13"),
    ("a few days ago she called", "2023-10-11", "2023-10-13"),
    ("a couple of days ago", "2023-10-12", "2023-10-14"),
    ("several days ago", "2023-10-08", "2023-10-12"),
    # --- weeks
    ("what did I read last week", "2023-10-02", "2023-10-08"),
    ("the previous week at work", "2023-10-02", "2023-10-08"),
    ("this week's plans", "2023-10-09", "2023-10-15"),
    ("earlier this week", "2023-10-09", "2023-10-15"),
    ("next week", "2023-10-16", "2023-10-22"),
    ("a week ago", "2023-10-02", "2023-10-08"),
    ("two weeks ago", "2023-09-25", "2023-10-01"),
    ("3 weeks ago", "2023-09-18", "2023-09-24"),
    ("a fortnight ago", "2023-09-25", "2023-10-01"),
    ("a couple of weeks ago", "2023-09-18", "2023-10-08"),
    ("a few weeks ago", "2023-09-11", "2023-10-01"),
    ("in the past two weeks", "2023-10-01", "2023-10-15"),
    ("over the last 10 days", "2023-10-05", "2023-10-15"),
    ("in the last three months", "2023-07-15", "2023-10-15"),
    ("during the past year", "2022-10-15", "2023-10-15"),
    ("in the past week", "2023-10-08", "2023-10-15"),
    ("within the last few days", "2023-10-11", "2023-10-15"),
    # --- weekends
    ("last weekend", "2023-10-07", "2023-10-08"),
    ("this weekend", "2023-10-14", "2023-10-15"),
    ("next weekend", "2023-10-21", "2023-10-22"),
    ("two weekends ago", "2023-09-30", "2023-10-01"),
    ("the past weekend", "2023-10-07", "2023-10-08"),
    # --- weekdays
    ("last Monday", "2023-10-09", "2023-10-09"),
    ("on Friday we hiked", "2023-10-13", "2023-10-13"),
    ("this past Tuesday", "2023-10-10", "2023-10-10"),
    ("last Sunday", "2023-10-08", "2023-10-08"),
    ("on Saturday", "2023-10-14", "2023-10-14"),
    ("next Wednesday", "2023-10-18", "2023-10-18"),
    ("last Friday night", "2023-10-13", "2023-10-13"),
    # --- months
    ("last month", "2023-09-01", "2023-09-30"),
    ("this month", "2023-10-01", "2023-10-31"),
    ("earlier this month", "2023-10-01", "2023-10-15"),
    ("next month", "2023-11-01", "2023-11-30"),
    ("two months ago", "2023-08-01", "2023-08-31"),
    ("6 months ago", "2023-04-01", "2023-04-30"),
    ("a month ago", "2023-09-01", "2023-09-30"),
    ("a couple of months ago", "2023-07-01", "2023-09-30"),
    ("a few months ago", "2023-06-01", "2023-08-31"),
    ("several months ago", "2023-03-01", "2023-07-31"),
    ("in May", "2023-05-01", "2023-05-31"),
    ("in December", "2022-12-01", "2022-12-31"),
    ("in October", "2023-10-01", "2023-10-31"),
    ("during August", "2023-08-01", "2023-08-31"),
    ("since March", "2023-03-01", "2023-10-15"),
    ("in May 2023", "2023-05-01", "2023-05-31"),
    ("May 2023", "2023-05-01", "2023-05-31"),
    ("June of 2022", "2022-06-01", "2022-06-30"),
    ("in Sept 2021", "2021-09-01", "2021-09-30"),
    ("in Feb 2020", "2020-02-01", "2020-02-29"),
    ("back in January 2019", "2019-01-01", "2019-01-31"),
    ("early May 2023", "2023-05-01", "2023-05-10"),
    ("mid-June 2023", "2023-06-11", "2023-06-20"),
    ("late August 2022", "2022-08-21", "2022-08-31"),
    ("the end of July 2023", "2023-07-21", "2023-07-31"),
    ("the beginning of March 2022", "2022-03-01", "2022-03-10"),
    ("the middle of last month", "2023-09-11", "2023-09-20"),
    ("early last month", "2023-09-01", "2023-09-10"),
    ("late in May", "2023-05-21", "2023-05-31"),
    ("since last month", "2023-09-01", "2023-10-15"),
    # --- years
    ("last year", "2022-01-01", "2022-12-31"),
    ("this year", "2023-01-01", "2023-12-31"),
    ("earlier this year", "2023-01-01", "2023-10-15"),
    ("next year", "2024-01-01", "2024-12-31"),
    ("two years ago", "2021-01-01", "2021-12-31"),
    ("a year ago", "2022-01-01", "2022-12-31"),
    ("a couple of years ago", "2020-01-01", "2022-12-31"),
    ("a few years ago", "2019-01-01", "2021-12-31"),
    ("10 years ago", "2013-01-01", "2013-12-31"),
    ("in 2022", "2022-01-01", "2022-12-31"),
    ("during 2019", "2019-01-01", "2019-12-31"),
    ("since 2020", "2020-01-01", "2023-10-15"),
    ("in the year 2021", "2021-01-01", "2021-12-31"),
    ("back in 2018", "2018-01-01", "2018-12-31"),
    ("early 2023", "2023-01-01", "2023-04-30"),
    ("late 2022", "2022-09-01", "2022-12-31"),
    ("mid-2021", "2021-05-01", "2021-08-31"),
    ("the beginning of last year", "2022-01-01", "2022-04-30"),
    ("the end of this year", "2023-09-01", "2023-12-31"),
    # --- decades
    ("the 1990s", "1990-01-01", "1999-12-31"),
    ("the 90s", "1990-01-01", "1999-12-31"),
    ("music from the eighties", "1980-01-01", "1989-12-31"),
    ("in the 2010s", "2010-01-01", "2019-12-31"),
    ("the 1970's", "1970-01-01", "1979-12-31"),
    # --- seasons
    ("last summer", "2023-06-01", "2023-08-31"),
    ("this summer", "2023-06-01", "2023-08-31"),
    ("last winter", "2022-12-01", "2023-02-28"),
    ("this winter", "2023-12-01", "2024-02-29"),
    ("last spring", "2023-03-01", "2023-05-31"),
    ("last fall", "2022-09-01", "2022-11-30"),
    ("this autumn", "2023-09-01", "2023-11-30"),
    ("in the spring of 2023", "2023-03-01", "2023-05-31"),
    ("summer 2022", "2022-06-01", "2022-08-31"),
    ("the winter of 2021", "2021-12-01", "2022-02-28"),
    ("in autumn 2020", "2020-09-01", "2020-11-30"),
    ("during the summer", "2023-06-01", "2023-08-31"),
    ("in the spring", "2023-03-01", "2023-05-31"),
    ("next summer", "2024-06-01", "2024-08-31"),
    ("early summer 2023", "2023-06-01", "2023-06-30"),
    ("late last spring", "2023-05-01", "2023-05-31"),
    ("over the winter", "2022-12-01", "2023-02-28"),
    # --- holidays
    ("what did they do at Christmas", "2022-12-25", "2022-12-25"),
    ("around Christmas", "2022-12-22", "2022-12-28"),
    ("on Christmas Eve", "2022-12-24", "2022-12-24"),
    ("Christmas 2021", "2021-12-25", "2021-12-25"),
    ("on New Year's Eve", "2022-12-31", "2022-12-31"),
    ("on New Year's Day", "2023-01-01", "2023-01-01"),
    ("at Halloween", "2022-10-31", "2022-10-31"),
    ("on Valentine's Day", "2023-02-14", "2023-02-14"),
    ("at Thanksgiving", "2022-11-24", "2022-11-24"),
    ("over Easter", "2023-04-09", "2023-04-09"),
    ("on the Fourth of July", "2023-07-04", "2023-07-04"),
    ("on Independence Day", "2023-07-04", "2023-07-04"),
    ("last Christmas", "2022-12-25", "2022-12-25"),
    ("this Halloween", "2023-10-31", "2023-10-31"),
    ("next Easter", "2024-03-31", "2024-03-31"),
    ("Thanksgiving 2021", "2021-11-25", "2021-11-25"),
    # --- relative to another time
    ("the week before Christmas", "2022-12-18", "2022-12-24"),
    ("the day after Thanksgiving", "2022-11-25", "2022-11-25"),
    ("the week before 8 May 2023", "2023-05-01", "2023-05-07"),
    ("the day before 8 May 2023", "2023-05-07", "2023-05-07"),
    ("the month after June 2022", "2022-07-01", "2022-07-31"),
    ("two days before Christmas", "2022-12-23", "2022-12-23"),
    ("a week after Halloween", "2022-11-07", "2022-11-07"),
    ("three days after Easter", "2023-04-12", "2023-04-12"),
    ("around the week before Christmas", "2022-12-15", "2022-12-27"),
    ("in the second week of November 2022", "2022-11-08", "2022-11-14"),
    ("in the last week of August", "2023-08-25", "2023-08-31"),
    ("the first week of last month", "2023-09-01", "2023-09-07"),
    # --- explicit days
    ("on 8 May 2023", "2023-05-08", "2023-05-08"),
    ("May 8, 2023", "2023-05-08", "2023-05-08"),
    ("on 8th May 2023", "2023-05-08", "2023-05-08"),
    ("March 3rd", "2023-03-03", "2023-03-03"),
    ("on 3 March", "2023-03-03", "2023-03-03"),
    ("the 3rd of March 2021", "2021-03-03", "2021-03-03"),
    ("2023-05-08", "2023-05-08", "2023-05-08"),
    ("05/08/2023", "2023-05-08", "2023-05-08"),
    ("on 25 December 2022", "2022-12-25", "2022-12-25"),
    ("Dec. 25th", "2022-12-25", "2022-12-25"),
    ("on the 1st of October", "2023-10-01", "2023-10-01"),
    ("July 4th, 2020", "2020-07-04", "2020-07-04"),
    ("Monday, 8 May 2023", "2023-05-08", "2023-05-08"),
    ("on 29 February 2020", "2020-02-29", "2020-02-29"),
    # --- around
    ("around May 2023", "2023-04-24", "2023-06-07"),
    ("about two weeks ago", "2023-09-22", "2023-10-04"),
    ("roughly 3 days ago", "2023-10-09", "2023-10-15"),
    ("approximately a year ago", "2021-10-02", "2023-04-01"),
    ("around last summer", "2023-05-09", "2023-09-23"),
    # --- two phrases: the window covers both
    ("between May and July 2023", "2023-05-01", "2023-07-31"),
    ("last week or two weeks ago", "2023-09-25", "2023-10-08"),
]

NEGATIVES = [
    "When did Caroline go to the support group?",
    "What may Jon do next?",
    "Would Melanie rather visit a national park or a theme park?",
    "What is the second book she read?",
    "How many kids does Melanie have?",
    "She has 3 dogs and 2 cats.",
    "What did she say about the march for equality?",
    "Did he fall off his bike?",
    "Does she like spring rolls?",
    "Would she wear a summer dress?",
    "What was in her Christmas stocking?",
    "What is Jon's favourite day of the week?",
    "How long has she been painting?",
    "What did he do when she was in college?",
    "What happened in season 2 of the show?",
    "Who is the May queen?",
    "What is in room 2023?",
    "She ran 10 miles in 90 minutes.",
    "Version 2.0 shipped without the fix.",
    "What does she do on weekends?",
    "What does he do every Sunday?",
    "Would she enjoy a Halloween party?",
    "What did she say about her sister April?",
    "What is Melanie's favourite season?",
    "Does he work the night shift?",
    "What did they eat in the morning?",
    "What happened 10000 years ago?",
    "Which weekday does the club meet?",
    "Did she mention the year she was born?",
    "Is the summer house finished?",
]


@pytest.mark.parametrize(("text", "first", "last"), CASES, ids=[c[0] for c in CASES])
def test_phrase_resolves_to_its_window(text: str, first: str, last: str) -> None:
    window = resolve_window(text, REF)
    assert window is not None, f"no window for {text!r}"
    assert (window.start.date(), window.end.date()) == (d(first), d(last)), window.phrase
    # Windows are whole days, in the reference's zone.
    assert (window.start.hour, window.start.minute) == (0, 0) and window.end.hour == 23
    assert window.start.tzinfo == UTC


@pytest.mark.parametrize("text", NEGATIVES)
def test_no_window_where_no_date_is_named(text: str) -> None:
    assert resolve_window(text, REF) is None, find_windows(text, REF)


def test_the_set_is_large_and_varied() -> None:
    assert len(CASES) + len(NEGATIVES) >= 150
    assert len({c[0] for c in CASES}) == len(CASES)


def test_phrase_reports_the_words_it_read() -> None:
    window = resolve_window("what did Nate cook around the week before Christmas?", REF)
    assert window is not None and window.phrase == "around the week before Christmas"
