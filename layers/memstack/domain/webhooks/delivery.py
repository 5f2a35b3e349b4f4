"""The ``webhook`` job: sign one event and POST it to its tenant's receiver; a refusal is retried.

The receiver is read from the tenant's configuration when the delivery runs
(not when the event was queued): a changed URL or secret applies to what is
still queued, and an event type the tenant no longer asks for is dropped. So
is an event of a user erased since it was made (a queue cannot pick the
user's messages out: the delivery checks the erasure log). Each attempt is
signed anew with its own timestamp (``signature.py``); the event id stays.

A receiver that does not answer 2xx is ``ReceiverFailed``, a ``Throttled``:
the SQS worker sends it back with an exponential delay (30 s doubling to 15
min, eight times) before counting failed attempts toward the dead-letter
queue; the SQLite queue retries it with its own backoff
(``MEMSTACK_WEBHOOK_BACKOFF_SECONDS``, ``MEMSTACK_WEBHOOK_MAX_ATTEMPTS``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aws_lambda_powertools import Logger

from memstack.domain.tenant.configs import TenantConfigs
from memstack.domain.webhooks.events import WebhookEvent
from memstack.domain.webhooks.signature import signed_headers
from memstack.errors import MemstackError, Throttled
from memstack.ports.queue import Job
from memstack.ports.stm import ErasureLog
from memstack.ports.webhook import WebhookSender

logger = Logger(service="memstack", child=True)


class ReceiverFailed(Throttled):
    """The receiver did not take the delivery (no answer, or not 2xx): try again later."""

    code = "receiver_failed"


class OutboundRefused(MemstackError):
    """The receiver's URL is one this deployment does not call (``docs/api.md``, outbound policy)."""

    code = "outbound_refused"


class WebhookDelivery:
    def __init__(
        self,
        configs: TenantConfigs,
        sender: WebhookSender,
        erasures: ErasureLog | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.configs = configs
        self.sender = sender
        self.erasures = erasures
        self.clock = clock

    def __call__(self, job: Job) -> None:
        event = WebhookEvent.model_validate(job.payload["event"])
        hooks = self.configs.current(job.tenant).webhooks
        if hooks.url is None or hooks.secret is None or event.type not in hooks.events:
            logger.info("webhook dropped: no longer asked for", extra={"event_id": event.id})
            return
        erased = self.erasures.erased_at(job.tenant, job.user_id) if self.erasures is not None else None
        if erased is not None and erased >= event.created_at.timestamp():
            logger.info("webhook dropped: its user was erased", extra={"event_id": event.id})
            return
        body = event.body()
        headers = signed_headers(hooks.secret.get_secret_value(), event.id, int(self.clock()), body)
        status = self.sender.post(hooks.url, body, headers)
        if not 200 <= status < 300:
            raise ReceiverFailed(f"the webhook receiver answered {status}")
        logger.info("webhook delivered", extra={"event_id": event.id, "status": status})
