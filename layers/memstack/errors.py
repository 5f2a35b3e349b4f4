"""Errors the domain raises: a machine-readable ``code`` and a message; no transport in them.

The API maps each kind to its HTTP status at its edge (``api.errors.HTTP_STATUS``).
"""

from __future__ import annotations

from typing import Any


class MemstackError(Exception):
    """Base class: a machine-readable ``code`` and a message a person understands."""

    code = "internal_error"

    def __init__(self, message: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class ValidationFailed(MemstackError):
    code = "validation_error"


class BadRequest(MemstackError):
    code = "bad_request"


class NotFound(MemstackError):
    code = "not_found"


class Conflict(MemstackError):
    code = "conflict"


class PayloadTooLarge(MemstackError):
    code = "payload_too_large"


class Unauthorized(MemstackError):
    code = "unauthorized"


class Forbidden(MemstackError):
    code = "forbidden"


class RateLimited(MemstackError):
    code = "rate_limited"


class SettingsError(MemstackError):
    """A ``MEMSTACK_*`` variable has a value the settings cannot accept."""

    code = "settings_error"


class DependencyFailed(MemstackError):
    """An external part (model, store, queue) failed after its retries."""

    code = "dependency_failed"


class Throttled(DependencyFailed):
    """A dependency refused the call for its rate (Bedrock, DynamoDB): the same work succeeds later.

    Still a 503 ``dependency_failed`` to an API caller; a queue worker defers the job with a
    backoff instead of counting a failed attempt (``workers/sqs.py``).
    """


class StorageFull(MemstackError):
    """The data volume is full: nothing of the request was stored; retry once space is freed."""

    code = "storage_full"
    #: seconds a client should wait before retrying (the ``Retry-After`` header)
    retry_after = 30
