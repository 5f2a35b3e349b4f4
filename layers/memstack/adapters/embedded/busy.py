"""SQLite contention as a retryable error, apart from the store so the AWS API can map it without
importing the embedded store (``api.errors`` maps every failure; a Lambda never opens SQLite), nor
``sqlite3`` itself: an error of SQLite's can only come from a process that has imported it."""

from __future__ import annotations

import sys

from memstack.errors import DependencyFailed


class StoreBusy(DependencyFailed):
    """Another process held the SQLite file past the busy timeout (or its lock protocol kept
    failing, as it can when the machine starves the other process): nothing of the request was
    stored, and the same request succeeds a moment later."""

    retry_after = 1


def as_store_busy(exc: BaseException) -> StoreBusy | None:
    """``StoreBusy`` (503, ``Retry-After``) for SQLite contention; ``None`` for anything else.

    A read or a write can meet it (two ``memstack serve`` processes, the CLI beside the server);
    a write's transaction is rolled back by then, so a retry is always safe.
    """
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is None:  # nothing in this process has opened SQLite (a Lambda function)
        return None
    # SQLite's primary result codes that mean "contention, try again", not "a bug"
    busy = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL)
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.OperationalError) and code is not None and code & 0xFF in busy:
        return StoreBusy(
            f"the data file is busy ({getattr(exc, 'sqlite_errorname', 'SQLITE_BUSY')}); retry shortly"
        )
    return None
