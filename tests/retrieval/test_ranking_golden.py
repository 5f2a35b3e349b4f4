"""Result order and top scores on a fixed corpus, against the recorded answers.

A refactoring guard: the file must not move when only the shape of the code or
the cost of a search changes (issue 11 rebuilt the search path on columns; issue
22 made the stages components). Both ways of reading the pool must give it: from
the embedded store's index (``CandidateReader``) and from records, as on every
other backend. Scores may differ in the last float digits (cosines computed as
one matrix product instead of one dot product each); orders may not. Whether the
answers are *good* is the quality floors' job (``tests/evaluation``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memstack.models import MemoryRecord, ScoredId
from memstack.ports.store import CandidateReader, MemoryStore, ReadView, TermCounts
from memstack.service import MemoryService

from tests.retrieval import ranking_corpus

REGENERATE = "python -m tests.retrieval.ranking_corpus"


class RecordsOnly:
    """The store with only the ``MemoryStore`` port: the pipeline reads records, as on other backends."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def get_many(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, MemoryRecord]:
        return self._store.get_many(tenant, user_id, ids)

    def get(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        return self._store.get(tenant, user_id, memory_id)

    def successor(self, tenant: str, user_id: str, memory_id: str) -> MemoryRecord | None:
        return self._store.successor(tenant, user_id, memory_id)

    def find_by_source(self, tenant: str, user_id: str, source_id: str) -> list[MemoryRecord]:
        return self._store.find_by_source(tenant, user_id, source_id)

    def bm25_search(self, tenant: str, user_id: str, query: str, k: int, filters: Any) -> list[ScoredId]:
        return self._store.bm25_search(tenant, user_id, query, k, filters)

    def vector_search(self, tenant: str, user_id: str, q: np.ndarray, k: int, filters: Any) -> list[ScoredId]:
        return self._store.vector_search(tenant, user_id, q, k, filters)

    def term_counts(self, tenant: str, user_id: str, query: str) -> TermCounts:
        return self._store.term_counts(tenant, user_id, query)

    def embeddings(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, np.ndarray]:
        return self._store.embeddings(tenant, user_id, ids)

    # Stage 2's exact path is the store's (``ExactVectors``), not a way of reading the pool:
    # kept, so both readings rank the same candidates.
    def exact_vector_search(
        self, tenant: str, user_id: str, q: np.ndarray, k: int, filters: Any, *, below: int
    ) -> list[ScoredId] | None:
        return self._store.exact_vector_search(tenant, user_id, q, k, filters, below=below)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryService]:
    service: MemoryService = ranking_corpus.build(Path(tmp_path_factory.mktemp("golden")))
    try:
        yield service
    finally:
        service.close()


@pytest.fixture(scope="module", params=["index", "records"])
def answers(request: pytest.FixtureRequest, service: MemoryService) -> dict[str, Any]:
    """The answers read from the embedded index, and read from records as any other store is."""
    store = RecordsOnly(service.store) if request.param == "records" else None
    assert not isinstance(store, CandidateReader | ReadView)
    return ranking_corpus.run(service, store)  # type: ignore[arg-type]


def _recorded() -> list[tuple[str, str, dict[str, Any]]]:
    lines = ranking_corpus.GOLDEN.read_text().splitlines()
    return [tuple(json.loads(line)) for line in lines]


def _close(new: float, old: float) -> bool:
    return new == pytest.approx(old, rel=1e-6, abs=1e-7)


def test_every_recorded_search_is_still_asked() -> None:
    recorded = {(case, query) for case, query, _ in _recorded()}
    asked = {(name, q) for name, *_ in ranking_corpus._cases() for q in ranking_corpus.queries()}
    assert recorded == asked, f"the cases or queries changed: regenerate with {REGENERATE}"


@pytest.mark.parametrize("case", [name for name, *_ in ranking_corpus._cases()])
def test_order_and_top_scores_are_the_recorded_ones(case: str, answers: dict[str, Any]) -> None:
    mismatches = []
    for name, query, old in _recorded():
        if name != case:
            continue
        new = answers[case][query]
        if new["hits"] != old["hits"]:
            mismatches.append(f"{query!r}: order {new['hits']} != recorded {old['hits']}")
        elif not all(_close(a, b) for a, b in zip(new["scores"], old["scores"], strict=True)):
            mismatches.append(f"{query!r}: top scores {new['scores']} != recorded {old['scores']}")
    assert not mismatches, (
        f"{len(mismatches)} searches differ from the recorded answers (if a change to retrieval "
        f"is meant to change them, regenerate with {REGENERATE}):\n" + "\n".join(mismatches[:5])
    )
