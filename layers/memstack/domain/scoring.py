"""Score arithmetic shared by every backend: RRF fusion and friends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


def near_duplicates(ordered_ids: Sequence[str], vectors: Mapping[str, object], threshold: float) -> set[str]:
    """Ids to drop: each one whose cosine with a better-ranked kept id is ``>= threshold``.

    ``ordered_ids`` is best first; vectors are unit length (numpy arrays), so
    the dot product is the cosine. Ids without a vector are never dropped.
    """
    import numpy as np

    ids = [i for i in ordered_ids if vectors.get(i) is not None]
    if len(ids) < 2:
        return set()
    matrix = np.vstack([np.asarray(vectors[i], dtype=np.float32) for i in ids])
    similar = (matrix @ matrix.T) >= threshold
    kept: list[int] = []
    dropped: set[str] = set()
    for pos, memory_id in enumerate(ids):
        if kept and bool(similar[pos, kept].any()):
            dropped.add(memory_id)
        else:
            kept.append(pos)
    return dropped
