"""Contradictions in a search answer: a hit that contradicts a current memory comes with it.

Extraction links two current memories that disagree when nothing says which is
right (``ExtractionOp`` CONFLICT: "I have never written a Flask route" and "I
implemented the login route in Flask"); each names the other in
``conflicts_with``. A search that finds one of them answers with both, the
other right after it and at its score, each hit's ``conflicts_with`` naming
the counterparts shown, so the agent can ask the user instead of guessing
which one holds.

A link names the versions that disagreed: once either is replaced or deleted
(a later statement settled it) the pair is no longer shown. A counterpart the
search's filters would not show (another session's context memory, another
kind, category, time range, metadata, or an expired one) is not added either.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from memstack.domain import expiry, record_filter
from memstack.domain.retrieval.types import SearchHit
from memstack.models import MemoryFilters, MemoryRecord, Tier
from memstack.ports.store import MemoryStore


def shown_by(filters: MemoryFilters, record: MemoryRecord, now: datetime) -> bool:
    """Whether a search with ``filters`` may show ``record`` (current, live, long-term, matching)."""
    if not record.is_current or record.tier != Tier.LTM or expiry.expired(record, now):
        return False
    return record_filter.matches(record, filters, search=True)


def with_counterparts(
    store: MemoryStore,
    tenant: str,
    user_id: str,
    filters: MemoryFilters,
    hits: list[SearchHit],
    now: datetime,
) -> list[SearchHit]:
    """``hits``, each current hit followed by its live counterparts; every link pruned to what is live."""
    wanted = {i for h in hits if not h.superseded for i in h.record.conflicts_with}
    if not wanted:
        return hits
    found = store.get_many(tenant, user_id, sorted(wanted))
    live = {i: r for i, r in found.items() if shown_by(filters, r, now)}
    placed = {h.record.id for h in hits}
    out: list[SearchHit] = []
    for hit in hits:
        if hit.superseded or not hit.record.conflicts_with:
            out.append(hit)
            continue
        others = [i for i in hit.record.conflicts_with if i in live]
        out.append(dataclasses.replace(hit, record=hit.record.model_copy(update={"conflicts_with": others})))
        for other in others:
            if other in placed:
                continue
            placed.add(other)
            counterpart = live[other]
            # The counterpart names the hit back (its own links may not all be live).
            links = [i for i in counterpart.conflicts_with if i in live or i == hit.record.id]
            if hit.record.id not in links:
                links.append(hit.record.id)
            out.append(
                SearchHit(record=counterpart.model_copy(update={"conflicts_with": links}), score=hit.score)
            )
    return out
