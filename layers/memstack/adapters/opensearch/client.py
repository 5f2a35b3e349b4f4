"""The OpenSearch client: SigV4 for a managed domain (``es``) or a serverless collection (``aoss``).

``AWSV4SignerAuth`` is a ``requests`` auth hook, so the connection class is
``RequestsHttpConnection``. The client keeps a pooled HTTP session; the store
holds one client for the life of the Lambda container, so connections are
reused across invocations. The transport's own retries are off
(``max_retries=0``): it retries instantly, with no backoff, so the store
retries instead (``with_retries``), bounded and with exponential backoff
and jitter, on 429 and 5xx.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from memstack.errors import DependencyFailed

T = TypeVar("T")

#: HTTP statuses worth another try: throttling and server-side trouble
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


def build_client(
    endpoint: str,
    *,
    service: str | None = None,
    region: str | None = None,
    credentials: Any | None = None,
    timeout: float = 10.0,
    pool_maxsize: int = 10,
) -> Any:
    """An ``OpenSearch`` client for ``endpoint`` (``https://host`` or ``host``).

    ``service`` ``es`` or ``aoss`` signs every request with SigV4 using the
    default boto3 credential chain (the Lambda role); ``None`` sends unsigned
    requests (a local cluster for the live tests).
    """
    from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection

    url = endpoint if "://" in endpoint else f"https://{endpoint}"
    auth = None
    if service is not None:
        if credentials is None:
            import boto3

            session = boto3.Session()
            credentials = session.get_credentials()
            region = region or session.region_name
        if credentials is None or not region:
            raise DependencyFailed("no AWS credentials or region to sign OpenSearch requests with")
        auth = AWSV4SignerAuth(credentials, region, service)
    return OpenSearch(
        hosts=[url],
        http_auth=auth,
        use_ssl=url.startswith("https://"),
        verify_certs=url.startswith("https://"),
        connection_class=RequestsHttpConnection,
        pool_maxsize=pool_maxsize,
        timeout=timeout,
        max_retries=0,
        retry_on_timeout=False,
        http_compress=True,
    )


def _retryable(exc: Exception) -> bool:
    from opensearchpy.exceptions import ConnectionError as OsConnectionError
    from opensearchpy.exceptions import TransportError

    if isinstance(exc, OsConnectionError):  # includes timeouts
        return True
    return isinstance(exc, TransportError) and exc.status_code in RETRY_STATUSES


def with_retries(
    call: Callable[[], T],
    *,
    what: str,
    attempts: int = 4,
    base_delay: float = 0.1,
    max_delay: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``call``; on 429/5xx/connection errors wait (exponential, full jitter) and try again.

    After ``attempts`` tries the last error becomes ``DependencyFailed``; other
    errors (4xx) pass through untouched for the caller to map.
    """
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:
            if not _retryable(exc):
                raise
            if attempt == attempts - 1:
                raise DependencyFailed(f"OpenSearch {what} failed after {attempts} attempts: {exc}") from exc
            sleep(random.uniform(0, min(max_delay, base_delay * 2**attempt)))
    raise AssertionError("unreachable")  # pragma: no cover
