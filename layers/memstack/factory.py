"""Builds a ``MemoryService`` from ``Settings``: one place that knows which adapter is which.

Adapters are imported lazily, so a Lambda that uses DynamoDB never imports
torch and the laptop never needs opensearch-py. Tests pass ready-made
adapters (fakes, moto clients) through the keyword arguments.
"""

from __future__ import annotations

from typing import Any

from memstack.domain.ingest import IngestConfig, Ingestor
from memstack.domain.retrieve import RetrievalConfig, Retriever
from memstack.ports.embedder import Embedder
from memstack.ports.queue import JobQueue
from memstack.ports.reranker import Reranker
from memstack.ports.stm import ShortTermStore
from memstack.ports.store import MemoryStore
from memstack.service import MemoryService
from memstack.settings import Settings


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "hashing":
        from memstack.adapters.embedders.hashing import HashingEmbedder

        return HashingEmbedder(settings.embedding_dim)
    if settings.embedder == "minilm":
        from memstack.adapters.embedders.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    raise NotImplementedError(f"embedder {settings.embedder!r} is not available in this build")


def build_reranker(settings: Settings) -> Reranker | None:
    if settings.reranker == "none":
        return None
    raise NotImplementedError(f"reranker {settings.reranker!r} is not available in this build")


def retrieval_config(settings: Settings) -> RetrievalConfig:
    return RetrievalConfig(
        vector_candidates=settings.vector_candidates,
        bm25_candidates=settings.bm25_candidates,
        rrf_k=settings.rrf_k,
        weight_vector=settings.weight_vector,
        weight_bm25=settings.weight_bm25,
        coarse_dim=settings.coarse_dim,
    )


def build_service(
    settings: Settings,
    *,
    store: MemoryStore | None = None,
    stm: ShortTermStore | None = None,
    embedder: Embedder | None = None,
    queue: JobQueue | None = None,
    reranker: Reranker | None = None,
    **clients: Any,
) -> MemoryService:
    closers = []
    db = None
    if settings.store_backend == "embedded" or settings.stm_backend == "embedded" or (
        settings.queue_backend == "local" and queue is None
    ):
        from memstack.adapters.embedded.database import Database

        db = Database(settings.db_path)
        closers.append(db.close)
    if store is None:
        if settings.store_backend != "embedded":
            raise NotImplementedError(f"store backend {settings.store_backend!r} is not available in this build")
        from memstack.adapters.embedded.store import EmbeddedMemoryStore

        assert db is not None
        store = EmbeddedMemoryStore(db)
    if stm is None:
        if settings.stm_backend != "embedded":
            raise NotImplementedError(f"STM backend {settings.stm_backend!r} is not available in this build")
        from memstack.adapters.embedded.stm import EmbeddedShortTermStore

        assert db is not None
        stm = EmbeddedShortTermStore(db)
    if queue is None and settings.queue_backend == "local":
        from memstack.adapters.queue.local import LocalJobQueue

        assert db is not None
        queue = LocalJobQueue(db, max_attempts=settings.queue_max_attempts)
    embedder = embedder or build_embedder(settings)
    reranker = reranker if reranker is not None else build_reranker(settings)
    ingestor = Ingestor(
        store, stm, embedder,
        IngestConfig(coarse_dim=settings.coarse_dim, stm_ttl_days=settings.stm_ttl_days), queue,
    )
    retriever = Retriever(store, embedder, retrieval_config(settings), reranker)
    service = MemoryService(
        settings=settings, store=store, stm=stm, embedder=embedder, ingestor=ingestor,
        retriever=retriever, queue=queue, closers=closers,
    )
    if queue is not None:
        queue.set_handler(service.process_job)
    return service
