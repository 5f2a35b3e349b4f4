"""Keyed memories: a memory the caller names (``diet``, ``home-city``) and writes directly.

Extraction decides what becomes a memory; some callers already know (a
LangGraph store, a profile form, AgentCore users creating records). A keyed
memory is an ordinary long-term record, versioned like any other, whose chain
starts at an id derived from (tenant, user, key): so writing a key twice makes
version 2, deleting it writes a tombstone, and writing it again continues the
same chain (the history keeps all of it). The derived id includes the tenant,
so the same key of two tenants never meets, and nothing leaks between them.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from memstack.domain import versions
from memstack.domain.vectors import coarse_prefix
from memstack.errors import Conflict, NotFound
from memstack.models import Kind, MemoryRecord, Scope, Tier
from memstack.ports.embedder import Embedder
from memstack.ports.store import MemoryStore

# Where the key is kept on every version (a reserved metadata key: callers cannot forge it).
KEY_FIELD = "key"


def keyed_id(tenant: str, user_id: str, key: str) -> str:
    """The id of the first version of ``key``'s chain."""
    digest = hashlib.blake2b(f"{tenant}\x1f{user_id}\x1f{key}".encode(), digest_size=12).hexdigest()
    return f"key_{digest}"


def current_of_key(store: MemoryStore, tenant: str, user_id: str, key: str) -> MemoryRecord | None:
    """The current version of ``key`` (a tombstone when it was deleted last), or ``None``."""
    if store.get(tenant, user_id, keyed_id(tenant, user_id, key)) is None:
        return None
    return versions.history(store, tenant, user_id, keyed_id(tenant, user_id, key))[-1]


def get_key(store: MemoryStore, tenant: str, user_id: str, key: str) -> MemoryRecord:
    current = current_of_key(store, tenant, user_id, key)
    if current is None or current.deleted:
        raise NotFound(f"no memory with key {key!r}")
    return current


def put_key(
    store: MemoryStore,
    embedder: Embedder,
    coarse_dim: int,
    tenant: str,
    user_id: str,
    key: str,
    content: str,
    *,
    fields: dict[str, Any],
    metadata: dict[str, Any],
    now: datetime | None = None,
) -> tuple[MemoryRecord, bool]:
    """Write ``key``: the first version, or a new version of its chain. Returns (record, created).

    ``fields`` are the record's own fields (session_id, scope, kind, category,
    event_time); ``metadata`` replaces the caller's metadata of the previous version.
    """
    now = now or datetime.now(UTC)
    tagged = {**metadata, KEY_FIELD: key}
    current = current_of_key(store, tenant, user_id, key)
    if current is None:
        record = first_version(tenant, user_id, key, content, embedder, coarse_dim, fields, tagged, now)
        try:
            store.put([record])
            return record, True
        except Conflict:  # a concurrent first write won: this one becomes its next version
            current = current_of_key(store, tenant, user_id, key)
            assert current is not None
    new = versions.new_version(
        current,
        content=content,
        embedder=embedder,
        coarse_dim=coarse_dim,
        now=now,
        metadata=tagged,
        **fields,
    )
    store.supersede(tenant, user_id, current.id, new)
    return new, False


def first_version(
    tenant: str,
    user_id: str,
    key: str,
    content: str,
    embedder: Embedder,
    coarse_dim: int,
    fields: dict[str, Any],
    metadata: dict[str, Any],
    now: datetime,
) -> MemoryRecord:
    vector = embedder.embed([content])[0]
    return MemoryRecord(
        id=keyed_id(tenant, user_id, key),
        tenant=tenant,
        user_id=user_id,
        session_id=fields.get("session_id"),
        scope=fields.get("scope") or Scope.USER,
        tier=Tier.LTM,
        kind=fields.get("kind") or Kind.FACT,
        category=fields.get("category"),
        content=content,
        event_time=fields.get("event_time"),
        created_at=now,
        metadata=metadata,
        embedding_full=vector.tolist(),
        embedding_coarse=coarse_prefix(vector, coarse_dim).tolist(),
    )


def record_fields(
    session_id: str | None,
    scope: Scope | None,
    kind: Kind | None,
    category: str | None,
    event_time: datetime | None,
) -> dict[str, Any]:
    """The record fields a keyed write sets (``None`` values keep the previous version's)."""
    given = {
        "session_id": session_id,
        "scope": scope,
        "kind": kind,
        "category": category,
        "event_time": event_time,
    }
    return {k: v for k, v in given.items() if v is not None}
