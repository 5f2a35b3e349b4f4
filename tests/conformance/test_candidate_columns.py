"""What every backend's candidates say of each record (``ports.store.Candidates``), as the stages read it.

Stages 6 and 8 tell consolidation's rollups (summaries, syntheses) and profiles
from other memories by the candidates' ``rollup`` and ``profile`` columns, never
by reading records: the embedded store answers them from its index
(``CandidateReader``), the others through ``Candidates.from_records`` over what
they read. Both OpenSearch flavours run here on the recorded wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memstack.domain.retrieval.pool import read_candidates
from memstack.models import PROFILE, SUMMARY, SYNTHESIS, Tier
from memstack.ports.store import Candidates, pinned

from .conftest import BACKENDS, backend_params, open_backend
from .opensearch_wire_stores import WIRED
from .test_store_conformance import rec

STORES = {**BACKENDS, **WIRED}


@pytest.fixture(params=backend_params(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from open_backend(STORES, request, tmp_path)


def _flags(facts: Candidates) -> dict[str, tuple[bool, bool, bool]]:
    """Per id: (a raw turn, a rollup, a profile)."""
    columns = zip(facts.stm.tolist(), facts.rollup.tolist(), facts.profile.tolist(), strict=True)
    return dict(zip(facts.ids, columns, strict=True))


def test_candidates_say_which_records_are_rollups_and_which_are_profiles(store: Any) -> None:
    turn = rec("I took up pottery on Saturdays", tier=Tier.STM, source_ids=["m1"])
    memory = rec("Mel does pottery", minutes=1, source_ids=["m1"])
    summary = rec("Mel's weekends", minutes=2, source_ids=["m1", "m2"], metadata={"consolidation": SUMMARY})
    synthesis = rec("Mel is creative", minutes=3, source_ids=["m1"], metadata={"consolidation": SYNTHESIS})
    profile = rec(
        "Mel hobbies: pottery, running",
        minutes=4,
        source_ids=["m1", "m2"],
        metadata={"consolidation": PROFILE, "profile_key": "mel/hobbies"},
    )
    later = rec("Mel's interests", minutes=5, source_ids=["m2"])  # becomes a profile by ``mark``
    others = rec("Mel hobbies", user="u2", metadata={"consolidation": PROFILE})
    store.put([turn, memory, summary, synthesis, profile, later, others])
    ids = [profile.id, turn.id, "missing", summary.id, later.id, memory.id, others.id, synthesis.id]
    expected = {
        profile.id: (False, False, True),
        turn.id: (True, False, False),
        summary.id: (False, True, False),
        later.id: (False, False, False),
        memory.id: (False, False, False),
        synthesis.id: (False, True, False),
    }
    assert _flags(read_candidates(store, "t1", "u1", ids, {})[0]) == expected

    # A record's metadata changed after the store's first read (the embedded index's rows change).
    assert store.mark("t1", "u1", [later.id], consolidation=PROFILE) == 1
    expected[later.id] = (False, False, True)
    for reader in (store, pinned(store, "t1", "u1")):  # the store and the view a search reads through
        facts, _ = read_candidates(reader, "t1", "u1", ids, {})
        assert facts.ids == [i for i in ids if i in expected]  # the order asked, another user's left out
        assert _flags(facts) == expected
    records = store.get_many("t1", "u1", ids)
    assert _flags(Candidates.from_records(ids, records, {})) == expected
