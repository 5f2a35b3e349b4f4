"""A question about the present ranks a newer statement of the same thing first (issue 21 item 5)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from memstack.domain.query_analysis import analyse_query, asks_current
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchHit, SearchRequest
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


@pytest.mark.parametrize(
    "query",
    [
        "What is the rate limit of my API?",
        "How many problems have I completed so far?",
        "What score did I get on the quiz most recently?",
        "What's Maya's job?",
        "Where does Kim live now?",
        "What budget ceiling have I set for the new phone?",
    ],
)
def test_questions_about_the_present(query: str) -> None:
    assert asks_current(query)
    assert analyse_query(query, REF).current_intent


@pytest.mark.parametrize(
    "query",
    [
        "When did I set the rate limit?",
        "What did Kim eat at the party?",
        "What was the rate limit in March?",
        "rate limit API",  # no verb: nothing says which moment it asks about
    ],
)
def test_questions_about_one_moment(query: str) -> None:
    assert not asks_current(query)


@pytest.mark.parametrize(
    "query",
    [
        "What was my rate limit before?",
        "What rate limit did I have previously?",
        "Has the rate limit changed?",
    ],
)
def test_history_questions_never_ask_for_the_newest_only(query: str) -> None:
    analysis = analyse_query(query, REF)
    assert analysis.history_intent and not analysis.current_intent


OLD = "The API rate limit of the user is 100 requests per minute, the API rate limit set in Flask"
NEW = "The API rate limit of the user is now 120 requests per minute in Flask"


def _two_statements(service: MemoryService) -> None:
    # The older one says more of the question's words: it ranks first on the text alone.
    said = REF - timedelta(days=30)
    put(
        service,
        record(service, OLD, "m1", created_at=said, event_time=said),
        record(
            service, NEW, "m2", created_at=said + timedelta(days=11), event_time=said + timedelta(days=11)
        ),
        record(service, "The user walks the dog every morning", "m3", created_at=said),
    )


def _search(service: MemoryService, query: str, *, on: bool = True) -> list[SearchHit]:
    # Three records: the second place scores about half the first, whatever its text (the ratio a
    # real search needs is measured on fuller rankings: docs/retrieval.md).
    config = service.retriever.config.model_copy(update={"newest_first": on, "newest_first_ratio": 0.5})
    retriever = Retriever(service.store, service.embedder, config)
    req = SearchRequest(tenant=T, user_id=U, query=query, top_k=5, reference_time=REF, explain=True)
    return retriever.search(req).hits


def _contents(hits: list[SearchHit]) -> list[str]:
    return [h.record.content for h in hits]


def test_the_newer_statement_ranks_first_for_a_question_about_the_present(service: MemoryService) -> None:
    _two_statements(service)
    query = "What is the API rate limit set in Flask?"
    assert _contents(_search(service, query, on=False))[:2] == [OLD, NEW]  # the text alone
    hits = _search(service, query)
    assert _contents(hits)[:2] == [NEW, OLD]
    # It took the place, and the score, of the statement it moved above: scores stay in rank order.
    assert hits[0].stages["newer_from"] < hits[0].score
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize(
    "query",
    ["When did I set the API rate limit in Flask?", "What was the API rate limit set in Flask before?"],
)
def test_past_and_history_questions_keep_the_order_of_the_text(service: MemoryService, query: str) -> None:
    _two_statements(service)
    contents = _contents(_search(service, query))
    assert contents.index(OLD) < contents.index(NEW)


def test_a_newer_statement_that_answers_much_worse_stays_below(service: MemoryService) -> None:
    said = REF - timedelta(days=30)
    put(
        service,
        record(service, OLD, "m1", created_at=said),
        *(
            record(service, f"The API rate limit set in Flask was discussed {n}", f"d{n}", created_at=said)
            for n in ("at work", "on Monday", "with the team")
        ),
        # Alike enough to the old one (at this similarity), but it answers the question much worse.
        record(service, "The user runs Flask at home", "m2", created_at=said + timedelta(days=11)),
    )
    config = service.retriever.config.model_copy(update={"newest_first_similarity": 0.1})
    retriever = Retriever(service.store, service.embedder, config)
    req = SearchRequest(
        tenant=T, user_id=U, query="What is the API rate limit set in Flask?", reference_time=REF
    )
    assert _contents(retriever.search(req).hits)[0] == OLD
