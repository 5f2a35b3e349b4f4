"""Making an erased user's bytes leave the file without making anyone else wait.

What keeps deleted text in the SQLite file after an erase commits (its rows
are overwritten in the database pages: ``secure_delete``) is the WAL, which
holds the pages as they were until a checkpoint copies the new pages back and
truncates it. (Until schema 5 an FTS5 delete also only marked tokens until
the index was merged; the FTS5 tables are gone.) A ``TRUNCATE`` checkpoint has
to wait for every reader still on an older snapshot, and while it waits it
holds the writer lock: with another process reading for 45 s, every other
user's add waited behind it and then failed ``database is locked``.

So the scrub (the truncating checkpoint) is only ever *tried*: it runs with
no busy wait and gives up at once when a reader or a writer is in the way.
When it cannot happen now it is owed: a marker row says so (another process,
or this one after a restart, finishes it) and a background thread tries
again, backing off, until it succeeds. The erased text is unreadable through
SQL from the erase's commit on; its bytes leave the file once the last reader
that began before the erase has finished.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time

from memstack.adapters.embedded.database import Database
from memstack.errors import StorageFull

_NAMESPACE, _KEY = "maintenance", "scrub_owed"
# Quick tries before deferring: another thread's write of a few milliseconds is no reason to wait.
_FIRST_TRIES = (0.0, 0.002, 0.005, 0.01, 0.02, 0.05)


class Scrubber:
    def __init__(self, db: Database, *, first_retry: float = 0.05, longest_retry: float = 2.0) -> None:
        self.db = db
        self._first, self._longest = first_retry, longest_retry
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._scrubbed = True
        db.on_close(self.close)
        if self.owed():  # an erase of an earlier run (or of another process) left it owed
            self._scrubbed = False
            self._start()

    def owed(self) -> bool:
        """True while some erase's scrub has not happened yet (in this process or another)."""
        row = (
            self.db.read()
            .execute("SELECT 1 FROM kv WHERE namespace = ? AND key = ?", (_NAMESPACE, _KEY))
            .fetchone()
        )
        return row is not None or not self._scrubbed

    def request(self) -> bool:
        """Scrub now if nothing is in the way, else owe it; True when it is done now."""
        self._scrubbed = False
        with contextlib.suppress(StorageFull), self.db.write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO kv (namespace, key, value) VALUES (?, ?, ?)",
                (_NAMESPACE, _KEY, str(time.time())),
            )
        for pause in _FIRST_TRIES:
            time.sleep(pause)
            if self._try():
                return True
        self._start()
        return False

    def _try(self) -> bool:
        """One attempt that never waits: checkpoint and truncate the WAL."""
        with self.db.maintenance() as conn:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError:  # another process writing this instant, or no room
                busy = 1
            finally:
                conn.execute("PRAGMA busy_timeout = 30000")
        if busy:
            return False
        with contextlib.suppress(StorageFull), self.db.write() as conn:
            conn.execute("DELETE FROM kv WHERE namespace = ? AND key = ?", (_NAMESPACE, _KEY))
        self._scrubbed = True
        return True

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._retry, name="memstack-scrub", daemon=True)
            self._thread.start()

    def _retry(self) -> None:
        pause = self._first
        while not self._stop.wait(pause) and not self.db.closed:
            with contextlib.suppress(sqlite3.Error, StorageFull):
                if self._try():
                    return
            pause = min(pause * 2, self._longest)

    def close(self) -> None:
        """Stop retrying (what is still owed stays marked for the next process).

        Waits for an attempt in progress to end: the database closes its
        connections next, and closing one under a running statement crashes the
        process. An attempt is short: the checkpoint never waits, its marker's
        delete at most SQLite's busy timeout.
        """
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join()
