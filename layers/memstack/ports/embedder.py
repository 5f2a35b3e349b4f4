"""The embedder port: text in, full-dimension unit vectors out."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Embedder(Protocol):
    #: full dimension of the vectors ``embed`` returns
    dim: int
    #: name recorded with the vectors, so a store never mixes two models
    name: str

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim), each row L2-normalised."""
        ...
