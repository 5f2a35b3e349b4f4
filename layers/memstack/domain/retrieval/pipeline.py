"""The eight-stage retrieval pipeline of DESIGN.md, run in full on every search.

1 query analysis → 2 Matryoshka vector search → 3 BM25 → 4 weighted RRF →
5 temporal boost → 6 near-duplicate removal → 7 rerank → 8 history.
Each stage records its duration; each hit records each stage's score; a
stage that cannot run says why in ``stage_status``, and one that fails
(only the reranker is allowed to) is listed in ``degraded``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import numpy as np
from aws_lambda_powertools import Logger

from memstack.domain.query_analysis import analyse_query
from memstack.domain.retrieval import stages
from memstack.domain.retrieval.superseded import mark_superseded_turns
from memstack.domain.retrieval.types import RetrievalConfig, SearchHit, SearchRequest, SearchResult
from memstack.domain.scoring import min_max, near_duplicates, temporal_blend, weighted_rrf
from memstack.domain.temporal import temporal_score
from memstack.models import ScoredId, Tier
from memstack.ports.embedder import Embedder
from memstack.ports.reranker import Reranker
from memstack.ports.store import MemoryStore, pinned


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """Writes to whatever ``sys.stderr`` is at the time (test capture, CLI redirection)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


# Structured JSON on stderr: CloudWatch in Lambda, and never mixed into a CLI's --json stdout.
logger = Logger(service="memstack", logger_handler=_StderrHandler())


class _Clock:
    def __init__(self) -> None:
        self.durations: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.durations[name] = round((time.perf_counter() - start) * 1000, 3)


class Retriever:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        config: RetrievalConfig,
        reranker: Reranker | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.reranker = reranker

    def vector_stage(self, req: SearchRequest, query_vec: np.ndarray) -> list[ScoredId]:
        """Stage 2 alone (the vector-only baseline of the evaluation uses it)."""
        ranking, _ = stages.vector_search(
            self.store, req, req.filters, query_vec, self.config.coarse_dim, self.config.vector_candidates
        )
        return ranking

    def search(self, req: SearchRequest) -> SearchResult:
        cfg = self.config
        clock = _Clock()
        status: dict[str, str] = {}
        degraded: list[str] = []
        started = time.perf_counter()
        # Every read of this search sees one state of the user's memories (one
        # partition snapshot on DynamoDB, one generation check on the embedded store).
        store = pinned(self.store, req.tenant, req.user_id)

        with clock.stage("query_analysis"):
            reference = req.reference_time or datetime.now(UTC)
            if reference.tzinfo is None:
                reference = reference.replace(tzinfo=UTC)
            analysis = analyse_query(req.query, reference)
            history = analysis.history_intent or req.include_history
            # History queries also match older versions, so "where did I live before" finds them.
            filters = req.filters.model_copy(update={"include_superseded": True}) if history else req.filters
        status["query_analysis"] = "ok"

        with clock.stage("vector"):
            query_vec = self.embedder.embed([req.query])[0]
            vector, vectors = stages.vector_search(
                store, req, filters, query_vec, cfg.coarse_dim, cfg.vector_candidates
            )
        status["vector"] = f"ok: {len(vector)} candidates"

        with clock.stage("bm25"):
            bm25 = store.bm25_search(req.tenant, req.user_id, req.query, cfg.bm25_candidates, filters)
        status["bm25"] = f"ok: {len(bm25)} candidates"

        with clock.stage("fusion"):
            fused = weighted_rrf(
                {"vector": vector, "bm25": bm25},
                {"vector": cfg.weight_vector, "bm25": cfg.weight_bm25},
                cfg.rrf_k,
            )
            pool_ids = sorted(fused, key=lambda i: fused[i], reverse=True)[
                : max(cfg.candidate_pool, req.top_k)
            ]
            records = store.get_many(req.tenant, req.user_id, pool_ids)
            normalised = min_max({i: fused[i] for i in pool_ids if i in records})
            vec_rank = {s.id: (r, s.score) for r, s in enumerate(vector, start=1)}
            bm25_rank = {s.id: (r, s.score) for r, s in enumerate(bm25, start=1)}
            hits = []
            for i in pool_ids:
                if i not in records:
                    continue
                st: dict[str, float] = {}
                if i in vec_rank:
                    st["vector_rank"], st["vector"] = float(vec_rank[i][0]), vec_rank[i][1]
                if i in bm25_rank:
                    st["bm25_rank"], st["bm25"] = float(bm25_rank[i][0]), bm25_rank[i][1]
                st["rrf"] = fused[i]
                st["fused"] = normalised[i]
                hits.append(SearchHit(record=records[i], score=normalised[i], stages=st))
        status["fusion"] = f"ok: {len(fused)} fused, {len(hits)} carried on"

        with clock.stage("temporal"):
            window = analysis.window
            kept: list[SearchHit] = []
            for hit in hits:
                if window is not None:
                    when = hit.record.event_time or hit.record.created_at
                    t = temporal_score(window.distance_days(when), cfg.temporal_window_days)
                    hit.stages["temporal"] = t
                    hit.score = temporal_blend(hit.score, t, cfg.temporal_blend)
                if hit.record.tier == Tier.STM and hit.record.metadata.get("consolidated"):
                    # STM already folded into LTM by consolidation counts for less (0 hides it).
                    if cfg.consolidated_stm_weight <= 0:
                        continue
                    hit.stages["consolidated_weight"] = cfg.consolidated_stm_weight
                    hit.score *= cfg.consolidated_stm_weight
                hit.stages["score"] = hit.score
                kept.append(hit)
            hits = sorted(kept, key=lambda h: h.score, reverse=True)
        status["temporal"] = (
            f"ok: window {window.phrase!r}" if window is not None else "skipped: the query names no time"
        )

        with clock.stage("dedup"):
            missing = [h.record.id for h in hits if h.record.id not in vectors]
            if missing:
                vectors = {**vectors, **store.embeddings(req.tenant, req.user_id, missing)}
            dropped = near_duplicates([h.record.id for h in hits], vectors, cfg.dedup_threshold)
            hits = [h for h in hits if h.record.id not in dropped]
            merged = stages.merge_turns_into_memories(hits) if cfg.dedup_by_source else set()
            if merged:
                hits = sorted(
                    (h for h in hits if h.record.id not in merged), key=lambda h: h.score, reverse=True
                )
        status["dedup"] = f"ok: {len(dropped)} removed, {len(merged)} turns merged into their memories"

        with clock.stage("rerank"):
            if self.reranker is None:
                status["rerank"] = "skipped: no reranker configured"
            else:
                try:
                    hits = stages.rerank(self.reranker, req.query, hits, cfg.rerank_candidates)
                    status["rerank"] = f"ok: {self.reranker.name}"
                except Exception as exc:  # a reranker outage must never fail the search
                    degraded.append("rerank")
                    status["rerank"] = f"failed: {type(exc).__name__}: {exc}"
                    logger.warning("rerank failed; fused order kept", extra={"error": repr(exc)})
            for hit in hits:
                hit.score = hit.stages.get("rerank", hit.score)

        with clock.stage("history"):
            # Raw turns whose memories were all replaced say so, and rank below what is current.
            hits, stale = mark_superseded_turns(
                self.store, req, hits, window=2 * req.top_k, demote=cfg.superseded_turns_last and not history
            )
            hits = hits[: req.top_k]
            if history:
                hits = stages.expand_history(store, req, hits, cfg.history_max_versions)[: req.top_k]
                status["history"] = "ok: version chains expanded"
            elif stale:
                status["history"] = f"ok: {stale} superseded turns ranked below current memories"
            else:
                status["history"] = "skipped: current versions only"

        clock.durations["total"] = round((time.perf_counter() - started) * 1000, 3)
        logger.info(
            "memory_retrieval",
            extra={
                "event": "memory_retrieval",
                "stage_durations": clock.durations,
                "hits": len(hits),
                "degraded": degraded,
                "temporal_window": bool(analysis.window),
                "history": history,
            },
        )
        return SearchResult(
            hits=hits,
            degraded=degraded,
            stage_durations=clock.durations,
            stage_status=status,
            analysis=analysis.as_dict(),
        )
