"""Errors the domain raises; the API maps each ``code`` to an HTTP status."""

from __future__ import annotations

from typing import Any


class MemstackError(Exception):
    """Base class: a machine-readable ``code`` and a message a person understands."""

    code = "internal_error"
    status = 500

    def __init__(self, message: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class ValidationFailed(MemstackError):
    code = "validation_error"
    status = 422


class BadRequest(MemstackError):
    code = "bad_request"
    status = 400


class NotFound(MemstackError):
    code = "not_found"
    status = 404


class Conflict(MemstackError):
    code = "conflict"
    status = 409


class PayloadTooLarge(MemstackError):
    code = "payload_too_large"
    status = 413


class Unauthorized(MemstackError):
    code = "unauthorized"
    status = 401


class Forbidden(MemstackError):
    code = "forbidden"
    status = 403


class RateLimited(MemstackError):
    code = "rate_limited"
    status = 429


class SettingsError(MemstackError):
    """A ``MEMSTACK_*`` variable has a value the settings cannot accept."""

    code = "settings_error"
    status = 500


class DependencyFailed(MemstackError):
    """An external part (model, store, queue) failed after its retries."""

    code = "dependency_failed"
    status = 503


class Throttled(DependencyFailed):
    """A dependency refused the call for its rate (Bedrock, DynamoDB): the same work succeeds later.

    Still a 503 ``dependency_failed`` to an API caller; a queue worker defers the job with a
    backoff instead of counting a failed attempt (``workers/sqs.py``).
    """


class StorageFull(MemstackError):
    """The data volume is full: nothing of the request was stored; retry once space is freed."""

    code = "storage_full"
    status = 507
    #: seconds a client should wait before retrying (the ``Retry-After`` header)
    retry_after = 30
