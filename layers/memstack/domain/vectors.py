"""Vector helpers: normalisation, Matryoshka prefixes, blob encoding."""

from __future__ import annotations

import numpy as np


def normalise(matrix: np.ndarray) -> np.ndarray:
    """L2-normalise rows (a zero row stays zero)."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim == 1:
        n = float(np.linalg.norm(m))
        return m / n if n > 0 else m
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


def top_indices(scores: np.ndarray, n: int) -> np.ndarray:
    """The positions of the ``n`` highest scores, best first; equal scores in position order.

    Deterministic on every machine: ``argpartition`` alone keeps an arbitrary subset of the
    scores tied at the cut, in an order that depends on the CPU's sorting kernels (numpy's
    AVX-512 paths order ties differently), so one store could rank differently per host.
    """
    n = min(n, len(scores))
    if n <= 0:
        return np.zeros(0, dtype=np.intp)
    if n < len(scores):
        cut = np.partition(scores, len(scores) - n)[len(scores) - n]
        candidates = np.flatnonzero(scores >= cut)  # every score tied at the cut, in position order
    else:
        candidates = np.arange(len(scores))
    return candidates[np.argsort(-scores[candidates], kind="stable")][:n]


def coarse_prefix(full: np.ndarray, dim: int) -> np.ndarray:
    """The Matryoshka coarse vector: the first ``dim`` components, re-normalised."""
    return normalise(np.asarray(full, dtype=np.float32)[..., :dim])


def to_blob(vector: list[float] | np.ndarray | None) -> bytes | None:
    if vector is None:
        return None
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes | None) -> np.ndarray | None:
    if blob is None:
        return None
    return np.frombuffer(blob, dtype=np.float32)
