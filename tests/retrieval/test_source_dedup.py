"""Stage 6 by provenance: a raw turn and the memory made from it are one result, not two."""

from __future__ import annotations

import numpy as np
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.pool import Pool
from memstack.domain.retrieval.stages.dedup import merge_turns_into_memories
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import Tier
from memstack.ports.store import Candidates
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


def test_a_turn_is_merged_into_the_memory_made_from_it(service: MemoryService) -> None:
    turn = record(service, "Sam: I am allergic to peanuts and shellfish", "m1", tier=Tier.STM)
    memory = record(service, "Sam is allergic to peanuts", "m1")
    other = record(service, "Sam: peanuts are in the satay sauce I made", "m2", tier=Tier.STM)
    put(service, turn, memory, other)
    result = service.search(
        SearchRequest(
            tenant=T, user_id=U, query="peanuts shellfish allergy", reference_time=REF, explain=True
        )
    )
    ids = [h.record.id for h in result.hits]
    assert turn.id not in ids  # the turn is represented by the memory...
    assert ids[0] == memory.id  # ...which takes the turn's better place
    assert other.id in ids  # a turn no memory came from stays
    assert "turns merged" in result.stage_status["dedup"]


def test_merging_by_source_can_be_switched_off(service: MemoryService) -> None:
    turn = record(service, "Sam: I am allergic to peanuts and shellfish", "m1", tier=Tier.STM)
    memory = record(service, "Sam is allergic to peanuts", "m1")
    put(service, turn, memory)
    keep_both = Retriever(service.store, service.embedder, RetrievalConfig(dedup_by_source=False))
    result = keep_both.search(SearchRequest(tenant=T, user_id=U, query="peanuts allergy", reference_time=REF))
    assert {turn.id, memory.id} <= {h.record.id for h in result.hits}


def test_a_superseded_memory_does_not_hide_its_turn(service: MemoryService) -> None:
    turn = record(service, "Sam: I live in Tokyo", "m1", tier=Tier.STM)
    old = record(service, "Sam lives in Tokyo", "m1", is_current=False)
    put(service, turn, old)
    result = service.search(
        SearchRequest(tenant=T, user_id=U, query="where does Sam live Tokyo", reference_time=REF)
    )
    assert turn.id in [h.record.id for h in result.hits]


def test_an_updated_memory_merges_only_its_newest_turn(service: MemoryService) -> None:
    tokyo = record(service, "Sam: I live in Tokyo", "m1", tier=Tier.STM)
    osaka_turn = record(service, "Sam: I moved to Osaka", "m2", tier=Tier.STM)
    memory = record(service, "Sam lives in Osaka", "m1", source_ids=["m1", "m2"], version=2)
    put(service, tokyo, osaka_turn, memory)
    merge_any = Retriever(service.store, service.embedder, RetrievalConfig(dedup_merge_into="newest"))
    result = merge_any.search(
        SearchRequest(tenant=T, user_id=U, query="where does Sam live", reference_time=REF)
    )
    ids = [h.record.id for h in result.hits]
    assert osaka_turn.id not in ids and memory.id in ids
    assert tokyo.id in ids  # what was said before stays findable


def test_a_turn_is_not_merged_into_a_memory_that_cites_older_turns_too(service: MemoryService) -> None:
    # Merged, the memory would take the Osaka turn's place and cite the Tokyo turn first, ahead of
    # the turn that earned the place.
    tokyo = record(service, "Sam: I live in Tokyo", "m1", tier=Tier.STM)
    osaka_turn = record(service, "Sam: I moved to Osaka", "m2", tier=Tier.STM)
    memory = record(service, "Sam lives in Osaka", "m1", source_ids=["m1", "m2"], version=2)
    put(service, tokyo, osaka_turn, memory)
    result = service.search(
        SearchRequest(tenant=T, user_id=U, query="where did Sam move", reference_time=REF, explain=True)
    )
    ids = [h.record.id for h in result.hits]
    assert osaka_turn.id in ids and memory.id in ids  # both kept: the turn is not merged
    assert "0 turns merged" in result.stage_status["dedup"]


def test_a_turn_still_merges_into_its_own_memory_beside_an_update(service: MemoryService) -> None:
    tokyo = record(service, "Sam: I live in Tokyo", "m1", tier=Tier.STM)
    osaka_turn = record(service, "Sam: I moved to Osaka and started at a bakery", "m2", tier=Tier.STM)
    update = record(service, "Sam lives in Osaka", "m1", source_ids=["m1", "m2"], version=2)
    job = record(service, "Sam started working at a bakery in Osaka", "m2")
    put(service, tokyo, osaka_turn, update, job)
    result = service.search(
        SearchRequest(tenant=T, user_id=U, query="Sam moved to Osaka bakery", reference_time=REF)
    )
    ids = [h.record.id for h in result.hits]
    assert osaka_turn.id not in ids  # represented by the memory that cites it alone...
    assert job.id in ids and update.id in ids  # ...and the update keeps its own place


def test_a_turn_is_not_merged_into_a_lesser_memory_when_an_update_matches_better(
    service: MemoryService,
) -> None:
    # The update answers; the fragment from the same turn does not. The fragment must not take
    # the turn's place just because it cites the turn alone: the turn keeps it.
    tokyo = record(service, "Sam: I live in Tokyo with my partner Kenji", "m1", tier=Tier.STM)
    osaka_turn = record(
        service,
        "Sam: We moved to Osaka last week. The apartment is near Nakanoshima park.",
        "m2",
        tier=Tier.STM,
    )
    update = record(service, "Sam lives in Osaka with Kenji", "m1", source_ids=["m1", "m2"], version=2)
    fragment = record(service, "Sam's apartment is near Nakanoshima park", "m2")
    put(service, tokyo, osaka_turn, update, fragment)
    result = service.search(
        SearchRequest(tenant=T, user_id=U, query="where does Sam live with Kenji now", reference_time=REF)
    )
    ids = [h.record.id for h in result.hits]
    assert ids[0] == osaka_turn.id
    assert ids.index(update.id) < ids.index(fragment.id)


def test_a_memory_citing_older_turns_too_ranks_a_few_places_below_its_newest_turn(
    service: MemoryService,
) -> None:
    tokyo = record(service, "Sam: I live in Tokyo", "m1", tier=Tier.STM)
    osaka_turn = record(service, "Sam: we moved to Osaka last week", "m2", tier=Tier.STM)
    memory = record(service, "Sam lives in Osaka with Kenji", "m1", source_ids=["m1", "m2"], version=2)
    others = [
        record(service, f"Sam: we moved the {thing} last week", f"o{n}", tier=Tier.STM)
        for n, thing in enumerate(["sofa", "piano", "meeting", "desk", "boxes"])
    ]
    put(service, tokyo, osaka_turn, memory, *others)
    req = SearchRequest(
        tenant=T, user_id=U, query="where did Sam move last week", reference_time=REF, explain=True
    )

    def ranked(places: int) -> list[str]:
        config = RetrievalConfig(dedup_multi_turn_places=places)
        return [h.record.id for h in Retriever(service.store, service.embedder, config).search(req).hits]

    own, near = ranked(0), ranked(1)
    assert own.index(memory.id) > own.index(osaka_turn.id) + 1  # by its own evidence: further down
    assert near.index(memory.id) == near.index(osaka_turn.id) + 1  # right below the turn that earned it
    assert near.index(osaka_turn.id) == own.index(osaka_turn.id)  # which keeps its place


def test_a_turn_merges_into_its_own_memory_not_a_profile_listing_it() -> None:
    # Rows: 0 and 2 raw turns; 1 a profile whose newest item came from turn 0 (it scores best),
    # 3 the memory made from turn 0 alone; nothing but a profile was made from turn 2.
    n = 4
    stm = np.array([True, False, True, False])
    facts = Candidates(
        ids=["turn-a", "profile", "turn-b", "memory-a"],
        stm=stm,
        current=np.ones(n, dtype=bool),
        deleted=np.zeros(n, dtype=bool),
        when=np.zeros(n),
        consolidated=np.zeros(n, dtype=bool),
        rollup=np.zeros(n, dtype=bool),
        profile=np.array([False, True, False, False]),
        n_sources=np.array([1, 3, 1, 1], dtype=np.int32),
        last_source=["m1", "m1", "m2", "m1"],
        vectors=np.zeros((n, 2), dtype=np.float32),
        has_vector=np.zeros(n, dtype=bool),
    )
    pool = Pool(facts, {})  # no records and no store: the columns alone decide
    pool.score = [0.9, 0.95, 0.8, 0.1]

    merged, apart = merge_turns_into_memories(pool)
    assert merged == {0} and apart == []  # turn-b keeps its place: a profile is not its memory
    assert pool.score[3] == 0.9 and pool.score[1] == 0.95  # memory-a took its turn's place
