"""SigV4 signing for API Gateway (IAM auth) as an ``httpx.Auth``: the same for both clients.

Each attempt is signed when it is sent (so a retry carries a fresh
``X-Amz-Date``), with botocore's signer and credentials resolved lazily from
the default chain unless some are passed in.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import httpx

# Headers httpx adds on its own that must not be signed: a proxy or the server
# may rewrite them, and the signature would no longer match.
_UNSIGNED = frozenset({"connection", "user-agent", "accept-encoding", "content-length"})


class SigV4Auth(httpx.Auth):
    requires_request_body = True

    def __init__(self, region: str, credentials: Any = None, service: str = "execute-api") -> None:
        self.region = region
        self.service = service
        self._credentials = credentials

    def credentials(self) -> Any:
        if self._credentials is None:
            from botocore.session import Session

            found = Session().get_credentials()
            if found is None:
                from memstack.client.errors import MemoryApiError

                raise MemoryApiError(0, "unauthorized", "no AWS credentials found to sign the request")
            self._credentials = found
        return self._credentials

    def sign(self, request: httpx.Request) -> None:
        from botocore.auth import SigV4Auth as BotocoreSigner
        from botocore.awsrequest import AWSRequest

        headers = {k: v for k, v in request.headers.items() if k.lower() not in _UNSIGNED}
        aws = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=headers)
        BotocoreSigner(self.credentials(), self.service, self.region).add_auth(aws)
        for name, value in aws.headers.items():
            request.headers[name] = value

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        self.sign(request)
        yield request
