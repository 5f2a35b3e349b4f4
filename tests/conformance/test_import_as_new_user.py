"""``memstack import --user NEW`` into the store it was exported from really creates the new user.

It answered "imported 0, skipped_existing 66": ids are unique in a store, so the copy
kept colliding with the original. The copy now gets ids of its own owner, on every backend.
"""

from __future__ import annotations

from typing import Any

from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain import keyed, versions
from memstack.domain.ingest import stm_memory_id
from memstack.domain.transfer import export_lines, import_lines
from memstack.models import MemoryFilters, Tier

from .conftest import COARSE_DIM, FULL_DIM
from .test_store_conformance import rec

EMB = HashingEmbedder(FULL_DIM)


def test_importing_a_users_export_as_another_user_into_the_same_store(store: Any) -> None:
    turn = rec("note raw turn", minutes=1, tier=Tier.STM, source_ids=["m1"])
    turn = turn.model_copy(update={"id": stm_memory_id("t1", "u1", "m1")})
    first = rec("note lives in Lisbon", minutes=2, source_ids=["m1"], metadata={"consolidated_into": turn.id})
    named = rec("note diet", minutes=3, metadata={keyed.KEY_FIELD: "diet"})
    named = named.model_copy(update={"id": keyed.keyed_id("t1", "u1", "diet")})
    store.put([turn, first, named])
    second = versions.new_version(first, content="note lives in Porto", embedder=EMB, coarse_dim=COARSE_DIM)
    store.supersede("t1", "u1", first.id, second)

    exported = list(export_lines(store, "t1", "u1", EMB))
    report = import_lines(store, exported, EMB, COARSE_DIM, user_id="u2")
    assert (report.imported, report.skipped_existing) == (4, 0)
    copies = {r.content: r for r in store.list("t1", "u2", MemoryFilters(), 10)[0]}
    assert set(copies) == {"note raw turn", "note lives in Porto", "note diet"}
    # The version chain, the raw turn's and the key's derived ids hold for the new owner.
    chain = versions.history(store, "t1", "u2", copies["note lives in Porto"].id)
    assert [r.content for r in chain] == ["note lives in Lisbon", "note lives in Porto"]
    assert copies["note raw turn"].id == stm_memory_id("t1", "u2", "m1")
    assert keyed.get_key(store, "t1", "u2", "diet").content == "note diet"
    assert chain[0].metadata["consolidated_into"] == copies["note raw turn"].id
    # The original is untouched, and importing the same file again skips what is there.
    assert {r.content for r in store.list("t1", "u1", MemoryFilters(), 10)[0]} == set(copies)
    again = import_lines(store, exported, EMB, COARSE_DIM, user_id="u2")
    assert (again.imported, again.skipped_existing) == (0, 4)
