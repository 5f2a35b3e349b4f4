"""Retrieval's public names; the pipeline lives in ``memstack.domain.retrieval``."""

from memstack.domain.retrieval import (
    STAGES,
    RetrievalConfig,
    Retriever,
    SearchHit,
    SearchRequest,
    SearchResult,
)

__all__ = ["STAGES", "RetrievalConfig", "Retriever", "SearchHit", "SearchRequest", "SearchResult"]
