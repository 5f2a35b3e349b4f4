"""Columns added to existing SQLite files: ``CREATE TABLE IF NOT EXISTS`` never alters a table.

A data directory made by an older memstack has the tables without the newer
columns; each adapter that needs one ensures it when it opens the file. Two
processes opening the same file at once may both try: the loser's
"duplicate column" is the same outcome.
"""

from __future__ import annotations

import sqlite3

from memstack.adapters.embedded.database import Database


def ensure_columns(db: Database, table: str, columns: dict[str, str]) -> None:
    """Add each missing ``name: declaration`` column to ``table``."""
    conn = db.connection()
    for name, declaration in columns.items():
        present = {row["name"] for row in conn.execute(f"PRAGMA table_info({table})")}
        if name in present:
            continue
        try:
            with db.write() as tx:
                tx.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise
