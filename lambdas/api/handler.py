"""The API function: API Gateway (REST, proxy integration) → the memstack REST resolver.

Thin on purpose: the routes, validation, errors and tenancy live in
``memstack.api``; this file only builds them once per container from the
``MEMSTACK_*`` environment and adds Powertools logging, tracing and metrics.
The tenant comes from the request context API Gateway fills in after IAM
(or Cognito) authorization.
"""

from __future__ import annotations

from typing import Any

from memstack.startup import cold_imports

with cold_imports():
    from aws_lambda_powertools import Logger, Metrics, Tracer
    from aws_lambda_powertools.logging import correlation_paths
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from memstack.api.app import MemstackResolver, create_app
    from memstack.api.auth import RequestContextAuthenticator
    from memstack.factory import build_service
    from memstack.settings import get_settings

# Service name from POWERTOOLS_SERVICE_NAME, which the stack sets to the name its alarms watch.
logger = Logger()
# Only botocore: every AWS call the function makes goes through it. Patching every library X-Ray
# knows would import the ones the function never uses (httpx alone is ~10% of a cold import).
tracer = Tracer(patch_modules=("botocore",))
metrics = Metrics(namespace="memstack")

_resolver: MemstackResolver | None = None


def resolver() -> MemstackResolver:
    """Built on the first request and reused by every later request of this container."""
    global _resolver
    if _resolver is None:
        settings = get_settings()
        _resolver = create_app(
            build_service(settings), settings, RequestContextAuthenticator(), metrics=metrics
        )
    return _resolver


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
# Responses carry memory content: X-Ray records that the call happened, never what it answered.
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolver().resolve(event, context)
