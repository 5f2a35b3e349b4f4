"""Similarity helpers of consolidation: nearest current LTM memories, and clusters of related summaries."""

from __future__ import annotations

import numpy as np

from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, MemoryRecord, Tier
from memstack.ports.embedder import Embedder
from memstack.ports.store import MemoryStore


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na and nb else 0.0


def nearest_ltm(
    store: MemoryStore, tenant: str, user_id: str, vector: np.ndarray, coarse_dim: int, k: int
) -> list[tuple[MemoryRecord, float]]:
    """Current LTM memories nearest ``vector``: coarse candidates, full-dimension cosine, best first."""
    hits = store.vector_search(
        tenant, user_id, coarse_prefix(vector, coarse_dim), k, MemoryFilters(tier=Tier.LTM)
    )
    if not hits:
        return []
    ids = [h.id for h in hits]
    full = store.embeddings(tenant, user_id, ids)
    records = store.get_many(tenant, user_id, ids)
    scored = [
        (records[i], cosine(vector, full[i]))
        for i in ids
        if i in full and i in records and not records[i].deleted
    ]
    # Ties broken by id, so the same store always gives the same order.
    return sorted(scored, key=lambda rc: (-rc[1], rc[0].id))


def clusters(
    summaries: list[MemoryRecord], vectors: dict[str, np.ndarray], threshold: float
) -> list[list[MemoryRecord]]:
    """Group related summaries: each joins the cluster whose centroid it is most similar to (if at
    least ``threshold``), else starts one. Centroids, not single links, so a chain of loosely related
    summaries never collapses into one catch-all cluster. Stable: same input order, same clusters.
    """
    members: list[list[MemoryRecord]] = []
    sums: list[np.ndarray] = []
    for s in summaries:
        v = np.asarray(vectors[s.id], dtype=np.float32)
        scores = [cosine(v, total) for total in sums]
        best = max(range(len(scores)), key=lambda i: scores[i], default=None)
        if best is not None and scores[best] >= threshold:
            members[best].append(s)
            sums[best] = sums[best] + v
        else:
            members.append([s])
            sums.append(v.copy())
    return members


class RunEmbedder:
    """An embedder that remembers the vectors of one run.

    The job embeds a summary to look for duplicates and the write path embeds
    the same text again to store it; with a real model that second call is the
    run's largest cost, so one run keeps what it has already computed.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.name = inner.name
        self._seen: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._seen))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing), strict=True):
                self._seen[text] = np.asarray(vector, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._seen[t] for t in texts])
