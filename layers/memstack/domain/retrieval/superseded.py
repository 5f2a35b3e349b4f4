"""Raw turns that say something no longer true: marked ``superseded`` and ranked below what is current.

A raw turn (tier stm) is superseded when extraction made memories of it and
every one of them has since been replaced or deleted by a later message:
"I live in Tokyo" after "I moved to Osaka" made the Tokyo memory version 1 of
a chain whose current version came from the Osaka turn.

A turn still *backs* a memory when a current record lists the turn as one of
its own sources, not one it inherited from the version it replaced (an
UPDATE's new version lists the old sources too, so provenance stays whole).
The turn that made a tombstone backs it: "I don't have a dog anymore" is
current, the turn "I have a dog" is not. A turn nothing was extracted from
(``infer=false``, small talk) is never marked: nothing says it is outdated.

Ranking: superseded turns move below every current hit (their order among
themselves kept), unless the query asks for history, where they are marked and
left where they ranked. One ``find_by_source`` read per raw turn among the first
``window`` hits, each filtered by tenant and user like every store read.
"""

from __future__ import annotations

from memstack.domain.retrieval.types import SearchHit, SearchRequest
from memstack.models import MemoryRecord, Tier
from memstack.ports.store import MemoryStore


def is_superseded_turn(derived: list[MemoryRecord], message_id: str) -> bool:
    """Whether every LTM memory made from ``message_id`` has been replaced or deleted since."""
    ltm = [r for r in derived if r.tier == Tier.LTM and message_id in r.source_ids]
    if not ltm:
        return False
    ids = {r.id for r in ltm}
    for r in ltm:
        inherited = r.replaces_id in ids  # the version it replaced came from this turn too
        if r.is_current and not inherited:
            return False
    return True


def mark_superseded_turns(
    store: MemoryStore, req: SearchRequest, hits: list[SearchHit], *, window: int, demote: bool
) -> tuple[list[SearchHit], int]:
    """Mark the superseded raw turns among the first ``window`` hits; returns (hits, how many marked)."""
    marked = 0
    for hit in hits[:window]:
        record = hit.record
        if record.tier != Tier.STM or len(record.source_ids) != 1:
            continue
        derived = store.find_by_source(req.tenant, req.user_id, record.source_ids[0])
        if is_superseded_turn(derived, record.source_ids[0]):
            hit.superseded = True
            hit.stages["superseded_turn"] = 1.0
            marked += 1
    if not demote or not marked:
        return hits, marked
    head, tail = hits[:window], hits[window:]
    current = [h for h in head if not h.superseded]
    stale = [h for h in head if h.superseded]
    floor = min((h.score for h in current), default=None)
    for h in stale:
        if floor is not None and h.score > floor:
            # Keep scores in rank order: the turn scores no better than the last current hit.
            h.stages["superseded_from"] = h.score
            h.score = floor
            h.stages["score"] = floor
    return current + stale + tail, marked
