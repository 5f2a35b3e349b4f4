"""Stage 6: near-duplicate removal (cosine ≥ the threshold), and raw turns merged into their memories."""

from __future__ import annotations

import math

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval.pool import Pool
from memstack.domain.retrieval.stage import Search
from memstack.domain.scoring import near_duplicates


class Dedup:
    name = "dedup"

    def run(self, search: Search) -> str:
        cfg, pool = search.config, search.pool
        with_vectors = [j for j in pool.order if pool.has_vector[j]]
        dropped = {
            with_vectors[k] for k in near_duplicates(pool.facts.vectors[with_vectors], cfg.dedup_threshold)
        }
        pool.order = [j for j in pool.order if j not in dropped]
        merged: set[int] = set()
        apart: list[tuple[int, int]] = []
        if cfg.dedup_by_source:
            merged, apart = merge_turns_into_memories(pool, sole=cfg.dedup_merge_into == "sole")
            if merged:
                pool.order = [j for j in pool.order if j not in merged]
        pool.ranked(self.name)
        if apart and cfg.dedup_multi_turn_places:
            place_below_turns(pool, apart, cfg.dedup_multi_turn_places)
            pool.ranked(self.name, sort=False)
        status = f"ok: {len(dropped)} removed, {len(merged)} turns merged into their memories"
        return status + (f", {len(apart)} kept apart from a memory of several turns" if apart else "")


def merge_turns_into_memories(pool: Pool, sole: bool = True) -> tuple[set[int], list[tuple[int, int]]]:
    """Raw turns that a current LTM memory in the pool was last made from; returns their rows.

    The turn and the memory state one fact: the memory is kept (it is current,
    categorised, dated) and takes the better of the two scores, so merging
    never pushes the fact down the list. Provenance is unchanged: the memory's
    ``source_ids`` name the turn. A consolidation summary or synthesis restates
    many turns in general terms, and a profile lists a person's memories of one
    category: neither is one turn's fact, so neither takes a turn's place (a turn
    merged into a profile went wherever stage 8 puts the profile, below its
    sources: LoCoMo dev lost evidence so).

    ``sole``: only when that memory cites the turn alone. A memory citing older
    turns too (an update: "lives in Osaka", from the Tokyo turn and the Osaka
    turn) would take the Osaka turn's place and list the Tokyo turn first, ahead
    of the turn that earned the place: the turn keeps its place instead, and
    the (turn, memory) rows kept apart so are returned too (``place_below_turns``).
    """
    sources = pool.facts.last_source
    restates = (pool.facts.rollup | pool.facts.profile).tolist()
    memory_of: dict[str | None, int] = {}
    for j in pool.order:
        if (
            not pool.stm[j]
            and pool.current[j]
            and not pool.deleted[j]
            and pool.n_sources[j]
            and not restates[j]
        ):
            # Only the newest source: an updated memory ("lives in Osaka", from the
            # Tokyo turn and the Osaka turn) replaces what the Osaka turn said, while
            # the Tokyo turn stays findable as what was said before.
            source = sources[j]
            best = memory_of.get(source)
            if best is None or pool.score[j] > pool.score[best]:
                memory_of[source] = j
    merged: set[int] = set()
    apart: list[tuple[int, int]] = []
    if not memory_of:
        return merged, apart
    for j in pool.order:
        if not pool.stm[j] or pool.n_sources[j] != 1:
            continue
        memory = memory_of.get(sources[j])
        if memory is None:
            continue
        if sole and pool.n_sources[memory] > 1:
            apart.append((j, memory))
            continue
        merged.add(j)
        _merge(pool, j, memory)
    return merged, apart


def _merge(pool: Pool, turn: int, memory: int) -> None:
    """The memory takes the turn's place: the better of the two scores."""
    if pool.score[turn] > pool.score[memory]:
        pool.put(col.MERGED_TURN_SCORE, memory, pool.score[turn])
        pool.rescore(memory, pool.score[turn])
        # The memory's score is now the turn's (its unit's value when the turn was the unit's
        # best member): explain, and the calibration fitted on it, read the values it came from.
        for name in (col.RRF, col.RRF_SCALED):
            value = pool.get(name, turn, math.nan)
            if not math.isnan(value):
                pool.put(name, memory, value)


def place_below_turns(pool: Pool, apart: list[tuple[int, int]], places: int) -> None:
    """Each (turn, memory) kept apart: the memory ranks at most ``places`` below the turn.

    By its own evidence such a memory often ranks far below (its words are the
    turn's, and the turn carried their unit's value), and the older turns it
    cites, often superseded and ranked last in stage 8, are found only through
    it. Moved up, it scores halfway between the hits above and below it (scores
    stay in rank order; ``multi_turn_from`` keeps its own). Places, not a share
    of the turn's score: scores fall steeply at the head of a list and barely in
    its tail, so a share moved it a few places below a first hit and out of the
    first 25 below a tenth.
    """
    order = pool.order
    at = {j: i for i, j in enumerate(order)}
    for turn, memory in sorted(apart, key=lambda pair: at[pair[0]]):
        target = order.index(turn) + places
        if target >= len(order) or order.index(memory) <= target:
            continue  # already near its turn by its own evidence
        order.remove(memory)
        order.insert(target, memory)
        pool.put(col.MULTI_TURN_FROM, memory, pool.score[memory])
        above = pool.score[order[target - 1]]
        below = pool.score[order[target + 1]] if target + 1 < len(order) else pool.score[memory]
        pool.rescore(memory, (above + below) / 2)
