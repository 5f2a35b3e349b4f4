"""The worker Lambda keeps its batch hidden with short renewed leases (moto SQS, 180 s queue visibility)."""

from __future__ import annotations

import threading
from typing import Any

from memstack.adapters.queue.sqs_visibility import SqsVisibilityHeartbeat
from memstack.ports.queue import Job
from memstack.workers.sqs import JobWorker

from tests.queue.conftest import Aws, FakeLambdaContext, receive_all, sqs_event
from tests.waiting import wait_until

LEASE = 30


def _visibility_calls(aws: Aws) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(dict(params))

    aws.sqs.meta.events.register("provide-client-params.sqs.ChangeMessageVisibilityBatch", record)
    return calls


def _jobs(aws: Aws, n: int) -> list[dict[str, Any]]:
    for i in range(n):
        job = Job(id=f"j{i}", type="extract", tenant="t", user_id="u", payload={"message_id": f"m{i}"})
        aws.sqs.send_message(QueueUrl=aws.urls["extract"], MessageBody=job.model_dump_json())
    aws.sqs.set_queue_attributes(QueueUrl=aws.urls["extract"], Attributes={"VisibilityTimeout": "180"})
    return receive_all(aws.sqs, aws.urls["extract"])


def test_a_long_job_keeps_its_batch_hidden_and_the_leases_are_short(aws: Aws) -> None:
    calls = _visibility_calls(aws)
    messages = _jobs(aws, 2)
    release = threading.Event()
    others_saw: list[int] = []

    def process(job: Job) -> None:
        if job.id == "j0":
            wait_until(lambda: len(calls) >= 4, what="three renewals after the first lease")
            # Another worker polling now gets nothing: the batch is still leased.
            others_saw.append(len(receive_all(aws.sqs, aws.urls["extract"])))
            release.set()

    heartbeat = SqsVisibilityHeartbeat(aws.sqs, lease_seconds=LEASE, renew_every=0.05)
    worker = JobWorker(process, {"extract"}, None, visibility=heartbeat)
    assert worker.handle(sqs_event(messages, aws.arns["extract"]), FakeLambdaContext()) == {
        "batchItemFailures": []
    }
    assert release.is_set() and others_saw == [0]
    handles = sorted(m["ReceiptHandle"] for m in messages)
    for call in calls:
        assert call["QueueUrl"] == aws.urls["extract"]
        assert sorted(e["ReceiptHandle"] for e in call["Entries"]) == handles
        # The lease, not the queue's 180 s: a worker that dies gives the batch back within seconds.
        assert {e["VisibilityTimeout"] for e in call["Entries"]} == {LEASE}


def test_the_lease_is_cut_even_for_a_batch_that_fails(aws: Aws) -> None:
    """A failed record is not renewed after the batch: it comes back when its short lease runs out."""
    calls = _visibility_calls(aws)
    messages = _jobs(aws, 1)

    def process(job: Job) -> None:
        raise RuntimeError("the model timed out")

    heartbeat = SqsVisibilityHeartbeat(aws.sqs, lease_seconds=2)
    worker = JobWorker(process, {"extract"}, None, visibility=heartbeat)
    response = worker.handle(sqs_event(messages, aws.arns["extract"]), FakeLambdaContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}
    assert calls and calls[0]["Entries"][0]["VisibilityTimeout"] == 2
    # It is back within the lease (moto honours the changed visibility), not after 180 s.
    wait_until(
        lambda: bool(receive_all(aws.sqs, aws.urls["extract"])),
        what="the failed message to come back",
    )


def test_a_heartbeat_that_cannot_reach_sqs_does_not_fail_the_batch(aws: Aws) -> None:
    class Down:
        def get_queue_url(self, **_: Any) -> Any:
            raise ConnectionError("no route to SQS")

    messages = _jobs(aws, 1)
    done: list[str] = []
    worker = JobWorker(
        lambda job: done.append(job.id), {"extract"}, None, visibility=SqsVisibilityHeartbeat(Down())
    )
    assert worker.handle(sqs_event(messages, aws.arns["extract"]), FakeLambdaContext()) == {
        "batchItemFailures": []
    }
    assert done == ["j0"]
