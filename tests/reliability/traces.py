"""What a refused request must not leave behind: a row in any table, or its words in the file's bytes."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def table_counts(db_path: Path) -> dict[str, int]:
    """Rows of every table of the SQLite file (FTS shadow tables included), read on a fresh connection."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in names}
    finally:
        conn.close()


def file_bytes(data_dir: Path) -> bytes:
    """The database file, its WAL and its shared memory, as bytes."""
    return b"".join(p.read_bytes() for p in sorted(Path(data_dir).glob("memstack.sqlite3*")))


def assert_no_trace(db_path: Path, before: dict[str, int], *words: str) -> None:
    """Every table holds as many rows as ``before``, and no ``word`` is anywhere in the file's bytes."""
    assert table_counts(db_path) == before, "a refused request changed a table"
    raw = file_bytes(db_path.parent)
    for word in words:
        for encoded in {word.encode("utf-8", "surrogatepass"), word.encode("utf-16-le", "surrogatepass")}:
            assert encoded not in raw, f"{word!r} of a refused request is in the file"
