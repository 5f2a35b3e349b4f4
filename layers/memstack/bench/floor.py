"""The floor: the least any search over the same data can cost with the same two tools.

Exact numpy top-200 over the user's coarse vectors (one matrix, nothing to
filter) plus one FTS5 ``bm25`` top-200 over the same indexed texts, in a
table holding only that user's rows and built in one go. No records, no
fusion, no later stages. ``memstack bench search`` reports each search's
latency beside this, measured in the same process, query by query.

Where the store ranks every full vector (stage 2's exact path, ``exact``),
the floor's matrix is the full vectors instead: the same work in its least form.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import numpy as np

from memstack.domain.text import fts5_match
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, MemoryRecord
from memstack.ports.store import MemoryStore


class Floor:
    def __init__(self, coarse: np.ndarray, texts: list[str], k: int = 200) -> None:
        self.k = k
        self.matrix = np.ascontiguousarray(coarse, dtype=np.float32)
        # One dimension per row, as the embedded store multiplies (``user_index._Vectors``):
        # OpenBLAS's matrix-vector product is 2-2.5x faster over it, so that is the least form.
        self.by_dimension = np.ascontiguousarray(self.matrix.T)
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute("CREATE VIRTUAL TABLE floor USING fts5 (text, tokenize = 'porter unicode61')")
        with self.db:
            self.db.executemany("INSERT INTO floor (text) VALUES (?)", ((t,) for t in texts))

    @property
    def dim(self) -> int:
        """The dimension the floor ranks: a query vector is cut to it (``search``)."""
        return int(self.matrix.shape[1]) if self.matrix.ndim == 2 else 0

    @classmethod
    def of_user(cls, db_path: Path, tenant: str, user_id: str, k: int = 200, *, exact: bool = False) -> Floor:
        """The floor over exactly what the embedded store holds for the user (its live rows)."""
        column = "emb_full" if exact else "emb_coarse"
        conn = sqlite3.connect(db_path)
        try:
            rows = conn.execute(
                f"SELECT {column}, COALESCE(search_text, content) FROM memories "
                "WHERE tenant = ? AND user_id = ? AND deleted = 0 AND is_current = 1 "
                f"AND {column} IS NOT NULL",
                (tenant, user_id),
            ).fetchall()
        finally:
            conn.close()
        coarse = np.vstack([np.frombuffer(blob, dtype=np.float32) for blob, _ in rows])
        return cls(coarse, [text for _, text in rows], k)

    @classmethod
    def of_store(cls, store: MemoryStore, tenant: str, user_id: str, coarse_dim: int, k: int = 200) -> Floor:
        """The same floor over the user's live rows read through the store port (any backend).

        The coarse vectors are the prefixes of the full ones, as every writer stores them.
        """
        kept, full = live_rows(store, tenant, user_id)
        coarse = coarse_prefix(np.vstack([full[r.id] for r in kept]), coarse_dim)
        return cls(coarse, [r.indexed_text for r in kept], k)

    def search(self, query_vec: np.ndarray, query: str) -> float:
        """Milliseconds for the vector top-k (the query cut to ``dim``) and the BM25 top-k of one query."""
        q = coarse_prefix(query_vec, self.dim)
        started = time.perf_counter()
        scores = q @ self.by_dimension
        n = min(self.k, len(scores))
        top = np.argpartition(scores, len(scores) - n)[len(scores) - n :]
        top[np.argsort(-scores[top])]
        match = fts5_match(query)
        if match is not None:
            self.db.execute(
                "SELECT rowid, bm25(floor) FROM floor WHERE floor MATCH ? ORDER BY 2 LIMIT ?", (match, self.k)
            ).fetchall()
        return (time.perf_counter() - started) * 1000

    def match_fraction(self, query: str) -> float:
        """The share of the user's rows the query's words match (how much BM25 has to rank)."""
        match = fts5_match(query)
        if match is None or not len(self.matrix):
            return 0.0
        (count,) = self.db.execute("SELECT count(*) FROM floor WHERE floor MATCH ?", (match,)).fetchone()
        return count / len(self.matrix)

    def close(self) -> None:
        self.db.close()


def live_rows(
    store: MemoryStore, tenant: str, user_id: str
) -> tuple[list[MemoryRecord], dict[str, np.ndarray]]:
    """The user's live records that have a full vector, read through the store port, and those vectors."""
    records: list[MemoryRecord] = []
    cursor = None
    while True:
        page, cursor = store.list(tenant, user_id, MemoryFilters(), 500, cursor)
        records += [r for r in page if not r.deleted]
        if cursor is None:
            break
    full: dict[str, np.ndarray] = {}
    for start in range(0, len(records), 500):
        full.update(store.embeddings(tenant, user_id, [r.id for r in records[start : start + 500]]))
    return [r for r in records if r.id in full], full
