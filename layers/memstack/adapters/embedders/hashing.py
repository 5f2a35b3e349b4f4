"""A deterministic hashing embedder: fast, dependency-free, for unit tests.

Words and character trigrams are hashed (blake2b, so the same on every
machine and process) into signed buckets. Texts that share words get similar
vectors; it knows no synonyms, which is what the real model is for.
"""

from __future__ import annotations

import hashlib

import numpy as np

from memstack.domain.text import STOPWORDS, words
from memstack.domain.vectors import normalise


class HashingEmbedder:
    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for w in words(text):
                weight = 0.3 if w in STOPWORDS else 1.0
                idx, sign = self._bucket("w:" + w)
                out[row, idx] += sign * weight
                padded = f"#{w}#"
                for i in range(len(padded) - 2):
                    idx, sign = self._bucket("c:" + padded[i : i + 3])
                    out[row, idx] += sign * 0.25 * weight
        return normalise(out)
