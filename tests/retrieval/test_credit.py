"""The credit a rank earns in the fusion: near ties share it, thin or far matches earn less (``credit``)."""

from __future__ import annotations

import numpy as np
import pytest
from memstack.domain.ingest import stm_memory_id
from memstack.domain.retrieval import credit, units
from memstack.models import ScoredId
from memstack.ports.store import TermCounts

from tests.retrieval.helpers import T, U

WEIGHTS = units.FieldWeights(turns={"vector": 0.3, "bm25": 0.7}, memories={"vector": 0.3, "bm25": 0.1})
TURN_A = stm_memory_id(T, U, "a")
# three memories written directly (no source turn): Bob's home, diet and car
HOME, DIET, CAR = "1" * 32, "2" * 32, "3" * 32


def scored(*pairs: tuple[str, float]) -> list[ScoredId]:
    return [ScoredId(id=i, score=s) for i, s in pairs]


def test_well_separated_scores_keep_their_ranks_near_ties_share_them() -> None:
    assert credit.effective_ranks(np.array([10.0, 5.0, 2.0]), 0.2).tolist() == [1.0, 2.0, 3.0]
    near = credit.effective_ranks(np.array([2.61, 2.42, 2.21]), 0.2)
    assert near[0] == 1.0
    assert 1.0 < near[1] < 1.5 < near[2] < 2.5  # each entry above counts by how far above it is
    # the same as the definition, entry by entry
    s = [2.61, 2.42, 2.21]
    for i in range(3):
        expected = 1 + sum(min(1.0, (s[j] - s[i]) / (0.2 * s[j])) for j in range(i))
        assert near[i] == pytest.approx(expected)
    # equal scores share a rank exactly; a clearly lower one comes after both of them
    assert credit.effective_ranks(np.array([3.0, 3.0, 1.0]), 0.2).tolist() == [1.0, 1.0, 3.0]


def test_near_tied_bm25_scores_let_the_cosine_order_them() -> None:
    """Only 'bob' matches, in each of the three: their BM25 differs by length alone."""
    rankings = {
        "bm25": scored((DIET, 2.61), (CAR, 2.42), (HOME, 2.21)),
        "vector": scored((CAR, 0.66), (DIET, 0.44), (HOME, 0.40)),
    }
    members = {i: [i] for i in (HOME, DIET, CAR)}
    plain = units.unit_rrf(members, set(), units.field_ranks(rankings), WEIGHTS, k=5)
    assert max(plain, key=plain.__getitem__) == DIET  # the length difference decides: the failure
    ranks = units.field_ranks(rankings)
    shared = credit.with_credit(ranks, credit.shared_ranks(ranks, ("bm25",), 0.2), {})
    fused = units.unit_rrf(members, set(), shared, WEIGHTS, k=5)
    assert max(fused, key=fused.__getitem__) == CAR
    # a clear BM25 lead still decides against a small cosine difference
    rankings["bm25"] = scored((DIET, 6.0), (CAR, 2.42), (HOME, 2.21))
    ranks = units.field_ranks(rankings)
    shared = credit.with_credit(ranks, credit.shared_ranks(ranks, ("bm25",), 0.2), {})
    fused = units.unit_rrf(members, set(), shared, WEIGHTS, k=5)
    assert max(fused, key=fused.__getitem__) == DIET


def test_a_match_on_little_of_the_query_earns_part_of_its_credit() -> None:
    # "where does Bob work": 'work' is in no record (the largest idf), 'bob' in 3 of 20
    counts = TermCounts(docs=20, df={"bob": 3, "work": 0})
    mass = credit.query_idf_mass(counts)
    assert mass == pytest.approx(np.log(1 + 17.5 / 3.5) + np.log(1 + 20.5 / 0.5))
    ranks = units.field_ranks({"bm25": scored((HOME, 0.5 * mass), (DIET, 2.0 * mass))})
    gain = credit.match_gains(ranks, "bm25", counts, full=1.0)["bm25"]
    assert gain[ranks.row[HOME]] == pytest.approx(0.5)
    assert gain[ranks.row[DIET]] == 1.0  # saturates: a full match keeps all of it
    assert credit.match_gains(ranks, "bm25", TermCounts(docs=0, df={}), full=1.0) == {}


def test_a_vector_hit_far_below_the_best_cosine_earns_little_however_few_compete() -> None:
    """Ann: the one turn ('I am allergic to peanuts') is first among turns at cosine 0.085."""
    lisbon = "4" * 32
    rankings = {"vector": scored((lisbon, 0.41), (TURN_A, 0.085))}
    ranks = units.field_ranks(rankings)
    gain = credit.relative_gains(ranks, "vector", 0.5)["vector"]
    assert gain[ranks.row[lisbon]] == 1.0
    assert gain[ranks.row[TURN_A]] == pytest.approx(0.085 / (0.5 * 0.41))
    members = {lisbon: [lisbon], TURN_A: [TURN_A]}
    plain = units.unit_rrf(members, {TURN_A}, ranks, WEIGHTS, k=5)
    assert plain[TURN_A] == plain[lisbon]  # first of its field each: a rank among one is the first
    fused = units.unit_rrf(members, {TURN_A}, credit.with_credit(ranks, {}, {"vector": gain}), WEIGHTS, k=5)
    assert fused[lisbon] > fused[TURN_A]


def test_credit_of_one_is_the_plain_fusion_to_the_bit() -> None:
    rankings = {
        "bm25": scored((TURN_A, 3.0), (HOME, 2.0), (DIET, 1.0)),
        "vector": scored((DIET, 0.9), (TURN_A, 0.8), (CAR, 0.7)),
    }
    ranks = units.field_ranks(rankings)
    ones = {name: np.ones(len(ranks)) for name in rankings}
    members = {TURN_A: [TURN_A, HOME], DIET: [DIET], CAR: [CAR]}
    plain = units.unit_rrf(members, {TURN_A}, ranks, WEIGHTS, k=5)
    assert credit.with_credit(ranks, {}, {}) is ranks
    assert units.unit_rrf(members, {TURN_A}, credit.with_credit(ranks, {}, ones), WEIGHTS, k=5) == plain
    own, _ = units.record_rrf(ranks, WEIGHTS, k=5)
    own_ones, _ = units.record_rrf(credit.with_credit(ranks, {}, ones), WEIGHTS, k=5)
    assert own.tolist() == own_ones.tolist()


def test_a_memory_without_a_source_turn_can_stand_among_the_turns_too() -> None:
    turn_b = stm_memory_id(T, U, "b")
    ranks = units.field_ranks({"vector": scored((TURN_A, 0.9), (HOME, 0.8), (turn_b, 0.7))}, both={HOME})
    assert ranks.rank_in("vector", units.TURNS)[ranks.row[HOME]] == 2
    assert ranks.rank_in("vector", units.MEMORIES)[ranks.row[HOME]] == 1
    assert ranks.rank_in("vector", units.TURNS)[ranks.row[turn_b]] == 3  # it takes a turn's place
    fused = units.unit_rrf({HOME: [HOME]}, {HOME}, ranks, WEIGHTS, k=5)
    assert fused[HOME] == pytest.approx(0.3 / 7 + 0.3 / 6)  # a turn's credit and a memory's
