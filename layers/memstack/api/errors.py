"""One error shape for every failure: ``{"error": {"code", "message", "details"}}``.

Domain errors (``MemstackError``) carry their code; their HTTP status is chosen
here (``HTTP_STATUS``), the one place that knows HTTP. Powertools'
validation errors, idempotency conflicts, unknown routes and anything
unexpected are translated here, so no route ever answers in another shape.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)

from memstack.adapters.aws_errors import as_dependency_failure
from memstack.adapters.embedded.busy import as_store_busy
from memstack.errors import (
    BadRequest,
    Conflict,
    DependencyFailed,
    Forbidden,
    MemstackError,
    ModelNotInstalled,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    RateLimited,
    SettingsError,
    StorageFull,
    Unauthorized,
    ValidationFailed,
    validation_details,
)

logger = Logger(service="memstack-api", child=True)

#: the HTTP status of each kind of error; a subclass answers its nearest listed ancestor's
#: (``Erased`` a 409 as a ``Conflict``, ``Throttled`` a 503 as a ``DependencyFailed``)
HTTP_STATUS: dict[type[MemstackError], int] = {
    MemstackError: 500,
    ValidationFailed: 422,
    BadRequest: 400,
    NotFound: 404,
    Conflict: 409,
    PreconditionFailed: 412,
    PayloadTooLarge: 413,
    Unauthorized: 401,
    Forbidden: 403,
    RateLimited: 429,
    SettingsError: 500,
    DependencyFailed: 503,
    ModelNotInstalled: 503,
    StorageFull: 507,
}


def http_status(exc: MemstackError) -> int:
    """The status ``exc`` answers with: that of the nearest class of its kind in ``HTTP_STATUS``."""
    return next(HTTP_STATUS[kind] for kind in type(exc).__mro__ if kind in HTTP_STATUS)


def error_body(code: str, message: str, details: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({"error": {"code": code, "message": message, "details": details or []}})


def error_response(
    status: int, code: str, message: str, details: list[dict[str, Any]] | None = None
) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=error_body(code, message, details),
    )


def from_validation_error(exc: RequestValidationError) -> Response:
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        reason = next(
            (e.get("ctx", {}).get("error") for e in errors if e.get("type") == "json_invalid"), None
        )
        return error_response(
            400,
            "malformed_json",
            f"the request body is not valid JSON ({reason or 'decode error'})",
            [
                {
                    "field": "body",
                    "location": "body",
                    "message": str(reason or "decode error"),
                    "type": "json_invalid",
                }
            ],
        )
    details = validation_details(errors)
    first = details[0] if details else {"field": "body", "message": "invalid request"}
    more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
    return error_response(422, "validation_error", f"{first['field']}: {first['message']}{more}", details)


def install_error_handlers(app: APIGatewayRestResolver) -> None:
    @app.exception_handler(MemstackError)
    def _memstack(exc: MemstackError) -> Response:
        status = http_status(exc)
        if status >= 500:
            logger.error("request failed", extra={"code": exc.code, "error": exc.message})
        answer = error_response(status, exc.code, exc.message, exc.details)
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:  # the request did nothing: a client may retry after this long
            answer.headers["Retry-After"] = str(retry_after)
        return answer

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response:
        return from_validation_error(exc)

    @app.exception_handler(IdempotencyValidationError)
    def _key_reused(exc: IdempotencyValidationError) -> Response:
        return error_response(
            422,
            "idempotency_key_reused",
            "this Idempotency-Key was already used with a different request body",
            [
                {
                    "field": "Idempotency-Key",
                    "location": "header",
                    "message": "reused with another body",
                    "type": "idempotency_key_reused",
                }
            ],
        )

    @app.exception_handler(IdempotencyAlreadyInProgressError)
    def _in_progress(exc: IdempotencyAlreadyInProgressError) -> Response:
        return error_response(
            409, "conflict", "a request with this Idempotency-Key is still in progress; retry shortly"
        )

    @app.not_found
    def _no_route(exc: NotFoundError) -> Response:
        event = app.current_event
        answer = method_not_allowed(app)
        if answer is not None:
            return answer
        return error_response(404, "not_found", f"no route {event.http_method} {event.path}")

    @app.exception_handler(IdempotencyPersistenceLayerError)
    def _idempotency_store_down(exc: IdempotencyPersistenceLayerError) -> Response:
        logger.error("idempotency store failed", extra={"error": type(exc).__name__})
        return error_response(
            503,
            "dependency_failed",
            "the idempotency store failed; retry shortly (a retry stores nothing twice)",
        )

    @app.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response:
        # An AWS SDK error an adapter let through is still an outage (503), not a bug.
        # So is SQLite contention between processes sharing the data file (503, Retry-After).
        failure = as_dependency_failure("an AWS service", exc) or as_store_busy(exc)
        if failure is not None:
            return _memstack(failure)
        # A bug, never the caller's input: log it whole, answer without internals.
        logger.exception("unhandled error")
        return error_response(500, "internal_error", "the server failed to handle this request")


def allowed_methods(app: APIGatewayRestResolver, path: str) -> list[str]:
    """The methods some route accepts on ``path`` (a wrong method is 405, not 404).

    A fixed path is its own: ``/v1/memories/search`` is not the memory id ``search``.
    """
    static = static_methods(app, path)
    if static:
        return static
    return _with_head({route.method for route in app._dynamic_routes if route.rule.match(path)})


def static_methods(app: APIGatewayRestResolver, path: str) -> list[str]:
    """The methods of the fixed (parameterless) routes on ``path``."""
    return _with_head({route.method for route in app._static_routes if route.rule.match(path)})


def _with_head(methods: set[str]) -> list[str]:
    """``methods``, sorted, with HEAD wherever GET is (the resolver answers HEAD as GET without content)."""
    return sorted(methods | {"HEAD"} if "GET" in methods else methods)


def method_not_allowed(app: APIGatewayRestResolver) -> Response | None:
    """The 405 (with ``Allow``) for this request's method on its path, or ``None`` when no route has it."""
    event = app.current_event
    allowed = allowed_methods(app, event.path)
    if not allowed:
        return None
    answer = error_response(
        405,
        "method_not_allowed",
        f"{event.http_method} is not allowed on {event.path}; allowed: {', '.join(allowed)}",
    )
    answer.headers["Allow"] = ", ".join(allowed)
    return answer


def error_responses(*statuses: int) -> dict[int, Any]:
    """OpenAPI ``responses`` entries documenting the error shape for these statuses."""
    from memstack.api.schemas import ErrorResponse

    described = {
        400: "malformed JSON or a bad cursor",
        401: "missing or unknown credentials",
        404: "no such memory for this tenant and user",
        409: "a concurrent change won; retry",
        412: "If-Match named a version that is no longer the stored one; read again",
        413: "request body too large",
        507: "the data volume is full; nothing was stored; retry after Retry-After seconds",
        422: "a field is invalid (details name it)",
    }
    return {
        s: {
            "description": described.get(s, "error"),
            "content": {"application/json": {"model": ErrorResponse}},
        }
        for s in statuses
    }
