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
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
from aws_lambda_powertools import Logger

from memstack.domain.query_analysis import analyse_query
from memstack.domain.retrieval import stages, units
from memstack.domain.retrieval.calibration import coverage
from memstack.domain.retrieval.categories import CategoryPrototypes
from memstack.domain.retrieval.superseded import mark_superseded_turns
from memstack.domain.retrieval.types import RetrievalConfig, SearchHit, SearchRequest, SearchResult
from memstack.domain.scoring import near_duplicates, temporal_factor
from memstack.domain.temporal import TimeWindow, temporal_score
from memstack.domain.text import index_terms, query_index_terms
from memstack.models import MemoryFilters, MemoryRecord, ScoredId, Tier
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
        self.categories = CategoryPrototypes(embedder)

    def vector_stage(self, req: SearchRequest, query_vec: np.ndarray) -> list[ScoredId]:
        """Stage 2 alone (the vector-only baseline of the evaluation uses it)."""
        ranking, _ = stages.vector_search(
            self.store, req, req.filters, query_vec, self.config.coarse_dim, self.config.vector_candidates
        )
        return ranking

    def search(self, req: SearchRequest) -> SearchResult:
        cfg = self.config
        clock = _Clock()
        # Every read of this search sees one state of the user's memories (one
        # partition snapshot on DynamoDB, one generation check on the embedded store).
        run = _Search(req=req, store=pinned(self.store, req.tenant, req.user_id), status={}, degraded=[])
        started = time.perf_counter()

        with clock.stage("query_analysis"):
            reference = req.reference_time or datetime.now(UTC)
            if reference.tzinfo is None:
                reference = reference.replace(tzinfo=UTC)
            analysis = analyse_query(req.query, reference)
            history = analysis.history_intent or req.include_history
            # History queries also match older versions, so "where did I live before" finds them.
            run.filters = (
                req.filters.model_copy(update={"include_superseded": True}) if history else req.filters
            )
        run.status["query_analysis"] = "ok"

        with clock.stage("vector"):
            run.query_vec = self.embedder.embed([req.query])[0]
            run.vector, run.vectors = stages.vector_search(
                run.store, req, run.filters, run.query_vec, cfg.coarse_dim, cfg.vector_candidates
            )
        run.status["vector"] = f"ok: {len(run.vector)} candidates"

        with clock.stage("bm25"):
            self._bm25(run)
        with clock.stage("fusion"):
            hits = self._fuse(run)
        with clock.stage("temporal"):
            hits = self._temporal(run, hits, analysis.window)
        with clock.stage("dedup"):
            hits = self._dedup(run, hits)
        with clock.stage("rerank"):
            hits = self._rerank(run, hits)
        with clock.stage("history"):
            # Raw turns whose memories were all replaced say so, and rank below what is current.
            hits, stale = mark_superseded_turns(
                run.store, req, hits, window=2 * req.top_k, demote=cfg.superseded_turns_last and not history
            )
            if req.min_score is not None:
                hits = [h for h in hits if h.score >= req.min_score]
            hits = hits[: req.top_k]
            if history:
                hits = stages.expand_history(run.store, req, hits, cfg.history_max_versions)[: req.top_k]
                run.status["history"] = "ok: version chains expanded"
            elif stale:
                run.status["history"] = f"ok: {stale} superseded turns ranked below current memories"
            else:
                run.status["history"] = "skipped: current versions only"

        clock.durations["total"] = round((time.perf_counter() - started) * 1000, 3)
        logger.info(
            "memory_retrieval",
            extra={
                "event": "memory_retrieval",
                "stage_durations": clock.durations,
                "hits": len(hits),
                "degraded": run.degraded,
                "temporal_window": bool(analysis.window),
                "history": history,
            },
        )
        return SearchResult(
            hits=hits,
            degraded=run.degraded,
            stage_durations=clock.durations,
            stage_status=run.status,
            analysis=analysis.as_dict(),
        )

    # ------------------------------------------------------------------ stage 3
    def _bm25(self, run: _Search) -> None:
        cfg, req = self.config, run.req
        run.bm25 = run.store.bm25_search(req.tenant, req.user_id, req.query, cfg.bm25_candidates, run.filters)
        terms: list[str] = []
        if cfg.prf_terms > 0 and cfg.weight_prf > 0 and run.bm25:
            run.prf, terms = stages.feedback_search(run.store, req, run.filters, run.bm25, cfg)
        run.status["bm25"] = f"ok: {len(run.bm25)} candidates" + (
            f"; feedback query (+{len(terms)} terms): {len(run.prf)} candidates" if terms else ""
        )

    # ------------------------------------------------------------------ stage 4
    def _fuse(self, run: _Search) -> list[SearchHit]:
        """Weighted RRF over evidence units (``units``) orders the pool; scores are probabilities."""
        cfg = self.config
        pool = self._pool(run)
        weights = {"vector": cfg.weight_vector, "bm25": cfg.weight_bm25, "bm25_prf": cfg.weight_prf}
        # First place in the vector and BM25 rankings (and the feedback one, when it ran)
        # scales to 1. A query no word of which matches anything has no BM25 ranking:
        # its best result then scales to the vector weight alone, and scores low.
        ran = {"vector", "bm25", *(("bm25_prf",) if run.prf else ())}
        top = sum(weights[name] for name in ran) / (cfg.rrf_k + 1)
        signals = self._signals(run, pool)
        for i, st in signals.items():
            st["rrf"] = pool.fused[pool.unit_of[i]]
            st["record_rrf"] = pool.own[i]
            st["unit_size"] = float(len(pool.members[pool.unit_of[i]]))
            st["rrf_scaled"] = st["rrf"] / top if top > 0 else 0.0
        # What the query found at all: the same for each of its results.
        best_cosine = max((st["cosine"] for st in signals.values()), default=0.0)
        best_coverage = max((st.get("coverage", 0.0) for st in signals.values()), default=0.0)
        model = cfg.score_model
        hits = []
        for i, st in signals.items():
            st["query_cosine"], st["query_coverage"] = best_cosine, best_coverage
            st["fused"] = model.probability(
                st["rrf_scaled"],
                best_cosine,
                best_coverage,
                st.get("category", 0.0),
                st["cosine"],
                st.get("coverage", 0.0),
            )
            hits.append(SearchHit(record=pool.records[i], score=st["fused"], stages=st))
        hits = _ranked(hits, "fusion")
        run.status["fusion"] = (
            f"ok: {len(pool.own)} fused, {len(hits)} carried on in {len(pool.members)} units"
        )
        return hits

    def _pool(self, run: _Search) -> _Pool:
        """The best candidates by their own fusion, loaded, grouped into units and fused per unit."""
        cfg, req = self.config, run.req
        ranks = units.field_ranks({"vector": run.vector, "bm25": run.bm25, "bm25_prf": run.prf})
        own = units.record_rrf(ranks, cfg.field_weights, cfg.rrf_k)
        pool_ids = sorted(own, key=lambda i: own[i], reverse=True)[: max(cfg.candidate_pool, req.top_k)]
        records = run.store.get_many(req.tenant, req.user_id, pool_ids)
        unit_of = {i: units.unit_key(req.tenant, req.user_id, records[i]) for i in pool_ids if i in records}
        members: dict[str, list[str]] = {}
        for i in unit_of:
            members.setdefault(unit_of[i], []).append(i)
        candidate_turns = {i for by_id in ranks.values() for i in by_id if units.field_of(i) == units.TURNS}
        sources = {
            key: units.source_turns(req.tenant, req.user_id, (records[i] for i in ids))
            for key, ids in members.items()
        }
        fused = units.unit_rrf(members, candidate_turns, ranks, cfg.field_weights, cfg.rrf_k, sources)
        # Best unit first; within a unit, its records by their own fusion (score ties keep this order).
        order = sorted(unit_of, key=lambda i: (fused[unit_of[i]], own[i]), reverse=True)
        missing = [i for i in order if i not in run.vectors]
        if missing:
            run.vectors = {**run.vectors, **run.store.embeddings(req.tenant, req.user_id, missing)}
        return _Pool(order=order, records=records, own=own, unit_of=unit_of, members=members, fused=fused)

    def _signals(self, run: _Search, pool: _Pool) -> dict[str, dict[str, float]]:
        """Each pooled record's own evidence (explain shows it; the score uses what its weights ask for)."""
        cfg, req = self.config, run.req
        model = cfg.score_model
        # Coverage reads every pooled text: only when it counts, or when explain asks for it.
        want_coverage = bool(model.coverage or model.result_coverage) or req.explain
        query_terms = query_index_terms(req.query) if want_coverage else set()
        affinity: dict[str, float] = {}
        # Computed when it counts, or when explain asks for every signal.
        if (model.category or req.explain) and pool.order:
            with_vectors = [i for i in pool.order if i in run.vectors]
            p_category = self.categories.query_weights(run.query_vec)
            values = self.categories.affinity(p_category, np.vstack([run.vectors[i] for i in with_vectors]))
            affinity = dict(zip(with_vectors, (float(v) for v in values), strict=True))
        rankings = {"vector": run.vector, "bm25": run.bm25, "bm25_prf": run.prf}
        ranks = {name: {s.id: r for r, s in enumerate(r_, start=1)} for name, r_ in rankings.items()}
        raw = {name: {s.id: s.score for s in r_} for name, r_ in rankings.items()}
        signals: dict[str, dict[str, float]] = {}
        for i in pool.order:
            st: dict[str, float] = {}
            for name in ("vector", "bm25", "bm25_prf"):
                if i in ranks[name]:
                    st[f"{name}_rank"] = float(ranks[name][i])
                    if name != "bm25_prf":
                        st[name] = raw[name][i]
            vec = run.vectors.get(i)
            st["cosine"] = float(np.dot(vec, run.query_vec)) if vec is not None else 0.0
            if want_coverage:
                st["coverage"] = coverage(query_terms, index_terms(pool.records[i].indexed_text))
            if affinity:
                st["category"] = affinity.get(i, 0.0)
            signals[i] = st
        return signals

    # ------------------------------------------------------------------ stage 5
    def _temporal(self, run: _Search, hits: list[SearchHit], window: TimeWindow | None) -> list[SearchHit]:
        cfg = self.config
        kept: list[SearchHit] = []
        for hit in hits:
            if window is not None:
                when = hit.record.event_time or hit.record.created_at
                distance = window.distance_days(when, cfg.temporal_report_lag_days)
                t = temporal_score(distance, cfg.temporal_window_days)
                hit.stages["temporal"] = t
                # A factor, so the score stays a probability: inside the window it is unchanged.
                hit.stages["temporal_factor"] = temporal_factor(t, cfg.temporal_blend)
                hit.score *= hit.stages["temporal_factor"]
            if hit.record.tier == Tier.STM and hit.record.metadata.get("consolidated"):
                # STM already folded into LTM by consolidation counts for less (0 hides it).
                if cfg.consolidated_stm_weight <= 0:
                    continue
                hit.stages["consolidated_weight"] = cfg.consolidated_stm_weight
                hit.score *= cfg.consolidated_stm_weight
            hit.stages["score"] = hit.score
            kept.append(hit)
        run.status["temporal"] = (
            f"ok: window {window.phrase!r}" if window is not None else "skipped: the query names no time"
        )
        return _ranked(kept, "temporal")

    # ------------------------------------------------------------------ stage 6
    def _dedup(self, run: _Search, hits: list[SearchHit]) -> list[SearchHit]:
        cfg = self.config
        dropped = near_duplicates([h.record.id for h in hits], run.vectors, cfg.dedup_threshold)
        hits = [h for h in hits if h.record.id not in dropped]
        merged = stages.merge_turns_into_memories(hits) if cfg.dedup_by_source else set()
        if merged:
            hits = [h for h in hits if h.record.id not in merged]
        run.status["dedup"] = f"ok: {len(dropped)} removed, {len(merged)} turns merged into their memories"
        return _ranked(hits, "dedup")

    # ------------------------------------------------------------------ stage 7
    def _rerank(self, run: _Search, hits: list[SearchHit]) -> list[SearchHit]:
        if self.reranker is None:
            run.status["rerank"] = "skipped: no reranker configured"
            return hits
        try:
            hits = stages.rerank(self.reranker, run.req.query, hits, self.config.rerank_candidates)
            run.status["rerank"] = f"ok: {self.reranker.name}"
        except Exception as exc:  # a reranker outage must never fail the search
            run.degraded.append("rerank")
            run.status["rerank"] = f"failed: {type(exc).__name__}: {exc}"
            logger.warning("rerank failed; fused order kept", extra={"error": repr(exc)})
            return hits
        for hit in hits:
            hit.score = hit.stages.get("rerank", hit.score)
        return _ranked(hits, "rerank", sort=False)


@dataclass
class _Search:
    """What one search has found so far, passed from stage to stage."""

    req: SearchRequest
    #: the store as this search reads it (pinned to one state of the user's memories)
    store: MemoryStore
    status: dict[str, str]
    degraded: list[str]
    filters: MemoryFilters = field(default_factory=MemoryFilters)
    query_vec: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    vector: list[ScoredId] = field(default_factory=list)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    bm25: list[ScoredId] = field(default_factory=list)
    prf: list[ScoredId] = field(default_factory=list)


@dataclass
class _Pool:
    """Stage 4's pool: records best first, each one's own fusion, its unit and each unit's fusion."""

    order: list[str]
    records: dict[str, MemoryRecord]
    own: dict[str, float]
    unit_of: dict[str, str]
    members: dict[str, list[str]]
    fused: dict[str, float]


def _ranked(hits: list[SearchHit], stage: str, sort: bool = True) -> list[SearchHit]:
    """Best first, each hit's place after ``stage`` recorded (explain shows how each stage moved it)."""
    if sort:
        hits = sorted(hits, key=lambda h: h.score, reverse=True)
    for rank, hit in enumerate(hits, start=1):
        hit.stages[f"rank_after_{stage}"] = float(rank)
    return hits
