"""Consolidation's summaries and syntheses ("rollups") never push specific evidence out of the answers.

A rollup (an LTM record whose ``metadata.consolidation`` is a summary of up
to 20 turns or a synthesis of several summaries and memories) restates
what its sources say, in general terms; it matches many queries a little and
would otherwise take the places of the specific turns and memories that answer
them (issue 21 item 8: LoCoMo dev @10 0.797 → 0.521 with consolidation). So,
among the first ``window`` candidates:

* at most one rollup stays where it ranked; the others move below every
  specific candidate (still there when nothing else is);
* the one kept never ranks above a specific candidate it was built from
  (a raw turn it cites, a memory whose newest source it cites): it moves
  right after the last of those, taking that one's score, so scores stay in
  rank order. A rollup whose sources the search did not find keeps its place:
  it is then the best evidence there is.

Profiles (one memory per person and category, off by default) are left where
they rank: a profile is meant to be the answer to "what are Mel's hobbies".
"""

from __future__ import annotations

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval.pool import Pool
from memstack.domain.retrieval.types import SearchRequest
from memstack.ports.store import MemoryStore


def place_rollups(store: MemoryStore, req: SearchRequest, pool: Pool, *, window: int) -> int:
    """Reorder ``pool.order`` as the module says; returns how many rollups it ranked lower."""
    head, tail = pool.order[:window], pool.order[window:]
    ltm = [j for j in head if not pool.stm[j]]
    if not ltm:
        return 0
    # The candidates say which are rollups (``Candidates.rollup``): records are read only when some are.
    marked = [j for j in ltm if pool.facts.rollup[j]]
    if not marked:
        return 0
    records = pool.records(store, req.tenant, req.user_id, marked)
    rollups = [j for j in marked if j in records]
    if not rollups:
        return 0
    kept, extra = rollups[0], set(rollups[1:])
    specific = [j for j in head if j != kept and j not in extra]
    place = head.index(kept)  # the other rollups all rank below it
    cited = set(records[kept].source_ids)
    built_from = [
        i for i, j in enumerate(specific) if pool.facts.last_source[j] in cited and not pool.superseded[j]
    ]
    moved = len(extra)
    if built_from and built_from[-1] >= place:
        place = built_from[-1] + 1
        above = specific[built_from[-1]]
        if pool.score[kept] > pool.score[above]:
            pool.put(col.ROLLUP_FROM, kept, pool.score[kept])
            pool.rescore(kept, pool.score[above])
        moved += 1
    floor = min((pool.score[j] for j in specific), default=None)
    for j in extra:
        if floor is not None and pool.score[j] > floor:
            pool.put(col.ROLLUP_FROM, j, pool.score[j])
            pool.rescore(j, floor)
    pool.order = [*specific[:place], kept, *specific[place:], *rollups[1:], *tail]
    return moved
