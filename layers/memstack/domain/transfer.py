"""Moving a user's memories between stores: JSON lines out of one backend, into another.

A file is a header line, then one record per line: every field of every
version (superseded ones and tombstones too, so history survives the move),
with the full embedding. The coarse vector is not written: it is always the
normalised Matryoshka prefix of the full one (``domain.vectors.coarse_prefix``),
so the importing side recomputes it for its own ``coarse_dim``. The header
names the embedder; vectors of one model are meaningless to another, so an
import with a different embedder re-embeds instead of copying them.

Only the port is used, so every backend exports and imports the same way.
The short-term buffer of raw messages waiting for consolidation is not part
of the store; consolidate a user before moving them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from memstack.domain.embedder_record import NamedEmbedder
from memstack.domain.ingest import stm_memory_id
from memstack.domain.keyed import KEY_FIELD, keyed_id
from memstack.domain.vectors import coarse_prefix
from memstack.errors import BadRequest, Conflict
from memstack.models import MemoryFilters, MemoryRecord, Tier
from memstack.ports.embedder import Embedder
from memstack.ports.store import MemoryStore

FORMAT = "memstack-export"
FORMAT_VERSION = 1
#: records per listing page and per write (small enough for any backend's request limits)
PAGE = 100
EMBED_BATCH = 64


def embed_text(record: MemoryRecord) -> str:
    """What ingestion embedded: a raw turn with its speaker (``indexing.turn_text``), a memory as written."""
    if record.tier == Tier.STM and record.speaker:
        return f"{record.speaker}: {record.content}"
    return record.content


def user_records(store: MemoryStore, tenant: str, user_id: str) -> list[MemoryRecord]:
    """Every version of every memory of the user, oldest first, with full embeddings."""
    records: dict[str, MemoryRecord] = {}
    cursor = None
    while True:
        page, cursor = store.list(tenant, user_id, MemoryFilters(include_superseded=True), PAGE, cursor)
        records.update((r.id, r) for r in page)
        if cursor is None:
            break
    # Listings leave tombstones out; each is the successor of the version it deleted.
    for record in list(records.values()):
        if not record.is_current:
            successor = store.successor(tenant, user_id, record.id)
            while successor is not None and successor.id not in records:
                records[successor.id] = successor
                successor = store.successor(tenant, user_id, successor.id)
    ordered = sorted(records.values(), key=lambda r: (r.created_at, r.version, r.id))
    ids = [r.id for r in ordered]
    vectors: dict[str, np.ndarray] = {}
    for start in range(0, len(ids), PAGE):
        vectors.update(store.embeddings(tenant, user_id, ids[start : start + PAGE]))
    for record in ordered:
        vector = vectors.get(record.id)
        record.embedding_full = vector.tolist() if vector is not None else None
        record.embedding_coarse = None
    return ordered


def export_lines(store: MemoryStore, tenant: str, user_id: str, embedder: NamedEmbedder) -> Iterator[str]:
    records = user_records(store, tenant, user_id)
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "tenant": tenant,
        "user_id": user_id,
        "records": len(records),
        "embedder": embedder.name,
        "embedding_dim": embedder.dim,
    }
    yield json.dumps(header, ensure_ascii=False)
    for record in records:
        yield json.dumps(record.model_dump(mode="json", exclude={"embedding_coarse"}), ensure_ascii=False)


@dataclass
class ImportReport:
    imported: int = 0
    skipped_existing: int = 0
    reembedded: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "imported": self.imported,
            "skipped_existing": self.skipped_existing,
            "reembedded": self.reembedded,
        }


def _parse(lines: Iterable[str]) -> tuple[dict[str, Any], list[MemoryRecord]]:
    header: dict[str, Any] | None = None
    records: list[MemoryRecord] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadRequest(f"line {number} is not JSON: {exc.msg}") from None
        if header is None:
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise BadRequest(f"line {number}: not a memstack export (no {FORMAT!r} header)")
            if data.get("version") != FORMAT_VERSION:
                raise BadRequest(
                    f"line {number}: export format version {data.get('version')} is not supported"
                )
            header = data
            continue
        try:
            records.append(MemoryRecord.model_validate(data))
        except ValueError as exc:
            raise BadRequest(f"line {number} is not a memory record: {exc}") from None
    if header is None:
        raise BadRequest("the export is empty (no header line)")
    return header, records


def import_lines(
    store: MemoryStore,
    lines: Iterable[str],
    embedder: Embedder,
    coarse_dim: int,
    *,
    tenant: str | None = None,
    user_id: str | None = None,
) -> ImportReport:
    """Write the exported records into ``store`` (as ``tenant``/``user_id`` when given).

    Ids are kept, so importing the same file twice skips what is already there.
    """
    header, records = _parse(lines)
    same_model = header.get("embedder") == embedder.name and header.get("embedding_dim") == embedder.dim
    report = ImportReport()
    pending = [rehomed(r, tenant or r.tenant, user_id or r.user_id, records) for r in records]
    stale = [
        r
        for r in pending
        if not r.deleted
        and (not same_model or r.embedding_full is None or len(r.embedding_full) != embedder.dim)
    ]
    for start in range(0, len(stale), EMBED_BATCH):
        batch = stale[start : start + EMBED_BATCH]
        for record, vector in zip(batch, embedder.embed([embed_text(r) for r in batch]), strict=True):
            record.embedding_full = vector.tolist()
        report.reembedded += len(batch)
    for record in pending:
        if record.deleted:
            record.embedding_full = None
        if record.embedding_full is not None:
            record.embedding_coarse = coarse_prefix(np.asarray(record.embedding_full), coarse_dim).tolist()
    for start in range(0, len(pending), PAGE):
        _put_batch(store, pending[start : start + PAGE], report)
    return report


def rehomed(record: MemoryRecord, tenant: str, user_id: str, chain: list[MemoryRecord]) -> MemoryRecord:
    """``record`` as ``tenant``/``user_id``'s: the same record, or a copy with ids of the new owner.

    Ids are unique in a store, so a copy under another user needs its own; they are derived
    from (new owner, old id), so importing the same file twice still skips what is there. A raw
    turn's and a keyed memory's first id are derived from their owner by rule: derived again.
    """
    if (tenant, user_id) == (record.tenant, record.user_id):
        return record
    update: dict[str, Any] = {"tenant": tenant, "user_id": user_id, "id": moved_id(record, tenant, user_id)}
    if record.replaces_id:
        older = next((r for r in chain if r.id == record.replaces_id), None)
        update["replaces_id"] = (
            moved_id(older, tenant, user_id) if older else _derived(tenant, user_id, record.replaces_id)
        )
    into = record.metadata.get("consolidated_into")
    if isinstance(into, str) and into:
        target = next((r for r in chain if r.id == into), None)
        moved = moved_id(target, tenant, user_id) if target else _derived(tenant, user_id, into)
        update["metadata"] = {**record.metadata, "consolidated_into": moved}
    return record.model_copy(update=update)


def moved_id(record: MemoryRecord, tenant: str, user_id: str) -> str:
    """The id ``record`` has under its new owner."""
    for source in record.source_ids[:1]:
        if record.id == stm_memory_id(record.tenant, record.user_id, source):
            return stm_memory_id(tenant, user_id, source)
    key = record.metadata.get(KEY_FIELD)
    if isinstance(key, str) and record.id == keyed_id(record.tenant, record.user_id, key):
        return keyed_id(tenant, user_id, key)
    return _derived(tenant, user_id, record.id)


def _derived(tenant: str, user_id: str, old_id: str) -> str:
    return "imp_" + hashlib.blake2b(f"{tenant}\x1f{user_id}\x1f{old_id}".encode(), digest_size=12).hexdigest()


def _put_batch(store: MemoryStore, batch: list[MemoryRecord], report: ImportReport) -> None:
    try:
        store.put(batch)
        report.imported += len(batch)
        return
    except Conflict:
        pass
    for record in batch:  # some are there already: write the others one by one
        try:
            store.put([record])
            report.imported += 1
        except Conflict:
            report.skipped_existing += 1
