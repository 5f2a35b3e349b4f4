"""The embedded memory store: SQLite rows, BM25 and exact numpy cosine from a per-user index.

Reads by id go through the primary key and the ``id`` index (``+tenant``
keeps SQLite from preferring the per-user index, which would read every row
of the user); the tenant and user are still checked on every row. Searches
run on the user's ``UserIndex`` (vectors, filter columns and BM25 postings in
memory, see ``user_index`` and ``postings``): no search reads another user's
rows, and BM25's statistics are the user's own.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

import numpy as np

from memstack.adapters.embedded import fts, metadata_terms, neighbour_rows, postings
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.index_cache import IndexCache
from memstack.adapters.embedded.rows import COLUMNS, INSERT, M_COLUMNS, filter_sql, insert_values, to_record
from memstack.adapters.embedded.scrub import Scrubber
from memstack.adapters.embedded.user_index import IndexView, user_head
from memstack.adapters.embedded.where import where_sql
from memstack.adapters.filter_columns import TIERS, RowsWhere, RowsWithTerms
from memstack.domain.cursors import decode_row_position, encode_position
from memstack.domain.erasure import RETENTION_SECONDS, Fence, erasure_key, refuse_if_erased
from memstack.domain.filter_expr import Node
from memstack.domain.vectors import from_blob, top_indices
from memstack.errors import BadRequest, Conflict
from memstack.models import ListOrder, MemoryFilters, MemoryRecord, Ranked, ScoredId, Tier, UserSummary
from memstack.ports.store import Candidates, Derived, MemoryStore, TermCounts
from memstack.ports.tenant_config import TenantConfigStore

#: ids per ``IN (...)`` list (SQLite's default limit on bound parameters is far above it)
_CHUNK = 500
#: an empty ranking
_NOTHING = Ranked([], np.zeros(0), np.zeros(0, dtype=bool))


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _CHUNK):
        yield unique[start : start + _CHUNK]


def ensure_erasures(db: Database) -> None:
    """The erasure markers (domain/erasure.py): a hash of the user, a time, an expiry."""
    with db.write() as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS erasures (key TEXT PRIMARY KEY, erased_at REAL NOT NULL, "
            "expires_at REAL NOT NULL)"
        )


def erased_at(conn: sqlite3.Connection, tenant: str, user_id: str) -> float | None:
    """When the user was last erased (epoch seconds), if within the markers' retention."""
    row = conn.execute(
        "SELECT erased_at FROM erasures WHERE key = ?", (erasure_key(tenant, user_id),)
    ).fetchone()
    return float(row["erased_at"]) if row else None


class EmbeddedMemoryStore:
    """The ``MemoryStore`` port on a SQLite file."""

    def __init__(self, db: Database, *, cache_rows: int = 500_000) -> None:
        self.db = db
        self._indexes = IndexCache(cache_rows)
        ensure_erasures(db)
        self.scrubber = Scrubber(db)

    @staticmethod
    def _refuse_if_erased(conn: sqlite3.Connection, records: list[MemoryRecord], fence: Fence | None) -> None:
        if fence is None:
            return
        for tenant, user_id in dict.fromkeys((r.tenant, r.user_id) for r in records):
            refuse_if_erased(fence, erased_at(conn, tenant, user_id))

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
        if not r.deleted and r.metadata and cur.lastrowid is not None:
            metadata_terms.add(conn, uid, cur.lastrowid, r.metadata)
        conn.executemany(
            "INSERT OR IGNORE INTO memory_sources (tenant, user_id, source_id, memory_id) VALUES (?,?,?,?)",
            [(r.tenant, r.user_id, s, r.id) for s in r.source_ids],
        )

    def put(self, records: list[MemoryRecord], *, fence: Fence | None = None) -> None:
        if not records:
            return
        with self.db.write() as conn:
            self._refuse_if_erased(conn, records, fence)
            owners = {
                key: self._bump(conn, *key) for key in dict.fromkeys((r.tenant, r.user_id) for r in records)
            }
            for r in records:
                self._insert(conn, r, *owners[(r.tenant, r.user_id)])

    def supersede(
        self, tenant: str, user_id: str, old_id: str, new: MemoryRecord, *, fence: Fence | None = None
    ) -> None:
        if (new.tenant, new.user_id) != (tenant, user_id):
            raise BadRequest("a new version must belong to the same tenant and user")
        with self.db.write() as conn:
            self._refuse_if_erased(conn, [new], fence)
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
            # Superseded text leaves BM25 by the index's own columns (``postings``); history reads the row.
            self._insert(conn, new, uid, generation)

    def mark(self, tenant: str, user_id: str, ids: list[str], **fields: object) -> int:
        changes: list[tuple[int, dict[str, object], dict[str, object], bool]] = []
        with self.db.write() as conn:
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT rid, metadata, deleted FROM memories WHERE id IN ({marks}) "
                    "AND +tenant = ? AND +user_id = ?",
                    (*chunk, tenant, user_id),
                ).fetchall()
                for row in rows:
                    old = json.loads(row["metadata"])
                    if all(old.get(k) == v for k, v in fields.items()):
                        continue
                    new = {**old, **fields}
                    conn.execute(
                        "UPDATE memories SET metadata = ? WHERE rid = ?", (json.dumps(new), row["rid"])
                    )
                    changes.append((row["rid"], old, new, bool(row["deleted"])))
            if changes:
                # row_gen moves too: the index keeps the consolidated flag the search reads.
                # Metadata filters read memory_terms, which changes in this same transaction.
                uid, generation = self._bump(conn, tenant, user_id)
                for rid, old, new, deleted in changes:
                    conn.execute("UPDATE memories SET row_gen = ? WHERE rid = ?", (generation, rid))
                    if not deleted:
                        metadata_terms.replace(conn, uid, rid, old, new)
        return len(changes)

    def link_conflicts(self, tenant: str, user_id: str, links: dict[str, list[str]]) -> int:
        changed = 0
        with self.db.write() as conn:
            rows = []
            for chunk in _chunks(list(links)):
                marks = ",".join("?" * len(chunk))
                rows += conn.execute(
                    f"SELECT rid, id, conflicts_with FROM memories WHERE id IN ({marks}) "
                    "AND +tenant = ? AND +user_id = ?",
                    (*chunk, tenant, user_id),
                ).fetchall()
            updates = []
            for row in rows:
                old = json.loads(row["conflicts_with"])
                new = list(dict.fromkeys([*old, *links[row["id"]]]))
                if new != old:
                    updates.append((json.dumps(new), row["rid"]))
            if updates:
                # row_gen moves: a cached index re-reads the rows, and with them the link.
                _uid, generation = self._bump(conn, tenant, user_id)
                conn.executemany(
                    "UPDATE memories SET conflicts_with = ?, row_gen = ? WHERE rid = ?",
                    [(text, generation, rid) for text, rid in updates],
                )
                changed = len(updates)
        return changed

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        now = time.time()
        with self.db.write() as conn:
            # First the marker: from this transaction on, no write of work begun before it lands.
            conn.execute("DELETE FROM erasures WHERE expires_at < ?", (now,))
            conn.execute(
                "INSERT OR REPLACE INTO erasures (key, erased_at, expires_at) VALUES (?, ?, ?)",
                (erasure_key(tenant, user_id), now, now + RETENTION_SECONDS),
            )
            uid = self._uid(tenant, user_id, conn)
            if uid is not None:
                metadata_terms.erase(conn, uid)
            erased = conn.execute(
                "DELETE FROM memories WHERE tenant = ? AND user_id = ?", (tenant, user_id)
            ).rowcount
            conn.execute("DELETE FROM memory_sources WHERE tenant = ? AND user_id = ?", (tenant, user_id))
            # The user's uid goes too: a later write starts a new uid (never reused), which
            # tells every cache, in this process or another, that its copy is gone.
            conn.execute("DELETE FROM store_users WHERE tenant = ? AND user_id = ?", (tenant, user_id))
        self._indexes.drop(tenant, user_id)
        self.compact()
        return {"memories": erased}

    def compact(self) -> bool:
        """Make deleted text unreadable in the file: empty the WAL.

        Deleted rows are overwritten in the database pages (``secure_delete``), but
        the WAL still holds the pages as they were before the delete until a
        checkpoint copies the new ones back and truncates it. A reader holding an
        older snapshot delays that, and waiting for it would hold every writer, so
        it happens now when nothing is in the way and otherwise as soon as it can
        (``scrub.py``). True when it happened now.
        """
        return self.scrubber.request()

    # ------------------------------------------------------------------- reads
    def _uid(self, tenant: str, user_id: str, conn: sqlite3.Connection | None = None) -> int | None:
        """The user's number (``store_users``), ``None`` for a user without memories."""
        row = (
            (conn or self.db.read())
            .execute("SELECT uid FROM store_users WHERE tenant = ? AND user_id = ?", (tenant, user_id))
            .fetchone()
        )
        return int(row[0]) if row else None

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

    def tenants(self) -> builtins.list[str]:
        rows = self.db.read().execute("SELECT DISTINCT tenant FROM store_users ORDER BY tenant")
        return [r[0] for r in rows]

    def users(
        self, tenant: str, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[UserSummary], str | None]:
        # store_users has one row per user with records (erase removes it): the page comes
        # from its (tenant, user_id) index, the counts from each user's own rows.
        conn = self.db.read()
        names = [
            r[0]
            for r in conn.execute(
                "SELECT user_id FROM store_users WHERE tenant = ? AND user_id > ? ORDER BY user_id LIMIT ?",
                (tenant, cursor or "", limit + 1),
            )
        ]
        out = []
        for name in names[:limit]:
            stm, ltm, last = conn.execute(
                "SELECT COALESCE(SUM(tier = 'stm' AND is_current = 1 AND deleted = 0), 0), "
                "COALESCE(SUM(tier = 'ltm' AND is_current = 1 AND deleted = 0), 0), MAX(created_at) "
                "FROM memories WHERE tenant = ? AND user_id = ?",
                (tenant, name),
            ).fetchone()
            when = datetime.fromtimestamp(last, UTC) if last is not None else None
            out.append(UserSummary(user_id=name, stm=int(stm), ltm=int(ltm), last_write=when))
        return out, (names[limit - 1] if len(names) > limit else None)

    def list(
        self,
        tenant: str,
        user_id: str,
        filters: MemoryFilters,
        limit: int,
        cursor: str | None = None,
        order: ListOrder = "created_at",
    ) -> tuple[builtins.list[MemoryRecord], str | None]:
        uid = self._uid(tenant, user_id) if filters.metadata else None
        if filters.metadata and uid is None:
            return [], None  # no memories at all
        where, params = filter_sql(filters, search=False, uid=uid)
        # The event time is what the after/before filters compare: event_time, else created_at.
        when = "m.created_at" if order == "created_at" else "COALESCE(m.event_time, m.created_at)"
        if cursor:
            at, rid = decode_row_position(cursor)
            where += f" AND ({when} < ? OR ({when} = ? AND m.rid < ?))"
            params += [at, at, rid]
        rows = (
            self.db.read()
            .execute(
                f"SELECT m.rid, {when} AS list_position, {M_COLUMNS} FROM memories m "
                f"WHERE m.tenant = ? AND m.user_id = ? AND m.deleted = 0{where} "
                f"ORDER BY {when} DESC, m.rid DESC LIMIT ?",
                (tenant, user_id, *params, limit + 1),
            )
            .fetchall()
        )
        page = rows[:limit]
        next_cursor = None
        if len(rows) > limit and page:
            last = page[-1]
            next_cursor = encode_position(last["list_position"], last["rid"])
        return [to_record(r, start=2) for r in page], next_cursor  # after rid and list_position

    # ------------------------------------------------------------------ search
    def index(self, tenant: str, user_id: str) -> IndexView:
        """The user's search index as of now (what one search reads)."""
        return self._indexes.view(self.db.read(), tenant, user_id)

    def bm25_search(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        return list(self.bm25_ranked(tenant, user_id, query, k, filters))

    def bm25_ranked(self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters) -> Ranked:
        """``bm25_search`` as columns (``ports.store.RankedBm25``)."""
        return self.bm25_on(self.index(tenant, user_id), query, k, filters)

    def term_counts(self, tenant: str, user_id: str, query: str) -> TermCounts:
        """The user's current, live rows and how many hold each of the query's FTS5 terms, from the
        postings beside the user's index (``postings``): the collection BM25 ranks in, no SQL."""
        return self._term_counts_on(self.index(tenant, user_id), query)

    def bm25_with_counts(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> tuple[Ranked, TermCounts]:
        """``bm25_ranked`` and ``term_counts`` (``ports.store.Bm25WithTermCounts``): a search of every
        current row ranks among the very rows the counts count, so its pass counts them too."""
        view = self.index(tenant, user_id)
        df: dict[int, int] = {}
        ranking = self.bm25_on(view, query, k, filters, df)
        return ranking, self._term_counts_on(view, query, df or None)

    def _term_counts_on(self, view: IndexView, query: str, df: dict[int, int] | None = None) -> TermCounts:
        member = view.indexed(False)
        if df is None:
            terms = dict.fromkeys(view.text.stems.query(query))
            df = postings.document_frequencies(view.text.main, terms, member)
        return TermCounts(int(member.sum()), {str(term): n for term, n in df.items()})

    def vector_search(
        self, tenant: str, user_id: str, query_coarse: np.ndarray, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        view = self.index(tenant, user_id)
        return list(vector_on(view, query_coarse, k, filters, self.rows_with(view), self.rows_where(view)))

    def exact_vector_search(
        self,
        tenant: str,
        user_id: str,
        query_full: np.ndarray,
        k: int,
        filters: MemoryFilters,
        *,
        below: int,
    ) -> Sequence[ScoredId] | None:
        """Full-vector top-k over the user's index (``ports.store.ExactVectors``)."""
        view = self.index(tenant, user_id)
        if view.size >= below:
            return None
        return vector_on(view, query_full, k, filters, self.rows_with(view), self.rows_where(view), full=True)

    def rows_with(self, view: IndexView) -> RowsWithTerms:
        """The view's rows holding metadata terms (rows written after the view are not in it)."""

        def lookup(terms: list[str]) -> np.ndarray:
            pos = view.positions(metadata_terms.rids(self.db.read(), view.uid, terms))
            return pos[pos >= 0]

        return lookup

    def rows_where(self, view: IndexView) -> RowsWhere:
        """The view's rows satisfying a filter expression, read by SQL over the user's rows."""

        def lookup(expr: Node) -> np.ndarray:
            condition, params = where_sql(expr)
            cur = self.db.read().cursor()
            cur.row_factory = None
            try:
                found = cur.execute(
                    "SELECT m.rid FROM memories m WHERE (m.tenant, m.user_id) = "
                    f"(SELECT tenant, user_id FROM store_users WHERE uid = ?) AND {condition}",
                    (view.uid, *params),
                ).fetchall()
            finally:
                cur.close()
            pos = view.positions(np.fromiter((r[0] for r in found), dtype=np.int64, count=len(found)))
            return pos[pos >= 0]

        return lookup

    def bm25_on(
        self, view: IndexView, query: str, k: int, filters: MemoryFilters, df: dict[int, int] | None = None
    ) -> Ranked:
        """BM25 top-k among the rows of ``view`` the filters allow, the user's rows the collection.

        Scored from the postings beside the user's index (``postings``): no SQL, and no other
        user's rows in the statistics. An LTM search ranks among the user's LTM rows. ``df``: filled
        with each query term's document frequency in the collection of every current row, when the
        search ranks in that one and scores (else left empty).
        """
        if not view.size or k <= 0:
            return _NOTHING
        phrases = view.text.stems.query(query)
        if not phrases:
            return _NOTHING
        seen = view.searchable(filters, self.rows_with(view), self.rows_where(view))
        if not seen.indexed_allowed:
            return _NOTHING
        ltm = fts.table_for(filters) == fts.LTM
        rows, scores = postings.bm25(
            view.text.ltm if ltm else view.text.main,
            phrases,
            view.indexed(ltm),
            view.length,
            seen.allowed,
            None if ltm else df,
        )
        top = top_indices(scores, k)  # equal scores in row (write) order
        at = rows[top]
        return Ranked(list(map(view.ids.__getitem__, at.tolist())), scores[top], view.turn[at], at)

    def candidates(
        self, tenant: str, user_id: str, ids: builtins.list[str], rows: np.ndarray | None = None
    ) -> Candidates:
        """The pool's columns from the user's index (``ports.store.CandidateReader``): no SQL at all.

        ``rows``: the index rows this store's rankings gave with ``ids`` (``Ranked.rows``), taken
        when they are this view's rows of exactly those ids, else looked up by id."""
        view = self.index(tenant, user_id)
        if rows is not None and view.holds(ids, rows):
            found, at = list(ids), rows
        else:
            found, listed = view.rows(ids)
            at = np.array(listed, dtype=np.int64)
        cols = view.columns
        return Candidates(
            ids=found,
            stm=cols.tier[at] == TIERS.index(Tier.STM.value),
            current=cols.current[at],
            deleted=cols.deleted[at],
            when=cols.when[at],
            consolidated=view.consolidated[at],
            rollup=view.rollup[at],
            profile=view.profile[at],
            n_sources=view.n_sources[at],
            last_source=list(map(view.last_source.__getitem__, at.tolist())),
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

    def recorded_adjacent(
        self, tenant: str, user_id: str, ids: builtins.list[str], span: int
    ) -> dict[str, builtins.list[str]]:
        """The turns recorded around each of ``ids``, from the user's index (``TurnNeighbours``)."""
        return neighbour_rows.recorded_adjacent(self.index(tenant, user_id), ids, span)

    def visible_vectors(
        self, tenant: str, user_id: str, ids: builtins.list[str], filters: MemoryFilters
    ) -> tuple[builtins.list[str], np.ndarray, np.ndarray]:
        """The ids ``filters`` let a search see, by the index's mask, with their full vectors and rows
        (``ports.store.TurnNeighbours``)."""
        view = self.index(tenant, user_id)
        seen = view.searchable(filters, self.rows_with(view), self.rows_where(view))
        return neighbour_rows.visible_vectors(view, ids, seen)

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

    def tenant_config_store(self) -> TenantConfigStore:
        """Tenants' configurations in the same SQLite file (``ports.tenant_config``)."""
        from memstack.adapters.embedded.tenant_config import EmbeddedTenantConfigStore

        return EmbeddedTenantConfigStore(self.db)

    def close(self) -> None:
        self.scrubber.close()
        self._indexes.clear()
        self.db.close()


def vector_on(
    view: IndexView,
    query: np.ndarray,
    k: int,
    filters: MemoryFilters,
    rows_with: RowsWithTerms | None = None,
    rows_where: RowsWhere | None = None,
    *,
    full: bool = False,
) -> Ranked:
    """Exact cosine top-k (rows are unit vectors) among the rows of ``view`` the filters allow.

    ``query`` is the coarse prefix, or with ``full`` the whole vector, ranked against the
    rows' full vectors (``ExactVectors``).
    """
    if not view.size or k <= 0:
        return _NOTHING
    seen = view.searchable(filters, rows_with, rows_where)
    rows = seen.full_rows if full else seen.vector_rows
    if not len(rows):
        return _NOTHING
    q = np.asarray(query, dtype=np.float32)
    matrix = view.full if full else view.coarse
    if 4 * len(rows) < view.size:
        scores = matrix[rows] @ q  # few rows pass: score only those
    else:
        # Every full vector: over the layout one dimension per row (``user_index._Vectors``).
        every = q @ view.full_by_dimension if full else matrix @ q
        scores = every if len(rows) == view.size else every[rows]
    top = top_indices(scores, k)
    positions = rows[top] if len(rows) < view.size else top
    return Ranked(
        list(map(view.ids.__getitem__, positions.tolist())),
        scores[top].astype(np.float64),
        view.turn[positions],
        positions,
    )


class _PinnedUser(EmbeddedMemoryStore):
    """One user's reads on one index view; anything else goes to the store as usual."""

    def __init__(self, store: EmbeddedMemoryStore, tenant: str, user_id: str, view: IndexView) -> None:
        # Shares the store's file and cache; only the two searches differ.
        self.db = store.db
        self._indexes = store._indexes
        self._key = (tenant, user_id)
        self._view = view
        self._rows_of_terms: dict[tuple[str, ...], np.ndarray] = {}

    def index(self, tenant: str, user_id: str) -> IndexView:
        return self._view if (tenant, user_id) == self._key else super().index(tenant, user_id)

    def get_many(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, MemoryRecord]:
        """As the store's, through the user's record cache (``record_cache``): the user's state now."""
        if (tenant, user_id) != self._key or not ids:
            return super().get_many(tenant, user_id, ids)
        cache = self._view.records
        conn = self.db.read()
        # Every id held at the user's generation now: one statement, no transaction (a warm search).
        head = user_head(conn, tenant, user_id)
        if head is None:
            return {}  # erased (or never written): no record of the user exists
        held = cache.get(head[1], ids) if head[0] == cache.uid else {}
        if len(held) == len(ids) or held.keys() >= set(ids):
            return {i: held[i] for i in ids}
        missing = [i for i in ids if i not in held]
        # Usually one statement reads the rows and the head they were read at (one snapshot).
        found = self._rows_at_head(conn, tenant, user_id, missing)
        if found is not None and found[0] == head:
            read = found[1]
            cache.put(head[0], head[1], read.values())
            return {i: r for i in ids if (r := held.get(i) or read.get(i)) is not None}
        # A write since the head above, or no row found: the rows and the head in one transaction.
        conn.execute("BEGIN")
        try:
            head = user_head(conn, tenant, user_id)
            if head is None:
                return {}  # erased (or never written): no record of the user exists
            uid, generation = head
            held = cache.get(generation, ids) if uid == cache.uid else {}
            missing = [i for i in ids if i not in held]
            read = super().get_many(tenant, user_id, missing) if missing else {}
        finally:
            conn.execute("COMMIT")
        cache.put(uid, generation, read.values())
        return {i: r for i in ids if (r := held.get(i) or read.get(i)) is not None}

    def _rows_at_head(
        self, conn: sqlite3.Connection, tenant: str, user_id: str, ids: builtins.list[str]
    ) -> tuple[tuple[int, int], dict[str, MemoryRecord]] | None:
        """(the user's head, the records of ``ids``) read by one statement, so at one snapshot;
        ``None`` when no row is found (no head comes with none) or there are too many ids for one."""
        if len(ids) > _CHUNK:
            return None
        marks = ",".join("?" * len(ids))
        head_sql = "SELECT {} FROM store_users WHERE tenant = ? AND user_id = ?"
        rows = conn.execute(
            f"SELECT {COLUMNS}, ({head_sql.format('uid')}), ({head_sql.format('generation')}) FROM memories "
            f"WHERE id IN ({marks}) AND +tenant = ? AND +user_id = ?",
            (tenant, user_id, tenant, user_id, *ids, tenant, user_id),
        ).fetchall()
        if not rows or rows[0][-2] is None:
            return None
        return (int(rows[0][-2]), int(rows[0][-1])), {row["id"]: to_record(row) for row in rows}

    def successor(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        """As the store's; a row current in the search's view has none as of that view (no SQL).

        Superseding a row makes it not current in the same transaction that writes its
        successor, so a current row has none; the history stage asks this of every hit.
        """
        if (tenant, user_id) == self._key:
            view = self._view
            row = view.row_of.get(memory_id)
            if row is not None and row < view.size and view.columns.current[row]:
                return None
        return super().successor(tenant, user_id, memory_id)

    def rows_with(self, view: IndexView) -> RowsWithTerms:
        """As the store's, read once per search: both candidate stages ask for the same terms."""
        lookup = super().rows_with(view)
        if view is not self._view:
            return lookup

        def cached(terms: list[str]) -> np.ndarray:
            key = tuple(terms)
            if key not in self._rows_of_terms:
                self._rows_of_terms[key] = lookup(terms)
            return self._rows_of_terms[key]

        return cached

    def close(self) -> None:
        """The view owns nothing; closing it leaves the store open."""
