"""Stage 4 over evidence units: a turn and the memories extracted from it are fused as one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from memstack.domain.ingest import is_turn_id, stm_memory_id
from memstack.domain.retrieval import units
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import MemoryRecord, ScoredId, Tier
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record

WEIGHTS = units.FieldWeights(turns={"vector": 0.3, "bm25": 0.7}, memories={"vector": 0.3, "bm25": 0.1})
TURN_A, TURN_B = stm_memory_id(T, U, "a"), stm_memory_id(T, U, "b")
MEMORY_A = "0" * 32  # an LTM id (uuid4 hex)


def ranking(*ids: str) -> list[ScoredId]:
    return [ScoredId(id=i, score=1.0 / n) for n, i in enumerate(ids, start=1)]


def test_turn_ids_are_told_from_memory_ids() -> None:
    assert is_turn_id(TURN_A) and not is_turn_id(MEMORY_A)
    assert units.field_of(TURN_A) == units.TURNS and units.field_of(MEMORY_A) == units.MEMORIES


def test_ranks_are_counted_within_each_field() -> None:
    ranks = units.field_ranks({"bm25": ranking(MEMORY_A, TURN_B, TURN_A)})
    assert ranks[("bm25", units.MEMORIES)] == {MEMORY_A: 1}
    assert ranks[("bm25", units.TURNS)] == {TURN_B: 1, TURN_A: 2}  # the memory above takes no turn's place


def test_a_unit_adds_its_turns_and_its_memorys_evidence() -> None:
    # Turn B is first in BM25; turn A second, but A's memory is first in the vector ranking.
    ranks = units.field_ranks({"bm25": ranking(TURN_B, TURN_A), "vector": ranking(MEMORY_A, TURN_B)})
    fused = units.unit_rrf({TURN_A: [MEMORY_A], TURN_B: [TURN_B]}, {TURN_A, TURN_B}, ranks, WEIGHTS, k=5)
    assert fused[TURN_B] == pytest.approx(0.7 / 6 + 0.3 / 6)
    # A: its turn's BM25 rank (2) with the turn weight, its memory's vector rank (1) with the memory weight
    assert fused[TURN_A] == pytest.approx(0.7 / 7 + 0.3 / 6)
    # The turn's own vector rank, had it one, would count only if better than its memory's.
    alone, met = units.record_rrf(ranks, WEIGHTS, k=5)
    assert alone[ranks.row[TURN_A]] == pytest.approx(0.7 / 7)
    # met column by column: BM25's turns, then the vector ranking's memory
    assert [ranks.ids[r] for r in met] == [TURN_B, TURN_A, MEMORY_A]


def test_a_memory_without_its_turn_among_the_candidates_counts_as_a_turn() -> None:
    ranks = units.field_ranks({"bm25": ranking(MEMORY_A)})
    second_view = units.unit_rrf({TURN_A: [MEMORY_A]}, {TURN_A}, ranks, WEIGHTS, k=5)
    alone = units.unit_rrf({TURN_A: [MEMORY_A]}, set(), ranks, WEIGHTS, k=5)
    assert second_view[TURN_A] == pytest.approx(0.1 / 6)
    assert alone[TURN_A] == pytest.approx(0.7 / 6)  # expired turn, or a memory written directly


def test_a_memory_belongs_to_its_newest_source_turn() -> None:
    memory = MemoryRecord(tenant=T, user_id=U, content="lives in Osaka", source_ids=["a", "b"])
    written = MemoryRecord(tenant=T, user_id=U, content="likes tea")
    turn = MemoryRecord(id=TURN_A, tenant=T, user_id=U, content="hi", tier=Tier.STM, source_ids=["a"])
    assert units.unit_key(T, U, memory) == TURN_B
    assert units.unit_key(T, U, written) == written.id
    assert units.unit_key(T, U, turn) == TURN_A


def test_a_weak_turn_rises_with_its_memory(service: MemoryService) -> None:
    """The turn says it in other words; the memory made from it says it plainly."""
    turn = record(service, "Sam: finally got the keys, the flat by the river is ours", "a", tier=Tier.STM)
    memory = record(service, "Sam bought a flat by the river", "a")
    noise = [
        record(service, f"Sam: the river walk was lovely on day {n}", f"n{n}", tier=Tier.STM)
        for n in range(6)
    ]
    put(service, turn, memory, *noise)
    result = service.search(
        SearchRequest(tenant=T, user_id=U, query="did Sam buy a flat", reference_time=REF, explain=True)
    )
    top = result.hits[0]
    assert top.record.id == memory.id  # the unit is shown as its memory (the turn is merged into it)
    assert turn.id not in [h.record.id for h in result.hits]
    assert top.stages["unit_rrf"] > top.stages["record_rrf"]  # the turn's evidence was added to the memory's
    # The turn carried the unit's value (the better own fusion); merged, the memory scores by it.
    assert top.stages.get("merged_turn_score", top.score) == top.score
    assert top.stages["rrf"] == top.stages["unit_rrf"]
    assert "units" in result.stage_status["fusion"]


def test_a_unit_earns_one_slot_its_other_members_fall_by_their_own_evidence(service: MemoryService) -> None:
    turn = record(service, "Sam: we adopted a dog and named her Pepper", "a", tier=Tier.STM)
    first = record(service, "Sam adopted a dog", "a")
    second = record(service, "Sam's dog is named Pepper", "a")
    other = record(service, "Sam: a neighbour's dog barked all night", "b", tier=Tier.STM)
    put(service, turn, first, second, other)
    result = service.search(
        SearchRequest(tenant=T, user_id=U, query="Sam dog Pepper adopted", reference_time=REF, explain=True)
    )
    mine = [h for h in result.hits if h.record.id in {first.id, second.id}]
    lead, rest = mine[0], mine[1]
    # The unit's value (with the turn's evidence) goes to one member; the other keeps its own.
    # (the turn carries it when its own fusion is the unit's best, and is merged into that memory)
    assert lead.stages["unit_size"] == 3.0 and rest.stages["unit_rrf"] == lead.stages["unit_rrf"]
    assert lead.stages["rrf"] == lead.stages["unit_rrf"]  # also when it took its merged turn's score
    assert rest.stages["rrf"] == rest.stages["record_rrf"] < rest.stages["unit_rrf"]
    assert "merged_turn_score" not in rest.stages
    assert rest.score < lead.score  # its own score, never the unit's


def test_only_a_units_best_member_keeps_the_units_value() -> None:
    second, third = "1" * 32, "2" * 32
    own = {TURN_A: 0.10, MEMORY_A: 0.05, second: 0.02, third: 0.02, TURN_B: 0.04}
    members = {TURN_A: [MEMORY_A, TURN_A, second, third], TURN_B: [TURN_B]}
    fused = {TURN_A: 0.20, TURN_B: 0.04}
    value = units.member_values(members, own, fused)
    assert value[TURN_A] == 0.20 and value[TURN_B] == 0.04
    assert value[MEMORY_A] == 0.05  # below turn B's unit: B's new evidence takes the next slot
    # Equal own evidence still gives two values: no two members of one unit share one.
    assert value[second] == 0.02 and 0.019 < value[third] < 0.02
    assert len({value[i] for i in members[TURN_A]}) == 4


def test_no_two_hits_of_one_unit_share_a_score(service: MemoryService) -> None:
    """Many memories of one long turn: each has its own score, and other turns get slots between them."""
    long_turn = record(
        service, "Sam: the garden has roses, tulips, a pear tree, a pond and a bench", "a", tier=Tier.STM
    )
    parts = [
        record(service, f"Sam's garden has {thing}", "a")
        for thing in ("roses", "tulips", "a pear tree", "a pond", "a bench")
    ]
    others = [
        record(service, f"Sam: my garden club meets on day {n}", f"g{n}", tier=Tier.STM) for n in range(4)
    ]
    put(service, long_turn, *parts, *others)
    hits = service.search(
        SearchRequest(tenant=T, user_id=U, query="what is in Sam's garden", reference_time=REF, top_k=10)
    ).hits
    ids = {p.id for p in parts}
    scores = [h.score for h in hits if h.record.id in ids]
    assert len(scores) == len(set(scores)) == len(parts)
    for before, after in itertools.pairwise(hits):
        same_turn = before.record.source_ids[-1:] == after.record.source_ids[-1:]
        assert not (same_turn and before.score == after.score)


def test_memory_weights_of_zero_leave_turns_only(service: MemoryService) -> None:
    turn = record(service, "Sam: the flat by the river is ours", "a", tier=Tier.STM)
    memory = record(service, "Sam bought a flat", "a")
    put(service, turn, memory)
    config = RetrievalConfig(weight_vector_memory=0.0, weight_bm25_memory=0.0)
    assert config.field_weights.memories == {
        "vector": 0.0,
        "bm25": 0.0,
        "bm25_prf": 0.0,
        "vector_prf": 0.0,
        "neighbours": 0.0,  # a memory is never a neighbour turn
    }
    ranks = units.field_ranks({"bm25": ranking(MEMORY_A, TURN_A)})
    fused = units.unit_rrf({TURN_A: [MEMORY_A, TURN_A]}, {TURN_A}, ranks, config.field_weights, k=5)
    assert fused[TURN_A] == pytest.approx(0.7 / 6)


def test_a_units_best_rank_counts_once_per_field() -> None:
    # Two memories of one turn, first and second in the vector ranking: the unit takes first place once.
    other = "1" * 32
    ranks = units.field_ranks({"vector": ranking(MEMORY_A, other)})
    fused = units.unit_rrf({TURN_A: [MEMORY_A, other]}, {TURN_A}, ranks, WEIGHTS, k=5)
    assert fused[TURN_A] == pytest.approx(0.3 / 6)


def test_a_unit_outranks_a_turn_that_beats_each_of_its_records(service: MemoryService) -> None:
    """Fused record by record, the echo of the question wins; fused by unit, the answer does."""
    turn = record(service, "Sam: finally got the keys, the flat by the river is ours", "a", tier=Tier.STM)
    memory = record(service, "Sam bought a flat by the river", "a")
    echo = record(service, "Jo: did Sam buy a flat? I keep wondering about Sam", "b", tier=Tier.STM)
    put(service, turn, memory, echo)
    req = SearchRequest(tenant=T, user_id=U, query="did Sam buy a flat", reference_time=REF, explain=True)
    # Stage 6 off, so the turn stays visible. Each record alone, the echo leads:
    # what makes this test mean something.
    config = service.retriever.config.model_copy(update={"dedup_by_source": False})
    alone = {
        h.record.id: h.stages for h in Retriever(service.store, service.embedder, config).search(req).hits
    }
    assert alone[echo.id]["record_rrf"] > max(alone[turn.id]["record_rrf"], alone[memory.id]["record_rrf"])
    assert alone[memory.id]["unit_rrf"] == alone[turn.id]["unit_rrf"] > alone[echo.id]["rrf"]
    # one of the unit's two records carries its value, the other only its own
    assert sorted([alone[memory.id]["rrf"], alone[turn.id]["rrf"]])[1] == alone[turn.id]["unit_rrf"]
    hits = service.search(req).hits
    assert [h.record.id for h in hits[:2]] == [memory.id, echo.id]  # the turn is merged into its memory


def test_a_memory_counts_its_words_fully_only_when_its_turn_is_not_there(service: MemoryService) -> None:
    """Beside its turn a memory is a second view (memory weights); alone, all the evidence (turn weights)."""
    query = "did Sam buy a flat"
    for user, with_turn in (("u1", True), ("u2", False)):
        records = [
            record(service, "Sam bought a flat", "a", user_id=user),
            record(
                service,
                "Jo: did Sam buy a flat? I keep wondering",
                "b",
                tier=Tier.STM,
                user_id=user,
                id=stm_memory_id(T, user, "b"),
            ),
        ]
        if with_turn:  # the turn says it in words the query does not use
            records.append(record(service, "Me: long day, the paperwork is done at last", "a", tier=Tier.STM))
        put(service, *records)
    rrf = {}
    for user in ("u1", "u2"):
        req = SearchRequest(tenant=T, user_id=user, query=query, reference_time=REF, explain=True)
        rrf[user] = next(h.stages["rrf"] for h in service.search(req).hits if h.record.tier == Tier.LTM)
    assert rrf["u2"] > rrf["u1"]  # in u1 its BM25 rank weighs 0.1, in u2 0.7


def test_an_updated_memory_keeps_the_words_of_its_older_source_turn() -> None:
    # "lives in Osaka with Kenji" from turn A ("I live in Tokyo with Kenji") and turn B ("we moved to
    # Osaka"): its unit is B's, and A's first place in BM25 counts for it too.
    ranks = units.field_ranks({"bm25": ranking(TURN_A), "vector": ranking(TURN_B)})
    alone = units.unit_rrf({TURN_B: [MEMORY_A]}, {TURN_A, TURN_B}, ranks, WEIGHTS, k=5)
    with_sources = units.unit_rrf(
        {TURN_B: [MEMORY_A]}, {TURN_A, TURN_B}, ranks, WEIGHTS, 5, {TURN_B: {TURN_A}}
    )
    assert alone[TURN_B] == pytest.approx(0.3 / 6)
    assert with_sources[TURN_B] == pytest.approx(0.3 / 6 + 0.7 / 6)
    memory = MemoryRecord(tenant=T, user_id=U, content="lives in Osaka", source_ids=["a", "b"])
    assert units.source_turns(T, U, [memory]) == {TURN_A, TURN_B}


def test_an_updated_memory_answers_before_a_neighbour_of_its_old_turn(service: MemoryService) -> None:
    """The old turn's words also sit in the next turn's BM25 text (its context); the update must win."""
    old = record(service, "Sam: I live in Tokyo with my partner Kenji", "a", tier=Tier.STM)
    neighbour = record(
        service,
        "Sam: we are hiking on Saturday",
        "b",
        tier=Tier.STM,
        search_text="Sam: I live in Tokyo with my partner Kenji\nSam: we are hiking on Saturday",
    )
    hike = record(service, "Sam is hiking on Saturday", "b")
    moved = record(service, "Sam: we moved to Osaka last week", "c", tier=Tier.STM)
    current = record(service, "Sam lives in Osaka with partner Kenji", "a", source_ids=["a", "c"])
    put(service, old, neighbour, hike, moved, current)
    hits = service.search(
        SearchRequest(tenant=T, user_id=U, query="where does Sam live with Kenji", reference_time=REF)
    ).hits
    # The update's turn, or its memory when stage 6 merges the turn into it (dedup_merge_into "newest").
    assert hits[0].record.id in (moved.id, current.id)


def test_a_lone_turns_unit_fusion_is_its_own_fusion_to_the_bit() -> None:
    # What stage 4 relies on when every candidate is a raw turn in a unit of its own: it takes the
    # turns' own fusion for their units' instead of fusing the units again.
    rng = np.random.default_rng(7)
    turns = [stm_memory_id(T, U, f"t{i}") for i in range(60)]
    memory_ids = [f"{i:032x}" for i in range(10)]
    weights = units.FieldWeights(
        turns={"vector": 0.37, "bm25": 0.61, "bm25_prf": 0.23}, memories={"vector": 0.3, "bm25": 0.1}
    )
    for _ in range(20):
        rankings = {
            name: ranking(*rng.permutation(turns + memory_ids)[: rng.integers(1, 70)].tolist())
            for name in ("vector", "bm25", "bm25_prf")
        }
        ranks = units.field_ranks(rankings)
        own, _ = units.record_rrf(ranks, weights, k=60)
        rows = np.flatnonzero(ranks.is_turn)
        fused = units.unit_rrf_of_rows(
            np.arange(len(rows)), rows, np.ones(len(rows), dtype=bool), ranks, weights, k=60
        )
        assert fused.tobytes() == own[rows].tobytes()
