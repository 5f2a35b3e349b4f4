"""The pool's per-stage values (explain): kept as float rows, read out only for the hits returned."""

from __future__ import annotations

import numpy as np
from memstack.domain.retrieval.pool import Pool
from memstack.ports.store import Candidates


def _pool(n: int) -> Pool:
    flags = np.zeros(n, dtype=bool)
    facts = Candidates(
        ids=[f"m{j}" for j in range(n)],
        stm=flags,
        current=~flags,
        deleted=flags,
        when=np.zeros(n),
        consolidated=flags,
        rollup=flags,
        profile=flags,
        n_sources=np.zeros(n, dtype=np.int32),
        last_source=[None] * n,
        vectors=np.zeros((n, 2), dtype=np.float32),
        has_vector=flags,
    )
    return Pool(facts, {})


def test_values_set_are_shown_in_the_order_their_stages_named_them_and_unset_ones_not() -> None:
    pool = _pool(3)
    pool.column("b")[:] = [1.0, 2.0, 3.0]
    pool.put("a", 2, 0.5)
    pool.column("unset")
    pool.rescore(0, 0.25)
    assert pool.stages_of([2, 0]) == [{"b": 3.0, "a": 0.5}, {"b": 1.0, "score": 0.25}]
    assert [list(s) for s in pool.stages_of([2, 0])] == [["b", "a"], ["b", "score"]]
    assert pool.get("a", 2, -1.0) == 0.5 and pool.get("a", 1, -1.0) == -1.0 and pool.get("x", 0, 7.0) == 7.0
    assert all(type(v) is float for stages in pool.stages_of([0, 1, 2]) for v in stages.values())
    assert pool.stages_of([]) == []


def test_a_value_written_through_a_column_read_before_many_more_were_made_is_kept() -> None:
    pool = _pool(2)
    first = pool.column("first")
    for k in range(150):  # beyond any one block of rows
        pool.put(f"v{k}", k % 2, float(k))
    first[1] = 9.0
    pool.put("v149", 0, -1.0)
    stages = pool.stages_of([0, 1])
    assert stages[1]["first"] == 9.0 and "first" not in stages[0]
    assert list(stages[0]) == [f"v{k}" for k in range(0, 150, 2)] + ["v149"]
    assert stages[1] == {"first": 9.0, **{f"v{k}": float(k) for k in range(1, 150, 2)}}
    assert stages[0]["v149"] == -1.0


def test_ranks_after_a_stage_are_places_in_its_order_and_rows_left_out_have_none() -> None:
    pool = _pool(4)
    pool.score = [0.1, 0.4, 0.3, 0.2]
    pool.order = [0, 1, 2]  # row 3 was dropped by an earlier stage
    pool.ranked("fusion")
    assert pool.order == [1, 2, 0]
    assert [s.get("rank_after_fusion") for s in pool.stages_of([0, 1, 2, 3])] == [3.0, 1.0, 2.0, None]
