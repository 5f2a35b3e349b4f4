"""A heartbeat: renew leases every few seconds while the work they guard is running.

Leases are short (a job's, a consolidation's) so that work held by a process
that died is taken up again within seconds; a live process keeps its leases
by renewing them from one daemon thread until the work ends. One thread per
keeper for the life of the process, not one per lease: a thread that touches
SQLite opens a connection that lives as long as the thread. With nothing to
renew, the thread sleeps until there is.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


class LeaseKeeper:
    """``with keeper.keep(renew):`` calls ``renew()`` every ``interval`` seconds inside the block."""

    def __init__(self, interval: float, name: str = "memstack-heartbeat") -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.interval = interval
        self._name = name
        self._renewals: dict[int, Callable[[], object]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._busy = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def keep(self, renew: Callable[[], object]) -> Iterator[None]:
        key = next(self._ids)
        with self._lock:
            self._renewals[key] = renew
            self._busy.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._renewals.pop(key, None)
                if not self._renewals:
                    self._busy.clear()

    def _loop(self) -> None:
        idle = threading.Event()  # never set: a plain interruptible sleep
        while True:
            self._busy.wait()
            idle.wait(self.interval)
            with self._lock:
                renewals = list(self._renewals.values())
            for renew in renewals:
                try:
                    renew()
                except Exception as exc:  # a missed beat is retried on the next; a lease outlasts several
                    log.warning("lease renewal failed: %s", type(exc).__name__)
