"""OpenSearch 2.x answers in the shape the service returns them (trimmed of nothing we parse)."""

from __future__ import annotations

from typing import Any

INDEX = "memstack-memories-v1"
SHARDS = {"total": 2, "successful": 1, "failed": 0}


def bulk_item(action: str, doc_id: str, status: int, seq_no: int = 0, error: str | None = None) -> dict:
    if error:
        return {
            action: {
                "_index": INDEX,
                "_id": doc_id,
                "status": status,
                "error": {"type": error, "reason": f"[{doc_id}]: {error.replace('_', ' ')}", "index": INDEX},
            }
        }
    result = {"create": "created", "index": "updated", "update": "updated", "delete": "deleted"}[action]
    return {
        action: {
            "_index": INDEX,
            "_id": doc_id,
            "_version": 1,
            "result": result,
            "_shards": SHARDS,
            "_seq_no": seq_no,
            "_primary_term": 1,
            "status": status,
        }
    }


def bulk(*items: dict) -> dict[str, Any]:
    errors = any(next(iter(i.values())).get("error") for i in items)
    return {"took": 7, "errors": errors, "items": list(items)}


def search_answer(hits: list[tuple[str, str, float]], sort: bool = False) -> dict[str, Any]:
    """``hits``: (document _id, memory id, score)."""
    return {
        "took": 3,
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {
            "total": {"value": len(hits), "relation": "eq"},
            "max_score": max((s for _, _, s in hits), default=None),
            "hits": [
                {"_index": INDEX, "_id": did, "_score": score, "_source": {"memory_id": mid}}
                for did, mid, score in hits
            ],
        },
        "status": 200,
    }


def get_doc(doc_id: str, source: dict[str, Any], seq_no: int = 5) -> dict[str, Any]:
    return {
        "_index": INDEX,
        "_id": doc_id,
        "_version": 3,
        "_seq_no": seq_no,
        "_primary_term": 1,
        "found": True,
        "_source": source,
    }


def not_found(doc_id: str) -> dict[str, Any]:
    return {"_index": INDEX, "_id": doc_id, "found": False}


def delete_by_query(deleted: int, conflicts: int = 0) -> dict[str, Any]:
    return {
        "took": 147,
        "timed_out": False,
        "total": deleted + conflicts,
        "deleted": deleted,
        "batches": 1,
        "version_conflicts": conflicts,
        "noops": 0,
        "retries": {"bulk": 0, "search": 0},
        "throttled_millis": 0,
        "requests_per_second": -1.0,
        "throttled_until_millis": 0,
        "failures": [],
    }


def error(status: int, kind: str, reason: str) -> dict[str, Any]:
    return {
        "error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
        "status": status,
    }
