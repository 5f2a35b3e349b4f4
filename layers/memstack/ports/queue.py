"""The queue port: background jobs (extraction, consolidation, webhooks), retried, then dead-lettered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from memstack.models import new_id

JobType = Literal["extract", "consolidate", "webhook"]


class Job(BaseModel):
    id: str = Field(default_factory=new_id)
    type: JobType
    tenant: str
    user_id: str
    payload: dict[str, Any] = Field(default_factory=dict)


class JobQueue(Protocol):
    def send(self, jobs: list[Job]) -> None: ...

    def set_handler(self, handler: Callable[[Job], None]) -> None:
        """The function that processes each job (local queues call it; SQS uses the worker Lambda)."""
        ...

    def drain(self, timeout: float | None = None, job_ids: list[str] | None = None) -> bool:
        """Run or wait for jobs until none is left, or ``timeout`` passes; True when none is left.

        Without ``job_ids``: every job sent so far. With them: only those jobs (a
        ``sync`` request waits for its own work, never another tenant's). A queue
        whose jobs run elsewhere (SQS and its worker Lambdas) cannot run chosen
        jobs here; it answers False at once and the caller watches for their
        effect instead (``ShortTermStore.unextracted``).
        """
        ...

    def dead_letters(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """Dead-lettered jobs (``id``, ``job``, ``attempts``, ``error``): all, or only ``tenant``'s."""
        ...

    def redrive(self, tenant: str | None = None, job_ids: list[str] | None = None) -> int:
        """Put dead-lettered jobs back (all, ``tenant``'s, or those of ``job_ids``); returns how many."""
        ...

    def waiting(self, tenant: str) -> list[dict[str, Any]] | None:
        """The tenant's jobs not yet done (waiting or running), oldest first; ``None`` when the queue
        cannot list them without taking them (SQS: a message is only seen by receiving it)."""
        ...

    def erase_user(self, tenant: str, user_id: str) -> int:
        """Delete what the queue holds of the user that it can (waiting and dead-lettered jobs)."""
        ...
