"""The queue port: background jobs (extraction, consolidation) with retries and a dead-letter queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from memstack.models import new_id

JobType = Literal["extract", "consolidate"]


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

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every job sent so far has been processed or dead-lettered."""
        ...

    def dead_letters(self) -> list[dict[str, Any]]: ...

    def redrive(self) -> int: ...
