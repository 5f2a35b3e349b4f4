"""Request bodies the OpenSearch store sends, built as plain dicts (tests compare them exactly).

Every body filters on tenant and user_id. User text only ever goes into a
``multi_match`` query (analysed as plain text, never parsed as query syntax)
after ``domain.text.query_terms`` has reduced it to distinct content words,
as every other BM25 backend does.
"""

from __future__ import annotations

from typing import Any

from memstack.adapters.opensearch.mapping import METADATA_TERMS
from memstack.adapters.opensearch.where import where_clause
from memstack.domain.metadata_filter import wanted_terms
from memstack.domain.text import query_terms
from memstack.models import ListOrder, MemoryFilters

#: what searches return per hit: the id only (records are fetched by id later)
ID_ONLY = {"_source": ["memory_id"]}
#: what record reads return: everything but the vectors
NO_VECTORS = ["embedding_full", "embedding_coarse"]


def owner(tenant: str, user_id: str) -> list[dict[str, Any]]:
    return [{"term": {"tenant": tenant}}, {"term": {"user_id": user_id}}]


def filter_clauses(
    tenant: str, user_id: str, filters: MemoryFilters, *, search: bool, current_only: bool = False
) -> list[dict[str, Any]]:
    """The embedded store's ``filter_sql`` rules as OpenSearch filter clauses.

    Tombstones never show; search applies the scope rule (CONTEXT memories only
    inside their own session); ``current_only`` forces current versions (BM25
    indexes only current text in every backend).
    """
    clauses = [*owner(tenant, user_id), {"term": {"deleted": False}}]
    if current_only or not filters.include_superseded:
        clauses.append({"term": {"is_current": True}})
    for name in ("kind", "category", "scope", "tier"):
        value = getattr(filters, name)
        if value is not None:
            clauses.append({"term": {name: str(value)}})
    bounds: dict[str, str] = {}
    if filters.after is not None:
        bounds["gte"] = filters.after.isoformat()
    if filters.before is not None:
        bounds["lt"] = filters.before.isoformat()
    if bounds:
        clauses.append({"range": {"effective_time": bounds}})
    for key, values in (filters.metadata or {}).items():
        # One clause per key (AND), any of its values (OR): ``domain.metadata_filter``.
        clauses.append({"terms": {METADATA_TERMS: wanted_terms(key, values)}})
    if filters.where is not None:
        clauses.append(where_clause(filters.where))
    if filters.session_id is not None and filters.session_only:
        clauses.append({"term": {"session_id": filters.session_id}})
    elif filters.session_id is not None:
        clauses.append(
            {
                "bool": {
                    "should": [{"term": {"scope": "USER"}}, {"term": {"session_id": filters.session_id}}],
                    "minimum_should_match": 1,
                }
            }
        )
    elif search:
        clauses.append({"term": {"scope": "USER"}})
    return clauses


def bm25_body(tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters) -> dict[str, Any] | None:
    """BM25 over ``search_text`` and ``content``; ``None`` when the query has no words at all."""
    terms = query_terms(query)
    if not terms:
        return None
    return {
        "size": k,
        **ID_ONLY,
        "query": {
            "bool": {
                "must": [
                    {
                        "multi_match": {
                            "query": " ".join(terms),
                            "fields": ["search_text", "content"],
                            "type": "best_fields",
                            "operator": "or",
                        }
                    }
                ],
                "filter": filter_clauses(tenant, user_id, filters, search=True, current_only=True),
            }
        },
    }


def term_counts_body(tenant: str, user_id: str, query: str) -> tuple[dict[str, Any], list[str]]:
    """The user's searchable documents (the exact hit count) and, per content word of the query,
    how many of them it matches as BM25 would (a ``filter`` aggregation each, ``t0``, ``t1``, ...:
    the words in the order returned beside the body). Counted inside the user's documents only:
    the index's own statistics span every tenant."""
    terms = query_terms(query)
    body = {
        "size": 0,
        "track_total_hits": True,
        "query": {"bool": {"filter": filter_clauses(tenant, user_id, MemoryFilters(), search=False)}},
        "aggs": {
            f"t{i}": {"filter": {"multi_match": {"query": term, "fields": ["search_text", "content"]}}}
            for i, term in enumerate(terms)
        },
    }
    return body, terms


def knn_body(
    tenant: str, user_id: str, vector: list[float], k: int, filters: MemoryFilters
) -> dict[str, Any]:
    """k-NN on the coarse vectors with the filters INSIDE the knn clause (efficient filtering).

    Filtering inside the clause makes the engine (faiss or lucene) return the
    k nearest documents that pass the filter, instead of the k nearest overall
    with the filter applied afterwards (which can leave fewer than k, or none).
    """
    return {
        "size": k,
        **ID_ONLY,
        "query": {
            "knn": {
                "embedding_coarse": {
                    "vector": vector,
                    "k": k,
                    "filter": {"bool": {"filter": filter_clauses(tenant, user_id, filters, search=True)}},
                }
            }
        },
    }


def msearch_lines(index: str, *bodies: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``_msearch`` body: a header line then the search body, for each search."""
    lines: list[dict[str, Any]] = []
    for body in bodies:
        lines += [{"index": index}, body]
    return lines


def list_body(
    tenant: str,
    user_id: str,
    filters: MemoryFilters,
    limit: int,
    search_after: list[Any] | None,
    order: ListOrder = "created_at",
) -> dict[str, Any]:
    """Newest first by ``order``'s time, ties broken by id; the cursor is the last hit's sort values."""
    # effective_time is event_time, else created_at: what the after/before filters compare.
    field = "created_at" if order == "created_at" else "effective_time"
    body: dict[str, Any] = {
        "size": limit + 1,
        "_source": {"excludes": NO_VECTORS},
        "query": {"bool": {"filter": filter_clauses(tenant, user_id, filters, search=False)}},
        "sort": [{field: {"order": "desc"}}, {"memory_id": {"order": "desc"}}],
    }
    if search_after is not None:
        body["search_after"] = search_after
    return body


def tenants_body(after: str | None, size: int = 500) -> dict[str, Any]:
    """Every tenant with records (a composite aggregation, paged by its ``after`` key)."""
    composite: dict[str, Any] = {"size": size, "sources": [{"tenant": {"terms": {"field": "tenant"}}}]}
    if after is not None:
        composite["after"] = {"tenant": after}
    return {"size": 0, "aggs": {"tenants": {"composite": composite}}}


def users_body(tenant: str, limit: int, after: str | None) -> dict[str, Any]:
    """The tenant's users by user id (a composite aggregation, paged by its ``after`` key).

    Per user: the newest ``created_at`` and, among current live records, a count per tier.
    ``limit + 1`` buckets are asked for, so a next page is known to exist without another call.
    """
    composite: dict[str, Any] = {"size": limit + 1, "sources": [{"user_id": {"terms": {"field": "user_id"}}}]}
    if after is not None:
        composite["after"] = {"user_id": after}
    live = {"bool": {"filter": [{"term": {"is_current": True}}, {"term": {"deleted": False}}]}}
    return {
        "size": 0,
        "query": {"bool": {"filter": [{"term": {"tenant": tenant}}]}},
        "aggs": {
            "users": {
                "composite": composite,
                "aggs": {
                    "last_write": {"max": {"field": "created_at"}},
                    "live": {"filter": live, "aggs": {"tiers": {"terms": {"field": "tier", "size": 2}}}},
                },
            }
        },
    }


def term_body(tenant: str, user_id: str, field: str, value: str, size: int) -> dict[str, Any]:
    """Records of the user whose ``field`` (a keyword) equals ``value``, oldest first."""
    return {
        "size": size,
        "_source": {"excludes": NO_VECTORS},
        "query": {"bool": {"filter": [*owner(tenant, user_id), {"term": {field: value}}]}},
        "sort": [{"created_at": {"order": "asc"}}, {"version": {"order": "asc"}}],
    }


def erase_body(tenant: str, user_id: str) -> dict[str, Any]:
    return {"query": {"bool": {"filter": owner(tenant, user_id)}}}


def doc_ids_body(
    tenant: str, user_id: str, doc_ids: list[str], size: int, *, vectors: bool
) -> dict[str, Any]:
    """Every copy of these documents (serverless reads by the ``doc_id`` field, not by ``_id``)."""
    body: dict[str, Any] = {
        "size": size,
        "query": {"bool": {"filter": [*owner(tenant, user_id), {"terms": {"doc_id": doc_ids}}]}},
        "sort": [{"revision": {"order": "desc"}}],
    }
    if not vectors:
        body["_source"] = {"excludes": NO_VECTORS}
    return body


def owner_ids_body(tenant: str, user_id: str, size: int) -> dict[str, Any]:
    """The ``_id`` of every document of one user (serverless erase: there is no delete-by-query)."""
    return {"size": size, "_source": False, "query": {"bool": {"filter": owner(tenant, user_id)}}}
