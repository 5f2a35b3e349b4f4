"""Job status on both stores (SQLite, DynamoDB), and recorded by the SQS path: queue, worker Lambda, DLQ."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from memstack.adapters.dynamodb.job_status import DynamoDbJobStatuses
from memstack.adapters.dynamodb.stm import create_stm_table
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.job_status import EmbeddedJobStatuses
from memstack.errors import NotFound, Throttled
from memstack.factory import build_service
from memstack.models import Message
from memstack.ports.job_status import JobChange, JobStatus, JobStatuses
from memstack.ports.queue import Job
from memstack.service import MemoryService
from memstack.settings import load_settings
from memstack.workers.lambda_entry import build_worker

from tests.queue.conftest import (
    IDEMPOTENCY_TABLE,
    MAX_RECEIVES,
    Aws,
    FakeLambdaContext,
    receive_all,
    sqs_event,
)

STM_TABLE = "memstack-stm"
NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def _status(job_id: str, tenant: str = "acme", user: str = "ann") -> JobStatus:
    return JobStatus(
        id=job_id,
        tenant=tenant,
        user_id=user,
        type="extract",
        state="queued",
        queued_at=NOW,
        updated_at=NOW,
        expires_at=NOW + timedelta(days=7),
    )


@pytest.fixture(params=["embedded", "dynamodb"])
def statuses(request: pytest.FixtureRequest, tmp_path: Path, aws: Aws) -> Iterator[JobStatuses]:
    if request.param == "embedded":
        db = Database(tmp_path / "jobs.sqlite3")
        yield EmbeddedJobStatuses(db, clock=lambda: NOW.timestamp())
        db.close()
    else:
        create_stm_table(aws.ddb, STM_TABLE)
        yield DynamoDbJobStatuses(STM_TABLE, aws.ddb)


def test_a_status_is_the_tenants_alone_changes_only_while_recorded_and_goes_with_its_user(
    statuses: JobStatuses,
) -> None:
    # 30 jobs: more than one batch of writes on DynamoDB (25 items a call, two items a job).
    statuses.put([_status(f"j{i}") for i in range(30)] + [_status("b1", user="bob"), _status("g1", "globex")])
    assert statuses.get("acme", "j7") == _status("j7")
    assert statuses.get("globex", "j7") is None and statuses.get("acme", "g1") is None
    later = NOW + timedelta(minutes=1)
    change = JobChange(state="done", attempts=1, updated_at=later, expires_at=later + timedelta(days=7))
    assert statuses.change("acme", "ann", "j7", change)
    got = statuses.get("acme", "j7")
    assert got is not None and (got.state, got.attempts, got.queued_at, got.updated_at) == (
        "done",
        1,
        NOW,
        later,
    )
    assert not statuses.change("acme", "ann", "unknown", change)
    assert not statuses.change("globex", "ann", "j7", change)  # another tenant's report changes nothing
    assert not statuses.change("acme", "bob", "j7", change)  # nor one naming another user

    assert statuses.erase_user("acme", "ann") == 30
    assert statuses.get("acme", "j7") is None
    assert not statuses.change("acme", "ann", "j7", change)  # a late worker recreates nothing
    assert statuses.get("acme", "j7") is None
    assert statuses.get("acme", "b1") is not None and statuses.get("globex", "g1") is not None


def test_dynamodb_keeps_the_ttl_attribute_and_nothing_of_the_user_outside_what_erase_finds(aws: Aws) -> None:
    create_stm_table(aws.ddb, STM_TABLE)
    statuses = DynamoDbJobStatuses(STM_TABLE, aws.ddb)
    statuses.put([_status("j1"), _status("j2")])
    items = aws.ddb.scan(TableName=STM_TABLE)["Items"]
    assert len(items) == 4 and all(int(i["expires_at"]["N"]) > NOW.timestamp() for i in items)
    statuses.erase_user("acme", "ann")
    assert aws.ddb.scan(TableName=STM_TABLE)["Items"] == []


@pytest.fixture
def svc(aws: Aws, tmp_path: Path) -> Iterator[MemoryService]:
    """The AWS tier's service: DynamoDB short-term table (job status beside it), SQS queues."""
    create_stm_table(aws.ddb, STM_TABLE)
    settings = load_settings(
        data_dir=tmp_path / "data",
        embedder="hashing",
        stm_backend="dynamodb",
        stm_table=STM_TABLE,
        queue_backend="sqs",
        extraction_queue_url=aws.urls["extract"],
        consolidation_queue_url=aws.urls["consolidate"],
        queue_lease_seconds=30,
    )
    service = build_service(settings, dynamodb=aws.ddb, sqs=aws.sqs)
    yield service
    service.close()


def _deliver(worker: Any, aws: Aws) -> dict[str, Any]:
    """What Lambda's event source mapping does; a failed message comes back at once (its visibility
    timeout, passed), so its next receive counts one more."""
    messages = receive_all(aws.sqs, aws.urls["extract"])
    answer: dict[str, Any] = worker.handle(sqs_event(messages, aws.arns["extract"]), FakeLambdaContext())
    failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    for m in messages:
        if m["MessageId"] in failed:
            aws.sqs.change_message_visibility(
                QueueUrl=aws.urls["extract"], ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
            )
        else:
            aws.sqs.delete_message(QueueUrl=aws.urls["extract"], ReceiptHandle=m["ReceiptHandle"])
    return answer


def test_the_worker_lambda_records_running_done_and_the_dead_lettering_receive(
    svc: MemoryService, aws: Aws
) -> None:
    result = svc.add("acme", "ann", [Message(role="user", content="I moved to Lisbon.")])
    [job_id] = result.job_ids
    assert svc.job("acme", job_id).state == "queued"
    persistence = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=aws.ddb)
    worker = build_worker("extract", svc, persistence, sqs=aws.sqs)
    assert _deliver(worker, aws) == {"batchItemFailures": []}
    done = svc.job("acme", job_id)
    assert (done.state, done.attempts, done.error) == ("done", 1, None)
    with pytest.raises(NotFound):
        svc.job("globex", job_id)

    def broken(job: Job) -> None:
        raise RuntimeError("the model said: I moved to Lisbon")

    svc.job_handlers["extract"] = broken
    [failing] = svc.add("acme", "ann", [Message(role="user", content="I like figs.")]).job_ids
    first = _deliver(worker, aws)
    assert len(first["batchItemFailures"]) == 1
    retrying = svc.job("acme", failing)
    assert (retrying.state, retrying.attempts) == ("queued", 1)
    assert retrying.error is not None and retrying.error.code == "internal_error"
    for _ in range(2, MAX_RECEIVES + 1):
        assert len(_deliver(worker, aws)["batchItemFailures"]) == 1
    failed = svc.job("acme", failing)
    assert (failed.state, failed.attempts) == ("failed", MAX_RECEIVES)
    assert failed.error is not None and "Lisbon" not in failed.error.message
    # SQS moves it to the DLQ on the next receive; the operator's listing shows it, redrive queues it.
    assert receive_all(aws.sqs, aws.urls["extract"]) == []
    assert [d["id"] for d in svc.queue.dead_letters("acme")] == [failing]  # type: ignore[union-attr]
    assert svc.redrive("acme", [failing]) == 1
    assert svc.job("acme", failing).state == "queued"


def test_a_throttled_job_deferred_by_the_worker_shows_queued_with_the_reason(
    svc: MemoryService, aws: Aws
) -> None:
    def throttled(job: Job) -> None:
        raise Throttled("Bedrock is throttling requests")

    svc.job_handlers["extract"] = throttled
    [job_id] = svc.add("acme", "ann", [Message(role="user", content="I like figs.")]).job_ids
    persistence = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=aws.ddb)
    worker = build_worker("extract", svc, persistence, sqs=aws.sqs)
    assert _deliver(worker, aws) == {"batchItemFailures": []}  # deferred: a copy comes back later
    state = svc.job("acme", job_id)
    assert state.state == "queued" and state.error is not None and state.error.code == "throttled"


def test_erase_on_dynamodb_removes_the_users_job_states(svc: MemoryService, aws: Aws) -> None:
    [job_id] = svc.add("acme", "ann", [Message(role="user", content="I like figs.")]).job_ids
    [other] = svc.add("acme", "bob", [Message(role="user", content="I like pears.")]).job_ids
    erased = svc.erase_user("acme", "ann")
    assert erased["job_statuses"] == 1, erased
    with pytest.raises(NotFound):
        svc.job("acme", job_id)
    assert svc.job("acme", other).state == "queued"
    left = [i for i in aws.ddb.scan(TableName=STM_TABLE)["Items"] if "ann" in str(i)]
    assert left == [i for i in left if i["sk"]["S"] == "ERASED"], left  # only the erase marker
