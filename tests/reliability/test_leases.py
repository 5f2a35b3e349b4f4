"""Fast recovery (issue 12, item 6): short job leases with a heartbeat; ``sync`` waits for its own jobs.

A worker that dies leaves its job leased for ``lease_seconds`` (15 s by
default), not 300 s; a live worker renews the lease while its job runs. A
``sync`` add runs or waits for its own jobs only, so another tenant's backlog
(or another tenant's job stuck on a dead worker) never delays it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memstack.adapters.embedded.database import Database
from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.adapters.queue.sqs import SqsJobQueue
from memstack.factory import build_service
from memstack.models import MemoryFilters, Message, Tier
from memstack.ports.queue import Job
from memstack.service import MemoryService

from tests.queue.conftest import Aws, aws, sqs_settings  # noqa: F401  (aws: a pytest fixture)
from tests.reliability.faults import Crash
from tests.waiting import wait_until

OSAKA = Message(content="I moved to Osaka.")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "q.sqlite3")
    yield database
    database.close()


def job(user: str = "ann", tenant: str = "acme", n: int = 0) -> Job:
    return Job(id=f"job-{tenant}-{user}-{n}", type="extract", tenant=tenant, user_id=user)


def row(db: Database, job_id: str) -> Any:
    return db.read().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()


def test_a_crashed_workers_job_is_retried_once_its_short_lease_runs_out(db: Database) -> None:
    clock = Clock()
    dying = SqliteJobQueue(db, lease_seconds=15, clock=clock)
    survivor = SqliteJobQueue(db, lease_seconds=15, clock=clock)  # another process on the same file
    done: list[str] = []

    def crash(_job: Job) -> None:
        raise Crash

    dying.set_handler(crash)
    survivor.set_handler(lambda j: done.append(j.id))
    dying.send([job()])
    with pytest.raises(Crash):
        dying.run_ready()
    assert row(db, "job-acme-ann-0")["status"] == "running"
    assert survivor.run_ready() == 0  # still leased to the dead worker
    clock.now += 14.9
    assert survivor.run_ready() == 0
    clock.now += 0.2  # 15.1 s after the crash, not 300 s
    assert survivor.run_ready() == 1 and done == ["job-acme-ann-0"]
    assert survivor.pending() == 0


def test_the_heartbeat_keeps_a_running_jobs_lease(db: Database) -> None:
    worker = SqliteJobQueue(db, lease_seconds=1)
    other = SqliteJobQueue(db, lease_seconds=1)
    release = threading.Event()
    leases: list[float] = []

    def slow(j: Job) -> None:
        # Run until the lease has been renewed past its first expiry twice over, then finish.
        first = row(db, j.id)["available_at"]
        wait_until(lambda: row(db, j.id)["available_at"] > first + 2, what="two lease renewals")
        assert other.run_ready() == 0  # never claimable while its worker is alive
        leases.append(row(db, j.id)["available_at"])
        release.set()

    worker.set_handler(slow)
    other.set_handler(lambda j: pytest.fail("a second worker took a job that was still running"))
    worker.send([job()])
    assert worker.run_ready() == 1
    assert release.is_set() and leases and worker.pending() == 0


def test_a_job_that_kills_its_worker_every_time_is_dead_lettered(db: Database) -> None:
    clock = Clock()
    queue = SqliteJobQueue(db, max_attempts=3, lease_seconds=15, clock=clock)

    def crash(_job: Job) -> None:
        raise Crash

    queue.set_handler(crash)
    queue.send([job()])
    for _ in range(3):
        with pytest.raises(Crash):
            queue.run_ready()
        clock.now += 16
    assert queue.run_ready() == 0
    dead = queue.dead_letters()
    assert [d["id"] for d in dead] == ["job-acme-ann-0"] and "lost 3 times" in dead[0]["error"]
    queue.send([job()])  # sending it again (a client's retry) takes it out of the dead letters
    assert queue.dead_letters() == [] and queue.pending() == 1


def test_one_job_per_user_at_a_time_across_workers(db: Database) -> None:
    a, b = SqliteJobQueue(db), SqliteJobQueue(db)
    a.send([job("ann", n=0), job("ann", n=1), job("bob", n=0)])
    claimed = a._claim()
    assert claimed is not None and claimed[0].id == "job-acme-ann-0"
    second = b._claim()
    assert second is not None and second[0].id == "job-acme-bob-0"  # ann's next job waits
    assert b._claim() is None


def _ltm(service: MemoryService, tenant: str, user: str) -> list[Any]:
    return service.list(tenant, user, MemoryFilters(tier=Tier.LTM), 100)[0]


def test_sync_waits_for_its_own_jobs_only(service: MemoryService) -> None:
    for i in range(30):  # another tenant's backlog, nobody working on it
        service.add("globex", f"user{i}", [Message(content=f"I live in city number {i}.")])
    backlog = service.queue.pending()
    assert backlog == 30
    result = service.add("acme", "ann", [Message(content="I moved to Osaka.")], sync=True)
    assert result.processed and _ltm(service, "acme", "ann")
    assert service.queue.pending() == backlog  # none of the backlog ran on this request


def test_sync_is_not_held_up_by_another_tenants_job_on_a_dead_worker(service: MemoryService) -> None:
    service.add("globex", "gus", [Message(content="I live in Rome.")])
    dead_worker = SqliteJobQueue(service.queue.db)  # type: ignore[attr-defined]
    assert dead_worker._claim() is not None  # claimed by a worker that is then killed
    finished = threading.Event()
    outcome: list[Any] = []

    def add() -> None:
        outcome.append(service.add("acme", "ann", [Message(content="I moved to Osaka.")], sync=True))
        finished.set()

    threading.Thread(target=add, daemon=True).start()
    assert finished.wait(120), "a sync add waited for another tenant's stuck job"
    assert outcome[0].processed


# ---------------------------------------------------------------------- SQS
@pytest.fixture
def sqs_service(aws: Aws, tmp_path: Path) -> Iterator[MemoryService]:  # noqa: F811
    service = build_service(sqs_settings(tmp_path / "data", aws, queue_lease_seconds=3), sqs=aws.sqs)
    yield service
    service.close()


def test_sqs_sync_waits_on_the_outbox_while_workers_run_the_jobs(sqs_service: MemoryService) -> None:
    """The API cannot receive from SQS (no permission, other tenants' jobs): it watches the STM entry."""
    stop = threading.Event()
    worker_queue = sqs_service.queue
    assert isinstance(worker_queue, SqsJobQueue)
    assert worker_queue.drain(job_ids=["not-ours"]) is False  # cannot pick messages out of SQS

    def worker() -> None:  # stands in for the extraction worker Lambda
        while not stop.is_set():
            worker_queue.drain(timeout=5)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    try:
        result = sqs_service.add(
            "acme", "ann", [Message(content="I moved to Osaka.")], sync=True, sync_timeout=60
        )
    finally:
        stop.set()
        thread.join(30)
    assert result.processed and _ltm(sqs_service, "acme", "ann")


def test_sqs_sync_without_workers_answers_queued(sqs_service: MemoryService) -> None:
    result = sqs_service.add(
        "acme", "ann", [Message(content="I moved to Osaka.")], sync=True, sync_timeout=0.5
    )
    assert result.queued == 1 and not result.processed


def test_sqs_drain_renews_the_visibility_of_the_running_job(sqs_service: MemoryService, aws: Aws) -> None:  # noqa: F811
    renewals: list[dict[str, Any]] = []
    aws.sqs.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibility", lambda params, **_: renewals.append(params)
    )
    queue = sqs_service.queue
    assert isinstance(queue, SqsJobQueue)
    seen: list[str] = []

    def slow(j: Job) -> None:
        wait_until(lambda: len(renewals) >= 2, what="two visibility renewals")
        seen.append(j.id)

    queue.set_handler(slow)
    queue.send([job()])
    assert queue.drain(timeout=60)
    assert seen == ["job-acme-ann-0"]
    assert all(r["VisibilityTimeout"] == 3 for r in renewals)


def test_sqs_send_resends_the_entries_sqs_failed(sqs_service: MemoryService, aws: Aws) -> None:  # noqa: F811
    queue = sqs_service.queue
    assert isinstance(queue, SqsJobQueue)
    real = aws.sqs.send_message_batch
    calls: list[int] = []

    def flaky(**kwargs: Any) -> dict[str, Any]:
        calls.append(len(kwargs["Entries"]))
        if len(calls) == 1:  # SQS's side failed two of them
            first, second, *rest = kwargs["Entries"]
            out = real(**{**kwargs, "Entries": rest})
            out["Failed"] = [
                {"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "x"}
                for e in (first, second)
            ]
            return out
        return real(**kwargs)

    queue._client = type("C", (), {"send_message_batch": staticmethod(flaky)})()
    queue.send([job(n=i) for i in range(5)])
    queue._client = aws.sqs
    assert calls == [5, 2]
    attrs = aws.sqs.get_queue_attributes(
        QueueUrl=aws.urls["extract"], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "5"
