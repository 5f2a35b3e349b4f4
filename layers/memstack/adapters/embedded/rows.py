"""Memory records <-> rows of the ``memories`` table, and the filters as SQL."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

from memstack.adapters.embedded import metadata_terms
from memstack.adapters.embedded.where import where_sql
from memstack.domain.vectors import to_blob
from memstack.models import MemoryFilters, MemoryRecord

#: the record columns every read selects, in this order
COLUMNS = (
    "id, tenant, user_id, session_id, scope, tier, kind, category, content, search_text, speaker, "
    "event_time, created_at, is_current, superseded_at, deleted, replaces_id, version, source_ids, metadata, "
    "conflicts_with"
)
#: the same, on alias ``m``
M_COLUMNS = ", ".join("m." + c.strip() for c in COLUMNS.split(","))
INSERT = (
    f"INSERT INTO memories ({COLUMNS}, emb_full, emb_coarse, row_gen) "
    f"VALUES ({', '.join('?' * (COLUMNS.count(',') + 4))})"
)


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _dt(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def insert_values(r: MemoryRecord, row_gen: int) -> tuple[Any, ...]:
    """The values of ``INSERT`` for a record written at the user's generation ``row_gen``."""
    return (
        r.id,
        r.tenant,
        r.user_id,
        r.session_id,
        str(r.scope),
        str(r.tier),
        str(r.kind),
        str(r.category) if r.category else None,
        r.content,
        r.search_text,
        r.speaker,
        _ts(r.event_time),
        r.created_at.timestamp(),
        int(r.is_current),
        _ts(r.superseded_at),
        int(r.deleted),
        r.replaces_id,
        r.version,
        json.dumps(r.source_ids),
        json.dumps(r.metadata),
        json.dumps(r.conflicts_with),
        to_blob(r.embedding_full),
        to_blob(r.embedding_coarse),
        row_gen,
    )


def to_record(row: sqlite3.Row | tuple[Any, ...], start: int = 0) -> MemoryRecord:
    """The record of a row whose columns ``start`` onwards are ``COLUMNS`` (without its vectors)."""
    # By position, not by name (a ``sqlite3.Row`` looks each name up among all its columns), and
    # the usual empty JSON containers without the parser: ~9 instead of ~13 us a record.
    (
        id_,
        tenant,
        user_id,
        session_id,
        scope,
        tier,
        kind,
        category,
        content,
        search_text,
        speaker,
        event_time,
        created_at,
        is_current,
        superseded_at,
        deleted,
        replaces_id,
        version,
        source_ids,
        metadata,
        conflicts_with,
    ) = tuple(row)[start : start + _N_COLUMNS]
    # Validation (pydantic-core) is faster here than model_construct, which runs in Python.
    return MemoryRecord(
        id=id_,
        tenant=tenant,
        user_id=user_id,
        session_id=session_id,
        scope=scope,
        tier=tier,
        kind=kind,
        category=category,
        content=content,
        search_text=search_text,
        speaker=speaker,
        event_time=_dt(event_time),
        created_at=_dt(created_at),
        is_current=bool(is_current),
        superseded_at=_dt(superseded_at),
        deleted=bool(deleted),
        replaces_id=replaces_id,
        version=int(version),
        source_ids=_json_list(source_ids),
        metadata={} if metadata == "{}" else json.loads(metadata),
        conflicts_with=_json_list(conflicts_with),
    )


#: how many columns ``COLUMNS`` names
_N_COLUMNS = COLUMNS.count(",") + 1


def _json_list(text: str) -> list[Any]:
    return [] if text == "[]" else json.loads(text)


def filter_sql(filters: MemoryFilters, *, search: bool, uid: int | None = None) -> tuple[str, list[Any]]:
    """SQL conditions (on alias ``m``) for the filters; tenant and user are added by the caller.

    Search never shows tombstones and applies the scope rule: CONTEXT memories
    only inside their own session. A listing without a session shows them all.
    (``filter_columns.FilterColumns.mask`` is the same rule in numpy.) A metadata
    filter reads the user's ``memory_terms``, so it needs the user's ``uid``.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if not filters.include_superseded:
        clauses.append("m.is_current = 1")
    if search:
        clauses.append("m.deleted = 0")
    for column in ("kind", "category", "scope", "tier"):
        value = getattr(filters, column)
        if value is not None:
            clauses.append(f"m.{column} = ?")
            params.append(str(value))
    if filters.after is not None:
        clauses.append("COALESCE(m.event_time, m.created_at) >= ?")
        params.append(filters.after.timestamp())
    if filters.before is not None:
        clauses.append("COALESCE(m.event_time, m.created_at) < ?")
        params.append(filters.before.timestamp())
    if filters.session_id is not None:
        clauses.append(
            "m.session_id = ?" if filters.session_only else "(m.scope = 'USER' OR m.session_id = ?)"
        )
        params.append(filters.session_id)
    elif search:
        clauses.append("m.scope = 'USER'")
    if filters.where is not None:
        expression, expression_params = where_sql(filters.where)
        clauses.append(expression)
        params += expression_params
    where = (" AND " + " AND ".join(clauses)) if clauses else ""
    if filters.metadata:
        if uid is None:
            raise ValueError("a metadata filter needs the user's uid")
        more, more_params = metadata_terms.sql_conditions(uid, filters.metadata)
        where, params = where + more, params + more_params
    return where, params
