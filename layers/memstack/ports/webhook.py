"""The webhook sender port: one POST to a tenant's receiver, under the deployment's outbound policy."""

from __future__ import annotations

from typing import Protocol


class WebhookSender(Protocol):
    def post(self, url: str, body: bytes, headers: dict[str, str]) -> int:
        """POST ``body`` to ``url``; the receiver's status code (redirects are not followed).

        Raises ``OutboundRefused`` when the URL breaks the outbound policy (a scheme or an
        address the deployment does not reach) and ``ReceiverFailed`` when no answer came
        (connection, TLS, time-out).
        """
        ...
