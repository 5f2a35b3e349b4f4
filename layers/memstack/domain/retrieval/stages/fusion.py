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
from itertools import compress

import numpy as np

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval import credit, hybrid, units
from memstack.domain.retrieval.calibration import coverage
from memstack.domain.retrieval.pool import Pool, read_candidates
from memstack.domain.retrieval.stage import Search
from memstack.domain.retrieval.stages import dense_feedback, neighbours
from memstack.domain.retrieval.stages.dense_feedback import VECTOR_PRF
from memstack.domain.retrieval.stages.neighbours import NEIGHBOURS
from memstack.domain.text import index_terms, query_index_terms
from memstack.models import Ranked, ScoredId
from memstack.ports.store import Candidates

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
    NEIGHBOURS: (col.NEIGHBOUR_RANK, None),
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
            NEIGHBOURS: cfg.weight_neighbours,
        }
        # First place in the vector and BM25 rankings (and the feedback ones, when they ran)
        # scales to 1. A query no word of which matches anything has no BM25 ranking:
        # its best result then scales to the vector weight alone, and scores low. Dense feedback
        # that only fills the places below the plain fusion's first ones (``vector_prf_after``)
        # leaves them their plain values: it adds nothing to the scale either. Nor do the
        # neighbour turns (never the first hits, whose neighbours they are): counted in the scale,
        # they lowered every score of a search that had some (BEAM's median top score 0.47 -> 0.23),
        # and the calibration would no longer hold.
        dense = bool(search.vector_prf) and cfg.vector_prf_after == 0
        feedback = (*(("bm25_prf",) if search.prf else ()), *((VECTOR_PRF,) if dense else ()))
        ran = ("vector", "bm25", *feedback)  # a tuple: one summation order
        top = sum(weights[name] for name in ran) / (cfg.rrf_k + 1)
        # -1: a rollup set aside (``_pool``), in no ranking the fusion read
        rows = fusion.rows
        ranked = rows >= 0
        every_ranked = bool(ranked.all())  # usually: no rollup set aside
        # Each column whole, as arrays, in the order explain shows them (NaN: not in that ranking);
        # only the hits returned read theirs out (``Pool.hits``).
        for name, (rank_name, raw_name) in RANKINGS.items():
            if not len(fusion.ranks.at[name]):  # a ranking that found nothing (or did not run) sets none
                continue
            at_rows = fusion.ranks.places[name][rows]
            places = at_rows if every_ranked else np.where(ranked, at_rows, 0)
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
        rrf = fusion.value
        pool.column(col.RRF)[:] = rrf
        pool.column(col.UNIT_RRF)[:] = fusion.fused[fusion.unit]
        pool.column(col.RECORD_RRF)[:] = fusion.own
        # as many units as candidates: each unit one candidate (a unit is made for a member)
        one_each = len(fusion.fused) == n
        pool.column(col.UNIT_SIZE)[:] = (
            1.0 if one_each else np.bincount(fusion.unit, minlength=len(fusion.fused))[fusion.unit]
        )
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
        return f"ok: {fusion.candidates} fused, {n} carried on in {len(fusion.fused)} units"


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
    """The fusion, per pooled candidate (pool row): its row in ``ranks`` (-1: a rollup set aside),
    its own fusion, its unit, and the value it is scored by (``units.member_values_of_rows``); per
    unit, its fusion; and how many candidates were fused."""

    ranks: units.FieldRanks
    candidates: int
    rows: np.ndarray
    own: np.ndarray
    unit: np.ndarray
    fused: np.ndarray
    value: np.ndarray


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
    both: set[str] = set()  # memories without a source turn, standing among the turns too
    for _ in range(_POOL_PASSES):
        ranks = _credited(search, units.field_ranks(rankings, both))
        own_of, met = units.record_rrf(ranks, cfg.field_weights, cfg.rrf_k)
        # Best first; a tie keeps the order the fusion met the candidates in.
        best = met[np.argsort(-own_of[met], kind="stable")][:size]
        pool_ids = list(map(ranks.ids.__getitem__, best.tolist()))
        # the store's own rows of them too, when its rankings gave them (and no rollup is set aside)
        store_rows = ranks.store_rows[best] if ranks.store_rows is not None and not aside else None
        pool_ids += aside
        facts, records = read_candidates(
            search.store, req.tenant, req.user_id, pool_ids, search.vectors, store_rows
        )
        more = _sourceless(facts) - both if cfg.sourceless_as_turns else set()
        both |= more
        if not facts.rollup.any():  # most users: nothing consolidated
            if more:  # fuse again with them among the turns
                continue
            break
        known = {kept, *aside}
        rollups = list(compress(facts.ids, facts.rollup.tolist()))
        found = [i for i in rollups if i not in known]
        if kept is None and found:
            kept, found = found[0], found[1:]  # the pool lists the best first
        if not found and not more:
            break
        aside += found
        out = set(aside)
        rankings = {name: _without(ranking, out) for name, ranking in rankings.items()}
    pool = Pool(facts, records)
    n = len(pool)
    rows = _rows_of(pool.ids, pool_ids, best)
    held = rows >= 0
    own = np.zeros(n)  # a rollup set aside has no fusion of its own
    own[held] = own_of[rows[held]]
    if aside:  # a rollup set aside by the last pass is still in its ranks: it too has none
        out = set(aside)
        own[[j for j, i in enumerate(pool.ids) if i in out]] = 0.0
    # A turn is its own unit, and so is a rollup or a profile: joined to a turn it cites, it would
    # take that turn's evidence (a profile's ranks, joined to its newest item's turn, lifted that
    # turn for any question about the person). A memory joins its newest source's turn.
    memories = np.flatnonzero(~(facts.stm | facts.rollup | facts.profile)).tolist()
    # The rollup kept restates turns: its ranks count with a memory's weights (a second view of
    # evidence), never with a turn's, as if it were all the evidence there is.
    has_turn = np.zeros(n, dtype=bool)  # per candidate's own unit: its turn is a candidate
    has_turn[held] = ranks.is_turn[rows[held]]
    if kept is not None and kept in pool.ids:
        has_turn[pool.ids.index(kept)] = True
    # (unit, ranks row) of every record whose ranks count for a unit (``units.unit_rrf``): its
    # pooled members, and for a memory's unit its turn and the older source turns of its memories.
    if not memories:  # every candidate is a unit of its own (no extraction, or none pooled)
        unit = np.arange(n)
        pairs_unit, pairs_at = unit[held], rows[held]
    else:
        unit, has_turn, pairs_unit, pairs_at = _memory_units(
            search, pool, memories, ranks, rows, has_turn, kept
        )
    if not memories and held.all() and has_turn.all():
        # Every candidate a raw turn in a unit of its own: a unit's fusion is its turn's own (the
        # same terms, in the same order; the columns it is not in add 0.0).
        fused = own.copy()
    else:
        fused = units.unit_rrf_of_rows(pairs_unit, pairs_at, has_turn, ranks, cfg.field_weights, cfg.rrf_k)
    # A unit's best member at the unit's value, its other members by their own evidence.
    value = units.member_values_of_rows(unit, own, fused)
    if search.vector_prf and cfg.vector_prf_after > 0:
        # Dense feedback fills the places below the first ``vector_prf_after``: those are the plain fusion's.
        plain = cfg.field_weights.without(VECTOR_PRF)
        plain_of, _ = units.record_rrf(ranks, plain, cfg.rrf_k)
        plain_own = np.zeros(n)
        plain_own[held] = plain_of[rows[held]]
        plain_fused = units.unit_rrf_of_rows(pairs_unit, pairs_at, has_turn, ranks, plain, cfg.rrf_k)
        ids = pool.ids
        # As dicts in ``units.member_values``' order: ``below_head`` breaks ties by it.
        plain_value = units.member_values_of_rows(unit, plain_own, plain_fused)
        below = dense_feedback.below_head(
            _by_id(ids, _member_order(unit, plain_own, len(fused)), plain_value),
            _by_id(ids, _member_order(unit, own, len(fused)), value),
            cfg.vector_prf_after,
        )
        value = np.fromiter(map(below.__getitem__, ids), dtype=np.float64, count=n)
    if search.neighbour_heads:  # a neighbour turn ranks below the hit it was found through
        value = neighbours.below_their_heads(pool.ids, unit, fused, value, search.neighbour_heads)
    # Best value first, then best own fusion; a tie keeps the pool's order (lexsort is stable).
    pool.order = np.lexsort((-own, -value)).tolist()
    return pool, _Units(ranks, len(met), rows=rows, own=own, unit=unit, fused=fused, value=value)


def _credited(search: Search, ranks: units.FieldRanks) -> units.FieldRanks:
    """``ranks`` with BM25's credit shared among near-tied scores and scaled by how much of the
    query a match covers (``credit``), as configured; unchanged when both are off."""
    cfg = search.config
    eff = credit.shared_ranks(ranks, ("bm25", "bm25_prf"), cfg.bm25_tie_gap)
    gain: dict[str, np.ndarray] = {}
    if cfg.bm25_full_match > 0.0 and len(ranks.at.get("bm25", ())):
        gain = credit.match_gains(ranks, "bm25", hybrid.term_counts(search), cfg.bm25_full_match)
        if cfg.bm25_tie_scope == "thin" and "bm25" in gain:
            eff = credit.thin_only(ranks, eff, gain["bm25"], "bm25")
    gain |= credit.relative_gains(ranks, "vector", cfg.vector_full_ratio)
    return credit.with_credit(ranks, eff, gain)


def _sourceless(facts: Candidates) -> set[str]:
    """The pooled memories that cite no source turn (written by key, a store's put, an import):
    not turns, rollups or profiles, which are units of their own."""
    plain = ~(facts.stm | facts.rollup | facts.profile) & (facts.n_sources == 0)
    return {facts.ids[j] for j in np.flatnonzero(plain).tolist()}


def _rows_of(ids: list[str], pool_ids: list[str], best: np.ndarray) -> np.ndarray:
    """Each pooled candidate's row in the fusion's ranks (``best``, then -1 for the rollups set aside
    after them in ``pool_ids``); ``ids``: the candidates the store still held, in that order."""
    rows = np.full(len(pool_ids), -1, dtype=np.int64)
    rows[: len(best)] = best
    if ids == pool_ids:  # the usual case: the store held every one
        return rows
    at = dict(zip(pool_ids, range(len(pool_ids)), strict=True))
    return rows[[at[i] for i in ids]]


def _memory_units(
    search: Search,
    pool: Pool,
    memories: list[int],
    ranks: units.FieldRanks,
    rows: np.ndarray,
    own_turn: np.ndarray,
    kept: str | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(each candidate's unit, per unit whether its turn is a candidate, the (unit, ranks row) pairs
    ``units.unit_rrf_of_rows`` reads) when memories join their newest source's turn."""
    req = search.req
    keys = list(pool.ids)
    for j in memories:
        keys[j] = units.unit_key_of(req.tenant, req.user_id, pool.ids[j], False, pool.facts.last_source[j])
    index: dict[str, int] = {}
    unit = np.fromiter((index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(keys))
    n_units = len(index)
    held = rows >= 0
    pairs_unit, pairs_at = [unit[held]], [rows[held]]
    has_turn = np.zeros(n_units, dtype=bool)
    is_memory = np.zeros(len(keys), dtype=bool)
    is_memory[memories] = True
    own_unit = ~is_memory
    has_turn[unit[own_unit]] = own_turn[own_unit]  # a turn's or rollup's unit: the candidate itself
    row_of = ranks.row
    for j in memories:  # a memory's unit: its turn's ranks, when the turn is a candidate
        key = keys[j]
        r = row_of.get(key)
        stands = r is not None and (
            bool(ranks.is_turn[r]) or (ranks.both is not None and bool(ranks.both[r]))
        )
        if stands or key == kept:
            u = int(unit[j])
            has_turn[u] = True
            if r is not None:
                pairs_unit.append(np.array([u]))
                pairs_at.append(np.array([r]))
    for key, more in _source_turns(search, pool, keys, memories).items():
        found = [r for i in more if (r := row_of.get(i)) is not None]
        if found:
            pairs_unit.append(np.full(len(found), index[key]))
            pairs_at.append(np.array(found, dtype=np.int64))
    return unit, has_turn, np.concatenate(pairs_unit), np.concatenate(pairs_at)


def _member_order(unit: np.ndarray, own: np.ndarray, n_units: int) -> list[int]:
    """The pool rows in the order ``units.member_values`` lists them: unit by unit as first met, each
    unit's members best own fusion first (what ``dense_feedback.below_head`` breaks ties by)."""
    members: list[list[int]] = [[] for _ in range(n_units)]
    for j, u in enumerate(unit.tolist()):
        members[u].append(j)
    own_of = own.tolist()
    return [j for rows in members for j in sorted(rows, key=own_of.__getitem__, reverse=True)]


def _by_id(ids: list[str], listed: list[int], values: np.ndarray) -> dict[str, float]:
    floats = values.tolist()
    return {ids[j]: floats[j] for j in listed}


def _rankings(search: Search) -> dict[str, Sequence[ScoredId]]:
    """Every ranking the fusion reads, by name: stages 2 and 3 (BM25, its feedback query, dense feedback,
    the neighbour turns)."""
    return {
        "vector": search.vector,
        "bm25": search.bm25,
        "bm25_prf": search.prf,
        VECTOR_PRF: search.vector_prf,
        NEIGHBOURS: search.neighbours,
    }


def _without(ranking: Sequence[ScoredId], out: set[str]) -> Sequence[ScoredId]:
    """``ranking`` without the ids in ``out`` (a ``Ranked`` stays columns)."""
    if isinstance(ranking, Ranked):
        keep = np.fromiter((i not in out for i in ranking.ids), dtype=bool, count=len(ranking))
        turn = ranking.turn[keep] if ranking.turn is not None else None
        rows = ranking.rows[keep] if ranking.rows is not None else None
        return Ranked(
            [i for i, k in zip(ranking.ids, keep.tolist(), strict=True) if k],
            ranking.scores[keep],
            turn,
            rows,
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
