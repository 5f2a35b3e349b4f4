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
so its weight is fitted with the others (0 turns it off). A tenant with its
own categories (``domain.tenant``) is measured against their descriptions
(beside the built-in ones, or instead of them): ``CategoryPrototypes.of``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from memstack.domain.categories import DESCRIPTIONS
from memstack.ports.embedder import Embedder

#: softmax temperature over the 15 cosines (they differ by a few hundredths)
TEMPERATURE = 0.05


#: tenants' category sets one process keeps the vectors of
VARIANTS = 64


class CategoryPrototypes:
    """The category descriptions' vectors for one embedder, computed on first use."""

    def __init__(self, embedder: Embedder, descriptions: tuple[str, ...] = DESCRIPTIONS) -> None:
        self.embedder = embedder
        self.descriptions = descriptions
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()
        self._variants: OrderedDict[tuple[str, ...], CategoryPrototypes] = OrderedDict()

    def of(self, descriptions: tuple[str, ...] | None) -> CategoryPrototypes:
        """The prototypes of a tenant's categories (``None``: these), kept for the next search."""
        if descriptions is None or descriptions == self.descriptions:
            return self
        with self._lock:
            found = self._variants.get(descriptions)
            if found is None:
                found = self._variants[descriptions] = CategoryPrototypes(self.embedder, descriptions)
                while len(self._variants) > VARIANTS:
                    self._variants.popitem(last=False)
            self._variants.move_to_end(descriptions)
        return found

    def vectors(self) -> np.ndarray:
        if self._vectors is None:
            with self._lock:
                if self._vectors is None:
                    self._vectors = np.asarray(self.embedder.embed(list(self.descriptions)), dtype=np.float32)
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
