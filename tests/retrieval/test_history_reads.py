"""Stage 8's version chains: every hit's chain walked together, one read per step, not per hit."""

from __future__ import annotations

from datetime import timedelta

from memstack.domain import versions
from memstack.domain.retrieval.stages.history import expand_history
from memstack.domain.retrieval.types import SearchHit, SearchRequest
from memstack.models import MemoryRecord
from memstack.ports.store import SuccessorsInOneRead
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record


class BatchedSuccessors:
    """The embedded store with ``successors`` only: a ``successor`` call would be a read per hit."""

    def __init__(self, service: MemoryService) -> None:
        self.inner = service.store
        self.asked: list[list[str]] = []

    def successors(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, MemoryRecord]:
        self.asked.append(ids)
        return {i: n for i in ids if (n := self.inner.successor(tenant, user_id, i)) is not None}

    def successor(self, *args: object) -> MemoryRecord | None:
        raise AssertionError("one read per hit: successor")

    def get_many(self, tenant: str, user_id: str, ids: list[str]) -> dict[str, MemoryRecord]:
        return self.inner.get_many(tenant, user_id, ids)


def _hits(records: list[MemoryRecord]) -> list[SearchHit]:
    return [SearchHit(record=r, score=1.0 - i / 10) for i, r in enumerate(records)]


def test_history_reads_each_step_of_every_chain_once_and_expands_as_one_hit_at_a_time(
    service: MemoryService,
) -> None:
    lisbon, coffee, tea = put(
        service,
        record(service, "I live in Lisbon", "m1"),
        record(service, "I drink coffee", "m2"),
        record(service, "I drink tea", "m3"),
    )
    coarse = service.settings.embedding.coarse_dim
    porto = versions.new_version(
        lisbon, content="I live in Porto", embedder=service.embedder, coarse_dim=coarse, now=REF
    )
    service.store.supersede(T, U, lisbon.id, porto)
    faro = versions.new_version(
        porto, content="I live in Faro", embedder=service.embedder, coarse_dim=coarse, now=REF + timedelta(1)
    )
    service.store.supersede(T, U, porto.id, faro)
    old = service.store.get(T, U, lisbon.id)
    assert old is not None
    req = SearchRequest(tenant=T, user_id=U, query="where do I live", include_history=True)
    store = BatchedSuccessors(service)
    assert isinstance(store, SuccessorsInOneRead)

    hits = [old, coffee, tea]
    batched = expand_history(store, req, _hits(hits), max_versions=5)  # type: ignore[arg-type]
    one_by_one = expand_history(service.store, req, _hits(hits), max_versions=5)

    # Step 1 asks for all three hits at once; only Lisbon's chain goes on (to Porto, then Faro).
    assert store.asked == [sorted([lisbon.id, coffee.id, tea.id]), [porto.id], [faro.id]]
    assert [(h.record.id, h.superseded) for h in batched] == [(h.record.id, h.superseded) for h in one_by_one]
    assert [h.record.id for h in batched] == [lisbon.id, porto.id, faro.id, coffee.id, tea.id]
