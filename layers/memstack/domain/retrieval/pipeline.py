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
from memstack.domain.retrieval.pool import Pool, read_candidates
from memstack.domain.retrieval.superseded import mark_superseded_turns
from memstack.domain.retrieval.types import RetrievalConfig, SearchRequest, SearchResult
from memstack.domain.scoring import near_duplicates, temporal_factor
from memstack.domain.temporal import TimeWindow, temporal_score
from memstack.domain.text import index_terms, query_index_terms
from memstack.models import MemoryFilters, ScoredId
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
            pool = self._fuse(run)
        with clock.stage("temporal"):
            self._temporal(run, pool, analysis.window)
        with clock.stage("dedup"):
            self._dedup(run, pool)
        with clock.stage("rerank"):
            self._rerank(run, pool)
        with clock.stage("history"):
            # Raw turns whose memories were all replaced say so, and rank below what is current.
            stale = mark_superseded_turns(
                run.store, req, pool, window=2 * req.top_k, demote=cfg.superseded_turns_last and not history
            )
            rows = pool.order
            if req.min_score is not None:
                rows = [j for j in rows if pool.score[j] >= req.min_score]
            # Only now are records read: for the hits returned, not for the whole pool.
            hits = pool.hits(run.store, req.tenant, req.user_id, rows[: req.top_k])
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
    def _fuse(self, run: _Search) -> Pool:
        """Weighted RRF over evidence units (``units``) orders the pool; scores are probabilities."""
        cfg, req = self.config, run.req
        pool, fusion = self._pool(run)
        n = len(pool)
        rankings = {"vector": run.vector, "bm25": run.bm25, "bm25_prf": run.prf}
        weights = {"vector": cfg.weight_vector, "bm25": cfg.weight_bm25, "bm25_prf": cfg.weight_prf}
        # First place in the vector and BM25 rankings (and the feedback one, when it ran)
        # scales to 1. A query no word of which matches anything has no BM25 ranking:
        # its best result then scales to the vector weight alone, and scores low.
        ran = {"vector", "bm25", *(("bm25_prf",) if run.prf else ())}
        top = sum(weights[name] for name in ran) / (cfg.rrf_k + 1)
        # The columns in the order explain shows them.
        for name in ("vector_rank", "vector", "bm25_rank", "bm25", "bm25_prf_rank"):
            pool.column(name)
        row_of = {memory_id: j for j, memory_id in enumerate(pool.ids)}
        for name, ranking in rankings.items():
            rank_col, raw_col = pool.column(f"{name}_rank"), pool.column(name) if name != "bm25_prf" else None
            for rank, hit in enumerate(ranking, start=1):
                j = row_of.get(hit.id)
                if j is not None:
                    rank_col[j] = float(rank)
                    if raw_col is not None:
                        raw_col[j] = hit.score
        cosines = (pool.facts.vectors @ run.query_vec if n else np.zeros(0, dtype=np.float32)).tolist()
        cosines = [c if has else 0.0 for c, has in zip(cosines, pool.has_vector, strict=True)]
        pool.column("cosine")[:] = cosines
        # Coverage reads every pooled text: only when it counts, or when explain asks for it.
        model = cfg.score_model
        coverages = [0.0] * n
        if bool(model.coverage or model.result_coverage) or req.explain:
            query_terms = query_index_terms(req.query)
            texts = pool.records(run.store, req.tenant, req.user_id, range(n))
            col = pool.column("coverage")
            for j, record in texts.items():
                coverages[j] = col[j] = coverage(query_terms, index_terms(record.indexed_text))
        # Computed when it counts, or when explain asks for every signal.
        category = [0.0] * n
        with_vectors = np.flatnonzero(pool.facts.has_vector)
        if (model.category or req.explain) and len(with_vectors):
            p_category = self.categories.query_weights(run.query_vec)
            values = self.categories.affinity(p_category, pool.facts.vectors[with_vectors])
            for j, value in zip(with_vectors.tolist(), values.tolist(), strict=True):
                category[j] = float(value)
            pool.column("category")[:] = category
        rrf = [fusion.fused[key] for key in fusion.unit_of]
        pool.column("rrf")[:] = rrf
        pool.column("record_rrf")[:] = [fusion.own[i] for i in pool.ids]
        pool.column("unit_size")[:] = [float(len(fusion.members[key])) for key in fusion.unit_of]
        scaled = [value / top if top > 0 else 0.0 for value in rrf]
        pool.column("rrf_scaled")[:] = scaled
        # What the query found at all: the same for each of its results.
        best_cosine = max(cosines, default=0.0)
        best_coverage = max(coverages, default=0.0)
        pool.column("query_cosine")[:] = [best_cosine] * n
        pool.column("query_coverage")[:] = [best_coverage] * n
        pool.score = [
            model.probability(scaled[j], best_cosine, best_coverage, category[j], cosines[j], coverages[j])
            for j in range(n)
        ]
        pool.column("fused")[:] = pool.score
        pool.ranked("fusion")
        run.status["fusion"] = f"ok: {len(fusion.own)} fused, {n} carried on in {len(fusion.members)} units"
        return pool

    def _pool(self, run: _Search) -> tuple[Pool, _Units]:
        """The best candidates by their own fusion, read as columns, grouped into units and fused per unit."""
        cfg, req = self.config, run.req
        ranks = units.field_ranks({"vector": run.vector, "bm25": run.bm25, "bm25_prf": run.prf})
        own = units.record_rrf(ranks, cfg.field_weights, cfg.rrf_k)
        pool_ids = sorted(own, key=lambda i: own[i], reverse=True)[: max(cfg.candidate_pool, req.top_k)]
        facts, records = read_candidates(run.store, req.tenant, req.user_id, pool_ids, run.vectors)
        pool = Pool(facts, records)
        unit_of = [
            units.unit_key_of(req.tenant, req.user_id, i, is_turn, newest)
            for i, is_turn, newest in zip(pool.ids, pool.stm, facts.last_source, strict=True)
        ]
        members: dict[str, list[str]] = {}
        for i, key in zip(pool.ids, unit_of, strict=True):
            members.setdefault(key, []).append(i)
        candidate_turns = {i for by_id in ranks.values() for i in by_id if units.field_of(i) == units.TURNS}
        sources = self._source_turns(run, pool, unit_of)
        fused = units.unit_rrf(members, candidate_turns, ranks, cfg.field_weights, cfg.rrf_k, sources)
        # Best unit first; within a unit, its records by their own fusion (score ties keep this order).
        ids = pool.ids
        pool.order = sorted(range(len(pool)), key=lambda j: (fused[unit_of[j]], own[ids[j]]), reverse=True)
        return pool, _Units(own=own, unit_of=unit_of, members=members, fused=fused)

    @staticmethod
    def _source_turns(run: _Search, pool: Pool, unit_of: list[str]) -> dict[str, set[str]]:
        """Per unit, the turns of every source of its memories (``units.source_turns``).

        The index holds each memory's newest source; a memory made from several
        turns (an update) is read for the older ones, and kept for the hits.
        """
        req = run.req
        updated = [j for j in range(len(pool)) if not pool.stm[j] and pool.n_sources[j] > 1]
        records = pool.records(run.store, req.tenant, req.user_id, updated)
        sources: dict[str, set[str]] = {}
        for j, key in enumerate(unit_of):
            newest = pool.facts.last_source[j]
            if pool.stm[j] or newest is None:
                continue
            record = records.get(j)
            ids = record.source_ids if record is not None else [newest]
            sources.setdefault(key, set()).update(units.source_turns_of(req.tenant, req.user_id, ids))
        return sources

    # ------------------------------------------------------------------ stage 5
    def _temporal(self, run: _Search, pool: Pool, window: TimeWindow | None) -> None:
        cfg, c = self.config, pool.facts
        if window is not None:
            pool.column("temporal"), pool.column("temporal_factor")
        consolidated = c.consolidated.tolist()
        weaker = [j for j in pool.order if pool.stm[j] and consolidated[j]]
        if weaker and cfg.consolidated_stm_weight > 0:
            pool.column("consolidated_weight")
        pool.column("score")
        hidden: set[int] = set()
        for j in pool.order:
            score = pool.score[j]
            if window is not None:
                when = datetime.fromtimestamp(float(c.when[j]), UTC)
                t = temporal_score(
                    window.distance_days(when, cfg.temporal_report_lag_days), cfg.temporal_window_days
                )
                factor = temporal_factor(t, cfg.temporal_blend)
                pool.put("temporal", j, t)
                # A factor, so the score stays a probability: inside the window it is unchanged.
                pool.put("temporal_factor", j, factor)
                score *= factor
            pool.score[j] = score
        for j in weaker:
            # STM already folded into LTM by consolidation counts for less (0 hides it).
            if cfg.consolidated_stm_weight <= 0:
                hidden.add(j)
                continue
            pool.put("consolidated_weight", j, cfg.consolidated_stm_weight)
            pool.score[j] *= cfg.consolidated_stm_weight
        if hidden:
            pool.order = [j for j in pool.order if j not in hidden]
        for j in pool.order:
            pool.put("score", j, pool.score[j])
        run.status["temporal"] = (
            f"ok: window {window.phrase!r}" if window is not None else "skipped: the query names no time"
        )
        pool.ranked("temporal")

    # ------------------------------------------------------------------ stage 6
    def _dedup(self, run: _Search, pool: Pool) -> None:
        cfg, c = self.config, pool.facts
        with_vectors = [j for j in pool.order if pool.has_vector[j]]
        dropped = {with_vectors[k] for k in near_duplicates(c.vectors[with_vectors], cfg.dedup_threshold)}
        pool.order = [j for j in pool.order if j not in dropped]
        merged = stages.merge_turns_into_memories(pool) if cfg.dedup_by_source else set()
        if merged:
            pool.order = [j for j in pool.order if j not in merged]
        run.status["dedup"] = f"ok: {len(dropped)} removed, {len(merged)} turns merged into their memories"
        pool.ranked("dedup")

    # ------------------------------------------------------------------ stage 7
    def _rerank(self, run: _Search, pool: Pool) -> None:
        if self.reranker is None:
            run.status["rerank"] = "skipped: no reranker configured"
            return
        req = run.req
        head = pool.order[: self.config.rerank_candidates]
        records = pool.records(run.store, req.tenant, req.user_id, head)
        head = [j for j in head if j in records]  # a record erased since the pool was read is gone
        try:
            scores = stages.rerank(self.reranker, req.query, [records[j] for j in head])
            run.status["rerank"] = f"ok: {self.reranker.name}"
        except Exception as exc:  # a reranker outage must never fail the search
            run.degraded.append("rerank")
            run.status["rerank"] = f"failed: {type(exc).__name__}: {exc}"
            logger.warning("rerank failed; fused order kept", extra={"error": repr(exc)})
            return
        for j, score in zip(head, scores, strict=True):
            pool.put("rerank", j, score)
            pool.score[j] = score
        head = sorted(head, key=pool.score.__getitem__, reverse=True)
        pool.order = head + pool.order[self.config.rerank_candidates :]
        pool.ranked("rerank", sort=False)


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
class _Units:
    """Stage 4's fusion: each candidate's own, its unit (per pool row), each unit's members and fusion."""

    own: dict[str, float]
    unit_of: list[str]
    members: dict[str, list[str]]
    fused: dict[str, float]
