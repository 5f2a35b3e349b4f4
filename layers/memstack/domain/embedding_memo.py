"""An in-process memo in front of an embedder: each distinct text is embedded once.

Ingest with extraction embeds the same texts again and again: the turn at
ingest and once more as the extraction job's query for its neighbours, a
candidate memory when the extractor compares it with its neighbours and again
when it is written, every neighbour's text each time the extractor compares
against it. On the offline model that was 92% of an ingest's time (2.7 texts
per turn). The memo keeps the last ``size`` vectors by text (least recently
used goes first), embeds the missing texts of a call in one batch, and never
embeds a text twice within a call.

A vector is a pure function of the model and the text, so the memo changes no
result; it holds vectors, never writes them anywhere, and lives as long as its
process (a warm Lambda keeps it between jobs). It holds users' texts, so an
erase empties it (``forget_all``): the service's after erasing a user, and
after a job the erase stopped midway (it may have embedded the user's texts
again). Another process's memo (another Lambda instance) keeps what it holds
until evicted or the instance ends.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from memstack.ports.embedder import Embedder


class EmbeddingMemo:
    """An ``Embedder`` that remembers the last ``size`` vectors ``inner`` computed, by text."""

    def __init__(self, inner: Embedder, size: int) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.inner = inner
        self.dim = inner.dim
        self.name = inner.name
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        #: texts answered from the memo / embedded by ``inner`` (for benchmarks and tests)
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    @property
    def held(self) -> int:
        """How many vectors the memo holds now."""
        return len(self._vectors)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return self.inner.embed(texts)
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for text in texts:
                vector = self._vectors.get(text)
                if vector is not None:
                    self._vectors.move_to_end(text)
                    found[text] = vector
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            # Outside the lock: a slow model call must not hold up other threads' hits.
            fresh = np.asarray(self.inner.embed(missing), dtype=np.float32)
            with self._lock:
                for text, row in zip(missing, fresh, strict=True):
                    vector = row.copy()  # its own buffer: a kept row must not pin the whole batch
                    vector.setflags(write=False)  # shared by every caller that asks for this text
                    found[text] = self._vectors[text] = vector
                    self._vectors.move_to_end(text)
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        with self._lock:
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
        return np.vstack([found[t] for t in texts])


def forget_all(embedder: Embedder) -> None:
    """Empty ``embedder``'s memo, if it has one."""
    if isinstance(embedder, EmbeddingMemo):
        embedder.clear()


def memoised(embedder: Embedder, size: int) -> Embedder:
    """``embedder`` behind a memo of ``size`` vectors (0: none; an embedder already memoised stays as is)."""
    if size <= 0 or isinstance(embedder, EmbeddingMemo):
        return embedder
    return EmbeddingMemo(embedder, size)
