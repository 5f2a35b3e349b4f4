"""Rankings, scores and explain output on a fixed corpus, against the recorded answers.

The file was recorded before the search path was rebuilt on columns (the pool's
records no longer loaded, issue 11) and must not move when only the cost of a
search changes. Both ways of reading the pool must give it: from the embedded
store's index (``CandidateReader``) and from records, as on every other backend.
Scores may differ in the last float digits (cosines computed as one matrix
product instead of one dot product each); orders may not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memstack.models import MemoryRecord, ScoredId
from memstack.ports.store import CandidateReader, MemoryStore, ReadView
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

    def embeddings(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, np.ndarray]:
        return self._store.embeddings(tenant, user_id, ids)


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
def test_rankings_and_scores_are_the_recorded_ones(case: str, answers: dict[str, Any]) -> None:
    mismatches = []
    for name, query, old in _recorded():
        if name != case:
            continue
        new = json.loads(json.dumps(answers[case][query]))
        keys_new, keys_old = [h[0] for h in new["hits"]], [h[0] for h in old["hits"]]
        if keys_new != keys_old:
            mismatches.append(f"{query!r}: order {keys_new} != recorded {keys_old}")
            continue
        if new["status"] != old["status"]:
            mismatches.append(f"{query!r}: status {new['status']} != recorded {old['status']}")
        for h_new, h_old in zip(new["hits"], old["hits"], strict=True):
            if not _close(h_new[1], h_old[1]) or h_new[2] != h_old[2]:
                mismatches.append(f"{query!r} {h_old[0]!r}: score/superseded {h_new[1:3]} != {h_old[1:3]}")
            if len(h_old) > 3:
                stages_new, stages_old = h_new[3], h_old[3]
                if set(stages_new) != set(stages_old) or not all(
                    _close(stages_new[k], v) for k, v in stages_old.items()
                ):
                    mismatches.append(f"{query!r} {h_old[0]!r}: stages {stages_new} != {stages_old}")
    assert not mismatches, (
        f"{len(mismatches)} searches differ from the recorded answers (if a change to retrieval "
        f"is meant to change them, regenerate with {REGENERATE}):\n" + "\n".join(mismatches[:5])
    )
