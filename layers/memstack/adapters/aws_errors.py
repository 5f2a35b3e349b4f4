"""AWS SDK failures as ``DependencyFailed`` (503 ``dependency_failed``), never a raw 500.

botocore retries throttling and 5xx itself (the clients use its standard or
adaptive retry modes); what is still raised after that is an outage of a
dependency, not a bug, and the caller should retry later. Adapters decorate
their port methods with ``aws_dependency``; conditions an adapter expects
(``ConditionalCheckFailed``, a cancelled transaction) are caught inside the
method first, so only the unexpected ones arrive here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from botocore.exceptions import BotoCoreError, ClientError

from memstack.errors import DependencyFailed, Throttled

F = TypeVar("F", bound=Callable[..., Any])

#: error codes that mean "busy, slow down", reported as such
THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
    }
)


def as_dependency_failure(service: str, exc: BaseException) -> DependencyFailed | None:
    """The ``DependencyFailed`` for an SDK exception (``None`` when ``exc`` is not one)."""
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code") or "error")
        if code in THROTTLING_CODES:
            return Throttled(f"{service} is throttling requests ({code}); retry shortly")
        return DependencyFailed(f"{service} failed ({code}); retry shortly")
    if isinstance(exc, BotoCoreError):
        return DependencyFailed(f"{service} is unreachable ({type(exc).__name__}); retry shortly")
    return None


def aws_dependency(service: str) -> Callable[[F], F]:
    """Decorate a port method: SDK errors leave it as ``DependencyFailed`` naming ``service``."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except (ClientError, BotoCoreError) as exc:
                failure = as_dependency_failure(service, exc)
                assert failure is not None
                raise failure from exc

        return cast(F, wrapper)

    return decorate
