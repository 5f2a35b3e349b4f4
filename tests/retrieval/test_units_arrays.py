"""The array fusion (``units``) against the plain per-record fusion it replaced, on random rankings.

The reference below is the dict-and-loop fusion memstack ran before the arrays: the same
rankings must give the same ranks, the same values to the last bit (each candidate's and each
unit's sum adds the same terms in the same order), the same candidates picked for the pool and
the same order among ties.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from memstack.domain.ingest import is_turn_id, stm_memory_id
from memstack.domain.retrieval import units
from memstack.models import Ranked, ScoredId

from tests.retrieval.helpers import T, U

TURNS = [stm_memory_id(T, U, f"m{n}") for n in range(12)]
MEMORIES = [f"{n:032x}" for n in range(12)]
NAMES = ("vector", "bm25", "bm25_prf")


def reference_ranks(rankings: Mapping[str, Sequence[ScoredId]]) -> dict[tuple[str, str], dict[str, int]]:
    ranks: dict[tuple[str, str], dict[str, int]] = {}
    for name, ranking in rankings.items():
        counters = {units.TURNS: 0, units.MEMORIES: 0}
        for hit in ranking:
            f = units.field_of(hit.id)
            counters[f] += 1
            ranks.setdefault((name, f), {})[hit.id] = counters[f]
    return ranks


def reference_record_rrf(
    ranks: dict[tuple[str, str], dict[str, int]], weights: units.FieldWeights, k: int
) -> dict[str, float]:
    fused: dict[str, float] = {}
    for (name, f), ids in ranks.items():
        w = weights.of(f, name)
        if w == 0.0:
            continue
        for memory_id, rank in ids.items():
            fused[memory_id] = fused.get(memory_id, 0.0) + w / (k + rank)
    return fused


def reference_unit_rrf(
    members: Mapping[str, Sequence[str]],
    candidate_turns: set[str],
    ranks: dict[tuple[str, str], dict[str, int]],
    weights: units.FieldWeights,
    k: int,
    sources: Mapping[str, set[str]],
) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, ids in members.items():
        has_turn = key in candidate_turns
        candidates = {*ids, key} if has_turn else set(ids)
        candidates |= sources.get(key, set())
        total = 0.0
        for (name, f), by_id in ranks.items():
            w = weights.of(f, name, has_turn)
            if w == 0.0:
                continue
            best = min((by_id[i] for i in candidates if i in by_id), default=None)
            if best is not None:
                total += w / (k + best)
        out[key] = total
    return out


ids = st.sampled_from(TURNS + MEMORIES)
#: scores with ties, as BM25 and cosine rankings have
hits = st.lists(st.tuples(ids, st.sampled_from([0.5, 0.25, 0.1])), unique_by=lambda t: t[0])
rankings = st.fixed_dictionaries({name: hits for name in NAMES})
weight = st.sampled_from([0.0, 0.1, 0.3, 0.7])


@settings(max_examples=300, deadline=None)
@given(
    raw=rankings,
    turn_w=st.tuples(weight, weight, weight),
    memory_w=st.tuples(weight, weight, weight),
    k=st.integers(1, 60),
    pooled=st.lists(ids, unique=True),
    data=st.data(),
)
def test_the_array_fusion_is_the_per_record_fusion(
    raw: dict[str, list[tuple[str, float]]],
    turn_w: tuple[float, float, float],
    memory_w: tuple[float, float, float],
    k: int,
    pooled: list[str],
    data: st.DataObject,
) -> None:
    given_rankings = {name: [ScoredId(id=i, score=s) for i, s in found] for name, found in raw.items()}
    weights = units.FieldWeights(
        turns=dict(zip(NAMES, turn_w, strict=True)), memories=dict(zip(NAMES, memory_w, strict=True))
    )
    ranks = units.field_ranks(given_rankings)
    want_ranks = reference_ranks(given_rankings)
    assert {column: ranks[column] for column in ranks.columns} == want_ranks
    assert list(ranks.columns) == list(want_ranks)  # the order every sum adds the columns in
    for name, ranking in given_rankings.items():
        for place, hit in enumerate(ranking, start=1):
            assert ranks.places[name][ranks.row[hit.id]] == place
            assert ranks.scores[name][ranks.row[hit.id]] == hit.score

    own, met = units.record_rrf(ranks, weights, k)
    want_own = reference_record_rrf(want_ranks, weights, k)
    assert [ranks.ids[r] for r in met] == list(want_own)  # who is fused, in the order met
    assert {ranks.ids[r]: own[r] for r in met} == want_own  # bit for bit
    # The pool's pick: best first, ties in the order met (what a stable sort of the dict gave).
    picked = met[np.argsort(-own[met], kind="stable")]
    assert [ranks.ids[r] for r in picked] == sorted(want_own, key=want_own.__getitem__, reverse=True)

    # Units of random pooled records (a record in one unit), some with older source turns.
    members: dict[str, list[str]] = {}
    for memory_id in pooled:
        members.setdefault(data.draw(st.sampled_from([*TURNS, memory_id])), []).append(memory_id)
    sources = {key: set(data.draw(st.lists(st.sampled_from(TURNS), max_size=3))) for key in members}
    candidate_turns = {i for (_, f), by_id in want_ranks.items() if f == units.TURNS for i in by_id}
    got = units.unit_rrf(members, candidate_turns, ranks, weights, k, sources)
    assert got == reference_unit_rrf(members, candidate_turns, want_ranks, weights, k, sources)


def _columns(found: list[tuple[str, float]], with_turn: bool) -> Ranked:
    """A ranking as the embedded store returns it: columns, each id's field known (or not)."""
    turn = np.array([is_turn_id(i) for i, _ in found], dtype=bool) if with_turn else None
    return Ranked([i for i, _ in found], np.array([s for _, s in found], dtype=np.float64), turn)


@settings(max_examples=300, deadline=None)
@given(raw=rankings, with_turn=st.tuples(st.booleans(), st.booleans(), st.booleans()), as_list=st.data())
def test_rankings_as_columns_fuse_as_rankings_of_objects(
    raw: dict[str, list[tuple[str, float]]], with_turn: tuple[bool, bool, bool], as_list: st.DataObject
) -> None:
    objects = {name: [ScoredId(id=i, score=s) for i, s in found] for name, found in raw.items()}
    # Any mix: a column ranking beside an object one (the feedback query of a store without them).
    columns: dict[str, Sequence[ScoredId]] = {
        name: objects[name] if as_list.draw(st.booleans()) else _columns(found, turn)
        for (name, found), turn in zip(raw.items(), with_turn, strict=True)
    }
    want, got = units.field_ranks(objects), units.field_ranks(columns)
    assert got.ids == want.ids and got.row == want.row and got.columns == want.columns
    np.testing.assert_array_equal(got.is_turn, want.is_turn)
    for name in NAMES:
        for table in ("ranks", "places", "scores"):
            np.testing.assert_array_equal(getattr(got, table)[name], getattr(want, table)[name])
    for name, found in raw.items():
        ranked = _columns(found, True)
        assert list(ranked) == objects[name] and ranked == objects[name]
        assert list(ranked[1:3]) == objects[name][1:3] and len(ranked) == len(found)


def _with_rows(found: list[tuple[str, float]], at: dict[str, int]) -> Ranked:
    """A ranking as the embedded store returns it: with each id's field and its row in the store."""
    turn = np.array([is_turn_id(i) for i, _ in found], dtype=bool)
    rows = np.array([at[i] for i, _ in found], dtype=np.int64)
    return Ranked([i for i, _ in found], np.array([s for _, s in found], dtype=np.float64), turn, rows)


@settings(max_examples=300, deadline=None)
@given(raw=rankings, data=st.data())
def test_rankings_with_store_rows_fuse_as_rankings_of_objects(
    raw: dict[str, list[tuple[str, float]]], data: st.DataObject
) -> None:
    # Any store rows, one per id (the store's order is not the rankings').
    every = list(dict.fromkeys(i for found in raw.values() for i, _ in found))
    at = dict(zip(every, data.draw(st.permutations(range(len(every)))), strict=True))
    objects = {name: [ScoredId(id=i, score=s) for i, s in found] for name, found in raw.items()}
    want, got = units.field_ranks(objects), units.field_ranks({n: _with_rows(f, at) for n, f in raw.items()})
    assert got.ids == want.ids and got.row == want.row and got.columns == want.columns
    np.testing.assert_array_equal(got.is_turn, want.is_turn)
    for name in raw:
        np.testing.assert_array_equal(got.at[name], want.at[name])
        np.testing.assert_array_equal(got.ranks[name], want.ranks[name])
        np.testing.assert_array_equal(got.places[name], want.places[name])
        np.testing.assert_array_equal(got.scores[name], want.scores[name])
    if every:
        assert got.store_rows is not None and [at[i] for i in got.ids] == got.store_rows.tolist()


@settings(max_examples=300, deadline=None)
@given(
    unit=st.lists(st.integers(0, 5), max_size=30),
    own=st.lists(st.sampled_from([0.0, 0.01, 0.02, 0.02, 0.5]), min_size=30, max_size=30),
    fused=st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6),
)
def test_member_values_by_row_are_those_by_id(unit: list[int], own: list[float], fused: list[float]) -> None:
    """Every member of a unit (ties in own fusion among them): the same value, to the bit."""
    ids = [f"r{j}" for j in range(len(unit))]
    members: dict[str, list[str]] = {}
    for memory_id, u in zip(ids, unit, strict=True):
        members.setdefault(f"u{u}", []).append(memory_id)
    want = units.member_values(
        members, dict(zip(ids, own, strict=False)), {f"u{u}": fused[u] for u in range(len(fused))}
    )
    got = units.member_values_of_rows(
        np.array(unit, dtype=np.int64), np.array(own[: len(unit)]), np.array(fused)
    )
    assert got.tolist() == [want[i] for i in ids]
