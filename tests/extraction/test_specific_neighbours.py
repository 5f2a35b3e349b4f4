"""Extraction reads a consolidated user's memories as if consolidation wrote nothing (issue 21 item 8)."""

from __future__ import annotations

from memstack.models import MemoryFilters, Message, Tier
from memstack.service import MemoryService

from tests.retrieval.helpers import put, record

T, U = "t1", "u1"


def say(mid: str, content: str, when: str) -> Message:
    return Message(id=mid, content=content, timestamp=when)  # type: ignore[arg-type]


def rollup(service: MemoryService, content: str, kind: str) -> None:
    rec = record(service, content, "m0", source_ids=["m0"])
    rec.metadata.update(consolidation=kind)
    put(service, rec)


def current(service: MemoryService) -> list[str]:
    records, _ = service.list(T, U, MemoryFilters(tier=Tier.LTM), 200)
    return sorted(r.content for r in records if not r.metadata.get("consolidation"))


def test_a_turn_updates_its_memory_behind_more_syntheses_than_neighbours(service: MemoryService) -> None:
    service.add(T, U, [say("m1", "I live in Tokyo.", "2026-03-02T09:00:00Z")], sync=True)
    # More syntheses than the extractor is shown neighbours (10), each nearer the next turn, in
    # words and vector, than the memory it updates.
    for i in range(12):
        rollup(service, f"The user moved to Osaka last week, synthesis {i}.", "synthesis")
    service.add(T, U, [say("m2", "I moved to Osaka last week.", "2026-05-18T10:00:00Z")], sync=True)
    # Updated, not added beside it: Tokyo is no longer current.
    assert current(service) == ["The user lives in Osaka."]


def test_a_summary_saying_the_same_does_not_swallow_the_memory(service: MemoryService) -> None:
    rollup(service, "The user lives in Osaka.", "summary")
    service.add(T, U, [say("m1", "I live in Osaka.", "2026-03-02T09:00:00Z")], sync=True)
    assert current(service) == ["The user lives in Osaka."]
