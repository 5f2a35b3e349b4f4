"""Consolidation's summaries and syntheses ("rollups") never push specific evidence out of the answers.

A rollup (an LTM record whose ``metadata.consolidation`` is a summary of up
to 20 turns or a synthesis of several summaries and memories) restates
what its sources say, in general terms; it matches many queries a little and
would otherwise take the places of the specific turns and memories that answer
them (issue 21 item 8: LoCoMo dev @10 0.797 → 0.521 with consolidation). So,
among the first ``window`` candidates:

* at most one rollup stays where it ranked; the others move below every
  specific candidate (still there when nothing else is);
* the one kept stays there when the search found none of the candidates it
  was built from (a raw turn it cites, a memory whose newest source it
  cites): it is then the best evidence there is (its turns expired, say);
* when the search found some, the rollup never ranks above them: it moves
  right after the last of them, taking that one's score, if every turn it
  cites is cited by a hit above that place (it restates them together and
  brings no turn of its own); otherwise it moves below every specific
  candidate, taking the lowest of their scores. Its other cited turns, up to
  20, would take the places of the evidence after it: on LoCoMo dev the
  rollups in the first 10 cited 100 turns no earlier hit cited, none of them
  evidence (session 7; until then it always stayed right after its sources).
  Scores stay in rank order either way.

Profiles (one memory per person and category, off by default) are placed the
same way, in a pass of their own (``marks``): a profile lists up to 12
memories and cites every turn they came from, so where it ranked it took
those turns' places too. Left where they ranked (until session 8), they took
LoCoMo dev with consolidation from 0.711 / 0.806 / 0.884 (@5 / @10 / @25, the
same store without its profiles) to 0.623 / 0.739 / 0.868: 453 of 997
questions had one in their first 10 results, holding 2.9 of the first 10 turn
places on average.
"""

from __future__ import annotations

import numpy as np

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval.pool import Pool
from memstack.domain.retrieval.types import SearchRequest
from memstack.ports.store import MemoryStore


def place_rollups(
    store: MemoryStore, req: SearchRequest, pool: Pool, *, window: int, marks: np.ndarray | None = None
) -> int:
    """Reorder ``pool.order`` as the module says; returns how many rollups it ranked lower.

    ``marks``: which candidates to place (a bool column of ``pool.facts``; the rollups by default).
    """
    marks = pool.facts.rollup if marks is None else marks
    head, tail = pool.order[:window], pool.order[window:]
    ltm = [j for j in head if not pool.stm[j]]
    if not ltm:
        return 0
    # The candidates say which are rollups (``Candidates.rollup``): records are read only when some are.
    marked = [j for j in ltm if marks[j]]
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
    lower = list(extra)
    if built_from:
        after = max(place, built_from[-1] + 1)  # right after the last of its sources found
        if cited <= {pool.facts.last_source[j] for j in specific[:after]}:
            # It restates what the hits above it cite, together: one slot, no turn of its own.
            if after > place:
                above = specific[after - 1]
                if pool.score[kept] > pool.score[above]:
                    pool.put(col.ROLLUP_FROM, kept, pool.score[kept])
                    pool.rescore(kept, pool.score[above])
                moved += 1
            place = after
        elif place < len(specific):
            place = len(specific)
            lower.append(kept)
            moved += 1
    floor = min((pool.score[j] for j in specific), default=None)
    for j in lower:
        if floor is not None and pool.score[j] > floor:
            pool.put(col.ROLLUP_FROM, j, pool.score[j])
            pool.rescore(j, floor)
    pool.order = [*specific[:place], kept, *specific[place:], *rollups[1:], *tail]
    return moved
