"""SQS work queues (extraction, per-user consolidation, webhook deliveries), each with a dead-letter queue.

Visibility timeout is six times the consumer's timeout (AWS's guidance for
Lambda event sources), so a message is never handed to a second worker
while the first one may still be running it. Messages that fail
``max_receive_count`` times move to the DLQ, which an alarm watches.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

# Worker timeouts: the functions construct reads these so both sides agree.
EXTRACTION_WORKER_TIMEOUT = Duration.minutes(2)
CONSOLIDATION_WORKER_TIMEOUT = Duration.minutes(10)
# A batch of up to 10 deliveries, each waiting at most MEMSTACK_WEBHOOK_TIMEOUT_SECONDS (10 s).
WEBHOOK_WORKER_TIMEOUT = Duration.minutes(2)
MAX_RECEIVE_COUNT = 3
DLQ_RETENTION = Duration.days(14)


class WorkQueue(Construct):
    """A queue plus its DLQ, SQS-managed encryption and TLS-only access."""

    def __init__(
        self,
        scope: Construct,
        cid: str,
        *,
        consumer_timeout: Duration,
        max_receive_count: int = MAX_RECEIVE_COUNT,
    ) -> None:
        super().__init__(scope, cid)
        self.dlq = sqs.Queue(
            self,
            "Dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(consumer_timeout.to_seconds() * 6),
            retention_period=Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=max_receive_count),
        )


class Queues(Construct):
    def __init__(self, scope: Construct, cid: str) -> None:
        super().__init__(scope, cid)
        self.extraction = WorkQueue(self, "Extraction", consumer_timeout=EXTRACTION_WORKER_TIMEOUT)
        self.consolidation = WorkQueue(self, "Consolidation", consumer_timeout=CONSOLIDATION_WORKER_TIMEOUT)
        # Tenants' webhook events: a receiver that keeps failing dead-letters its deliveries here.
        self.webhooks = WorkQueue(self, "Webhooks", consumer_timeout=WEBHOOK_WORKER_TIMEOUT)

    def all(self) -> list[WorkQueue]:
        return [self.extraction, self.consolidation, self.webhooks]
