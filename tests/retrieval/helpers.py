"""Small builders for retrieval tests: records with real (hashing) embeddings."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memstack.domain.ingest import stm_memory_id
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryRecord, Tier
from memstack.service import MemoryService

T, U = "t1", "u1"
REF = datetime(2024, 6, 19, 12, 0, tzinfo=UTC)  # a Wednesday


def record(service: MemoryService, content: str, source: str, **fields: Any) -> MemoryRecord:
    vec = service.embedder.embed([content])[0]
    base: dict[str, Any] = {
        "tenant": T,
        "user_id": U,
        "content": content,
        "source_ids": [source],
        "tier": Tier.LTM,
        "event_time": REF,
    }
    base.update(fields)
    if base["tier"] == Tier.STM and "id" not in fields:
        # What ingestion gives a raw turn: its id says it is one (retrieval's evidence units read it).
        base["id"] = stm_memory_id(T, U, base["source_ids"][0])
    return MemoryRecord(
        **base,
        embedding_full=vec.tolist(),
        embedding_coarse=coarse_prefix(vec, service.settings.embedding.coarse_dim).tolist(),
    )


def put(service: MemoryService, *records: MemoryRecord) -> list[MemoryRecord]:
    service.store.put(list(records))
    return list(records)
