"""SQLite contention as a retryable error, apart from the store so the AWS API can map it without
importing the embedded store (``api.errors`` maps every failure; a Lambda never opens SQLite)."""

from __future__ import annotations

import sqlite3

from memstack.errors import DependencyFailed


class StoreBusy(DependencyFailed):
    """Another process held the SQLite file past the busy timeout (or its lock protocol kept
    failing, as it can when the machine starves the other process): nothing of the request was
    stored, and the same request succeeds a moment later."""

    retry_after = 1


#: SQLite's primary result codes that mean "contention, try again", not "a bug"
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL})


def as_store_busy(exc: BaseException) -> StoreBusy | None:
    """``StoreBusy`` (503, ``Retry-After``) for SQLite contention; ``None`` for anything else.

    A read or a write can meet it (two ``memstack serve`` processes, the CLI beside the server);
    a write's transaction is rolled back by then, so a retry is always safe.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.OperationalError) and code is not None and code & 0xFF in _BUSY_CODES:
        return StoreBusy(
            f"the data file is busy ({getattr(exc, 'sqlite_errorname', 'SQLITE_BUSY')}); retry shortly"
        )
    return None
