"""The reranker port: a cross-encoder scores (query, passage) pairs."""

from __future__ import annotations

from typing import Protocol


class Reranker(Protocol):
    name: str

    def rerank(self, query: str, passages: list[str]) -> list[float]:
        """One relevance score per passage, in the passages' order (higher is better)."""
        ...
