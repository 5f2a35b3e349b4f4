"""Who is calling: the tenant comes from authentication, never from the request body.

Two authenticators, one per deployment:

* ``ApiKeyAuthenticator`` (the local server): ``Authorization: Bearer <key>``
  or ``X-Api-Key: <key>``, mapped to a tenant by ``Settings.api_key_map()``.
* ``RequestContextAuthenticator`` (API Gateway + Lambda): API Gateway has
  already verified the caller; the tenant is the Cognito app client id when
  the Cognito authorizer is used, otherwise the IAM principal (an assumed-role
  session is reduced to its role, so every session of one agent role is one
  tenant).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from typing import Any, Protocol

from memstack.errors import Unauthorized

_ASSUMED_ROLE = re.compile(
    r"^arn:(?P<partition>[^:]+):sts::(?P<account>\d+):assumed-role/(?P<role>[^/]+)/.+$"
)


class Authenticator(Protocol):
    def tenant(self, event: Mapping[str, Any]) -> str:
        """The tenant of the caller of this API Gateway REST event; raises ``Unauthorized``."""
        ...


def _header(event: Mapping[str, Any], name: str) -> str | None:
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name and value is not None:
            return str(value)
    return None


class ApiKeyAuthenticator:
    def __init__(self, key_map: dict[str, str]) -> None:
        self.key_map = dict(key_map)

    def tenant(self, event: Mapping[str, Any]) -> str:
        key = _header(event, "x-api-key")
        auth = _header(event, "authorization")
        if key is None and auth is not None:
            scheme, _, token = auth.strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthorized("the Authorization header must be 'Bearer <api key>'")
            key = token.strip()
        if key is None:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>' or 'X-Api-Key: <key>'")
        # Compare against every key in constant time so timing does not reveal a prefix.
        found = None
        for known, tenant in self.key_map.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                found = tenant
        if found is None:
            raise Unauthorized("the API key is not valid")
        return found


def principal_tenant(arn: str) -> str:
    """An IAM principal ARN as a stable tenant: assumed-role sessions collapse to their role."""
    match = _ASSUMED_ROLE.match(arn)
    if match:
        return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"
    return arn


class RequestContextAuthenticator:
    def tenant(self, event: Mapping[str, Any]) -> str:
        ctx = event.get("requestContext") or {}
        claims = (ctx.get("authorizer") or {}).get("claims") or {}
        # Access tokens carry client_id; ID tokens carry the app client in aud.
        client_id = claims.get("client_id") or claims.get("aud")
        if client_id:
            return f"cognito:{client_id}"
        identity = ctx.get("identity") or {}
        arn = identity.get("userArn")
        if arn:
            return principal_tenant(str(arn))
        caller = identity.get("caller")
        if caller:
            # "<principal id>:<session name>" for a role session: the tenant is the principal.
            return f"iam:{str(caller).split(':', 1)[0]}"
        raise Unauthorized("the request carries no authenticated identity (is the API's authorizer enabled?)")
