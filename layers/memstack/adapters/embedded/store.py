"""The embedded memory store: SQLite rows, FTS5 BM25, exact numpy cosine on float32 blobs.

Reads by id go through the primary key and the ``id`` index (``+tenant``
keeps SQLite from preferring the per-user index, which would read every row
of the user); the tenant and user are still checked on every row. Searches
run on the user's ``UserIndex`` (coarse vectors and filter columns in numpy,
see ``user_index``) and on the user's own partition of the FTS5 index
(``fts``), so neither reads another user's rows nor all of this user's.
"""

from __future__ import annotations

import base64
import builtins
import json
import sqlite3
from collections.abc import Iterator

import numpy as np

from memstack.adapters.embedded import fts
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.index_cache import IndexCache
from memstack.adapters.embedded.rows import COLUMNS, INSERT, M_COLUMNS, filter_sql, insert_values, to_record
from memstack.adapters.embedded.user_index import IndexView
from memstack.adapters.filter_columns import TIERS
from memstack.domain.vectors import from_blob
from memstack.errors import BadRequest, Conflict
from memstack.models import MemoryFilters, MemoryRecord, ScoredId, Tier
from memstack.ports.store import Candidates, Derived, MemoryStore

#: ids per ``IN (...)`` list (SQLite's default limit on bound parameters is far above it)
_CHUNK = 500
#: hits read from FTS5 at a time while filters still drop some
_BM25_BATCH = 256


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _CHUNK):
        yield unique[start : start + _CHUNK]


class EmbeddedMemoryStore:
    """The ``MemoryStore`` port on a SQLite file."""

    def __init__(self, db: Database, *, cache_rows: int = 500_000) -> None:
        self.db = db
        self._indexes = IndexCache(cache_rows)

    # ------------------------------------------------------------------ writes
    @staticmethod
    def _bump(conn: sqlite3.Connection, tenant: str, user_id: str) -> tuple[int, int]:
        """Start a write of the user: (uid, the new generation), creating the user if new."""
        row = conn.execute(
            "INSERT INTO store_users (tenant, user_id, generation) VALUES (?, ?, 1) "
            "ON CONFLICT (tenant, user_id) DO UPDATE SET generation = generation + 1 "
            "RETURNING uid, generation",
            (tenant, user_id),
        ).fetchone()
        return int(row[0]), int(row[1])

    def _insert(self, conn: sqlite3.Connection, r: MemoryRecord, uid: int, generation: int) -> None:
        try:
            cur = conn.execute(INSERT, insert_values(r, generation))
        except sqlite3.IntegrityError as exc:
            raise Conflict(f"memory {r.id} already exists") from exc
        if not r.deleted:
            prefix = fts.owner_prefix(uid)
            tags = fts.row_tags(
                prefix,
                tier=str(r.tier),
                kind=str(r.kind),
                category=str(r.category) if r.category else None,
                scope=str(r.scope),
                session_id=r.session_id,
            )
            conn.execute(
                "INSERT INTO memories_fts (rowid, text, tags) VALUES (?, ?, ?)",
                (cur.lastrowid, fts.indexed_text(prefix, r.indexed_text), tags),
            )
        conn.executemany(
            "INSERT OR IGNORE INTO memory_sources (tenant, user_id, source_id, memory_id) VALUES (?,?,?,?)",
            [(r.tenant, r.user_id, s, r.id) for s in r.source_ids],
        )

    def put(self, records: list[MemoryRecord]) -> None:
        if not records:
            return
        with self.db.write() as conn:
            owners = {
                key: self._bump(conn, *key) for key in dict.fromkeys((r.tenant, r.user_id) for r in records)
            }
            for r in records:
                self._insert(conn, r, *owners[(r.tenant, r.user_id)])

    def supersede(self, tenant: str, user_id: str, old_id: str, new: MemoryRecord) -> None:
        if (new.tenant, new.user_id) != (tenant, user_id):
            raise BadRequest("a new version must belong to the same tenant and user")
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT rid FROM memories WHERE id = ? AND +tenant = ? AND +user_id = ? AND +is_current = 1",
                (old_id, tenant, user_id),
            ).fetchone()
            if row is None:
                raise Conflict(f"memory {old_id} is not the current version")
            uid, generation = self._bump(conn, tenant, user_id)
            conn.execute(
                "UPDATE memories SET is_current = 0, superseded_at = ?, row_gen = ? WHERE rid = ?",
                (new.created_at.timestamp(), generation, row["rid"]),
            )
            # Superseded text leaves the BM25 index; history reads it from the row.
            conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (row["rid"],))
            self._insert(conn, new, uid, generation)

    def mark(self, tenant: str, user_id: str, ids: list[str], **fields: object) -> int:
        changed = 0
        generation: int | None = None
        with self.db.write() as conn:
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT rid, metadata FROM memories WHERE id IN ({marks}) "
                    "AND +tenant = ? AND +user_id = ?",
                    (*chunk, tenant, user_id),
                ).fetchall()
                for row in rows:
                    meta = json.loads(row["metadata"])
                    if all(meta.get(k) == v for k, v in fields.items()):
                        continue
                    meta.update(fields)
                    if generation is None:
                        _, generation = self._bump(conn, tenant, user_id)
                    # row_gen moves too: the index keeps the consolidated flag the search reads.
                    conn.execute(
                        "UPDATE memories SET metadata = ?, row_gen = ? WHERE rid = ?",
                        (json.dumps(meta), generation, row["rid"]),
                    )
                    changed += 1
        return changed

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        with self.db.write() as conn:
            rids = [
                r["rid"]
                for r in conn.execute(
                    "SELECT rid FROM memories WHERE tenant = ? AND user_id = ?", (tenant, user_id)
                )
            ]
            conn.executemany("DELETE FROM memories_fts WHERE rowid = ?", [(rid,) for rid in rids])
            conn.execute("DELETE FROM memories WHERE tenant = ? AND user_id = ?", (tenant, user_id))
            conn.execute("DELETE FROM memory_sources WHERE tenant = ? AND user_id = ?", (tenant, user_id))
            # The user's uid goes too: a later write starts a new uid (never reused), which
            # tells every cache, in this process or another, that its copy is gone.
            conn.execute("DELETE FROM store_users WHERE tenant = ? AND user_id = ?", (tenant, user_id))
        self._indexes.drop(tenant, user_id)
        return {"memories": len(rids)}

    # ------------------------------------------------------------------- reads
    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        row = (
            self.db.read()
            .execute(
                f"SELECT {COLUMNS} FROM memories WHERE id = ? AND +tenant = ? AND +user_id = ?",
                (memory_id, tenant, user_id),
            )
            .fetchone()
        )
        return to_record(row) if row else None

    def get_many(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, MemoryRecord]:
        out: dict[str, MemoryRecord] = {}
        conn = self.db.read()
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE id IN ({marks}) AND +tenant = ? AND +user_id = ?",
                (*chunk, tenant, user_id),
            ):
                out[row["id"]] = to_record(row)
        return out

    def embeddings(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, np.ndarray]:
        """Full vectors from the user's index; from SQLite only for rows it does not hold (tombstones)."""
        view = self.index(tenant, user_id)
        out: dict[str, np.ndarray] = {}
        missing = []
        for memory_id in ids:
            row = view.row_of.get(memory_id)
            if row is not None and row < view.size and view.has_full[row]:
                out[memory_id] = view.full[row]
            else:
                missing.append(memory_id)
        if missing:
            out.update(self._stored_embeddings(tenant, user_id, missing))
        return out

    def _stored_embeddings(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        conn = self.db.read()
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            for memory_id, blob in conn.execute(
                f"SELECT id, emb_full FROM memories WHERE id IN ({marks}) AND +tenant = ? AND +user_id = ?",
                (*chunk, tenant, user_id),
            ):
                vec = from_blob(blob)
                if vec is not None:
                    out[memory_id] = vec
        return out

    def successor(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        row = (
            self.db.read()
            .execute(
                f"SELECT {COLUMNS} FROM memories WHERE tenant = ? AND user_id = ? AND replaces_id = ?",
                (tenant, user_id, memory_id),
            )
            .fetchone()
        )
        return to_record(row) if row else None

    def find_by_source(self, tenant: str, user_id: str, source_id: str) -> list[MemoryRecord]:
        rows = (
            self.db.read()
            .execute(
                f"SELECT {M_COLUMNS} FROM memory_sources s "
                "JOIN memories m ON m.id = s.memory_id AND +m.tenant = s.tenant AND +m.user_id = s.user_id "
                "WHERE s.tenant = ? AND s.user_id = ? AND s.source_id = ? ORDER BY m.rid",
                (tenant, user_id, source_id),
            )
            .fetchall()
        )
        return [to_record(r) for r in rows]

    def list(
        self,
        tenant: str,
        user_id: str,
        filters: MemoryFilters,
        limit: int,
        cursor: str | None = None,
    ) -> tuple[builtins.list[MemoryRecord], str | None]:
        where, params = filter_sql(filters, search=False)
        if cursor:
            try:
                created, rid = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
                where += " AND (m.created_at < ? OR (m.created_at = ? AND m.rid < ?))"
                params += [float(created), float(created), int(rid)]
            except (ValueError, UnicodeDecodeError) as exc:
                raise BadRequest("cursor is not one this API returned") from exc
        rows = (
            self.db.read()
            .execute(
                f"SELECT m.rid, {M_COLUMNS} FROM memories m "
                f"WHERE m.tenant = ? AND m.user_id = ? AND m.deleted = 0{where} "
                "ORDER BY m.created_at DESC, m.rid DESC LIMIT ?",
                (tenant, user_id, *params, limit + 1),
            )
            .fetchall()
        )
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit and page:
            last = page[-1]
            next_cursor = base64.urlsafe_b64encode(f"{last['created_at']}|{last['rid']}".encode()).decode()
        return [to_record(r) for r in page], next_cursor

    # ------------------------------------------------------------------ search
    def index(self, tenant: str, user_id: str) -> IndexView:
        """The user's search index as of now (what one search reads)."""
        return self._indexes.view(self.db.read(), tenant, user_id)

    def bm25_search(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        return self.bm25_on(self.index(tenant, user_id), query, k, filters)

    def vector_search(
        self, tenant: str, user_id: str, query_coarse: np.ndarray, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        return vector_on(self.index(tenant, user_id), query_coarse, k, filters)

    def bm25_on(self, view: IndexView, query: str, k: int, filters: MemoryFilters) -> builtins.list[ScoredId]:
        """BM25 top-k of the user's FTS partition, among the rows of ``view`` the filters allow."""
        if not view.size or k <= 0:
            return []
        match = fts.match_expression(fts.owner_prefix(view.uid), query)
        if match is None:
            return []
        seen = view.searchable(filters)
        allowed = seen.allowed
        # The FTS index holds exactly the current, live rows. If the filters drop none of
        # them, FTS5's own top-k is the answer. Otherwise hits are read until k pass, and
        # when most rows are filtered out, the filters' tags narrow the MATCH first.
        searchable, passing = seen.indexed, seen.indexed_allowed
        if not passing:
            return []
        every_hit_allowed = passing == searchable
        if 2 * passing < searchable:
            match = f"{match} AND {fts.filter_expression(fts.owner_prefix(view.uid), filters)}"
        sql = f"SELECT rowid, {fts.RANK} FROM memories_fts WHERE memories_fts MATCH ? ORDER BY 2"
        params: tuple[object, ...] = (match,)
        if every_hit_allowed:
            sql, params = sql + " LIMIT ?", (match, k)
        cur = self.db.read().cursor()
        cur.row_factory = None
        out: list[ScoredId] = []
        try:
            cur.execute(sql, params)
            while len(out) < k:
                batch = cur.fetchmany(k if every_hit_allowed else _BM25_BATCH)
                if not batch:
                    break
                rids = np.fromiter((r[0] for r in batch), dtype=np.int64, count=len(batch))
                pos = view.positions(rids)
                # A hit the view does not hold was written after it was made: not visible yet.
                keep = pos >= 0
                keep[keep] = allowed[pos[keep]]
                hits = np.flatnonzero(keep)[: k - len(out)].tolist()
                ids = view.ids
                # FTS5's bm25() is negative (more negative = better); flip it so higher is better.
                out += [
                    ScoredId(id=ids[p], score=-batch[j][1])
                    for j, p in zip(hits, pos[hits].tolist(), strict=True)
                ]
        finally:
            cur.close()
        return out

    def candidates(self, tenant: str, user_id: str, ids: builtins.list[str]) -> Candidates:
        """The pool's columns from the user's index (``ports.store.CandidateReader``): no SQL at all."""
        view = self.index(tenant, user_id)
        found, rows = view.rows(ids)
        at = np.array(rows, dtype=np.int64)
        cols = view.columns
        return Candidates(
            ids=found,
            stm=cols.tier[at] == TIERS.index(Tier.STM.value),
            current=cols.current[at],
            deleted=cols.deleted[at],
            when=cols.when[at],
            consolidated=view.consolidated[at],
            n_sources=view.n_sources[at],
            last_source=[view.last_source[r] for r in rows],
            vectors=view.full[at],
            has_vector=view.has_full[at],
            replaced_ltm=view.replaced_ltm,
        )

    def full_vectors(
        self, tenant: str, user_id: str, ids: builtins.list[str]
    ) -> tuple[builtins.list[str], np.ndarray]:
        """Full vectors from the user's index as one matrix (``ports.store.CandidateReader``)."""
        view = self.index(tenant, user_id)
        found, rows = view.rows(ids)
        at = np.array(rows, dtype=np.int64)
        has = view.has_full[at]
        if not has.all():
            found = [i for i, h in zip(found, has.tolist(), strict=True) if h]
            at = at[has]
        return found, view.full[at]

    def derived(
        self, tenant: str, user_id: str, source_ids: builtins.list[str]
    ) -> dict[str, builtins.list[Derived]]:
        """The LTM memories made from each source, in one query per 500 sources."""
        out: dict[str, list[Derived]] = {s: [] for s in source_ids}
        cur = self.db.read().cursor()
        cur.row_factory = None
        try:
            for chunk in _chunks(source_ids):
                marks = ",".join("?" * len(chunk))
                for source, memory_id, replaces_id, is_current in cur.execute(
                    "SELECT s.source_id, m.id, m.replaces_id, m.is_current FROM memory_sources s "
                    "JOIN memories m ON m.id = s.memory_id "
                    "AND +m.tenant = s.tenant AND +m.user_id = s.user_id "
                    f"WHERE s.tenant = ? AND s.user_id = ? AND s.source_id IN ({marks}) AND m.tier = 'ltm' "
                    "ORDER BY m.rid",
                    (tenant, user_id, *chunk),
                ):
                    out[source].append(Derived(memory_id, replaces_id, bool(is_current)))
        finally:
            cur.close()
        return out

    def read_view(self, tenant: str, user_id: str) -> MemoryStore:
        """The reads of one search, all on the index as it is now (``ports.store.ReadView``)."""
        return _PinnedUser(self, tenant, user_id, self.index(tenant, user_id))

    def close(self) -> None:
        self._indexes.clear()
        self.db.close()


def vector_on(view: IndexView, query_coarse: np.ndarray, k: int, filters: MemoryFilters) -> list[ScoredId]:
    """Exact cosine top-k (rows are unit vectors) among the rows of ``view`` the filters allow."""
    if not view.size or k <= 0:
        return []
    rows = view.searchable(filters).vector_rows
    if not len(rows):
        return []
    q = np.asarray(query_coarse, dtype=np.float32)
    if len(rows) == view.size:
        scores = view.coarse @ q
    elif 4 * len(rows) < view.size:
        scores = view.coarse[rows] @ q  # few rows pass: score only those
    else:
        scores = (view.coarse @ q)[rows]
    n = min(k, len(rows))
    top = np.argpartition(scores, len(scores) - n)[len(scores) - n :]
    top = top[np.argsort(-scores[top], kind="stable")]
    positions = rows[top] if len(rows) < view.size else top
    ids = view.ids
    return [
        ScoredId(id=ids[i], score=score)
        for i, score in zip(positions.tolist(), scores[top].tolist(), strict=True)
    ]


class _PinnedUser(EmbeddedMemoryStore):
    """One user's reads on one index view; anything else goes to the store as usual."""

    def __init__(self, store: EmbeddedMemoryStore, tenant: str, user_id: str, view: IndexView) -> None:
        # Shares the store's file and cache; only the two searches differ.
        self.db = store.db
        self._indexes = store._indexes
        self._key = (tenant, user_id)
        self._view = view

    def index(self, tenant: str, user_id: str) -> IndexView:
        return self._view if (tenant, user_id) == self._key else super().index(tenant, user_id)

    def close(self) -> None:
        """The view owns nothing; closing it leaves the store open."""
