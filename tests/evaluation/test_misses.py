"""Why evidence misses the first k turns (``memstack.evaluation.misses``, ``scripts/recall_misses.py``)."""

from __future__ import annotations

from typing import Any

from memstack.evaluation.misses import (
    NOWHERE,
    Density,
    Miss,
    cause,
    cause_table,
    fill,
    first_places,
    hit_kind,
)
from memstack.models import PROFILE, MemoryRecord, Tier


def _record(record_id: str, sources: list[str], tier: Tier = Tier.LTM, **metadata: Any) -> MemoryRecord:
    return MemoryRecord(
        id=record_id,
        tenant="t",
        user_id="u",
        tier=tier,
        content=record_id,
        source_ids=sources,
        metadata=metadata,
    )


def test_each_kind_of_hit_is_told_apart() -> None:
    assert hit_kind(_record("a", ["1"], Tier.STM)) == "turn"
    assert hit_kind(_record("b", ["1"], Tier.STM, chunk=2, chunks=3)) == "chunk"
    assert hit_kind(_record("c", ["1"])) == "memory"
    assert hit_kind(_record("d", ["1", "2"], consolidation="summary")) == "rollup"
    assert hit_kind(_record("e", ["1"], consolidation=PROFILE)) == "profile"


def test_first_places_keeps_each_turns_best_place_for_its_own_record_and_for_a_memory() -> None:
    records = {
        "m1": _record("m1", ["2", "3"]),
        "t2": _record("t2", ["2"], Tier.STM),
        "m2": _record("m2", ["2"]),
        "t3": _record("t3", ["3"], Tier.STM),
    }
    own, memory = first_places(["m1", "gone", "t2", "m2", "t3"], records)
    assert own == {"2": 3, "3": 5}
    assert memory == {"2": 1, "3": 1}


def test_fill_counts_the_results_up_to_k_turns_and_those_that_brought_none() -> None:
    hits = [
        _record("m1", ["1"]),
        _record("t1", ["1"], Tier.STM),  # a second copy of turn 1
        _record("s", ["2", "3", "4"], consolidation="synthesis"),  # three places
        _record("t5", ["5"], Tier.STM),
        _record("t6", ["6"], Tier.STM),  # beyond the first 5 turns: not counted
    ]
    out = fill(hits, 5)
    assert out.slots == {"memory": 1, "turn": 2, "rollup": 1}
    assert out.turns == {"memory": 1, "turn": 1, "rollup": 3}
    assert out.no_new == {"turn": 1}
    assert out.extra_places == 2
    assert out.most_per_turn == 2


def test_the_cause_is_the_first_stage_that_lost_the_turn() -> None:
    assert cause(NOWHERE, NOWHERE, False, False, 400, 400) == "not_retrieved"
    assert cause(401, 500, False, False, 400, 400) == "not_retrieved"
    assert cause(NOWHERE, 400, False, False, 400, 400) == "fusion_cut"
    assert cause(NOWHERE, NOWHERE, True, False, 400, 400) == "fusion_cut"
    assert cause(3, 3, False, True, 400, 400) == "outranked"


def test_the_cause_table_has_a_row_per_category_and_one_for_all() -> None:
    misses = [
        Miss("summary", "1", "assistant", 4000, "not_retrieved"),
        Miss("summary", "2", "user", 300, "outranked", vector_own=40, pool_own=30),
        Miss("update", "3", "user", 300, "fusion_cut", bm25_memory=120),
    ]
    rows = cause_table(misses, {"summary": 10, "update": 4}, 3000)
    assert rows[2] == "| summary | 10 | 2 | 1 | 0 | 1 | 1 | 40 / - | - / - | 1 |"
    assert rows[3] == "| update | 4 | 1 | 0 | 1 | 0 | 0 | - / - | - / 120 | 0 |"
    assert rows[4] == "| all | 14 | 3 | 1 | 1 | 1 | 1 | 40 / - | - / 120 | 1 |"


def test_density_counts_each_result_by_place_and_kind_and_whether_it_brought_new_evidence() -> None:
    density = Density()
    hits = [
        _record("m1", ["1"]),  # evidence
        _record("t1", ["1"], Tier.STM),  # evidence, but not new
        *[_record(f"t{i}", [str(i)], Tier.STM) for i in range(2, 12)],  # places 3-12, turn 11 evidence
    ]
    lexical = [True, True, *([False] * 10)]
    density.add(hits, lexical, {"1", "11"})
    assert density.results == {
        ("1-10", "memory"): 1,
        ("1-10", "turn, BM25"): 1,
        ("1-10", "turn, no BM25"): 8,
        ("11-25", "turn, no BM25"): 2,
    }
    assert density.evidence[("1-10", "memory")] == 1
    assert density.evidence[("1-10", "turn, BM25")] == 0
    assert density.evidence[("11-25", "turn, no BM25")] == 1
    assert density.table()[2] == "| 1-10 | memory | 1 | 1 | 1.000 |"
