"""The outbox sweep: extraction owed to a message whose enqueue failed, and whose client never retried,
is enqueued again by the scheduler's next pass."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

from memstack.adapters.dynamodb.stm import DynamoDbShortTermStore
from memstack.domain import outbox
from memstack.domain.ingest import stm_memory_id
from memstack.errors import DependencyFailed
from memstack.models import MemoryFilters, Message, Tier
from memstack.ports.stm import StmEntry
from memstack.service import MemoryService

from tests.consolidation.test_dynamodb_stm import TABLE as STM_TABLE
from tests.reliability.conftest import ServiceFactory
from tests.reliability.faults import Fail

T, U = "acme", "ann"


def ltm(service: MemoryService) -> list[Any]:
    records, _ = service.list(T, U, MemoryFilters(tier=Tier.LTM, include_superseded=True), 1000)
    return records


def test_a_lost_enqueue_is_swept_by_the_scheduler_with_its_metadata(faulty_service: ServiceFactory) -> None:
    service = faulty_service(queue_faults={"send": Fail(DependencyFailed("SQS is down"))})
    message = Message(id="m1", content="I adopted a cat named Miso.")
    with contextlib.suppress(DependencyFailed):  # the client got 503 and went away: it never retries
        service.add(T, U, [message], metadata={"project": "pets"})
    assert list(service.stm.unextracted(T, U, ["m1"])) == ["m1"]

    # A pass soon after the add leaves it alone: its job may simply not have run yet.
    soon = service.schedule_consolidation(now=datetime.now(UTC) + timedelta(seconds=10))
    assert soon["reenqueued_extractions"] == 0

    # A consolidation marked the raw turn meanwhile: that is the system's, not the add's metadata.
    service.store.mark(T, U, [stm_memory_id(T, U, "m1")], consolidated=True)
    later = service.schedule_consolidation(now=datetime.now(UTC) + timedelta(minutes=6))
    assert later["reenqueued_extractions"] == 1
    assert service.queue.drain(timeout=120)
    assert service.stm.unextracted(T, U, ["m1"]) == {}
    memories = ltm(service)
    assert [r.source_ids for r in memories] == [["m1"]]
    assert memories[0].metadata.get("project") == "pets"  # read back from the turn's STM record
    assert "consolidated" not in memories[0].metadata

    # Done: the next pass owes nothing.
    assert (
        service.schedule_consolidation(now=datetime.now(UTC) + timedelta(minutes=7))["reenqueued_extractions"]
        == 0
    )


def test_a_job_only_slow_is_sent_again_under_its_own_id_and_runs_once(faulty_service: ServiceFactory) -> None:
    service = faulty_service()
    service.queue.real.stop_worker()  # nothing runs the queue: the job waits, still "pending"
    result = service.add(T, U, [Message(id="m1", content="I moved to Osaka.")])
    jobs = outbox.owed_jobs(
        service.stm,
        datetime.now(UTC) + timedelta(minutes=6),
        after=timedelta(minutes=5),
        window=timedelta(hours=24),
        limit=10,
    )
    assert [j.id for j in jobs] == result.job_ids and jobs[0].payload["swept"] is True
    service.queue.send(jobs)
    assert service.queue.drain(timeout=120)
    assert [r.source_ids for r in ltm(service)] == [["m1"]]


def entry(message_id: str, received_at: datetime, extraction: str = "pending") -> StmEntry:
    return StmEntry(
        tenant=T,
        user_id=U,
        message=Message(id=message_id, content=f"turn {message_id}"),
        received_at=received_at,
        expires_at=int(received_at.timestamp()) + 7 * 86400,
        extraction=extraction,  # type: ignore[arg-type]
    )


def _stale_pending_window(stm: Any) -> None:
    now = datetime.now(UTC)
    stm.append(
        [
            entry("fresh", now - timedelta(minutes=1)),
            entry("stale", now - timedelta(hours=1)),
            entry("older", now - timedelta(hours=2)),
            entry("ancient", now - timedelta(days=2)),  # the dead-letter queue's by now
            entry("done", now - timedelta(hours=1), extraction="done"),
            entry("raw", now - timedelta(hours=1), extraction="none"),
        ]
    )
    found = stm.stale_pending(now - timedelta(days=1), now - timedelta(minutes=5), now, 10)
    assert [(t, u, m) for t, u, m, _ in found] == [(T, U, "older"), (T, U, "stale")]
    assert stm.stale_pending(now - timedelta(days=1), now - timedelta(minutes=5), now, 1)[0][2] == "older"


def test_stale_pending_on_the_embedded_stm(faulty_service: ServiceFactory) -> None:
    _stale_pending_window(faulty_service().stm.real)


def test_stale_pending_on_the_dynamodb_stm(ddb: Any) -> None:
    _stale_pending_window(DynamoDbShortTermStore(STM_TABLE, client=ddb))
