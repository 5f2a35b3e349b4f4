"""The memory browser's files (``memstack/ui``), served at ``/ui`` by the same resolver as the API.

The page is plain HTML, CSS and JavaScript shipped as package data: nothing to
build, nothing fetched from elsewhere at run time. It calls only the public
REST API, with the credential the user types in, so the same files work behind
``memstack serve`` and behind API Gateway (where ``/ui`` is a public route and
the page's calls carry the caller's own token). The files hold no user data;
they are public like ``/docs``.

``/ui/config.json`` tells the page how it may sign in: with a Cognito user name
and password when the deployment names an app client (``MEMSTACK_UI_COGNITO_*``);
then, and only then, the page may also connect to that pool's endpoint, which
the Content-Security-Policy names exactly.
"""

from __future__ import annotations

import functools
import html
import json
from importlib import resources
from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler import Response

if TYPE_CHECKING:
    from memstack.api.app import MemstackResolver
    from memstack.settings import ApiLimits

#: asset name -> content type (only these are served; nothing else of the package is reachable)
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}


def cognito_endpoint(region: str) -> str:
    """The user pool API a browser signs in with (InitiateAuth), for a pool in ``region``."""
    return f"https://cognito-idp.{region}.amazonaws.com/"


def headers(api: ApiLimits) -> dict[str, str]:
    """The page runs only its own script and style and talks only to its own origin (and the
    Cognito endpoint of its sign-in, when there is one; the region is checked by its setting)."""
    connect = "'self'"
    if api.ui_cognito_region:
        connect += " " + cognito_endpoint(api.ui_cognito_region).rstrip("/")
    return {
        "Content-Security-Policy": (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
            f"connect-src {connect}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }


def config(api: ApiLimits) -> dict[str, object]:
    """What the page may sign in with: always a credential typed in; a Cognito user when configured."""
    cognito = None
    if api.ui_cognito_client_id and api.ui_cognito_region:
        cognito = {
            "client_id": api.ui_cognito_client_id,
            "region": api.ui_cognito_region,
            "endpoint": cognito_endpoint(api.ui_cognito_region),
        }
    return {"cognito": cognito}


@functools.cache
def asset(name: str) -> str:
    return (resources.files("memstack") / "ui" / name).read_text(encoding="utf-8")


def is_ui_path(path: str) -> bool:
    return path == "/ui" or path.startswith("/ui/")


def stage_prefix(request_path: str | None, path: str) -> str:
    """What API Gateway put before the routed path (its stage, a custom domain's base path), else ""."""
    if request_path and request_path != path and request_path.endswith(path):
        return request_path[: -len(path)]
    return ""


def register(app: MemstackResolver, api: ApiLimits) -> None:
    page_headers = headers(api)
    page_config = json.dumps(config(api))

    def page() -> Response:
        event = app.current_event
        context = event.raw_event.get("requestContext") or {}
        prefix = stage_prefix(context.get("path"), event.path)
        body = asset("index.html").replace("{{BASE}}", html.escape(prefix, quote=True))
        return Response(200, "text/html; charset=utf-8", body, headers=page_headers)

    # No return annotations: the resolver's validation would try to make a schema of Response.
    # "/ui/" is "/ui" to the resolver (it strips the trailing slash).
    @app.get("/ui", include_in_schema=False)
    def ui_page():
        return page()

    @app.get("/ui/<name>", include_in_schema=False)
    def ui_asset(name: str):
        if name == "config.json":
            return Response(200, "application/json", page_config, headers=page_headers)
        if name not in ASSETS:
            return Response(404, "text/plain; charset=utf-8", "not found", headers=page_headers)
        return Response(200, ASSETS[name], asset(name), headers=page_headers)
