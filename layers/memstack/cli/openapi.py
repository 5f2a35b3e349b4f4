"""``memstack openapi > openapi.json``: the REST API's OpenAPI document, without a server.

The document is generated from the same route models the API validates with;
the TypeScript client (clients/typescript) is generated from it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Annotated

import typer

from memstack.cli.app import settings_from_cli


def openapi(
    indent: Annotated[int, typer.Option(min=0, max=8, help="JSON indentation (0: one line)")] = 2,
) -> None:
    """Print the OpenAPI 3 document of the REST API (security schemes included)."""
    from memstack.api.app import close_app, create_app, openapi_json
    from memstack.api.auth import ApiKeyAuthenticator
    from memstack.factory import build_service

    # The document depends on the routes only: build them over a throwaway store, touch nothing.
    with tempfile.TemporaryDirectory(prefix="memstack-openapi-") as scratch:
        settings = settings_from_cli(data_dir=scratch, embedder="hashing", store_backend="embedded")
        service = build_service(settings)
        app = create_app(service, settings, ApiKeyAuthenticator({}))
        try:
            document = json.loads(openapi_json(app))
        finally:
            close_app(app)
            service.close()
    sys.stdout.write(json.dumps(document, indent=indent or None, ensure_ascii=False) + "\n")


def register(app: typer.Typer) -> None:
    app.command()(openapi)
