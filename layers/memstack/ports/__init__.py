"""One small interface per external part. Adapters implement them; the domain uses only these."""

from memstack.ports.embedder import Embedder
from memstack.ports.llm import ExtractionOp, Extractor, Summariser
from memstack.ports.queue import Job, JobQueue
from memstack.ports.reranker import Reranker
from memstack.ports.stm import ShortTermStore, StmEntry
from memstack.ports.store import MemoryStore

__all__ = [
    "Embedder",
    "ExtractionOp",
    "Extractor",
    "Job",
    "JobQueue",
    "MemoryStore",
    "Reranker",
    "ShortTermStore",
    "StmEntry",
    "Summariser",
]
