"""Job status: the queues and workers report each job's state here; callers read it by job id.

A job is ``queued`` when sent (again: a retried add, the outbox sweep, a
redrive), ``running`` while a worker has it, ``done`` when its work is
stored, and ``failed`` when it was dead-lettered. A failed attempt that will
be retried is ``queued`` again, with the attempt's error. Reports from a
worker never create a record (``JobStatuses.change``), so a job that runs on
after its user was erased leaves nothing behind. Records expire ``ttl`` after
their last change.

The error a caller reads is a code and a fixed sentence chosen by the kind
of failure, never the exception's own text: that may hold internals, or
words of the user's messages. The operator's logs have the details under the
job id.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from aws_lambda_powertools import Logger

from memstack.errors import (
    Conflict,
    DependencyFailed,
    MemstackError,
    NotFound,
    StorageFull,
    Throttled,
    ValidationFailed,
)
from memstack.ports.job_status import JobChange, JobError, JobState, JobStatus, JobStatuses
from memstack.ports.queue import Job

logger = Logger(service="memstack", child=True)

#: the jobs a caller follows; a webhook delivery is the tenant's own receiver's business (and a failed
#: one must not make a "job failed" event of its own)
RECORDED_TYPES = frozenset({"extract", "consolidate"})
#: the code of a job whose worker died (a crash, a timeout) while running it, every attempt
WORKER_LOST = "worker_lost"

_WHAT_FAILED: tuple[tuple[type[BaseException], str, str], ...] = (
    (Throttled, "throttled", "a model or store the job needs kept refusing requests for their rate"),
    (DependencyFailed, "dependency_failed", "a model or store the job needs failed to answer"),
    (StorageFull, "storage_full", "the data volume is full"),
    (ValidationFailed, "invalid_input", "the job's input was refused"),
    (NotFound, "not_found", "what the job works on no longer exists"),
    (Conflict, "conflict", "what the job works on was changed meanwhile"),
)
_SENTENCES = {
    WORKER_LOST: "the worker running the job stopped before it finished (a crash or a time-out)",
    "internal_error": "the job failed inside the worker",
}


def failure(code_or_error: str | BaseException, job_id: str, attempts: int, *, final: bool) -> JobError:
    """The caller's view of a failed attempt: a code, and a sentence saying what happens next."""
    if isinstance(code_or_error, str):
        code, sentence = code_or_error, _SENTENCES.get(code_or_error, _SENTENCES["internal_error"])
    else:
        code, sentence = "internal_error", _SENTENCES["internal_error"]
        for kind, known, text in _WHAT_FAILED:
            if isinstance(code_or_error, kind):
                code, sentence = known, text
                break
        else:
            if isinstance(code_or_error, MemstackError) and code_or_error.code in _SENTENCES:
                code, sentence = code_or_error.code, _SENTENCES[code_or_error.code]
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    after = (
        "it was dead-lettered: an operator can redrive it (POST /v1/jobs/redrive)"
        if final
        else "it will be retried"
    )
    return JobError(
        code=code,
        message=f"{sentence.capitalize()} ({tries}); {after}. The operator's logs name job {job_id}.",
    )


class JobRecorder:
    """Writes each job's state to ``statuses``; ``on_failed`` hears of every job that ends failed."""

    def __init__(
        self,
        statuses: JobStatuses,
        ttl: timedelta,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.statuses = statuses
        self.ttl = ttl
        self.clock = clock
        self.on_failed: list[Callable[[JobStatus], None]] = []

    def queued(self, jobs: list[Job]) -> None:
        """Before the jobs are sent: a worker that takes one at once finds its record.

        Raises when the records cannot be written: the caller's add fails and its retry
        sends the same job ids again, so no job id is ever handed out unrecorded.
        """
        jobs = [job for job in jobs if job.type in RECORDED_TYPES]
        if not jobs:
            return
        now = self.clock()
        self.statuses.put(
            [
                JobStatus(
                    id=job.id,
                    tenant=job.tenant,
                    user_id=job.user_id,
                    type=job.type,
                    state="queued",
                    queued_at=now,
                    updated_at=now,
                    expires_at=now + self.ttl,
                )
                for job in jobs
            ]
        )

    def running(self, job: Job, attempt: int) -> None:
        self._change(job, "running", attempt)

    def done(self, job: Job, attempt: int) -> None:
        self._change(job, "done", attempt)

    def failed(self, job: Job, attempt: int, error: str | BaseException, *, final: bool) -> None:
        """A failed attempt: ``final`` (dead-lettered) is ``failed``, otherwise ``queued`` for the retry."""
        if job.type not in RECORDED_TYPES:
            return
        why = failure(error, job.id, attempt, final=final)
        self._change(job, "failed" if final else "queued", attempt, why)
        if not final or not self.on_failed:
            return
        status = self.statuses.get(job.tenant, job.id)
        if status is None or status.state != "failed":
            return  # erased meanwhile: nobody to tell
        for listener in self.on_failed:
            try:
                listener(status)
            except Exception:
                logger.exception("a job-failed listener failed", extra={"job_id": job.id})

    def _change(self, job: Job, state: JobState, attempt: int, error: JobError | None = None) -> None:
        """A worker's report: best effort, so a status write that fails never fails the job's own work."""
        if job.type not in RECORDED_TYPES:
            return
        now = self.clock()
        change = JobChange(
            state=state, attempts=attempt, error=error, updated_at=now, expires_at=now + self.ttl
        )
        try:
            self.statuses.change(job.tenant, job.user_id, job.id, change)
        except Exception:
            logger.warning(
                "could not record a job's state", extra={"job_id": job.id, "state": state}, exc_info=True
            )


def visible(status: JobStatus | None, now: datetime) -> JobStatus | None:
    """The record unless it has expired (stores delete expired records late, or on their next write)."""
    return status if status is not None and status.expires_at > now else None
