"""The "extract" job: ingestion stages 2-4 for one stored message.

2. speaker and time: the message time (parsed when it was received) is the
   reference for relative dates in the text, which are made absolute;
3. context-aware extraction: the most similar current LTM memories of the user
   (visible in the message's session) and the preceding turns go to the
   extractor, which answers ADD / UPDATE / DELETE / NONE;
4. the operations are applied as versioned, embedded LTM records
   (``apply_operations``), inheriting the message's scope and session.

The message is read back from the short-term store, so a job carries only ids
and a retried job sees exactly what the first attempt saw.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memstack.domain.chunks import NOT_PASSAGE, split_chunks
from memstack.domain.erasure import Fence
from memstack.domain.extraction.apply import apply_operations
from memstack.domain.extraction.specific import specific_rankings
from memstack.domain.indexing import turn_text
from memstack.domain.ingest import stm_memory_id
from memstack.domain.scoring import weighted_rrf
from memstack.domain.sections import ExtractionConfig
from memstack.domain.tenant import rules
from memstack.domain.tenant.config import TenantConfig
from memstack.domain.tenant.guidance import guidance_of
from memstack.domain.time.bounds import TimeBounds
from memstack.domain.vectors import coarse_prefix
from memstack.models import (
    SYSTEM_METADATA_KEYS,
    MemoryFilters,
    MemoryRecord,
    Message,
    Role,
    Scope,
    ScoredId,
    Tier,
)
from memstack.ports.embedder import Embedder
from memstack.ports.llm import ExtractionOp, Extractor
from memstack.ports.queue import Job
from memstack.ports.stm import ShortTermStore
from memstack.ports.store import MemoryStore

if TYPE_CHECKING:
    from memstack.domain.time.relative import Resolution

logger = logging.getLogger(__name__)  # configured at the edges (memstack.logs)


def prepare_message(message: Message, received_at: datetime) -> tuple[Message, Resolution]:
    """Stage 2: the message with its time settled and relative dates made absolute."""
    # Imported by the first job, not with the handler: the API builds this handler (it queues "extract"
    # jobs) but runs none when the queue is SQS, and the relative-date patterns are most of its import.
    from memstack.domain.time.relative import resolve_relative_dates

    when = message.timestamp or received_at  # a Message's timestamp is always aware
    resolution = resolve_relative_dates(message.content, when)
    return message.model_copy(update={"content": resolution.text, "timestamp": when}), resolution


#: what the system itself wrote into a turn's metadata (not the add's): ``models.SYSTEM_METADATA_KEYS``
#: but agent_id (the caller gave it) and expires_at (the add's expiry), which stay with the add's metadata;
#: derived, so a new system key cannot be missed here (passage, passages and adjacent each had to be added)
_SYSTEM_KEYS = SYSTEM_METADATA_KEYS - {"agent_id", "expires_at"}


class ExtractionJobHandler:
    def __init__(
        self,
        store: MemoryStore,
        stm: ShortTermStore,
        embedder: Embedder,
        extractor: Extractor,
        config: ExtractionConfig,
        configs: Callable[[str], TenantConfig] | None = None,
    ) -> None:
        self.store = store
        self.stm = stm
        self.embedder = embedder
        self.extractor = extractor
        self.config = config
        #: a tenant's configuration (its categories, instructions and rules), read where extraction acts
        self.configs = configs or (lambda _tenant: TenantConfig())
        # Where the decided operations are counted (the worker Lambda emits them
        # as the ExtractionOperations metric); None locally.
        self.on_operations: Callable[[list[str]], None] | None = None
        # Who hears of the memories a job wrote (tenant, the versions): webhook events.
        self.on_written: Callable[[str, list[MemoryRecord]], None] | None = None

    def __call__(self, job: Job) -> None:
        self.run(job)

    def run(self, job: Job, now: datetime | None = None) -> list[MemoryRecord]:
        # The job began before it read anything: a store refuses its writes if the user was erased
        # since (domain/erasure.py), so a job racing an erase cannot bring the user back.
        return self._run(job, now, Fence.at(datetime.now(UTC)))

    def _metadata(self, job: Job, message_id: str) -> dict[str, Any] | None:
        """The add's metadata: in the job, or (a job the outbox sweep re-sent) on the turn's STM record."""
        if "metadata" in job.payload or not job.payload.get("swept"):
            return job.payload.get("metadata")
        turn = self.store.get(job.tenant, job.user_id, stm_memory_id(job.tenant, job.user_id, message_id))
        metadata = {k: v for k, v in (turn.metadata if turn else {}).items() if k not in _SYSTEM_KEYS}
        return metadata or None

    def _run(self, job: Job, now: datetime | None, fence: Fence) -> list[MemoryRecord]:
        payload: dict[str, Any] = job.payload
        message_id = str(payload.get("message_id") or "")
        entry = self.stm.get(job.tenant, job.user_id, message_id)
        if entry is None:
            # Expired or erased before the worker got to it: nothing left to extract from.
            logger.warning(
                {"event": "memory_extraction_skipped", "message_id": message_id, "reason": "not in STM"}
            )
            return []
        if entry.extraction == "done":
            return []  # a second delivery of a job that already finished: nothing is owed
        session_id = payload.get("session_id", entry.session_id)
        scope = Scope(payload.get("scope") or entry.scope)
        message, resolution = prepare_message(self._readable(entry.message), entry.received_at)
        stored = entry.message.content == message.content  # no relative date was rewritten
        neighbours = self.neighbours(job.tenant, job.user_id, message, session_id, stored_vector=stored)
        context = self.context(job.tenant, job.user_id, message, session_id)
        tenant_config = self.configs(job.tenant)
        decided = self.extractor.extract(message, context, neighbours, guidance_of(tenant_config))
        # Held to the tenant's rules whatever the extractor (a model may not follow its instructions).
        ops = [
            self._complete(op, message, resolution, self.config.time_bounds)
            for op in rules.screen(tenant_config, decided)
        ]
        written = apply_operations(
            self.store,
            self.embedder,
            self.config.coarse_dim,
            job.tenant,
            job.user_id,
            ops,
            session_id=session_id,
            scope=scope,
            now=now,
            metadata=self._metadata(job, message_id),
            fence=fence,
        )
        # Last: the outbox entry says "done" only once everything above is written.
        self.stm.mark_extracted(job.tenant, job.user_id, [message_id])
        if self.on_operations is not None:
            self.on_operations([op.op for op in ops])
        if self.on_written is not None and written:
            self.on_written(job.tenant, written)
        # Debug: one line per message is too chatty for the CLI; POWERTOOLS_LOG_LEVEL=DEBUG shows it.
        logger.debug(
            {
                "event": "memory_extraction",
                "message_id": message_id,
                "extractor": self.extractor.name,
                "neighbours": len(neighbours),
                "ops": [op.op for op in ops],
                "held_back": len(decided) - len(ops),
                "written": len(written),
            }
        )
        return written

    def _readable(self, message: Message) -> Message:
        """The message as the extractor reads it: a long one cut to its first ``max_chars`` (at a break)."""
        if len(message.content) <= self.config.max_chars:
            return message
        return message.model_copy(update={"content": split_chunks(message.content, self.config.max_chars)[0]})

    @staticmethod
    def _complete(
        op: ExtractionOp, message: Message, resolution: Resolution, bounds: TimeBounds
    ) -> ExtractionOp:
        """Provenance and event time the extractor may have left out; an impossible event time dropped."""
        update: dict[str, Any] = {}
        if not op.source_ids:
            update["source_ids"] = [message.id]
        if op.event_time is not None and bounds.keep(op.event_time) is None:
            update["event_time"] = None
        # Every memory carries the time it is about, else its source turn's: "I live in Ghent"
        # said in June 2024 is true as of then, and a date filter or a time in the query can
        # only weigh a memory that has a time.
        missing = update.get("event_time", op.event_time) is None
        if op.op in ("ADD", "UPDATE", "CONFLICT") and missing:
            update["event_time"] = bounds.keep(resolution.event_time) or message.timestamp
        return op.model_copy(update=update) if update else op

    def neighbours(
        self,
        tenant: str,
        user_id: str,
        message: Message,
        session_id: str | None,
        *,
        stored_vector: bool = False,
    ) -> list[MemoryRecord]:
        """The most similar current LTM memories visible in the session (vector + BM25, fused).

        ``stored_vector``: the message's text is the one ingest embedded, so its turn's stored
        vector is the query (no model call); the model embeds it when the turn has none.
        """
        cfg = self.config
        filters = MemoryFilters(tier=Tier.LTM, session_id=session_id)
        vector = None
        if stored_vector and cfg.turn_vector_reusable:
            turn_id = stm_memory_id(tenant, user_id, message.id)
            vector = self.store.embeddings(tenant, user_id, [turn_id]).get(turn_id)
        if vector is None:
            vector = self.embedder.embed([turn_text(message)])[0]
        coarse = coarse_prefix(vector, cfg.coarse_dim)

        def fetch(depth: int) -> dict[str, list[ScoredId]]:
            return {
                "vector": list(self.store.vector_search(tenant, user_id, coarse, depth, filters)),
                "bm25": list(self.store.bm25_search(tenant, user_id, message.content, depth, filters)),
            }

        # Specific memories only: consolidation's records are not what a turn updates (specific.py).
        rankings, records = specific_rankings(
            fetch, lambda ids: self.store.get_many(tenant, user_id, ids), cfg.neighbours
        )
        fused = weighted_rrf(rankings, {"vector": cfg.weight_vector, "bm25": cfg.weight_bm25}, cfg.rrf_k)
        ranked = [i for i, _ in sorted(fused.items(), key=lambda kv: kv[1], reverse=True)][: cfg.neighbours]
        return [
            records[i] for i in ranked if i in records and records[i].is_current and not records[i].deleted
        ]

    def context(self, tenant: str, user_id: str, message: Message, session_id: str | None) -> list[Message]:
        """The turns just before this one in the same session, oldest first."""
        if self.config.context_turns <= 0 or message.timestamp is None:
            return []
        records, _ = self.store.list(
            tenant,
            user_id,
            # A long reply's passages (vector-only copies of its parts) are no turns: never in the window.
            MemoryFilters(tier=Tier.STM, session_id=session_id, before=message.timestamp, where=NOT_PASSAGE),
            self.config.context_turns * 3,
        )
        turns = [
            r
            for r in records
            # A long turn is context by its first chunk (domain/chunks.py), once.
            if r.session_id == session_id and message.id not in r.source_ids and not r.metadata.get("chunk")
        ]
        turns.sort(key=lambda r: r.event_time or r.created_at)
        out = []
        for r in turns[-self.config.context_turns :]:
            role = r.metadata.get("role", Role.USER)
            out.append(
                Message(
                    id=(r.source_ids or [r.id])[0],
                    role=role if role in set(Role) else Role.USER,
                    speaker=r.speaker,
                    content=r.content,
                    timestamp=r.event_time or r.created_at,
                )
            )
        return out
