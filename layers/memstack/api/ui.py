"""The memory browser's files (``memstack/ui``), served at ``/ui`` by the same resolver as the API.

The page is plain HTML, CSS and JavaScript shipped as package data: nothing to
build, nothing fetched from elsewhere at run time. It calls only the public
REST API, with the credential the user types in, so the same files work behind
``memstack serve`` and behind API Gateway (where ``/ui`` is a public route and
the page's calls carry the caller's own token). The files hold no user data;
they are public like ``/docs``.
"""

from __future__ import annotations

import functools
import html
from importlib import resources
from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler import Response

if TYPE_CHECKING:
    from memstack.api.app import MemstackResolver

#: asset name -> content type (only these are served; nothing else of the package is reachable)
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
#: the page runs only its own script and style and talks only to its own origin
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


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


def register(app: MemstackResolver) -> None:
    def page() -> Response:
        event = app.current_event
        context = event.raw_event.get("requestContext") or {}
        prefix = stage_prefix(context.get("path"), event.path)
        body = asset("index.html").replace("{{BASE}}", html.escape(prefix, quote=True))
        return Response(200, "text/html; charset=utf-8", body, headers=HEADERS)

    # No return annotations: the resolver's validation would try to make a schema of Response.
    # "/ui/" is "/ui" to the resolver (it strips the trailing slash).
    @app.get("/ui", include_in_schema=False)
    def ui_page():
        return page()

    @app.get("/ui/<name>", include_in_schema=False)
    def ui_asset(name: str):
        if name not in ASSETS:
            return Response(404, "text/plain; charset=utf-8", "not found", headers=HEADERS)
        return Response(200, ASSETS[name], asset(name), headers=HEADERS)
