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
        merged = merge_turns_into_memories(pool) if cfg.dedup_by_source else set()
        if merged:
            pool.order = [j for j in pool.order if j not in merged]
        pool.ranked(self.name)
        return f"ok: {len(dropped)} removed, {len(merged)} turns merged into their memories"


def merge_turns_into_memories(pool: Pool) -> set[int]:
    """Raw turns that a current LTM memory in the pool was last made from; returns their rows.

    The turn and the memory state one fact: the memory is kept (it is current,
    categorised, dated) and takes the better of the two scores, so merging
    never pushes the fact down the list. Provenance is unchanged: the memory's
    ``source_ids`` name the turn. A consolidation summary or synthesis restates
    many turns in general terms, not one turn's fact: it never takes a turn's place.
    """
    sources = pool.facts.last_source
    rollup = pool.facts.rollup.tolist()
    memory_of: dict[str | None, int] = {}
    for j in pool.order:
        if (
            not pool.stm[j]
            and pool.current[j]
            and not pool.deleted[j]
            and pool.n_sources[j]
            and not rollup[j]
        ):
            # Only the newest source: an updated memory ("lives in Osaka", from the
            # Tokyo turn and the Osaka turn) replaces what the Osaka turn said, while
            # the Tokyo turn stays findable as what was said before.
            source = sources[j]
            best = memory_of.get(source)
            if best is None or pool.score[j] > pool.score[best]:
                memory_of[source] = j
    merged: set[int] = set()
    if not memory_of:
        return merged
    for j in pool.order:
        if not pool.stm[j] or pool.n_sources[j] != 1:
            continue
        memory = memory_of.get(sources[j])
        if memory is None:
            continue
        merged.add(j)
        if pool.score[j] > pool.score[memory]:
            pool.put(col.MERGED_TURN_SCORE, memory, pool.score[j])
            pool.rescore(memory, pool.score[j])
            # The memory's score is now the turn's (its unit's value when the turn was the unit's
            # best member): explain, and the calibration fitted on it, read the values it came from.
            for name in (col.RRF, col.RRF_SCALED):
                value = pool.get(name, j, math.nan)
                if not math.isnan(value):
                    pool.put(name, memory, value)
    return merged
