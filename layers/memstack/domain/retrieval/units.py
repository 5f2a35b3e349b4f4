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

from memstack.domain.ingest import is_turn_id, stm_memory_id
from memstack.models import MemoryRecord, ScoredId, Tier

TURNS = "turns"
MEMORIES = "memories"


@dataclass(frozen=True)
class FieldWeights:
    """RRF weight of each ranking (``vector``, ``bm25``, ``bm25_prf``) in each field."""

    turns: Mapping[str, float]
    memories: Mapping[str, float]

    def of(self, field: str, ranking: str, has_turn: bool = True) -> float:
        # A unit whose turn no ranking holds: its memories are its only text, and count fully.
        table = self.turns if field == TURNS or not has_turn else self.memories
        return table.get(ranking, 0.0)


def field_of(memory_id: str) -> str:
    return TURNS if is_turn_id(memory_id) else MEMORIES


def field_ranks(rankings: Mapping[str, Sequence[ScoredId]]) -> dict[tuple[str, str], dict[str, int]]:
    """``(ranking, field) -> {id: rank within that field}``, ranks from 1."""
    ranks: dict[tuple[str, str], dict[str, int]] = {}
    for name, ranking in rankings.items():
        counters = {TURNS: 0, MEMORIES: 0}
        for hit in ranking:
            f = field_of(hit.id)
            counters[f] += 1
            ranks.setdefault((name, f), {})[hit.id] = counters[f]
    return ranks


def record_rrf(
    ranks: Mapping[tuple[str, str], Mapping[str, int]], weights: FieldWeights, k: int
) -> dict[str, float]:
    """Each candidate's own weighted RRF over the fields (what picks the pool)."""
    fused: dict[str, float] = {}
    for (name, f), ids in ranks.items():
        w = weights.of(f, name)
        if w == 0.0:
            continue
        for memory_id, rank in ids.items():
            fused[memory_id] = fused.get(memory_id, 0.0) + w / (k + rank)
    return fused


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
    ranks: Mapping[tuple[str, str], Mapping[str, int]],
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
    out: dict[str, float] = {}
    for key, ids in members.items():
        has_turn = key in candidate_turns
        candidates = {*ids, key} if has_turn else set(ids)
        candidates |= (sources or {}).get(key, set())
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
        previous: float | None = None
        for memory_id in sorted(ids, key=lambda i: own.get(i, 0.0), reverse=True):
            value = fused[key] if previous is None else own.get(memory_id, 0.0)
            if previous is not None and value >= previous:
                value = previous * (1.0 - _TIE_STEP)
            out[memory_id] = previous = value
    return out
