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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from memstack.adapters.embedded import fts, metadata_terms
from memstack.errors import StorageFull

#: PRAGMA user_version of a file laid out as below (round one's files are 0; 4 still had FTS5 tables)
SCHEMA_VERSION = 5

SCHEMA = (
    """
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
    -- ids of the current memories this one contradicts (JSON list; issue 21: contradictions)
    conflicts_with TEXT NOT NULL DEFAULT '[]',
    emb_full BLOB,
    emb_coarse BLOB,
    -- the user's generation (store_users) of the last write that changed this row's
    -- searchable state: a cache at generation g re-reads only rows with row_gen > g
    row_gen INTEGER NOT NULL DEFAULT 0
)""",
    "CREATE INDEX IF NOT EXISTS memories_user ON memories (tenant, user_id, is_current, created_at)",
    "CREATE INDEX IF NOT EXISTS memories_replaces ON memories (tenant, user_id, replaces_id)",
    "CREATE INDEX IF NOT EXISTS memories_changes ON memories (tenant, user_id, row_gen)",
    """
CREATE TABLE IF NOT EXISTS memory_sources (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    source_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    PRIMARY KEY (tenant, user_id, source_id, memory_id)
)""",
    # One row per user with memories: ``uid`` numbers the user (never reused: AUTOINCREMENT),
    # ``generation`` is bumped by every write transaction, so (uid, generation) tells a
    # cache whether what it holds is still the user's state.
    """
CREATE TABLE IF NOT EXISTS store_users (
    uid INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    UNIQUE (tenant, user_id)
)""",
    """
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
)""",
    "CREATE INDEX IF NOT EXISTS stm_pending ON stm (consolidated, tenant, user_id, received_at)",
    """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    status TEXT NOT NULL,             -- pending | dead
    attempts INTEGER NOT NULL DEFAULT 0,
    available_at REAL NOT NULL,
    last_error TEXT,
    created_at REAL NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (status, available_at)",
    """
CREATE TABLE IF NOT EXISTS kv (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    expires_at REAL,
    PRIMARY KEY (namespace, key)
)""",
)


def _add_round_one_columns(conn: sqlite3.Connection) -> None:
    """A file written by round one (schema 0): its memories gain ``row_gen``."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
    if columns and "row_gen" not in columns:
        conn.execute("ALTER TABLE memories ADD COLUMN row_gen INTEGER NOT NULL DEFAULT 0")


def _add_conflicts_column(conn: sqlite3.Connection) -> None:
    """A file from before contradictions were linked: its memories gain ``conflicts_with``."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
    if columns and "conflicts_with" not in columns:
        conn.execute("ALTER TABLE memories ADD COLUMN conflicts_with TEXT NOT NULL DEFAULT '[]'")


def _number_round_one_users(conn: sqlite3.Connection) -> None:
    """A file written by round one: its users get a ``uid`` (its ``user_generations`` goes)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'user_generations'").fetchone() is None:
        return
    conn.execute(
        "INSERT OR IGNORE INTO store_users (tenant, user_id, generation) "
        "SELECT tenant, user_id, 1 FROM memories GROUP BY tenant, user_id ORDER BY MIN(rid)"
    )
    conn.execute("DROP TABLE user_generations")


def create_or_upgrade(conn: sqlite3.Connection) -> None:
    """Create the schema, or bring an older file to it, in one transaction (safe to race).

    An older file's FTS5 tables go (no search has read them since BM25 is scored from
    the postings beside each user's index, ``postings``); with ``secure_delete`` on,
    their pages are overwritten as they are freed, and later writes reuse them.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            _add_round_one_columns(conn)
            for table in fts.DROPPED_TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in SCHEMA:
                conn.execute(statement)
            _number_round_one_users(conn)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        # Their own checks (not the version): added beside the layout above without renumbering it.
        metadata_terms.ensure_table(conn)
        _add_conflicts_column(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def storage_full_is_507() -> Iterator[None]:
    """SQLite's "database or disk is full" as ``StorageFull`` (507, retry later), not a 500.

    The transaction it interrupted is rolled back, so nothing of it was stored.
    """
    try:
        yield
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            raise StorageFull(
                "the data volume is full: nothing of this request was stored; retry when space is freed"
            ) from exc
        raise


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
        self._before_close: list[Callable[[], None]] = []
        self.closed = False
        with self._write_lock:
            create_or_upgrade(self.connection())

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            # Deleted rows are overwritten, not just unlinked: an erased user's words must not
            # stay readable in free pages or in the free space of a page (issue 12, erase).
            conn.execute("PRAGMA secure_delete=ON")
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: everything inside commits together or not at all.

        A ``write`` inside another on the same thread joins it: the adapters'
        writes of one unit of work (an add's STM entries and their turns)
        commit together, and a failure of any undoes all of them.
        """
        with self._write_lock, storage_full_is_507():
            conn = self.connection()
            depth = getattr(self._local, "depth", 0)
            if depth:
                self._local.depth = depth + 1
                try:
                    yield conn
                finally:
                    self._local.depth = depth
                return
            conn.execute("BEGIN IMMEDIATE")
            self._local.depth = 1
            try:
                yield conn
                conn.execute("COMMIT")  # a full disk can fail the commit itself: rolled back below
            except BaseException:
                if conn.in_transaction:  # SQLite may already have rolled back (a full disk does)
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._local.depth = 0

    def read(self) -> sqlite3.Connection:
        return self.connection()

    def on_close(self, stop: Callable[[], None]) -> None:
        """Run ``stop`` (a background thread's) before the connections close under it."""
        self._before_close.append(stop)

    @contextmanager
    def maintenance(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection outside any transaction, with no write of this process running
        and the file not closing meanwhile (a checkpoint on a connection being closed crashes)."""
        with self._write_lock:
            if self.closed:
                raise sqlite3.ProgrammingError("the database is closed")
            yield self.connection()

    def close(self) -> None:
        while self._before_close:
            self._before_close.pop()()
        with self._write_lock:
            self.closed = True
        with self._connections_lock:
            for conn in self._connections:
                # A connection closed from its own thread already raises here.
                with contextlib.suppress(sqlite3.ProgrammingError):
                    conn.close()
            self._connections.clear()
        self._local = threading.local()
