"""Webhook events leave where memories are written and jobs fail: one queued delivery job per event.

Only a tenant whose configuration (``webhooks`` section) asks for an event's
type gets a delivery queued; the configuration is read from the cache of
``TenantConfigs`` (at most 15 s old), so a tenant without webhooks costs no
queue call. Queuing is best effort: the memory is written whatever happens
here, and an event the queue refused is logged (by id and type, never its
content) and not sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from aws_lambda_powertools import Logger

from memstack.domain.tenant.configs import TenantConfigs
from memstack.domain.webhooks.events import WebhookEvent, job_failed_event, memory_events
from memstack.models import MemoryRecord
from memstack.ports.job_status import JobStatus
from memstack.ports.queue import Job, JobQueue

logger = Logger(service="memstack", child=True)


def delivery_job(tenant: str, event: WebhookEvent) -> Job:
    """The job that delivers ``event`` (its id is the event's: a second send of it is the same job)."""
    return Job(
        id=event.id,
        type="webhook",
        tenant=tenant,
        user_id=event.user_id,
        payload={"event": event.model_dump(mode="json")},
    )


class WebhookPublisher:
    def __init__(
        self,
        configs: TenantConfigs,
        queue: JobQueue,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.configs = configs
        self.queue = queue
        self.clock = clock

    def memories_written(self, tenant: str, records: Iterable[MemoryRecord]) -> None:
        self.publish(tenant, memory_events(records, self.clock()))

    def job_failed(self, status: JobStatus) -> None:
        self.publish(status.tenant, [job_failed_event(status, self.clock())])

    def publish(self, tenant: str, events: list[WebhookEvent]) -> None:
        if not events:
            return
        try:
            hooks = self.configs.current(tenant).webhooks
            wanted = [e for e in events if hooks.url and e.type in hooks.events]
            if wanted:
                self.queue.send([delivery_job(tenant, e) for e in wanted])
        except Exception:
            logger.warning(
                "webhook events not queued",
                extra={"events": [(e.id, e.type) for e in events]},
                exc_info=True,
            )
