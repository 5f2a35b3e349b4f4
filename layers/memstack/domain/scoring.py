"""Score arithmetic shared by every backend: RRF fusion and friends."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np

from memstack.models import ScoredId


def weighted_rrf(
    rankings: Mapping[str, Sequence[ScoredId]], weights: Mapping[str, float], k: int
) -> dict[str, float]:
    """Weighted reciprocal rank fusion: ``sum_i w_i / (k + rank_i(d))`` with ranks from 1.

    A document absent from a ranking gets nothing from it. Rankings are taken
    in the order given (best first).
    """
    fused: dict[str, float] = {}
    for name, ranking in rankings.items():
        weight = weights.get(name, 0.0)
        if weight == 0.0:
            continue
        for rank, hit in enumerate(ranking, start=1):
            fused[hit.id] = fused.get(hit.id, 0.0) + weight / (k + rank)
    return fused


def temporal_factor(temporal: float, blend: float) -> float:
    """Stage 5: ``blend + (1 - blend) * temporal``, the factor a result's score is multiplied by.

    1 inside the query's window; far outside it ``blend + (1 - blend) * 0.1``.
    A factor rather than a sum, so the calibrated score stays a probability.
    """
    return blend + (1.0 - blend) * temporal


def near_duplicates(matrix: np.ndarray, threshold: float) -> list[int]:
    """Rows to drop: each one whose cosine with a better-ranked kept row is ``>= threshold``.

    ``matrix`` holds unit vectors best first, so a dot product is the cosine.
    Most pools hold no near-duplicate at all: one matrix product says so, and
    only rows with a similar better-ranked row are looked at one by one.
    """
    if len(matrix) < 2:
        return []
    if not _may_have_near_duplicates(matrix, threshold):
        return []
    similar = (matrix @ matrix.T) >= threshold
    earlier = similar & _below_diagonal(len(matrix))  # earlier[b, a]: row b is like the better-ranked row a
    kept = np.ones(len(matrix), dtype=bool)
    dropped = []
    for row in np.flatnonzero(earlier.any(axis=1)):
        if bool(earlier[row, :row][kept[:row]].any()):
            kept[row] = False
            dropped.append(int(row))
    return dropped


#: the dimensions per block of the near-duplicate test's bound (the first block exactly, each
#: other one by its norms)
_BLOCK = 64
#: how far below the threshold a bound must stay to rule a pair out: far above float32's rounding
_MARGIN = 1e-3


def _may_have_near_duplicates(matrix: np.ndarray, threshold: float) -> bool:
    """False when no two rows can reach ``threshold``, proven at a fraction of the full product's cost.

    Rows split into blocks of ``_BLOCK`` dimensions: ``a·b = Σ a_k·b_k ≤ a_0·b_0 + Σ_{k≥1}
    |a_k||b_k|`` (Cauchy-Schwarz in each block after the first). Two unrelated vectors' first
    blocks are far from parallel and their weight sits in different blocks (a sparse hashing
    vector) or evenly (a dense model's), so in most pools no pair's bound reaches the threshold
    and the full product is never made; when one may, the decision is the full product's, as
    always (the same values, so the same rows dropped).
    """
    n, dim = matrix.shape
    if dim <= 2 * _BLOCK:
        return True
    blocks = dim // _BLOCK
    whole = matrix[:, : blocks * _BLOCK].reshape(n, blocks, _BLOCK)
    squares = np.einsum("ikj,ikj->ik", whole, whole)  # each block's squared norm
    if dim > blocks * _BLOCK:  # the dimensions left over are one more block
        left = matrix[:, blocks * _BLOCK :]
        squares = np.hstack([squares, np.einsum("ij,ij->i", left, left)[:, None]])
    norms = np.sqrt(squares[:, 1:])
    head = matrix[:, :_BLOCK]
    bound = head @ head.T + norms @ norms.T
    return bool((bound[_below_diagonal(len(matrix))] >= threshold - _MARGIN).any())


@functools.lru_cache(maxsize=8)
def _below_diagonal(n: int) -> np.ndarray:
    """``np.tril``'s mask (k=-1) for an n x n matrix, made once per pool size (read-only)."""
    mask = np.tri(n, k=-1, dtype=bool)
    mask.flags.writeable = False
    return mask
