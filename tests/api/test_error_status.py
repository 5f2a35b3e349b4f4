"""Domain errors carry a code, not an HTTP status: the API edge chooses the status (``api.errors``)."""

from __future__ import annotations

import pytest
from memstack import errors
from memstack.adapters.embedded.busy import StoreBusy
from memstack.adapters.embedders.install import ModelNotInstalled
from memstack.adapters.postgres.executor import StoreUnavailable
from memstack.api.errors import http_status, install_error_handlers
from memstack.api.limits import MalformedBody
from memstack.domain.erasure import Erased


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.ValidationFailed("x"), 422),
        (errors.BadRequest("x"), 400),
        (MalformedBody("x"), 400),
        (errors.NotFound("x"), 404),
        (errors.Conflict("x"), 409),
        (Erased("x"), 409),
        (errors.PayloadTooLarge("x"), 413),
        (errors.Unauthorized("x"), 401),
        (errors.Forbidden("x"), 403),
        (errors.RateLimited("x"), 429),
        (errors.SettingsError("x"), 500),
        (errors.DependencyFailed("x"), 503),
        (errors.Throttled("x"), 503),
        (StoreBusy("x"), 503),
        (StoreUnavailable("x"), 503),
        (ModelNotInstalled("x"), 503),
        (errors.StorageFull("x"), 507),
        (errors.MemstackError("x"), 500),
    ],
)
def test_each_kind_of_error_answers_its_status(error: errors.MemstackError, status: int) -> None:
    assert http_status(error) == status


def test_no_domain_error_carries_a_transport_status() -> None:
    kinds = [errors.MemstackError, *_subclasses(errors.MemstackError)]
    assert [k.__name__ for k in kinds if "status" in vars(k)] == []


def test_the_handler_answers_with_the_mapped_status_and_retry_after() -> None:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

    app = APIGatewayRestResolver()
    install_error_handlers(app)

    @app.get("/full")
    def full() -> None:
        raise errors.StorageFull("the data volume is full")

    @app.get("/erased")
    def erased() -> None:
        raise Erased("the user was erased")

    def call(path: str) -> dict:
        event = {"path": path, "httpMethod": "GET", "headers": {}, "requestContext": {}, "body": None}
        return app.resolve(event, None)

    full_answer = call("/full")
    assert full_answer["statusCode"] == 507 and full_answer["multiValueHeaders"]["Retry-After"] == ["30"]
    erased_answer = call("/erased")
    assert erased_answer["statusCode"] == 409 and '"user_erased"' in erased_answer["body"]


def _subclasses(kind: type) -> list[type]:
    out = []
    for sub in kind.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out
