"""One user's partition held in memory, and the in-process BM25 and vector ranking over it.

A snapshot is built once per ``META.gen`` token (see ``store``) and then
answers any number of searches: the filter columns are numpy arrays, so a
search is a few vector operations, not a Python loop over records. The
filter semantics are ``items.matches`` (tested to agree on every filter).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memstack.adapters.dynamodb import items
from memstack.domain.bm25 import Bm25Index
from memstack.domain.text import bm25_document
from memstack.domain.vectors import from_blob
from memstack.models import MemoryFilters, ScoredId


class Snapshot:
    """Records (without full vectors), the coarse matrix, filter columns and a BM25 index."""

    def __init__(self, token: str | None, rows: list[dict[str, Any]]) -> None:
        self.token = token
        self.records = [items.from_item(row) for row in rows]
        self.by_id = {r.id: r for r in self.records}
        self.ids = [r.id for r in self.records]
        n = len(self.records)
        coarse = [from_blob(items.binary(row.get("emb_coarse", {}).get("B"))) for row in rows]
        vectors = [(i, v) for i, v in enumerate(coarse) if v is not None]
        self.vector_rows = np.asarray([i for i, _ in vectors], dtype=np.int64)
        self.matrix = (
            np.vstack([v for _, v in vectors]).astype(np.float32)
            if vectors
            else np.zeros((0, 1), dtype=np.float32)
        )
        # Filter columns, one entry per record.
        self.current = np.fromiter((r.is_current for r in self.records), dtype=bool, count=n)
        self.deleted = np.fromiter((r.deleted for r in self.records), dtype=bool, count=n)
        self.when = np.fromiter(
            ((r.event_time or r.created_at).timestamp() for r in self.records), dtype=np.float64, count=n
        )
        self.columns = {
            name: np.array([_text(getattr(r, name)) for r in self.records], dtype=object)
            for name in ("kind", "category", "scope", "tier", "session_id")
        }
        # Only current, live text is searchable by BM25 (as in the embedded store's FTS index).
        self.text_rows = np.flatnonzero(self.current & ~self.deleted)
        self.bm25 = Bm25Index([bm25_document(self.records[i].indexed_text) for i in self.text_rows])

    def mask(self, filters: MemoryFilters, *, search: bool = True) -> np.ndarray:
        """``items.matches`` for every record at once."""
        keep = ~self.deleted
        if not filters.include_superseded:
            keep &= self.current
        for name in ("kind", "category", "scope", "tier"):
            wanted = getattr(filters, name)
            if wanted is not None:
                keep &= self.columns[name] == str(wanted)
        if filters.after is not None:
            keep &= self.when >= filters.after.timestamp()
        if filters.before is not None:
            keep &= self.when < filters.before.timestamp()
        user_scope = self.columns["scope"] == "USER"
        if filters.session_id is not None:
            keep &= user_scope | (self.columns["session_id"] == filters.session_id)
        elif search:
            keep &= user_scope
        return keep

    def bm25_search(self, query: str, k: int, filters: MemoryFilters) -> list[ScoredId]:
        if not len(self.text_rows):
            return []
        allowed = self.mask(filters)[self.text_rows]
        return [
            ScoredId(id=self.ids[self.text_rows[doc]], score=score)
            for doc, score in self.bm25.top(query, k, allowed)
        ]

    def vector_search(self, query_coarse: np.ndarray, k: int, filters: MemoryFilters) -> list[ScoredId]:
        """Exact cosine top-k (rows are unit vectors) among the records the filters allow."""
        if not len(self.vector_rows) or k <= 0:
            return []
        allowed = self.mask(filters)[self.vector_rows]
        if not allowed.any():
            return []
        scores = np.where(allowed, self.matrix @ np.asarray(query_coarse, dtype=np.float32), -np.inf)
        n = min(k, int(allowed.sum()))
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [ScoredId(id=self.ids[self.vector_rows[i]], score=float(scores[i])) for i in top]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
