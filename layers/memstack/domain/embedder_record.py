"""Which embedder a store's vectors come from: recorded once, checked at every start.

Vectors of two models cannot be compared. A store written with MiniLM and read
with mpnet failed with a raw ``ValueError: matmul … 768 … 384``; read with the
hashing embedder (also 384 dimensions) it silently ranked nonsense. So the
first process that opens a store records its embedder's name and dimension in
it, and every later one compares: a different embedder is refused at start,
with what to do (``memstack reembed``, or the old setting back).

The record is a document of the store's tenant-configuration storage (every
backend has one, beside the memories: a SQLite row, a DynamoDB item, a
PostgreSQL row, an OpenSearch document) under a name no credential maps to: a
tenant comes from an API key's entry, an IAM principal ARN or a Cognito app
client id, none of which starts with the unit separator.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from memstack.errors import Conflict, SettingsError
from memstack.ports.tenant_config import StoredConfig, TenantConfigStore

#: the record's "tenant" in the tenant-configuration storage (never a caller's tenant)
STORE_RECORD = "\x1fmemstack-store"


class NamedEmbedder(Protocol):
    """What names an embedder's vectors (every ``Embedder`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...


class EmbedderMismatch(SettingsError):
    """The configured embedder is not the one the store's vectors were made with."""

    code = "embedder_mismatch"


def recorded(configs: TenantConfigStore) -> StoredConfig:
    """The store's record (version 0 and an empty document when none was written yet)."""
    return configs.get(STORE_RECORD)


def check_embedder(configs: TenantConfigStore, embedder: NamedEmbedder, now: datetime) -> None:
    """Record ``embedder`` in a store that has no record yet; refuse it if the store records another.

    A store written before records existed gets the embedder of the first process
    that opens it: its vectors are taken to be that embedder's.
    """
    record = recorded(configs)
    if record.version == 0:
        try:
            configs.put(STORE_RECORD, identity(embedder), 0, now)
            return
        except Conflict:  # another process recorded first: compare with what it wrote
            record = recorded(configs)
    stored = record.document
    if (stored.get("embedder"), stored.get("dim")) != (embedder.name, embedder.dim):
        raise EmbedderMismatch(
            f"this store's vectors were made by the embedder {stored.get('embedder')!r} "
            f"({stored.get('dim')} dimensions), and MEMSTACK_EMBEDDER now gives {embedder.name!r} "
            f"({embedder.dim} dimensions): vectors of two models cannot be compared. Set "
            "MEMSTACK_EMBEDDER (and MEMSTACK_EMBEDDING_DIM) back, or run `memstack reembed` to "
            "re-embed the store with the one now configured"
        )


def record_embedder(configs: TenantConfigStore, embedder: NamedEmbedder, now: datetime) -> None:
    """Record ``embedder`` as the store's, replacing any earlier record (after a re-embedding)."""
    for _ in range(5):
        version = recorded(configs).version
        try:
            configs.put(STORE_RECORD, identity(embedder), version, now)
            return
        except Conflict:  # a process starting meanwhile recorded first: read again
            continue
    raise Conflict("the store's embedder record kept changing; run `memstack reembed` again")


def identity(embedder: NamedEmbedder) -> dict[str, object]:
    return {"embedder": embedder.name, "dim": embedder.dim}
