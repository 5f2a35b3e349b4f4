"""Signing and verifying a webhook delivery: the Standard Webhooks scheme (HMAC-SHA256), stdlib only.

Three headers go with each delivery: ``webhook-id`` (the event's id, the same
on every retry: a receiver drops one it has seen), ``webhook-timestamp``
(Unix seconds of this attempt) and ``webhook-signature``: ``v1,`` and the
base64 HMAC-SHA256, keyed with the tenant's secret, of
``"<id>.<timestamp>.<body>"``. A receiver recomputes it over the raw body,
compares in constant time, and refuses a timestamp more than five minutes
from its clock, so a recorded delivery cannot be replayed later. Any
Standard Webhooks library verifies these (the secret is ``whsec_`` and the
base64 of the key); ``verify`` below is the same check for Python receivers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping

SECRET_PREFIX = "whsec_"
#: a secret: the prefix and the base64 of 24 to 64 random bytes
SECRET_PATTERN = r"^whsec_[A-Za-z0-9+/]{32,88}={0,2}$"
#: how far a delivery's timestamp may be from the receiver's clock
TOLERANCE_SECONDS = 300
ID, TIMESTAMP, SIGNATURE = "webhook-id", "webhook-timestamp", "webhook-signature"


class WebhookVerificationError(ValueError):
    """The delivery is not from memstack, was changed on the way, or is too old (a replay)."""


def new_secret() -> str:
    """A fresh signing secret (``whsec_`` + base64 of 32 random bytes)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a webhook secret starts with 'whsec_'")
    return base64.b64decode(secret[len(SECRET_PREFIX) :])


def signature(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(_key(secret), f"{event_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(secret: str, event_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one delivery attempt."""
    return {
        ID: event_id,
        TIMESTAMP: str(timestamp),
        SIGNATURE: signature(secret, event_id, timestamp, body),
        "Content-Type": "application/json",
    }


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> None:
    """Raise ``WebhookVerificationError`` unless ``body`` is a delivery signed with ``secret`` just now.

    ``headers``: the request's (any case); ``body``: its raw bytes, before any JSON parsing.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        event_id, stamp, signatures = lower[ID], lower[TIMESTAMP], lower[SIGNATURE]
        timestamp = int(stamp)
    except (KeyError, ValueError):
        raise WebhookVerificationError("missing or malformed webhook-id / -timestamp / -signature") from None
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        raise WebhookVerificationError("the timestamp is too far from now (a replay, or a clock off)")
    expected = signature(secret, event_id, timestamp, body)
    # The header may list several (space-separated) while a secret is being rotated.
    if not any(hmac.compare_digest(expected, given) for given in signatures.split()):
        raise WebhookVerificationError("the signature does not match the body")
