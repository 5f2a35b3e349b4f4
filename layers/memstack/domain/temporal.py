"""Time expressions in queries: from "last weekend" or "in May 2023" to an absolute window.

Rules cover the relative ranges a date library resolves to a single day or
not at all ("last week", "last summer", "earlier this month", "two years
ago"); ``dateparser`` parses the explicit dates the rules find ("8 May 2023",
"March 3rd", "yesterday"). Everything is resolved against a reference time
given by the caller, never the wall clock.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memstack.domain.calendar_words import CARDINAL_WORDS, MONTH_NUMBERS, SEASON_START_MONTHS, WEEKDAY_NAMES

_DAY = timedelta(days=1)

MONTHS = MONTH_NUMBERS
WEEKDAYS = {d: i for i, d in enumerate(WEEKDAY_NAMES)}
# Without the leading "a": "a few days ago" is matched from "few", and the phrase
# kept is "few days ago"; adding "a few" (as extraction.relative has) would change it.
NUMBER_WORDS = CARDINAL_WORDS | {"couple of": 2, "few": 3}
# (first month, length in months).
SEASONS = {name: (first, 3) for name, first in SEASON_START_MONTHS.items()}

_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
_NUM_RE = r"\d+|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))


@dataclass(frozen=True)
class TimeWindow:
    """A closed interval of time a query refers to (``start`` == ``end`` for an instant)."""

    start: datetime
    end: datetime
    phrase: str

    def distance_days(self, when: datetime) -> float:
        """Days from ``when`` to the window: 0 inside it, else to the nearest edge (naive = UTC)."""
        when = _aware(when)
        if when < self.start:
            return (self.start - when).total_seconds() / 86400
        if when > self.end:
            return (when - self.end).total_seconds() / 86400
        return 0.0

    def as_dict(self) -> dict[str, str]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "phrase": self.phrase}


def temporal_score(distance_days: float, window_days: float) -> float:
    """Stage 5's proximity score: ``max(0.1, 1 - distance / window_days)``."""
    return max(0.1, 1.0 - abs(distance_days) / window_days)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _day_start(value: datetime) -> datetime:
    return value.replace(hour=0, minute=0, second=0, microsecond=0)


def _day(value: datetime, phrase: str) -> TimeWindow:
    start = _day_start(value)
    return TimeWindow(start, start + _DAY - timedelta(microseconds=1), phrase)


def _span(start: datetime, end_exclusive: datetime, phrase: str) -> TimeWindow:
    return TimeWindow(start, end_exclusive - timedelta(microseconds=1), phrase)


def _month_start(year: int, month: int, tz: object) -> datetime:
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    return datetime(year, month, 1, tzinfo=tz)  # type: ignore[arg-type]


def _month(year: int, month: int, tz: object, phrase: str) -> TimeWindow:
    return _span(_month_start(year, month, tz), _month_start(year, month + 1, tz), phrase)


def _number(token: str) -> int:
    return int(token) if token.isdigit() else NUMBER_WORDS[token]


def _shift_months(ref: datetime, months: int) -> datetime:
    start = _month_start(ref.year, ref.month - months, ref.tzinfo)
    day = min(ref.day, 28)
    return start.replace(day=day, hour=ref.hour, minute=ref.minute)


# Each rule: (pattern, function(match, reference) -> TimeWindow). Order matters:
# the more specific phrases come first and a matched span is not reused.
def _last_week(m: re.Match[str], ref: datetime) -> TimeWindow:
    this_monday = _day_start(ref) - timedelta(days=ref.weekday())
    return _span(this_monday - 7 * _DAY, this_monday, m.group(0))


def _this_week(m: re.Match[str], ref: datetime) -> TimeWindow:
    this_monday = _day_start(ref) - timedelta(days=ref.weekday())
    return _span(this_monday, _day_start(ref) + _DAY, m.group(0))


def _last_weekend(m: re.Match[str], ref: datetime) -> TimeWindow:
    # The most recent Saturday-Sunday that has ended (or is under way on Sunday).
    days_since_saturday = (ref.weekday() - 5) % 7
    saturday = _day_start(ref) - timedelta(days=days_since_saturday)
    if days_since_saturday <= 1:  # it is the weekend now: "last weekend" is the one before
        saturday -= 7 * _DAY
    return _span(saturday, saturday + 2 * _DAY, m.group(0))


def _this_weekend(m: re.Match[str], ref: datetime) -> TimeWindow:
    days_to_saturday = (5 - ref.weekday()) % 7
    saturday = _day_start(ref) + timedelta(days=days_to_saturday)
    if ref.weekday() == 6:
        saturday -= _DAY
    return _span(saturday, saturday + 2 * _DAY, m.group(0))


def _last_month(m: re.Match[str], ref: datetime) -> TimeWindow:
    return _month(ref.year, ref.month - 1, ref.tzinfo, m.group(0))


def _this_month(m: re.Match[str], ref: datetime) -> TimeWindow:
    return _span(_month_start(ref.year, ref.month, ref.tzinfo), _day_start(ref) + _DAY, m.group(0))


def _last_year(m: re.Match[str], ref: datetime) -> TimeWindow:
    return _span(
        datetime(ref.year - 1, 1, 1, tzinfo=ref.tzinfo),
        datetime(ref.year, 1, 1, tzinfo=ref.tzinfo),
        m.group(0),
    )


def _this_year(m: re.Match[str], ref: datetime) -> TimeWindow:
    return _span(datetime(ref.year, 1, 1, tzinfo=ref.tzinfo), _day_start(ref) + _DAY, m.group(0))


def _season(m: re.Match[str], ref: datetime) -> TimeWindow:
    which, name = m.group(1).lower(), m.group(2).lower()
    first, length = SEASONS[name]
    if which == "this":
        # The season of the current year (winter belongs to the year it starts in).
        year = ref.year - 1 if first == 12 and ref.month <= 2 else ref.year
    else:
        # The most recent one that has started; "last" skips one still under way.
        year = ref.year if first <= ref.month else ref.year - 1
        if _month_start(year, first + length, ref.tzinfo) > ref:
            year -= 1
    start = _month_start(year, first, ref.tzinfo)
    return _span(start, _month_start(year, first + length, ref.tzinfo), m.group(0))


def _ago(m: re.Match[str], ref: datetime) -> TimeWindow:
    n, unit = _number(m.group(1).lower()), m.group(2).lower().rstrip("s")
    if unit == "day":
        return _day(ref - n * _DAY, m.group(0))
    if unit == "week":
        centre = ref - timedelta(weeks=n)
        return TimeWindow(_day_start(centre - 3 * _DAY), _day_start(centre + 4 * _DAY), m.group(0))
    if unit == "month":
        centre = _shift_months(ref, n)
        return _month(centre.year, centre.month, ref.tzinfo, m.group(0))
    return _span(  # years
        datetime(ref.year - n, 1, 1, tzinfo=ref.tzinfo),
        datetime(ref.year - n + 1, 1, 1, tzinfo=ref.tzinfo),
        m.group(0),
    )


def _past_n(m: re.Match[str], ref: datetime) -> TimeWindow:
    n, unit = _number(m.group(1).lower()), m.group(2).lower().rstrip("s")
    days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * n
    return _span(_day_start(ref) - timedelta(days=days), _day_start(ref) + _DAY, m.group(0))


def _month_year(m: re.Match[str], ref: datetime) -> TimeWindow:
    return _month(int(m.group(2)), MONTHS[m.group(1).lower()], ref.tzinfo, m.group(0))


def _bare_month(m: re.Match[str], ref: datetime) -> TimeWindow:
    month = MONTHS[m.group(1).lower()]
    year = ref.year if month <= ref.month else ref.year - 1
    return _month(year, month, ref.tzinfo, m.group(0))


def _year(m: re.Match[str], ref: datetime) -> TimeWindow:
    year = int(m.group(1))
    return _span(
        datetime(year, 1, 1, tzinfo=ref.tzinfo), datetime(year + 1, 1, 1, tzinfo=ref.tzinfo), m.group(0)
    )


_RULES: list[tuple[re.Pattern[str], object]] = [
    (re.compile(r"\b(?:last|past|previous) weekend\b", re.I), _last_weekend),
    (re.compile(r"\bthis weekend\b", re.I), _this_weekend),
    (re.compile(r"\b(?:last|previous) week\b", re.I), _last_week),
    (re.compile(r"\b(?:this|earlier this) week\b", re.I), _this_week),
    (re.compile(r"\b(?:last|previous) month\b", re.I), _last_month),
    (re.compile(r"\b(?:this|earlier this) month\b", re.I), _this_month),
    (re.compile(r"\b(?:last|previous) year\b", re.I), _last_year),
    (re.compile(r"\b(?:this|earlier this) year\b", re.I), _this_year),
    (re.compile(r"\b(last|this|past) (spring|summer|autumn|fall|winter)\b", re.I), _season),
    (re.compile(rf"\b({_NUM_RE}) (day|week|month|year)s? ago\b", re.I), _ago),
    (
        re.compile(rf"\b(?:in|over|during) the (?:last|past) ({_NUM_RE}) (day|week|month|year)s?\b", re.I),
        _past_n,
    ),
]
# Exact dates and single days go to dateparser; these patterns only find them.
_DATE_PHRASES = [
    re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTH_RE})\.?,? (?:(?:19|20)\d\d)?", re.I),
    re.compile(rf"\b(?:{_MONTH_RE})\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? (?:19|20)\d\d)?\b", re.I),
    re.compile(r"\b(?:19|20)\d\d-\d\d-\d\d\b"),
    re.compile(r"\b\d{1,2}/\d{1,2}/(?:19|20)?\d\d\b"),
    re.compile(r"\b(?:yesterday|today|the day before yesterday)\b", re.I),
    re.compile(
        r"\b(?:last|this past|on|this) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I
    ),
]
# Weaker, whole-period rules tried after exact dates (so "May 8" is a day, not a month).
_LATE_RULES: list[tuple[re.Pattern[str], object]] = [
    (re.compile(rf"\b(?:in |during )?({_MONTH_RE})\.?,? ((?:19|20)\d\d)\b", re.I), _month_year),
    # "may" alone is too often a verb: a bare month needs "in"/"during"/"since" before it.
    (re.compile(rf"\b(?:in|during|since|of) ({_MONTH_RE})\b(?! \d)", re.I), _bare_month),
    (re.compile(r"\b(?:in|during|since|of) ((?:19|20)\d\d)\b", re.I), _year),
]


def _parse_day(phrase: str, ref: datetime) -> datetime | None:
    import dateparser

    text = re.sub(r"^(?:on|this past|this) ", "", phrase.strip(), flags=re.I)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = dateparser.parse(
            text,
            languages=["en"],
            settings={
                "RELATIVE_BASE": ref.replace(tzinfo=None),
                "PREFER_DATES_FROM": "past",
                "RETURN_AS_TIMEZONE_AWARE": False,
                "PREFER_DAY_OF_MONTH": "first",
            },
        )
    if parsed is None:
        return None
    return parsed.replace(tzinfo=ref.tzinfo)


def find_windows(text: str, reference: datetime) -> list[TimeWindow]:
    """Every time window the text names, in the order the rules find them."""
    ref = _aware(reference)
    taken: list[tuple[int, int]] = []
    found: list[TimeWindow] = []

    def free(m: re.Match[str]) -> bool:
        return all(m.end() <= a or m.start() >= b for a, b in taken)

    def run(rules: list[tuple[re.Pattern[str], object]]) -> None:
        for pattern, rule in rules:
            for m in pattern.finditer(text):
                if free(m):
                    try:
                        window = rule(m, ref)  # type: ignore[operator]
                    except (ValueError, OverflowError):
                        continue  # "10000 years ago" is no representable window: the query has none
                    found.append(window)
                    taken.append((m.start(), m.end()))

    run(_RULES)
    for pattern in _DATE_PHRASES:
        for m in pattern.finditer(text):
            if not free(m):
                continue
            when = _parse_day(m.group(0), ref)
            if when is not None:
                found.append(_day(when, m.group(0).strip()))
                taken.append((m.start(), m.end()))
    run(_LATE_RULES)
    return found


def resolve_window(text: str, reference: datetime) -> TimeWindow | None:
    """The one window a query refers to: the union of every window it names."""
    windows = find_windows(text, reference)
    if not windows:
        return None
    return TimeWindow(
        min(w.start for w in windows), max(w.end for w in windows), "; ".join(w.phrase for w in windows)
    )
