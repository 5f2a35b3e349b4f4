"""Editing a memory's metadata, and deleting by agent / session (Mem0's ``delete_all``), on every backend.

Both are service operations over the store port (new versions, tombstones), so
the service is built on each backend's store and held to the same outcome.
"""

from __future__ import annotations

from typing import Any

import pytest
from memstack.models import MemoryFilters
from memstack.service import MemoryService

from .test_metadata_filters import bm25, listed, vector
from .test_store_conformance import rec


def test_a_metadata_edit_is_a_new_version_with_the_same_text_and_vector(
    store: Any, service: MemoryService
) -> None:
    note = rec("note about cooking", metadata={"agent_id": "chef", "topic": "food", "op_key": "x"})
    store.put([note])
    new = service.update("t1", "u1", note.id, metadata={"topic": "kitchen", "stars": 4})
    assert new.version == 2 and new.replaces_id == note.id and new.content == note.content
    # The caller's labels are replaced; the system's keys (the agent, bookkeeping) stay.
    assert new.metadata == {
        "topic": "kitchen",
        "stars": 4,
        "agent_id": "chef",
        "op_key": "x",
        "edited": "manual",
    }
    kitchen = MemoryFilters(metadata={"topic": ("kitchen",)})
    food = MemoryFilters(metadata={"topic": ("food",)})
    assert listed(store, kitchen) == bm25(store, kitchen) == vector(store, kitchen) == {"note about cooking"}
    assert listed(store, food) == bm25(store, food) == vector(store, food) == set()
    # The unchanged text kept its vector (no new embedding of the same text needed).
    assert store.embeddings("t1", "u1", [new.id])[new.id].tolist() == pytest.approx(note.embedding_full)
    # Text and metadata at once.
    both = service.update("t1", "u1", new.id, "note about baking", metadata={})
    assert both.content == "note about baking" and both.metadata == {
        "agent_id": "chef",
        "op_key": "x",
        "edited": "manual",
    }


def test_deleting_by_agent_or_session_tombstones_only_those(store: Any, service: MemoryService) -> None:
    notes = [
        rec("note chef s1", minutes=1, session_id="s1", metadata={"agent_id": "chef"}),
        rec("note chef s2", minutes=2, session_id="s2", metadata={"agent_id": "chef"}),
        rec("note coach s1", minutes=3, session_id="s1", metadata={"agent_id": "coach"}),
        rec("note none s2", minutes=4, session_id="s2"),
        rec("note chef other user", user="u2", metadata={"agent_id": "chef"}),
    ]
    store.put(notes)
    by_id = {n.id: n.content for n in notes}
    chef_s1 = MemoryFilters(session_id="s1", session_only=True, metadata={"agent_id": ("chef",)})
    assert [by_id[i] for i in service.delete_matching("t1", "u1", chef_s1)] == ["note chef s1"]
    chef = MemoryFilters(metadata={"agent_id": ("chef",)})
    assert [by_id[i] for i in service.delete_matching("t1", "u1", chef)] == ["note chef s2"]
    s1 = MemoryFilters(session_id="s1", session_only=True)
    assert [by_id[i] for i in service.delete_matching("t1", "u1", s1)] == ["note coach s1"]
    everything = MemoryFilters()
    assert (
        listed(store, everything) == bm25(store, everything) == vector(store, everything) == {"note none s2"}
    )
    # Each deleted memory ends in a tombstone; the other user's memory is untouched.
    chain = service.history("t1", "u1", notes[0].id)
    assert [r.deleted for r in chain] == [False, True]
    assert listed(store, everything, user="u2") == {"note chef other user"}
    assert service.delete_matching("t1", "u1", chef) == []
