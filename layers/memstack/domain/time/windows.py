"""Time expressions in queries: from "a couple of months ago" or "around Christmas" to a window.

A query's time phrase is read in two steps.

1. **Core phrases.** What a date library covers goes to ``dateparser``, which
   answers a date *and its period* (day, week, month or year): explicit dates
   ("8 May 2023", "March 3rd", "05/08/2023"), months and years ("in May",
   "June of 2022", "in 2021"), relative units ("last week", "next month",
   "three years ago", "a fortnight ago") and days ("yesterday", "last
   Monday", "on Friday"). The window is that whole period. What it does not
   cover is a handful of rules: vague amounts ("a few weeks ago", "several
   months ago"), stretches up to now ("in the past two weeks"), weekends,
   seasons ("last summer", "in the spring of 2023"), holidays ("at
   Christmas", "on Thanksgiving") and decades ("the 1990s").
2. **Modifiers** in front of a core phrase change its window, innermost
   first: a part ("early", "mid-", "late", "the end of"), a shift ("the week
   before", "two days after"), "earlier" (up to now), "since" (from it to
   now) and "around" / "about" (wider).

Everything is resolved against the reference time the caller gives (never
the wall clock), preferring the past when a phrase could mean either
("in December" asked in October is last December). A phrase that names no
date ("when she was in college", "every Sunday", "a summer dress") gives no
window. Years are bounded to 1000-9999, so an absurd phrase is not a crash.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache

from memstack.domain.time.calendar_words import (
    CARDINAL_WORDS,
    MONTH_NUMBERS,
    SEASON_START_MONTHS,
    WEEKDAY_NAMES,
)

_DAY = timedelta(days=1)
_MIN_YEAR, _MAX_YEAR = 1000, 9999

_MONTH = "|".join(sorted(MONTH_NUMBERS, key=len, reverse=True))
_WEEKDAY = "|".join(WEEKDAY_NAMES)
_SEASON = "|".join(SEASON_START_MONTHS)
_YEAR = r"(?:1\d|20)\d\d"
_NUMBER = r"\d+|" + "|".join(sorted(CARDINAL_WORDS, key=len, reverse=True))
#: vague amounts: the span of units ago each one covers
VAGUE_AMOUNTS = {"a couple of": (1, 3), "a couple": (1, 3), "a few": (2, 4), "several": (3, 7)}
_VAGUE = "|".join(sorted(VAGUE_AMOUNTS, key=len, reverse=True))
_UNIT = r"day|week|fortnight|month|year"
DECADE_WORDS = {
    "twenties": 20,
    "thirties": 30,
    "forties": 40,
    "fifties": 50,
    "sixties": 60,
    "seventies": 70,
    "eighties": 80,
    "nineties": 90,
}


@dataclass(frozen=True)
class TimeWindow:
    """A closed interval of time a query refers to (``start`` == ``end`` for an instant)."""

    start: datetime
    end: datetime
    phrase: str

    def distance_days(self, when: datetime, report_lag_days: float = 0.0) -> float:
        """Days from ``when`` to the window: 0 inside it, else to the nearest edge (naive = UTC).

        ``report_lag_days``: a memory dated up to that long after the window is not
        far from it. What is said is said after it happens ("last week we went
        camping" is dated the day it was said), so a turn reporting an event of the
        window carries a date just after it.
        """
        when = _aware(when)
        if when < self.start:
            return (self.start - when).total_seconds() / 86400
        if when > self.end:
            return max(0.0, (when - self.end).total_seconds() / 86400 - report_lag_days)
        return 0.0

    def as_dict(self) -> dict[str, str]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "phrase": self.phrase}


def temporal_score(distance_days: float, window_days: float) -> float:
    """Stage 5's proximity score: ``max(0.1, 1 - distance / window_days)``."""
    return max(0.1, 1.0 - abs(distance_days) / window_days)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


# ----------------------------------------------------------------- calendar spans
@dataclass(frozen=True)
class _Span:
    """Whole days [first, last] and the period they make up ("day", "week", "month", ...)."""

    first: date
    last: date
    period: str

    def window(self, phrase: str, tz: tzinfo | None) -> TimeWindow:
        start = datetime(self.first.year, self.first.month, self.first.day, tzinfo=tz)
        end = datetime(self.last.year, self.last.month, self.last.day, tzinfo=tz) + _DAY
        return TimeWindow(start, end - timedelta(microseconds=1), phrase)


def _month_start(year: int, month: int) -> date:
    year += (month - 1) // 12
    return date(year, (month - 1) % 12 + 1, 1)


def _month_span(year: int, month: int, months: int = 1) -> _Span:
    first = _month_start(year, month)
    return _Span(first, _month_start(first.year, first.month + months) - _DAY, "month")


def _year_span(year: int, years: int = 1) -> _Span:
    return _Span(date(year, 1, 1), date(year + years - 1, 12, 31), "year")


def _week_span(day: date) -> _Span:
    monday = day - timedelta(days=day.weekday())
    return _Span(monday, monday + 6 * _DAY, "week")


def _shift(day: date, unit: str, n: int) -> date:
    """``day`` moved ``n`` units (negative: back); months keep the day where the month has it."""
    if unit == "day":
        return day + timedelta(days=n)
    if unit in ("week", "weekend"):
        return day + timedelta(weeks=n)
    if unit == "fortnight":
        return day + timedelta(weeks=2 * n)
    months = n * (12 if unit == "year" else 1)
    first = _month_start(day.year, day.month + months)
    last_day = (_month_start(first.year, first.month + 1) - _DAY).day
    return first.replace(day=min(day.day, last_day))


def _unit_span(day: date, unit: str) -> _Span:
    if unit == "day":
        return _Span(day, day, "day")
    if unit in ("week", "fortnight"):
        return _week_span(day)
    if unit == "weekend":
        saturday = day + timedelta(days=5 - day.weekday())
        return _Span(saturday, saturday + _DAY, "weekend")
    if unit == "month":
        return _month_span(day.year, day.month)
    return _year_span(day.year)


def _season_span(name: str, year: int) -> _Span:
    months = _month_span(year, SEASON_START_MONTHS[name], 3)
    return _Span(months.first, months.last, "season")


def _season_of(name: str, which: str, today: date) -> _Span:
    """The season a phrase means: "this" (of this year), "next", or the latest that has started/ended."""
    start_month = SEASON_START_MONTHS[name]
    if which == "this":
        # Winter belongs to the year it starts in, so "this winter" in January is the one under way.
        year = today.year - 1 if start_month == 12 and today.month <= 2 else today.year
        return _season_span(name, year)
    started = today.year if start_month <= today.month else today.year - 1
    if which == "next":
        return _season_span(name, started + 1)
    if which == "last" and _season_span(name, started).last >= today:
        started -= 1  # "last summer" while it is summer: the one before
    return _season_span(name, started)


def _holiday(name: str, year: int) -> date:
    fixed = {
        "christmas eve": (12, 24),
        "christmas": (12, 25),
        "boxing day": (12, 26),
        "new year's eve": (12, 31),
        "new years eve": (12, 31),
        "new year's day": (1, 1),
        "new year's": (1, 1),
        "new year": (1, 1),
        "valentine's day": (2, 14),
        "valentines day": (2, 14),
        "halloween": (10, 31),
        "independence day": (7, 4),
        "the fourth of july": (7, 4),
        "the 4th of july": (7, 4),
    }
    if name in fixed:
        return date(year, *fixed[name])
    if name == "thanksgiving":  # the fourth Thursday of November (US)
        first = date(year, 11, 1)
        return first + timedelta(days=(3 - first.weekday()) % 7 + 21)
    from dateutil.easter import easter  # a dateparser dependency

    return easter(year)


_HOLIDAYS = (
    r"christmas eve|christmas|boxing day|new years? eve|new year's eve|new year's day|new year's|new year"
    r"|valentines? day|valentine's day|halloween|independence day|the (?:fourth|4th) of july"
    r"|thanksgiving|easter"
)


# ----------------------------------------------------------------- core phrases
@dataclass(frozen=True)
class _Core:
    pattern: re.Pattern[str]
    resolve: Callable[[re.Match[str], date], _Span | None]


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


@lru_cache(maxsize=64)
def _parser(today: date) -> object:
    """One ``DateDataParser`` per reference day (building one costs more than parsing with it)."""
    from dateparser.date import DateDataParser

    return DateDataParser(
        languages=["en"],
        settings={
            "RELATIVE_BASE": datetime(today.year, today.month, today.day, 12),
            "PREFER_DATES_FROM": "past",
            "PREFER_DAY_OF_MONTH": "first",
            "RETURN_TIME_AS_PERIOD": True,
        },
    )


def _dateparser_span(text: str, today: date) -> _Span | None:
    """A date and its period from dateparser, as the whole period's span."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = _parser(today).get_date_data(text)  # type: ignore[attr-defined]
    when, period = data.date_obj, data.period
    if when is None or not _MIN_YEAR <= when.year <= _MAX_YEAR:
        return None
    return _unit_span(when.date(), {"time": "day"}.get(str(period), str(period)))


def _library(m: re.Match[str], today: date) -> _Span | None:
    text = m.group(0).lower()
    # What dateparser does not read, said the way it does.
    text = re.sub(r"^(?:on|in|during|since|by|until|from|between|back in|of|this past)\s+", "", text)
    text = re.sub(r"^the year\s+", "", text)
    text = re.sub(r"\b(?:last night|tonight)\b", lambda w: "yesterday" if "last" in w[0] else "today", text)
    text = re.sub(r"\bthis (?:morning|afternoon|evening)\b", "today", text)
    text = re.sub(r"\b(?:morning|afternoon|evening|night)$", "", text).strip()
    text = re.sub(r"\b(?:previous|past)\s+", "last ", text)
    text = re.sub(r"\b(\w+) of ((?:1\d|20)\d\d)$", r"\1 \2", text)  # "June of 2022"
    return _dateparser_span(text, today)


def _vague_ago(m: re.Match[str], today: date) -> _Span | None:
    low, high = VAGUE_AMOUNTS[m["amount"].lower()]
    unit = m["unit"].lower()
    return _Span(
        _unit_span(_shift(today, unit, -high), unit).first,
        _unit_span(_shift(today, unit, -low), unit).last,
        unit,
    )


def _number(token: str) -> int:
    token = token.lower()
    return int(token) if token.isdigit() else CARDINAL_WORDS[token]


def _up_to_now(m: re.Match[str], today: date) -> _Span | None:
    amount = (m["n"] or "1").lower()
    vague = VAGUE_AMOUNTS.get(amount) or VAGUE_AMOUNTS.get(f"a {amount}")
    n = vague[1] if vague else _number(amount)  # "the last few days": as far back as "a few" goes
    return _Span(_shift(today, m["unit"].lower(), -n), today, "range")


def _weekend(m: re.Match[str], today: date) -> _Span | None:
    # The weekend of this week: under way on Saturday and Sunday, still to come on a weekday.
    saturday = today + timedelta(days=5 - today.weekday())
    which = (m["which"] or "").lower()
    if which == "next":
        saturday += timedelta(weeks=1)
    elif which != "this":  # "last weekend", "two weekends ago": weekends before this one
        saturday -= timedelta(weeks=_number(m["n"]) if m["n"] else 1)
    return _Span(saturday, saturday + _DAY, "weekend")


def _season(m: re.Match[str], today: date) -> _Span | None:
    if m["season2"]:  # "summer 2022"
        return _season_span(m["season2"].lower(), int(m["year2"]))
    name = m["season"].lower()
    if m["year"]:
        return _season_span(name, int(m["year"]))
    return _season_of(name, (m["which"] or "").lower(), today)


def _holiday_core(m: re.Match[str], today: date) -> _Span | None:
    if m["holiday2"]:  # "Christmas 2021"
        day = _holiday(re.sub(r"\s+", " ", m["holiday2"].lower()), int(m["year2"]))
        return _Span(day, day, "day")
    name = re.sub(r"\s+", " ", m["holiday"].lower())
    if m["year"]:
        day = _holiday(name, int(m["year"]))
    else:
        which = (m["which"] or "").lower()
        day = _holiday(name, today.year)
        if which == "next":
            day = day if day > today else _holiday(name, today.year + 1)
        elif which != "this" and day > today:
            day = _holiday(name, today.year - 1)  # the most recent one
    return _Span(day, day, "day")


def _decade(m: re.Match[str], today: date) -> _Span | None:
    if m["word"]:
        start = 1900 + DECADE_WORDS[m["word"].lower()]
    else:
        digits = m["digits"]
        start = int(digits) if len(digits) == 4 else 1900 + int(digits)
    return _year_span(start, 10)


_CORES = [
    _Core(
        _rx(rf"\b(?P<amount>{_VAGUE})\s+(?P<unit>{_UNIT})s?\s+ago\b"),
        _vague_ago,
    ),
    _Core(
        _rx(
            rf"\b(?:(?:in|over|during|within)\s+)?the\s+(?:last|past)\s+"
            rf"(?:(?P<n>{_NUMBER}|{_VAGUE}|few|couple of)\s+)?(?P<unit>day|week|month|year)s?\b(?!\s+of\b)"
        ),
        _up_to_now,
    ),
    _Core(
        _rx(rf"\b(?:(?P<which>last|this|next|past|previous)\s+weekend|(?P<n>{_NUMBER})\s+weekends?\s+ago)\b"),
        _weekend,
    ),
    _Core(
        _rx(
            rf"\b(?:(?P<which>last|this|next|past)\s+|(?:in|during|over|through)\s+(?:the\s+)?)"
            rf"(?P<season>{_SEASON})(?:\s+(?:of\s+)?(?P<year>{_YEAR}))?\b"
            rf"|\b(?:the\s+)?(?P<season2>{_SEASON})\s+(?:of\s+)?(?P<year2>{_YEAR})\b"
        ),
        _season,
    ),
    _Core(
        _rx(
            rf"\b(?:(?P<which>last|this|next)\s+|(?:at|on|around|over|during|for|before|after|since|by)\s+)"
            rf"(?P<holiday>{_HOLIDAYS})(?:\s+(?P<year>{_YEAR}))?\b"
            rf"|\b(?P<holiday2>{_HOLIDAYS})\s+(?P<year2>{_YEAR})\b"
        ),
        _holiday_core,
    ),
    _Core(
        _rx(r"\bthe\s+(?:(?P<digits>(?:1\d|20)\d0|\d0)'?s|(?P<word>" + "|".join(DECADE_WORDS) + r"))\b"),
        _decade,
    ),
    # What dateparser reads: explicit days, months and years, relative units and days.
    _Core(
        _rx(
            rf"\b(?:(?:{_WEEKDAY}),?\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH})\.?(?:,?\s+{_YEAR})?\b"
            rf"|\b(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)\s+of\s+(?:{_MONTH})\.?(?:,?\s+{_YEAR})?\b"
            rf"|\b(?:{_MONTH})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+{_YEAR}\b)?"
            rf"|\b{_YEAR}-\d\d-\d\d\b|\b\d{{1,2}}/\d{{1,2}}/(?:{_YEAR}|\d\d)\b"
        ),
        _library,
    ),
    _Core(
        _rx(
            rf"\b(?:(?:in|during|since|by|until|from|between|of)\s+)?(?:{_MONTH})\.?,?\s+(?:of\s+)?{_YEAR}\b"
            rf"|\b(?:in|during|since|by|until|from|between|of)\s+(?:{_MONTH})\b"
            rf"|\b(?:in|during|since|by|until|from|back in|of)\s+(?:the\s+year\s+)?{_YEAR}\b"
            rf"|(?:(?<=early )|(?<=late )|(?<=mid-)|(?<=mid ))(?:{_YEAR})\b"
        ),
        _library,
    ),
    _Core(
        _rx(
            rf"\b(?:{_NUMBER})\s+(?:{_UNIT})s?\s+ago\b"
            rf"|\b(?:last|this|next|previous|this past)\s+"
            rf"(?:week|month|year|(?:{_WEEKDAY})(?:\s+night)?)\b(?!\s+of\b)"
            rf"|\bon\s+(?:{_WEEKDAY})\b(?!s)"
            r"|\b(?:the day before yesterday|yesterday|today|tonight|last night)\b"
            r"|\bthis (?:morning|afternoon|evening)\b"
        ),
        _library,
    ),
]


# ----------------------------------------------------------------- modifiers
def _part(span: _Span, which: str) -> _Span:
    """The early / middle / late third of a span: days 1-10 / 11-20 / 21- of a month, months of a year."""
    which = {"beginning": "early", "start": "early", "middle": "mid", "end": "late"}.get(which, which)
    index = {"early": 0, "mid": 1, "late": 2}[which]
    if span.period == "month":
        first = span.first + timedelta(days=10 * index)
        last = span.first + timedelta(days=10 * index + 9) if index < 2 else span.last
        return _Span(first, last, "part")
    if span.period in ("year", "season") or (span.last - span.first).days > 80:
        months = ((span.last.year - span.first.year) * 12 + span.last.month - span.first.month + 1) // 3
        first = _month_start(span.first.year, span.first.month + months * index)
        return _Span(first, _month_start(first.year, first.month + months) - _DAY, "part")
    days = (span.last - span.first).days + 1
    return _Span(
        span.first + timedelta(days=days * index // 3),
        span.first + timedelta(days=days * (index + 1) // 3 - 1),
        "part",
    )


def _nth_week(span: _Span, nth: str) -> _Span:
    """ "the second week of November": days 8-14 of it ("the last week": its last seven days)."""
    if nth == "last":
        return _Span(span.last - 6 * _DAY, span.last, "week")
    index = ("first", "second", "third", "fourth").index(nth)
    first = span.first + timedelta(weeks=index)
    return _Span(first, min(first + 6 * _DAY, span.last), "week")


def _around(span: _Span) -> _Span:
    """Wider by a quarter of its length on each side, and by at least three days."""
    pad = timedelta(days=max(3, ((span.last - span.first).days + 1) // 4))
    return _Span(span.first - pad, span.last + pad, span.period)


def _relative_to(span: _Span, amount: str | None, unit: str, direction: str) -> _Span:
    """ "the week before X" (the unit next to X), "two days after X" (X moved by that much)."""
    unit = unit.lower()
    sign = -1 if direction == "before" else 1
    if amount is None or amount.lower() == "the":
        edge = span.first - _DAY if sign < 0 else span.last + _DAY
        if unit in ("month", "year"):  # the calendar month or year next to X
            return _unit_span(edge, unit)
        # days and weeks: that many days right up against X
        far = _shift(edge, unit, sign) - sign * _DAY
        return _Span(min(edge, far), max(edge, far), unit)
    n = _number(amount) * sign
    return _Span(_shift(span.first, unit, n), _shift(span.last, unit, n), span.period)


_MODIFIERS: list[tuple[re.Pattern[str], Callable[[_Span, re.Match[str], date], _Span]]] = [
    (
        _rx(
            r"\b(?:(?P<which>early|mid|late)[\s-]*|the\s+(?P<which2>beginning|start|middle|end)(?:\s+of)?\s+)$"
        ),
        lambda s, m, today: _part(s, (m["which"] or m["which2"]).lower()),
    ),
    (
        _rx(
            rf"\b(?P<amount>the|an?|{_NUMBER})\s+(?P<unit>day|week|month|year)s?\s+(?P<dir>before|after)\s+$"
        ),
        lambda s, m, today: _relative_to(s, m["amount"], m["unit"], m["dir"].lower()),
    ),
    (
        _rx(r"\bthe\s+(?P<nth>first|second|third|fourth|last)\s+week(?:\s+of)?\s+$"),
        lambda s, m, today: _nth_week(s, m["nth"].lower()),
    ),
    (_rx(r"\bearlier\s+$"), lambda s, m, today: _Span(s.first, min(s.last, today), s.period)),
    (_rx(r"\bsince\s+$"), lambda s, m, today: _Span(s.first, max(s.last, today), s.period)),
    (_rx(r"\b(?:around|about|roughly|approximately|circa)\s+$"), lambda s, m, today: _around(s)),
]


#: a core phrase's own first word that is also a modifier ("since March", "around Christmas")
_LEAD = _rx(r"^(?:since|around|about|roughly|before|after)\s+")


def _modify(text: str, start: int, span: _Span, today: date) -> tuple[int, _Span]:
    """Apply every modifier written just before ``text[start:]``, innermost first."""
    changed = True
    while changed:
        changed = False
        head = text[:start]
        for pattern, apply in _MODIFIERS:
            m = pattern.search(head)
            if m:
                span = apply(span, m, today)
                start = m.start()
                changed = True
                break
    return start, span


# ----------------------------------------------------------------- the API
def find_windows(text: str, reference: datetime) -> list[TimeWindow]:
    """Every time window the text names, in the order the core phrases find them."""
    ref = _aware(reference)
    today = ref.date()
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, TimeWindow]] = []
    for core in _CORES:
        for m in core.pattern.finditer(text):
            if any(m.start() < b and a < m.end() for a, b in taken):
                continue
            try:
                span = core.resolve(m, today)
                if span is None:
                    continue
                lead = _LEAD.match(m.group(0))
                start, span = _modify(text, m.start() + (lead.end() if lead else 0), span, today)
                start = min(start, m.start())
                window = span.window(" ".join(text[start : m.end()].split()), ref.tzinfo)
            except (ValueError, OverflowError, KeyError):
                continue  # a date that does not exist ("31 February") or out of range
            taken.append((start, m.end()))
            found.append((start, window))
    return [w for _, w in sorted(found, key=lambda f: f[0])]


def resolve_window(text: str, reference: datetime) -> TimeWindow | None:
    """The one window a query refers to: the union of every window it names."""
    windows = find_windows(text, reference)
    if not windows:
        return None
    return TimeWindow(
        min(w.start for w in windows), max(w.end for w in windows), "; ".join(w.phrase for w in windows)
    )
