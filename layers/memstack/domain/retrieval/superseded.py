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

Ranking: for a question about the present (``QueryAnalysis.current_intent``),
superseded turns move below every current hit (their order among themselves
kept). For any other question (not history) the old statement may be just
what is asked ("how much did I cut my solving time between those two
sessions?" after a later update of the same memory): a superseded turn keeps
its place unless a hit above it already cites it (the updated memory lists
its older sources), when it would spend a slot on evidence the caller already
has and moves down as before (``scope`` ``"current"``; ``"all"`` moves every
one down, whatever the question). A history query marks them and leaves them
where they ranked. One read (``derived``) for all the raw turns among the
first ``window`` hits, filtered by tenant and user like every store read.
"""

from __future__ import annotations

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval.pool import Pool, derivations
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import MemoryRecord, Tier
from memstack.ports.store import Derived, MemoryStore


def is_outdated(ltm: list[Derived]) -> bool:
    """Whether the memories made from one turn (``Derived`` of each) have all been replaced or deleted."""
    if not ltm:
        return False
    ids = {r.id for r in ltm}
    # A current version that replaced one made from this turn too only inherited the turn.
    return all(not r.is_current or r.replaces_id in ids for r in ltm)


def is_superseded_turn(derived: list[MemoryRecord], message_id: str) -> bool:
    """Whether every LTM memory made from ``message_id`` has been replaced or deleted since."""
    return is_outdated(
        [
            Derived(r.id, r.replaces_id, r.is_current)
            for r in derived
            if r.tier == Tier.LTM and message_id in r.source_ids
        ]
    )


def mark_superseded_turns(
    store: MemoryStore, req: SearchRequest, pool: Pool, *, window: int, demote: bool, every: bool = True
) -> int:
    """Mark the superseded raw turns among the pool's first ``window``; returns how many it marked.

    With ``demote``, they move below the current hits: all of them (``every``), or only those a
    hit above already cites."""
    head, tail = pool.order[:window], pool.order[window:]
    # Outdated needs a replaced or deleted memory: a user with none has no outdated turn.
    turns = [j for j in head if pool.stm[j] and pool.n_sources[j] == 1] if pool.facts.replaced_ltm else []
    sources = {j: pool.facts.last_source[j] or "" for j in turns}
    made = derivations(store, req.tenant, req.user_id, list(dict.fromkeys(sources.values())))
    for j in turns:
        if is_outdated(made.get(sources[j], [])):
            pool.superseded[j] = True
            pool.put(col.SUPERSEDED_TURN, j, 1.0)
    stale = [j for j in head if pool.superseded[j]]
    marked = len(stale)
    if not every and stale:
        stale = _cited_above(store, req, pool, head, stale, sources)
    if not demote or not stale:
        return marked
    moved = set(stale)
    current = [j for j in head if j not in moved]
    floor = min((pool.score[j] for j in current), default=None)
    for j in stale:
        if floor is not None and pool.score[j] > floor:
            # Keep scores in rank order: the turn scores no better than the last current hit.
            pool.put(col.SUPERSEDED_FROM, j, pool.score[j])
            pool.rescore(j, floor)
    pool.order = current + stale + tail
    return marked


def _cited_above(
    store: MemoryStore,
    req: SearchRequest,
    pool: Pool,
    head: list[int],
    stale: list[int],
    sources: dict[int, str],
) -> list[int]:
    """The turns of ``stale`` whose message a hit ranked above them already cites."""
    first = head.index(stale[-1])
    above = head[:first]
    # A memory made from several turns (an update) cites the older ones too: read those records.
    several = [j for j in above if not pool.stm[j] and pool.n_sources[j] > 1]
    records = pool.records(store, req.tenant, req.user_id, several) if several else {}
    cited: set[str] = set()
    out: list[int] = []
    wanted = set(stale)
    for j in head[: first + 1]:
        if j in wanted and sources[j] in cited:
            out.append(j)
        record = records.get(j)
        if record is not None:
            cited.update(record.source_ids)
        elif pool.facts.last_source[j]:
            cited.add(pool.facts.last_source[j] or "")
    return out
