"""Relative dates in a message, resolved against the message's own time (never the wall clock).

"I got promoted yesterday", said at 1:56 pm on 8 May 2023, becomes "I got
promoted on 7 May 2023" with ``event_time`` 7 May 2023. A memory read a year
later still says when it happened. Explicit dates ("8 May 2023") are not
rewritten but still give the event time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo

from memstack.domain.time.calendar_words import (
    CARDINAL_WORDS,
    MONTH_NAMES,
    MONTH_NUMBERS,
    SEASON_START_MONTHS,
    WEEKDAY_NAMES,
)

WEEKDAYS = WEEKDAY_NAMES
MONTHS = MONTH_NAMES
SEASONS = SEASON_START_MONTHS
# The phrases rewritten here include the article ("a few days ago"), and "several".
NUMBER_WORDS = CARDINAL_WORDS | {"a couple of": 2, "a few": 3, "several": 3}
_NUM = (
    r"(?P<n>\d+|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_WD = "|".join(WEEKDAYS)
_MO = "|".join(MONTHS)
_PREP = r"(?P<prep>\b(?:since|until|till|by|from|before|after|on|in|during|for)\s+)?"
# Future if the sentence is about what will happen: a modal, "going to", or a
# present progressive ("we're hiking on Saturday").
_FUTURE = re.compile(
    r"\b(?:will|shall|going to|gonna|plan(?:ning)? to|upcoming|soon)\b|'ll\b"
    r"|\b(?:booked|scheduled|planned|due)\s+for\b"
    r"|\b(?:am|is|are|'m|'re|'s)\s+(?:\w+ly\s+)?\w+ing\b",
    re.IGNORECASE,
)


# What is meant or hoped for is ahead too: "we need to replace it in March", "I hope to ship by June".
_INTENT = re.compile(
    r"\b(?:want|wants|need|needs|hope|hopes|have|has|aim|aims|intend|intends|expect|expects|mean|means|"
    r"would like|'d like|would love|'d love|excited|looking forward|can't wait|cannot wait)\s+to\b"
    r"|\b(?:should|must|might|ought to|about to)\b|(?-i:\bmay\b)|\blooking forward\b|\bdeadline\b",
    re.IGNORECASE,
)
# What is told as done: a past verb ("moved", "ran", "was"), "ago". A participle after "is" / "be"
# ("the office is closed in August") is no past.
_IRREGULAR_PAST = (
    "was were did had went got came took made said told left bought saw met began ran ate drank drove flew "
    "wrote won lost sold sent spent built broke caught chose fell felt found forgot gave grew heard held "
    "kept knew led lent meant paid rode rose sang sat slept spoke stood swam taught thought threw understood "
    "woke wore became brought fought sought taught"
)
_PAST = re.compile(
    r"\b(?:" + "|".join(sorted(set(_IRREGULAR_PAST.split()))) + r")\b|\bago\b"
    r"|(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )(?<!\bget )(?<!'s )(?<!'re )(?<!'m )\b[a-z]{3,}ed\b",
    re.IGNORECASE,
)
# "by June", "until March", "before April": a limit said without a tense is one still ahead.
_LIMIT = frozenset(("by", "until", "till", "before"))
# Where one sentence ends and the next begins: each has its own tense ("I moved here in March. We'll
# repaint in May.").
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def tense(sentence: str) -> bool | None:
    """True when ``sentence`` speaks of what is ahead, False of what is done, None when it does
    not say (a present tense: "the lease ends in March")."""
    if _FUTURE.search(sentence) or _INTENT.search(sentence):
        return True
    if _PAST.search(sentence):
        return False
    return None


@dataclass
class Resolution:
    """The text with relative dates made absolute, and the first date found (the event time)."""

    text: str
    event_time: datetime | None = None
    phrases: list[str] = field(default_factory=list)


def format_day(value: datetime) -> str:
    return f"{value.day} {value:%B} {value.year}"


def _day(value: datetime) -> datetime:
    return value.replace(hour=0, minute=0, second=0, microsecond=0)


def _add_months(value: datetime, months: int) -> datetime:
    index = value.year * 12 + value.month - 1 + months
    return _day(value).replace(year=index // 12, month=index % 12 + 1, day=1)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else NUMBER_WORDS[word.lower()]


def is_future(text: str) -> bool:
    return bool(_FUTURE.search(text))


@dataclass
class _Rule:
    pattern: re.Pattern[str]
    # (match, reference, ahead) -> (date, phrase without preposition, preposition to use); ahead is
    # ``tense`` of the phrase's sentence: True, False, or None when it does not say
    resolve: Callable[[re.Match[str], datetime, bool | None], tuple[datetime, str, str]]


def _on(d: datetime) -> tuple[datetime, str, str]:
    return d, format_day(d), "on"


def _month(d: datetime) -> tuple[datetime, str, str]:
    return d, f"{d:%B} {d.year}", "in"


def _week_of(d: datetime) -> tuple[datetime, str, str]:
    monday = _day(d) - timedelta(days=d.weekday())
    return monday, f"the week of {format_day(monday)}", "in"


def _weekday(ref: datetime, name: str, direction: int) -> datetime:
    """The named weekday strictly before (direction -1) or after (+1) the reference day."""
    target = WEEKDAYS.index(name.lower())
    delta = (target - ref.weekday()) % 7
    if direction > 0:
        return _day(ref) + timedelta(days=delta or 7)
    return _day(ref) - timedelta(days=(-delta) % 7 or 7)


def _ago(m: re.Match[str], ref: datetime, future: bool | None) -> tuple[datetime, str, str]:
    n, unit = _count(m["n"]), m["unit"].lower()
    sign = 1 if m["dir"].lower() in ("in", "from now", "later") else -1
    return _shifted(ref, sign * n, unit)


def _shifted(ref: datetime, n: int, unit: str) -> tuple[datetime, str, str]:
    """``ref`` moved by ``n`` days, weeks, months or years, said as finely as the unit is."""
    sign, n = (1, n) if n >= 0 else (-1, -n)
    if unit.startswith("day"):
        return _on(_day(ref) + timedelta(days=sign * n))
    if unit.startswith("week"):
        return _on(_day(ref) + timedelta(weeks=sign * n))
    if unit.startswith("month"):
        return _month(_add_months(ref, sign * n))
    d = _day(ref).replace(month=1, day=1, year=ref.year + sign * n)
    return d, str(d.year), "in"


def _relative_unit(m: re.Match[str], ref: datetime, future: bool | None) -> tuple[datetime, str, str]:
    which, unit = m["which"].lower(), m["unit"].lower()
    step = {"last": -1, "past": -1, "this past": -1, "next": 1, "this": 0, "this coming": 1, "coming": 1}[
        which
    ]
    if unit == "week":
        return _week_of(_day(ref) + timedelta(weeks=step))
    if unit == "weekend":
        saturday = _weekday(ref, "saturday", -1 if step < 0 else 1)
        if step == 0 and ref.weekday() >= 5:
            saturday = _day(ref) - timedelta(days=ref.weekday() - 5)
        return saturday, f"the weekend of {format_day(saturday)}", "on"
    if unit == "month":
        return _month(_add_months(ref, step))
    if unit == "year":
        d = _day(ref).replace(month=1, day=1, year=ref.year + step)
        return d, str(d.year), "in"
    start = SEASONS[unit]
    year = ref.year if ref.month >= start else ref.year - 1
    prev_start = _day(ref).replace(year=year, month=start, day=1)
    next_start = prev_start.replace(year=year + 1)
    within = ref < _add_months(prev_start, 3)
    if step > 0:
        d = next_start
    elif step < 0:
        d = prev_start.replace(year=year - 1) if within else prev_start
    else:
        d = prev_start if within or not future else next_start
    return d, f"{unit} {d.year}", "in"


def _named_weekday(m: re.Match[str], ref: datetime, future: bool | None) -> tuple[datetime, str, str]:
    which = (m["which"] or "").lower()
    if which in ("last", "this past", "past"):
        return _on(_weekday(ref, m["wd"], -1))
    if which in ("next", "this coming", "coming", "this"):
        return _on(_weekday(ref, m["wd"], 1))
    return _on(_weekday(ref, m["wd"], 1 if future else -1))


def _named_month(m: re.Match[str], ref: datetime, future: bool | None) -> tuple[datetime, str, str]:
    month = MONTHS.index(m["mo"].lower()) + 1
    which = (m["which"] or "").lower()
    prep = (m["prep"] or "").strip().lower()
    if prep == "since":
        future = False
    elif future is None and prep in _LIMIT:
        future = True
    if future is None and not which and month != ref.month:
        # No tense to go by: the nearer of the two ("the lease ends in March", said in October, is
        # next March, five months on, not seven months back); half a year either way reads as past.
        ahead = (month - ref.month) % 12
        future = ahead < 6
    if which == "next":
        year = ref.year if month > ref.month else ref.year + 1
    elif which == "last":
        year = ref.year if month < ref.month else ref.year - 1
    elif which == "this":
        year = ref.year
    elif future:
        year = ref.year if month >= ref.month else ref.year + 1
    else:
        year = ref.year if month <= ref.month else ref.year - 1
    return _month(_day(ref).replace(year=year, month=month, day=1))


def _fixed(offset: int) -> Callable[[re.Match[str], datetime, bool | None], tuple[datetime, str, str]]:
    return lambda m, ref, future: _on(_day(ref) + timedelta(days=offset))


_RULES = [
    _Rule(re.compile(_PREP + r"\bthe day before yesterday\b", re.I), _fixed(-2)),
    _Rule(re.compile(_PREP + r"\bthe day after tomorrow\b", re.I), _fixed(2)),
    _Rule(re.compile(_PREP + r"\b(?:yesterday|last night)\b", re.I), _fixed(-1)),
    _Rule(re.compile(_PREP + r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I), _fixed(0)),
    _Rule(re.compile(_PREP + r"\btomorrow\b", re.I), _fixed(1)),
    _Rule(
        re.compile(
            _PREP + _NUM + r"\s+(?P<unit>days?|weeks?|months?|years?)\s+(?P<dir>ago|from now)\b", re.I
        ),
        _ago,
    ),
    _Rule(
        re.compile(
            # not "moved in two weeks later": "later" counts from a date of its own (``_resolve_later``)
            r"(?P<prep>)\b(?P<dir>in)\s+"
            + _NUM
            + r"\s+(?P<unit>days?|weeks?|months?|years?)\b(?!\s+later\b)",
            re.I,
        ),
        _ago,
    ),
    _Rule(
        re.compile(
            _PREP + r"\b(?P<which>this past|this coming|last|past|next|this|coming)\s+"
            r"(?P<unit>week|weekend|month|year|spring|summer|autumn|fall|winter)\b",
            re.I,
        ),
        _relative_unit,
    ),
    _Rule(
        re.compile(
            _PREP + rf"\b(?:(?P<which>this past|this coming|last|past|next|this|coming)\s+)(?P<wd>{_WD})\b",
            re.I,
        ),
        _named_weekday,
    ),
    # "on Monday"; not "on Mondays", which is every Monday
    _Rule(re.compile(rf"(?P<prep>\bon\s+)(?P<which>)(?P<wd>{_WD})\b", re.I), _named_weekday),
    _Rule(
        re.compile(
            rf"(?P<prep>\b(?:in|since|until|by|for|during|early|late|mid|(?:the\s+)?(?:end|start|beginning|middle)\s+of)\s+)"
            rf"(?:(?P<which>next|last|this)\s+)?"
            rf"(?P<mo>{_MO})\b(?!\s*\d)(?!,?\s+\d)",
            re.I,
        ),
        _named_month,
    ),
]

# Explicit calendar dates: never rewritten, but they give the event time.
_EXPLICIT = [
    re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b"),
    re.compile(
        rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<mo>{_MO}|[a-z]{{3}})\.?,?\s+(?P<y>\d{{4}})\b", re.I
    ),
    re.compile(
        rf"\b(?P<mo>{_MO}|[a-z]{{3}})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})\b", re.I
    ),
    # What this module writes for months and seasons ("in May 2026", "winter 2026"): the first day.
    re.compile(rf"\b(?P<mo>{_MO})\s+(?P<y>\d{{4}})\b(?P<d>)", re.I),
    re.compile(r"\b(?P<season>spring|summer|autumn|fall|winter)\s+(?P<y>\d{4})\b(?P<d>)", re.I),
]


def _month_number(name: str) -> int | None:
    name = name.lower()
    return (
        MONTHS.index(name) + 1
        if name in MONTHS
        # Only abbreviations (three letters, or "sept") are looked up here: the full names are above.
        else MONTH_NUMBERS.get(name[:4] if name == "sept" else name[:3])
    )


def explicit_date(text: str, tz: tzinfo | None) -> datetime | None:
    """The first calendar date with a year that ``text`` names (the earliest said, whatever its form)."""
    found = _explicit_dates(text, tz)
    return min(found)[1] if found else None


def _explicit_dates(text: str, tz: tzinfo | None) -> list[tuple[int, datetime]]:
    """Every calendar date with a year in ``text``, with where it starts (one per place)."""
    out: dict[int, datetime] = {}
    for pattern in _EXPLICIT:
        for m in pattern.finditer(text):
            groups = m.groupdict()
            if "season" in groups:
                month: int | None = SEASONS[groups["season"].lower()]
            else:
                month = _month_number(groups["mo"]) if "mo" in groups else int(groups["m"])
            if month is None:
                continue
            # "3 March 2025" is also "March 2025": the fuller reading, found first, is kept
            if any(start <= m.start() < start + 12 for start in out):
                continue
            try:
                out[m.start()] = datetime(int(groups["y"]), month, int(groups["d"] or 1), tzinfo=tz)
            except ValueError:
                continue
    return sorted(out.items())


# A day and month without a year: "April 5", "March 3rd", "5 April", "14 to 16 October" (a range:
# its first day). Tried last, after every phrase above and every date with a year. The month is
# capitalised, as English writes it, so "I may 5 times" names no date.
_MO_CAPITAL = "|".join(m.capitalize() for m in MONTHS)
_YEARLESS = [
    re.compile(rf"\b(?P<mo>{_MO_CAPITAL})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b(?![:.]\d)"),
    re.compile(
        rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:\s*(?:-|–|to|and|until)\s*\d{{1,2}}(?:st|nd|rd|th)?)?"
        rf"\s+(?:of\s+)?(?P<mo>{_MO_CAPITAL})\b"
    ),
]


def yearless_date(text: str, reference: datetime) -> datetime | None:
    """The first day-and-month the text names, in the year that puts it nearest the reference
    (the next one from the reference on, when the text speaks of the future)."""
    found = _yearless_dates(text, reference)
    return found[0][1] if found else None


def _yearless_dates(text: str, reference: datetime) -> list[tuple[int, datetime]]:
    """Every day-and-month ``text`` names, with where it starts, in text order (``yearless_date``)."""
    ahead = bool(tense(text))
    out: dict[int, datetime] = {}
    for pattern in _YEARLESS:
        for m in pattern.finditer(text):
            month = _month_number(m.group("mo"))
            if month is None or m.start() in out:
                continue
            try:
                options = [
                    datetime(reference.year + dy, month, int(m.group("d")), tzinfo=reference.tzinfo)
                    for dy in (-1, 0, 1)
                ]
            except ValueError:
                continue  # "February 30"
            if ahead:
                options = [d for d in options if d >= _day(reference)] or options
            out[m.start()] = min(options, key=lambda d: abs(d - reference))
    return sorted(out.items())


def _named_dates(text: str, reference: datetime) -> list[tuple[int, datetime]]:
    """The dates ``text`` names, with and without a year, in text order (a date with its year wins
    where both read the same words)."""
    explicit = _explicit_dates(text, reference.tzinfo)
    taken = {start for start, _ in explicit}
    return sorted(explicit + [(i, d) for i, d in _yearless_dates(text, reference) if i not in taken])


# "in 2020", "since 2019": a year alone, what "three years ago" is written as; the event time of a text
# that names no finer date.
_YEAR = re.compile(r"\b(?:in|since|during|by|until)\s+(?P<y>(?:19|20)\d{2})\b(?![-/.]\d)", re.I)


def _year(text: str, reference: datetime) -> datetime | None:
    m = _YEAR.search(text)
    return datetime(int(m["y"]), 1, 1, tzinfo=reference.tzinfo) if m else None


# "The movers came two weeks later": later than the date said before it, not than the message.
# A word before it stays: "moved in two weeks later" is "moved in on 17 March".
_LATER = re.compile(r"\b" + _NUM + r"\s+(?P<unit>days?|weeks?|months?|years?)\s+later\b", re.I)


def _resolve_later(text: str, ref: datetime, phrases: list[str]) -> str:
    """``text`` with each "N days / weeks / months / years later" counted from the last date named
    before it (this text's, already made absolute); with none named, it is left as said: the message's
    own time is not what it follows. The date it follows stays the text's event time."""
    out: list[str] = []
    at = 0
    for m in _LATER.finditer(text):
        before = _named_dates(text[: m.start()], ref)
        if not before:
            continue
        _, phrase, default_prep = _shifted(before[-1][1], _count(m["n"]), m["unit"].lower())
        lead = default_prep.capitalize() if m.group(0)[:1].isupper() else default_prep
        out.append(text[at : m.start()] + f"{lead} {phrase}")
        at = m.end()
        phrases.append(m.group(0).strip())
    return "".join(out) + text[at:]


def resolve_relative_dates(text: str, reference: datetime) -> Resolution:
    """Rewrite relative date phrases as absolute dates; the first one found is the event time."""
    ref = reference if reference.tzinfo is not None else reference.replace(tzinfo=UTC)
    found: list[tuple[int, int, datetime]] = []
    phrases: list[str] = []
    parts = _SENTENCE_END.split(text)
    seps = _SENTENCE_END.findall(text)
    # Each sentence by its own tense: "I moved here in March. We'll repaint in May."
    for i, part in enumerate(parts):
        parts[i] = _resolve_sentence(part, ref, i, found, phrases)
    text = "".join(p + (seps[i] if i < len(seps) else "") for i, p in enumerate(parts))
    text = _resolve_later(text, ref, phrases)
    named = _named_dates(text, ref)
    event_time = min(found, key=lambda f: f[:2])[2] if found else named[0][1] if named else _year(text, ref)
    return Resolution(text=text, event_time=event_time, phrases=phrases)


def _resolve_sentence(
    text: str, ref: datetime, index: int, found: list[tuple[int, int, datetime]], phrases: list[str]
) -> str:
    """One sentence's relative dates made absolute; each date found is added to ``found`` as
    (sentence index, position, date)."""
    ahead = tense(text)
    for rule in _RULES:

        def replace(m: re.Match[str], rule: _Rule = rule) -> str:
            try:
                when, phrase, default_prep = rule.resolve(m, ref, ahead)
            except (ValueError, OverflowError):
                return m.group(0)  # "10000 years ago" names no representable date: keep the words
            prep = m.group("prep") or ""
            original = m.group(0)
            phrases.append(original.strip())
            found.append((index, m.start(), when))
            lead = prep if prep.strip().lower() not in ("", "on", "in") else f"{default_prep} "
            if original[:1].isupper() and not prep:
                lead = lead[:1].upper() + lead[1:]
            return f"{lead}{phrase}"

        text = rule.pattern.sub(replace, text)
    return text
