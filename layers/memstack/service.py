"""The facade every entry point calls: the CLI, the local server, the Lambda handlers.

It owns no rules of its own; it wires the domain (ingest, retrieve, versions)
to the adapters the factory built, and keeps the tenant an explicit argument
of every call.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from memstack.domain import conflicts, expiry, filter_expr, jobs, keyed, transfer, versions
from memstack.domain.chunks import passage_id
from memstack.domain.cursors import CursorSigner
from memstack.domain.embedding_memo import forget_all
from memstack.domain.erasure import Erased
from memstack.domain.ingest import Ingestor, IngestResult, stm_memory_id
from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.domain.tenant import guidance
from memstack.domain.tenant.configs import TenantConfigs
from memstack.domain.time.bounds import TimeBounds
from memstack.domain.webhooks.publisher import WebhookPublisher
from memstack.errors import Conflict, DependencyFailed, NotFound, StorageFull
from memstack.models import (
    Kind,
    ListOrder,
    MemoryFilters,
    MemoryRecord,
    Message,
    Scope,
    UserSummary,
)
from memstack.ports.embedder import Embedder
from memstack.ports.job_status import JobStatus
from memstack.ports.lease import Leases
from memstack.ports.queue import Job, JobQueue
from memstack.ports.reserve import SpaceReserve
from memstack.ports.stm import ShortTermStore
from memstack.ports.store import Compacting, Fence, MemoryStore
from memstack.settings import Settings

if TYPE_CHECKING:
    # Built when first needed (``make_*``): an add never imports the search pipeline, and a container
    # that never consolidates (the API, the extraction and webhook workers) never imports consolidation.
    from memstack.domain.consolidation.job import Consolidator
    from memstack.domain.consolidation.profiles import ProfileBuilder
    from memstack.domain.retrieval.pipeline import Retriever

logger = logging.getLogger(__name__)

JobHandler = Callable[[Job], None]


@dataclass(frozen=True)
class Expiry:
    """An edit's new expiry: ``at`` a time, or ``None`` for never."""

    at: datetime | None


#: what user-list cursors are sealed for (no user id can hold the control character)
USERS_CURSOR = "\x1eusers"


@dataclass
class MemoryService:
    settings: Settings
    store: MemoryStore
    stm: ShortTermStore
    embedder: Embedder
    ingestor: Ingestor
    #: builds the retrieval pipeline when a search first needs it, so a container that only adds
    #: never imports or builds it (its date/time patterns alone are a tenth of a cold import's domain)
    make_retriever: Callable[[], Retriever]
    #: tenants' own configuration (custom categories, extraction instructions), cached for the hot paths
    tenant_configs: TenantConfigs
    queue: JobQueue | None = None
    job_handlers: dict[str, JobHandler] = field(default_factory=dict)
    closers: list[Callable[[], None]] = field(default_factory=list)
    #: builds the consolidation job on its first run (None: consolidation is not configured)
    make_consolidator: Callable[[], Consolidator] | None = None
    #: per-user leases (one consolidation of a user at a time); an erase removes the user's leases too
    leases: Leases | None = None
    # ``build_service`` passes the deployment's key; a service built by hand signs with a key of its own.
    cursors: CursorSigner = field(default_factory=lambda: CursorSigner(secrets.token_bytes(32)))
    #: builds the profile builder on the first consolidation (None: profiles are off)
    make_profiles: Callable[[], ProfileBuilder] | None = None
    reserve: SpaceReserve | None = None
    #: where the queues and workers report each job's state (None: not recorded)
    job_recorder: jobs.JobRecorder | None = None
    #: webhook events of the memories written here (None: none are sent)
    webhooks: WebhookPublisher | None = None

    @functools.cached_property
    def retriever(self) -> Retriever:
        return self.make_retriever()

    @functools.cached_property
    def consolidator(self) -> Consolidator | None:
        return None if self.make_consolidator is None else self.make_consolidator()

    @functools.cached_property
    def profiles(self) -> ProfileBuilder | None:
        return None if self.make_profiles is None else self.make_profiles()

    def __post_init__(self) -> None:
        # Consolidation is the service's own job (it refreshes profiles and sweeps expiry too);
        # every other job type's handler is passed in (``job_handlers``).
        self.job_handlers = {"consolidate": self.run_consolidate_job, **self.job_handlers}

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
        sync_timeout: float | None = None,
    ) -> IngestResult:
        """Store ``messages``; ``sync`` waits up to ``sync_timeout`` (default: the setting) for extraction."""
        result = self.ingestor.add(
            tenant,
            user_id,
            messages,
            session_id=session_id,
            scope=scope,
            infer=infer and "extract" in self.job_handlers,
            metadata=metadata,
        )
        if sync and result.queued:
            # Only this call's own jobs: never another tenant's backlog.
            timeout = self.settings.api.sync_timeout_seconds if sync_timeout is None else sync_timeout
            result.processed = self.ingestor.wait_for_extraction(tenant, user_id, result, timeout)
        return result

    # ------------------------------------------------------------------ search
    def search(self, request: SearchRequest, now: datetime | None = None) -> SearchResult:
        """``request.filters`` may name only the tenant's categories (else ``ValidationFailed``)."""
        now = now or datetime.now(UTC)
        config = self.tenant_configs.current(request.tenant)
        guidance.check_filters(config, request.filters)
        request = dataclasses.replace(request, categories=guidance.category_descriptions(config))
        result = self.retriever.search(request)
        if any(expiry.expired(h.record, now) for h in result.hits):
            # Some expired since the last sweep: search again without them, so top_k stays full.
            alive = request.filters.model_copy(
                update={"where": filter_expr.both(request.filters.where, expiry.alive(now))}
            )
            result = self.retriever.search(dataclasses.replace(request, filters=alive))
            result.hits = [h for h in result.hits if not expiry.expired(h.record, now)]
        # A hit that contradicts a current memory comes with it, both marked (domain/conflicts.py).
        result.hits = conflicts.with_counterparts(
            self.store, request.tenant, request.user_id, request.filters, result.hits, now
        )
        return result

    # ------------------------------------------------------------------- reads
    def list(
        self,
        tenant: str,
        user_id: str,
        filters: MemoryFilters | None = None,
        limit: int = 50,
        cursor: str | None = None,
        order: ListOrder = "created_at",
    ) -> tuple[builtins.list[MemoryRecord], str | None]:
        """A page of memories; ``cursor`` must be a ``next_cursor`` this service returned for this
        user in this ``order`` (a position in one order means nothing in the other: a 400)."""
        scope = user_id if order == "created_at" else f"{user_id}\x1forder={order}"
        inner = self.cursors.verify(tenant, scope, cursor)
        filters = filters or MemoryFilters()
        # A listing's filters are its query string (GET /v1/memories).
        guidance.check_filters(self.tenant_configs.current(tenant), filters, location="query")
        now = datetime.now(UTC)
        records, after = self.store.list(tenant, user_id, filters, limit, inner, order)
        if any(expiry.expired(r, now) for r in records):
            # The same page again without the expired ones (a full page; the cursor is a position).
            alive = filters.model_copy(update={"where": filter_expr.both(filters.where, expiry.alive(now))})
            records, after = self.store.list(tenant, user_id, alive, limit, inner, order)
        return records, self.cursors.sign(tenant, scope, after)

    def users(
        self, tenant: str, limit: int = 50, cursor: str | None = None
    ) -> tuple[builtins.list[UserSummary], str | None]:
        """A page of the tenant's users; ``cursor`` must be a ``next_cursor`` this returned for the tenant."""
        inner = self.cursors.verify(tenant, USERS_CURSOR, cursor)
        page, after = self.store.users(tenant, limit, inner)
        return page, self.cursors.sign(tenant, USERS_CURSOR, after)

    def export_page(
        self,
        tenant: str,
        user_id: str,
        *,
        limit: int,
        cursor: str | None = None,
        embeddings: bool = True,
        max_bytes: int | None = None,
        size: Callable[[str], int] = len,
    ) -> tuple[builtins.list[str], str | None]:
        """A page of the user's export (record lines, newest first) and the cursor of the next one."""
        scope = f"{user_id}\x1fexport"
        inner = self.cursors.verify(tenant, scope, cursor)
        lines, after = transfer.export_page(
            self.store,
            tenant,
            user_id,
            limit=limit,
            cursor=inner,
            embeddings=embeddings,
            max_bytes=max_bytes,
            size=size,
        )
        return lines, self.cursors.sign(tenant, scope, after)

    def import_records(
        self, tenant: str, user_id: str, header: dict[str, Any], records: builtins.list[MemoryRecord]
    ) -> transfer.ImportReport:
        """Write an export's records as ``tenant``/``user_id``'s (what is there already is skipped)."""
        return transfer.import_records(
            self.store,
            header,
            records,
            self.embedder,
            self.settings.embedding.coarse_dim,
            tenant=tenant,
            user_id=user_id,
        )

    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord:
        record = versions.visible_or_404(self.store, tenant, user_id, memory_id)
        if expiry.expired(record, datetime.now(UTC)):
            raise NotFound(f"memory {memory_id} not found")
        return record

    def history(self, tenant: str, user_id: str, memory_id: str) -> builtins.list[MemoryRecord]:
        """The version chain, oldest first, without the versions that have expired."""
        now = datetime.now(UTC)
        chain = [
            r for r in versions.history(self.store, tenant, user_id, memory_id) if not expiry.expired(r, now)
        ]
        if not chain:
            raise NotFound(f"memory {memory_id} not found")
        return chain

    def sweep_expired(self, tenant: str, user_id: str, now: datetime | None = None) -> builtins.list[str]:
        """Delete (tombstone) the user's memories whose expiry has passed; their ids."""
        return self.delete_matching(
            tenant, user_id, MemoryFilters(where=expiry.due(now or datetime.now(UTC))), now
        )

    # ------------------------------------------------------------------ writes
    def update(
        self,
        tenant: str,
        user_id: str,
        memory_id: str,
        content: str | None = None,
        now: datetime | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        expires: Expiry | None = None,
    ) -> MemoryRecord:
        """A new version with new ``content``, ``metadata`` (replacing the caller's labels) and/or expiry.

        ``expires``: ``Expiry(at=None)`` never expires any more.
        """
        old = versions.current_or_404(self.store, tenant, user_id, memory_id)
        labels = old.metadata if metadata is None else versions.relabelled(old.metadata, metadata)
        if expires is not None:
            labels = expiry.with_expiry(labels, expires.at)
        # Unchanged text keeps its vector: nothing to embed again.
        kept = None if content is not None else self.store.embeddings(tenant, user_id, [old.id]).get(old.id)
        new = versions.new_version(
            old,
            content=content,
            embedder=self.embedder,
            coarse_dim=self.settings.embedding.coarse_dim,
            old_vector=kept,
            now=now,
            metadata={**labels, "edited": "manual"},
        )
        self.store.supersede(tenant, user_id, old.id, new)
        self._written(tenant, new)
        return new

    def delete(self, tenant: str, user_id: str, memory_id: str, now: datetime | None = None) -> MemoryRecord:
        old = versions.current_or_404(self.store, tenant, user_id, memory_id)
        tombstone = self._tombstone(old, now)
        self.store.supersede(tenant, user_id, old.id, tombstone)
        self._written(tenant, tombstone)
        self._delete_passages(tenant, user_id, old, now)
        return tombstone

    def _delete_passages(self, tenant: str, user_id: str, old: MemoryRecord, now: datetime | None) -> None:
        """A deleted turn's passages (``domain/chunks.py``) go with it: none may find it again."""
        ids = [passage_id(old.id, i) for i in range(1, int(old.metadata.get("passages", 1)))]
        if not ids:
            return  # no passages (nearly every record): no read
        for passage in self.store.get_many(tenant, user_id, ids).values():
            if passage.is_current and not passage.deleted:
                self.store.supersede(tenant, user_id, passage.id, self._tombstone(passage, now))

    def _tombstone(self, old: MemoryRecord, now: datetime | None) -> MemoryRecord:
        """The deleted version that supersedes ``old``: no content, no vector."""
        return versions.new_version(
            old,
            content=None,
            embedder=None,
            coarse_dim=self.settings.embedding.coarse_dim,
            deleted=True,
            now=now,
        )

    def _written(self, tenant: str, *records: MemoryRecord) -> None:
        """Tell the tenant's webhook (when it asks) about versions written here."""
        if self.webhooks is not None:
            self.webhooks.memories_written(tenant, records)

    def delete_matching(
        self, tenant: str, user_id: str, filters: MemoryFilters, now: datetime | None = None
    ) -> builtins.list[str]:
        """Delete (tombstone) every current memory of the user that ``filters`` keep; their ids.

        Mem0's ``delete_all(agent_id=, run_id=)``. The ids are read first, then each is
        deleted, so the listing never pages over its own tombstones; one edited or deleted
        meanwhile is left to whoever changed it.
        """
        ids: builtins.list[str] = []
        cursor = None
        while True:
            page, cursor = self.store.list(tenant, user_id, filters, 500, cursor)
            ids.extend(r.id for r in page)
            if cursor is None:
                break
        deleted = []
        for memory_id in ids:
            try:
                self.delete(tenant, user_id, memory_id, now=now)
            except (Conflict, NotFound):
                continue
            deleted.append(memory_id)
        return deleted

    # ------------------------------------------------------------ keyed memories
    def put_key(
        self,
        tenant: str,
        user_id: str,
        key: str,
        content: str,
        *,
        session_id: str | None = None,
        scope: Scope | None = None,
        kind: Kind | None = None,
        category: str | None = None,
        event_time: datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[MemoryRecord, bool]:
        """Write the memory named ``key`` directly (no extraction); returns (record, created).

        ``category``: one of the tenant's categories (else ``ValidationFailed``).
        """
        if category is not None:
            guidance.check_categories(self.tenant_configs.current(tenant), [category], "category")
        # The one bound every time entering the system goes through: year 10000 stored here
        # broke every later read and job of the user.
        TimeBounds(self.settings.api.earliest_time, self.settings.api.latest_time).check(
            [("event_time", event_time)]
        )
        record, created = keyed.put_key(
            self.store,
            self.embedder,
            self.settings.embedding.coarse_dim,
            tenant,
            user_id,
            key,
            content,
            fields=keyed.record_fields(session_id, scope, kind, category, event_time),
            metadata=dict(metadata or {}),
        )
        self._written(tenant, record)
        return record, created

    def get_key(self, tenant: str, user_id: str, key: str) -> MemoryRecord:
        return keyed.get_key(self.store, tenant, user_id, key)

    def delete_key(self, tenant: str, user_id: str, key: str) -> MemoryRecord:
        return self.delete(tenant, user_id, keyed.get_key(self.store, tenant, user_id, key).id)

    def sources(
        self, tenant: str, user_id: str, memory_id: str
    ) -> builtins.list[tuple[str, MemoryRecord | None]]:
        """(message id, its raw turn or None) for each source of any version of a memory, tombstones too."""
        record = self.store.get(tenant, user_id, memory_id)
        if record is None:
            raise NotFound(f"memory {memory_id} not found")
        turn_ids = {source: stm_memory_id(tenant, user_id, source) for source in record.source_ids}
        found = self.store.get_many(tenant, user_id, builtins.list(turn_ids.values()))
        return [(source, found.get(turn_id)) for source, turn_id in turn_ids.items()]

    def restore(self, tenant: str, user_id: str, memory_id: str, now: datetime | None = None) -> MemoryRecord:
        """A new current version with the content of version ``memory_id`` (a tombstone: the one before it).

        Undoes a delete (restore the tombstone or any live version) or an edit (restore an older version).
        """
        chain = versions.history(self.store, tenant, user_id, memory_id)
        at = next(i for i, r in enumerate(chain) if r.id == memory_id)
        live = [r for r in chain[: at + 1] if not r.deleted]
        if not live:
            raise NotFound(f"memory {memory_id} has no version to restore")
        target, latest = live[-1], chain[-1]
        if latest.id == target.id:
            raise Conflict(f"memory {memory_id} is the current version already")
        new = versions.new_version(
            latest,
            content=target.content,
            embedder=self.embedder,
            coarse_dim=self.settings.embedding.coarse_dim,
            now=now,
            metadata={**target.metadata, "edited": "restored", "restored_from": target.id},
        )
        self.store.supersede(tenant, user_id, latest.id, new)
        self._written(tenant, new)
        return new

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        """Erase the user from every store; what was removed, per store.

        The memory store goes first and last. First: should a later step fail
        (a queue or table refusing the call), the user's long-term memories are
        already gone and fenced, not searchable while the STM they came from is
        gone; the caller's retry runs every step again, and each is idempotent,
        so retries converge. Last: a job that read the STM before it was
        deleted began before this second erasure marker, so whatever it wrote
        is deleted now and whatever it still writes is refused (the marker is
        the fence, domain/erasure.py); the store also compacts its file here.
        """
        try:
            counts = self._erase(tenant, user_id)
        except StorageFull:
            # A full volume must not keep a user from being forgotten: the space held back for
            # this is given up and the erase (idempotent) runs again in it.
            if self.reserve is None or not self.reserve.release():
                raise
            counts = self._erase(tenant, user_id)
        if self.reserve is not None:
            self.reserve.refill()
        forget_all(self.embedder)  # the memo holds the user's texts by their words
        return counts

    def _erase(self, tenant: str, user_id: str) -> dict[str, int]:
        counts = dict(self.store.erase_user(tenant, user_id))
        if self.job_recorder is not None:  # before the STM: on DynamoDB it finds them from there
            counts["job_statuses"] = self.job_recorder.statuses.erase_user(tenant, user_id)
        counts["stm"] = self.stm.erase_user(tenant, user_id)
        if self.queue is not None:
            counts["jobs"] = self.queue.erase_user(tenant, user_id)
        if self.leases is not None:
            counts["leases"] = self.leases.erase_user(tenant, user_id)
        for name, late in self.store.erase_user(tenant, user_id).items():
            counts[name] = counts.get(name, 0) + late
        return counts

    # -------------------------------------------------------------------- jobs
    def jobs(self, tenant: str) -> tuple[builtins.list[dict[str, Any]] | None, builtins.list[dict[str, Any]]]:
        """(the tenant's jobs not done yet, or None where unlistable; its dead-lettered jobs)."""
        if self.queue is None:  # jobs run inline: nothing ever waits
            return [], []
        return self.queue.waiting(tenant), self.queue.dead_letters(tenant)

    def job(self, tenant: str, job_id: str) -> JobStatus:
        """The state of one of the tenant's jobs; another tenant's, an unknown or an expired one: 404."""
        found = None
        if self.job_recorder is not None:
            found = jobs.visible(self.job_recorder.statuses.get(tenant, job_id), datetime.now(UTC))
        if found is None:
            raise NotFound(f"job {job_id} not found (job states are kept for a while after they end)")
        return found

    def redrive(self, tenant: str, job_ids: builtins.list[str] | None = None) -> int:
        """Put the tenant's dead-lettered jobs (or those of ``job_ids``) back on the queue."""
        return 0 if self.queue is None else self.queue.redrive(tenant, job_ids)

    def process_job(self, job: Job) -> None:
        handler = self.job_handlers.get(job.type)
        if handler is None:
            raise RuntimeError(f"no handler for job type {job.type!r}")
        try:
            handler(job)
        except Erased:
            forget_all(self.embedder)  # it may have embedded the erased user's texts again
            raise
        # (a webhook delivery writes no memory: nothing to keep up)
        if job.type != "webhook" and isinstance(self.store, Compacting):
            # The store's upkeep for this user (the small tier's snapshot), after the job's writes.
            # It is redone after the next job if it fails: the job itself has succeeded.
            try:
                self.store.compact_user(job.tenant, job.user_id)
            except DependencyFailed:
                logger.warning("store upkeep after a job failed; the next job retries it", exc_info=True)

    # ----------------------------------------------------------- consolidation
    def consolidate(
        self, tenant: str, user_id: str, *, sync: bool = True, now: datetime | None = None
    ) -> dict[str, Any]:
        """Consolidate one user's STM into LTM now (``sync``), or enqueue the job and say so."""
        if not sync and self.queue is not None:
            job = Job(
                type="consolidate",
                tenant=tenant,
                user_id=user_id,
                payload={"now": now.isoformat()} if now else {},
            )
            self.queue.send([job])
            return {
                "tenant": tenant,
                "user_id": user_id,
                "status": "queued",
                "job_id": job.id,
                "read": 0,
                "written": 0,
                "updated": 0,
                "unchanged": 0,
                "marked": 0,
            }
        if self.consolidator is None:
            raise RuntimeError("consolidation is not configured on this service")
        # One fence for the run and its profile refresh: an erase meanwhile refuses both's writes.
        fence = Fence.at(datetime.now(UTC))
        report = self.consolidator.run(tenant, user_id, now=now, fence=fence).as_dict()
        # Every due user passes here on the schedule: the sweep of expired memories rides along.
        report["expired"] = len(self.sweep_expired(tenant, user_id, now))
        if self.profiles is not None:
            # Cross-session profile memories, rebuilt from what the user's memories now say.
            profiles = self.profiles.refresh(tenant, user_id, now or datetime.now(UTC), fence=fence)
            report["profiles"] = profiles.as_dict()
        return report

    def run_consolidate_job(self, job: Job) -> None:
        """The "consolidate" job handler (local queue and the SQS worker)."""
        when = job.payload.get("now")
        now = datetime.fromisoformat(when) if when else None
        self.consolidate(job.tenant, job.user_id, sync=True, now=now)

    def schedule_consolidation(self, now: datetime | None = None) -> dict[str, Any]:
        """Purge expired STM, then fan out one consolidate job per due user (run inline without a queue)."""
        from memstack.domain.consolidation.scheduler import OutboxSweep, due_users, housekeeping, schedule

        s = self.settings.scheduler
        now_ = now or datetime.now(UTC)
        max_age = timedelta(hours=s.consolidation_max_age_hours)
        if self.queue is None:
            purged = housekeeping(self.stm, now_)
            due = due_users(self.stm, now_, s.consolidation_threshold, max_age)
            return {
                "purged_expired": purged,
                "jobs": 0,
                "users": [self.consolidate(d.tenant, d.user_id, now=now) for d in due],
            }
        return schedule(
            self.stm,
            self.queue,
            now=now,
            threshold=s.consolidation_threshold,
            max_age=max_age,
            slot=timedelta(seconds=s.consolidation_interval_seconds),
            outbox=OutboxSweep(
                after=timedelta(seconds=s.outbox_sweep_after_seconds),
                window=timedelta(hours=s.outbox_sweep_window_hours),
                limit=s.outbox_sweep_limit,
            ),
        )

    def close(self) -> None:
        for closer in reversed(self.closers):
            closer()
