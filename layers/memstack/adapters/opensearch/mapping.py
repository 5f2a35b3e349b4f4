"""The OpenSearch index: template, mapping, and record <-> document conversion.

Documents live in versioned indices ``<alias>-v<N>`` created from one index
template and read and written through the alias ``<alias>``, so the mapping
can change by reindexing into ``-v<N+1>`` and swapping the alias atomically
(``OpenSearchMemoryStore.reindex``) without downtime.
"""

from __future__ import annotations

import hashlib
from typing import Any

from memstack.adapters.stored_fields import iso, record_from_fields, stored_fields
from memstack.domain import metadata_filter
from memstack.models import MemoryRecord

VECTOR_FIELDS = ("embedding_full", "embedding_coarse")
#: the keyword field holding a document's metadata as typed terms
METADATA_TERMS = "metadata_terms"
#: the nested field holding each metadata scalar as {key, s | n | b}: what comparisons and contains read
METADATA_VALUES = "metadata_values"
_METADATA_VALUES_FIELD = {
    "type": "nested",
    "properties": {
        "key": {"type": "keyword"},
        "s": {"type": "keyword"},
        "n": {"type": "double"},
        "b": {"type": "boolean"},
    },
}

_KEYWORDS = (
    "memory_id",
    # doc_id(): a managed domain uses it as the document _id; a serverless collection assigns its own
    # _ids, so there it is a field the store queries by (adapters/opensearch/serverless.py).
    "doc_id",
    "tenant",
    "user_id",
    "session_id",
    "scope",
    "tier",
    "kind",
    "category",
    "speaker",
    "replaces_id",
    "source_ids",
    "conflicts_with",
)


def doc_id(tenant: str, user_id: str, memory_id: str) -> str:
    """The document ``_id``: unique per (tenant, user, memory), bounded length, no separators to escape."""
    return hashlib.blake2b(f"{tenant}\x1f{user_id}\x1f{memory_id}".encode(), digest_size=20).hexdigest()


def index_name(alias: str, version: int) -> str:
    return f"{alias}-v{version}"


def _knn_field(dimension: int, engine: str, m: int, ef_construction: int) -> dict[str, Any]:
    return {
        "type": "knn_vector",
        "dimension": dimension,
        "method": {
            "name": "hnsw",
            "engine": engine,
            "space_type": "cosinesimil",
            "parameters": {"m": m, "ef_construction": ef_construction},
        },
    }


def mappings(
    embedding_dim: int, coarse_dim: int, engine: str, m: int, ef_construction: int
) -> dict[str, Any]:
    properties: dict[str, Any] = {name: {"type": "keyword"} for name in _KEYWORDS}
    properties.update(
        {
            # BM25 (the index default similarity) runs over these two; content is also what is shown.
            "content": {"type": "text"},
            "search_text": {"type": "text"},
            "created_at": {"type": "date"},
            "event_time": {"type": "date"},
            "superseded_at": {"type": "date"},
            # event_time when known, else created_at: what the after/before filters compare.
            "effective_time": {"type": "date"},
            "is_current": {"type": "boolean"},
            "deleted": {"type": "boolean"},
            "version": {"type": "integer"},
            # serverless: which physical copy of a doc_id is the latest write (no in-place updates there)
            "revision": {"type": "long"},
            # Free-form: stored, not indexed (no mapping explosion) ...
            "metadata": {"type": "object", "enabled": False},
            # ... and filtered through its values as typed terms in one keyword field
            # (``domain.metadata_filter``: "topic=s:food"), so any key can be filtered on.
            METADATA_TERMS: {"type": "keyword"},
            # ... and as typed values, for ranges and substrings (``domain.filter_expr``).
            METADATA_VALUES: _METADATA_VALUES_FIELD,
            "embedding_full": _knn_field(embedding_dim, engine, m, ef_construction),
            "embedding_coarse": _knn_field(coarse_dim, engine, m, ef_construction),
        }
    )
    return {"dynamic": "strict", "properties": properties}


def added_fields() -> dict[str, Any]:
    """Fields this mapping has that an index made from an older template may lack (``PUT _mapping``)."""
    return {
        "properties": {
            METADATA_TERMS: {"type": "keyword"},
            METADATA_VALUES: _METADATA_VALUES_FIELD,
            "conflicts_with": {"type": "keyword"},
        }
    }


def metadata_values(metadata: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Each scalar of the metadata as one nested value, typed (a bool is not a number here either)."""
    out: list[dict[str, Any]] = []
    for key, value in sorted(metadata.items()):
        if isinstance(value, bool):
            out.append({"key": key, "b": value})
        elif isinstance(value, int | float):
            out.append({"key": key, "n": value})
        elif isinstance(value, str):
            out.append({"key": key, "s": value})
    return out or None


def metadata_fields(metadata: dict[str, Any]) -> dict[str, Any]:
    """The indexed copies of a document's metadata (written with it, rewritten when it changes)."""
    return {
        METADATA_TERMS: metadata_filter.record_terms(metadata) or None,
        METADATA_VALUES: metadata_values(metadata),
    }


def index_body(
    embedding_dim: int, coarse_dim: int, engine: str, m: int, ef_construction: int
) -> dict[str, Any]:
    """``PUT <index>`` with its settings and mappings (serverless: no template or alias is needed)."""
    return {
        "settings": {"index": {"knn": True}},
        "mappings": mappings(embedding_dim, coarse_dim, engine, m, ef_construction),
    }


def index_template(
    alias: str,
    *,
    embedding_dim: int,
    coarse_dim: int,
    engine: str = "faiss",
    m: int = 16,
    ef_construction: int = 128,
) -> dict[str, Any]:
    """The body of ``PUT _index_template/<alias>``: every ``<alias>-v*`` index gets this mapping."""
    return {
        "index_patterns": [f"{alias}-v*"],
        "template": index_body(embedding_dim, coarse_dim, engine, m, ef_construction),
        "_meta": {"managed_by": "memstack"},
    }


def to_doc(record: MemoryRecord) -> dict[str, Any]:
    """The ``_source`` of a record (vectors included when present)."""
    doc: dict[str, Any] = {
        "memory_id": record.id,
        **stored_fields(record),
        # event_time when known, else created_at: what the after/before filters compare.
        "effective_time": iso(record.event_time or record.created_at),
        "metadata": record.metadata,
        **metadata_fields(record.metadata),
    }
    if record.embedding_full is not None:
        doc["embedding_full"] = list(record.embedding_full)
    if record.embedding_coarse is not None:
        doc["embedding_coarse"] = list(record.embedding_coarse)
    return {k: v for k, v in doc.items() if v is not None}


def from_source(source: dict[str, Any]) -> MemoryRecord:
    """A record (without vectors) from a document ``_source``."""
    return record_from_fields(source, id_key="memory_id", load_metadata=lambda raw: dict(raw or {}))
