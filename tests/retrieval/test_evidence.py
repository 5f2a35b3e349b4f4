"""The search's ``evidence``: a probability, per search, that the store holds evidence for the query."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from memstack.domain.retrieval.evidence import DEFAULT_EVIDENCE_MODEL, EvidenceModel, idf_coverage
from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.models import Tier
from memstack.ports.store import TermCounts
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


def search(service: MemoryService, query: str, user: str = U, **kw: Any) -> SearchResult:
    return service.search(SearchRequest(tenant=T, user_id=user, query=query, reference_time=REF, **kw))


def _idf(docs: int, df: int) -> float:
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


def test_idf_coverage_is_the_share_of_the_querys_idf_mass_the_store_holds() -> None:
    assert idf_coverage(TermCounts(10, {"greyhound": 2, "pixel": 1})) == 1.0
    assert idf_coverage(TermCounts(10, {"kickoff": 0, "agenda": 0})) == 0.0
    # A known common word and an unknown one: the unknown one is rarer, so it weighs more.
    share = idf_coverage(TermCounts(10, {"meeting": 6, "kickoff": 0}))
    assert share == pytest.approx(_idf(10, 6) / (_idf(10, 6) + _idf(10, 0)))
    assert share < 0.5
    assert idf_coverage(TermCounts(10, {})) == 1.0  # nothing to miss
    # A count read a moment after the total (a write in between) still gives a share in [0, 1].
    assert 0.0 <= idf_coverage(TermCounts(3, {"a": 5, "b": 0})) <= 1.0


def test_evidence_is_a_probability_rising_with_both_signals() -> None:
    model = DEFAULT_EVIDENCE_MODEL
    assert model.turn_cosine > 0 and model.idf_coverage > 0
    grid = [-1.0, -0.2, 0.0, 0.3, 0.6, 1.0]
    for cosine, coverage in itertools.product(grid, [0.0, 0.25, 0.5, 1.0]):
        p = model.probability(cosine, coverage)
        assert 0.0 < p < 1.0
        assert model.probability(cosine + 0.1, coverage) > p
        assert model.probability(cosine, coverage + 0.1) > p
    # Never overflows, whatever the weights.
    steep = EvidenceModel(bias=0.0, turn_cosine=1e4, idf_coverage=0.0)
    assert steep.probability(1.0, 0.0) == 1.0 and steep.probability(-1.0, 0.0) == 0.0


def _corpus(service: MemoryService, user: str = U) -> None:
    put(
        service,
        record(service, "I adopted a greyhound called Pixel", "a", tier=Tier.STM, user_id=user),
        record(service, "Pixel the greyhound loves the beach", "b", user_id=user),
        record(service, "the quarterly tax filing is due in April", "c", tier=Tier.STM, user_id=user),
    )


def test_the_search_answers_its_evidence_from_the_best_turn_and_the_stores_own_word_counts(
    service: MemoryService,
) -> None:
    _corpus(service)
    known = search(service, "what is my greyhound called?", explain=True)
    unknown = search(service, "what was on the agenda of the zanzibar kickoff?", explain=True)
    for result in (known, unknown):
        first = result.hits[0].stages
        assert all(h.stages["evidence"] == result.evidence for h in result.hits)
        expected = DEFAULT_EVIDENCE_MODEL.probability(first["query_turn_cosine"], first["query_idf_coverage"])
        assert result.evidence == pytest.approx(expected)
    assert known.hits[0].stages["query_idf_coverage"] == pytest.approx(
        idf_coverage(service.store.term_counts(T, U, "what is my greyhound called?"))
    )
    assert unknown.hits[0].stages["query_idf_coverage"] == 0.0
    assert known.evidence > unknown.evidence
    # A signal beside the scores: the results and their scores are those of a search without explain.
    plain = search(service, "what is my greyhound called?")
    assert plain.evidence == known.evidence
    assert [(h.record.id, h.score) for h in plain.hits] == [(h.record.id, h.score) for h in known.hits]


def test_another_users_memories_never_change_a_users_evidence(service: MemoryService) -> None:
    _corpus(service)
    queries = ["what is my greyhound called?", "what was on the agenda of the zanzibar kickoff?"]
    before = [search(service, q).evidence for q in queries]
    # Another user who talked about exactly what this user never did, many times.
    put(
        service,
        *(
            record(service, f"the zanzibar kickoff agenda, item {i}", f"o{i}", tier=Tier.STM, user_id="u2")
            for i in range(20)
        ),
    )
    assert [search(service, q).evidence for q in queries] == before
    assert search(service, queries[1], user="u2").evidence > before[1]


def test_an_empty_store_has_no_evidence(service: MemoryService) -> None:
    result = search(service, "what is my greyhound called?")
    assert result.hits == [] and result.evidence == 0.0
