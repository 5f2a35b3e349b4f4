"""SQS → worker → LTM on moto: partial batch failure, idempotent redelivery, DLQ listing and redrive."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from memstack.adapters.queue.sqs import SqsJobQueue
from memstack.factory import build_service
from memstack.models import MemoryFilters, Message, Tier
from memstack.ports.queue import Job
from memstack.service import MemoryService
from memstack.workers.sqs import JobWorker

from tests.consolidation.conftest import NOW, TURNS, conversation
from tests.queue.conftest import (
    IDEMPOTENCY_TABLE,
    MAX_RECEIVES,
    Aws,
    FakeLambdaContext,
    receive_all,
    sqs_event,
    sqs_settings,
)

T = "acme"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def svc(aws: Aws, tmp_path: Path) -> Iterator[MemoryService]:
    service = build_service(sqs_settings(tmp_path / "data", aws), sqs=aws.sqs)
    yield service
    service.close()


def _worker(svc: MemoryService, aws: Aws, job_type: str, calls: list[str] | None = None) -> JobWorker:
    def process(job: Job) -> None:
        if calls is not None:
            calls.append(job.id)
        svc.process_job(job)

    persistence = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=aws.ddb)
    return JobWorker(process, {job_type}, persistence)


def _ltm(svc: MemoryService, user: str) -> list[Any]:
    records, _ = svc.list(T, user, MemoryFilters(tier=Tier.LTM, include_superseded=True), 1000)
    return records


def test_send_worker_ltm_with_one_poisoned_record_failing_alone(svc: MemoryService, aws: Aws) -> None:
    for user in ("ann", "bob"):
        svc.add(T, user, conversation(user, turns=TURNS[:12]), infer=False)
        assert svc.consolidate(T, user, sync=False, now=NOW)["status"] == "queued"
    aws.sqs.send_message(QueueUrl=aws.urls["consolidate"], MessageBody="{not a job")
    messages = receive_all(aws.sqs, aws.urls["consolidate"])
    assert len(messages) == 3
    poisoned = next(m["MessageId"] for m in messages if m["Body"] == "{not a job")

    response = _worker(svc, aws, "consolidate").handle(
        sqs_event(messages, aws.arns["consolidate"]), FakeLambdaContext()
    )

    assert response == {"batchItemFailures": [{"itemIdentifier": poisoned}]}
    for user in ("ann", "bob"):
        summaries = [r for r in _ltm(svc, user) if r.metadata.get("consolidation") == "summary"]
        assert sorted(s for r in summaries for s in r.source_ids) == sorted(
            f"{user}{i:02d}" for i in range(12)
        )
        assert svc.stm.unconsolidated(T, user, NOW) == []


def test_extraction_jobs_flow_from_ingest_through_sqs_to_ltm_and_redelivery_changes_nothing(
    svc: MemoryService, aws: Aws
) -> None:
    result = svc.add(T, "sam", [Message(id="x1", content="I moved to Lisbon for a new job", speaker="Sam")])
    assert result.queued == 1
    assert _ltm(svc, "sam") == []  # nothing extracted until the worker runs
    messages = receive_all(aws.sqs, aws.urls["extract"])
    event = sqs_event(messages, aws.arns["extract"])
    calls: list[str] = []
    worker = _worker(svc, aws, "extract", calls)

    assert worker.handle(event, FakeLambdaContext()) == {"batchItemFailures": []}
    after_first = sorted((r.id, r.version, r.content) for r in _ltm(svc, "sam"))
    assert after_first and all("x1" in r.source_ids for r in _ltm(svc, "sam"))

    # SQS delivers the same message again (at-least-once): the idempotency record answers it.
    assert worker.handle(event, FakeLambdaContext()) == {"batchItemFailures": []}
    assert calls == [Job.model_validate_json(messages[0]["Body"]).id]  # processed once
    assert sorted((r.id, r.version, r.content) for r in _ltm(svc, "sam")) == after_first
    keys = aws.ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    assert len(keys) == 1 and keys[0]["status"]["S"] == "COMPLETED"


def test_a_job_on_the_wrong_queue_is_poisoned_not_run(svc: MemoryService, aws: Aws) -> None:
    job = Job(type="consolidate", tenant=T, user_id="ann")
    aws.sqs.send_message(QueueUrl=aws.urls["extract"], MessageBody=job.model_dump_json())
    messages = receive_all(aws.sqs, aws.urls["extract"])
    calls: list[str] = []
    response = _worker(svc, aws, "extract", calls).handle(sqs_event(messages, aws.arns["extract"]), None)
    assert response == {"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}
    assert calls == []


def test_poisoned_messages_reach_the_dlq_are_listed_and_redriven(svc: MemoryService, aws: Aws) -> None:
    queue = svc.queue
    assert isinstance(queue, SqsJobQueue)
    svc.add(T, "ann", conversation("ann", turns=TURNS[:3]), infer=False)
    svc.consolidate(T, "ann", sync=False, now=NOW)
    aws.sqs.send_message(QueueUrl=aws.urls["consolidate"], MessageBody="{not a job")

    assert queue.drain(timeout=60)  # the good job runs; the bad one is received MAX_RECEIVES times

    assert svc.stm.unconsolidated(T, "ann", NOW) == []
    dead = queue.dead_letters()
    assert [(d["queue"], d["job"]) for d in dead] == [("consolidate", "{not a job")]
    assert dead[0]["attempts"] >= 1
    assert queue.dlq_url("consolidate") == aws.dlqs["consolidate"]  # read from the RedrivePolicy
    assert len(queue.dead_letters()) == 1  # listing does not consume

    assert queue.redrive() == 1
    assert queue.dead_letters() == []
    back = receive_all(aws.sqs, aws.urls["consolidate"])
    assert [m["Body"] for m in back] == ["{not a job"]
    assert MAX_RECEIVES == 2


def test_dead_letters_are_listed_and_redriven_per_tenant(svc: MemoryService, aws: Aws) -> None:
    queue = svc.queue
    assert isinstance(queue, SqsJobQueue)
    jobs = [Job(id=f"{t}-{n}", type="consolidate", tenant=t, user_id="u") for t in ("a", "b") for n in (1, 2)]
    for job in jobs:
        aws.sqs.send_message(QueueUrl=aws.dlqs["consolidate"], MessageBody=job.model_dump_json())
    assert queue.waiting("a") is None  # SQS cannot show waiting messages without receiving them
    assert sorted(d["id"] for d in queue.dead_letters("a")) == ["a-1", "a-2"]
    assert queue.redrive("a", ["a-2", "b-1"]) == 1
    back = receive_all(aws.sqs, aws.urls["consolidate"])
    assert [json.loads(m["Body"])["id"] for m in back] == ["a-2"]
    # What was not chosen is visible again at once, still dead-lettered.
    assert sorted(d["id"] for d in queue.dead_letters()) == ["a-1", "b-1", "b-2"]
    assert queue.redrive("b") == 2
    assert [d["id"] for d in queue.dead_letters()] == ["a-1"]


def test_send_routes_by_job_type_in_batches_of_ten(svc: MemoryService, aws: Aws) -> None:
    queue = svc.queue
    assert isinstance(queue, SqsJobQueue)
    queue.send([Job(type="extract", tenant=T, user_id=f"u{i}") for i in range(23)])
    queue.send([Job(type="consolidate", tenant=T, user_id="u")])
    assert len(receive_all(aws.sqs, aws.urls["extract"])) == 23
    assert len(receive_all(aws.sqs, aws.urls["consolidate"])) == 1


def _load_lambda(name: str) -> ModuleType:
    path = ROOT / "lambdas" / name / "handler.py"
    spec = importlib.util.spec_from_file_location(f"lambda_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def lambda_env(aws: Aws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from memstack.settings import get_settings
    from memstack.workers import lambda_entry

    env = {
        "MEMSTACK_DATA_DIR": str(tmp_path / "lambda"),
        "MEMSTACK_EMBEDDER": "hashing",
        "MEMSTACK_QUEUE_BACKEND": "sqs",
        "MEMSTACK_EXTRACTION_QUEUE_URL": aws.urls["extract"],
        "MEMSTACK_CONSOLIDATION_QUEUE_URL": aws.urls["consolidate"],
        "MEMSTACK_IDEMPOTENCY_TABLE": IDEMPOTENCY_TABLE,
        "MEMSTACK_AWS_REGION": "us-east-1",
        "POWERTOOLS_SERVICE_NAME": "memstack",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    caches = (get_settings, lambda_entry.service_from_environment, lambda_entry.worker_for)
    for cached in caches:
        cached.cache_clear()
    yield
    if lambda_entry.service_from_environment.cache_info().currsize:
        lambda_entry.service_from_environment().close()
    for cached in caches:
        cached.cache_clear()


def _emf(out: str) -> dict[str, float]:
    """Metric values from the Embedded Metric Format lines Powertools printed."""
    values: dict[str, float] = {}
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            doc = json.loads(line)
            for definition in doc["_aws"]["CloudWatchMetrics"]:
                for metric in definition["Metrics"]:
                    value = doc[metric["Name"]]
                    values[metric["Name"]] = sum(value) if isinstance(value, list) else value
    return values


def test_the_scheduler_and_worker_lambdas_run_end_to_end(
    aws: Aws, lambda_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from memstack.workers.lambda_entry import service_from_environment

    service = service_from_environment()
    service.add(T, "busy", conversation("b", turns=TURNS[:12]), infer=False)
    service.add(T, "quiet", conversation("q", turns=TURNS[:2]), infer=False)

    scheduled = _load_lambda("consolidation_scheduler").handler({"source": "aws.events"}, FakeLambdaContext())
    assert scheduled["jobs"] == 1 and [u["user_id"] for u in scheduled["users"]] == ["busy"]
    assert _emf(capsys.readouterr().out)["ConsolidationJobsScheduled"] == 1

    messages = receive_all(aws.sqs, aws.urls["consolidate"])
    event = sqs_event(messages, aws.arns["consolidate"])
    worker = _load_lambda("consolidation_worker")
    assert worker.handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
    emitted = _emf(capsys.readouterr().out)
    assert (emitted["JobsSucceeded"], emitted["JobsFailed"]) == (1, 0)
    assert service.stm.unconsolidated(T, "busy", NOW) == []
    assert len(service.stm.unconsolidated(T, "quiet", NOW)) == 2

    service.add(T, "lee", [Message(id="l1", content="I adopted a cat named Miso", speaker="Lee")])
    extract = sqs_event(receive_all(aws.sqs, aws.urls["extract"]), aws.arns["extract"])
    assert len(extract["Records"]) == 1
    assert _load_lambda("extraction_worker").handler(extract, FakeLambdaContext()) == {
        "batchItemFailures": []
    }
    assert any("l1" in r.source_ids for r in _ltm(service, "lee"))


def test_erase_deletes_the_users_dead_letters_and_what_it_cannot_reach_is_dropped_by_the_worker(
    svc: MemoryService, aws: Aws
) -> None:
    """DLQ messages of the erased user go; one hidden at that moment (another reader holds it) survives,
    and after a redrive the worker finds nothing of the user left: it runs as a no-op and is deleted."""
    queue = svc.queue
    assert isinstance(queue, SqsJobQueue)
    svc.add(T, "ann", [Message(id="a1", content="I moved to Lisbon for a new job", speaker="Ann")])
    svc.add(T, "bob", [Message(id="b1", content="I adopted a cat called Miso", speaker="Bob")])
    sent = receive_all(aws.sqs, aws.urls["extract"])  # both jobs failed until they dead-lettered:
    for m in sent:
        aws.sqs.send_message(QueueUrl=aws.dlqs["extract"], MessageBody=m["Body"])
        aws.sqs.delete_message(QueueUrl=aws.urls["extract"], ReceiptHandle=m["ReceiptHandle"])
    ann_job = next(m["Body"] for m in sent if '"ann"' in m["Body"])
    aws.sqs.send_message(QueueUrl=aws.dlqs["extract"], MessageBody=ann_job)
    # Another reader holds one of ann's two dead letters at the moment of the erase.
    dead = receive_all(aws.sqs, aws.dlqs["extract"])
    held = next(m for m in dead if '"ann"' in m["Body"])
    for m in dead:
        if m is not held:
            aws.sqs.change_message_visibility(
                QueueUrl=aws.dlqs["extract"], ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
            )

    erased = svc.erase_user(T, "ann")

    assert erased["jobs"] == 1  # the visible one; the held one could not be reached
    assert [d["job"]["user_id"] for d in queue.dead_letters()] == ["bob"]
    aws.sqs.change_message_visibility(
        QueueUrl=aws.dlqs["extract"], ReceiptHandle=held["ReceiptHandle"], VisibilityTimeout=0
    )
    assert queue.redrive() == 2
    back = receive_all(aws.sqs, aws.urls["extract"])
    assert sorted(json.loads(m["Body"])["user_id"] for m in back) == ["ann", "bob"]
    response = _worker(svc, aws, "extract").handle(sqs_event(back, aws.arns["extract"]), FakeLambdaContext())
    assert response == {"batchItemFailures": []}  # ann's job succeeds as a no-op
    assert _ltm(svc, "ann") == [] and svc.stm.get(T, "ann", "a1") is None
    assert _ltm(svc, "bob")  # bob's job did its work
