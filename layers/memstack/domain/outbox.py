"""The outbox sweep: extraction owed to messages whose enqueue was lost is enqueued again, on a timer.

Every STM entry an add stores for extraction is "pending" until its job
finishes (the outbox, ``ports/stm.py``). When the enqueue fails after the
write, the client's retry of the same message ids enqueues it again
(``domain/ingest.py``); a client that never retries would leave it owed
forever. So each scheduler pass (EventBridge in AWS, ``memstack serve``'s
timer, ``memstack consolidate``) also sends the job of every entry still
pending ``after`` its arrival. The job id is the one the add derived, so a
job that is only slow is not run twice (the local queue ignores a known id;
the SQS worker's idempotency record answers a second delivery).

Entries older than ``window`` are left alone: a job that keeps failing is
in the dead-letter queue by then, where an operator redrives it; the sweep
does not retry it forever. The add's ``metadata`` is not in the STM entry:
a swept job says so (``swept``) and the worker reads it from the message's
STM memory record.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from memstack.domain.ingest import extraction_job
from memstack.ports.queue import Job, JobQueue
from memstack.ports.stm import ShortTermStore

#: the payload flag of a job the sweep (re-)sent
SWEPT = "swept"


def owed_jobs(
    stm: ShortTermStore, now: datetime, *, after: timedelta, window: timedelta, limit: int
) -> list[Job]:
    """The extraction jobs of entries pending for longer than ``after`` (and less than ``window``)."""
    stale = stm.stale_pending(now - window, now - after, now, limit)
    jobs = []
    for tenant, user_id, message_id, received_at in stale:
        job = extraction_job(tenant, user_id, message_id, received_at)
        job.payload[SWEPT] = True
        jobs.append(job)
    return jobs


def sweep(
    stm: ShortTermStore, queue: JobQueue, now: datetime, *, after: timedelta, window: timedelta, limit: int
) -> int:
    """Send the owed jobs; returns how many were sent."""
    jobs = owed_jobs(stm, now, after=after, window=window, limit=limit)
    if jobs:
        queue.send(jobs)
    return len(jobs)
