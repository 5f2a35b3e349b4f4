"""Dense feedback: a second vector search near the first results, for questions asking for several things."""

from __future__ import annotations

from memstack.domain.query_analysis import analyse_query, asks_several
from memstack.domain.retrieval.columns import BM25_RANK, VECTOR_RANK
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.stages.dense_feedback import below_head
from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


def test_a_question_asking_for_several_things_is_told_from_one_asking_for_one() -> None:
    several = [
        "What books has Melanie read?",
        "Which cities has John been to?",
        "What musical artists/bands has Melanie seen?",
        "How many fields did I add to my message schema?",
        "In what ways is Caroline participating in the LGBTQ community?",
        "What kinds of pottery have they made?",
        "Can you give me a summary of my resume analyzer project?",
        "Can you list the order in which I brought up each feature?",
        "How do Jon and Gina both like to destress?",
    ]
    one = [
        "What is Caroline's identity?",
        "When did Melanie paint a sunrise?",
        "What kind of pot did Mel and her kids make with clay?",
        "What is the request limit per minute set for the API?",
        "Where does Maya live now?",
        "What was grandma's gift to Caroline?",
    ]
    assert [q for q in several if asks_several(q) is None] == []
    assert [q for q in one if asks_several(q) is not None] == []
    analysis = analyse_query("What books has Melanie read?", REF)
    assert analysis.several_intent and "several: What books has" in analysis.cues
    assert not analyse_query("When did Melanie paint a sunrise?", REF).several_intent


#: the pipeline without dense feedback, and with feedback strong enough to reorder five memories
OFF = RetrievalConfig(weight_vector_prf=0.0)
STRONG = RetrievalConfig(weight_vector_prf=5.0, vector_prf_beta=10.0, vector_prf_docs=1, vector_prf_after=0)


def _request(query: str) -> SearchRequest:
    return SearchRequest(tenant=T, user_id=U, query=query, top_k=5, reference_time=REF)


def _store(service: MemoryService) -> None:
    put(
        service,
        record(service, "we went camping by the lake with the kids", "a"),
        record(service, "camping at the lake again, the kids loved the lake", "b"),
        record(service, "the kids swam in the lake all afternoon", "c"),
        record(service, "tax forms are due in April", "d"),
        record(service, "my accountant files the tax forms", "e"),
    )


def test_dense_feedback_is_fused_for_a_question_asking_for_several_things(service: MemoryService) -> None:
    _store(service)
    on = RetrievalConfig(weight_vector_prf=0.3)
    several = _request("what trips have we taken?")
    result = Retriever(service.store, service.embedder, on).search(several)
    assert "dense feedback: 5 candidates" in result.stage_status["bm25"]
    assert all("vector_prf_rank" in h.stages for h in result.hits)
    # A question asking for one thing is searched as without it: same hits, same scores.
    one = _request("where did we camp?")
    with_it = Retriever(service.store, service.embedder, on).search(one)
    without = Retriever(service.store, service.embedder, OFF).search(one)
    assert "dense feedback" not in with_it.stage_status["bm25"]
    assert [(h.record.id, h.score) for h in with_it.hits] == [(h.record.id, h.score) for h in without.hits]
    assert all("vector_prf_rank" not in h.stages for h in with_it.hits)
    # Scope "all" runs it for every question.
    every = Retriever(service.store, service.embedder, on.model_copy(update={"vector_prf_scope": "all"}))
    assert "dense feedback" in every.search(one).stage_status["bm25"]


def _plain_and_strong(service: MemoryService) -> tuple[SearchRequest, SearchResult, SearchResult]:
    """A several-intent search of ``_store``'s memories without dense feedback and with ``STRONG``."""
    _store(service)
    req = _request("how many tax forms and trips?")
    plain = Retriever(service.store, service.embedder, OFF).search(req)
    return req, plain, Retriever(service.store, service.embedder, STRONG).search(req)


def test_dense_feedback_moves_the_query_toward_its_first_hits(service: MemoryService) -> None:
    _, plain, moved = _plain_and_strong(service)
    firsts = {h.record.id for h in plain.hits if 1.0 in (h.stages.get(VECTOR_RANK), h.stages.get(BM25_RANK))}
    # Moved far toward the vector and BM25 stages' first hits, it ranks one of them first.
    top = next(h for h in moved.hits if h.stages["vector_prf_rank"] == 1.0)
    assert top.record.id in firsts
    # At a weight this strong the feedback ranking changes the order.
    assert [h.record.id for h in moved.hits] != [h.record.id for h in plain.hits]


def test_below_head_keeps_the_plain_first_places_and_ranks_the_rest_by_the_feedback() -> None:
    plain = {"a": 0.9, "b": 0.8, "c": 0.3, "d": 0.2}
    expanded = {"a": 0.5, "b": 0.95, "c": 0.1, "d": 0.85}
    out = below_head(plain, expanded, 2)
    assert sorted(out, key=lambda i: -out[i]) == ["a", "b", "d", "c"]
    # The head keeps its plain values; "d" (0.85 with feedback) falls just below "b"; "c" keeps its own.
    assert out["a"] == 0.9 and out["b"] == 0.8 and out["d"] < 0.8 and out["d"] > 0.79 and out["c"] == 0.1
    assert below_head(plain, expanded, 10) == plain


def test_dense_feedback_fills_only_the_places_below_the_head(service: MemoryService) -> None:
    req, plain, moved = _plain_and_strong(service)
    after_two = STRONG.model_copy(update={"vector_prf_after": 2})
    kept = Retriever(service.store, service.embedder, after_two).search(req)
    ids = [[h.record.id for h in r.hits] for r in (plain, moved, kept)]
    assert ids[1][:2] != ids[0][:2]  # the feedback alone changes the first two
    assert ids[2][:2] == ids[0][:2]  # kept: the first two are the plain search's
    assert sorted(ids[2]) == sorted(ids[1])
    scores = [h.score for h in kept.hits]
    assert scores == sorted(scores, reverse=True)
