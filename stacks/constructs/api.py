"""The REST API: API Gateway in front of the API function, IAM-authorised on every data route.

Routing and body validation happen in the function (Powertools REST resolver
+ pydantic, which answer 4xx with machine-readable codes); API Gateway
validates what it can see (the routed path), authenticates every ``/v1``
call with SigV4 (or a Cognito user pool when ``cognito_user_pool_arn`` is
set), throttles the stage and traces with X-Ray. CORS is off: callers are
server-side agents.

- ``GET /v1/health``, ``GET /openapi.json`` and ``GET /docs`` are public
  (the function's ``PUBLIC_PATHS``): a load balancer or a person reading the
  API needs no AWS credentials. They touch no user data. So are ``GET /ui``
  and its files (the memory browser): the page then calls ``/v1`` from the
  same origin with the caller's Cognito token (docs/ui.md).
- The usage plan and its monthly quota exist only with ``api_key_required``:
  API Gateway meters a plan per API key, so without keys a quota meters nobody.
- Execution and access logs need the account-wide API Gateway CloudWatch
  role. The stack never changes that account setting on its own:
  ``api_gateway_logging_role`` is ``none`` (no gateway logs; each request is
  still logged by the function), ``existing`` (the account already has the
  role) or ``create`` (this stack sets it, and retains it on delete).
- Neither log records a raw path or query string: they hold user-chosen values
  (key names, user ids) that an erase must not leave behind. The access log
  names the route template (``$context.resourcePath``, ``/v1/{proxy+}``), never
  ``$context.path``; execution logging runs at ERROR, because at INFO API
  Gateway writes each request's path and query string ("HTTP Method: PUT,
  Resource Path: /v1/memories/keys/…", "Method request query string: …").
"""

from __future__ import annotations

import json

from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.config import StackConfig
from stacks.constructs.functions import retention

STAGE_NAME = "api"
ROUTE_PREFIX = "v1"
#: answered without credentials (layers/memstack/api/app.py PUBLIC_PATHS)
#: and the memory browser's files (layers/memstack/ui): static, no user data; its calls go to /v1
PUBLIC_ROUTES = (("v1", "health"), ("openapi.json",), ("docs",), ("ui",), ("ui", "{proxy+}"))
#: what the gateway's access log records of a request ($context variables): who called, when, which
#: route template, the outcome. Never the path or query string (user-chosen keys and user ids).
ACCESS_LOG_FIELDS = {
    "requestId": "requestId",
    "ip": "identity.sourceIp",
    "caller": "identity.caller",
    "user": "identity.user",
    "requestTime": "requestTime",
    "httpMethod": "httpMethod",
    "resourcePath": "resourcePath",
    "status": "status",
    "protocol": "protocol",
    "responseLength": "responseLength",
    "integrationLatency": "integrationLatency",
}


# The gateway's own error responses, mapped onto the API's error codes (layers/memstack/api/errors.py).
GATEWAY_ERROR_CODES = (
    (apigw.ResponseType.UNAUTHORIZED, "unauthorized"),
    # The gateway answers 403 for an unsigned request and for an unknown path.
    (apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN, "forbidden"),
    (apigw.ResponseType.EXPIRED_TOKEN, "unauthorized"),
    (apigw.ResponseType.INVALID_SIGNATURE, "unauthorized"),
    (apigw.ResponseType.ACCESS_DENIED, "forbidden"),
    (apigw.ResponseType.THROTTLED, "rate_limited"),
    (apigw.ResponseType.QUOTA_EXCEEDED, "rate_limited"),
    (apigw.ResponseType.REQUEST_TOO_LARGE, "payload_too_large"),
    (apigw.ResponseType.BAD_REQUEST_BODY, "validation_error"),
    (apigw.ResponseType.DEFAULT_4_XX, "bad_request"),
    (apigw.ResponseType.DEFAULT_5_XX, "internal_error"),
)


class Api(Construct):
    def __init__(
        self, scope: Construct, cid: str, *, config: StackConfig, handler: lambda_.IFunction
    ) -> None:
        super().__init__(scope, cid)
        self.logging = config.api_gateway_logging_role != "none"
        self.access_logs: logs.LogGroup | None = None
        logging: dict[str, object] = {}
        if self.logging:
            self.access_logs = logs.LogGroup(
                self,
                "AccessLogs",
                retention=retention(config.log_retention_days),
                removal_policy=RemovalPolicy.DESTROY,
            )
            logging = {
                # ERROR: INFO would write every request's raw path and query string (see the docstring).
                "logging_level": apigw.MethodLoggingLevel.ERROR,
                "access_log_destination": apigw.LogGroupLogDestination(self.access_logs),
                "access_log_format": apigw.AccessLogFormat.custom(
                    json.dumps({name: f"$context.{var}" for name, var in ACCESS_LOG_FIELDS.items()})
                ),
            }
        create_role = config.api_gateway_logging_role == "create"
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=f"{config.service_name}-{config.tier}",
            description="memstack: long-term memory for conversational agents",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # An account-wide, per-Region setting: only on request, and kept when the stack goes.
            cloud_watch_role=create_role,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN if create_role else None,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE_NAME,
                tracing_enabled=True,
                metrics_enabled=True,
                data_trace_enabled=False,  # request bodies are users' conversations: never log them
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
                **logging,  # type: ignore[arg-type]
            ),
        )
        validator = self.rest_api.add_request_validator(
            "Validator",
            validate_request_parameters=True,
            validate_request_body=True,
        )
        auth_type, authorizer = self._auth(config)
        integration = apigw.LambdaIntegration(handler, proxy=True)
        # /v1/{proxy+}: the function's resolver owns the route table (layers/memstack/api).
        proxy = self._resource((ROUTE_PREFIX, "{proxy+}"))
        self.methods = [
            proxy.add_method(
                "ANY",
                integration,
                request_validator=validator,
                request_parameters={"method.request.path.proxy": True},
                api_key_required=config.api_key_required,
                authorization_type=auth_type,
                authorizer=authorizer,
            )
        ]
        self.public_methods = [
            self._resource(path).add_method(
                "GET", integration, authorization_type=apigw.AuthorizationType.NONE
            )
            for path in PUBLIC_ROUTES
        ]
        self.usage_plan: apigw.UsagePlan | None = None
        if config.api_key_required:
            self.usage_plan = self.rest_api.add_usage_plan(
                "UsagePlan",
                name=f"{config.service_name}-{config.tier}",
                description="per-key throttle and monthly quota (add each caller's API key to this plan)",
                throttle=apigw.ThrottleSettings(
                    rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit
                ),
                quota=apigw.QuotaSettings(limit=config.api_monthly_quota, period=apigw.Period.MONTH),
            )
            self.usage_plan.add_api_stage(stage=self.rest_api.deployment_stage)
        self._error_shape_gateway_responses()

    def _resource(self, path: tuple[str, ...]) -> apigw.IResource:
        """The resource at ``path`` under the root, reusing the ones that exist (``/v1`` is shared)."""
        node: apigw.IResource = self.rest_api.root
        for part in path:
            node = node.get_resource(part) or node.add_resource(part)
        return node

    def _error_shape_gateway_responses(self) -> None:
        """Answers API Gateway gives itself (auth, throttling, size) in the API's one error shape.

        Without these a client would get ``{"message": ...}`` from the gateway but
        ``{"error": {...}}`` from the function, and would need two parsers.
        """
        for response_type, code in GATEWAY_ERROR_CODES:
            self.rest_api.add_gateway_response(
                f"Gateway{response_type.response_type.title().replace('_', '')}",
                type=response_type,
                templates={
                    "application/json": (
                        '{"error": {"code": "' + code + '", "message": $context.error.messageString, '
                        '"details": [{"gateway_response": "$context.error.responseType"}]}}'
                    )
                },
            )

    def _auth(self, config: StackConfig) -> tuple[apigw.AuthorizationType, apigw.IAuthorizer | None]:
        if config.cognito_user_pool_arn:
            pool = cognito.UserPool.from_user_pool_arn(self, "UserPool", config.cognito_user_pool_arn)
            authorizer = apigw.CognitoUserPoolsAuthorizer(
                self, "CognitoAuthorizer", cognito_user_pools=[pool]
            )
            return apigw.AuthorizationType.COGNITO, authorizer
        return apigw.AuthorizationType.IAM, None

    @property
    def url(self) -> str:
        return self.rest_api.url
