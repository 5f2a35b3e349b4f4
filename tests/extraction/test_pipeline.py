"""Extraction end to end through the service: ingest -> queue -> extract -> versioned LTM -> search."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memstack.cli.ingest import read_messages
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import Kind, MemoryFilters, Message, Scope, Tier
from memstack.ports.queue import Job
from memstack.service import MemoryService

T, U = "acme", "u1"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "conversation.jsonl"


def say(mid: str, content: str, when: str) -> Message:
    return Message(id=mid, content=content, timestamp=when)  # type: ignore[arg-type]


def ltm(service: MemoryService, user: str = U, **filters: object):
    records, _ = service.list(T, user, MemoryFilters(tier=Tier.LTM, **filters), 200)  # type: ignore[arg-type]
    return records


def search(service: MemoryService, query: str, session: str | None = None, top_k: int = 5):
    req = SearchRequest(
        tenant=T, user_id=U, query=query, top_k=top_k, filters=MemoryFilters(session_id=session)
    )
    return service.search(req).hits


def test_tokyo_to_osaka_updates_and_search_ranks_osaka_first(service: MemoryService) -> None:
    service.add(T, U, [say("m1", "I live in Tokyo.", "2026-03-02T09:00:00Z")], sync=True)
    service.add(T, U, [say("m2", "I moved to Osaka last week.", "2026-05-18T10:00:00Z")], sync=True)

    current = [r.content for r in ltm(service)]
    assert "The user lives in Osaka." in current
    assert not any("Tokyo" in c for c in current)

    hits = search(service, "where does the user live")
    assert "Osaka" in hits[0].record.content
    assert hits[0].record.tier == Tier.LTM
    # The raw turn stays searchable as history, below the current memory.
    tokyo_turn = [i for i, h in enumerate(hits) if h.record.tier == Tier.STM and "Tokyo" in h.record.content]
    assert tokyo_turn and tokyo_turn[0] > 0

    osaka = next(r for r in ltm(service) if r.content == "The user lives in Osaka.")
    chain = service.history(T, U, osaka.id)
    assert [(r.version, r.content, r.is_current) for r in chain] == [
        (1, "The user lives in Tokyo.", False),
        (2, "The user lives in Osaka.", True),
    ]
    assert chain[1].replaces_id == chain[0].id
    assert chain[1].source_ids == ["m1", "m2"]
    # The new version carries when the move happened, resolved against the message time; no
    # separate "moved to Osaka" memory stays current to contradict a later move.
    assert chain[1].event_time == datetime(2026, 5, 11, tzinfo=UTC)
    assert len(current) == 1


def test_retraction_hides_the_memory_from_search(service: MemoryService) -> None:
    service.add(T, U, [say("m1", "I have a dog named Rex.", "2026-01-01T10:00:00Z")], sync=True)
    assert any("dog" in h.record.content and h.record.tier == Tier.LTM for h in search(service, "dog Rex"))
    service.add(T, U, [say("m2", "I don't have a dog anymore.", "2026-02-01T10:00:00Z")], sync=True)
    assert ltm(service) == []
    assert not any(h.record.tier == Tier.LTM for h in search(service, "dog Rex"))
    # History keeps what was known: the tombstone replaces the fact.
    [first] = [r for r in service.store.find_by_source(T, U, "m1") if r.tier == Tier.LTM and r.version == 1]
    chain = service.history(T, U, first.id)
    assert [r.deleted for r in chain] == [False, True]


def test_the_same_message_twice_creates_nothing_new(service: MemoryService) -> None:
    message = say("m1", "I love spicy food. I work as a nurse in Leeds.", "2026-01-01T10:00:00Z")
    service.add(T, U, [message], sync=True)
    before = ltm(service, include_superseded=True)
    assert len(before) == 2
    service.add(T, U, [message], sync=True)  # a client retry: stored once, not queued again
    # A redelivered job (queue retry): extraction runs again and changes nothing.
    service.process_job(
        Job(type="extract", tenant=T, user_id=U, payload={"message_id": "m1", "scope": "USER"})
    )
    assert ltm(service, include_superseded=True) == before


def test_relative_dates_use_the_message_time_not_the_wall_clock(service: MemoryService) -> None:
    service.add(
        T, U, [say("m1", "I went to the support group yesterday.", "1:56 pm on 8 May, 2023")], sync=True
    )
    [rec] = ltm(service)
    assert rec.content == "The user went to the support group on 7 May 2023."
    assert rec.kind == Kind.EVENT
    assert rec.event_time == datetime(2023, 5, 7, tzinfo=UTC)
    assert rec.source_ids == ["m1"]


def test_context_memories_are_invisible_from_another_session(service: MemoryService) -> None:
    service.add(
        T,
        U,
        [say("m1", "I'm drafting the quarterly budget report.", "2026-01-01T10:00:00Z")],
        session_id="work",
        scope=Scope.CONTEXT,
        sync=True,
    )
    service.add(
        T, U, [say("m2", "I'm allergic to peanuts.", "2026-01-01T10:05:00Z")], session_id="work", sync=True
    )
    [budget] = [r for r in ltm(service) if "budget" in r.content]
    assert (budget.scope, budget.session_id) == (Scope.CONTEXT, "work")

    def ltm_hits(session: str | None) -> list[str]:
        return [
            h.record.content
            for h in search(service, "budget report peanuts", session, 10)
            if h.record.tier == Tier.LTM
        ]

    assert any("budget" in c for c in ltm_hits("work"))
    assert not any("budget" in c for c in ltm_hits("home"))
    assert any("peanuts" in c for c in ltm_hits("home"))  # USER scope: every session


def test_context_neighbours_come_only_from_the_session(service: MemoryService) -> None:
    service.add(
        T,
        U,
        [say("m1", "I live in Berlin.", "2026-01-01T10:00:00Z")],
        session_id="a",
        scope=Scope.CONTEXT,
        sync=True,
    )
    service.add(
        T,
        U,
        [say("m2", "I live in Paris.", "2026-01-02T10:00:00Z")],
        session_id="b",
        scope=Scope.CONTEXT,
        sync=True,
    )
    # Session b never saw Berlin, so Paris is a new memory there, not an update of session a's.
    assert sorted(r.content for r in ltm(service)) == [
        "The user lives in Berlin.",
        "The user lives in Paris.",
    ]


def test_infer_false_stores_only_the_raw_turn(service: MemoryService) -> None:
    result = service.add(
        T, U, [say("m1", "I live in Tokyo.", "2026-01-01T10:00:00Z")], infer=False, sync=True
    )
    assert result.queued == 0
    assert ltm(service) == []


def test_sample_conversation_becomes_categorised_memories_with_provenance(service: MemoryService) -> None:
    with EXAMPLE.open(encoding="utf-8") as fh:
        messages = read_messages(fh, str(EXAMPLE))
    service.add(T, "maya", messages, session_id="demo", sync=True)
    records = ltm(service, user="maya")
    by_text = {r.content: r for r in records}
    assert len(records) >= 20
    assert all(r.category is not None and r.source_ids for r in records)
    home = by_text["Maya lives in Osaka with Maya's partner Kenji and Maya's dog Mochi, a shiba inu."]
    assert (home.version, home.source_ids) == (2, ["m004", "m020"])
    assert by_text["Maya prefers short bullet-point answers, by the way, not long essays."].category == (
        "communication_style"
    )
    promoted = by_text["Maya got promoted to senior data engineer on 19 March 2026!"]
    assert promoted.kind == Kind.EVENT and promoted.event_time == datetime(2026, 3, 19, tzinfo=UTC)
    assert not any(r.content.startswith(("Welcome", "Ouch", "Congratulations")) for r in records)
    assert len({r.category for r in records}) >= 8


def test_a_job_for_a_message_no_longer_stored_does_nothing(service: MemoryService) -> None:
    service.process_job(Job(type="extract", tenant=T, user_id=U, payload={"message_id": "gone"}))
    assert ltm(service) == []


def test_replaced_memories_turns_are_marked_and_context_names_the_listener(service: MemoryService) -> None:
    from memstack.domain.ingest import stm_memory_id

    turns = [
        Message(
            id="c1",
            speaker="Caroline",
            content="I went to an LGBTQ support group.",
            timestamp="2023-05-08T13:00:00Z",
        ),  # type: ignore[arg-type]
        Message(
            id="c2",
            speaker="Melanie",
            content="I'm so proud of you for going.",
            timestamp="2023-05-08T13:01:00Z",
        ),  # type: ignore[arg-type]
    ]
    service.add(T, U, turns, session_id="s1", sync=True)
    assert "Melanie is so proud of Caroline for going." in [r.content for r in ltm(service)]

    service.add(T, U, [say("m1", "I live in Tokyo.", "2026-03-02T09:00:00Z")], sync=True)
    service.add(T, U, [say("m2", "I live in Kyoto now.", "2026-04-02T09:00:00Z")], sync=True)
    old_turn = service.store.get(T, U, stm_memory_id(T, U, "m1"))
    new_turn = service.store.get(T, U, stm_memory_id(T, U, "m2"))
    assert old_turn is not None and old_turn.metadata.get("consolidated") is True
    assert new_turn is not None and not new_turn.metadata.get("consolidated")


def test_a_contradiction_is_kept_beside_what_it_contradicts_and_searched_as_a_pair(
    service: MemoryService,
) -> None:
    service.add(T, U, [say("m1", "I have never written a Flask route.", "2026-03-02T09:00:00Z")], sync=True)
    said = "I implemented the login route in Flask for the admin panel."
    service.add(T, U, [say("m2", said, "2026-05-18T10:00:00Z")], sync=True)

    current = {r.content: r for r in ltm(service)}
    never = current["The user has never written a Flask route."]
    did = current["The user implemented the login route in Flask for the admin panel."]
    assert (never.conflicts_with, did.conflicts_with) == ([did.id], [never.id])
    memories = [
        h for h in search(service, "has the user written a Flask route", top_k=3) if h.record.tier == Tier.LTM
    ]
    assert {h.record.id for h in memories} == {never.id, did.id}
    first = next(i for i, h in enumerate(memories) if h.record.conflicts_with)
    assert memories[first + 1].record.id in memories[first].record.conflicts_with  # right after it
