"""Stage 8: the hits returned, with superseded turns ranked last and, for history queries, version chains.

Raw turns whose memories were all replaced say so and rank below what is
current (``superseded``); only now are records read, for the hits returned,
not for the whole pool.
"""

from __future__ import annotations

from memstack.domain import versions
from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval.newest_first import order_newest_first
from memstack.domain.retrieval.rollups import place_rollups
from memstack.domain.retrieval.stage import Search
from memstack.domain.retrieval.superseded import mark_superseded_turns
from memstack.domain.retrieval.types import SearchHit, SearchRequest
from memstack.ports.store import MemoryStore


class History:
    name = "history"

    def run(self, search: Search) -> str:
        cfg, req, pool = search.config, search.req, search.pool
        stale = mark_superseded_turns(
            search.store,
            req,
            pool,
            window=2 * req.top_k,
            demote=cfg.superseded_turns_last and not search.history,
            every=cfg.superseded_turns_scope == "all" or search.query.current_intent,
        )
        newer = 0
        if cfg.newest_first and search.query.current_intent:
            newer = order_newest_first(
                search.store,
                req,
                pool,
                window=2 * req.top_k,
                similarity=cfg.newest_first_similarity,
                ratio=cfg.newest_first_ratio,
            )
        rollups = place_rollups(search.store, req, pool, window=2 * req.top_k)
        # Profiles apart: one may stay where it ranked beside the one summary or synthesis that may.
        rollups += place_rollups(search.store, req, pool, window=2 * req.top_k, marks=pool.facts.profile)
        rows = pool.order
        if req.min_score is not None:
            rows = [j for j in rows if pool.score[j] >= req.min_score]
        hits = pool.hits(search.store, req.tenant, req.user_id, rows[: req.top_k])
        if search.history:
            search.hits = expand_history(search.store, req, hits, cfg.history_max_versions)[: req.top_k]
            return "ok: version chains expanded"
        search.hits = hits
        if newer:
            return f"ok: {stale} superseded turns ranked last, {newer} newer statements ranked first"
        if rollups:
            return f"ok: {stale} superseded turns ranked last, {rollups} summaries below their evidence"
        if stale:
            return f"ok: {stale} superseded turns ranked below current memories"
        return "skipped: current versions only"


def expand_history(
    store: MemoryStore, req: SearchRequest, hits: list[SearchHit], max_versions: int
) -> list[SearchHit]:
    """Each hit's version chain, oldest first, older versions marked ``superseded``.

    A chain appears once, where its best hit ranked; tombstones are left out
    (they hold no content), a chain that ends in one (a deleted memory) is left
    out whole, and so is anything outside the caller's filters' tenant and
    user (the store reads are scoped by both).
    """
    out: list[SearchHit] = []
    seen: set[str] = set()
    # Every hit's chain walked at once (a read per step, not one per hit; the hits are the
    # user's own records); a hit met in an earlier hit's chain is then skipped, as before.
    chains = versions.histories(store, req.tenant, req.user_id, [h.record for h in hits])
    for hit, chain in zip(hits, chains, strict=True):
        if hit.record.id in seen:
            continue
        seen.update(r.id for r in chain)
        if chain[-1].deleted:
            continue  # a deleted memory: none of its versions is ever a result
        shown = [r for r in chain if not r.deleted][-max_versions:]
        if len(shown) <= 1:
            out.append(hit)
            continue
        for record in shown:
            is_hit = record.id == hit.record.id
            entry = hit if is_hit else SearchHit(record=record, score=hit.score, stages={})
            entry.superseded = not record.is_current
            entry.stages[col.HISTORY_VERSION] = float(record.version)
            out.append(entry)
    return out
