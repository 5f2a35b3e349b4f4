"""Message timestamps: ISO 8601, epoch numbers, and the human forms conversations carry.

Every parsed time is timezone-aware. A time written without a zone is read in
the zone the caller passes (the edges pass ``Settings.timezone``: the API, the
CLI, the model providers), and in UTC when it passes none. There is no
process-wide default: two services with different zones can share a process.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# Forms seen in chat logs (LoCoMo uses the first), tried before dateparser
# because strptime is exact and fast; dateparser is the slow, lenient fallback.
_FORMATS = (
    "%I:%M %p on %d %B, %Y",
    "%I:%M %p on %d %b, %Y",
    "%I:%M %p on %B %d, %Y",
    "%d %B %Y %H:%M",
    "%d %B %Y, %H:%M",
    "%B %d, %Y %H:%M",
    "%B %d, %Y %I:%M %p",
    "%d %B %Y",
    "%d %B, %Y",
    "%B %d, %Y",
    "%d %b %Y",
    "%Y/%m/%d %H:%M:%S",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d",
)
_NUMBER = re.compile(r"^[+-]?\d+(\.\d+)?$")
# Epoch values above this are milliseconds (year 5138 in seconds; 1973 in ms).
_MILLIS_THRESHOLD = 1e11


def get_timezone(name: str) -> tzinfo:
    """The ``tzinfo`` for an IANA name; a clear ``ValueError`` for an unknown one."""
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {name!r}") from exc


def localise(value: datetime, tz: tzinfo) -> datetime:
    """Attach ``tz`` to a naive datetime; aware ones are kept."""
    if value.tzinfo is not None and value.utcoffset() is not None:
        return value
    return value.replace(tzinfo=tz)


def _from_epoch(number: float) -> datetime:
    seconds = number / 1000.0 if abs(number) >= _MILLIS_THRESHOLD else number
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise ValueError(f"epoch value {number} is out of range") from exc


def _from_text(text: str, tz: tzinfo) -> datetime:
    if _NUMBER.match(text):
        return _from_epoch(float(text))
    iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        return localise(datetime.fromisoformat(iso), tz)
    except ValueError:
        pass
    for fmt in _FORMATS:
        try:
            return localise(datetime.strptime(text, fmt), tz)
        except ValueError:
            continue
    import dateparser  # slow to import: only for forms the exact parsers do not know

    zone_name = getattr(tz, "key", None) or "UTC"
    parsed = dateparser.parse(
        text,
        languages=["en"],
        settings={"TIMEZONE": zone_name, "RETURN_AS_TIMEZONE_AWARE": True, "PREFER_DAY_OF_MONTH": "first"},
    )
    if parsed is None:
        raise ValueError(
            f"cannot read {text!r} as a time (use ISO 8601, epoch seconds, or e.g. '1:56 pm on 8 May, 2023')"
        )
    return localise(parsed, tz)


def parse_timestamp(value: object, tz: tzinfo | str | None = None) -> datetime:
    """Any accepted timestamp form as an aware ``datetime`` (naive forms read in ``tz``, else UTC)."""
    zone = get_timezone(tz) if isinstance(tz, str) else (tz or UTC)
    if isinstance(value, datetime):
        return localise(value, zone)
    if isinstance(value, date):
        return datetime.combine(value, time.min, tzinfo=zone)
    if isinstance(value, bool):
        raise ValueError("a timestamp cannot be true or false")
    if isinstance(value, int | float):
        return _from_epoch(float(value))
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise ValueError("timestamp is empty")
        return _from_text(text, zone)
    raise ValueError(f"a timestamp must be a string or a number, not {type(value).__name__}")
