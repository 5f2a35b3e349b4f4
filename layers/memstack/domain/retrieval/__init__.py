"""Retrieval: the eight stages of DESIGN.md (``stages``, run by ``pipeline.Retriever``) and their types."""

from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.stages import STAGES
from memstack.domain.retrieval.types import RetrievalConfig, SearchHit, SearchRequest, SearchResult

__all__ = ["STAGES", "RetrievalConfig", "Retriever", "SearchHit", "SearchRequest", "SearchResult"]
