"""The embedded store's metadata index: read only by searches that filter on metadata, and complete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.domain import versions
from memstack.models import MemoryFilters, MemoryRecord
from memstack.ports.store import pinned


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = EmbeddedMemoryStore(Database(tmp_path / "m.sqlite3"))
    yield s
    s.close()


def _record(content: str, user: str = "u1", **kw: Any) -> MemoryRecord:
    vec = np.zeros(8, dtype=np.float32)
    vec[len(content) % 8] = 1.0
    return MemoryRecord(
        tenant="t1",
        user_id=user,
        content=content,
        embedding_full=vec.tolist(),
        embedding_coarse=vec.tolist(),
        **kw,
    )


def _statements(store: EmbeddedMemoryStore) -> list[str]:
    seen: list[str] = []
    store.db.read().set_trace_callback(seen.append)
    return seen


def _terms(store: EmbeddedMemoryStore) -> list[tuple[Any, ...]]:
    return [
        tuple(r) for r in store.db.read().execute("SELECT uid, term FROM memory_terms ORDER BY uid, term")
    ]


def test_searches_and_listings_without_a_metadata_filter_never_read_the_index(
    store: EmbeddedMemoryStore,
) -> None:
    store.put([_record(f"note {i}", metadata={"topic": "food"}) for i in range(20)])
    q = np.eye(8, dtype=np.float32)[0]
    seen = _statements(store)
    view = pinned(store, "t1", "u1")
    view.vector_search("t1", "u1", q, 5, MemoryFilters(kind="fact"))
    view.bm25_search("t1", "u1", "note", 5, MemoryFilters())
    store.list("t1", "u1", MemoryFilters(), 5)
    assert seen and not [s for s in seen if "memory_terms" in s]
    food = MemoryFilters(metadata={"topic": ("food",)})
    view = pinned(store, "t1", "u1")
    view.vector_search("t1", "u1", q, 5, food)
    view.bm25_search("t1", "u1", "note", 5, food)
    # One search reads the terms it needs once, for both candidate stages.
    assert len([s for s in seen if "FROM memory_terms" in s]) == 1


def test_tombstones_carry_no_terms_and_erase_takes_every_term_of_the_user(store: EmbeddedMemoryStore) -> None:
    mine = _record("my note", metadata={"topic": "food", "n": 1})
    theirs = _record("their note", user="u2", metadata={"topic": "food"})
    store.put([mine, theirs])
    tomb = versions.new_version(mine, content=None, embedder=None, coarse_dim=8, deleted=True)
    store.supersede("t1", "u1", mine.id, tomb)
    store.mark("t1", "u1", [tomb.id], consolidated=True)  # a tombstone's metadata changes: still no terms
    # The retired version keeps its terms (history searches filter it); the tombstone has none.
    assert _terms(store) == [(1, "n=n:1"), (1, "topic=s:food"), (2, "topic=s:food")]
    store.erase_user("t1", "u1")
    assert _terms(store) == [(2, "topic=s:food")]
