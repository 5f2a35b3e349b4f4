"""Two connections superseding the same version at the same moment: exactly one wins."""

from __future__ import annotations

import threading
from typing import Any

from memstack.domain import versions
from memstack.errors import Conflict
from memstack.models import MemoryFilters

from tests.waiting import wait_until

from .conftest import COARSE_DIM, EMB, backends_waiting_on_lock, record


def test_concurrent_supersedes_of_one_version_from_two_connections(make_store: Any, admin: Any) -> None:
    first, second = make_store(), make_store(migrate_on_start=False)
    old = record("I live in Berlin")
    first.put([old])
    schema = first.schema
    candidates = {
        "lisbon": versions.new_version(old, content="I live in Lisbon", embedder=EMB, coarse_dim=COARSE_DIM),
        "osaka": versions.new_version(old, content="I live in Osaka", embedder=EMB, coarse_dim=COARSE_DIM),
    }
    outcome: dict[str, str] = {}

    def supersede(store: Any, name: str) -> None:
        try:
            store.supersede("t1", "u1", old.id, candidates[name])
            outcome[name] = "won"
        except Conflict:
            outcome[name] = "conflict"

    # Hold the old row's lock so both updates are in flight at once, then let go.
    admin.execute("BEGIN")
    admin.execute(f"SELECT 1 FROM {schema}.memories WHERE id = %s FOR UPDATE", (old.id,))
    threads = [
        threading.Thread(target=supersede, args=(first, "lisbon")),
        threading.Thread(target=supersede, args=(second, "osaka")),
    ]
    for t in threads:
        t.start()
    wait_until(
        lambda: len(backends_waiting_on_lock(admin)) == 2,
        what="both supersedes to wait on the row lock",
    )
    admin.execute("COMMIT")
    for t in threads:
        t.join(timeout=60)

    assert sorted(outcome.values()) == ["conflict", "won"]
    winner = next(name for name, result in outcome.items() if result == "won")
    loser = next(name for name in candidates if name != winner)
    assert first.get("t1", "u1", candidates[loser].id) is None
    successor = second.successor("t1", "u1", old.id)
    assert successor is not None and successor.id == candidates[winner].id
    current = first.list("t1", "u1", MemoryFilters(), 10)[0]
    assert [r.id for r in current] == [candidates[winner].id]
    # Only the winner's text is searchable as current.
    hits = first.bm25_search("t1", "u1", "live", 10, MemoryFilters())
    assert [h.id for h in hits] == [candidates[winner].id]
