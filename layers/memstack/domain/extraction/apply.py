"""Apply extraction decisions to the store as versioned LTM records.

ADD puts a new record; UPDATE writes version + 1 that replaces the target
(``store.supersede``: the old one becomes not current in the same atomic
step); DELETE writes a tombstone version; NONE writes nothing. CONFLICT puts
a new record that names the current target in ``conflicts_with``, then adds
the new record's id to the target's (``store.link_conflicts``): both stay
current, each pointing at the other.

Idempotent: every written record carries an ``op_key`` (a hash of the
operation's source ids, type and text) in its metadata, and an operation whose
key is already on a record from the same sources is skipped, so a job retried
after a crash, or a message processed twice, changes nothing the second time.
An ADD whose text is already a current memory is a duplicate and skipped too.
Consolidation (engineer F) reuses this function for its synthesised memories.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memstack.domain import versions
from memstack.domain.embedding_memo import EmbeddingMemo
from memstack.domain.extraction.specific import specific_rankings
from memstack.domain.ingest import turn_record_ids
from memstack.domain.vectors import coarse_prefix
from memstack.errors import Conflict
from memstack.models import MemoryFilters, MemoryRecord, Scope, ScoredId, Tier
from memstack.ports.embedder import Embedder
from memstack.ports.llm import ExtractionOp
from memstack.ports.store import Fence, MemoryStore

# Cosine on the full vectors at or above which an ADD is the same memory again.
DUPLICATE_COSINE = 0.99
_DUPLICATE_CANDIDATES = 5


def normalise_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold().rstrip(".!")


def op_key(op: ExtractionOp) -> str:
    """Stable identity of an operation: same sources, same decision, same text -> same key."""
    basis = "\x1f".join([",".join(sorted(op.source_ids)), op.op, normalise_text(op.content or "")])
    if op.op == "DELETE":
        basis += "\x1f" + (op.target_id or "")
    return hashlib.blake2b(basis.encode(), digest_size=12).hexdigest()


class _Applier:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        coarse_dim: int,
        tenant: str,
        user_id: str,
        session_id: str | None,
        scope: Scope,
        now: datetime,
        fence: Fence | None,
    ) -> None:
        self.store, self.embedder, self.coarse_dim, self.fence = store, embedder, coarse_dim, fence
        self.tenant, self.user_id, self.session_id, self.scope, self.now = (
            tenant,
            user_id,
            session_id,
            scope,
            now,
        )
        self._by_source: dict[str, list[MemoryRecord]] = {}
        #: stored on every record this applier writes (see apply_operations)
        self.metadata: dict[str, Any] = {}

    # ------------------------------------------------------------- idempotency
    def already_applied(self, op: ExtractionOp, key: str) -> bool:
        for source in op.source_ids:
            if source not in self._by_source:
                self._by_source[source] = self.store.find_by_source(self.tenant, self.user_id, source)
            if any(r.metadata.get("op_key") == key for r in self._by_source[source]):
                return True
        return False

    def _embed(self, text: str) -> np.ndarray:
        return np.asarray(self.embedder.embed([text])[0], dtype=np.float32)

    def _duplicate(self, content: str, vector: np.ndarray) -> MemoryRecord | None:
        """A current LTM memory visible here that says the same thing."""
        filters = MemoryFilters(tier=Tier.LTM, session_id=self.session_id)
        coarse = coarse_prefix(vector, self.coarse_dim)

        def fetch(depth: int) -> dict[str, list[ScoredId]]:
            found = self.store.vector_search(self.tenant, self.user_id, coarse, depth, filters)
            return {"vector": list(found)}

        def read(ids: list[str]) -> dict[str, MemoryRecord]:
            return self.store.get_many(self.tenant, self.user_id, ids)

        if self.metadata.get("consolidation"):  # consolidation's own writes: anything may say it already
            rankings = fetch(_DUPLICATE_CANDIDATES)
            records = read([h.id for h in rankings["vector"]]) if rankings["vector"] else {}
        else:  # extraction's: only a specific memory makes it a duplicate (specific.py)
            rankings, records = specific_rankings(fetch, read, _DUPLICATE_CANDIDATES)
        ids = [h.id for h in rankings["vector"]]
        if not ids:
            return None
        full = self.store.embeddings(self.tenant, self.user_id, ids)
        wanted = normalise_text(content)
        for memory_id in ids:
            record = records.get(memory_id)
            if record is None or not record.is_current or record.deleted:
                continue
            same_text = normalise_text(record.content) == wanted
            near = memory_id in full and float(np.dot(full[memory_id], vector)) >= DUPLICATE_COSINE
            if same_text or near:
                return record
        return None

    def _head(self, target_id: str | None) -> MemoryRecord | None:
        """The current version of the chain ``target_id`` belongs to (None if unknown or deleted)."""
        if not target_id:
            return None
        record = self.store.get(self.tenant, self.user_id, target_id)
        if record is not None:
            record = versions.head(self.store, self.tenant, self.user_id, record)
        if record is None or not record.is_current or record.deleted or record.tier != Tier.LTM:
            return None
        return record

    # -------------------------------------------------------------- operations
    def add(self, op: ExtractionOp, key: str, conflicts_with: list[str] | None = None) -> MemoryRecord | None:
        if not op.content or not op.content.strip():
            return None
        content = op.content.strip()
        vector = self._embed(content)
        if self._duplicate(content, vector) is not None:
            return None
        record = MemoryRecord(
            tenant=self.tenant,
            user_id=self.user_id,
            session_id=self.session_id,
            scope=self.scope,
            tier=Tier.LTM,
            kind=op.kind,
            category=op.category,
            content=content,
            event_time=op.event_time,
            created_at=self.now,
            source_ids=list(op.source_ids),
            conflicts_with=list(conflicts_with or []),
            metadata={**self.metadata, "op_key": key},
            embedding_full=vector.tolist(),
            embedding_coarse=coarse_prefix(vector, self.coarse_dim).tolist(),
        )
        self.store.put([record], fence=self.fence)
        return record

    def conflict(self, op: ExtractionOp, key: str) -> MemoryRecord | None:
        """Keep the contradicting statement beside the current memory it contradicts, linked both ways."""
        target = self._head(op.target_id)
        record = self.add(op, key, [target.id] if target is not None else None)
        if record is not None and target is not None:
            self.store.link_conflicts(self.tenant, self.user_id, {target.id: [record.id]})
        return record

    def replace(self, op: ExtractionOp, key: str, *, deleted: bool) -> MemoryRecord | None:
        for attempt in range(2):
            old = self._head(op.target_id)
            if old is None:
                # The target is gone (or never existed): an update still states a fact worth keeping.
                return None if deleted else self.add(op, key)
            if not deleted and normalise_text(op.content or "") == normalise_text(old.content):
                return None  # "update" to the same text: nothing changes
            sources = list(dict.fromkeys([*old.source_ids, *op.source_ids]))
            changes: dict[str, Any] = {
                "source_ids": sources,
                "metadata": {**old.metadata, **self.metadata, "op_key": key},
            }
            if not deleted:
                changes.update(
                    kind=op.kind,
                    category=op.category or old.category,
                    event_time=op.event_time or old.event_time,
                )
            new = versions.new_version(
                old,
                content=None if deleted else (op.content or "").strip() or None,
                embedder=None if deleted else self.embedder,
                coarse_dim=self.coarse_dim,
                deleted=deleted,
                now=self.now,
                **changes,
            )
            try:
                self.store.supersede(self.tenant, self.user_id, old.id, new, fence=self.fence)
            except Conflict:
                if attempt:  # a concurrent writer won twice in a row: let the job retry
                    raise
                continue
            self._retire_turns(old)
            return new
        return None

    def _retire_turns(self, old: MemoryRecord) -> None:
        """The raw turns the replaced memory came from now say something outdated.

        They stay searchable (raw history), but are marked consolidated, so
        retrieval weighs them with ``consolidated_stm_weight`` and the current
        version ranks above "I live in Tokyo" once the user has moved.
        """
        turns = turn_record_ids(self.store, self.tenant, self.user_id, list(old.source_ids))
        self.store.mark(self.tenant, self.user_id, turns, consolidated=True)


def apply_operations(
    store: MemoryStore,
    embedder: Embedder,
    coarse_dim: int,
    tenant: str,
    user_id: str,
    ops: list[ExtractionOp],
    *,
    session_id: str | None,
    scope: Scope,
    now: datetime | None = None,
    metadata: dict[str, Any] | None = None,
    fence: Fence | None = None,
) -> list[MemoryRecord]:
    """Write the operations' outcome; returns the records written (new versions and tombstones).

    ``metadata`` is stored on every record written, in the same write (consolidation
    tags its summaries this way, so no crash can leave an untagged one behind). ``fence``:
    when the work writing began; the store refuses the writes if the user was erased since.
    """
    # Every text the operations may write, embedded in one call (a batch costs the model far
    # less per text than one call each); the writes below read their vectors from it.
    texts = [(op.content or "").strip() for op in ops if op.op in ("ADD", "UPDATE", "CONFLICT")]
    texts = [t for t in dict.fromkeys(texts) if t]
    if texts:
        embedder = EmbeddingMemo(embedder, len(texts))
        embedder.embed(texts)
    applier = _Applier(
        store, embedder, coarse_dim, tenant, user_id, session_id, scope, now or datetime.now(UTC), fence
    )
    applier.metadata = dict(metadata or {})
    written: list[MemoryRecord] = []
    seen: set[str] = set()
    for op in ops:
        if op.op == "NONE":
            continue
        key = op_key(op)
        if key in seen or applier.already_applied(op, key):
            continue
        seen.add(key)
        if op.op == "ADD":
            record = applier.add(op, key)
        elif op.op == "CONFLICT":
            record = applier.conflict(op, key)
        else:
            record = applier.replace(op, key, deleted=op.op == "DELETE")
        if record is not None:
            written.append(record)
    return written
