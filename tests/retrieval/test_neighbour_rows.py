"""The embedded store answers the neighbour turns' two questions from its index (``TurnNeighbours``)
exactly as the records do: the turns each head records around it, and which turns a search's filters
let it see (``record_filter.matches``), through writes, deletes, metadata changes and every filter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from memstack.domain import record_filter
from memstack.domain.adjacent import ADJACENT, recorded
from memstack.domain.retrieval.stages import neighbours
from memstack.domain.retrieval.types import SearchRequest
from memstack.factory import build_service
from memstack.models import MemoryFilters, Message, Scope, Tier
from memstack.ports.store import TurnNeighbours, implements, pinned
from memstack.service import MemoryService
from memstack.settings import Settings

T, U = "t1", "alice"


def _fill(service: MemoryService) -> list[str]:
    when = datetime(2024, 3, 1, tzinfo=UTC)
    first = [Message(content=f"Turn {i} of the first talk about gardens.", timestamp=when) for i in range(5)]
    second = [
        Message(content=f"Turn {i} of the second talk about boats.", timestamp=when + timedelta(days=30))
        for i in range(4)
    ]
    service.add(T, U, first, session_id="s1", infer=False)
    service.add(T, U, second, session_id="s2", scope=Scope.CONTEXT, infer=False)
    service.add(T, U, [Message(content="A single turn, sent alone.")], session_id="s1", infer=False)
    records, _ = service.store.list(T, U, MemoryFilters(include_superseded=True), limit=100)
    return sorted(r.id for r in records)


def _check(service: MemoryService, ids: list[str], filters: MemoryFilters) -> None:
    store = pinned(service.store, T, U)
    assert implements(store, TurnNeighbours)
    records = service.store.get_many(T, U, ids)
    for span in (1, 2):
        want = {i: recorded(records[i].metadata, span) for i in ids if i in records}
        assert store.recorded_adjacent(T, U, ids, span) == want  # type: ignore[attr-defined]
    got, matrix, rows = store.visible_vectors(T, U, ids, filters)  # type: ignore[attr-defined]
    want_ids = [i for i in ids if i in records and record_filter.matches(records[i], filters, search=True)]
    assert got == want_ids
    vectors = service.store.embeddings(T, U, want_ids)
    assert np.array_equal(matrix, np.vstack([vectors[i] for i in want_ids]) if want_ids else matrix)
    view = store.index(T, U)  # type: ignore[attr-defined]
    assert view.holds(got, rows)  # the rows are the index's rows of these ids


def test_the_index_answers_as_the_records_do(settings: Settings) -> None:
    service = build_service(settings)
    try:
        ids = _fill(service)
        assert any(ADJACENT in r.metadata for r in service.store.get_many(T, U, ids).values())
        every = [
            MemoryFilters(),
            MemoryFilters(session_id="s2"),
            MemoryFilters(session_id="s2", session_only=True),
            MemoryFilters(session_id="s1", session_only=True),
            MemoryFilters(tier=Tier.LTM),
            MemoryFilters(after=datetime(2024, 3, 15, tzinfo=UTC)),
            MemoryFilters(include_superseded=True),
            MemoryFilters(metadata={"role": ("user",)}),
        ]
        for filters in every:
            _check(service, [*ids, "stm_not_a_record"], filters)
        # A deleted turn, and a turn whose recorded neighbours change, after the index was read.
        service.delete(T, U, ids[0])
        service.store.mark(T, U, [ids[1]], **{ADJACENT: ["elsewhere"]})
        service.store.mark(T, U, [ids[2]], **{ADJACENT: "not a list"})
        for filters in every:
            _check(service, ids, filters)
    finally:
        service.close()


def test_a_store_without_the_extra_gets_the_same_results(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read through ``get_many`` (as PostgreSQL, DynamoDB and OpenSearch are), the searches are the same.
    service = build_service(settings)
    try:
        _fill(service)
        queries = ["gardens talk", "boats", "turn 2 of the second talk", "single turn"]
        every = [MemoryFilters(), MemoryFilters(session_id="s2"), MemoryFilters(metadata={"role": ("user",)})]

        def results() -> list[tuple[list[tuple[str, float]], dict[str, str]]]:
            out = []
            for query in queries:
                for filters in every:
                    got = service.search(SearchRequest(tenant=T, user_id=U, query=query, filters=filters))
                    out.append(([(h.record.id, h.score) for h in got.hits], got.stage_status))
            return out

        with_index = results()
        assert any("neighbour turns" in status["bm25"] for _, status in with_index)
        real = neighbours.implements
        monkeypatch.setattr(
            neighbours, "implements", lambda obj, port: port is not TurnNeighbours and real(obj, port)
        )
        assert results() == with_index
    finally:
        service.close()
