"""The SQS job queue: an extraction queue and a consolidation queue, each with a dead-letter queue.

In AWS the worker Lambdas consume the queues (``memstack.workers.sqs``); SQS
moves a message to its DLQ after ``maxReceiveCount`` receives (the redrive
policy E provisions). ``drain`` consumes the queues in this process with the
handler set on it, for running without Lambda (a laptop against real SQS,
integration tests). A message ``drain`` receives is hidden for
``lease_seconds`` only and kept hidden by a heartbeat while its job runs, so
a consumer that dies gives its job back within seconds. ``drain(job_ids=...)``
(a ``sync`` request waiting for its own jobs) cannot pick messages out of a
queue: it returns False at once and the caller watches the jobs' effect.
``dead_letters`` lists the DLQs without consuming them and ``redrive`` sends
their messages back to their source queues.

DLQ URLs come from settings, or are read from each source queue's
``RedrivePolicy`` when unset.

With a ``recorder`` (``domain/jobs.py``) a job is recorded queued before it
is sent (or redriven), so the worker that takes it always finds its record;
``drain`` reports running, done and failed as the worker Lambda does
(``workers/sqs.py``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from memstack.adapters.aws_errors import aws_dependency
from memstack.domain.heartbeat import LeaseKeeper
from memstack.domain.jobs import JobRecorder
from memstack.errors import DependencyFailed, SettingsError
from memstack.ports.queue import Job
from memstack.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.adapters.embedded.database import Database

SQS = "SQS"
_SEND_ATTEMPTS = 4


class SqsJobQueue:
    def __init__(
        self,
        queue_urls: dict[str, str],
        *,
        dlq_urls: dict[str, str] | None = None,
        client: Any = None,
        region: str | None = None,
        list_visibility_seconds: int = 30,
        lease_seconds: int = 30,
    ) -> None:
        self.queue_urls = dict(queue_urls)
        self.lease_seconds = lease_seconds
        self._heartbeat = LeaseKeeper(lease_seconds / 3, name="memstack-sqs-heartbeat")
        self._dlq_urls = dict(dlq_urls or {})
        self._client = client
        self._region = region
        self.list_visibility_seconds = list_visibility_seconds
        self._handler: Callable[[Job], None] | None = None
        self.recorder: JobRecorder | None = None

    @classmethod
    def from_settings(cls, settings: Settings, client: Any = None) -> SqsJobQueue:
        urls = {
            "extract": settings.aws.extraction_queue_url,
            "consolidate": settings.aws.consolidation_queue_url,
            "webhook": settings.aws.webhook_queue_url,
        }
        dlqs = {
            "extract": settings.aws.extraction_dlq_url,
            "consolidate": settings.aws.consolidation_dlq_url,
            "webhook": settings.aws.webhook_dlq_url,
        }
        if not any(urls.values()):
            raise SettingsError(
                "queue_backend=sqs needs MEMSTACK_EXTRACTION_QUEUE_URL or MEMSTACK_CONSOLIDATION_QUEUE_URL"
            )
        return cls(
            {k: v for k, v in urls.items() if v},
            dlq_urls={k: v for k, v in dlqs.items() if v},
            client=client,
            region=settings.aws.aws_region,
            lease_seconds=max(2, round(settings.queue.queue_lease_seconds)),
        )

    @property
    def client(self) -> Any:
        if self._client is None:  # created on first use, so building a service costs no AWS call
            import boto3

            self._client = boto3.client("sqs", region_name=self._region)
        return self._client

    def dlq_url(self, job_type: str) -> str | None:
        """The DLQ of a job type's queue: configured, else from the queue's RedrivePolicy."""
        if job_type not in self._dlq_urls and job_type in self.queue_urls:
            attrs = self.client.get_queue_attributes(
                QueueUrl=self.queue_urls[job_type], AttributeNames=["RedrivePolicy"]
            ).get("Attributes", {})
            if "RedrivePolicy" in attrs:
                arn = json.loads(attrs["RedrivePolicy"])["deadLetterTargetArn"]
                _, _, _, _, account, name = arn.split(":", 5)
                self._dlq_urls[job_type] = self.client.get_queue_url(
                    QueueName=name, QueueOwnerAWSAccountId=account
                )["QueueUrl"]
        return self._dlq_urls.get(job_type)

    # ----------------------------------------------------------------- the port
    @aws_dependency(SQS)
    def send(self, jobs: list[Job]) -> None:
        by_type: dict[str, list[Job]] = {}
        for job in jobs:
            if job.type not in self.queue_urls:
                raise SettingsError(f"no SQS queue is configured for {job.type!r} jobs")
            by_type.setdefault(job.type, []).append(job)
        if self.recorder is not None:
            self.recorder.queued(jobs)
        for job_type, batch in by_type.items():
            for start in range(0, len(batch), 10):  # SQS takes at most 10 messages per call
                self._send_chunk(self.queue_urls[job_type], batch[start : start + 10])

    def _send_chunk(self, url: str, chunk: list[Job]) -> None:
        """One SendMessageBatch; entries SQS failed on its side are sent again, a few times."""
        todo = dict(enumerate(chunk))
        for attempt in range(_SEND_ATTEMPTS):
            out = self.client.send_message_batch(
                QueueUrl=url,
                Entries=[
                    {
                        "Id": str(i),
                        "MessageBody": job.model_dump_json(),
                        "MessageAttributes": {"job_type": {"DataType": "String", "StringValue": job.type}},
                    }
                    for i, job in todo.items()
                ],
            )
            failed = out.get("Failed") or []
            todo = {int(f["Id"]): todo[int(f["Id"])] for f in failed}
            if not todo:
                return
            if any(f.get("SenderFault") for f in failed):
                break  # our fault: sending the same again cannot help
            time.sleep(min(0.05 * 2**attempt, 1.0))
        raise DependencyFailed(
            f"SQS refused jobs {[j.id for j in todo.values()]}: {failed[0].get('Message', '')}"
        )

    def set_handler(self, handler: Callable[[Job], None]) -> None:
        self._handler = handler

    @aws_dependency(SQS)
    def drain(self, timeout: float | None = None, job_ids: list[str] | None = None) -> bool:
        """Consume the source queues here until all are empty (failures retry, then SQS dead-letters).

        With ``job_ids``: False at once (see the module docstring).
        """
        if job_ids is not None:
            return not job_ids
        if self._handler is None:
            raise RuntimeError("no job handler is set on the SQS queue")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            received = 0
            for url in self.queue_urls.values():
                received += self._consume(url)
            if not received and self._empty():
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            if not received:
                time.sleep(0.2)

    @aws_dependency(SQS)
    def dead_letters(self, tenant: str | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for job_type in self.queue_urls:
            url = self.dlq_url(job_type)
            if not url:
                continue
            seen = list(self._receive_all(url, self.list_visibility_seconds))
            for msg in seen:
                if tenant is not None and (_owner(msg) or ("",))[0] != tenant:
                    continue
                out.append(
                    {
                        "id": _job_id(msg),
                        "queue": job_type,
                        "message_id": msg["MessageId"],
                        "attempts": int(msg.get("Attributes", {}).get("ApproximateReceiveCount", 0)),
                        "job": _body(msg),
                        "error": None,
                    }
                )
            # Listing must not consume: make what was just hidden visible again.
            for start in range(0, len(seen), 10):
                self.client.change_message_visibility_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                        for i, m in enumerate(seen[start : start + 10])
                    ],
                )
        return out

    def waiting(self, tenant: str) -> None:
        """SQS shows a message only to whoever receives it (which would count as an attempt)."""
        return None

    @aws_dependency(SQS)
    def redrive(self, tenant: str | None = None, job_ids: list[str] | None = None) -> int:
        """Move dead-lettered messages (all, ``tenant``'s, or ``job_ids``) back to their source queue.

        Messages left where they are are made visible again at once, as listing leaves them.
        """
        wanted = None if job_ids is None else set(job_ids)
        moved = 0
        for job_type, source in self.queue_urls.items():
            url = self.dlq_url(job_type)
            if not url:
                continue
            left: list[dict[str, Any]] = []
            try:
                while batch := self.client.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    VisibilityTimeout=60,
                    WaitTimeSeconds=0,
                    AttributeNames=["All"],
                    MessageAttributeNames=["All"],
                ).get("Messages", []):
                    chosen = [
                        m
                        for m in batch
                        if (tenant is None or (_owner(m) or ("",))[0] == tenant)
                        and (wanted is None or _job_id(m) in wanted)
                    ]
                    left += [m for m in batch if m not in chosen]
                    if chosen:
                        moved += self._move(url, source, chosen)
            finally:
                for start in range(0, len(left), 10):
                    self.client.change_message_visibility_batch(
                        QueueUrl=url,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                            for i, m in enumerate(left[start : start + 10])
                        ],
                    )
        return moved

    def _move(self, dlq: str, source: str, batch: list[dict[str, Any]]) -> int:
        jobs = [_job_of(m) for m in batch]
        if self.recorder is not None:  # queued again before it can run (one SQS refused: failed, below)
            self.recorder.queued([j for j in jobs if j is not None])
        sent = self.client.send_message_batch(
            QueueUrl=source,
            Entries=[
                {"Id": str(i), "MessageBody": m["Body"], "MessageAttributes": m.get("MessageAttributes", {})}
                for i, m in enumerate(batch)
            ],
        )
        ok = {int(s["Id"]) for s in sent.get("Successful", [])}
        if self.recorder is not None:
            for i, (m, job) in enumerate(zip(batch, jobs, strict=True)):
                if i not in ok and job is not None:
                    self.recorder.failed(job, _receives(m), "dependency_failed", final=True)
        # Delete only what reached the source queue; the rest stays dead-lettered.
        if ok:
            self.client.delete_message_batch(
                QueueUrl=dlq,
                Entries=[{"Id": str(i), "ReceiptHandle": batch[i]["ReceiptHandle"]} for i in sorted(ok)],
            )
        if len(ok) < len(batch):
            raise DependencyFailed(f"SQS refused {len(batch) - len(ok)} redriven messages")
        return len(ok)

    @aws_dependency(SQS)
    def erase_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's dead-lettered jobs; returns how many.

        Messages still in the source queues cannot be picked out; they are
        no-ops once the user is erased (nothing left to read, and the stores
        refuse writes of work begun before the erase).
        """
        erased = 0
        for job_type in self.queue_urls:
            url = self.dlq_url(job_type)
            if not url:
                continue
            seen = list(self._receive_all(url, self.list_visibility_seconds))
            theirs = [m for m in seen if _owner(m) == (tenant, user_id)]
            others = [m for m in seen if _owner(m) != (tenant, user_id)]
            for start in range(0, len(theirs), 10):
                self.client.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(theirs[start : start + 10])
                    ],
                )
            for start in range(0, len(others), 10):  # the rest visible again, as listing leaves them
                self.client.change_message_visibility_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                        for i, m in enumerate(others[start : start + 10])
                    ],
                )
            erased += len(theirs)
        return erased

    # -------------------------------------------------------------- internals
    def _receive_all(self, url: str, visibility: int) -> Iterator[dict[str, Any]]:
        while msgs := self.client.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=visibility,
            WaitTimeSeconds=0,
            AttributeNames=["All"],
        ).get("Messages", []):
            yield from msgs

    def _consume(self, url: str) -> int:
        assert self._handler is not None
        # One message at a time: a lease (visibility) covers only the job that is running.
        msgs = self.client.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=1,
            WaitTimeSeconds=0,
            VisibilityTimeout=self.lease_seconds,
            AttributeNames=["All"],
        ).get("Messages", [])
        for msg in msgs:
            handle = msg["ReceiptHandle"]

            def renew(handle: str = handle) -> None:
                self.client.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=self.lease_seconds
                )

            job = _job_of(msg)
            attempt = _receives(msg)
            if self.recorder is not None and job is not None:
                self.recorder.running(job, attempt)
            try:
                if job is None:
                    raise ValueError(f"message {msg['MessageId']} is not a job")
                with self._heartbeat.keep(renew):
                    self._handler(job)
            except Exception as exc:  # left to SQS: visible again now, dead-lettered after maxReceiveCount
                if self.recorder is not None and job is not None:
                    self.recorder.failed(job, attempt, exc, final=attempt >= self._max_receives(url))
                self.client.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
            else:
                self.client.delete_message(QueueUrl=url, ReceiptHandle=handle)
                if self.recorder is not None and job is not None:
                    self.recorder.done(job, attempt)
        return len(msgs)

    def _max_receives(self, url: str) -> float:
        """The queue's ``maxReceiveCount`` (no redrive policy: it never dead-letters)."""
        attrs = self.client.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
        policy = attrs.get("Attributes", {}).get("RedrivePolicy")
        return int(json.loads(policy)["maxReceiveCount"]) if policy else math.inf

    def _empty(self) -> bool:
        for url in self.queue_urls.values():
            attrs = self.client.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"]
            if int(attrs["ApproximateNumberOfMessages"]) or int(
                attrs["ApproximateNumberOfMessagesNotVisible"]
            ):
                return False
        return True


def _body(msg: dict[str, Any]) -> Any:
    try:
        return json.loads(msg["Body"])
    except ValueError:
        return msg["Body"]  # a poisoned message is listed as the text it is


def _job_of(msg: dict[str, Any]) -> Job | None:
    """The message's job; None for a poisoned message (listed and redriven as the text it is)."""
    try:
        return Job.model_validate_json(msg["Body"])
    except ValueError:
        return None


def _receives(msg: dict[str, Any]) -> int:
    return int(msg.get("Attributes", {}).get("ApproximateReceiveCount", 1))


def _job_id(msg: dict[str, Any]) -> str:
    body = _body(msg)
    return str(body.get("id")) if isinstance(body, dict) and body.get("id") else msg["MessageId"]


def _owner(msg: dict[str, Any]) -> tuple[str, str] | None:
    body = _body(msg)
    return (str(body.get("tenant")), str(body.get("user_id"))) if isinstance(body, dict) else None


def build(settings: Settings, clients: Mapping[str, Any], db: Database | None) -> SqsJobQueue:
    """``MEMSTACK_QUEUE_BACKEND=sqs``; ``clients["sqs"]`` when given (``factory.QUEUES``)."""
    return SqsJobQueue.from_settings(settings, client=clients.get("sqs"))
