"""How much rank-fusion credit a BM25 rank earns: near-tied scores share it, a thin match earns less of it.

RRF reads ranks only, which amplifies two things a small store makes common:

* **near ties**. When the query's only matching word is in several records
  ("what car does Bob have?": only "bob" matches, in every memory written about
  Bob), their BM25 scores differ by document length alone (2.61 / 2.42 / 2.21),
  yet they take ranks 1, 2, 3, and with BM25's weight that rank difference
  decides the order over a clear cosine difference (0.66 vs 0.44).
  ``shared_ranks`` gives each entry the rank of the first entry whose score is
  clearly above it: every entry above counts one place when its score is at
  least ``gap`` (relative) higher, and proportionally less when it is nearer,
  so near-tied entries share their credit and the other rankings order them.
  Continuous in the scores: no group boundary to fall either side of.
* **thin matches**. A rank says nothing about how much of the query matched: on a
  store of twenty records the one record sharing a single word with the query
  ("where does Bob work?" -> "I cycle to work unless it rains") is BM25's first
  and takes its full weight. ``match_gains`` scales an entry's credit by the
  share of the query's idf mass its score reaches (``score / Σ idf`` over the
  query's terms as the store analyses them, ``TermCounts``), saturating at
  ``full``: a record matching the query's informative words keeps all of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np

from memstack.domain.retrieval.units import MEMORIES, TURNS, FieldRanks
from memstack.ports.store import TermCounts


def shared_ranks(ranks: FieldRanks, names: Iterable[str], gap: float) -> dict[tuple[str, str], np.ndarray]:
    """Per (ranking, field) of ``names``: each row's effective rank (float, from 1) in that field.

    Entry ``i`` of a field (scores descending) ranks ``1 + Σ_{j above i} min(1, (s_j - s_i) / (gap · s_j))``:
    the plain rank when every score above is at least ``gap`` higher.
    """
    out: dict[tuple[str, str], np.ndarray] = {}
    if gap <= 0.0:
        return out
    for name in names:
        at = ranks.at.get(name)
        if at is None or not len(at):
            continue
        for field in (TURNS, MEMORIES):
            if (name, field) not in ranks.columns:
                continue
            in_field = ranks.rank_in(name, field)
            rows = at[in_field[at] > 0]  # the field's entries, in the ranking's order
            eff = np.zeros(len(ranks), dtype=np.float64)
            eff[rows] = effective_ranks(ranks.scores[name][rows], gap)
            out[(name, field)] = eff
    return out


def effective_ranks(scores: np.ndarray, gap: float) -> np.ndarray:
    """``shared_ranks`` of one field's scores (descending): O(n log n) by prefix sums.

    For entry ``i``, the entries above with ``s_j >= s_i / (1 - gap)`` count one each (a prefix,
    the scores descending); the rest above it count ``(1 - s_i / s_j) / gap`` each.
    """
    n = len(scores)
    s = np.maximum(np.asarray(scores, dtype=np.float64), 1e-12)  # BM25 scores are positive
    place = np.arange(n)
    # how many entries score at least s_i / (1 - gap): the first `full` of them (descending)
    bound = s / (1.0 - gap) if gap < 1.0 else np.full(n, np.inf)
    full = np.searchsorted(-s, -bound, side="right")
    full = np.minimum(full, place)
    inverse = np.concatenate(([0.0], np.cumsum(1.0 / s)))
    partial = place - full  # entries above i that are within the gap
    near = inverse[place] - inverse[full]  # Σ 1/s_j over them
    return 1.0 + full + (partial - s * near) / gap


def thin_only(
    ranks: FieldRanks, eff: Mapping[tuple[str, str], np.ndarray], gain: np.ndarray, name: str
) -> dict[tuple[str, str], np.ndarray]:
    """``eff`` with ranking ``name``'s shared ranks kept only for its thin matches (``gain`` below 1):
    between records that each match little of the query a score gap is length noise, while among
    full matches BM25's order is informative (sharing there cost LoCoMo @10)."""
    out = dict(eff)
    for field in (TURNS, MEMORIES):
        shared = out.get((name, field))
        if shared is not None:
            out[(name, field)] = np.where(gain < 1.0, shared, ranks.rank_in(name, field).astype(np.float64))
    return out


def match_gains(ranks: FieldRanks, name: str, counts: TermCounts, full: float) -> dict[str, np.ndarray]:
    """``{name: per row, min(1, score / (full · Σ idf))}`` (empty when the query has no idf mass)."""
    at = ranks.at.get(name)
    mass = query_idf_mass(counts)
    if at is None or not len(at) or mass <= 0.0 or full <= 0.0:
        return {}
    gain = np.ones(len(ranks), dtype=np.float64)
    gain[at] = np.minimum(1.0, ranks.scores[name][at] / (full * mass))
    return {name: gain}


def relative_gains(ranks: FieldRanks, name: str, ratio: float) -> dict[str, np.ndarray]:
    """``{name: per row, min(1, score / (ratio · the ranking's best score))}`` (a cosine ranking):
    an entry far below what the query found at all earns little credit however few compete with it."""
    at = ranks.at.get(name)
    if at is None or not len(at) or ratio <= 0.0:
        return {}
    scores = ranks.scores[name][at]
    best = float(scores.max())
    if best <= 0.0:
        return {}
    gain = np.ones(len(ranks), dtype=np.float64)
    gain[at] = np.clip(scores / (ratio * best), 0.0, 1.0)
    return {name: gain}


def query_idf_mass(counts: TermCounts) -> float:
    """Σ over the query's terms of their Okapi idf in this user's store (a term no record holds
    counts with the largest idf: the query asked for it, and nothing matched it)."""
    docs = max(counts.docs, *counts.df.values(), 0)
    return sum(math.log(1.0 + (docs - df + 0.5) / (df + 0.5)) for df in counts.df.values())


def with_credit(
    ranks: FieldRanks, eff: Mapping[tuple[str, str], np.ndarray], gain: Mapping[str, np.ndarray]
) -> FieldRanks:
    """``ranks`` with these effective ranks and gains (unchanged when both are empty)."""
    if not eff and not gain:
        return ranks
    return replace(ranks, eff=dict(eff) or None, gain=dict(gain) or None)
