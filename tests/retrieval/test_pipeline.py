"""The eight stages on small hand-made cases where the right answer is known."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.stages import STAGES
from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.domain.scoring import weighted_rrf
from memstack.domain.vectors import coarse_prefix
from memstack.models import ScoredId, Tier
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


def search(service: MemoryService, query: str, **kw: Any) -> SearchResult:
    return service.search(SearchRequest(tenant=T, user_id=U, query=query, reference_time=REF, **kw))


def test_every_stage_runs_and_is_explained(service: MemoryService, caplog: pytest.LogCaptureFixture) -> None:
    put(
        service,
        record(service, "I adopted a greyhound called Pixel", "m1"),
        record(service, "My sister lives in Lisbon", "m2"),
    )
    with caplog.at_level(logging.INFO, logger="memstack"):
        result = search(service, "greyhound Pixel", explain=True)
    assert list(result.stage_status) == list(STAGES)
    assert set(STAGES) | {"total"} == set(result.stage_durations)
    assert all(v >= 0 for v in result.stage_durations.values())
    assert result.stage_status["rerank"].startswith("skipped") and result.degraded == []
    top = result.hits[0]
    assert top.record.source_ids == ["m1"]
    assert {"vector", "vector_rank", "bm25", "bm25_rank", "rrf", "fused", "score"} <= set(top.stages)
    lines = [r for r in caplog.records if r.getMessage() == "memory_retrieval"]
    assert len(lines) == 1
    assert lines[0].event == "memory_retrieval"  # type: ignore[attr-defined]
    assert set(lines[0].stage_durations) == set(STAGES) | {"total"}  # type: ignore[attr-defined]


def test_retrieval_log_line_is_structured_json(
    service: MemoryService, capsys: pytest.CaptureFixture[str]
) -> None:
    put(service, record(service, "I adopted a greyhound called Pixel", "m1"))
    search(service, "greyhound")
    line = next(json.loads(x) for x in capsys.readouterr().err.splitlines() if "memory_retrieval" in x)
    assert line["event"] == "memory_retrieval" and "vector" in line["stage_durations"]


def test_rrf_and_fused_scores_match_hand_computed_values(service: MemoryService) -> None:
    put(
        service,
        record(service, "apple banana cherry", "a"),
        record(service, "banana", "b"),
        record(service, "durian", "c"),
    )
    paper = Retriever(
        service.store, service.embedder, RetrievalConfig(weight_vector=0.7, weight_bm25=0.3, rrf_k=10)
    )
    req = SearchRequest(tenant=T, user_id=U, query="banana", top_k=3, reference_time=REF, explain=True)
    result = paper.search(req)
    by_source = {h.record.source_ids[0]: h for h in result.hits}
    for hit in result.hits:
        expected = 0.0
        if "vector_rank" in hit.stages:
            expected += 0.7 / (10 + hit.stages["vector_rank"])
        if "bm25_rank" in hit.stages:
            expected += 0.3 / (10 + hit.stages["bm25_rank"])
        if "bm25_prf_rank" in hit.stages:
            expected += 0.3 / (10 + hit.stages["bm25_prf_rank"])
        assert hit.stages["rrf"] == pytest.approx(expected)
        # The score is the calibrated probability of the three signals, and the order follows it.
        model = paper.config.score_model
        assert hit.stages["fused"] == pytest.approx(
            model.probability(
                hit.stages["rrf_scaled"], hit.stages["query_cosine"], hit.stages["query_coverage"]
            )
        )
        assert hit.stages["query_coverage"] == 1.0  # the best coverage in the pool (explain computes it)
    # The exact match is first in both rankings: 0.7/11 + 0.3/11, scaled to 1.
    assert by_source["b"].stages["rrf"] == pytest.approx(1.0 / 11)
    assert by_source["b"].stages["rrf_scaled"] == pytest.approx(1.0)
    assert by_source["b"].stages["coverage"] == 1.0 and result.hits[0].record.source_ids == ["b"]
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    # Without explain (and with its weight 0, the default) coverage is not computed at all.
    plain = paper.search(SearchRequest(tenant=T, user_id=U, query="banana", top_k=3, reference_time=REF))
    assert all("coverage" not in h.stages for h in plain.hits)
    assert [h.score for h in plain.hits] == pytest.approx([h.score for h in result.hits])
    assert weighted_rrf({"v": [ScoredId(id="x", score=1)]}, {"v": 0.7}, 10) == {"x": pytest.approx(0.7 / 11)}


def test_a_dated_memory_wins_a_last_week_query(service: MemoryService) -> None:
    # Same words, different dates: only the time tells them apart.
    last_week = record(
        service, "went hiking in the hills with Sam", "old", event_time=REF - timedelta(days=6)
    )
    months_ago = record(
        service, "went hiking in the hills with Sam and Jo", "older", event_time=REF - timedelta(days=90)
    )
    put(service, months_ago, last_week)
    result = search(service, "where did I go hiking last week", explain=True, top_k=2)
    assert result.stage_status["temporal"].startswith("ok")
    assert result.analysis["window"]["phrase"] == "last week"
    first, second = result.hits
    assert first.record.source_ids == ["old"]
    assert first.stages["temporal"] == 1.0  # inside the window: distance 0
    # 90 days before a window that ends 3 days before REF is far past 30 days: the floor.
    assert second.stages["temporal"] == pytest.approx(0.1)
    # The temporal factor blend + (1 - blend) · temporal keeps the score a probability:
    # inside the window it is unchanged, far outside it is 0.6 + 0.4 · 0.1 of what it was.
    assert first.stages["temporal_factor"] == 1.0 and first.score == pytest.approx(first.stages["fused"])
    assert second.score == pytest.approx(second.stages["fused"] * (0.6 + 0.4 * 0.1))


def test_no_time_phrase_leaves_the_fused_order(service: MemoryService) -> None:
    put(service, record(service, "went hiking in the hills", "x", event_time=REF - timedelta(days=400)))
    result = search(service, "hiking", explain=True)
    assert result.stage_status["temporal"].startswith("skipped") and "temporal" not in result.hits[0].stages


def test_matryoshka_coarse_pass_keeps_the_exact_top_k(service: MemoryService) -> None:
    rng = np.random.default_rng(7)
    dim, coarse_dim = service.embedder.dim, service.settings.embedding.coarse_dim
    # Vectors whose information is concentrated in the prefix, as Matryoshka training makes it.
    scale = np.where(np.arange(dim) < coarse_dim, 1.0, 0.15)
    records = []
    for n in range(300):
        vec = rng.normal(size=dim) * scale
        vec /= np.linalg.norm(vec)
        r = record(service, f"memory {n}", f"s{n}")
        r.embedding_full = vec.tolist()
        r.embedding_coarse = coarse_prefix(vec, coarse_dim).tolist()
        records.append(r)
    put(service, *records)
    retriever = service.retriever
    full = np.array([r.embedding_full for r in records])
    for _ in range(5):
        q = rng.normal(size=dim) * scale
        q = (q / np.linalg.norm(q)).astype(np.float32)
        exact = [records[i].id for i in np.argsort(-(full @ q))[:10]]
        got = [s.id for s in retriever.vector_stage(SearchRequest(tenant=T, user_id=U, query="-"), q)[:10]]
        assert got == exact


def test_near_duplicates_collapse_to_the_better_one(service: MemoryService) -> None:
    put(
        service,
        record(service, "I love green tea", "a"),
        record(service, "I love green tea", "b"),
        record(service, "green tea in the morning", "c"),
    )
    result = search(service, "green tea", top_k=5)
    sources = [h.record.source_ids[0] for h in result.hits]
    assert sorted(sources) in (["a", "c"], ["b", "c"])
    assert result.stage_status["dedup"] == "ok: 1 removed, 0 turns merged into their memories"


def test_history_query_returns_the_old_version_marked(service: MemoryService) -> None:
    [old] = put(service, record(service, "I live in Berlin", "m1"))
    new = service.update(T, U, old.id, "I live in Lisbon")
    plain = search(service, "where do I live")
    assert [h.record.id for h in plain.hits] == [new.id]
    result = search(service, "where did I use to live before")
    assert result.stage_status["history"].startswith("ok")
    chain = [(h.record.content, h.superseded) for h in result.hits]
    assert chain == [("I live in Berlin", True), ("I live in Lisbon", False)]
    assert [h.stages["history_version"] for h in result.hits] == [1.0, 2.0]


class _FailingReranker:
    name = "failing"

    def rerank(self, query: str, passages: list[str]) -> list[float]:
        raise TimeoutError("reranker timed out")


class _LengthReranker:
    """Prefers longer passages: an order the fused ranking would never give."""

    name = "length"

    def rerank(self, query: str, passages: list[str]) -> list[float]:
        return [float(len(p)) for p in passages]


def _with_reranker(service: MemoryService, reranker: object) -> Retriever:
    return Retriever(service.store, service.embedder, service.retriever.config, reranker)  # type: ignore[arg-type]


def test_a_failing_reranker_degrades_gracefully(service: MemoryService) -> None:
    put(service, record(service, "tea", "a"), record(service, "tea with lemon and a long story", "b"))
    baseline = search(service, "tea")
    result = _with_reranker(service, _FailingReranker()).search(
        SearchRequest(tenant=T, user_id=U, query="tea", reference_time=REF)
    )
    assert result.degraded == ["rerank"] and result.stage_status["rerank"].startswith("failed: TimeoutError")
    assert [h.record.id for h in result.hits] == [h.record.id for h in baseline.hits]


def test_a_reranker_reorders_the_head(service: MemoryService) -> None:
    put(service, record(service, "tea", "a"), record(service, "tea with lemon and a long story", "b"))
    result = _with_reranker(service, _LengthReranker()).search(
        SearchRequest(tenant=T, user_id=U, query="tea", reference_time=REF)
    )
    assert [h.record.source_ids[0] for h in result.hits] == ["b", "a"]
    assert (
        result.hits[0].score
        == result.hits[0].stages["rerank"]
        == float(len("tea with lemon and a long story"))
    )


def test_consolidated_stm_counts_less_or_not_at_all(service: MemoryService) -> None:
    a, b = put(
        service,
        record(service, "piano lessons with Clara", "a", tier=Tier.STM),
        record(service, "piano lessons with Clara in the evenings", "b", tier=Tier.STM),
    )
    service.store.mark(T, U, [a.id], consolidated=True)
    # Full weight by default (docs/retrieval.md, "Consolidation"); less when configured so.
    halved = Retriever(service.store, service.embedder, RetrievalConfig(consolidated_stm_weight=0.5))
    result = halved.search(SearchRequest(tenant=T, user_id=U, query="piano lessons with Clara", explain=True))
    hit_a = next(h for h in result.hits if h.record.id == a.id)
    assert hit_a.stages["consolidated_weight"] == 0.5
    assert hit_a.score == pytest.approx(0.5 * hit_a.stages["fused"])
    hidden = Retriever(service.store, service.embedder, RetrievalConfig(consolidated_stm_weight=0.0))
    ids = [h.record.id for h in hidden.search(SearchRequest(tenant=T, user_id=U, query="piano")).hits]
    assert ids == [b.id]


def test_other_users_and_tenants_are_never_seen(service: MemoryService) -> None:
    put(service, record(service, "secret plan", "mine"))
    other = record(service, "secret plan", "theirs", user_id="u2")
    other_tenant = record(service, "secret plan", "foreign", tenant="t2")
    service.store.put([other, other_tenant])
    result = search(service, "secret plan", top_k=10)
    assert [h.record.source_ids for h in result.hits] == [["mine"]]


def test_scores_mean_the_same_in_every_query_and_min_score_keeps_the_likely_ones(
    service: MemoryService,
) -> None:
    put(
        service,
        record(service, "adopted a greyhound called Pixel", "a"),
        record(service, "the quarterly tax filing is due in April", "b"),
    )
    good = search(service, "adopted a greyhound called Pixel", top_k=2)
    nonsense = search(service, "zzyzx quorble", top_k=2)
    # The best answer to a query that matches well is likely relevant; the best "answer"
    # to one that matches nothing is not, though min-max scaling would have called both 1.0.
    assert good.hits[0].score > 0.3
    assert nonsense.hits and nonsense.hits[0].score < 0.05
    assert search(service, "zzyzx quorble", top_k=2, min_score=0.1).hits == []
    kept = search(service, "adopted a greyhound called Pixel", top_k=2, min_score=0.1).hits
    assert [h.record.source_ids for h in kept] == [["a"]]
    # explain shows where each stage left each result
    explained = search(service, "adopted a greyhound called Pixel", top_k=2, explain=True).hits[0]
    assert {"rank_after_fusion", "rank_after_temporal", "rank_after_dedup"} <= set(explained.stages)


def test_explain_shows_what_the_query_found_at_all_the_same_for_each_result(service: MemoryService) -> None:
    put(
        service,
        record(service, "adopted a greyhound called Pixel", "a", tier=Tier.STM),
        record(service, "Pixel the greyhound loves the beach", "b"),
        record(service, "the quarterly tax filing is due in April", "c", tier=Tier.STM),
    )
    found = search(service, "greyhound Pixel", top_k=3, explain=True).hits
    absent = search(service, "zzyzx quorble", top_k=3, explain=True).hits
    signals = ("query_turn_cosine", "query_cosine_margin", "query_bm25_top", "query_bm25_margin")
    for hits in (found, absent):
        assert len(hits) == 3  # the vector stage finds every record: the whole pool is returned
        assert all(len({h.stages[name] for h in hits}) == 1 for name in signals)
    first = found[0].stages
    turns = [h.stages["cosine"] for h in found if h.record.tier == Tier.STM]
    assert first["query_turn_cosine"] == pytest.approx(max(turns))
    # Three vector hits: the first cosine over the last (fewer than ten).
    cosines = sorted((h.stages["vector"] for h in found), reverse=True)
    assert first["query_cosine_margin"] == pytest.approx(cosines[0] - cosines[-1])
    # Two BM25 matches: their margin as a share of the first; a query no word of which the
    # store holds has no BM25 match at all, and a turn less like it.
    bm25 = sorted((h.stages["bm25"] for h in found if "bm25" in h.stages), reverse=True)
    assert len(bm25) == 2 and first["query_bm25_top"] == pytest.approx(bm25[0])
    assert first["query_bm25_margin"] == pytest.approx((bm25[0] - bm25[1]) / bm25[0])
    assert absent[0].stages["query_bm25_top"] == absent[0].stages["query_bm25_margin"] == 0.0
    assert absent[0].stages["query_turn_cosine"] < first["query_turn_cosine"]
    # Signals only: the order and the scores are those of a search without explain.
    plain = search(service, "greyhound Pixel", top_k=3).hits
    assert [h.record.id for h in plain] == [h.record.id for h in found]
    assert [h.score for h in plain] == pytest.approx([h.score for h in found])
