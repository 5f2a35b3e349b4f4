"""The consolidation scheduler: find users with enough (or old enough) STM and fan out one job each.

In AWS an EventBridge schedule invokes ``lambdas/consolidation_scheduler``,
which calls ``schedule`` with the SQS consolidation queue; locally
``memstack consolidate`` (no ``--user``) and ``start_consolidation_timer``
(for ``memstack serve``) call it with the local queue.

Job ids are derived from (tenant, user, time slot), so a schedule that fires
twice in one slot enqueues one job per user, not two (the local queue ignores
a known id; the SQS worker's idempotency record does the same).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from memstack.domain import outbox
from memstack.ports.queue import Job, JobQueue
from memstack.ports.stm import ShortTermStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutboxSweep:
    """Re-send extraction owed for longer than ``after`` (entries younger than ``window``)."""

    after: timedelta
    window: timedelta
    limit: int

    def run(self, stm: ShortTermStore, queue: JobQueue, now: datetime) -> int:
        return outbox.sweep(stm, queue, now, after=self.after, window=self.window, limit=self.limit)


@dataclass(frozen=True)
class DueUser:
    tenant: str
    user_id: str
    pending: int
    oldest: datetime
    reason: str  # "threshold" or "age"


def due_users(stm: ShortTermStore, now: datetime, threshold: int, max_age: timedelta) -> list[DueUser]:
    """Users with at least ``threshold`` unconsolidated entries, or any older than ``max_age``."""
    due = []
    for tenant, user_id, n, oldest in stm.users_with_pending(now):
        if n >= threshold:
            due.append(DueUser(tenant, user_id, n, oldest, "threshold"))
        elif now - oldest >= max_age:
            due.append(DueUser(tenant, user_id, n, oldest, "age"))
    return sorted(due, key=lambda d: (d.tenant, d.user_id))


def housekeeping(stm: ShortTermStore, now: datetime) -> int | None:
    """Purge expired STM; best effort, because every read ignores expired entries anyway.

    (On DynamoDB, TTL deletes them too; a scheduler without delete rights still schedules.)
    """
    try:
        return stm.purge_expired(now)
    except Exception:
        log.warning("STM housekeeping failed; expired entries stay until TTL removes them", exc_info=True)
        return None


def job_id(tenant: str, user_id: str, now: datetime, slot: timedelta) -> str:
    bucket = int(now.timestamp() // max(slot.total_seconds(), 1.0))
    digest = hashlib.blake2b(f"{tenant}\x1f{user_id}\x1f{bucket}".encode(), digest_size=12).hexdigest()
    return f"consolidate_{digest}"


def schedule(
    stm: ShortTermStore,
    queue: JobQueue,
    *,
    now: datetime | None = None,
    threshold: int,
    max_age: timedelta,
    slot: timedelta = timedelta(hours=1),
    outbox: OutboxSweep | None = None,
) -> dict[str, Any]:
    """Housekeeping (purge expired STM), the outbox sweep, then one consolidate job per due user.

    An explicit ``now`` (tests, replays) travels in the job, so the job sees the same clock.
    """
    pinned = {"now": now.isoformat()} if now is not None else {}
    now = now or datetime.now(UTC)
    purged = housekeeping(stm, now)
    # Before consolidation is fanned out: extraction owed to a message whose enqueue was lost.
    reenqueued = outbox.run(stm, queue, now) if outbox is not None else 0
    due = due_users(stm, now, threshold, max_age)
    jobs = [
        Job(
            id=job_id(d.tenant, d.user_id, now, slot),
            type="consolidate",
            tenant=d.tenant,
            user_id=d.user_id,
            payload={"reason": d.reason, "pending": d.pending, **pinned},
        )
        for d in due
    ]
    if jobs:
        queue.send(jobs)
    return {
        "purged_expired": purged,
        "reenqueued_extractions": reenqueued,
        "jobs": len(jobs),
        "users": [
            {"tenant": d.tenant, "user_id": d.user_id, "pending": d.pending, "reason": d.reason} for d in due
        ],
    }


class _Schedulable(Protocol):
    def schedule_consolidation(self, now: datetime | None = None) -> dict[str, Any]: ...


class ConsolidationTimer:
    """A daemon thread that runs the scheduler every ``interval_seconds`` until stopped."""

    def __init__(self, service: _Schedulable, interval_seconds: float) -> None:
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")
        self.service = service
        self.interval = interval_seconds
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memstack-consolidation-timer", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.service.schedule_consolidation()
            except Exception:  # one failed pass must not end the timer; the next one retries
                log.exception("consolidation scheduling failed")
            self.runs += 1

    def start(self) -> ConsolidationTimer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)


def start_consolidation_timer(service: _Schedulable, interval_seconds: float) -> ConsolidationTimer:
    """Schedule consolidation every ``interval_seconds`` (``memstack serve``); ``.stop()`` ends it."""
    return ConsolidationTimer(service, interval_seconds).start()
