"""The time range every stored or queried time must fall in.

A timestamp such as ``9999-12-31T23:59:59-14:00`` parses, but is year 10000
in UTC: stored, it broke every later read of its user. So every time that
enters the system (a message timestamp, a search's reference time or date
filter, an event time a model proposes) is checked against one configured
range (``Settings.earliest_time`` .. ``latest_time``), and a request outside
it is refused with a 422 that names the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memstack.errors import ValidationFailed


@dataclass(frozen=True)
class TimeBounds:
    earliest: datetime = datetime(1900, 1, 1, tzinfo=UTC)
    latest: datetime = datetime(2200, 1, 1, tzinfo=UTC)

    def contains(self, value: datetime) -> bool:
        """True when ``value`` (naive means UTC) lies in the range and converts to UTC at all."""
        try:
            utc = (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).astimezone(UTC)
        except (OverflowError, ValueError):
            return False
        return self.earliest <= utc <= self.latest

    def keep(self, value: datetime | None) -> datetime | None:
        """``value`` when it is in range, else ``None`` (for times a model proposes, not a caller)."""
        return value if value is None or self.contains(value) else None

    def problems(
        self, values: Iterable[tuple[str, datetime | None]], location: str = "body"
    ) -> list[dict[str, Any]]:
        """One error detail per (field name, value) outside the range."""
        span = f"between {self.earliest.date().isoformat()} and {self.latest.date().isoformat()} (UTC)"
        return [
            {"field": field, "location": location, "message": f"must be {span}", "type": "out_of_range"}
            for field, value in values
            if value is not None and not self.contains(value)
        ]

    def check(self, values: Iterable[tuple[str, datetime | None]], location: str = "body") -> None:
        """Raise one ``ValidationFailed`` naming every field outside the range."""
        found = self.problems(values, location)
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise ValidationFailed(f"{found[0]['field']}: {found[0]['message']}{more}", found)
