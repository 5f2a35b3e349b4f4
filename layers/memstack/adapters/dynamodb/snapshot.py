"""One user's partition held in memory, and the in-process BM25 and vector ranking over it.

A snapshot is built once from the user's partition and then answers any
number of searches: the filter columns are numpy arrays (``FilterColumns``,
shared with the embedded store), so a search is a few vector operations, not
a Python loop over records. The filter semantics are ``items.matches``
(tested to agree on every filter).

After a write the store does not rebuild it: ``applied`` takes the items the
write changed (found through the partition's write log, see ``store``) and
returns the next snapshot, which shares this one's vector buffer and BM25
index and differs only in those rows. A changed record (superseded, marked)
is replaced in its row; a new one is appended. The cost of a search after a
write is then the rows written, not the partition.

The full-dimension vectors are not part of the partition read (they are most
of its bytes); the ones a search rescored are kept in ``full`` for the next
searches, and shared with the next snapshot, since a record's vectors never
change (a new version is a new record).

A snapshot never changes its rows once made, with one exception: a record an
``applied`` snapshot retired from BM25 (superseded, deleted) stops matching
in the older snapshot too, which is then newer than its token, never older.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memstack.adapters.dynamodb import items
from memstack.adapters.filter_columns import FilterColumns
from memstack.domain import filter_expr, metadata_filter
from memstack.domain.bm25 import Bm25Index
from memstack.domain.text import bm25_document
from memstack.domain.vectors import from_blob, top_indices
from memstack.models import MemoryFilters, MemoryRecord, ScoredId


def _coarse_of(row: dict[str, Any]) -> np.ndarray | None:
    return from_blob(items.binary(row.get("emb_coarse", {}).get("B")))


def _searchable(record: MemoryRecord) -> bool:
    """Only current, live text is searchable by BM25 (as in the embedded store's FTS index)."""
    return record.is_current and not record.deleted


class Snapshot:
    """Records (without full vectors), the coarse matrix, filter columns and a BM25 index.

    ``token``, ``seq`` and ``epoch`` are the partition's ``META`` as read before the
    rows: the snapshot holds at least every write up to ``seq`` of that ``epoch``.
    """

    def __init__(
        self,
        token: str | None,
        rows: list[dict[str, Any]],
        full: dict[str, np.ndarray] | None = None,
        *,
        seq: int = 0,
        epoch: str | None = None,
    ) -> None:
        self.token, self.seq, self.epoch = token, seq, epoch
        self.records = [items.from_item(row) for row in rows]
        self.ids = [r.id for r in self.records]
        self.row_of = {r.id: i for i, r in enumerate(self.records)}
        self.by_id = {r.id: r for r in self.records}
        coarse = [_coarse_of(row) for row in rows]
        dim = next((len(v) for v in coarse if v is not None), 1)
        # Rows past ``size`` belong to later snapshots (they share the buffer).
        self._vectors = np.zeros((max(len(rows), 16), dim), dtype=np.float32)
        for i, v in enumerate(coarse):
            if v is not None:
                self._vectors[i] = v
        self.has_vector = np.array([v is not None for v in coarse], dtype=bool)
        self.columns = FilterColumns.from_records(self.records)
        self.bm25 = Bm25Index(
            [bm25_document(r.indexed_text) if _searchable(r) else "" for r in self.records],
            live=[_searchable(r) for r in self.records],
        )
        #: full-dimension vectors fetched so far, by record id
        self.full: dict[str, np.ndarray] = {i: v for i, v in (full or {}).items() if i in self.by_id}
        # Built on the first metadata filter: searches without one never pay for it.
        self._term_rows: dict[str, np.ndarray] | None = None

    @property
    def size(self) -> int:
        return len(self.records)

    @property
    def matrix(self) -> np.ndarray:
        """The coarse vector of every row (zeros where a row has none)."""
        return self._vectors[: self.size]

    # ------------------------------------------------------------ following writes
    def applied(
        self, rows: list[dict[str, Any]], *, token: str | None, seq: int, epoch: str | None
    ) -> Snapshot:
        """The next snapshot: this one with ``rows`` (items the writes since changed) in place."""
        nxt = object.__new__(Snapshot)
        nxt.token, nxt.seq, nxt.epoch = token, seq, epoch
        nxt.records, nxt.ids = list(self.records), list(self.ids)
        nxt.row_of, nxt.by_id = dict(self.row_of), dict(self.by_id)
        nxt._vectors, nxt.has_vector = self._vectors, self.has_vector.copy()
        nxt.columns = FilterColumns(
            **{name: getattr(self.columns, name).copy() for name in FilterColumns.array_names()},
            sessions=self.columns.sessions,
        )
        nxt.bm25, nxt.full, nxt._term_rows = self.bm25, self.full, None
        fresh: list[tuple[MemoryRecord, np.ndarray | None]] = []
        for row in rows:
            record = items.from_item(row)
            at = nxt.row_of.get(record.id)
            if at is None:
                fresh.append((record, _coarse_of(row)))
                continue
            # A record's text and vectors never change; its current flag and metadata do.
            nxt.records[at] = nxt.by_id[record.id] = record
            replaced = FilterColumns.from_records([record], sessions=nxt.columns.sessions)
            for name in FilterColumns.array_names():
                getattr(nxt.columns, name)[at] = getattr(replaced, name)[0]
            if not _searchable(record):
                nxt.bm25.retire(at)
        if fresh:
            nxt._append(fresh)
        return nxt

    def _append(self, fresh: list[tuple[MemoryRecord, np.ndarray | None]]) -> None:
        start, records = self.size, [r for r, _ in fresh]
        for i, record in enumerate(records):
            self.row_of[record.id] = start + i
            self.by_id[record.id] = record
        self.records += records
        self.ids += [r.id for r in records]
        end = self.size
        vectors = self._vectors
        dim = next((len(v) for _, v in fresh if v is not None), vectors.shape[1])
        if end > len(vectors) or dim != vectors.shape[1]:
            grown = np.zeros((max(2 * end, 16), dim), dtype=np.float32)
            if dim == vectors.shape[1]:
                grown[:start] = vectors[:start]
            vectors = self._vectors = grown
        for i, (_, v) in enumerate(fresh):
            if v is not None:
                vectors[start + i] = v
        self.has_vector = np.concatenate([self.has_vector, [v is not None for _, v in fresh]])
        added = FilterColumns.from_records(records, sessions=self.columns.sessions)
        self.columns = FilterColumns(
            **{
                name: np.concatenate([getattr(self.columns, name), getattr(added, name)])
                for name in FilterColumns.array_names()
            },
            sessions=self.columns.sessions,
        )
        # The BM25 index's positions are the rows: a row appended here is document ``start + i``.
        if self.bm25.docs != start:
            raise RuntimeError("the snapshot's BM25 index has moved on without it (applied twice)")
        self.bm25.extend(
            [bm25_document(r.indexed_text) if _searchable(r) else "" for r in records],
            live=[_searchable(r) for r in records],
        )

    # ------------------------------------------------------------------- search
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
        if not self.size:
            return []
        allowed = self.mask(filters)
        return [
            ScoredId(id=self.ids[doc], score=score)
            for doc, score in self.bm25.top(query, k, allowed, docs=self.size)
        ]

    def vector_search(self, query_coarse: np.ndarray, k: int, filters: MemoryFilters) -> list[ScoredId]:
        """Exact cosine top-k (rows are unit vectors) among the records the filters allow."""
        if not self.size or k <= 0:
            return []
        allowed = self.mask(filters) & self.has_vector
        if not allowed.any():
            return []
        scores = np.where(allowed, self.matrix @ np.asarray(query_coarse, dtype=np.float32), -np.inf)
        top = top_indices(scores, min(k, int(allowed.sum())))
        return [ScoredId(id=self.ids[i], score=float(scores[i])) for i in top]
