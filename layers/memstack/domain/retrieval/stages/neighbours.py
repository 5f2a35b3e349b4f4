"""Neighbour turns (stage 3, last): the turns said just before and after the first hits, as candidates.

Evidence is often a few turns in a row: "When did Melanie paint a sunrise?" is
answered by the turn after the one that shows the painting, a multi-hop question
by the same speaker's next turn, a BEAM question by the reply to the turn the
search found. Those turns share the hit's topic but seldom the question's
words, so neither the vector nor the BM25 stage ranks them. Each turn records
the turns around it in its add (``domain/adjacent.py``); the first
``neighbour_head`` turns of the plain fusion of stages 2 and 3 (their turn ranks,
the turn weights, ``RRF_K``) give theirs, within ``neighbour_span`` turns. Each
one the search's filters allow is ranked by its own cosine with the query, and
the ranking is fused with the others at ``weight_neighbours``: a neighbour about
the question gains a place, one that is not stays where its own evidence puts it.
It never ranks above the hit it was found through (``below_their_heads``): in a
small store, where every turn is in every ranking, the bonus alone lifted an
unrelated turn above the answer next to it.
Measured on LoCoMo and BEAM together in docs/retrieval.md, "Session 8: neighbour turns".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from memstack.domain import record_filter
from memstack.domain.adjacent import recorded
from memstack.domain.ingest import is_turn_id, stm_memory_id
from memstack.domain.retrieval.pool import full_vectors
from memstack.domain.retrieval.stage import Search
from memstack.models import MemoryFilters, Ranked, ScoredId
from memstack.ports.store import MemoryStore, TurnNeighbours, implements

#: the ranking's name in the fusion (``RetrievalConfig.field_weights``)
NEIGHBOURS = "neighbours"

#: turns of each ranking read for the head: the fifth best of the first 100 BM25 turns alone
#: (0.7 / (k + 5)) is far above anything a turn below both could have (1 / (k + 101))
_HEAD_DEPTH = 100


def runs_for(search: Search) -> bool:
    cfg = search.config
    return (
        cfg.weight_neighbours > 0
        and cfg.neighbour_head > 0
        and len(search.query_vec) > 0
        and bool(search.vector or search.bm25)
    )


def neighbour_ranking(search: Search) -> Sequence[ScoredId]:
    """The turns around the first hits that the filters allow, best cosine first (none: no ranking);
    each one's head turns are left on ``search.neighbour_heads``."""
    cfg, req, store = search.config, search.req, search.store
    head = head_turns(search)
    if not head:
        return []
    heads: dict[str, list[str]] = {}
    adjacent = _recorded_adjacent(store, req.tenant, req.user_id, head, cfg.neighbour_span)
    for head_id in head:
        for message_id in adjacent.get(head_id, ()):
            turn = stm_memory_id(req.tenant, req.user_id, message_id)
            if turn not in adjacent:
                heads.setdefault(turn, []).append(head_id)
    wanted = list(heads)
    if not wanted:
        return []
    ids, matrix, rows = _visible_vectors(store, req.tenant, req.user_id, wanted, search.filters)
    if not ids:
        return []
    search.neighbour_heads = {i: heads[i] for i in ids}
    scores = (matrix @ np.asarray(search.query_vec, dtype=np.float32)).astype(np.float64)
    order = np.argsort(-scores, kind="stable")
    return Ranked(
        [ids[i] for i in order.tolist()],
        scores[order],
        np.ones(len(ids), dtype=bool),
        rows[order] if rows is not None else None,
    )


def _recorded_adjacent(
    store: MemoryStore, tenant: str, user_id: str, head: list[str], span: int
) -> dict[str, list[str]]:
    """For each head turn the store holds: the message ids recorded around it within ``span``."""
    if implements(store, TurnNeighbours):
        return cast(TurnNeighbours, store).recorded_adjacent(tenant, user_id, head, span)
    records = store.get_many(tenant, user_id, head)
    return {i: recorded(records[i].metadata, span) for i in head if i in records}


def _visible_vectors(
    store: MemoryStore, tenant: str, user_id: str, wanted: list[str], filters: MemoryFilters
) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """Those of ``wanted`` the filters let a search see that have a full vector, their vectors, and
    the store's rows of them when it has rows (``models.Ranked.rows``)."""
    if implements(store, TurnNeighbours):
        return cast(TurnNeighbours, store).visible_vectors(tenant, user_id, wanted, filters)
    found = store.get_many(tenant, user_id, wanted)
    allowed = [i for i in wanted if i in found and record_filter.matches(found[i], filters, search=True)]
    if not allowed:
        return [], np.zeros((0, 1), np.float32), None
    ids, matrix, _ = full_vectors(store, tenant, user_id, allowed)
    return ids, matrix, None


def head_turns(search: Search) -> list[str]:
    """The first ``neighbour_head`` turns by the weighted RRF of the vector and BM25 stages' turn ranks."""
    cfg = search.config
    value: dict[str, float] = {}
    for ranking, weight in ((search.vector, cfg.weight_vector), (search.bm25, cfg.weight_bm25)):
        if weight <= 0 or not ranking:
            continue
        for rank, turn in enumerate(_turns(ranking), start=1):
            value[turn] = value.get(turn, 0.0) + weight / (cfg.rrf_k + rank)
    # sorted is stable: a tie keeps the order first met (the vector ranking's first)
    return sorted(value, key=value.__getitem__, reverse=True)[: cfg.neighbour_head]


def _turns(ranking: Sequence[ScoredId]) -> list[str]:
    """The ranking's raw turns, in its order."""
    if isinstance(ranking, Ranked):
        ids = ranking.ids
        turn = ranking.turn if ranking.turn is not None else np.fromiter(map(is_turn_id, ids), dtype=bool)
        return [ids[j] for j in np.flatnonzero(turn)[:_HEAD_DEPTH].tolist()]
    return [h.id for h in ranking if is_turn_id(h.id)][:_HEAD_DEPTH]


def below_their_heads(
    ids: list[str], unit: np.ndarray, fused: np.ndarray, value: np.ndarray, heads: dict[str, list[str]]
) -> np.ndarray:
    """``value`` (per pool row) with each neighbour turn kept just below the best unit it was found
    through (``fused``: per unit, the value its best member carries); unchanged when none rose above."""
    row = {i: j for j, i in enumerate(ids)}
    out = value
    for turn, found_by in heads.items():
        j = row.get(turn)
        limits = [float(fused[unit[row[h]]]) for h in found_by if h in row]
        if j is None or not limits:
            continue
        limit = max(limits)
        if out[j] >= limit:
            if out is value:
                out = value.copy()
            out[j] = limit * (1.0 - _BELOW)
    return out


#: how far below its head a neighbour that rose above it is kept (relative): a place, not a score
_BELOW = 1e-9
