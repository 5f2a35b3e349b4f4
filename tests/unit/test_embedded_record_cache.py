"""The search's record cache (``adapters/embedded/record_cache.py``): always the rows as SQL has them now.

The reference is the store's plain ``get_many`` (SQL, no cache) on the same
file; the reads under test go through a search's pinned view, twice each (the
second from the cache), after any writes from this process or another.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.models import MemoryFilters
from memstack.ports.store import pinned

from .test_embedded_hot_path import USERS, _apply, _record, operations


def _sql(store: EmbeddedMemoryStore, tenant: str, user: str, ids: list[str]) -> dict[str, object]:
    return {i: r.model_dump() for i, r in EmbeddedMemoryStore.get_many(store, tenant, user, ids).items()}


def _every_id(store: EmbeddedMemoryStore) -> list[str]:
    """Every id any user ever had (an erased user's too: they must stay gone)."""
    rows = store.db.read().execute("SELECT id FROM memories").fetchall()
    return [r[0] for r in rows]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_cached_records_equal_sql_after_any_writes_from_any_process(
    ops: list[tuple[str, tuple[str, str], bool]],
) -> None:
    rng = np.random.default_rng(len(ops))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.sqlite3"
        reader, writer = EmbeddedMemoryStore(Database(path)), EmbeddedMemoryStore(Database(path))
        seen: set[str] = set()
        try:
            for step, (op, (tenant, user), elsewhere) in enumerate(ops):
                _apply(writer if elsewhere else reader, op, tenant, user, rng, step)
                seen.update(_every_id(reader))
                ids = sorted(seen)
                for t, u in USERS:
                    view = pinned(reader, t, u)
                    want = _sql(reader, t, u, ids)
                    for _ in range(2):  # the second read is served from the cache
                        got = view.get_many(t, u, ids)
                        assert {i: r.model_dump() for i, r in got.items()} == want
        finally:
            reader.close()
            writer.close()


def test_a_write_between_a_search_and_the_next_is_seen(tmp_path: Path) -> None:
    store = EmbeddedMemoryStore(Database(tmp_path / "m.sqlite3"))
    try:
        rng = np.random.default_rng(1)
        record = _record(rng, "t1", "u1", 0)
        store.put([record])
        view = pinned(store, "t1", "u1")
        assert view.get_many("t1", "u1", [record.id])[record.id].metadata.get("seen") is None
        assert len(store.index("t1", "u1").records) == 1  # kept
        store.mark("t1", "u1", [record.id], seen=True)
        # The same search's view, and the next search's: both read the mark.
        assert view.get_many("t1", "u1", [record.id])[record.id].metadata["seen"] is True
        assert pinned(store, "t1", "u1").get_many("t1", "u1", [record.id])[record.id].metadata["seen"] is True
    finally:
        store.close()


def test_an_erased_user_is_never_served_from_the_cache(tmp_path: Path) -> None:
    store = EmbeddedMemoryStore(Database(tmp_path / "m.sqlite3"))
    try:
        rng = np.random.default_rng(2)
        records = [_record(rng, "t1", "u1", i) for i in range(5)]
        store.put(records)
        ids = [r.id for r in records]
        view = pinned(store, "t1", "u1")  # a search in flight across the erase
        assert len(view.get_many("t1", "u1", ids)) == 5
        store.erase_user("t1", "u1")
        assert view.get_many("t1", "u1", ids) == {}
        assert pinned(store, "t1", "u1").get_many("t1", "u1", ids) == {}
        store.put([_record(rng, "t1", "u1", 9)])  # the user starts again: a new uid, a new cache
        assert pinned(store, "t1", "u1").get_many("t1", "u1", ids) == {}
    finally:
        store.close()


def test_a_small_user_has_every_record_read_with_its_index(tmp_path: Path) -> None:
    store = EmbeddedMemoryStore(Database(tmp_path / "m.sqlite3"))
    try:
        rng = np.random.default_rng(4)
        records = [_record(rng, "t1", "u1", i) for i in range(5)]
        store.put(records)
        view = store.index("t1", "u1")
        assert len(view.records) == 5  # before any search read one
        ids = [r.id for r in records]
        cached = view.records.get(view.generation, ids)
        assert {i: r.model_dump() for i, r in cached.items()} == _sql(store, "t1", "u1", ids)
    finally:
        store.close()


def test_changing_a_returned_record_changes_nothing_kept(tmp_path: Path) -> None:
    store = EmbeddedMemoryStore(Database(tmp_path / "m.sqlite3"))
    try:
        rng = np.random.default_rng(3)
        record = _record(rng, "t1", "u1", 0).model_copy(update={"metadata": {"tags": ["a"]}})
        store.put([record])
        for _ in range(2):
            got = pinned(store, "t1", "u1").get_many("t1", "u1", [record.id])[record.id]
            assert got.metadata == {"tags": ["a"]} and got.content == record.content
            got.metadata["tags"].append("b")
            got.source_ids.append("x")
            got.content = "changed"
        assert store.list("t1", "u1", MemoryFilters(), 5)[0][0].metadata == {"tags": ["a"]}
    finally:
        store.close()


def test_a_write_between_the_head_and_the_rows_read_keeps_stale_rows_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cache miss reads the rows and the head they were read at in one statement; a write from
    # another process after the search looked at the head sends it to the transaction instead.
    from memstack.adapters.embedded import store as store_module
    from memstack.adapters.embedded import user_index

    # a miss, as for a user too big to have its records read with its index
    monkeypatch.setattr(user_index, "WARM_BELOW", 0)
    path = tmp_path / "m.sqlite3"
    store, writer = EmbeddedMemoryStore(Database(path)), EmbeddedMemoryStore(Database(path))
    try:
        rng = np.random.default_rng(3)
        records = [_record(rng, "t1", "u1", i) for i in range(3)]
        store.put(records)
        ids = [r.id for r in records]
        view = pinned(store, "t1", "u1")
        head = store_module.user_head
        calls: list[tuple[int, int] | None] = []

        def head_then_write(conn: sqlite3.Connection, tenant: str, user_id: str) -> tuple[int, int] | None:
            found = head(conn, tenant, user_id)
            if not calls:
                writer.mark("t1", "u1", [ids[0]], seen=True)  # lands after the head was read
            calls.append(found)
            return found

        monkeypatch.setattr(store_module, "user_head", head_then_write)
        got = view.get_many("t1", "u1", ids)
        assert got[ids[0]].metadata["seen"] is True
        assert len(calls) == 2  # the head again, in the transaction
        monkeypatch.undo()
        # What the cache kept is the rows as they are now: served again, equal to SQL.
        again = pinned(store, "t1", "u1").get_many("t1", "u1", ids)
        assert {i: r.model_dump() for i, r in again.items()} == _sql(store, "t1", "u1", ids)
    finally:
        store.close()
        writer.close()
