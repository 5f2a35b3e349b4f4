"""The SQS worker: one batch of queue messages, each an idempotent job, failures reported per record.

Powertools' ``BatchProcessor`` runs every record and answers with
``batchItemFailures``: only the failed records return to the queue (and, after
``maxReceiveCount`` receives, go to the DLQ); one poisoned record never fails
the batch. Each job runs through Powertools idempotency keyed on the job id,
so a redelivered message, or the same job sent twice, does its work once and
the second time returns the stored result. While the batch runs, its
messages are kept hidden by short renewed leases (``visibility``,
``adapters/queue/sqs_visibility.py``): a long job keeps its message, and the
batch of a worker that died is delivered again within seconds. A job a
dependency throttled (``Throttled``) is not a failed attempt: ``backoff``
sends it back to its queue with an exponential delay and the record
succeeds (``adapters/queue/sqs_backoff.py``), so throttling never
dead-letters a healthy job; a poisoned one still fails each receive.

With a ``recorder`` (``domain/jobs.py``) each job's state is reported: running
at each receive, done, queued again after a failed or deferred attempt, and
failed on the receive that SQS dead-letters it after (its queue's
``maxReceiveCount``, read from the queue by ``limit``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import nullcontext
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

from memstack.adapters.queue.sqs_arns import SqsReceiveLimit
from memstack.adapters.queue.sqs_backoff import SqsThrottleBackoff
from memstack.adapters.queue.sqs_visibility import SqsVisibilityHeartbeat
from memstack.domain.jobs import JobRecorder
from memstack.errors import Throttled
from memstack.ports.queue import Job

logger = Logger(service="memstack")


class PoisonedMessage(ValueError):
    """A message that can never succeed (not a job, or a job this queue does not carry)."""


class JobWorker:
    def __init__(
        self,
        process: Callable[[Job], Any],
        accepts: Collection[str],
        persistence: BasePersistenceLayer | None,
        expires_after_seconds: int = 345_600,
        metrics: Any = None,
        visibility: SqsVisibilityHeartbeat | None = None,
        backoff: SqsThrottleBackoff | None = None,
        recorder: JobRecorder | None = None,
        limit: SqsReceiveLimit | None = None,
    ) -> None:
        """``process`` runs one job; ``persistence`` is None only where idempotency is not wanted (a test).

        ``metrics`` (Powertools ``Metrics``) counts ``JobsSucceeded`` / ``JobsFailed`` per batch;
        ``visibility`` keeps the batch's messages hidden while it runs (None: the queue's timeout).
        """
        self.process = process
        self.visibility = visibility
        self.backoff = backoff
        self.recorder = recorder
        self.limit = limit
        self.metrics = metrics
        self.deferred = 0
        self.accepts = frozenset(accepts)
        # A batch where every record failed is still answered record by record (not raised), so the
        # invocation never counts as an error and only the failed records are received again.
        self.processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self.idempotency = IdempotencyConfig(
            event_key_jmespath="id",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=expires_after_seconds,
        )

        def run(job: dict[str, Any]) -> dict[str, Any]:
            parsed = Job.model_validate(job)
            self.process(parsed)
            return {"job_id": parsed.id, "type": parsed.type, "status": "done"}

        self._run: Callable[..., dict[str, Any]] = (
            idempotent_function(
                data_keyword_argument="job", persistence_store=persistence, config=self.idempotency
            )(run)
            if persistence is not None
            else run
        )

    def parse(self, record: SQSRecord) -> Job:
        try:
            job = Job.model_validate_json(record.body)
        except ValueError as exc:
            raise PoisonedMessage(f"message {record.message_id} is not a job: {exc}") from None
        if job.type not in self.accepts:
            raise PoisonedMessage(
                f"message {record.message_id}: {job.type!r} jobs do not belong on this queue"
            )
        return job

    def record_handler(self, record: SQSRecord) -> dict[str, Any]:
        job = self.parse(record)
        attempt = int(record.attributes.approximate_receive_count or 1)
        logger.append_keys(job_id=job.id, job_type=job.type)
        if self.recorder is not None:
            self.recorder.running(job, attempt)
        try:
            answer = self._run(job=job.model_dump(mode="json"))
        except Throttled as exc:
            delay = self.backoff.defer(record.raw_event) if self.backoff is not None else None
            if delay is None:  # no backoff, or its deferrals are spent: an attempt like any other
                self._failed(job, attempt, exc, record)
                raise
            self.deferred += 1
            if self.recorder is not None:  # its copy comes back after the delay
                self.recorder.failed(job, attempt, exc, final=False)
            logger.warning("job throttled: deferred", extra={"delay_seconds": delay})
            return {"job_id": job.id, "type": job.type, "status": "deferred", "delay_seconds": delay}
        except Exception as exc:
            self._failed(job, attempt, exc, record)
            raise
        else:
            if self.recorder is not None:
                self.recorder.done(job, attempt)
            return answer
        finally:
            logger.remove_keys(["job_id", "job_type"])

    def _failed(self, job: Job, attempt: int, error: Exception, record: SQSRecord) -> None:
        """A failed attempt; failed for good on the receive after which SQS dead-letters the message."""
        if self.recorder is None:
            return
        final = False
        if self.limit is not None and record.event_source_arn:
            try:
                final = attempt >= self.limit.max_receives(record.event_source_arn)
            except Exception:  # unknown: say retried (never "failed" for a job SQS may still deliver)
                logger.warning("could not read the queue's redrive policy", exc_info=True)
        self.recorder.failed(job, attempt, error, final=final)

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The Lambda entry: ``{"batchItemFailures": [...]}`` naming only the records that failed."""
        if context is not None:
            self.idempotency.register_lambda_context(context)
        with self.visibility.keep(event) if self.visibility is not None else nullcontext():
            response = process_partial_response(
                event=event, record_handler=self.record_handler, processor=self.processor, context=context
            )
        failed = len(response["batchItemFailures"])
        deferred, self.deferred = self.deferred, 0
        if self.metrics is not None:
            self.metrics.add_metric(name="JobsFailed", unit=MetricUnit.Count, value=failed)
            self.metrics.add_metric(
                name="JobsSucceeded",
                unit=MetricUnit.Count,
                value=len(event.get("Records", [])) - failed - deferred,
            )
        if deferred:
            logger.info("jobs deferred (throttled)", extra={"deferred": deferred})
        if failed:
            logger.warning("jobs failed", extra={"failed": failed, "records": len(event.get("Records", []))})
        return dict(response)
