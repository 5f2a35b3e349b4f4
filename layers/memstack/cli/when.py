"""The "when" of a memory in the CLI's tables: when it happened or was said, not when it was written.

An extracted memory is written when extraction runs (today), but the fact was
stated when its source message was said (maybe months ago): that is the time
a person expects to see.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memstack.domain.ingest import stm_memory_id
from memstack.models import MemoryRecord
from memstack.service import MemoryService


def when_said(
    service: MemoryService, tenant: str, user_id: str, records: Sequence[MemoryRecord]
) -> dict[str, datetime]:
    """Each record's event time, else the earliest time its source messages were said, else its write time."""
    wanted = {
        r.id: [stm_memory_id(tenant, user_id, s) for s in r.source_ids] for r in records if not r.event_time
    }
    sources = service.store.get_many(tenant, user_id, sorted({i for ids in wanted.values() for i in ids}))
    out: dict[str, datetime] = {}
    for r in records:
        said = [t for i in wanted.get(r.id, []) if (src := sources.get(i)) and (t := src.event_time)]
        out[r.id] = r.event_time or (min(said) if said else r.created_at)
    return out
