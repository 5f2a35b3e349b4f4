"""For a question about the present, a newer statement of the same thing ranks above an older one.

"What is the rate limit of my API?" after "I set it to 100 requests a minute"
and, later, "I moved it to 120": both say the same thing about the same
subject and both match the question; the newer is what holds now. Extraction
links the two as versions when it recognises the change (the old one is then
not searched at all, and a turn all of whose memories were replaced ranks
last: ``superseded``); when it does not, nothing else says which is current.

So, when the query asks about the present (``QueryAnalysis.current_intent``:
a present-tense question or one asking for the latest, never a history
question), among the first ``window`` candidates, in rank order: a candidate
said later (``created_at``) than one ranked above it, whose vector is at least
``similarity`` alike (cosine) and whose score is at least ``ratio`` of that
one's (it answers the question nearly as well), moves to just above it, the
newest such first. It takes the score of the place it took (its own is kept
in ``newer_from``), so scores stay in rank order; the hits it passes each
move down one place. Consolidation summaries and syntheses, and turns already
marked superseded, are left where they are: a rollup is always newer than
what it restates.
"""

from __future__ import annotations

import numpy as np

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval.pool import Pool
from memstack.domain.retrieval.types import SearchRequest
from memstack.ports.store import MemoryStore


def order_newest_first(
    store: MemoryStore, req: SearchRequest, pool: Pool, *, window: int, similarity: float, ratio: float
) -> int:
    """Reorder ``pool.order``'s first ``window`` as the module says; returns how many hits moved up."""
    head = pool.order[:window]
    rollup = pool.facts.rollup
    rows = [j for j in head if pool.has_vector[j] and not pool.superseded[j] and not rollup[j]]
    if len(rows) < 2:
        return 0
    at = {j: r for r, j in enumerate(rows)}
    alike = pool.facts.vectors[rows] @ pool.facts.vectors[rows].T >= similarity
    # Only a candidate alike to another can move or be passed: only those need their record (its
    # time), and most queries have none (no record is read then).
    paired = (alike & ~np.eye(len(rows), dtype=bool)).any(axis=1)
    if not paired.any():
        return 0
    records = pool.records(store, req.tenant, req.user_id, [rows[r] for r in np.flatnonzero(paired).tolist()])
    movable = set(records)  # a record erased since the pool was read is gone, and stays where it is
    said = {j: records[j].created_at.timestamp() for j in movable}
    moved = 0
    p = 0
    while p < len(head):
        i = head[p]
        if i in movable:
            newer = [
                j
                for j in head[p + 1 :]
                if j in movable
                and said[j] > said[i]
                and alike[at[i], at[j]]
                and pool.score[j] >= ratio * pool.score[i]
            ]
            if newer:
                j = max(newer, key=lambda c: said[c])  # the newest; a tie keeps the ranking's order
                head.remove(j)
                head.insert(p, j)
                if pool.score[j] < pool.score[i]:
                    pool.put(col.NEWER_FROM, j, pool.score[j])
                    pool.rescore(j, pool.score[i])
                moved += 1
                continue  # the hit now at ``p`` may have a newer statement of its own below
        p += 1
    pool.order = [*head, *pool.order[window:]]
    return moved
