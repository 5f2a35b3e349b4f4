"""Versions: every change is a new record that replaces the old one (git-like history).

``UPDATE`` writes version + 1 with ``replaces_id`` pointing back; ``DELETE``
writes a tombstone version (``deleted=True``), so history keeps what was
known and search never shows it again.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from memstack.domain.vectors import coarse_prefix
from memstack.errors import Conflict, NotFound
from memstack.models import SYSTEM_METADATA_KEYS, MemoryRecord, new_id
from memstack.ports.embedder import Embedder
from memstack.ports.store import MemoryStore


def relabelled(old: dict[str, object], labels: dict[str, object]) -> dict[str, object]:
    """``labels`` replace the caller's metadata of ``old``; the system's keys stay as they were."""
    return {**labels, **{k: v for k, v in old.items() if k in SYSTEM_METADATA_KEYS}}


def visible_or_404(store: MemoryStore, tenant: str, user_id: str, memory_id: str) -> MemoryRecord:
    """Any version of a memory that is not a tombstone (what ``GET`` may show)."""
    record = store.get(tenant, user_id, memory_id)
    if record is None or record.deleted:
        raise NotFound(f"memory {memory_id} not found")
    return record


def head(store: MemoryStore, tenant: str, user_id: str, record: MemoryRecord) -> MemoryRecord:
    """The current version of the chain ``record`` belongs to (``record`` itself when it is current)."""
    seen = {record.id}
    while not record.is_current:
        nxt = store.successor(tenant, user_id, record.id)
        if nxt is None or nxt.id in seen:
            break
        seen.add(nxt.id)
        record = nxt
    return record


def current_or_404(store: MemoryStore, tenant: str, user_id: str, memory_id: str) -> MemoryRecord:
    """The current version (what an edit or a delete may replace).

    An older version of a memory that is still alive is a ``Conflict`` (409),
    not a 404: it is what the loser of two concurrent edits holds, and the
    answer names the version to retry on. A deleted memory is ``NotFound``.
    """
    record = visible_or_404(store, tenant, user_id, memory_id)
    if record.is_current:
        return record
    latest = head(store, tenant, user_id, record)
    if latest.deleted or not latest.is_current:
        raise NotFound(f"memory {memory_id} was deleted")
    raise Conflict(
        f"memory {memory_id} was replaced by version {latest.version} ({latest.id}); "
        "read it and retry on that id",
        [
            {
                "field": "memory_id",
                "location": "path",
                "message": f"not the current version; the current one is {latest.id}",
                "type": "not_current",
                "current_id": latest.id,
            }
        ],
    )


def new_version(
    old: MemoryRecord,
    *,
    content: str | None,
    embedder: Embedder | None,
    coarse_dim: int,
    old_vector: np.ndarray | None = None,
    deleted: bool = False,
    now: datetime | None = None,
    **changes: object,
) -> MemoryRecord:
    """The record that replaces ``old``: same identity fields, version + 1.

    New text is embedded again; unchanged text keeps ``old_vector``; a
    tombstone carries no vector (it is never searched).
    """
    now = now or datetime.now(UTC)
    text = content if content is not None else old.content
    record = old.model_copy(
        update={
            "id": new_id(),
            "content": text,
            "search_text": None if content is not None else old.search_text,
            "created_at": now,
            "is_current": True,
            "superseded_at": None,
            "deleted": deleted,
            "replaces_id": old.id,
            "version": old.version + 1,
            # A link names the versions that disagreed: a new version of either settles the pair.
            "conflicts_with": [],
            "embedding_full": None,
            "embedding_coarse": None,
            **changes,
        }
    )
    vec = None
    if not deleted:
        if content is not None and embedder is not None:
            vec = embedder.embed([text])[0]
        elif old_vector is not None:
            vec = np.asarray(old_vector, dtype=np.float32)
    if vec is not None:
        record.embedding_full = vec.tolist()
        record.embedding_coarse = coarse_prefix(vec, coarse_dim).tolist()
    return record


def history(
    store: MemoryStore, tenant: str, user_id: str, memory_id: str, record: MemoryRecord | None = None
) -> list[MemoryRecord]:
    """The whole version chain that ``memory_id`` belongs to, oldest first.

    ``record``: the record of ``memory_id`` when the caller has just read it (search results).
    """
    if record is None or (record.tenant, record.user_id, record.id) != (tenant, user_id, memory_id):
        record = store.get(tenant, user_id, memory_id)
    if record is None:
        raise NotFound(f"memory {memory_id} not found")
    chain = [record]
    seen = {record.id}
    while chain[0].replaces_id and chain[0].replaces_id not in seen:
        prev = store.get(tenant, user_id, chain[0].replaces_id)
        if prev is None:
            break
        seen.add(prev.id)
        chain.insert(0, prev)
    while (nxt := store.successor(tenant, user_id, chain[-1].id)) is not None and nxt.id not in seen:
        seen.add(nxt.id)
        chain.append(nxt)
    return chain
