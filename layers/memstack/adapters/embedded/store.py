"""The embedded memory store: SQLite rows, FTS5 BM25, exact numpy cosine on float32 blobs."""

from __future__ import annotations

import base64
import builtins
import json
import sqlite3
import threading
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memstack.adapters.embedded.database import Database
from memstack.domain.text import fts5_match
from memstack.domain.vectors import from_blob, to_blob
from memstack.errors import BadRequest, Conflict
from memstack.models import MemoryFilters, MemoryRecord, ScoredId

_COLUMNS = (
    "id, tenant, user_id, session_id, scope, tier, kind, category, content, search_text, speaker, "
    "event_time, created_at, is_current, superseded_at, deleted, replaces_id, version, source_ids, metadata"
)


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _dt(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def _row_to_record(row: sqlite3.Row) -> MemoryRecord:
    return MemoryRecord(
        id=row["id"],
        tenant=row["tenant"],
        user_id=row["user_id"],
        session_id=row["session_id"],
        scope=row["scope"],
        tier=row["tier"],
        kind=row["kind"],
        category=row["category"],
        content=row["content"],
        search_text=row["search_text"],
        speaker=row["speaker"],
        event_time=_dt(row["event_time"]),
        created_at=_dt(row["created_at"]) or datetime.now(UTC),
        is_current=bool(row["is_current"]),
        superseded_at=_dt(row["superseded_at"]),
        deleted=bool(row["deleted"]),
        replaces_id=row["replaces_id"],
        version=row["version"],
        source_ids=json.loads(row["source_ids"]),
        metadata=json.loads(row["metadata"]),
    )


def filter_sql(filters: MemoryFilters, *, search: bool) -> tuple[str, list[Any]]:
    """SQL conditions (on alias ``m``) for the filters; tenant and user are added by the caller.

    Search never shows tombstones and applies the scope rule: CONTEXT memories
    only inside their own session. A listing without a session shows them all.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if not filters.include_superseded:
        clauses.append("m.is_current = 1")
    if search:
        clauses.append("m.deleted = 0")
    for column in ("kind", "category", "scope", "tier"):
        value = getattr(filters, column)
        if value is not None:
            clauses.append(f"m.{column} = ?")
            params.append(str(value))
    if filters.after is not None:
        clauses.append("COALESCE(m.event_time, m.created_at) >= ?")
        params.append(filters.after.timestamp())
    if filters.before is not None:
        clauses.append("COALESCE(m.event_time, m.created_at) < ?")
        params.append(filters.before.timestamp())
    if filters.session_id is not None:
        clauses.append("(m.scope = 'USER' OR m.session_id = ?)")
        params.append(filters.session_id)
    elif search:
        clauses.append("m.scope = 'USER'")
    return (" AND " + " AND ".join(clauses)) if clauses else "", params


class _UserVectors:
    """One user's coarse vectors with the columns needed to filter them in numpy."""

    def __init__(self, generation: int, rows: list[sqlite3.Row], coarse_dim: int | None) -> None:
        self.generation = generation
        self.ids = [r["id"] for r in rows]
        self.matrix = (
            np.vstack([np.frombuffer(r["emb_coarse"], dtype=np.float32) for r in rows])
            if rows
            else np.zeros((0, coarse_dim or 1), dtype=np.float32)
        )
        self.rids = [r["rid"] for r in rows]


class EmbeddedMemoryStore:
    """The ``MemoryStore`` port on a SQLite file."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: dict[tuple[str, str], _UserVectors] = {}
        self._cache_lock = threading.Lock()

    # ------------------------------------------------------------------ writes
    def _insert(self, conn: sqlite3.Connection, r: MemoryRecord) -> None:
        try:
            cur = conn.execute(
                f"INSERT INTO memories ({_COLUMNS}, emb_full, emb_coarse) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    r.id,
                    r.tenant,
                    r.user_id,
                    r.session_id,
                    str(r.scope),
                    str(r.tier),
                    str(r.kind),
                    str(r.category) if r.category else None,
                    r.content,
                    r.search_text,
                    r.speaker,
                    _ts(r.event_time),
                    r.created_at.timestamp(),
                    int(r.is_current),
                    _ts(r.superseded_at),
                    int(r.deleted),
                    r.replaces_id,
                    r.version,
                    json.dumps(r.source_ids),
                    json.dumps(r.metadata),
                    to_blob(r.embedding_full),
                    to_blob(r.embedding_coarse),
                ),
            )
        except sqlite3.IntegrityError as exc:
            raise Conflict(f"memory {r.id} already exists") from exc
        rid = cur.lastrowid
        if not r.deleted:
            conn.execute("INSERT INTO memories_fts (rowid, text) VALUES (?, ?)", (rid, r.indexed_text))
        conn.executemany(
            "INSERT OR IGNORE INTO memory_sources (tenant, user_id, source_id, memory_id) VALUES (?,?,?,?)",
            [(r.tenant, r.user_id, s, r.id) for s in r.source_ids],
        )

    @staticmethod
    def _bump(conn: sqlite3.Connection, tenant: str, user_id: str) -> None:
        conn.execute(
            "INSERT INTO user_generations (tenant, user_id, generation) VALUES (?, ?, 1) "
            "ON CONFLICT (tenant, user_id) DO UPDATE SET generation = generation + 1",
            (tenant, user_id),
        )

    def put(self, records: list[MemoryRecord]) -> None:
        if not records:
            return
        with self.db.write() as conn:
            for r in records:
                self._insert(conn, r)
            for tenant, user_id in {(r.tenant, r.user_id) for r in records}:
                self._bump(conn, tenant, user_id)

    def supersede(self, tenant: str, user_id: str, old_id: str, new: MemoryRecord) -> None:
        if (new.tenant, new.user_id) != (tenant, user_id):
            raise BadRequest("a new version must belong to the same tenant and user")
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT rid FROM memories WHERE tenant = ? AND user_id = ? AND id = ? AND is_current = 1",
                (tenant, user_id, old_id),
            ).fetchone()
            if row is None:
                raise Conflict(f"memory {old_id} is not the current version")
            conn.execute(
                "UPDATE memories SET is_current = 0, superseded_at = ? WHERE rid = ?",
                (new.created_at.timestamp(), row["rid"]),
            )
            # Superseded text leaves the BM25 index; history reads it from the row.
            conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (row["rid"],))
            self._insert(conn, new)
            self._bump(conn, tenant, user_id)

    def mark(self, tenant: str, user_id: str, ids: list[str], **fields: object) -> int:
        changed = 0
        with self.db.write() as conn:
            for memory_id in ids:
                row = conn.execute(
                    "SELECT rid, metadata FROM memories WHERE tenant = ? AND user_id = ? AND id = ?",
                    (tenant, user_id, memory_id),
                ).fetchone()
                if row is None:
                    continue
                meta = json.loads(row["metadata"])
                if all(meta.get(k) == v for k, v in fields.items()):
                    continue
                meta.update(fields)
                conn.execute("UPDATE memories SET metadata = ? WHERE rid = ?", (json.dumps(meta), row["rid"]))
                changed += 1
            if changed:
                self._bump(conn, tenant, user_id)
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
            self._bump(conn, tenant, user_id)
        with self._cache_lock:
            self._cache.pop((tenant, user_id), None)
        return {"memories": len(rids)}

    # ------------------------------------------------------------------- reads
    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        row = (
            self.db.read()
            .execute(
                f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND user_id = ? AND id = ?",
                (tenant, user_id, memory_id),
            )
            .fetchone()
        )
        return _row_to_record(row) if row else None

    def get_many(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, MemoryRecord]:
        out: dict[str, MemoryRecord] = {}
        conn = self.db.read()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND user_id = ? AND id IN ({marks})",
                (tenant, user_id, *chunk),
            ):
                out[row["id"]] = _row_to_record(row)
        return out

    def successor(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        row = (
            self.db.read()
            .execute(
                f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND user_id = ? AND replaces_id = ?",
                (tenant, user_id, memory_id),
            )
            .fetchone()
        )
        return _row_to_record(row) if row else None

    def find_by_source(self, tenant: str, user_id: str, source_id: str) -> list[MemoryRecord]:
        rows = (
            self.db.read()
            .execute(
                f"SELECT {', '.join('m.' + c.strip() for c in _COLUMNS.split(','))} FROM memory_sources s "
                "JOIN memories m ON m.id = s.memory_id AND m.tenant = s.tenant AND m.user_id = s.user_id "
                "WHERE s.tenant = ? AND s.user_id = ? AND s.source_id = ? ORDER BY m.rid",
                (tenant, user_id, source_id),
            )
            .fetchall()
        )
        return [_row_to_record(r) for r in rows]

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
                f"SELECT m.rid, {', '.join('m.' + c.strip() for c in _COLUMNS.split(','))} FROM memories m "
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
        return [_row_to_record(r) for r in page], next_cursor

    def bm25_search(
        self, tenant: str, user_id: str, query: str, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        match = fts5_match(query)
        if match is None:
            return []
        where, params = filter_sql(filters, search=True)
        rows = (
            self.db.read()
            .execute(
                "SELECT m.id, bm25(memories_fts) AS score FROM memories_fts "
                "JOIN memories m ON m.rid = memories_fts.rowid "
                f"WHERE memories_fts MATCH ? AND m.tenant = ? AND m.user_id = ?{where} "
                "ORDER BY score LIMIT ?",
                (match, tenant, user_id, *params, k),
            )
            .fetchall()
        )
        # FTS5's bm25() is negative (more negative = better); flip it so higher is better.
        return [ScoredId(id=r["id"], score=-float(r["score"])) for r in rows]

    def _user_vectors(self, tenant: str, user_id: str) -> _UserVectors:
        conn = self.db.read()
        gen_row = conn.execute(
            "SELECT generation FROM user_generations WHERE tenant = ? AND user_id = ?", (tenant, user_id)
        ).fetchone()
        generation = gen_row["generation"] if gen_row else 0
        key = (tenant, user_id)
        with self._cache_lock:
            cached = self._cache.get(key)
            if cached is not None and cached.generation == generation:
                return cached
        rows = conn.execute(
            "SELECT rid, id, emb_coarse FROM memories WHERE tenant = ? AND user_id = ? "
            "AND deleted = 0 AND emb_coarse IS NOT NULL ORDER BY rid",
            (tenant, user_id),
        ).fetchall()
        vectors = _UserVectors(generation, rows, None)
        with self._cache_lock:
            self._cache[key] = vectors
        return vectors

    def _allowed_ids(self, tenant: str, user_id: str, filters: MemoryFilters) -> set[str]:
        where, params = filter_sql(filters, search=True)
        rows = self.db.read().execute(
            f"SELECT m.id FROM memories m WHERE m.tenant = ? AND m.user_id = ?{where}",
            (tenant, user_id, *params),
        )
        return {r["id"] for r in rows}

    def vector_search(
        self, tenant: str, user_id: str, query_coarse: np.ndarray, k: int, filters: MemoryFilters
    ) -> builtins.list[ScoredId]:
        vectors = self._user_vectors(tenant, user_id)
        if not vectors.ids:
            return []
        allowed = self._allowed_ids(tenant, user_id, filters)
        mask = np.fromiter((i in allowed for i in vectors.ids), dtype=bool, count=len(vectors.ids))
        if not mask.any():
            return []
        q = np.asarray(query_coarse, dtype=np.float32)
        scores = vectors.matrix @ q
        scores = np.where(mask, scores, -np.inf)
        n = min(k, int(mask.sum()))
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [ScoredId(id=vectors.ids[i], score=float(scores[i])) for i in top]

    def embeddings(self, tenant: str, user_id: str, ids: builtins.list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        conn = self.db.read()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(
                f"SELECT id, emb_full FROM memories WHERE tenant = ? AND user_id = ? AND id IN ({marks})",
                (tenant, user_id, *chunk),
            ):
                vec = from_blob(row["emb_full"])
                if vec is not None:
                    out[row["id"]] = vec
        return out

    def close(self) -> None:
        self.db.close()
