"""What the OpenAPI document says beyond the routes: title, version, servers, security schemes.

The three ways in are declared so Swagger UI's "Authorize" works and a
generated client knows them: an API key in ``X-Api-Key``, the same key as a
bearer token (``memstack serve``), and SigV4 (API Gateway with IAM auth,
declared as API Gateway itself declares it). Any one of them is enough;
the public routes (health, the document, Swagger UI) say they need none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memstack import __version__

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.models import SecurityScheme

API_TITLE = "memstack"
API_VERSION = __version__
API_DESCRIPTION = (
    "Long-term memory for conversational AI agents. The tenant comes from the credential, never the body."
)


def security_schemes() -> dict[str, SecurityScheme]:
    """The three ways in, as OpenAPI models.

    Built when a document is asked for: Powertools' OpenAPI models take a tenth of a second
    to build, which a cold start serving API calls never needs.
    """
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer

    return {
        "ApiKey": APIKey(
            name="X-Api-Key",
            in_=APIKeyIn.header,
            description="memstack serve: a key of MEMSTACK_API_KEYS (default dev-key)",
        ),
        "Bearer": HTTPBearer(
            description="memstack serve: the same API key, as 'Authorization: Bearer <key>'"
        ),
        "SigV4": APIKey(
            name="Authorization",
            in_=APIKeyIn.header,
            description="API Gateway with IAM auth: requests signed with AWS SigV4 for service execute-api",
            **{"x-amazon-apigateway-authtype": "awsSigv4"},
        ),
    }


# For a route that needs no credential (an operation's empty security list overrides the global one).
PUBLIC: dict[str, Any] = {"security": []}


def openapi_options() -> dict[str, Any]:
    """Keyword arguments for the resolver's ``configure_openapi``/``get_openapi_json_schema``."""
    schemes = security_schemes()
    return {
        "title": API_TITLE,
        "version": API_VERSION,
        "description": API_DESCRIPTION,
        "security_schemes": schemes,
        # Alternatives: each entry alone authorises a request.
        "security": [{name: []} for name in schemes],
    }
