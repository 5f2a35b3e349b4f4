"""One user's partition held in memory, and the in-process BM25 and vector ranking over it.

A snapshot is built once (from the user's partition, or loaded from its packed
copy in S3, ``packed``) and then answers any number of searches: the filter
columns are numpy arrays (``FilterColumns``, shared with the embedded store),
so a search is a few vector operations, not a Python loop over records. The
filter semantics are ``domain.record_filter.matches`` (tested to agree on every filter).

The matrix holds every record's full-dimension vector, so the vector stage
ranks all of them exactly (``ExactVectors``) and the rescoring and the pool
read their vectors here, never from the table.

Records are decoded from their stored form only when asked for (a loaded
snapshot of 20,000 memories decodes the few dozen a search returns, not all):
``record(i)``; the lookups a search makes by source id or by version are
indexed without decoding anything.

After a write the store does not rebuild it: ``applied`` takes the items the
write changed (found through the partition's write log, see ``store``) and
returns the next snapshot, which shares this one's vector buffer and BM25
index and differs only in those rows. A changed record (superseded, marked)
is replaced in its row; a new one is appended. The cost of a search after a
write is then the rows written, not the partition.

A snapshot never changes its rows once made, with one exception: a record an
``applied`` snapshot retired from BM25 (superseded, deleted) stops matching
in the older snapshot too, which is then newer than its token, never older.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from memstack.adapters.dynamodb import items
from memstack.adapters.filter_columns import FilterColumns
from memstack.domain import filter_expr, metadata_filter
from memstack.domain.bm25 import Bm25Index
from memstack.domain.text import bm25_document, query_terms, stem
from memstack.domain.vectors import from_blob, normalise, top_indices
from memstack.models import MemoryFilters, MemoryRecord, ScoredId
from memstack.ports.store import TermCounts

#: decodes the record of one row of a loaded snapshot
RowDecoder = Callable[[int], MemoryRecord]


def _full_of(row: dict[str, Any]) -> np.ndarray | None:
    return from_blob(items.binary(row.get("emb_full", {}).get("B")))


def searchable(record: MemoryRecord) -> bool:
    """Only current, live text is searchable by BM25 (as in the embedded store's FTS index)."""
    return record.is_current and not record.deleted


def bm25_text(record: MemoryRecord) -> str:
    return bm25_document(record.indexed_text) if searchable(record) else ""


class _ById(Mapping[str, MemoryRecord]):
    """The snapshot's records by id, decoded on access."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def __getitem__(self, memory_id: str) -> MemoryRecord:
        return self._snapshot.record(self._snapshot.row_of[memory_id])

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._snapshot.row_of

    def __iter__(self) -> Iterator[str]:
        return iter(self._snapshot.ids)

    def __len__(self) -> int:
        return self._snapshot.size


class Snapshot:
    """Records (decoded lazily), the full-vector matrix, filter columns and a BM25 index.

    ``token``, ``seq`` and ``epoch`` are the partition's ``META`` as read before the
    rows: the snapshot holds at least every write up to ``seq`` of that ``epoch``.
    """

    token: str | None
    seq: int
    epoch: str | None
    ids: list[str]
    row_of: dict[str, int]
    _records: list[MemoryRecord | None]
    _decode: RowDecoder | None
    _vectors: np.ndarray
    has_vector: np.ndarray
    created: np.ndarray  # float64: created_at as epoch seconds (list's order)
    columns: FilterColumns
    bm25: Bm25Index
    #: rows by the message ids they were drawn from, and the row that replaced a memory id
    _sources: dict[str, Sequence[int]]
    _successors: dict[str, int]
    _term_rows: dict[str, np.ndarray] | None

    def __init__(
        self,
        token: str | None,
        rows: list[dict[str, Any]],
        *,
        seq: int = 0,
        epoch: str | None = None,
    ) -> None:
        """A snapshot of the partition's items ``rows`` (a full read)."""
        records = [items.from_item(row) for row in rows]
        vectors = [_full_of(row) for row in rows]
        dim = next((len(v) for v in vectors if v is not None), 1)
        matrix = np.zeros((len(rows), dim), dtype=np.float32)
        for i, v in enumerate(vectors):
            if v is not None:
                matrix[i] = v
        self._assemble(
            token=token,
            seq=seq,
            epoch=epoch,
            ids=[r.id for r in records],
            records=list(records),
            decode=None,
            vectors=matrix,
            has_vector=np.array([v is not None for v in vectors], dtype=bool),
            created=np.array([r.created_at.timestamp() for r in records], dtype=np.float64),
            columns=FilterColumns.from_records(records),
            bm25=Bm25Index([bm25_text(r) for r in records], live=[searchable(r) for r in records]),
            successors={},
            sources={},
        )
        for row, record in enumerate(records):
            self._index_lineage(row, record.replaces_id, record.source_ids)

    @classmethod
    def assembled(cls, **parts: Any) -> Snapshot:
        """A snapshot from its parts (a loaded packed copy: ``packed.unpack``)."""
        snapshot = object.__new__(cls)
        snapshot._assemble(**parts)
        return snapshot

    def _assemble(
        self,
        *,
        token: str | None,
        seq: int,
        epoch: str | None,
        ids: list[str],
        records: list[MemoryRecord | None],
        decode: RowDecoder | None,
        vectors: np.ndarray,
        has_vector: np.ndarray,
        created: np.ndarray,
        columns: FilterColumns,
        bm25: Bm25Index,
        successors: dict[str, int],
        sources: dict[str, Sequence[int]],
    ) -> None:
        self.token, self.seq, self.epoch = token, seq, epoch
        self.ids, self._records, self._decode = ids, records, decode
        self.row_of = {memory_id: i for i, memory_id in enumerate(ids)}
        self._vectors, self.has_vector, self.created = vectors, has_vector, created
        self.columns, self.bm25 = columns, bm25
        self._successors, self._sources = successors, sources
        # Built on the first metadata filter: searches without one never pay for it.
        self._term_rows = None

    def _index_lineage(self, row: int, replaces: str | None, sources: list[str]) -> None:
        if replaces is not None:
            self._successors.setdefault(replaces, row)
        # A new tuple, never an entry changed in place: the next snapshot copies the dict, not every
        # entry (a loaded snapshot's entries are the header's lists, shared the same way).
        for source in sources:
            self._sources[source] = (*self._sources.get(source, ()), row)

    @property
    def size(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self._vectors.shape[1])

    @property
    def matrix(self) -> np.ndarray:
        """The full vector of every row (zeros where a row has none)."""
        return self._vectors[: self.size]

    def record(self, row: int) -> MemoryRecord:
        """The record of ``row``, decoded on first access."""
        found = self._records[row]
        if found is None:
            assert self._decode is not None, "a row without a record needs the stored rows"
            found = self._records[row] = self._decode(row)
        return found

    def decoded(self, row: int) -> bool:
        """Whether ``row``'s record is held as an object (decoded, or changed since the load)."""
        return self._records[row] is not None

    @property
    def decoder(self) -> RowDecoder | None:
        """What decodes the rows not held as objects (a loaded snapshot's stored rows)."""
        return self._decode

    def lineage(self) -> tuple[dict[str, int], dict[str, Sequence[int]]]:
        """(the row replacing each superseded memory id, the rows drawn from each message id)."""
        return self._successors, self._sources

    @property
    def records(self) -> list[MemoryRecord]:
        """Every record, in row order (decodes them all: for tests and rare whole-partition reads)."""
        return [self.record(i) for i in range(self.size)]

    @property
    def by_id(self) -> Mapping[str, MemoryRecord]:
        return _ById(self)

    def full_vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        """The full vectors of the records among ``ids`` that have one (views of the matrix)."""
        rows = [(i, self.row_of[i]) for i in ids if i in self.row_of]
        return {i: self._vectors[row] for i, row in rows if self.has_vector[row]}

    def successor(self, memory_id: str) -> MemoryRecord | None:
        row = self._successors.get(memory_id)
        return None if row is None else self.record(row)

    def by_source(self, source_id: str) -> list[MemoryRecord]:
        found = [self.record(row) for row in self._sources.get(source_id, ())]
        return sorted(found, key=lambda r: (r.created_at, r.version, r.id))

    # ------------------------------------------------------------ following writes
    def applied(
        self, rows: list[dict[str, Any]], *, token: str | None, seq: int, epoch: str | None
    ) -> Snapshot:
        """The next snapshot: this one with ``rows`` (items the writes since changed) in place."""
        nxt = object.__new__(Snapshot)
        nxt.token, nxt.seq, nxt.epoch = token, seq, epoch
        nxt.ids, nxt._records, nxt._decode = list(self.ids), list(self._records), self._decode
        nxt.row_of = dict(self.row_of)
        nxt._vectors, nxt.has_vector, nxt.created = self._vectors, self.has_vector.copy(), self.created
        nxt.columns = FilterColumns(
            **{name: getattr(self.columns, name).copy() for name in FilterColumns.array_names()},
            sessions=self.columns.sessions,
        )
        nxt.bm25, nxt._term_rows = self.bm25, None
        nxt._sources = dict(self._sources)
        nxt._successors = dict(self._successors)
        fresh: list[tuple[MemoryRecord, np.ndarray | None]] = []
        for row in rows:
            record = items.from_item(row)
            at = nxt.row_of.get(record.id)
            if at is None:
                fresh.append((record, _full_of(row)))
                continue
            # A record's text, vectors and lineage never change; its current flag and metadata do.
            nxt._records[at] = record
            replaced = FilterColumns.from_records([record], sessions=nxt.columns.sessions)
            for name in FilterColumns.array_names():
                getattr(nxt.columns, name)[at] = getattr(replaced, name)[0]
            if not searchable(record):
                nxt.bm25.retire(at)
        if fresh:
            nxt._append(fresh)
        return nxt

    def _append(self, fresh: list[tuple[MemoryRecord, np.ndarray | None]]) -> None:
        start, records = self.size, [r for r, _ in fresh]
        for i, record in enumerate(records):
            self.row_of[record.id] = start + i
            self._index_lineage(start + i, record.replaces_id, record.source_ids)
        self._records += records
        self.ids += [r.id for r in records]
        end = self.size
        vectors = self._vectors
        dim = next((len(v) for _, v in fresh if v is not None), vectors.shape[1])
        if end > len(vectors) or dim != vectors.shape[1] or not vectors.flags.writeable:
            # Room for later rows too (shared with the next snapshots), a quarter more at a time:
            # a loaded 20,000-row matrix is 80 MB, and doubling it would hold twice that.
            grown = np.zeros((max(end + end // 4, end + 16), dim), dtype=np.float32)
            if dim == vectors.shape[1]:
                grown[:start] = vectors[:start]
            vectors = self._vectors = grown
        for i, (_, v) in enumerate(fresh):
            # A row without a vector is zeroed: the room it takes may hold anything (a loaded buffer).
            vectors[start + i] = 0.0 if v is None else v
        self.has_vector = np.concatenate([self.has_vector, [v is not None for _, v in fresh]])
        self.created = np.concatenate([self.created, [r.created_at.timestamp() for r in records]])
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
        self.bm25.extend([bm25_text(r) for r in records], live=[searchable(r) for r in records])

    # ------------------------------------------------------------------- search
    def mask(self, filters: MemoryFilters, *, search: bool = True) -> np.ndarray:
        """``record_filter.matches`` for every record at once."""
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

    def term_counts(self, query: str) -> TermCounts:
        """The searchable records and, per stem of the query's content words, how many hold it."""
        stems = dict.fromkeys(stem(word) for word in query_terms(query))
        docs, df = self.bm25.document_frequencies(list(stems), docs=self.size)
        return TermCounts(docs, df)

    def vector_search(self, query: np.ndarray, k: int, filters: MemoryFilters) -> list[ScoredId]:
        """Exact cosine top-k (rows are unit vectors) among the records the filters allow.

        A query of the full dimension ranks the full vectors (the exact search); a
        shorter one is a coarse query, ranked against the re-normalised prefixes.
        """
        if not self.size or k <= 0:
            return []
        allowed = self.mask(filters) & self.has_vector
        if not allowed.any():
            return []
        query = np.asarray(query, dtype=np.float32)
        matrix = self.matrix if len(query) == self.dim else normalise(self.matrix[:, : len(query)])
        scores = np.where(allowed, matrix @ query, -np.inf)
        top = top_indices(scores, min(k, int(allowed.sum())))
        return [ScoredId(id=self.ids[i], score=float(scores[i])) for i in top]
