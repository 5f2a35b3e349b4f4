"""Retrieval: the eight stages of DESIGN.md (``pipeline``), their types and stage functions."""

from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import STAGES, RetrievalConfig, SearchHit, SearchRequest, SearchResult

__all__ = ["STAGES", "RetrievalConfig", "Retriever", "SearchHit", "SearchRequest", "SearchResult"]
