"""Stage 4: weighted RRF over evidence units (``units``) orders the pool; scores are probabilities.

The best candidates by their own fusion are read as columns (``Pool``),
grouped into units and fused per unit; a unit's value goes to its best member,
the others keep their own (``units.member_values``), so each hit has its own
score and a slot goes to new evidence; the score of each is the calibrated
model's probability of relevance (``calibration.ScoreModel``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress, repeat

import numpy as np

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval import units
from memstack.domain.retrieval.calibration import coverage
from memstack.domain.retrieval.pool import Pool, read_candidates
from memstack.domain.retrieval.stage import Search
from memstack.domain.retrieval.stages import dense_feedback
from memstack.domain.retrieval.stages.dense_feedback import VECTOR_PRF
from memstack.domain.text import index_terms, query_index_terms
from memstack.models import Ranked, ScoredId

#: how often the pool is picked again, each time without the further rollups it found
_POOL_PASSES = 3

#: the place a query's first result is compared with (the margins of ``_query_signals``)
MARGIN_RANK = 10

#: each ranking fused, with its rank column and its raw-score column (the feedback query shows only its rank)
RANKINGS = {
    "vector": (col.VECTOR_RANK, col.VECTOR),
    "bm25": (col.BM25_RANK, col.BM25),
    "bm25_prf": (col.BM25_PRF_RANK, None),
    VECTOR_PRF: (col.VECTOR_PRF_RANK, None),
}


class Fusion:
    name = "fusion"

    def run(self, search: Search) -> str:
        cfg, req = search.config, search.req
        pool, fusion = _pool(search)
        search.pool = pool
        n = len(pool)
        weights = {
            "vector": cfg.weight_vector,
            "bm25": cfg.weight_bm25,
            "bm25_prf": cfg.weight_prf,
            VECTOR_PRF: cfg.weight_vector_prf,
        }
        # First place in the vector and BM25 rankings (and the feedback ones, when they ran)
        # scales to 1. A query no word of which matches anything has no BM25 ranking:
        # its best result then scales to the vector weight alone, and scores low. Dense feedback
        # that only fills the places below the plain fusion's first ones (``vector_prf_after``)
        # leaves them their plain values: it adds nothing to the scale either.
        dense = bool(search.vector_prf) and cfg.vector_prf_after == 0
        feedback = (*(("bm25_prf",) if search.prf else ()), *((VECTOR_PRF,) if dense else ()))
        ran = ("vector", "bm25", *feedback)  # a tuple: one summation order
        top = sum(weights[name] for name in ran) / (cfg.rrf_k + 1)
        # -1: a rollup set aside (``_pool``), in no ranking the fusion read
        rows = np.fromiter(map(fusion.ranks.row.get, pool.ids, repeat(-1)), dtype=np.int64, count=n)
        ranked = rows >= 0
        # Each column whole, as arrays, in the order explain shows them (NaN: not in that ranking);
        # only the hits returned read theirs out (``Pool.hits``).
        for name, (rank_name, raw_name) in RANKINGS.items():
            places = np.where(ranked, fusion.ranks.places[name][rows], 0)
            found = places > 0
            pool.column(rank_name)[found] = places[found]
            if raw_name is not None:
                pool.column(raw_name)[found] = fusion.ranks.scores[name][rows][found]
        facts = pool.facts
        cosines = np.zeros(n)
        if n:  # float32 products read as float64: the values the per-candidate floats had
            cosines = np.where(facts.has_vector, (facts.vectors @ search.query_vec).astype(np.float64), 0.0)
        pool.column(col.COSINE)[:] = cosines
        # Coverage reads every pooled text: only when it counts, or when explain asks for it.
        model = cfg.score_model
        coverages = np.zeros(n)
        if bool(model.coverage or model.result_coverage) or req.explain:
            query_terms = query_index_terms(req.query)
            texts = pool.records(search.store, req.tenant, req.user_id, range(n))
            coverage_col = pool.column(col.COVERAGE)
            for j, record in texts.items():
                coverages[j] = coverage_col[j] = coverage(query_terms, index_terms(record.indexed_text))
        # Computed when it counts, or when explain asks for every signal.
        category = np.zeros(n)
        with_vectors = np.flatnonzero(facts.has_vector)
        if (model.category or req.explain) and len(with_vectors):
            prototypes = search.models.categories
            p_category = prototypes.query_weights(search.query_vec)
            category[with_vectors] = prototypes.affinity(p_category, facts.vectors[with_vectors])
            pool.column(col.CATEGORY)[:] = category
        rrf = np.fromiter(map(fusion.value.__getitem__, pool.ids), dtype=np.float64, count=n)
        pool.column(col.RRF)[:] = rrf
        pool.column(col.UNIT_RRF)[:] = list(map(fusion.fused.__getitem__, fusion.unit_of))
        pool.column(col.RECORD_RRF)[:] = list(map(fusion.own.__getitem__, pool.ids))
        pool.column(col.UNIT_SIZE)[:] = [len(fusion.members[key]) for key in fusion.unit_of]
        scaled = rrf / top if top > 0 else np.zeros(n)
        pool.column(col.RRF_SCALED)[:] = scaled
        # What the query found at all: the same for each of its results.
        best_cosine = float(cosines.max()) if n else 0.0
        best_coverage = float(coverages.max()) if n else 0.0
        pool.column(col.QUERY_COSINE)[:] = best_cosine
        pool.column(col.QUERY_COVERAGE)[:] = best_coverage
        signals = _query_signals(search, cosines, facts.stm)
        if n:
            search.evidence_cosine = signals[col.QUERY_TURN_COSINE] if facts.stm.any() else best_cosine
        for name, value in signals.items():
            pool.column(name)[:] = value
        pool.score = model.probabilities(scaled, best_cosine, best_coverage, category, cosines, coverages)
        pool.column(col.FUSED)[:] = pool.score
        pool.ranked(self.name)
        return f"ok: {fusion.candidates} fused, {n} carried on in {len(fusion.members)} units"


def _query_signals(search: Search, cosines: np.ndarray, stm: np.ndarray) -> dict[str, float]:
    """What the query found at all, the same for each of its results: the vector stage's margin of
    its first cosine over its tenth, the best cosine of a pooled raw turn, the BM25 stage's first
    score and its margin over the tenth (as a share of the first; 0 without a BM25 match)."""
    _, vector_margin = _first_and_margin(search.vector)
    bm25_first, bm25_margin = _first_and_margin(search.bm25)
    return {
        col.QUERY_COSINE_MARGIN: vector_margin,
        col.QUERY_TURN_COSINE: float(cosines[stm].max()) if stm.any() else 0.0,
        col.QUERY_BM25_TOP: bm25_first,
        col.QUERY_BM25_MARGIN: bm25_margin / bm25_first if bm25_first else 0.0,
    }


def _first_and_margin(ranking: Sequence[ScoredId]) -> tuple[float, float]:
    """A ranking's first score and how far it stands above the ``MARGIN_RANK``-th (or the last); 0, 0
    when empty. Only these two entries are read (a ``models.Ranked`` makes an object per entry read)."""
    if not ranking:
        return 0.0, 0.0
    first = ranking[0].score
    return first, first - ranking[min(MARGIN_RANK, len(ranking)) - 1].score


@dataclass
class _Units:
    """The fusion: the candidates' ranks, how many were fused, each pooled one's own, its unit (per
    pool row), each unit's members and fusion, and the value each is scored by (``units.member_values``)."""

    ranks: units.FieldRanks
    candidates: int
    own: dict[str, float]
    unit_of: list[str]
    members: dict[str, list[str]]
    fused: dict[str, float]
    value: dict[str, float]


def _pool(search: Search) -> tuple[Pool, _Units]:
    """The best candidates by their own fusion, read as columns, grouped into units and fused per unit.

    Consolidation's summaries and syntheses (``Candidates.rollup``) restate many
    turns in general terms and match many queries a little: in the rankings they
    would take the places of the evidence they were built from. So the pool is
    picked again without them: only the best of them (by its own fusion) keeps
    its ranks, as a unit of its own weighed as a memory's second view of its
    turns; the others join the pool with no fusion
    value (below the evidence, still there when nothing else is), and stage 8
    (``rollups``) places them among the hits.
    """
    cfg, req = search.config, search.req
    rankings = _rankings(search)
    size = max(cfg.candidate_pool, req.top_k)
    kept: str | None = None
    aside: list[str] = []  # the further rollups, best first
    for _ in range(_POOL_PASSES):
        ranks = units.field_ranks(rankings)
        own_of, met = units.record_rrf(ranks, cfg.field_weights, cfg.rrf_k)
        # Best first; a tie keeps the order the fusion met the candidates in.
        best = met[np.argsort(-own_of[met], kind="stable")][:size]
        pool_ids = list(map(ranks.ids.__getitem__, best.tolist()))
        own = dict(zip(pool_ids, own_of[best].tolist(), strict=True))
        pool_ids += aside
        facts, records = read_candidates(search.store, req.tenant, req.user_id, pool_ids, search.vectors)
        if not facts.rollup.any():  # most users: nothing consolidated
            break
        known = {kept, *aside}
        rollups = list(compress(facts.ids, facts.rollup.tolist()))
        found = [i for i in rollups if i not in known]
        if kept is None and found:
            kept, found = found[0], found[1:]  # the pool lists the best first
        if not found:
            break
        aside += found
        out = set(aside)
        rankings = {name: _without(ranking, out) for name, ranking in rankings.items()}
    own.update((i, 0.0) for i in aside)
    pool = Pool(facts, records)
    # A turn is its own unit, and so is a rollup: joined to a turn it cites, it would take that
    # turn's evidence. A memory joins its newest source's turn.
    memories = np.flatnonzero(~(facts.stm | facts.rollup)).tolist()
    unit_of = list(pool.ids)
    for j in memories:
        unit_of[j] = units.unit_key_of(req.tenant, req.user_id, pool.ids[j], False, facts.last_source[j])
    members: dict[str, list[str]] = {}
    for i, key in zip(pool.ids, unit_of, strict=True):
        members.setdefault(key, []).append(i)
    candidate_turns = set(compress(ranks.ids, ranks.is_turn.tolist()))
    sources = _source_turns(search, pool, unit_of, memories)
    # The rollup kept restates turns: its ranks count with a memory's weights (a second view of
    # evidence), never with a turn's, as if it were all the evidence there is.
    seconds = candidate_turns | {kept} if kept is not None else candidate_turns
    fused = units.unit_rrf(members, seconds, ranks, cfg.field_weights, cfg.rrf_k, sources)
    # A unit's best member at the unit's value, its other members by their own evidence.
    value = units.member_values(members, own, fused)
    if search.vector_prf and cfg.vector_prf_after > 0:
        # Dense feedback fills the places below the first ``vector_prf_after``: those are the plain fusion's.
        plain = cfg.field_weights.without(VECTOR_PRF)
        plain_of, _ = units.record_rrf(ranks, plain, cfg.rrf_k)
        plain_own = {i: float(plain_of[ranks.row[i]]) if i in ranks.row else 0.0 for i in pool.ids}
        plain_fused = units.unit_rrf(members, seconds, ranks, plain, cfg.rrf_k, sources)
        value = dense_feedback.below_head(
            units.member_values(members, plain_own, plain_fused), value, cfg.vector_prf_after
        )
    n = len(pool)
    by_value = np.fromiter(map(value.__getitem__, pool.ids), dtype=np.float64, count=n)
    by_own = np.fromiter(map(own.__getitem__, pool.ids), dtype=np.float64, count=n)
    # Best value first, then best own fusion; a tie keeps the pool's order (lexsort is stable).
    pool.order = np.lexsort((-by_own, -by_value)).tolist()
    return pool, _Units(ranks, len(met), own=own, unit_of=unit_of, members=members, fused=fused, value=value)


def _rankings(search: Search) -> dict[str, Sequence[ScoredId]]:
    """Every ranking the fusion reads, by name: stages 2 and 3 (BM25, its feedback query, dense feedback)."""
    return {
        "vector": search.vector,
        "bm25": search.bm25,
        "bm25_prf": search.prf,
        VECTOR_PRF: search.vector_prf,
    }


def _without(ranking: Sequence[ScoredId], out: set[str]) -> Sequence[ScoredId]:
    """``ranking`` without the ids in ``out`` (a ``Ranked`` stays columns)."""
    if isinstance(ranking, Ranked):
        keep = np.fromiter((i not in out for i in ranking.ids), dtype=bool, count=len(ranking))
        turn = ranking.turn[keep] if ranking.turn is not None else None
        return Ranked(
            [i for i, k in zip(ranking.ids, keep.tolist(), strict=True) if k], ranking.scores[keep], turn
        )
    return [c for c in ranking if c.id not in out]


def _source_turns(search: Search, pool: Pool, unit_of: list[str], memories: list[int]) -> dict[str, set[str]]:
    """Per unit, the turns of every source of its memories (``units.source_turns``); ``memories``: the
    pool's rows that are memories (not turns, not rollups: a rollup's sources are not its words, it
    scores by its own ranks).

    The index holds each memory's newest source; a memory made from several
    turns (an update) is read for the older ones, and kept for the hits.
    """
    req, last_source = search.req, pool.facts.last_source
    updated = [j for j in memories if pool.n_sources[j] > 1]
    records = pool.records(search.store, req.tenant, req.user_id, updated) if updated else {}
    sources: dict[str, set[str]] = {}
    for j in memories:
        newest = last_source[j]
        if newest is None:
            continue
        record = records.get(j)
        ids = record.source_ids if record is not None else [newest]
        sources.setdefault(unit_of[j], set()).update(units.source_turns_of(req.tenant, req.user_id, ids))
    return sources
