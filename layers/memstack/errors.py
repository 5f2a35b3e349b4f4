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


def _field_name(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "messages", 0, "content")`` → ``messages[0].content``."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    name = ""
    for part in parts:
        if isinstance(part, int):
            name += f"[{part}]"
        else:
            name += f".{part}" if name else str(part)
    return name or "body"


def validation_details(errors: list[dict[str, Any]] | Any) -> list[dict[str, Any]]:
    """pydantic's errors as the API's ``details``: field, location, message, type."""
    details = []
    for err in errors:
        loc = list(err.get("loc", ()))
        details.append(
            {
                "field": _field_name(loc),
                "location": str(loc[0]) if loc else "body",
                "message": str(err.get("msg", "invalid value")).removeprefix("Value error, "),
                "type": str(err.get("type", "value_error")),
            }
        )
    return details


class ValidationFailed(MemstackError):
    code = "validation_error"

    @classmethod
    def of(cls, errors: list[dict[str, Any]] | Any, location: str = "body") -> ValidationFailed:
        """pydantic's ``errors()`` of a value sent in ``location``: the first names the field."""
        details = validation_details([{**e, "loc": (location, *e.get("loc", ()))} for e in errors])
        first = details[0] if details else {"field": location, "message": "invalid value"}
        more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
        return cls(f"{first['field']}: {first['message']}{more}", details)


class BadRequest(MemstackError):
    code = "bad_request"


class NotFound(MemstackError):
    code = "not_found"


class Conflict(MemstackError):
    code = "conflict"


class PreconditionFailed(MemstackError):
    """A write named the version it expected (``If-Match``), and that is no longer the stored one."""

    code = "precondition_failed"


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


class ModelNotInstalled(MemstackError):
    """An offline embedding model is not in the models directory (``memstack models install``).
    Here, not beside the installer, so the API maps it without importing the installer."""

    code = "model_not_installed"
