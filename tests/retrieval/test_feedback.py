"""RM3-style pseudo-relevance feedback: the second BM25 query and where its words come from."""

from __future__ import annotations

from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.feedback import expanded_query, expansion_terms
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


def test_expansion_takes_words_the_best_hits_share_and_not_the_querys_own() -> None:
    feedback = [
        ("Melanie went camping with the kids by the lake", 9.0),
        ("camping trip: the kids roasted marshmallows by the lake", 6.0),
        ("Melanie painted a sunset", 2.0),
    ]
    terms = expansion_terms("What activities does Melanie do?", feedback, n_terms=5, min_docs=2)
    # "camping", "kids" and "lake" are in two of the hits; "Melanie" is the query's own word,
    # "the"/"by" are stopwords, "painted" is in one hit only.
    assert set(terms) == {"camping", "kids", "lake"}
    assert terms[0] == "camping"  # the most weight: in both hits, the first one scoring highest
    assert expansion_terms("camp", [("camping camped camps", 1.0)] * 2, 5) == []  # same stem as the query
    assert expansion_terms("x", feedback, n_terms=0) == [] and expansion_terms("x", [], 5) == []
    assert expanded_query("q", ["a", "b"]) == "q a b" and expanded_query("q", []) == "q"


def test_the_feedback_ranking_is_fused_when_switched_on(service: MemoryService) -> None:
    put(
        service,
        record(service, "we went camping by the lake with the kids", "a"),
        record(service, "camping at the lake again, the kids loved it", "b"),
        record(service, "the kids swam in the lake all afternoon", "c"),
        record(service, "tax forms are due in April", "d"),
    )
    req = SearchRequest(tenant=T, user_id=U, query="camping", top_k=4, reference_time=REF)
    on = Retriever(service.store, service.embedder, RetrievalConfig(prf_terms=5, prf_docs=2)).search(req)
    assert "feedback query" in on.stage_status["bm25"]
    # "c" never says "camping": only the feedback words ("lake", "kids") find it by BM25.
    c = next(h for h in on.hits if h.record.source_ids == ["c"])
    assert "bm25_prf_rank" in c.stages and "bm25_rank" not in c.stages
    off = Retriever(service.store, service.embedder, RetrievalConfig(prf_terms=0)).search(req)
    assert "feedback" not in off.stage_status["bm25"]
    assert all("bm25_prf_rank" not in h.stages for h in off.hits)
