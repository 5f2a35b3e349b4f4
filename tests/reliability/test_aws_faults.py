"""The AWS adapters under faults: DynamoDB (moto), SQS (moto), a Lambda killed mid-batch, Bedrock (Stubber),
OpenSearch (recorded answers).

The same workload and invariants as ``test_fault_injection.py``; here the
faults are what the AWS services answer: throttling, 5xx, a write that landed
but answered 500, SQS failing part of a batch, a worker Lambda timing out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from botocore.stub import ANY, Stubber
from memstack.adapters.dynamodb.leases import DynamoDbLeases
from memstack.adapters.dynamodb.stm import DynamoDbShortTermStore, create_stm_table
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.llm.providers.bedrock_extractor import BedrockExtractor
from memstack.adapters.queue.sqs import SqsJobQueue
from memstack.factory import build_service
from memstack.models import MemoryFilters, Message, Tier
from memstack.settings import load_settings
from memstack.workers.sqs import JobWorker
from moto import mock_aws

from tests.conformance.conftest import TABLE, create_memories_table, dynamodb_client
from tests.extraction.test_bedrock_extractor import EXPECTED, MODEL, VALID, tool_answer
from tests.queue.conftest import (
    IDEMPOTENCY_TABLE,
    Aws,
    FakeLambdaContext,
    receive_all,
    sqs_event,
    sqs_settings,
)
from tests.queue.conftest import aws as aws
from tests.reliability.faults import Fail, Faulty, client_error, throttled
from tests.reliability.workload import Clock, check_invariants, make_rig, run_workload, state

STM_TABLE = "memstack-stm-faults"


# ------------------------------------------------------------------ DynamoDB
@pytest.fixture
def moto_dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = dynamodb_client()
        create_memories_table(client)
        create_stm_table(client, STM_TABLE)
        yield client


def dynamodb_rig(tmp_path: Path, client: Any, plan: dict[str, Fail] | None = None) -> tuple[Any, Faulty]:
    faulty = Faulty(client, **(plan or {}))
    clock = Clock()
    rig = make_rig(
        tmp_path / "data",
        clock=clock,
        leases=DynamoDbLeases(STM_TABLE, client=faulty, clock=clock),
        store=DynamoDBMemoryStore(TABLE, faulty),
        stm=DynamoDbShortTermStore(STM_TABLE, client=faulty),
    )
    return rig, faulty


# Every DynamoDB operation the workload makes (the reference run asserts the list is complete): a write
# lands and then answers 500 (the caller cannot know it landed); a read is throttled past botocore's retries.
DYNAMODB_FAULTS = {
    "delete_item": "landed-then-500",
    "put_item": "landed-then-500",
    "transact_write_items": "landed-then-500",
    "update_item": "landed-then-500",
    "batch_get_item": "throttled",
    "get_item": "throttled",
    "get_paginator": "throttled",
    "query": "throttled",
}


def _dynamodb_fault(operation: str) -> Fail:
    if DYNAMODB_FAULTS[operation] == "throttled":
        return Fail(client_error("ProvisionedThroughputExceededException", operation, 400))
    return Fail(client_error("InternalServerError", operation, 500), after=True)


@pytest.fixture(scope="module")
def dynamodb_reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fault-free run on DynamoDB, once for the module (its own moto account)."""
    with mock_aws():
        client = dynamodb_client()
        create_memories_table(client)
        create_stm_table(client, STM_TABLE)
        rig, faulty = dynamodb_rig(tmp_path_factory.mktemp("reference"), client)
        check_invariants(rig, run_workload(rig))
        reference = state(rig)
        rig.close()
    assert sorted(faulty.calls) == sorted(DYNAMODB_FAULTS), "the matrix must fault every operation made"
    return reference


@pytest.mark.parametrize("operation", sorted(DYNAMODB_FAULTS))
def test_dynamodb_fault(
    moto_dynamodb: Any, tmp_path: Path, operation: str, dynamodb_reference: dict[str, Any]
) -> None:
    rig, faulty = dynamodb_rig(tmp_path, moto_dynamodb, {operation: _dynamodb_fault(operation)})
    try:
        outcome = run_workload(rig)
        assert faulty.injected[operation] == 1
        check_invariants(rig, outcome, dynamodb_reference)
    finally:
        rig.close()


# ----------------------------------------------------------------------- SQS
def sqs_rig(tmp_path: Path, aws: Aws, plan: dict[str, Fail | list[Fail]]) -> tuple[Any, Faulty]:
    faulty = Faulty(aws.sqs, **plan)
    queue = SqsJobQueue(aws.urls, client=faulty, lease_seconds=1)
    return make_rig(tmp_path / "data", queue=queue), faulty


SQS_FAULTS: dict[str, dict[str, Fail | list[Fail]]] = {
    "send throttled": {"send_message_batch": Fail(throttled("SendMessageBatch"))},
    "send 500 after the jobs were queued": {
        "send_message_batch": Fail(client_error("InternalError", "SendMessageBatch"), after=True)
    },
    "receive throttled": {"receive_message": Fail(throttled("ReceiveMessage"), times=2)},
    "delete failed after the job ran": {
        "delete_message": Fail(client_error("InternalError", "DeleteMessage"))
    },
}


@pytest.mark.parametrize("name", sorted(SQS_FAULTS))
def test_sqs_fault(name: str, tmp_path: Path, aws: Aws) -> None:
    rig, faulty = sqs_rig(tmp_path, aws, SQS_FAULTS[name])
    try:
        outcome = run_workload(rig)
        assert sum(faulty.injected.values()) >= 1
        check_invariants(rig, outcome)
    finally:
        rig.close()


def test_sqs_failing_part_of_a_batch_is_resent(tmp_path: Path, aws: Aws) -> None:
    real = aws.sqs.send_message_batch
    failed_once: list[str] = []

    def partly(**kwargs: Any) -> dict[str, Any]:
        entries = kwargs["Entries"]
        if failed_once or len(entries) < 2:
            return real(**kwargs)
        failed_once.append(entries[0]["Id"])
        out = real(**{**kwargs, "Entries": entries[1:]})
        out["Failed"] = [{"Id": entries[0]["Id"], "SenderFault": False, "Code": "ServiceUnavailable"}]
        return out

    rig, _ = sqs_rig(tmp_path, aws, {})
    rig.ports["queue"].real._client = type("Sqs", (), {"__getattr__": lambda s, n: getattr(aws.sqs, n)})()
    rig.ports["queue"].real._client.send_message_batch = partly
    try:
        outcome = run_workload(rig)
        assert failed_once
        check_invariants(rig, outcome)
    finally:
        rig.close()


# --------------------------------------------------- a worker Lambda killed mid-batch
class TimedOut(BaseException):
    pass


class Expired(FakeLambdaContext):
    """The context of an invocation that used up its time: its in-progress records expire at once."""

    def get_remaining_time_in_millis(self) -> int:
        return 1


def test_a_worker_lambda_timing_out_mid_batch_loses_nothing_and_duplicates_nothing(
    tmp_path: Path,
    aws: Aws,
) -> None:
    service = build_service(sqs_settings(tmp_path / "data", aws), sqs=aws.sqs)
    facts = [f"My colleague number {i} is called Person{i}." for i in range(6)]
    result = service.add("acme", "ann", [Message(id=f"m{i}", content=c) for i, c in enumerate(facts)])
    assert result.queued == 6
    runs: Counter[str] = Counter()

    def process(job: Any) -> None:
        runs[job.payload["message_id"]] += 1
        service.process_job(job)
        if sum(runs.values()) == 3:
            raise TimedOut  # the function's time ran out in the middle of the third record

    persistence = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=aws.ddb)
    worker = JobWorker(process, {"extract"}, persistence)
    messages = receive_all(aws.sqs, aws.urls["extract"])
    with pytest.raises(TimedOut):  # no batchItemFailures answer: SQS delivers the whole batch again
        worker.handle(sqs_event(messages, aws.arns["extract"]), Expired())
    response = worker.handle(sqs_event(messages, aws.arns["extract"]), Expired())
    assert response == {"batchItemFailures": []}
    assert service.stm.unextracted("acme", "ann", [f"m{i}" for i in range(6)]) == {}
    ltm, _ = service.list("acme", "ann", MemoryFilters(tier=Tier.LTM), 100)
    sources = Counter(s for r in ltm for s in r.source_ids)
    assert sorted(sources) == [f"m{i}" for i in range(6)] and max(sources.values()) == 1
    assert max(runs.values()) <= 2 and runs["m2"] == 2  # only the interrupted job ran twice
    service.close()


# -------------------------------------------------------------------- Bedrock
def test_bedrock_extraction_throttled_past_its_retries_is_retried_by_the_queue(tmp_path: Path) -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    from aws_lambda_powertools import Metrics

    extractor = BedrockExtractor(MODEL, client=client, metrics=Metrics(namespace="t"), sleep=lambda _s: None)
    service = build_service(load_settings(data_dir=tmp_path / "d", embedder="hashing"), extractor=extractor)
    with Stubber(client) as stub:
        for _ in range(3):  # the extractor's own retries, all throttled: the job fails
            stub.add_client_error("converse", "ThrottlingException", "Too many requests", 429)
        stub.add_response(
            "converse", tool_answer({"operations": [VALID["operations"][1]]}), {**EXPECTED, "messages": ANY}
        )
        result = service.add("acme", "maya", [Message(id="m2", content="We moved to Osaka.")], sync=True)
        stub.assert_no_pending_responses()
    assert result.processed
    ltm, _ = service.list("acme", "maya", MemoryFilters(tier=Tier.LTM), 10)
    assert [r.content for r in ltm] == ["Maya moved to Osaka in May 2026."]
    service.close()


def test_bedrock_embedding_throttled_is_503_with_nothing_stored(tmp_path: Path) -> None:
    from memstack.adapters.embedders.bedrock import TitanEmbedder

    from tests.api.conftest import build_api

    client = boto3.client("bedrock-runtime", region_name="us-west-2")
    settings = load_settings(data_dir=tmp_path / "d", embedder="hashing", embedding_dim=256, coarse_dim=128)
    service = build_service(settings, embedder=TitanEmbedder(256, client=client, coarse_dim=128))
    api = build_api(service, settings)
    body = {"user_id": "ann", "messages": [{"id": "m1", "role": "user", "content": "I live in Leeds."}]}
    with Stubber(client) as stub:
        stub.add_client_error("invoke_model", "ThrottlingException", "Too many requests", 429)
        status, answer = api("POST", "/v1/memories", body=body)
    assert status == 503 and answer["error"]["code"] == "dependency_failed"
    assert service.stm.get("acme", "ann", "m1") is None  # embedded first: nothing half-written
    service.close()


# ----------------------------------------------------------------- OpenSearch
class _Lazy:
    """A recorded answer made when it is asked for (from the requests recorded so far)."""

    def __init__(self, make: Any) -> None:
        self.make = make

    def __iter__(self) -> Iterator[Any]:
        return iter(self.make())


def test_opensearch_create_that_landed_then_timed_out_is_not_a_409(tmp_path: Path) -> None:
    """The bulk create succeeds, its answer times out, the retried create finds the document: 409."""
    from memstack.adapters.opensearch import mapping

    from tests.adapters import opensearch_recorded as rec
    from tests.adapters.opensearch_fake import Recorder
    from tests.adapters.test_opensearch_store import make_store

    recorder = Recorder()
    store, _ = make_store(recorder)
    settings = load_settings(data_dir=tmp_path / "d", embedder="hashing")
    service = build_service(settings, store=store, embedder_check=False)  # the recorded answers are the add's
    recorder.reply(200, {"docs": []})  # the turn is not indexed yet
    recorder.reply(404, rec.not_found("marker"))  # the add's erase fence: the user was never erased
    recorder.reply(504, rec.error(504, "timeout", "gateway timeout"))  # the create landed; its answer did not
    recorder.answers.append(
        _Lazy(lambda: (200, rec.bulk(rec.bulk_item("create", created()[0], 409, error="version_conflict"))))
    )

    def created() -> tuple[str, dict[str, Any]]:
        action, doc = recorder.requests[2].lines[:2]
        return action["create"]["_id"], doc

    recorder.answers.append(
        _Lazy(lambda: (200, {"docs": [{"_id": created()[0], "found": True, "_source": created()[1]}]}))
    )
    result = service.add("t1", "u1", [Message(id="m1", content="I live in Lisbon.")])
    assert result.stored == ["m1"] and result.queued == 1
    # mget, the erasure marker, bulk x2, mget
    assert [r.method for r in recorder.requests] == ["POST", "GET", "POST", "POST", "POST"]
    assert mapping.from_source(created()[1]).source_ids == ["m1"]
    service.close()
