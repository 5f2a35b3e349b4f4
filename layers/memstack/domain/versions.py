"""Versions: every change is a new record that replaces the old one (git-like history).

``UPDATE`` writes version + 1 with ``replaces_id`` pointing back; ``DELETE``
writes a tombstone version (``deleted=True``), so history keeps what was
known and search never shows it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import cast

import numpy as np

from memstack.domain.vectors import coarse_prefix
from memstack.errors import Conflict, NotFound
from memstack.models import SYSTEM_METADATA_KEYS, MemoryRecord, new_id
from memstack.ports.embedder import Embedder
from memstack.ports.store import MemoryStore, SuccessorsInOneRead, implements


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
    return histories(store, tenant, user_id, [record])[0]


def histories(
    store: MemoryStore, tenant: str, user_id: str, records: Sequence[MemoryRecord]
) -> list[list[MemoryRecord]]:
    """``history`` of each of the user's ``records``, walked together: one read per step back
    (``get_many``) and one per step forward (``successors``) for every chain at once, so a
    search's ten hits cost two reads where each has no other version, not ten."""
    chains = [[r] for r in records]
    seen = [{r.id} for r in records]
    back = list(range(len(chains)))  # the chains that may still reach further back
    while back:
        want = {i: prev for i in back if (prev := chains[i][0].replaces_id) and prev not in seen[i]}
        if not want:
            break
        older = store.get_many(tenant, user_id, sorted(set(want.values())))
        back = [i for i, prev in want.items() if prev in older]
        for i in back:
            seen[i].add(want[i])
            chains[i].insert(0, older[want[i]])
    ahead = list(range(len(chains)))  # the chains that may still reach further forward
    while ahead:
        newer = successors(store, tenant, user_id, sorted({chains[i][-1].id for i in ahead}))
        steps = {i: nxt for i in ahead if (nxt := newer.get(chains[i][-1].id)) and nxt.id not in seen[i]}
        for i, nxt in steps.items():
            seen[i].add(nxt.id)
            chains[i].append(nxt)
        ahead = list(steps)
    return chains


def successors(store: MemoryStore, tenant: str, user_id: str, ids: list[str]) -> dict[str, MemoryRecord]:
    """``successor`` of each id that has one: one read where the store has ``SuccessorsInOneRead``."""
    if implements(store, SuccessorsInOneRead):
        return cast(SuccessorsInOneRead, store).successors(tenant, user_id, ids)
    return {i: nxt for i in ids if (nxt := store.successor(tenant, user_id, i)) is not None}
