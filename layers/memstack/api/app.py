"""The one REST resolver: used by the API Lambda and by ``memstack serve``.

``create_app`` returns a Powertools ``APIGatewayRestResolver`` (with
validation on, so the OpenAPI document comes from the route models) wired to
a ``MemoryService``. Before any route runs, ``MemstackResolver.resolve``
authenticates the caller and enforces the body size limit, so a request that
is unauthenticated or too large is refused before its body is even parsed.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer, IdempotencyConfig

from memstack.api import (
    json_body,
    routes_admin,
    routes_config,
    routes_jobs,
    routes_keyed,
    routes_memories,
    routes_search,
    routes_transfer,
    ui,
)
from memstack.api.auth import Authenticator
from memstack.api.errors import error_body, http_status, install_error_handlers, static_methods
from memstack.api.idempotency import build_persistence, idempotency_config
from memstack.api.limits import check_body_size
from memstack.api.openapi import openapi_options
from memstack.errors import MemstackError
from memstack.service import MemoryService
from memstack.settings import Settings

# Reachable without credentials: liveness, the API's own documentation, and the icon every
# browser asks for (it answers 404, not a confusing 401).
DOCS_PATH = "/docs"
PUBLIC_PATHS = frozenset({"/v1/health", DOCS_PATH, "/openapi.json", "/favicon.ico"})

# A path parameter is one whole segment, whatever its characters: which characters a key or
# id may hold is the validation's rule (the same one for path, query and body), not the
# router's. Powertools' own segment class is narrower (no "é", no emoji: such a key answered
# 404 "no route") and its "$" also matches before a trailing newline, so
# "/v1/users/nlu%0A" routed as user "nlu" (the erase of another user). "\Z" is the true end.
_ROUTE_PARAM = re.compile(r"<(\w+)>")
UNMATCHED_ROUTE = "<no route>"


@dataclass
class ApiDeps:
    """What the routes need, passed in (never global) so tests build as many apps as they like."""

    service: MemoryService
    settings: Settings
    authenticator: Authenticator
    metrics: Metrics
    persistence: BasePersistenceLayer
    idempotency: IdempotencyConfig
    closers: list[Any] = field(default_factory=list)


class MemstackResolver(APIGatewayRestResolver):
    """``APIGatewayRestResolver`` whose current event belongs to the instance.

    Powertools keeps the current event on the ``BaseRouter`` class, shared by
    every resolver in the process. The local server runs one resolver per
    worker thread; keeping the event on the instance is what makes those
    threads independent. In Lambda (one request at a time) nothing changes.
    """

    def __init__(self, deps: ApiDeps) -> None:
        # One JSON parser for every body: oversized integers are a 422, lone surrogates too.
        super().__init__(enable_validation=True, json_body_deserializer=json_body.loads)
        self.deps = deps
        self._own_event: BaseProxyEvent | None = None
        self._own_context: Any = None
        self._docs_enabled = False

    @property  # type: ignore[override]
    def current_event(self) -> BaseProxyEvent:
        assert self._own_event is not None, "no request is being resolved"
        return self._own_event

    @current_event.setter
    def current_event(self, value: BaseProxyEvent) -> None:
        self._own_event = value

    @property
    def lambda_context(self) -> Any:
        return self._own_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._own_context = value

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "") -> re.Pattern[str]:
        return re.compile("^" + _ROUTE_PARAM.sub(r"(?P<\1>[^/]+)", rule) + r"/*\Z")

    def route_template(self, method: str, path: str) -> str:
        """The route ``method path`` resolves to, as declared (``/v1/memories/keys/<key>``).

        What the request log records instead of the path: the path holds
        user-chosen values (keys, user ids) that must not outlive an erase.
        """
        method = "GET" if method.upper() == "HEAD" else method.upper()  # HEAD is answered by GET's route
        for route in [*self._static_routes, *self._dynamic_routes]:
            if route.method == method and route.rule.match(path):
                return str(route.path)
        return UNMATCHED_ROUTE

    def _to_proxy_event(self, event: dict) -> BaseProxyEvent:
        proxy = super()._to_proxy_event(event)
        self._own_event = proxy
        return proxy

    def tenant(self) -> str:
        """The tenant of the request being resolved (from authentication, never the body)."""
        return self.deps.authenticator.tenant(self.current_event.raw_event)

    def enable_docs(self) -> None:
        """Swagger UI at ``DOCS_PATH``, registered by its first request (``resolve``): Powertools
        builds its OpenAPI models then, a tenth of a second no API call needs on a cold start."""
        if not self._docs_enabled:
            self.enable_swagger(path=DOCS_PATH, **openapi_options())
            self._docs_enabled = True

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        if str(event.get("httpMethod") or "").upper() == "HEAD":
            # HEAD is GET without the content (RFC 9110 9.3.2): the same checks, status and headers.
            return without_content(self.resolve({**event, "httpMethod": "GET"}, context))
        self._own_context = context
        if context is not None:  # in Lambda: idempotency records expire with the invocation's time left
            self.deps.idempotency.register_lambda_context(context)
        path = event.get("path") or "/"
        if path.rstrip("/") == DOCS_PATH:
            self.enable_docs()
        if path not in PUBLIC_PATHS and not ui.is_ui_path(path):
            try:
                self.deps.authenticator.tenant(event)
                check_body_size(event.get("body"), bool(event.get("isBase64Encoded")), self.deps.settings)
            except MemstackError as exc:
                return {
                    "statusCode": http_status(exc),
                    "multiValueHeaders": {"Content-Type": [content_types.APPLICATION_JSON]},
                    "body": error_body(exc.code, exc.message, exc.details),
                    "isBase64Encoded": False,
                }
        method = str(event.get("httpMethod") or "").upper()
        fixed = static_methods(self, path)
        if fixed and method not in fixed and method != "OPTIONS":
            # A fixed path is never a parameter's value: GET /v1/memories/search is not memory "search".
            message = f"{method} is not allowed on {path}; allowed: {', '.join(fixed)}"
            return {
                "statusCode": 405,
                "multiValueHeaders": {
                    "Content-Type": [content_types.APPLICATION_JSON],
                    "Allow": [", ".join(fixed)],
                },
                "body": error_body("method_not_allowed", message, []),
                "isBase64Encoded": False,
            }
        return super().resolve(as_json_request(event), context)


def without_content(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` (a GET's) as the answer to HEAD: no body, and the length the body would have had."""
    raw = answer.get("body") or ""
    length = len(base64.b64decode(raw)) if answer.get("isBase64Encoded") else len(raw.encode("utf-8"))
    multi = {
        k: v for k, v in (answer.get("multiValueHeaders") or {}).items() if k.lower() != "content-length"
    }
    headers = {k: v for k, v in (answer.get("headers") or {}).items() if k.lower() != "content-length"}
    multi["Content-Length"] = [str(length)]
    return {**answer, "headers": headers, "multiValueHeaders": multi, "body": "", "isBase64Encoded": False}


def as_json_request(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event with its body declared JSON, whatever Content-Type the caller sent.

    Every body of this API is JSON. ``curl -d`` sends form encoding by default,
    which the resolver would otherwise parse into a nonsense field name; treated
    as JSON it either works or gets a clear ``malformed_json`` answer. An empty
    body is declared JSON too: under another Content-Type the resolver raised
    "unsupported content type" (a 500) instead of answering 422 "body: Field required".
    """
    out = dict(event)
    headers = {k: v for k, v in (out.get("headers") or {}).items() if k.lower() != "content-type"}
    multi = {k: v for k, v in (out.get("multiValueHeaders") or {}).items() if k.lower() != "content-type"}
    headers["Content-Type"] = content_types.APPLICATION_JSON
    multi["Content-Type"] = [content_types.APPLICATION_JSON]
    out["headers"], out["multiValueHeaders"] = headers, multi
    return out


def create_app(
    service: MemoryService,
    settings: Settings,
    authenticator: Authenticator,
    *,
    metrics: Metrics | None = None,
    persistence: BasePersistenceLayer | None = None,
) -> MemstackResolver:
    """A resolver with every v1 route, the OpenAPI document and Swagger UI."""
    closers = []
    if persistence is None:
        persistence, close = build_persistence(settings)
        closers.append(close)
    deps = ApiDeps(
        service=service,
        settings=settings,
        authenticator=authenticator,
        metrics=metrics or Metrics(namespace="memstack", service="memstack-api"),
        persistence=persistence,
        idempotency=idempotency_config(settings),
        closers=closers,
    )
    app = MemstackResolver(deps)
    install_error_handlers(app)
    # Keyed routes first: /v1/memories/keys/history is a key, not the history of memory "keys".
    routes_keyed.register(app, deps)
    routes_memories.register(app, deps)
    routes_search.register(app, deps)
    routes_admin.register(app, deps)
    routes_transfer.register(app, deps)
    routes_jobs.register(app, deps)
    routes_config.register(app, deps)
    ui.register(app, settings.api)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi_document():
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=openapi_json(app))

    return app


def openapi_json(app: MemstackResolver) -> str:
    """The OpenAPI document of ``app`` (what ``/openapi.json`` serves and ``memstack openapi`` prints)."""
    return app.get_openapi_json_schema(**openapi_options())


def close_app(app: MemstackResolver) -> None:
    for close in reversed(app.deps.closers):
        close()
