"""A deterministic hashing embedder: fast, dependency-free, for unit tests.

Words and character trigrams are hashed (blake2b, so the same on every
machine and process) into signed buckets. Texts that share words get similar
vectors; it knows no synonyms, which is what the real model is for.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from memstack.domain.text import STOPWORDS, words
from memstack.domain.vectors import normalise

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings

#: distinct words whose features are remembered (a bulk load hashes the same words again and again)
_WORD_CACHE = 200_000


class HashingEmbedder:
    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"
        self._words: dict[str, tuple[list[int], list[float]]] = {}

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def _features(self, word: str) -> tuple[list[int], list[float]]:
        """The buckets and signed weights one occurrence of ``word`` adds: itself, then its trigrams."""
        cached = self._words.get(word)
        if cached is not None:
            return cached
        weight = 0.3 if word in STOPWORDS else 1.0
        idx, sign = self._bucket("w:" + word)
        buckets, values = [idx], [sign * weight]
        padded = f"#{word}#"
        for i in range(len(padded) - 2):
            idx, sign = self._bucket("c:" + padded[i : i + 3])
            buckets.append(idx)
            values.append(sign * 0.25 * weight)
        if len(self._words) >= _WORD_CACHE:
            self._words.clear()
        self._words[word] = (buckets, values)
        return buckets, values

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            buckets: list[int] = []
            values: list[float] = []
            for w in words(text):
                b, v = self._features(w)
                buckets += b
                values += v
            # float32 additions in the same order as one feature at a time: the same vector.
            np.add.at(out[row], buckets, np.asarray(values, dtype=np.float32))
        return normalise(out)


def build(settings: Settings, clients: Mapping[str, Any]) -> HashingEmbedder:
    """``MEMSTACK_EMBEDDER=hashing`` (``factory.EMBEDDERS``)."""
    return HashingEmbedder(settings.embedding.embedding_dim)
