"""Older data directories (round one's schema 0; 4, with FTS5 tables) are upgraded once, search as before."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
from memstack.adapters.embedded import fts
from memstack.adapters.embedded.database import SCHEMA_VERSION, Database
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.models import MemoryFilters, MemoryRecord, Tier

# The round-one layout of the tables the upgrade touches (adapters/embedded/database.py at dd3c3a2).
ROUND_ONE = """
CREATE TABLE memories (
    rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL, user_id TEXT NOT NULL,
    session_id TEXT, scope TEXT NOT NULL, tier TEXT NOT NULL, kind TEXT NOT NULL, category TEXT,
    content TEXT NOT NULL, search_text TEXT, speaker TEXT, event_time REAL, created_at REAL NOT NULL,
    is_current INTEGER NOT NULL, superseded_at REAL, deleted INTEGER NOT NULL DEFAULT 0, replaces_id TEXT,
    version INTEGER NOT NULL, source_ids TEXT NOT NULL, metadata TEXT NOT NULL, emb_full BLOB, emb_coarse BLOB
);
CREATE INDEX memories_user ON memories (tenant, user_id, is_current, created_at);
CREATE INDEX memories_replaces ON memories (tenant, user_id, replaces_id);
CREATE TABLE memory_sources (
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, source_id TEXT NOT NULL, memory_id TEXT NOT NULL,
    PRIMARY KEY (tenant, user_id, source_id, memory_id)
);
CREATE VIRTUAL TABLE memories_fts USING fts5 (text, tokenize = 'porter unicode61');
CREATE TABLE user_generations (
    tenant TEXT NOT NULL, user_id TEXT NOT NULL, generation INTEGER NOT NULL, PRIMARY KEY (tenant, user_id)
);
"""

ROWS = [
    # (id, tenant, user, content, is_current)
    ("a", "t1", "u1", "Maya adopted a puppy named Biscuit", 1),
    ("b", "t1", "u1", "Maya lived in Tokyo", 0),
    ("c", "t1", "u1", "Maya lives in Osaka now", 1),
    ("d", "t1", "u2", "Biscuit is also the name of my cat", 1),
]


def _round_one_file(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(ROUND_ONE)
    for rid, (memory_id, tenant, user, content, current) in enumerate(ROWS, start=1):
        vec = np.zeros(4, dtype=np.float32)
        vec[rid % 4] = 1.0
        conn.execute(
            "INSERT INTO memories (rid, id, tenant, user_id, scope, tier, kind, content, created_at, "
            "is_current, version, source_ids, metadata, emb_full, emb_coarse) "
            "VALUES (?, ?, ?, ?, 'USER', 'ltm', 'fact', ?, ?, ?, 1, ?, '{}', ?, ?)",
            (
                rid,
                memory_id,
                tenant,
                user,
                content,
                1000.0 + rid,
                current,
                json.dumps([memory_id]),
                vec.tobytes(),
                vec.tobytes(),
            ),
        )
        if current:
            conn.execute("INSERT INTO memories_fts (rowid, text) VALUES (?, ?)", (rid, content))
    conn.executemany("INSERT INTO user_generations VALUES (?, ?, ?)", [("t1", "u1", 7), ("t1", "u2", 2)])
    conn.commit()
    conn.close()


def test_a_round_one_file_is_upgraded_and_searches_as_before(tmp_path: Path) -> None:
    path = tmp_path / "memstack.sqlite3"
    _round_one_file(path)
    store = EmbeddedMemoryStore(Database(path))
    try:
        conn = store.db.read()
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert (
            conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'user_generations'").fetchone()[0]
            == 0
        )
        hits = store.bm25_search("t1", "u1", "Biscuit puppy", 10, MemoryFilters())
        assert [h.id for h in hits] == ["a"]  # and not u2's "d"
        assert [h.id for h in store.bm25_search("t1", "u2", "Biscuit", 10, MemoryFilters())] == ["d"]
        assert store.bm25_search("t1", "u1", "Tokyo", 10, MemoryFilters()) == []  # superseded stays out
        q = np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32)
        assert {h.id for h in store.vector_search("t1", "u1", q, 10, MemoryFilters())} == {"a", "c"}
        store.put([store.get("t1", "u1", "a").model_copy(update={"id": "e", "content": "Biscuit again"})])  # type: ignore[union-attr]
        assert {h.id for h in store.bm25_search("t1", "u1", "Biscuit", 10, MemoryFilters())} == {"a", "e"}
    finally:
        store.close()
    # Opening it again changes nothing.
    again = EmbeddedMemoryStore(Database(path))
    try:
        assert {h.id for h in again.bm25_search("t1", "u1", "Biscuit", 10, MemoryFilters())} == {"a", "e"}
    finally:
        again.close()


def test_a_file_from_before_metadata_filters_gets_its_terms_from_the_stored_metadata(tmp_path: Path) -> None:
    path = tmp_path / "memstack.sqlite3"
    _round_one_file(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE memories SET metadata = ? WHERE id = 'c'", (json.dumps({"city": "Osaka", "n": 1}),))
    conn.execute("UPDATE memories SET metadata = ? WHERE id = 'd'", (json.dumps({"city": "Osaka"}),))
    conn.commit()
    conn.close()
    osaka = MemoryFilters(metadata={"city": ("Osaka",)})
    store = EmbeddedMemoryStore(Database(path))
    try:
        assert [r.id for r in store.list("t1", "u1", osaka, 10)[0]] == ["c"]
        assert [r.id for r in store.list("t1", "u2", osaka, 10)[0]] == ["d"]
        q = np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32)
        assert [h.id for h in store.vector_search("t1", "u1", q, 10, osaka)] == ["c"]
        # A file of this layout whose table went missing (written before it existed) is filled again.
        store.db.read().execute("DROP TABLE memory_terms")
    finally:
        store.close()
    again = EmbeddedMemoryStore(Database(path))
    try:
        assert [r.id for r in again.list("t1", "u1", MemoryFilters(metadata={"n": (1.0,)}), 10)[0]] == ["c"]
    finally:
        again.close()


def _schema_4_file(path: Path) -> None:
    """A file as memstack wrote it at schema 4: the rows, and their words in two FTS5 tables too."""
    store = EmbeddedMemoryStore(Database(path))
    store.put(
        [
            MemoryRecord(tenant="t1", user_id="u1", content="the secret is marzipan", tier=Tier.LTM),
            MemoryRecord(tenant="t1", user_id="u1", content="marzipan again, with tea", tier=Tier.STM),
        ]
    )
    store.close()
    conn = sqlite3.connect(path)
    for table in ("memories_fts", "memories_ltm_fts"):
        conn.execute(f"CREATE VIRTUAL TABLE {table} USING fts5 (text, tags, tokenize = 'porter unicode61')")
    prefix = fts.owner_prefix(1)
    for rid, text, tier in conn.execute("SELECT rid, content, tier FROM memories").fetchall():
        indexed = " ".join(prefix + w for w in fts.words(text))
        for table in ("memories_fts", "memories_ltm_fts") if tier == "ltm" else ("memories_fts",):
            conn.execute(
                f"INSERT INTO {table} (rowid, text, tags) VALUES (?, ?, ?)", (rid, indexed, prefix + "t1")
            )
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()


def test_a_schema_4_file_loses_its_fts5_tables_and_their_bytes_and_searches_as_before(tmp_path: Path) -> None:
    path = tmp_path / "memstack.sqlite3"
    _schema_4_file(path)
    token = (fts.owner_prefix(1) + "marzipan").encode()
    assert token in path.read_bytes()  # the FTS5 content table holds the prefixed words
    store = EmbeddedMemoryStore(Database(path))
    try:
        conn = store.db.read()
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
        assert (
            conn.execute(
                "SELECT name FROM sqlite_master WHERE sql LIKE '%fts5%' OR name LIKE '%_fts%'"
            ).fetchall()
            == []
        )
        assert len(store.bm25_search("t1", "u1", "marzipan", 10, MemoryFilters())) == 2
        assert len(store.bm25_search("t1", "u1", "marzipan", 10, MemoryFilters(tier=Tier.LTM))) == 1
    finally:
        store.close()
    # Dropped with secure_delete on: the freed pages are overwritten, the WAL checkpointed at close.
    assert token not in path.read_bytes()


def test_a_new_file_has_no_fts5_table_and_a_write_makes_none(tmp_path: Path) -> None:
    store = EmbeddedMemoryStore(Database(tmp_path / "memstack.sqlite3"))
    try:
        store.put([MemoryRecord(tenant="t1", user_id="u1", content="tea in the garden")])
        names = [r[0] for r in store.db.read().execute("SELECT name FROM sqlite_master")]
        assert names and not any("fts" in name for name in names)
        assert len(store.bm25_search("t1", "u1", "garden", 10, MemoryFilters())) == 1
    finally:
        store.close()
