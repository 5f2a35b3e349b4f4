"""Throttled jobs wait and come back, without spending the attempts that dead-letter a poisoned one.

SQS counts receives, not failures: a job reported failed is received again
and moves to the DLQ at ``maxReceiveCount`` (3), so sustained Bedrock
throttling (~45 s at a 15 s lease) dead-lettered healthy jobs. Extending
the message's visibility would only spread those receives out. Instead the
worker hands a throttled job back as a fresh copy of its message, hidden
for an exponential backoff (``DelaySeconds``, 30 s doubling up to SQS's 15
minutes), and lets the original succeed: the copy starts again at receive 1.
The copy carries how often it was deferred (a message attribute); after
``max_deferrals`` (about an hour of backoff) the throttling counts as a
failed attempt like any other, so a job cannot be deferred forever.

The copy keeps the job id, so the idempotent worker still does its work at
most once; a failed send leaves the original to fail and be received again.
"""

from __future__ import annotations

import random
from typing import Any

from memstack.adapters.queue.sqs_arns import SqsByArn

#: the message attribute that counts a job's deferrals
DEFERRALS = "memstack_deferrals"
#: SQS's longest DelaySeconds
MAX_DELAY_SECONDS = 900


class SqsThrottleBackoff(SqsByArn):
    def __init__(
        self,
        client: Any = None,
        *,
        region: str | None = None,
        base_seconds: int = 30,
        max_deferrals: int = 8,
        jitter: float = 0.2,
    ) -> None:
        super().__init__(client, region)
        self.base_seconds = base_seconds
        self.max_deferrals = max_deferrals
        self.jitter = jitter

    @staticmethod
    def deferrals(record: dict[str, Any]) -> int:
        attribute = (record.get("messageAttributes") or {}).get(DEFERRALS) or {}
        try:
            return int(attribute.get("stringValue") or 0)
        except ValueError:
            return 0

    def delay(self, deferrals: int) -> int:
        """Seconds to wait before the next try: ``base * 2**deferrals``, some jitter, at most 15 min."""
        wait = self.base_seconds * 2**deferrals
        wait *= 1 + random.uniform(-self.jitter, self.jitter)
        return int(min(MAX_DELAY_SECONDS, max(0, wait)))

    def defer(self, record: dict[str, Any]) -> int | None:
        """Send the record's job back with a backoff; its delay, or None once its deferrals are spent."""
        done = self.deferrals(record)
        if done >= self.max_deferrals or not record.get("eventSourceARN"):
            return None
        delay = self.delay(done)
        attributes = {
            name: {"DataType": value["dataType"], "StringValue": value["stringValue"]}
            for name, value in (record.get("messageAttributes") or {}).items()
            if "stringValue" in value and name != DEFERRALS
        }
        attributes[DEFERRALS] = {"DataType": "Number", "StringValue": str(done + 1)}
        self.client.send_message(
            QueueUrl=self.queue_url(record["eventSourceARN"]),
            MessageBody=record["body"],
            DelaySeconds=delay,
            MessageAttributes=attributes,
        )
        return delay
