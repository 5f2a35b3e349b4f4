"""Category-aware retrieval: how much a candidate is about the kind of thing the query asks for.

"What activities does Melanie partake in?" names no hobby, and "I'm off to go
swimming" names no activity; both are about hobbies. Each of the 15 memory
categories has a short description (its profile label, the words a question
about it uses); the embedder places them once per process. A query's category
distribution is a softmax over its cosine with each description, and a
candidate's affinity is the expected cosine of its own vector with them:

    affinity(r) = Σ_c p(c | q) · cos(v_r, v_c),   p(c | q) = softmax(cos(v_q, v_c) / τ)

It works the same for raw turns (no category) and memories, needs no lexicon,
and enters the calibrated score as one more signal (``ScoreModel.category``),
so its weight is fitted with the others (0 turns it off).
"""

from __future__ import annotations

import threading

import numpy as np

from memstack.domain.consolidation.profiles import CATEGORY_LABELS
from memstack.ports.embedder import Embedder

#: softmax temperature over the 15 cosines (they differ by a few hundredths)
TEMPERATURE = 0.05
DESCRIPTIONS = [f"{label} ({c.value.replace('_', ' ')})" for c, label in CATEGORY_LABELS.items()]


class CategoryPrototypes:
    """The category descriptions' vectors for one embedder, computed on first use."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()

    def vectors(self) -> np.ndarray:
        if self._vectors is None:
            with self._lock:
                if self._vectors is None:
                    self._vectors = np.asarray(self.embedder.embed(DESCRIPTIONS), dtype=np.float32)
        return self._vectors

    def query_weights(self, query_vec: np.ndarray) -> np.ndarray:
        """p(c | q) over the categories."""
        z = (self.vectors() @ np.asarray(query_vec, dtype=np.float32)) / TEMPERATURE
        z -= z.max()
        p = np.exp(z)
        return p / p.sum()

    def affinity(self, weights: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        """Each row of ``vectors`` (candidates): its expected cosine with the query's categories."""
        if not len(vectors):
            return np.zeros(0, dtype=np.float32)
        return (np.asarray(vectors, dtype=np.float32) @ self.vectors().T) @ weights
