"""The facade every entry point calls: the CLI, the local server, the Lambda handlers.

It owns no rules of its own; it wires the domain (ingest, retrieve, versions)
to the adapters the factory built, and keeps the tenant an explicit argument
of every call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstack.domain import versions
from memstack.domain.ingest import Ingestor, IngestResult
from memstack.domain.retrieve import Retriever, SearchRequest, SearchResult
from memstack.errors import NotFound
from memstack.models import MemoryFilters, MemoryRecord, Message, Scope
from memstack.ports.embedder import Embedder
from memstack.ports.queue import Job, JobQueue
from memstack.ports.stm import ShortTermStore
from memstack.ports.store import MemoryStore
from memstack.settings import Settings

JobHandler = Callable[[Job], None]


@dataclass
class MemoryService:
    settings: Settings
    store: MemoryStore
    stm: ShortTermStore
    embedder: Embedder
    ingestor: Ingestor
    retriever: Retriever
    queue: JobQueue | None = None
    job_handlers: dict[str, JobHandler] = field(default_factory=dict)
    closers: list[Callable[[], None]] = field(default_factory=list)

    # ------------------------------------------------------------------ ingest
    def add(
        self,
        tenant: str,
        user_id: str,
        messages: list[Message],
        *,
        session_id: str | None = None,
        scope: Scope = Scope.USER,
        infer: bool = True,
        sync: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> IngestResult:
        result = self.ingestor.add(
            tenant, user_id, messages, session_id=session_id, scope=scope,
            infer=infer and "extract" in self.job_handlers, metadata=metadata,
        )
        if sync and result.queued and self.queue is not None:
            self.queue.drain()
        return result

    # ------------------------------------------------------------------ search
    def search(self, request: SearchRequest) -> SearchResult:
        return self.retriever.search(request)

    # ------------------------------------------------------------------- reads
    def list(
        self,
        tenant: str,
        user_id: str,
        filters: MemoryFilters | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> tuple[list[MemoryRecord], str | None]:
        return self.store.list(tenant, user_id, filters or MemoryFilters(), limit, cursor)

    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord:
        return versions.current_or_404(self.store, tenant, user_id, memory_id)

    def history(self, tenant: str, user_id: str, memory_id: str) -> list[MemoryRecord]:
        return versions.history(self.store, tenant, user_id, memory_id)

    # ------------------------------------------------------------------ writes
    def update(
        self, tenant: str, user_id: str, memory_id: str, content: str, now: datetime | None = None
    ) -> MemoryRecord:
        old = versions.current_or_404(self.store, tenant, user_id, memory_id)
        if not old.is_current:
            raise NotFound(f"memory {memory_id} is not the current version")
        new = versions.new_version(
            old, content=content, embedder=self.embedder, coarse_dim=self.settings.coarse_dim, now=now,
            metadata={**old.metadata, "edited": "manual"},
        )
        self.store.supersede(tenant, user_id, old.id, new)
        return new

    def delete(self, tenant: str, user_id: str, memory_id: str, now: datetime | None = None) -> MemoryRecord:
        old = versions.current_or_404(self.store, tenant, user_id, memory_id)
        if not old.is_current:
            raise NotFound(f"memory {memory_id} is not the current version")
        tombstone = versions.new_version(
            old, content=None, embedder=None, coarse_dim=self.settings.coarse_dim, deleted=True, now=now
        )
        self.store.supersede(tenant, user_id, old.id, tombstone)
        return tombstone

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        counts = dict(self.store.erase_user(tenant, user_id))
        counts["stm"] = self.stm.erase_user(tenant, user_id)
        return counts

    # -------------------------------------------------------------------- jobs
    def register_job_handler(self, job_type: str, handler: JobHandler) -> None:
        self.job_handlers[job_type] = handler

    def process_job(self, job: Job) -> None:
        handler = self.job_handlers.get(job.type)
        if handler is None:
            raise RuntimeError(f"no handler for job type {job.type!r}")
        handler(job)

    def close(self) -> None:
        for closer in reversed(self.closers):
            closer()
