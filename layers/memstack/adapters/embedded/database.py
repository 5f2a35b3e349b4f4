"""The SQLite file shared by the embedded memory store and the embedded short-term store.

One connection per thread (sqlite3 objects must not cross threads), WAL so
readers never block the writer, a busy timeout so two processes (the CLI and
``memstack serve``) can share the file, and one process-wide write lock so
``BEGIN IMMEDIATE`` transactions from our own threads queue instead of failing.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT,
    scope TEXT NOT NULL,
    tier TEXT NOT NULL,
    kind TEXT NOT NULL,
    category TEXT,
    content TEXT NOT NULL,
    search_text TEXT,
    speaker TEXT,
    event_time REAL,
    created_at REAL NOT NULL,
    is_current INTEGER NOT NULL,
    superseded_at REAL,
    deleted INTEGER NOT NULL DEFAULT 0,
    replaces_id TEXT,
    version INTEGER NOT NULL,
    source_ids TEXT NOT NULL,
    metadata TEXT NOT NULL,
    emb_full BLOB,
    emb_coarse BLOB
);
CREATE INDEX IF NOT EXISTS memories_user ON memories (tenant, user_id, is_current, created_at);
CREATE INDEX IF NOT EXISTS memories_replaces ON memories (tenant, user_id, replaces_id);
CREATE TABLE IF NOT EXISTS memory_sources (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    source_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    PRIMARY KEY (tenant, user_id, source_id, memory_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5 (text, tokenize = 'porter unicode61');
-- A counter per user bumped in every write transaction: caches compare it to
-- know whether what they hold is still the user's latest state.
CREATE TABLE IF NOT EXISTS user_generations (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id)
);
CREATE TABLE IF NOT EXISTS stm (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    session_id TEXT,
    scope TEXT NOT NULL,
    received_at REAL NOT NULL,
    expires_at INTEGER NOT NULL,
    consolidated INTEGER NOT NULL DEFAULT 0,
    message TEXT NOT NULL,
    PRIMARY KEY (tenant, user_id, message_id)
);
CREATE INDEX IF NOT EXISTS stm_pending ON stm (consolidated, tenant, user_id, received_at);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    status TEXT NOT NULL,             -- pending | dead
    attempts INTEGER NOT NULL DEFAULT 0,
    available_at REAL NOT NULL,
    last_error TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (status, available_at);
CREATE TABLE IF NOT EXISTS kv (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    expires_at REAL,
    PRIMARY KEY (namespace, key)
);
"""


class Database:
    """A SQLite file opened once per process, with a connection per thread."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        # executescript manages its own transaction (it commits first).
        with self._write_lock:
            self.connection().executescript(SCHEMA)

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: everything inside commits together or not at all."""
        with self._write_lock:
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    def read(self) -> sqlite3.Connection:
        return self.connection()

    def close(self) -> None:
        with self._connections_lock:
            for conn in self._connections:
                # A connection closed from its own thread already raises here.
                with contextlib.suppress(sqlite3.ProgrammingError):
                    conn.close()
            self._connections.clear()
        self._local = threading.local()
