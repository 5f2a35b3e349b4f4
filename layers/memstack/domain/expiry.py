"""Per-memory expiry (Mem0's ``expiration_date``): an expired memory is never returned; a sweep deletes it.

The time rides in the record's metadata under a system key (``expires_at``), as
the agent does: every store keeps metadata, extraction carries an add's metadata
onto the memories made from it, and every backend already translates a filter
expression on it. It is written in one fixed-width UTC form, so the string order
every backend compares in is the time order.

Reads drop expired records after the store answered (nothing is paid while none
has expired); when some were dropped, the read runs again excluding them in the
store, so a page or a top-k is still full. The sweep (``due``) finds the expired
ones in the store and the service tombstones them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstack.domain.filter_expr import META, Cond, Node, Not
from memstack.models import MemoryRecord

EXPIRES_AT = "expires_at"


def stamp(when: datetime) -> str:
    """``when`` as stored: UTC, microseconds always written (fixed width, so strings sort as times)."""
    return when.astimezone(UTC).isoformat(timespec="microseconds")


def expires_at(record: MemoryRecord) -> datetime | None:
    raw = record.metadata.get(EXPIRES_AT)
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        return None


def expired(record: MemoryRecord, now: datetime) -> bool:
    when = expires_at(record)
    return when is not None and when <= now


def due(now: datetime) -> Node:
    """The store-side condition of the expired ones (the sweep's listing)."""
    return Cond(META + EXPIRES_AT, "lte", stamp(now))


def alive(now: datetime) -> Node:
    """The store-side condition of the unexpired ones (those without an expiry pass)."""
    return Not(due(now))


def deadline(now: datetime, expires: datetime | None, ttl_seconds: int | None) -> datetime | None:
    """The expiry an add or an edit asks for: a time, or a time to live from ``now``."""
    if expires is not None:
        return expires
    return None if ttl_seconds is None else now + timedelta(seconds=ttl_seconds)


def with_expiry(metadata: dict[str, object], when: datetime | None) -> dict[str, object]:
    """``metadata`` expiring at ``when`` (``None``: never)."""
    out = {k: v for k, v in metadata.items() if k != EXPIRES_AT}
    if when is not None:
        out[EXPIRES_AT] = stamp(when)
    return out
