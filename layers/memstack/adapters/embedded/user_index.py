"""One user's searchable rows in numpy: vectors and filter columns, kept current cheaply.

A ``UserIndex`` is read from SQLite once (every live row of the user) and from
then on brought up to date by reading only the rows whose ``row_gen`` is
newer than the generation it holds: the rows a write added or changed since.
Ingesting into a user with 100,000 memories therefore costs the next search
a few rows, not the whole user.

Both vectors of every row are held: the coarse ones for the candidate pass,
the full ones for the exact ranking, the rescoring and the near-duplicate
check (these twice, see ``_Vectors``), so a search reads no vector from SQLite
(about 3.5 KB per memory at 384 + 128 dimensions).

Searches read an ``IndexView``: the rows as of one generation. A view never
changes under its reader: rows are appended past the end every older view
knows about, and an update to an existing row (a version made not current)
writes into fresh copies of the small filter columns. Only the vectors are
appended in place, and a row's vectors never change (a new version is a new
row).
"""

from __future__ import annotations

import functools
import json
import operator
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memstack.adapters.embedded import fts
from memstack.adapters.embedded.postings import TextIndex
from memstack.adapters.embedded.record_cache import WARM_BELOW, RecordCache
from memstack.adapters.embedded.rows import COLUMNS, to_record
from memstack.adapters.filter_columns import TIERS, FilterColumns, RowsWhere, RowsWithTerms
from memstack.domain.ingest import is_turn_id
from memstack.models import PROFILE, ROLLUPS, MemoryFilters, Tier

# The columns of a row the index keeps (deleted rows are left out when first read), and
# what the stages after fusion read of a candidate (``ports.store.Candidates``): SQLite's
# JSON functions read the sources and the consolidated flag without a Python parse.
_COLUMNS = (
    "rid, id, session_id, scope, tier, kind, category, COALESCE(event_time, created_at), "
    "is_current, deleted, emb_coarse, emb_full, json_array_length(source_ids), "
    "json_extract(source_ids, '$[#-1]'), json_extract(metadata, '$.consolidated'), "
    "json_type(metadata, '$.consolidated'), json_extract(metadata, '$.consolidation'), "
    "COALESCE(search_text, content), "
    "CASE json_type(metadata, '$.adjacent') WHEN 'array' THEN json_extract(metadata, '$.adjacent') END"
)
(
    _RID,
    _ID,
    _SESSION,
    _SCOPE,
    _TIER,
    _KIND,
    _CATEGORY,
    _WHEN,
    _CURRENT,
    _DELETED,
    _COARSE,
    _FULL,
    _N_SOURCES,
    _LAST_SOURCE,
    _CONSOLIDATED,
    _CONSOLIDATED_TYPE,
    _CONSOLIDATION,
    _TEXT,
    _ADJACENT,
) = range(19)


#: filters whose masks a view keeps (a user searched with many different filters starts over)
_SEARCHES_KEPT = 32


#: in a long turn's passage's id (domain/chunks.py): such a row is no BM25 document
_PASSAGE = "~p"


@dataclass(frozen=True)
class Searchable:
    """The rows of a view one set of filters lets a search see."""

    allowed: np.ndarray  # bool per row
    #: rows allowed that have a vector (the vector search ranks these), and a full vector (the exact one)
    vector_rows: np.ndarray
    full_rows: np.ndarray
    #: rows BM25 ranks among for these filters (current and live; LTM only for an LTM search,
    #: ``fts.table_for``: the rows FTS5 held before schema 5), and how many of them are allowed
    indexed: int
    indexed_allowed: int


@dataclass(frozen=True)
class IndexView:
    """The user's rows as of ``generation``: row ``i`` is ``ids[i]`` (only the first ``size`` count)."""

    uid: int
    generation: int
    size: int
    rids: np.ndarray  # int64, ascending: the rows' ``memories.rid``
    ids: list[str]  # shared and append-only: read it only below ``size``
    coarse: np.ndarray  # float32 (size, dim); zeros where a row has no vector
    has_vector: np.ndarray  # bool
    full: np.ndarray  # float32 (size, full dim); zeros where a row has none
    #: the same vectors one dimension per row (full dim, size): what the exact search multiplies
    full_by_dimension: np.ndarray
    has_full: np.ndarray  # bool
    columns: FilterColumns
    #: id -> row (shared and growing: a row at or past ``size`` is not in this view)
    row_of: dict[str, int]
    #: per row: metadata["consolidated"] is set and truthy (copied when a row changes)
    consolidated: np.ndarray
    #: per row: a consolidation summary or synthesis (``models.ROLLUPS``; copied when a row changes)
    rollup: np.ndarray
    #: per row: a profile (``models.PROFILE``; copied when a row changes)
    profile: np.ndarray
    #: per row: how many source ids, and the last one (a row's sources never change)
    n_sources: np.ndarray
    last_source: list[str | None]  # shared and append-only, like ``ids``
    #: per row: the JSON text of the turns recorded around it (metadata ``adjacent``, when a list;
    #: ``domain/adjacent.py``), parsed only for the few a search asks about (shared and append-only,
    #: copied when a row's changes)
    adjacent: list[str | None]
    #: per row: the id is a raw turn's (``ingest.is_turn_id``: what the fusion splits fields by)
    turn: np.ndarray
    #: per row: a long turn's passage (``_PASSAGE`` in its id; an id never changes)
    passage: np.ndarray
    #: records searches returned, kept under the user's write sequence (shared by every view)
    records: RecordCache
    #: the rows' BM25 postings (shared and append-only) and each row's length in FTS5 tokens
    text: TextIndex
    length: np.ndarray

    #: what ``searchable`` worked out for each filters this view was searched with
    _searches: dict[tuple[Any, ...], Searchable] = field(default_factory=dict, compare=False, repr=False)

    def searchable(
        self,
        filters: MemoryFilters,
        rows_with: RowsWithTerms | None = None,
        rows_where: RowsWhere | None = None,
    ) -> Searchable:
        """The rows ``filters`` let a search see, worked out once per view and filters.

        A view never changes, so the masks of the filters it was searched with
        stay right for as long as it lives (one generation of the user). A
        metadata filter is worked out each time: its rows come from the store's
        term index (``rows_with``), not from the view.
        """
        key = (
            filters.kind,
            filters.category,
            filters.scope,
            filters.tier,
            filters.after,
            filters.before,
            filters.session_id,
            filters.session_only,
            filters.include_superseded,
        )
        # Metadata and expression filters read the store (rows written since, values changed since).
        fresh = bool(filters.metadata) or filters.where is not None
        found = None if fresh else self._searches.get(key)
        if found is None:
            allowed = self.columns.mask(filters, rows_with=rows_with, rows_where=rows_where)
            with_vector = allowed & self.has_vector
            indexed = self.indexed(fts.table_for(filters) == fts.LTM)
            found = Searchable(
                allowed=allowed,
                vector_rows=np.flatnonzero(with_vector),
                full_rows=np.flatnonzero(allowed & self.has_full),
                indexed=int(indexed.sum()),
                indexed_allowed=int((indexed & allowed).sum()),
            )
            if fresh:
                return found
            if len(self._searches) >= _SEARCHES_KEPT:
                self._searches.clear()
            self._searches[key] = found
        return found

    def indexed(self, ltm: bool) -> np.ndarray:
        """The rows BM25 ranks among (``postings``): current and live, and LTM ones for an LTM search."""
        return self._indexed_ltm if ltm else self._indexed

    @functools.cached_property
    def _indexed(self) -> np.ndarray:
        # A long turn's passages (domain/chunks.py) hold no words of their own: no documents of BM25.
        # Their column is kept as rows arrive: a scan of every id here cost each new view (each
        # write) 20-50 ms at 100,000 rows, most of what an extraction job gained with the store.
        return self.columns.current & ~self.columns.deleted & ~self.passage

    @functools.cached_property
    def _indexed_ltm(self) -> np.ndarray:
        return self._indexed & (self.columns.tier == TIERS.index(Tier.LTM.value))

    @functools.cached_property
    def replaced_ltm(self) -> bool:
        """Whether some LTM row of the user is no longer current (replaced, or deleted by a tombstone)."""
        return bool(((self.columns.tier == TIERS.index(Tier.LTM.value)) & ~self.columns.current).any())

    def rows(self, ids: Sequence[str]) -> tuple[list[str], list[int]]:
        """The ids this view holds (in the order given) and their rows."""
        row_of, size = self.row_of, self.size
        every = [row_of.get(memory_id, size) for memory_id in ids]
        if max(every, default=-1) < size:  # the usual case: the pool's ids all come from this view
            return list(ids), every
        found, rows = [], []
        for memory_id in ids:
            row = row_of.get(memory_id)
            if row is not None and row < size:
                found.append(memory_id)
                rows.append(row)
        return found, rows

    def holds(self, ids: Sequence[str], rows: np.ndarray) -> bool:
        """Whether ``rows`` are this view's rows of ``ids`` (one each, in order): what a ranking
        of this view gave; one of an older index of the user (read again since) is not."""
        if len(rows) != len(ids) or (len(rows) and int(rows.max()) >= self.size):
            return False
        held = self.ids
        # The very objects the ranking took from ``ids``: an identity check each, no string compared.
        return all(map(operator.is_, map(held.__getitem__, rows.tolist()), ids))

    def positions(self, rids: np.ndarray) -> np.ndarray:
        """The row of each rid, -1 for a rid this view does not hold."""
        if not self.size:
            return np.full(len(rids), -1, dtype=np.int64)
        pos = np.searchsorted(self.rids, rids)
        pos[pos >= self.size] = self.size - 1
        return np.where(self.rids[pos] == rids, pos, -1)


def empty_view(uid: int = 0, generation: int = 0) -> IndexView:
    return IndexView(
        uid=uid,
        generation=generation,
        size=0,
        rids=np.zeros(0, dtype=np.int64),
        ids=[],
        coarse=np.zeros((0, 1), dtype=np.float32),
        has_vector=np.zeros(0, dtype=bool),
        full=np.zeros((0, 1), dtype=np.float32),
        full_by_dimension=np.zeros((1, 0), dtype=np.float32),
        has_full=np.zeros(0, dtype=bool),
        columns=_columns([], {}),
        row_of={},
        consolidated=np.zeros(0, dtype=bool),
        rollup=np.zeros(0, dtype=bool),
        profile=np.zeros(0, dtype=bool),
        n_sources=np.zeros(0, dtype=np.int32),
        last_source=[],
        adjacent=[],
        turn=np.zeros(0, dtype=bool),
        passage=np.zeros(0, dtype=bool),
        records=RecordCache(uid, generation),
        text=TextIndex(0),
        length=np.zeros(0, dtype=np.int64),
    )


def _truthy(value: Any, json_type: str | None) -> bool:
    """Python's truth of a JSON value as ``json_extract`` returns it (arrays and objects as text)."""
    if json_type in ("array", "object"):
        return bool(json.loads(value))
    return bool(value)


def _columns(rows: Sequence[Sequence[Any]], sessions: dict[str, int]) -> FilterColumns:
    return FilterColumns.from_values(
        current=[bool(r[_CURRENT]) for r in rows],
        deleted=[bool(r[_DELETED]) for r in rows],
        scope=[r[_SCOPE] for r in rows],
        tier=[r[_TIER] for r in rows],
        kind=[r[_KIND] for r in rows],
        category=[r[_CATEGORY] for r in rows],
        session=[r[_SESSION] for r in rows],
        when=[r[_WHEN] for r in rows],
        sessions=sessions,
    )


#: rows per block of the transposed copy (``_Vectors.write``)
_TRANSPOSE_ROWS = 4096


class _Vectors:
    """One vector column of the index (coarse or full): float32 rows, appended in place.

    With ``by_dimension`` the rows are also kept a second time, one dimension per row
    (``columns``: dim x capacity): the exact search multiplies the query by every full
    vector, and OpenBLAS's matrix-vector product runs 2-2.5x faster over that layout
    (10,000 x 384 on one thread: 0.69 ms against 1.62 ms; 100,000: 12 against 22 ms).
    The row layout stays for what gathers a few rows (the pool's vectors): gathering 400
    rows from the other one costs 0.8 ms at 10,000. It costs 1.5 KB per memory at 384
    dimensions.
    """

    def __init__(self, column: int, capacity: int, *, by_dimension: bool = False) -> None:
        self.column = column
        #: the dimension, known from the first row that has a vector (0 until then)
        self.dim = 0
        self.data = np.zeros((capacity, 1), dtype=np.float32)
        self.by_dimension = by_dimension
        self.columns = np.zeros((1, capacity), dtype=np.float32)
        self.present = np.zeros(capacity, dtype=bool)

    def grow(self, capacity: int) -> None:
        self.data = _grow(self.data, capacity)
        if self.by_dimension:
            columns = np.zeros((self.columns.shape[0], capacity), dtype=np.float32)
            columns[:, : self.columns.shape[1]] = self.columns
            self.columns = columns
        self.present = _grow(self.present, capacity)

    def write(self, start: int, rows: Sequence[Sequence[Any]]) -> None:
        blobs = [r[self.column] for r in rows]
        if not self.dim:
            first = next((b for b in blobs if b is not None), None)
            if first is None:
                return
            self.dim = len(first) // 4
            self.data = np.zeros((len(self.present), self.dim), dtype=np.float32)
            if self.by_dimension:
                self.columns = np.zeros((self.dim, len(self.present)), dtype=np.float32)
        for b in blobs:
            if b is not None and len(b) != self.dim * 4:
                raise ValueError(
                    f"stored vectors have different dimensions ({len(b) // 4} and {self.dim}); "
                    "was MEMSTACK_EMBEDDING_DIM or MEMSTACK_COARSE_DIM changed after memories were stored?"
                )
        zero = bytes(self.dim * 4)
        joined = b"".join(b if b is not None else zero for b in blobs)
        end = start + len(rows)
        self.data[start:end] = np.frombuffer(joined, dtype=np.float32).reshape(len(rows), self.dim)
        if self.by_dimension:
            # A few thousand rows at a time: one transposed copy of a whole index (100,000 rows)
            # writes across every page of ``columns`` for each row it reads, and took 0.5-3 s on
            # a fresh index against 0.3-0.4 s in blocks that fit the cache.
            for block in range(start, end, _TRANSPOSE_ROWS):
                stop = min(end, block + _TRANSPOSE_ROWS)
                self.columns[:, block:stop] = self.data[block:stop].T
        self.present[start:end] = [b is not None for b in blobs]

    def by_dimension_view(self, size: int) -> np.ndarray:
        """The first ``size`` rows one dimension per row (a view: BLAS reads it with its row stride)."""
        return self.columns[:, :size]


def user_head(conn: sqlite3.Connection, tenant: str, user_id: str) -> tuple[int, int] | None:
    """The user's (uid, generation) now, ``None`` for a user without memories (or erased)."""
    row = conn.execute(
        "SELECT uid, generation FROM store_users WHERE tenant = ? AND user_id = ?", (tenant, user_id)
    ).fetchone()
    return (int(row[0]), int(row[1])) if row is not None else None


def _read(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: the full read of a big user makes a row object per row otherwise
    try:
        return cur.execute(sql, params).fetchall()
    finally:
        cur.close()


class UserIndex:
    """The growing arrays behind a user's views; ``refresh`` under the caller's per-user lock."""

    def __init__(self, uid: int, generation: int, rows: list[tuple[Any, ...]]) -> None:
        self.uid = uid
        self.generation = generation
        self.sessions: dict[str, int] = {}
        self.ids = [r[_ID] for r in rows]
        self.row_of = {memory_id: i for i, memory_id in enumerate(self.ids)}
        self.size = len(rows)
        capacity = max(64, self.size + self.size // 4)
        self._rids = np.zeros(capacity, dtype=np.int64)
        self._rids[: self.size] = [r[_RID] for r in rows]
        self.last_source: list[str | None] = [r[_LAST_SOURCE] for r in rows]
        self.adjacent: list[str | None] = [r[_ADJACENT] for r in rows]
        self._n_sources = np.zeros(capacity, dtype=np.int32)
        self._turn = np.zeros(capacity, dtype=bool)
        self._passage = np.zeros(capacity, dtype=bool)
        self._consolidated = np.zeros(capacity, dtype=bool)
        self._rollup = np.zeros(capacity, dtype=bool)
        self._profile = np.zeros(capacity, dtype=bool)
        self._coarse = _Vectors(_COARSE, capacity)
        self._full = _Vectors(_FULL, capacity, by_dimension=True)
        self._columns = _grown(_columns([], self.sessions), capacity)
        self._records = RecordCache(uid, generation)
        self._text = TextIndex(capacity)
        self._write_rows(0, rows)
        self._view = self._make_view()

    # -------------------------------------------------------------- reading
    @classmethod
    def load(cls, conn: sqlite3.Connection, tenant: str, user_id: str) -> UserIndex | None:
        """Every live row of the user, read in one transaction with the generation it is at; for a
        small user (``record_cache.WARM_BELOW``) its records too, into the record cache."""
        conn.execute("BEGIN")
        try:
            head = user_head(conn, tenant, user_id)
            if head is None:
                return None
            rows = _read(
                conn,
                f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND user_id = ? AND deleted = 0 "
                "ORDER BY rid",
                (tenant, user_id),
            )
            records = (
                [
                    to_record(r)
                    for r in _read(
                        conn,
                        f"SELECT {COLUMNS} FROM memories WHERE tenant = ? AND user_id = ? AND deleted = 0",
                        (tenant, user_id),
                    )
                ]
                if len(rows) <= WARM_BELOW
                else []
            )
        finally:
            conn.execute("COMMIT")
        index = cls(*head, rows)
        index._records.put(index.uid, index.generation, records)  # read at the index's generation
        return index

    def refresh(self, conn: sqlite3.Connection, tenant: str, user_id: str) -> bool:
        """Read the rows changed since ``generation`` and apply them; False when a full load is needed."""
        conn.execute("BEGIN")
        try:
            head = user_head(conn, tenant, user_id)
            if head is None or head[0] != self.uid:
                return False
            rows = _read(
                conn,
                f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND user_id = ? AND row_gen > ? "
                "ORDER BY rid",
                (tenant, user_id, self.generation),
            )
        finally:
            conn.execute("COMMIT")
        if not self._apply(rows):
            return False
        self.generation = head[1]
        self._records.advance(self.generation, (r[_ID] for r in rows))
        self._view = self._make_view()
        return True

    def view(self) -> IndexView:
        return self._view

    # ------------------------------------------------------------- updating
    def _apply(self, rows: list[tuple[Any, ...]]) -> bool:
        if not rows:
            return True
        rids = np.fromiter((r[_RID] for r in rows), dtype=np.int64, count=len(rows))
        pos = self._view.positions(rids)
        known = pos >= 0
        changed = [rows[i] for i in np.flatnonzero(known)]
        added = [rows[i] for i in np.flatnonzero(~known) if not rows[i][_DELETED]]
        if added and self.size and added[0][_RID] <= self._rids[self.size - 1]:
            return False  # not an append (never seen in practice): let the caller load afresh
        if changed:
            # Copies, so views already handed out keep the values of their generation.
            self._columns = FilterColumns(
                **{name: getattr(self._columns, name).copy() for name in FilterColumns.array_names()},
                sessions=self.sessions,
            )
            self._consolidated = self._consolidated.copy()
            self._rollup = self._rollup.copy()
            self._profile = self._profile.copy()
            self._write_rows_at(pos[known], changed)
            self._rewrite_adjacent(pos[known].tolist(), [r[_ADJACENT] for r in changed])
        if added:
            self._reserve(self.size + len(added))
            self._rids[self.size : self.size + len(added)] = [r[_RID] for r in added]
            self.ids.extend(r[_ID] for r in added)
            self.last_source.extend(r[_LAST_SOURCE] for r in added)
            self.adjacent.extend(r[_ADJACENT] for r in added)
            self.row_of.update((r[_ID], self.size + i) for i, r in enumerate(added))
            self._write_rows(self.size, added)
            self.size += len(added)
        return True

    def _rewrite_adjacent(self, rows: list[int], values: list[str | None]) -> None:
        """Changed rows' recorded neighbours, in a fresh list when one differs (older views keep theirs)."""
        if all(self.adjacent[r] == v for r, v in zip(rows, values, strict=True)):
            return  # the usual change (a version made not current) leaves them as they were
        self.adjacent = list(self.adjacent)
        for r, v in zip(rows, values, strict=True):
            self.adjacent[r] = v

    def _reserve(self, needed: int) -> None:
        capacity = len(self._rids)
        if needed <= capacity:
            return
        capacity = max(needed, capacity * 2)
        self._rids = _grow(self._rids, capacity)
        self._n_sources = _grow(self._n_sources, capacity)
        self._turn = _grow(self._turn, capacity)
        self._passage = _grow(self._passage, capacity)
        self._consolidated = _grow(self._consolidated, capacity)
        self._rollup = _grow(self._rollup, capacity)
        self._profile = _grow(self._profile, capacity)
        self._coarse.grow(capacity)
        self._full.grow(capacity)
        self._text.grow(capacity)
        self._columns = _grown(self._columns, capacity)

    def _write_rows(self, start: int, rows: list[tuple[Any, ...]]) -> None:
        """Rows at ``start`` onwards (past every view's end): filter columns, sources and vectors."""
        self._write_rows_at(np.arange(start, start + len(rows)), rows)
        self._n_sources[start : start + len(rows)] = [r[_N_SOURCES] or 0 for r in rows]
        self._turn[start : start + len(rows)] = [is_turn_id(r[_ID]) for r in rows]
        self._passage[start : start + len(rows)] = [_PASSAGE in r[_ID] for r in rows]
        self._coarse.write(start, rows)
        self._full.write(start, rows)
        self._text.append(
            start,
            [r[_TEXT] or "" for r in rows],
            # A row's length counts its tags, as FTS5's did: tier, kind, category, scope, and the session
            [4 + (r[_SESSION] is not None) for r in rows],
            [r[_TIER] == Tier.LTM.value for r in rows],
        )

    def _write_rows_at(self, positions: np.ndarray, rows: list[tuple[Any, ...]]) -> None:
        values = _columns(rows, self.sessions)
        for name in FilterColumns.array_names():
            getattr(self._columns, name)[positions] = getattr(values, name)
        self._consolidated[positions] = [_truthy(r[_CONSOLIDATED], r[_CONSOLIDATED_TYPE]) for r in rows]
        self._rollup[positions] = [r[_CONSOLIDATION] in ROLLUPS for r in rows]
        self._profile[positions] = [r[_CONSOLIDATION] == PROFILE for r in rows]

    def _make_view(self) -> IndexView:
        n = self.size
        return IndexView(
            uid=self.uid,
            generation=self.generation,
            size=n,
            rids=self._rids[:n],
            ids=self.ids,
            coarse=self._coarse.data[:n],
            has_vector=self._coarse.present[:n],
            full=self._full.data[:n],
            full_by_dimension=self._full.by_dimension_view(n),
            has_full=self._full.present[:n],
            columns=FilterColumns(
                **{name: getattr(self._columns, name)[:n] for name in FilterColumns.array_names()},
                sessions=self.sessions,
            ),
            row_of=self.row_of,
            consolidated=self._consolidated[:n],
            rollup=self._rollup[:n],
            profile=self._profile[:n],
            n_sources=self._n_sources[:n],
            last_source=self.last_source,
            adjacent=self.adjacent,
            turn=self._turn[:n],
            passage=self._passage[:n],
            records=self._records,
            text=self._text,
            length=self._text.length[:n],
        )


def _grow(array: np.ndarray, capacity: int) -> np.ndarray:
    out = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    out[: len(array)] = array
    return out


def _grown(columns: FilterColumns, capacity: int) -> FilterColumns:
    return FilterColumns(
        **{name: _grow(getattr(columns, name), capacity) for name in FilterColumns.array_names()},
        sessions=columns.sessions,
    )
