"""Stage 4's fusion over evidence units: a raw turn and the memories extracted from it are one unit.

With extraction on, one thing the user said is stored several times: the raw
turn (tier ``stm``) and the LTM memories extracted from it. Fused record by
record, each copy takes its own place in every ranking and they compete: a
short extracted fragment outscores the turn it came from in BM25, and the
turn's evidence and its memories' evidence are never added up.

So each ranking is split into two *fields*, turns and memories (ranks counted
within each field), and the weighted RRF is summed per *unit*: the turn plus
the memories whose newest source it is, each field counting the unit's best
rank in it. The memory field has its own weights: when a unit's turn is
among the candidates, its memories are a second view of the same words, and measured on
LoCoMo their embedding adds much (a clean paraphrase) while their BM25 adds
little beyond the turn's own (docs/retrieval.md, "Evidence units"). A unit
whose turn is not among the candidates (expired from STM, a memory written
directly, or a turn no ranking found) has only memories, and they count with
the turn weights: they are all the evidence there is.

The record ids alone say which field a candidate is in (``is_turn_id``), so
the split needs no reads; only the pooled records are loaded, as before.

A unit is one piece of evidence, so it earns one slot at its fused value: only
its best member (by its own fusion) carries it (``member_values``). Its other
members score by their own evidence, so they fall below the next unit that
found something new instead of filling the list with copies of one turn at
one shared score.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter
from typing import cast

import numpy as np

from memstack.domain.ingest import is_turn_id, stm_memory_id
from memstack.models import MemoryRecord, Ranked, ScoredId, Tier

TURNS = "turns"
MEMORIES = "memories"

_ID, _SCORE = attrgetter("id"), attrgetter("score")


@dataclass(frozen=True)
class FieldWeights:
    """RRF weight of each ranking (``vector``, ``bm25``, ``bm25_prf``) in each field."""

    turns: Mapping[str, float]
    memories: Mapping[str, float]

    def without(self, ranking: str) -> FieldWeights:
        """These weights with one ranking left out (weight 0 in both fields)."""
        return FieldWeights({**self.turns, ranking: 0.0}, {**self.memories, ranking: 0.0})

    def of(self, field: str, ranking: str, has_turn: bool = True) -> float:
        # A unit whose turn no ranking holds: its memories are its only text, and count fully.
        table = self.turns if field == TURNS or not has_turn else self.memories
        return table.get(ranking, 0.0)


def field_of(memory_id: str) -> str:
    return TURNS if is_turn_id(memory_id) else MEMORIES


@dataclass(frozen=True)
class FieldRanks:
    """Every candidate of the rankings once, as arrays: row ``r`` is ``ids[r]``.

    A search fuses about 400 candidates; kept as arrays, the fusion is a few
    numpy operations instead of a Python loop per candidate, field and unit.
    """

    #: each candidate once, in the order first seen (the vector ranking's first)
    ids: list[str]
    is_turn: np.ndarray  # bool per row: its field is TURNS
    #: ranking name -> per row, the rank within its field in that ranking (0: not in it)
    ranks: Mapping[str, np.ndarray]
    #: ranking name -> per row, the place in the whole ranking (0: not in it), and the score there
    places: Mapping[str, np.ndarray]
    scores: Mapping[str, np.ndarray]
    #: the (ranking, field) pairs that hold a candidate, in the order every sum adds them up
    columns: tuple[tuple[str, str], ...]
    #: ranking name -> its entries' rows, in its order
    at: Mapping[str, np.ndarray]
    #: per row, the store's own row of the candidate (``Ranked.rows``), when every ranking carried them
    store_rows: np.ndarray | None
    #: ``{id: row}``
    row: dict[str, int]
    #: per row: a memory that stands in both fields (no source turn: ``field_ranks``' ``both``)
    both: np.ndarray | None = None
    #: ranking name -> per row of ``both``, its rank among the turns (the rows of ``ranks`` hold its
    #: rank among the memories)
    turn_ranks: Mapping[str, np.ndarray] | None = None
    #: (ranking, field) -> per row, the rank the fusion credits (``credit.shared_ranks``: near-tied
    #: scores share one); absent: the rank itself
    eff: Mapping[tuple[str, str], np.ndarray] | None = None
    #: ranking name -> per row, a factor on its credit (``credit.match_gains``); absent: 1
    gain: Mapping[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def rank_in(self, name: str, field: str) -> np.ndarray:
        """Per row: its rank in ``field`` of ranking ``name`` (0: not there)."""
        rank = self.ranks[name]
        if field == MEMORIES:
            return np.where(self.is_turn, 0, rank)
        in_turns = np.where(self.is_turn, rank, 0)
        if self.both is None or self.turn_ranks is None:
            return in_turns
        return np.where(self.both, self.turn_ranks[name], in_turns)

    def credit(
        self, name: str, field: str, rows: np.ndarray, rank: np.ndarray, w: np.ndarray | float, k: int
    ) -> np.ndarray:
        """RRF credit ``w / (k + rank)`` of ``rows`` (ranks ``rank`` in ``field``), with the effective
        ranks and gains when set: exactly the plain terms when neither is."""
        eff = self.eff.get((name, field)) if self.eff is not None else None
        term = w / (k + (eff[rows] if eff is not None else rank))
        gain = self.gain.get(name) if self.gain is not None else None
        return term * gain[rows] if gain is not None else term

    def in_field(self, field: str) -> np.ndarray:
        """Per row: whether the candidate is in ``field``."""
        return self.is_turn if field == TURNS else ~self.is_turn

    def __getitem__(self, column: tuple[str, str]) -> dict[str, int]:
        """``{id: rank}`` of one (ranking, field) pair (what a reader or a test looks at)."""
        name, field = column
        rank = self.ranks[name]
        rows = np.flatnonzero((rank > 0) & self.in_field(field))
        return {self.ids[r]: int(rank[r]) for r in rows.tolist()}


def field_ranks(rankings: Mapping[str, Sequence[ScoredId]], both: set[str] | None = None) -> FieldRanks:
    """Each ranking's ranks counted within each field (from 1): a memory above a turn takes no turn's rank.

    ``both``: memories that stand in both fields (no source turn: their own words are all the
    evidence, as a turn's are, and a clean statement, as a memory's is): ranked among the
    memories, and among the turns too (``turn_ranks``), where each takes a place from the turns below it.
    """
    # map and dict.fromkeys iterate in C: a search has a few hundred candidates, each a few lookups.
    ids_of = {name: _ids(ranking) for name, ranking in rankings.items()}
    ids = list(dict.fromkeys(chain.from_iterable(ids_of.values())))
    row = dict(zip(ids, range(len(ids)), strict=True))
    at_of = {
        name: np.fromiter(map(row.__getitem__, ids_of[name]), dtype=np.int64, count=len(ranking))
        for name, ranking in rankings.items()
    }
    found = [ranking for ranking in rankings.values() if len(ranking)]
    store_rows: np.ndarray | None = None
    # A ``Ranked`` (the embedded store's) is columns already, with each id's field known (and its row).
    if all(isinstance(r, Ranked) and r.turn is not None for r in found):
        is_turn = np.zeros(len(ids), dtype=bool)
        if found and all(cast(Ranked, r).rows is not None for r in found):
            store_rows = np.zeros(len(ids), dtype=np.int64)
        for name, ranking in rankings.items():
            if len(ranking):
                is_turn[at_of[name]] = cast(Ranked, ranking).turn
                if store_rows is not None:
                    store_rows[at_of[name]] = cast(Ranked, ranking).rows
    else:
        is_turn = np.fromiter(map(is_turn_id, ids), dtype=bool, count=len(ids))
    both_rows: np.ndarray | None = None
    if both:
        both_rows = np.fromiter((i in both for i in ids), dtype=bool, count=len(ids)) & ~is_turn
        if not both_rows.any():
            both_rows = None
    ranks, places, scores = {}, {}, {}
    turn_ranks: dict[str, np.ndarray] = {}
    columns: list[tuple[str, str]] = []
    for name, ranking in rankings.items():
        at = at_of[name]
        if not len(at):  # a ranking that found nothing (the feedback query when it did not run)
            ranks[name], places[name] = np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=np.int64)
            scores[name] = np.zeros(len(ids))
            turn_ranks[name] = np.zeros(len(ids), dtype=np.int64)
            continue
        turn = is_turn[at]
        if both_rows is not None:
            as_turn = turn | both_rows[at]
            turn_ranks[name] = _per_row(len(ids), at, np.cumsum(as_turn))
            # the turns' own ranks count the memories standing among them too
            within_turns = np.cumsum(as_turn)
            within_memories = np.cumsum(~turn)
            ranks[name] = _per_row(len(ids), at, np.where(turn, within_turns, within_memories))
            places[name] = _per_row(len(ids), at, np.arange(1, len(at) + 1))
            scores[name] = np.zeros(len(ids))
            scores[name][at] = _scores(ranking)
            columns += [(name, f) for f in (TURNS, MEMORIES) if (as_turn if f == TURNS else ~turn).any()]
            continue
        place = np.arange(1, len(at) + 1)
        # one field only (every entry a turn, or none): its ranks are its places
        one_field = bool(turn.all()) or not bool(turn.any())
        # the k-th turn (or memory) of the ranking has rank k in its field
        within = place if one_field else np.where(turn, np.cumsum(turn), np.cumsum(~turn))
        ranks[name] = _per_row(len(ids), at, within)
        places[name] = _per_row(len(ids), at, place)
        scores[name] = np.zeros(len(ids))
        scores[name][at] = _scores(ranking)
        first = TURNS if turn[0] else MEMORIES
        columns.append((name, first))
        other = MEMORIES if first == TURNS else TURNS
        if not one_field:  # both fields hold some
            columns.append((name, other))
    if both_rows is None:
        return FieldRanks(ids, is_turn, ranks, places, scores, tuple(columns), at_of, store_rows, row)
    return FieldRanks(
        ids, is_turn, ranks, places, scores, tuple(columns), at_of, store_rows, row, both_rows, turn_ranks
    )


def _scores(ranking: Sequence[ScoredId]) -> np.ndarray:
    if isinstance(ranking, Ranked):
        return ranking.scores
    return np.fromiter(map(_SCORE, ranking), dtype=np.float64, count=len(ranking))


def _ids(ranking: Sequence[ScoredId]) -> list[str]:
    return ranking.ids if isinstance(ranking, Ranked) else list(map(_ID, ranking))


def _per_row(n: int, at: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.zeros(n, dtype=np.int64)
    out[at] = values
    return out


def record_rrf(ranks: FieldRanks, weights: FieldWeights, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate's own weighted RRF over the fields (what picks the pool), per row; and the
    rows a weighted ranking holds, in the order the fusion meets them (column by column, each in
    its ranking's order): a candidate no weighted ranking holds is none, and ties keep this order."""
    own = np.zeros(len(ranks))
    met: list[np.ndarray] = []
    seen = np.zeros(len(ranks), dtype=bool)
    for name, field in ranks.columns:
        w = weights.of(field, name)
        if w == 0.0:
            continue
        at = ranks.at[name]  # the ranking's rows in its order: a row once each
        if ranks.both is None:
            rows = at[ranks.is_turn[at] == (field == TURNS)]
            rank = ranks.ranks[name][rows]
        else:
            in_field = ranks.rank_in(name, field)
            rows = at[in_field[at] > 0]
            rank = in_field[rows]
        own[rows] += ranks.credit(name, field, rows, rank, w, k)
        met.append(rows[~seen[rows]])
        seen[rows] = True
    if not met:
        return own, np.zeros(0, dtype=np.int64)
    return own, np.concatenate(met)


def unit_key(tenant: str, user_id: str, record: MemoryRecord) -> str:
    """The unit a record belongs to: its own id for a turn, its newest source's turn for a memory.

    The newest source, as stage 6 merges: an updated memory ("lives in Osaka",
    from the Tokyo turn and the Osaka turn) restates the Osaka turn.
    """
    newest = record.source_ids[-1] if record.source_ids else None
    return unit_key_of(tenant, user_id, record.id, record.tier == Tier.STM, newest)


def unit_key_of(tenant: str, user_id: str, memory_id: str, is_turn: bool, newest_source: str | None) -> str:
    """``unit_key`` from what the search pool holds of a record (its tier and newest source), no record."""
    if is_turn:
        return memory_id
    if newest_source is not None:
        return stm_memory_id(tenant, user_id, newest_source)
    return memory_id


def source_turns(tenant: str, user_id: str, records: Iterable[MemoryRecord]) -> set[str]:
    """The turn ids of every source of these records' memories (a memory restates each of them)."""
    return source_turns_of(tenant, user_id, (s for r in records if r.tier == Tier.LTM for s in r.source_ids))


def source_turns_of(tenant: str, user_id: str, source_ids: Iterable[str]) -> set[str]:
    """The turn ids of these memories' source message ids."""
    return {stm_memory_id(tenant, user_id, s) for s in source_ids}


def unit_rrf(
    members: Mapping[str, Sequence[str]],
    candidate_turns: set[str],
    ranks: FieldRanks,
    weights: FieldWeights,
    k: int,
    sources: Mapping[str, set[str]] | None = None,
) -> dict[str, float]:
    """Each unit's fused value: per (ranking, field), the weight over ``k +`` its best member's rank.

    ``members`` maps a unit key to its pooled record ids; the unit's turn counts
    even when it is not pooled (its ranks are known by its id), and a unit
    whose turn is not in ``candidate_turns`` weighs its memories as turns.
    ``sources`` adds, per unit, the older source turns of its memories: an
    updated memory ("lives in Osaka with Kenji", from "I live in Tokyo with
    Kenji" and "we moved to Osaka") restates the words of both.
    """
    keys = list(members)
    n = len(keys)
    has_turn = np.fromiter(map(candidate_turns.__contains__, keys), dtype=bool, count=n)
    # (unit, id) for every record whose ranks count for a unit: its members, its turn when that is
    # a candidate, its memories' older source turns. A record listed twice (the turn among its
    # unit's members too) changes no minimum: no sets, and any order.
    id_at = list(chain.from_iterable(members.values()))
    unit_parts = [np.repeat(np.arange(n), np.fromiter(map(len, members.values()), dtype=np.int64, count=n))]
    turn_units = np.flatnonzero(has_turn)
    id_at += map(keys.__getitem__, turn_units.tolist())
    unit_parts.append(turn_units)
    if sources:
        unit_index = dict(zip(keys, range(n), strict=True))
        for key, more in sources.items():
            u = unit_index.get(key)
            if u is not None and more:
                id_at += more
                unit_parts.append(np.full(len(more), u))
    # -1: a record no ranking holds (only pooled records and their units' turns are looked up)
    row_at = np.fromiter(map(ranks.row.get, id_at, repeat(-1)), dtype=np.int64, count=len(id_at))
    held = row_at >= 0
    total = unit_rrf_of_rows(np.concatenate(unit_parts)[held], row_at[held], has_turn, ranks, weights, k)
    return dict(zip(keys, total.tolist(), strict=True))


def unit_rrf_of_rows(
    unit: np.ndarray, at: np.ndarray, has_turn: np.ndarray, ranks: FieldRanks, weights: FieldWeights, k: int
) -> np.ndarray:
    """``unit_rrf`` by number: unit ``unit[i]`` counts the ranks of ``ranks`` row ``at[i]`` (a pair
    listed twice changes no minimum); ``has_turn`` per unit: its turn is among the candidates."""
    n = len(has_turn)
    total = np.zeros(n)
    if not ranks.columns:
        return total
    # A unit without its turn among the candidates weighs its memories as turns.
    with_turn = np.array([weights.of(field, name, True) for name, field in ranks.columns])
    alone = np.array([weights.of(field, name, False) for name, field in ranks.columns])
    if ranks.both is None and ranks.eff is None and ranks.gain is None:
        return _unit_rrf_by_rank(unit, at, has_turn, ranks, with_turn, alone, k)
    # Effective ranks or gains: per unit, each column's best credit of its records.
    for c, (name, field) in enumerate(ranks.columns):
        rank = ranks.rank_in(name, field)[at]
        w = np.where(has_turn[unit], with_turn[c], alone[c])
        found = (rank > 0) & (w != 0.0)
        if not found.any():
            continue
        term = ranks.credit(name, field, at[found], rank[found], w[found], k)
        best = np.zeros(n)
        np.maximum.at(best, unit[found], term)
        total += best
    return total


def _unit_rrf_by_rank(
    unit: np.ndarray,
    at: np.ndarray,
    has_turn: np.ndarray,
    ranks: FieldRanks,
    with_turn: np.ndarray,
    alone: np.ndarray,
    k: int,
) -> np.ndarray:
    """``unit_rrf_of_rows`` with plain ranks: per unit, the best rank of its records in each column."""
    n = len(has_turn)
    total = np.zeros(n)
    # Every (ranking, field) column at once: per unit, the best rank of its records in each.
    names = [name for name, _ in ranks.columns]
    in_turns = np.array([field == TURNS for _, field in ranks.columns])
    rank = np.stack([ranks.ranks[name] for name in names], axis=1)[at]
    rank[(rank == 0) | (ranks.is_turn[at][:, None] != in_turns)] = _NO_RANK
    best = np.full((n, len(names)), _NO_RANK)
    np.minimum.at(best, unit, rank)
    w = np.where(has_turn[:, None], with_turn, alone)
    found = (best < _NO_RANK) & (w != 0.0)
    term = np.divide(w, k + best, out=np.zeros_like(w), where=found)
    # Column by column in ``ranks.columns`` order: each unit's sum adds up in one order, always
    # (adding 0.0 where a column found nothing leaves a sum as it was).
    for c in range(len(names)):
        total += term[:, c]
    return total


#: no rank in a column: above every real one, and ``k +`` it still an int64
_NO_RANK = 1 << 62


#: how much lower each further member of a unit scores than the one before it, when their own
#: fusion ties (relative): enough to survive the calibrated score's arithmetic, too little to matter
_TIE_STEP = 1e-9


def member_values(
    members: Mapping[str, Sequence[str]], own: Mapping[str, float], fused: Mapping[str, float]
) -> dict[str, float]:
    """The fusion value each pooled record is scored by: a unit's value goes to its best member only.

    The best member (highest ``own``; the first listed on a tie) takes the
    unit's fused value; every other member its own fusion, capped just below
    the member before it, so no two members of a unit ever share a value.
    """
    out: dict[str, float] = {}
    for key, ids in members.items():
        if len(ids) == 1:  # most units: one record, which carries the unit's value
            out[ids[0]] = fused[key]
            continue
        previous: float | None = None
        for memory_id in sorted(ids, key=lambda i: own.get(i, 0.0), reverse=True):
            value = fused[key] if previous is None else own.get(memory_id, 0.0)
            if previous is not None and value >= previous:
                value = previous * (1.0 - _TIE_STEP)
            out[memory_id] = previous = value
    return out


def member_values_of_rows(unit: np.ndarray, own: np.ndarray, fused: np.ndarray) -> np.ndarray:
    """``member_values`` by number: per pooled record (row), its unit ``unit[row]`` (``fused`` per
    unit) and its own fusion ``own[row]``; members of a unit in row order, as ``members`` lists them."""
    value = fused[unit]
    counts = np.bincount(unit, minlength=len(fused))
    several = np.flatnonzero(counts > 1)
    if not len(several):  # most searches: every unit one record, which carries the unit's value
        return value
    own_of = own.tolist()
    for u in several.tolist():
        previous: float | None = None
        for j in sorted(np.flatnonzero(unit == u).tolist(), key=own_of.__getitem__, reverse=True):
            v = float(fused[u]) if previous is None else own_of[j]
            if previous is not None and v >= previous:
                v = previous * (1.0 - _TIE_STEP)
            value[j] = previous = v
    return value
