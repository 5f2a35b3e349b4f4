"""The job status port: what became of each background job (queued, running, done, failed), per tenant.

The queues and their workers write it (``domain/jobs.JobRecorder``); the API
reads one job by id for the caller's tenant. Every record names its tenant
and user, expires (``expires_at``), and goes with the user's erase.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, Field

JobState = Literal["queued", "running", "done", "failed"]


class JobError(BaseModel):
    """Why a job failed, as the caller may read it: a code and a sentence, never a trace or user text."""

    code: str
    message: str


class JobStatus(BaseModel):
    id: str
    tenant: str
    user_id: str
    type: str
    state: JobState
    attempts: int = 0
    error: JobError | None = None
    queued_at: datetime
    updated_at: datetime
    expires_at: datetime


class JobChange(BaseModel):
    """A later state of a recorded job (a worker's report)."""

    state: JobState
    attempts: int = Field(ge=0)
    error: JobError | None = None
    updated_at: datetime
    expires_at: datetime


class JobStatuses(Protocol):
    def put(self, statuses: list[JobStatus]) -> None:
        """Record these jobs as given (a job sent again starts over as queued)."""
        ...

    def change(self, tenant: str, user_id: str, job_id: str, change: JobChange) -> bool:
        """Apply a worker's report to a recorded job; False (and nothing written) when there is none.

        Never creates a record: a job that ran on after its user was erased leaves nothing behind.
        """
        ...

    def get(self, tenant: str, job_id: str) -> JobStatus | None:
        """The tenant's job (expired records may still be returned; the caller checks ``expires_at``)."""
        ...

    def erase_user(self, tenant: str, user_id: str) -> int:
        """Delete every record of the user's jobs; returns how many."""
        ...
