"""Ingestion stage 1: the immediate, durable save of every message.

A message is stored in the short-term store (the durable record) and indexed
as an STM memory (tier ``stm``) with its embeddings before ``add`` returns.
Extraction (stages 2-4) runs later from the job queue. Re-sending a message id
stores nothing twice: the STM append is conditional and the STM memory id is
derived from (tenant, user, message id).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from memstack.domain.indexing import IndexingConfig, index_turns
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryRecord, Message, Scope, Tier
from memstack.ports.embedder import Embedder
from memstack.ports.queue import Job, JobQueue
from memstack.ports.stm import ShortTermStore, StmEntry
from memstack.ports.store import MemoryStore

#: every raw turn's memory id starts with it; LTM ids (``models.new_id``) are uuid4 hex
_TURN_PREFIX = "stm_"


def stm_memory_id(tenant: str, user_id: str, message_id: str) -> str:
    digest = hashlib.blake2b(f"{tenant}\x1f{user_id}\x1f{message_id}".encode(), digest_size=12).hexdigest()
    return f"{_TURN_PREFIX}{digest}"


def is_turn_id(memory_id: str) -> bool:
    """True for the id of a raw turn (tier ``stm``): LTM ids are uuid4 hex and never carry the prefix."""
    return memory_id.startswith(_TURN_PREFIX)


@dataclass(frozen=True)
class IngestConfig:
    coarse_dim: int = 128
    stm_ttl_days: int = 30
    indexing: IndexingConfig = field(default_factory=IndexingConfig)


@dataclass
class IngestResult:
    accepted: list[str]
    stored: list[str]
    queued: int
    drained: bool = False  # sync: every queued job ran before the deadline


class Ingestor:
    def __init__(
        self,
        store: MemoryStore,
        stm: ShortTermStore,
        embedder: Embedder,
        config: IngestConfig,
        queue: JobQueue | None = None,
    ) -> None:
        self.store = store
        self.stm = stm
        self.embedder = embedder
        self.config = config
        self.queue = queue

    def add(
        self,
        tenant: str,
        user_id: str,
        messages: list[Message],
        *,
        session_id: str | None = None,
        scope: Scope = Scope.USER,
        infer: bool = True,
        metadata: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> IngestResult:
        now = now or datetime.now(UTC)
        expires = int((now + timedelta(days=self.config.stm_ttl_days)).timestamp())
        stamped = [m if m.timestamp else m.model_copy(update={"timestamp": now}) for m in messages]
        # Embed first: if the model fails nothing is half-written.
        indexed = index_turns(stamped, self.config.indexing)
        vectors = self.embedder.embed([t.embed_text for t in indexed]) if stamped else None
        entries = [
            StmEntry(
                tenant=tenant,
                user_id=user_id,
                session_id=session_id,
                scope=scope,
                message=m,
                received_at=now,
                expires_at=expires,
            )
            for m in stamped
        ]
        stored = self.stm.append(entries)
        ids = [stm_memory_id(tenant, user_id, m.id) for m in stamped]
        existing = self.store.get_many(tenant, user_id, ids)
        records = []
        for i, (m, mem_id) in enumerate(zip(stamped, ids, strict=True)):
            if mem_id in existing:
                continue
            assert vectors is not None
            records.append(
                MemoryRecord(
                    id=mem_id,
                    tenant=tenant,
                    user_id=user_id,
                    session_id=session_id,
                    scope=scope,
                    tier=Tier.STM,
                    content=m.content,
                    search_text=indexed[i].search_text,
                    speaker=m.speaker,
                    event_time=m.timestamp,
                    created_at=now,
                    source_ids=[m.id],
                    metadata={"role": str(m.role), **(metadata or {})},
                    embedding_full=vectors[i].tolist(),
                    embedding_coarse=coarse_prefix(vectors[i], self.config.coarse_dim).tolist(),
                )
            )
        self.store.put(records)
        queued = 0
        if infer and self.queue is not None and stored:
            jobs = [
                Job(
                    type="extract",
                    tenant=tenant,
                    user_id=user_id,
                    payload={
                        "message_id": mid,
                        "session_id": session_id,
                        "scope": str(scope),
                        # The caller's metadata, carried onto the memories extracted from the message.
                        **({"metadata": metadata} if metadata else {}),
                    },
                )
                for mid in stored
            ]
            self.queue.send(jobs)
            queued = len(jobs)
        return IngestResult(accepted=[m.id for m in stamped], stored=stored, queued=queued)
