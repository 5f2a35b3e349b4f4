"""Moving a user's memories between stores: JSON lines out of one backend, into another.

A file is a header line, then one record per line: every field of every
version (superseded ones and tombstones too, so history survives the move),
with the full embedding. Records come newest first, read from the store a page
at a time (``export_page``: the REST API sends one page per request, the CLI
writes every page), so an export of any length holds one page in memory.
Records leave the tenant to the header (the REST API's export names none: its
tenant is the caller's credential). The coarse vector is not written: it is always the
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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from memstack.domain.chunks import is_passage_id, passage_owner
from memstack.domain.embedder_record import NamedEmbedder
from memstack.domain.ingest import stm_memory_id
from memstack.domain.keyed import KEY_FIELD, keyed_id
from memstack.domain.vectors import coarse_prefix
from memstack.errors import BadRequest, Conflict, PayloadTooLarge
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


def export_page(
    store: MemoryStore,
    tenant: str,
    user_id: str,
    *,
    limit: int = PAGE,
    cursor: str | None = None,
    embeddings: bool = True,
    max_bytes: int | None = None,
    size: Callable[[str], int] = len,
) -> tuple[list[str], str | None]:
    """One page of the user's export as record lines, newest first, and the store's next cursor.

    ``limit`` versions as the store lists them (superseded ones too), each followed by the
    tombstones that end its chain (listings leave them out), with full embeddings unless
    ``embeddings`` is false (an import then embeds the texts again). With ``max_bytes``, the
    page holds only the versions whose lines fit, by ``size`` of each line: the store is asked
    again for that many, so its cursor ends after the last one sent.
    """
    while True:
        groups, after = _page(store, tenant, user_id, limit, cursor, embeddings)
        lines: list[str] = []
        used = fitted = 0
        for group in groups:
            group_lines = [record_line(r) for r in group]
            cost = sum(map(size, group_lines))
            if max_bytes is not None and used + cost > max_bytes:
                if fitted == 0:
                    raise PayloadTooLarge(
                        f"memory {group[0].id} takes {cost} bytes, more than an export page holds "
                        f"({max_bytes}): export without embeddings, or with `memstack export`"
                    )
                break
            lines.extend(group_lines)
            used += cost
            fitted += 1
        if fitted == len(groups):
            return lines, after
        limit = fitted


def _page(
    store: MemoryStore, tenant: str, user_id: str, limit: int, cursor: str | None, embeddings: bool
) -> tuple[list[list[MemoryRecord]], str | None]:
    """The listed versions, each with the tombstones after it, and the store's next cursor."""
    listed, after = store.list(tenant, user_id, MemoryFilters(include_superseded=True), limit, cursor)
    groups = [[record, *_tombstones_after(store, tenant, user_id, record)] for record in listed]
    records = [r for group in groups for r in group]
    vectors = store.embeddings(tenant, user_id, [r.id for r in records]) if embeddings else {}
    for record in records:
        vector = vectors.get(record.id)
        record.embedding_full = vector.tolist() if vector is not None else None
        record.embedding_coarse = None
    return groups, after


def _tombstones_after(
    store: MemoryStore, tenant: str, user_id: str, record: MemoryRecord
) -> list[MemoryRecord]:
    """The deletions that follow ``record`` in its chain (a restore after one is listed itself)."""
    found: list[MemoryRecord] = []
    current = record
    while not current.is_current:
        successor = store.successor(tenant, user_id, current.id)
        if successor is None or not successor.deleted:
            break
        found.append(successor)
        current = successor
    return found


def user_records(store: MemoryStore, tenant: str, user_id: str) -> list[MemoryRecord]:
    """Every version of every record of the user (tombstones too), newest first, with full embeddings."""
    records: list[MemoryRecord] = []
    cursor = None
    while True:
        groups, cursor = _page(store, tenant, user_id, PAGE, cursor, True)
        records += [r for group in groups for r in group]
        if cursor is None:
            return records


def export_header(
    embedder: NamedEmbedder, user_id: str, tenant: str | None = None, **extra: Any
) -> dict[str, Any]:
    """The first line of an export: its format, whose it is, and the model its vectors came from."""
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        **({"tenant": tenant} if tenant is not None else {}),
        "user_id": user_id,
        "embedder": embedder.name,
        "embedding_dim": embedder.dim,
        **extra,
    }
    return header


def record_line(record: MemoryRecord) -> str:
    """One record as an export line (the tenant is the header's, the coarse vector is derived)."""
    return json.dumps(
        record.model_dump(mode="json", exclude={"embedding_coarse", "tenant"}), ensure_ascii=False
    )


def export_lines(store: MemoryStore, tenant: str, user_id: str, embedder: NamedEmbedder) -> Iterator[str]:
    """The whole export of a user, a page at a time (memory stays bounded however long the history)."""
    yield json.dumps(export_header(embedder, user_id, tenant), ensure_ascii=False)
    cursor = None
    while True:
        lines, cursor = export_page(store, tenant, user_id, cursor=cursor)
        yield from lines
        if cursor is None:
            return


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


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_export(
    lines: Iterable[str], tenant: str | None = None
) -> tuple[dict[str, Any], list[tuple[int, MemoryRecord]]]:
    """The header and every record (with its line number), all checked before anything is written.

    A record's tenant is its own, else the header's, else ``tenant`` (the REST API's exports
    name none: the tenant is the caller's credential).
    """
    header: dict[str, Any] | None = None
    records: list[tuple[int, MemoryRecord]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line, parse_constant=_no_constant)
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise BadRequest(f"line {number} is not JSON: {reason}") from None
        if header is None:
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise BadRequest(f"line {number}: not a memstack export (no {FORMAT!r} header)")
            if data.get("version") != FORMAT_VERSION:
                raise BadRequest(
                    f"line {number}: export format version {data.get('version')} is not supported"
                )
            header = data
            continue
        if isinstance(data, dict) and "tenant" not in data:
            owner = header.get("tenant") if isinstance(header.get("tenant"), str) else tenant
            if owner is None:
                raise BadRequest(
                    f"line {number}: the export names no tenant; import it into a tenant you name"
                )
            data = {**data, "tenant": owner}
        try:
            records.append((number, MemoryRecord.model_validate(data)))
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
    header, numbered = parse_export(lines, tenant)
    records = [r for _, r in numbered]
    return import_records(store, header, records, embedder, coarse_dim, tenant=tenant, user_id=user_id)


def import_records(
    store: MemoryStore,
    header: dict[str, Any],
    records: list[MemoryRecord],
    embedder: Embedder,
    coarse_dim: int,
    *,
    tenant: str | None = None,
    user_id: str | None = None,
) -> ImportReport:
    """``import_lines`` once the export is parsed (and checked by the caller)."""
    same_model = header.get("embedder") == embedder.name and header.get("embedding_dim") == embedder.dim
    report = ImportReport()
    by_id = {r.id: r for r in records}
    pending = _not_there(
        store, [rehomed(r, tenant or r.tenant, user_id or r.user_id, by_id) for r in records]
    )
    report.skipped_existing = len(records) - len(pending)
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


def _not_there(store: MemoryStore, records: list[MemoryRecord]) -> list[MemoryRecord]:
    """The records whose ids the store does not hold yet (read first: nothing to embed for the rest)."""
    owners: dict[tuple[str, str], list[str]] = {}
    for record in records:
        owners.setdefault((record.tenant, record.user_id), []).append(record.id)
    there: set[str] = set()
    for (tenant, user_id), ids in owners.items():
        for start in range(0, len(ids), PAGE):
            there.update(store.get_many(tenant, user_id, ids[start : start + PAGE]))
    return [r for r in records if r.id not in there]


def rehomed(
    record: MemoryRecord, tenant: str, user_id: str, chain: Mapping[str, MemoryRecord]
) -> MemoryRecord:
    """``record`` as ``tenant``/``user_id``'s: the same record, or a copy with ids of the new owner.

    Ids are unique in a store, so a copy under another user needs its own; they are derived
    from (new owner, old id), so importing the same file twice still skips what is there. A raw
    turn's and a keyed memory's first id are derived from their owner by rule: derived again.
    ``chain`` holds the records imported with it, by id; a record it refers to that is not
    there (an export read page by page, imported page by page) is moved by the same rule,
    read off the referring record (a version shares its chain's sources and key).
    """
    if (tenant, user_id) == (record.tenant, record.user_id):
        return record
    update: dict[str, Any] = {"tenant": tenant, "user_id": user_id, "id": moved_id(record, tenant, user_id)}
    if record.replaces_id:
        update["replaces_id"] = _moved_ref(record.replaces_id, record, chain, tenant, user_id)
    if record.conflicts_with:
        links = record.conflicts_with
        update["conflicts_with"] = [_moved_ref(i, record, chain, tenant, user_id) for i in links]
    into = record.metadata.get("consolidated_into")
    if isinstance(into, str) and into:
        moved = _moved_ref(into, record, chain, tenant, user_id)
        update["metadata"] = {**record.metadata, "consolidated_into": moved}
    return record.model_copy(update=update)


def _moved_ref(
    old_id: str, referrer: MemoryRecord, chain: Mapping[str, MemoryRecord], tenant: str, user_id: str
) -> str:
    target = chain.get(old_id)
    return (
        moved_id(target, tenant, user_id) if target is not None else _moved(old_id, referrer, tenant, user_id)
    )


def moved_id(record: MemoryRecord, tenant: str, user_id: str) -> str:
    """The id ``record`` has under its new owner."""
    return _moved(record.id, record, tenant, user_id)


def _moved(old_id: str, like: MemoryRecord, tenant: str, user_id: str) -> str:
    """The new owner's id for ``old_id``, a record with the sources and key of ``like``."""
    if is_passage_id(old_id):  # a passage's id is its record's, moved, and its number
        owner = passage_owner(old_id)
        return _moved(owner, like, tenant, user_id) + old_id[len(owner) :]
    for source in like.source_ids[:1]:
        if old_id == stm_memory_id(like.tenant, like.user_id, source):
            return stm_memory_id(tenant, user_id, source)
    key = like.metadata.get(KEY_FIELD)
    if isinstance(key, str) and old_id == keyed_id(like.tenant, like.user_id, key):
        return keyed_id(tenant, user_id, key)
    return _derived(tenant, user_id, old_id)


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
