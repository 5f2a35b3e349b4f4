"""Keep the messages of a worker Lambda's batch hidden, by short leases renewed while the batch runs.

The event source mapping receives a batch with the queue's visibility
timeout, six times the function's timeout (AWS's guidance), so a worker
that dies mid-batch (a Lambda timeout, an out-of-memory kill) would hold
its messages for all that time. Instead the worker cuts each message's
visibility to ``lease_seconds`` as the batch starts and a heartbeat renews
it every third of that while the batch runs: a long job keeps its message
(no other worker takes it), and the messages of a worker that died are
delivered again within seconds. When the batch ends the renewals stop;
Lambda deletes the records that succeeded, and those that failed come back
when their lease runs out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memstack.adapters.queue.sqs_arns import SqsByArn
from memstack.domain.heartbeat import LeaseKeeper

log = logging.getLogger(__name__)

#: SQS changes the visibility of at most 10 messages per call
_BATCH = 10


class SqsVisibilityHeartbeat(SqsByArn):
    def __init__(
        self,
        client: Any = None,
        *,
        lease_seconds: int = 15,
        region: str | None = None,
        renew_every: float | None = None,
    ) -> None:
        """``renew_every``: seconds between renewals (default a third of the lease, so two may fail)."""
        super().__init__(client, region)
        self.lease_seconds = max(2, int(lease_seconds))
        interval = renew_every if renew_every is not None else self.lease_seconds / 3
        self._keeper = LeaseKeeper(interval, name="memstack-sqs-visibility")

    def lease(self, records: list[dict[str, Any]]) -> None:
        """Hide every record for ``lease_seconds`` from now (the cut at the start and each renewal)."""
        by_queue: dict[str, list[str]] = {}
        for record in records:
            if record.get("eventSourceARN") and record.get("receiptHandle"):
                by_queue.setdefault(record["eventSourceARN"], []).append(record["receiptHandle"])
        for arn, handles in by_queue.items():
            url = self.queue_url(arn)
            for start in range(0, len(handles), _BATCH):
                answer = self.client.change_message_visibility_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": self.lease_seconds}
                        for i, h in enumerate(handles[start : start + _BATCH], start)
                    ],
                )
                if answer.get("Failed"):
                    log.warning("SQS did not extend %d message lease(s)", len(answer["Failed"]))

    @contextmanager
    def keep(self, event: dict[str, Any]) -> Iterator[None]:
        """Inside the block, the event's messages stay hidden (renewed); outside, their lease runs out."""
        records = [r for r in event.get("Records", []) if isinstance(r, dict)]
        if not records:
            yield
            return
        try:
            self.lease(records)
        except Exception as exc:  # the queue's own (long) visibility still hides them: run the batch anyway
            log.warning("could not shorten the batch's message leases: %s", type(exc).__name__)
        with self._keeper.keep(lambda: self.lease(records)):
            yield
