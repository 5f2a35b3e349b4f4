"""When a call is tried again, and after how long: one policy for the sync and async clients.

A retry is only made when it cannot do something twice:

* ``429``, ``503`` and ``507`` mean the server did not do it (throttled, a
  dependency failed, or its disk is full, before anything was written): every
  call is retried;
* ``502``/``504`` and a connection that broke after the request went out may
  hide a request that did run: only idempotent calls are retried (reads, search,
  an add whose messages all carry ids, erase);
* a connection that never opened (``ConnectError``, ``ConnectTimeout``, no
  free pooled connection) sent nothing: every call is retried.

The wait is "full jitter" exponential backoff (a random time between 0 and
``base_delay * 2**n``, capped), so many clients throttled at once do not come
back at once; a ``Retry-After`` from the server is honoured as the least wait,
and a ``Retry-After`` longer than ``max_retry_after`` is not waited for at all
(the caller gets the 429 with ``retry_after`` set and decides).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

ALWAYS_RETRIED = frozenset({429, 503, 507})
RETRIED_WHEN_IDEMPOTENT = frozenset({502, 504})
# The request never left this machine: safe to send again whatever it was.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; ``None`` when absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` counts the first try; ``RetryPolicy(max_attempts=1)`` never retries."""

    max_attempts: int = 4
    base_delay: float = 0.25
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must not be negative")

    def backoff(self, attempt: int) -> float:
        """The jittered wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return self.rng.uniform(0.0, ceiling)

    def after_response(
        self, attempt: int, status: int, headers: Mapping[str, str], idempotent: bool
    ) -> float | None:
        """Seconds to wait before trying again after this answer, or ``None``: do not retry."""
        if attempt >= self.max_attempts:
            return None
        if status not in ALWAYS_RETRIED and not (idempotent and status in RETRIED_WHEN_IDEMPOTENT):
            return None
        retry_after = parse_retry_after(headers.get("retry-after"))
        if retry_after is None:
            return self.backoff(attempt)
        if retry_after > self.max_retry_after:
            return None
        # The server's wait is the least; a little jitter on top spreads the herd.
        return retry_after + self.backoff(attempt) / 4

    def after_error(self, attempt: int, error: httpx.TransportError, idempotent: bool) -> float | None:
        """Seconds to wait before trying again after a transport failure, or ``None``."""
        if attempt >= self.max_attempts:
            return None
        if isinstance(error, NOT_SENT) or idempotent:
            return self.backoff(attempt)
        return None


NO_RETRIES = RetryPolicy(max_attempts=1)
