"""Throttling defers a job with a backoff instead of spending its receives (issue 23, item 5).

SQS dead-letters a message at its ``maxReceiveCount``th receive, whatever
the reason it failed: sustained Bedrock throttling (~45 s at a 15 s lease)
used to send healthy jobs to the DLQ. Here the worker runs as Lambda's
event source mapping runs it (receive, invoke, delete what succeeded) on
moto queues whose redrive policy dead-letters at the second receive.
"""

from __future__ import annotations

from typing import Any

from memstack.adapters.queue.sqs_backoff import DEFERRALS, MAX_DELAY_SECONDS, SqsThrottleBackoff
from memstack.errors import Throttled
from memstack.ports.queue import Job
from memstack.workers.sqs import JobWorker

from tests.queue.conftest import MAX_RECEIVES, Aws, FakeLambdaContext, receive_all, sqs_event


def _deliver(aws: Aws, worker: JobWorker) -> dict[str, Any]:
    url, arn = aws.urls["extract"], aws.arns["extract"]
    messages = receive_all(aws.sqs, url)
    if not messages:
        return {"received": 0, "failed": 0}
    response = worker.handle(sqs_event(messages, arn), FakeLambdaContext())
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    for m in messages:
        if m["MessageId"] not in failed:
            aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        else:  # its lease runs out (at once here): received again, or dead-lettered at the limit
            aws.sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
            )
    return {"received": len(messages), "failed": len(failed)}


def _send(aws: Aws, job: Job) -> None:
    aws.sqs.send_message(QueueUrl=aws.urls["extract"], MessageBody=job.model_dump_json())


def test_a_throttled_job_outlives_max_receive_count_and_then_runs_once(aws: Aws) -> None:
    outcomes = iter([Throttled("Bedrock throttled")] * (MAX_RECEIVES + 3) + [None])
    done: list[str] = []

    def process(job: Job) -> None:
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome
        done.append(job.id)

    backoff = SqsThrottleBackoff(aws.sqs, base_seconds=0)  # no wait here; the schedule is tested below
    worker = JobWorker(process, {"extract"}, None, backoff=backoff)
    job = Job(type="extract", tenant="t", user_id="u", payload={"message_id": "m1"})
    _send(aws, job)
    for _ in range(MAX_RECEIVES + 3):
        assert _deliver(aws, worker) == {"received": 1, "failed": 0}  # deferred, not failed
    assert receive_all(aws.sqs, aws.dlqs["extract"]) == []  # throttling never dead-lettered it
    assert _deliver(aws, worker) == {"received": 1, "failed": 0}
    assert done == [job.id]
    assert receive_all(aws.sqs, aws.urls["extract"]) == []


def test_a_poisoned_job_still_dead_letters_and_spent_deferrals_count_as_attempts(aws: Aws) -> None:
    def process(job: Job) -> None:
        if job.payload.get("poison"):
            raise ValueError("cannot ever succeed")
        raise Throttled("Bedrock throttled")

    backoff = SqsThrottleBackoff(aws.sqs, base_seconds=0, max_deferrals=1)
    worker = JobWorker(process, {"extract"}, None, backoff=backoff)
    _send(aws, Job(type="extract", tenant="t", user_id="u", payload={"poison": True}))
    _send(aws, Job(type="extract", tenant="t", user_id="u", payload={"message_id": "m2"}))
    assert _deliver(aws, worker) == {"received": 2, "failed": 1}  # the throttled one deferred
    rounds = 0
    while _deliver(aws, worker)["received"]:  # poisoned, and throttled past its deferrals, fail
        rounds += 1
        assert rounds <= 2 * MAX_RECEIVES
    dead = receive_all(aws.sqs, aws.dlqs["extract"])
    assert len(dead) == 2
    spent = [m for m in dead if "m2" in m["Body"]]
    assert spent[0]["MessageAttributes"][DEFERRALS]["StringValue"] == "1"


def test_the_backoff_doubles_from_thirty_seconds_to_sqs_longest_delay() -> None:
    backoff = SqsThrottleBackoff(object(), jitter=0.0)
    assert [backoff.delay(n) for n in range(7)] == [30, 60, 120, 240, 480, 900, 900]
    assert MAX_DELAY_SECONDS == 900
    jittered = SqsThrottleBackoff(object(), jitter=0.2)
    assert all(24 <= jittered.delay(0) <= 36 for _ in range(50))
