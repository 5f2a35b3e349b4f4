"""Raw turns whose memories were all replaced say ``superseded`` and rank below current memories."""

from __future__ import annotations

from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.superseded import is_superseded_turn
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import MemoryRecord, Message, Tier
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, put, record

T, U = "acme", "kim"
#: the tenant and user of tests.retrieval.helpers' records
T2, U2 = "t1", "u1"


def rec(rid: str, sources: list[str], *, current: bool = True, replaces: str | None = None, **kw: object):
    return MemoryRecord(
        id=rid,
        tenant=T,
        user_id=U,
        content=rid,
        source_ids=sources,
        is_current=current,
        replaces_id=replaces,
        **kw,  # type: ignore[arg-type]
    )


def test_a_turn_whose_memory_was_updated_by_a_later_turn_is_superseded() -> None:
    tokyo = rec("v1", ["m1"], current=False)
    osaka = rec("v2", ["m1", "m2"], replaces="v1")
    assert is_superseded_turn([tokyo, osaka], "m1")
    # The Osaka turn made the current version: it is what is true now.
    assert not is_superseded_turn([osaka], "m2")


def test_the_retracting_turn_backs_its_tombstone_the_retracted_one_does_not() -> None:
    dog = rec("v1", ["m1"], current=False)
    gone = rec("v2", ["m1", "m2"], replaces="v1", deleted=True)
    assert is_superseded_turn([dog, gone], "m1")
    assert not is_superseded_turn([gone], "m2")


def test_a_turn_that_still_backs_one_current_memory_is_not_superseded() -> None:
    # "I live in Tokyo and work as a nurse": the move replaced one memory, the job stands.
    home = rec("home1", ["m1"], current=False)
    job = rec("job1", ["m1"])
    moved = rec("home2", ["m1", "m2"], replaces="home1")
    assert not is_superseded_turn([home, job, moved], "m1")


def test_turns_nothing_was_extracted_from_are_never_marked() -> None:
    turn = rec("stm1", ["m1"], tier=Tier.STM)
    assert not is_superseded_turn([turn], "m1")
    assert not is_superseded_turn([], "m1")


def _say(service: MemoryService, mid: str, text: str, when: str) -> None:
    service.add(T, U, [Message(id=mid, speaker="Kim", content=text, timestamp=when)], sync=True)  # type: ignore[arg-type]


def _search(service: MemoryService, query: str, history: bool = False):
    request = SearchRequest(tenant=T, user_id=U, query=query, top_k=10, include_history=history)
    return service.search(request).hits


def test_search_marks_the_old_turn_and_ranks_it_below_current_memories(service: MemoryService) -> None:
    _say(service, "m1", "I live in Tokyo.", "2026-03-02T09:00:00Z")
    _say(service, "m2", "I moved to Osaka last week.", "2026-05-18T10:00:00Z")
    hits = _search(service, "where does Kim live now Tokyo")
    tokyo = [i for i, h in enumerate(hits) if h.record.tier == Tier.STM and "Tokyo" in h.record.content]
    assert tokyo, [h.record.content for h in hits]
    stale = hits[tokyo[0]]
    assert stale.superseded and stale.stages["superseded_turn"] == 1.0
    assert all(not h.superseded for h in hits[: tokyo[0]])
    assert all(h.superseded for h in hits[tokyo[0] :])
    # Scores stay in rank order.
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # The Osaka turn made the current memory: never marked (it may be merged into that memory).
    assert not any(h.superseded for h in hits if "Osaka" in h.record.content)


def test_history_queries_mark_old_turns_but_keep_their_rank(service: MemoryService) -> None:
    _say(service, "m1", "I live in Tokyo.", "2026-03-02T09:00:00Z")
    _say(service, "m2", "I moved to Osaka last week.", "2026-05-18T10:00:00Z")
    plain = _search(service, "Tokyo")
    history = _search(service, "Tokyo", history=True)
    turn = next(h for h in history if h.record.tier == Tier.STM and "Tokyo" in h.record.content)
    assert turn.superseded
    assert "superseded_from" not in turn.stages
    assert any(h.superseded for h in plain)


def test_api_results_carry_the_flag(service: MemoryService, settings) -> None:
    from memstack.api.app import close_app

    from tests.api.conftest import build_api

    api = build_api(service, settings)
    try:
        for mid, text in (("m1", "I live in Tokyo."), ("m2", "I moved to Osaka last week.")):
            turn = {"id": mid, "role": "user", "speaker": "Kim", "content": text}
            body = {"user_id": U, "sync": True, "messages": [turn]}
            assert api("POST", "/v1/memories", body=body)[0] in (200, 202)
        status, body = api("POST", "/v1/memories/search", body={"user_id": U, "query": "Tokyo", "top_k": 10})
    finally:
        close_app(api.app)
    assert status == 200
    flags = {r["content"]: r["superseded"] for r in body["results"]}
    assert flags["I live in Tokyo."] is True
    assert flags["Kim lives in Osaka."] is False


#: a turn ("m1") whose only memory a later turn ("m2") replaced: the turn is superseded
SPEED = "I cut my solving time from 20 minutes to 12 minutes over two sessions"
PAST = "how many minutes did I cut my solving time by over two sessions?"
PRESENT = "what is my solving time now, in minutes over two sessions?"


def _speed_store(service: MemoryService, new_sources: list[str]) -> None:
    old = record(service, "Kim writes the sequence formula a_n = a_1 + (n-1)d", "m1", is_current=False)
    new = "Kim has never finished a sequence definition problem"
    put(
        service,
        record(service, SPEED, "m1", tier=Tier.STM),
        old,
        record(service, new, "m2", replaces_id=old.id, source_ids=new_sources),
        record(service, new, "m2", tier=Tier.STM),
        record(service, "Kim plays chess on Sundays", "m3", tier=Tier.STM),
    )


def _order(service: MemoryService, query: str, scope: str) -> list[str]:
    config = service.retriever.config.model_copy(update={"superseded_turns_scope": scope})
    request = SearchRequest(tenant=T2, user_id=U2, query=query, top_k=5, reference_time=REF)
    return [h.record.content for h in Retriever(service.store, service.embedder, config).search(request).hits]


def test_a_superseded_turn_keeps_its_place_for_a_question_about_the_past(service: MemoryService) -> None:
    _speed_store(service, ["m2"])
    assert _order(service, PAST, "current")[0] == SPEED
    assert _order(service, PAST, "all")[-1] == SPEED  # every superseded turn last: it loses the first place
    # A question about the present still ranks the old statement last.
    assert _order(service, PRESENT, "current")[-1] == SPEED


def test_a_superseded_turn_a_hit_above_already_cites_still_ranks_last(service: MemoryService) -> None:
    # The update names both turns, as extraction's UPDATE does, and ranks first: the old turn would
    # spend a slot on a turn the caller already has.
    _speed_store(service, ["m1", "m2"])
    order = _order(service, PAST, "current")
    assert order[0] != SPEED and order[-1] == SPEED
