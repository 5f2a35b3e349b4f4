"""One user's partition held in memory, and the in-process BM25 and vector ranking over it.

A snapshot is built once per ``META.gen`` token (see ``store``) and then
answers any number of searches: the filter columns are numpy arrays
(``FilterColumns``, shared with the embedded store), so a search is a few
vector operations, not a Python loop over records. The filter semantics are
``items.matches`` (tested to agree on every filter).

The full-dimension vectors are not part of the partition read (they are most
of its bytes); the ones a search rescored are kept in ``full`` for the next
searches, and carried over to the next snapshot, since a record's vectors
never change (a new version is a new record).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memstack.adapters.dynamodb import items
from memstack.adapters.filter_columns import FilterColumns
from memstack.domain import filter_expr, metadata_filter
from memstack.domain.bm25 import Bm25Index
from memstack.domain.text import bm25_document
from memstack.domain.vectors import from_blob
from memstack.models import MemoryFilters, ScoredId


class Snapshot:
    """Records (without full vectors), the coarse matrix, filter columns and a BM25 index."""

    def __init__(
        self, token: str | None, rows: list[dict[str, Any]], full: dict[str, np.ndarray] | None = None
    ) -> None:
        self.token = token
        self.records = [items.from_item(row) for row in rows]
        self.by_id = {r.id: r for r in self.records}
        self.ids = [r.id for r in self.records]
        coarse = [from_blob(items.binary(row.get("emb_coarse", {}).get("B"))) for row in rows]
        vectors = [(i, v) for i, v in enumerate(coarse) if v is not None]
        self.vector_rows = np.asarray([i for i, _ in vectors], dtype=np.int64)
        self.matrix = (
            np.vstack([v for _, v in vectors]).astype(np.float32)
            if vectors
            else np.zeros((0, 1), dtype=np.float32)
        )
        self.columns = FilterColumns.from_records(self.records)
        # Only current, live text is searchable by BM25 (as in the embedded store's FTS index).
        self.text_rows = np.flatnonzero(self.columns.current & ~self.columns.deleted)
        self.bm25 = Bm25Index([bm25_document(self.records[i].indexed_text) for i in self.text_rows])
        #: full-dimension vectors fetched so far, by record id
        self.full: dict[str, np.ndarray] = {i: v for i, v in (full or {}).items() if i in self.by_id}
        # Built on the first metadata filter: searches without one never pay for it.
        self._term_rows: dict[str, np.ndarray] | None = None

    def mask(self, filters: MemoryFilters, *, search: bool = True) -> np.ndarray:
        """``items.matches`` for every record at once."""
        return self.columns.mask(filters, search=search, rows_with=self.rows_with, rows_where=self.rows_where)

    def rows_where(self, expr: filter_expr.Node) -> np.ndarray:
        """The records satisfying a filter expression (evaluated here: there is no query engine)."""
        return np.flatnonzero(np.fromiter((filter_expr.evaluate(expr, r) for r in self.records), dtype=bool))

    def rows_with(self, terms: list[str]) -> np.ndarray:
        """The records holding any of the metadata ``terms`` (``domain.metadata_filter``)."""
        if self._term_rows is None:
            rows: dict[str, list[int]] = {}
            for i, record in enumerate(self.records):
                if not record.deleted:
                    for term in metadata_filter.record_terms(record.metadata):
                        rows.setdefault(term, []).append(i)
            self._term_rows = {t: np.asarray(r, dtype=np.int64) for t, r in rows.items()}
        found = [self._term_rows[t] for t in terms if t in self._term_rows]
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

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
