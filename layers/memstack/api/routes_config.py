"""The tenant's own configuration: ``GET``, ``PUT`` (replace) and ``PATCH`` (merge) ``/v1/config``.

The tenant is the caller's (its credential): there is no tenant in the path
or the body, so no caller can read or change another tenant's configuration.
Answers carry the version as an ``ETag``; a write with ``If-Match`` is refused
with 412 when the configuration changed since that version was read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body

from memstack.api.errors import error_responses
from memstack.api.routes_memories import reject_unknown_query
from memstack.api.schemas import TenantConfigResponse
from memstack.domain.tenant.config import TenantConfig
from memstack.domain.tenant.configs import VersionedConfig
from memstack.errors import ValidationFailed

if TYPE_CHECKING:
    from memstack.api.app import ApiDeps, MemstackResolver

_WRITE_ERRORS = error_responses(400, 401, 409, 412, 413, 422)
_PATCH_EXAMPLE = {
    "categories": {
        "custom": [{"name": "pets", "description": "the user's pets", "keywords": ["dog", "cat"]}]
    },
    "extraction": {"ignore": {"categories": ["health"]}},
}


def answer(versioned: VersionedConfig) -> Response:
    body = TenantConfigResponse(
        config=versioned.config, version=versioned.version, updated_at=versioned.updated_at
    )
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump_json(),
        headers={"ETag": f'"{versioned.version}"'},
    )


def if_match(app: MemstackResolver) -> int | None:
    """The version ``If-Match`` names (``"3"``, ``3`` or ``W/"3"``), or None without the header."""
    headers = {k.lower(): v for k, v in (app.current_event.headers or {}).items()}
    raw = headers.get("if-match")
    if raw is None or raw.strip() == "*":
        return None
    value = raw.strip().removeprefix("W/").strip('"')
    if not value.isdigit():
        raise ValidationFailed(
            f"If-Match must be a configuration version (the ETag of a GET), not {raw[:40]!r}",
            [{"field": "If-Match", "location": "header", "message": "not a version", "type": "value_error"}],
        )
    return int(value)


def register(app: MemstackResolver, deps: ApiDeps) -> None:
    configs = deps.service.tenant_configs

    @app.get(
        "/v1/config",
        summary="Read this tenant's configuration (custom categories, extraction instructions)",
        tags=["config"],
        responses={
            200: {
                "description": "the configuration",
                "content": {"application/json": {"model": TenantConfigResponse}},
            },
            **error_responses(401, 422),
        },
    )
    def get_config():
        reject_unknown_query(app, frozenset())
        return answer(configs.read(app.tenant()))

    @app.put(
        "/v1/config",
        summary="Replace this tenant's configuration (a section left out goes back to its defaults)",
        description="Send If-Match with the version read (its ETag) to refuse the write (412) if someone "
        "changed the configuration since. Changes reach extraction and filters within 15 seconds.",
        tags=["config"],
        responses={
            200: {
                "description": "the stored configuration",
                "content": {"application/json": {"model": TenantConfigResponse}},
            },
            **_WRITE_ERRORS,
        },
    )
    def put_config(body: Annotated[TenantConfig, Body()]):
        reject_unknown_query(app, frozenset())
        stored = configs.replace(app.tenant(), body.stored(), datetime.now(UTC), if_version=if_match(app))
        return answer(stored)

    @app.patch(
        "/v1/config",
        summary="Change parts of this tenant's configuration (a JSON merge patch, RFC 7386)",
        description="Objects merge key by key, null resets a key to its default, lists and other values "
        "replace. If-Match as for PUT.",
        tags=["config"],
        responses={
            200: {
                "description": "the stored configuration",
                "content": {"application/json": {"model": TenantConfigResponse}},
            },
            **_WRITE_ERRORS,
        },
    )
    def patch_config(
        body: Annotated[
            dict[str, Any], Body(description="the sections to change", examples=[_PATCH_EXAMPLE])
        ],
    ):
        reject_unknown_query(app, frozenset())
        return answer(configs.patch(app.tenant(), body, datetime.now(UTC), if_version=if_match(app)))
