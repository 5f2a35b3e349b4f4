"""The REST API: API Gateway in front of the API function, IAM-authorised on every route.

Routing and body validation happen in the function (Powertools REST resolver
+ pydantic, which answer 4xx with machine-readable codes); API Gateway
validates what it can see (the routed path), authenticates every call with
SigV4 (or a Cognito user pool when ``cognito_user_pool_arn`` is set),
throttles the stage, meters callers through a usage plan, writes JSON access
logs and X-Ray traces. CORS is off: callers are server-side agents.
"""

from __future__ import annotations

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
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=retention(config.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=f"{config.service_name}-{config.tier}",
            description="memstack: long-term memory for conversational agents",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=True,
            # The API Gateway account setting is per region: other APIs may rely on this role after we go.
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE_NAME,
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigw.MethodLoggingLevel.INFO,
                data_trace_enabled=False,  # request bodies are users' conversations: never log them
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
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
        proxy = self.rest_api.root.add_resource(ROUTE_PREFIX).add_resource("{proxy+}")
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
        self.usage_plan = self.rest_api.add_usage_plan(
            "UsagePlan",
            name=f"{config.service_name}-{config.tier}",
            description="per-caller throttle and monthly quota (applies to callers presenting an API key)",
            throttle=apigw.ThrottleSettings(
                rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit
            ),
            quota=apigw.QuotaSettings(limit=config.api_monthly_quota, period=apigw.Period.MONTH),
        )
        self.usage_plan.add_api_stage(stage=self.rest_api.deployment_stage)
        self._error_shape_gateway_responses()

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
