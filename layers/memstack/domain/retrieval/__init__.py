"""Retrieval: the eight stages of docs/architecture.md (``stages``, run by ``pipeline.Retriever``), types."""

from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.stages import STAGES
from memstack.domain.retrieval.types import RetrievalConfig, SearchHit, SearchRequest, SearchResult

__all__ = ["STAGES", "RetrievalConfig", "Retriever", "SearchHit", "SearchRequest", "SearchResult"]
