"""The API construct alone (a tiny stack, fast): IAM by default, Cognito when a user pool is configured."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from stacks.config import ConfigError, StackConfig
from stacks.constructs.api import Api
from stacks.constructs.environment import deployment_settings, function_environment, function_reads

POOL = "arn:aws:cognito-idp:us-east-1:123456789012:userpool/us-east-1_example"


def _template(config: StackConfig) -> Template:
    stack = Stack(App(), "ApiOnly")
    fn = lambda_.Function(
        stack,
        "Fn",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}"),
    )
    Api(stack, "Api", config=config, handler=fn)
    return Template.from_stack(stack)


def _all_methods(config: StackConfig) -> list[dict[str, Any]]:
    methods = _template(config).find_resources("AWS::ApiGateway::Method")
    return [m["Properties"] for m in methods.values()]


def _methods(config: StackConfig) -> list[dict[str, Any]]:
    """The data routes: ANY /v1/{proxy+}."""
    return [m for m in _all_methods(config) if m["HttpMethod"] == "ANY"]


def test_iam_authorization_by_default() -> None:
    methods = _methods(StackConfig())
    assert methods and all(m["AuthorizationType"] == "AWS_IAM" for m in methods)
    assert all("AuthorizerId" not in m for m in methods)


def test_cognito_user_pool_authorizer_when_configured() -> None:
    methods = _methods(StackConfig(cognito_user_pool_arn=POOL, api_key_required=True))
    assert methods and all(m["AuthorizationType"] == "COGNITO_USER_POOLS" for m in methods)
    assert all("AuthorizerId" in m and m["ApiKeyRequired"] is True for m in methods)


def test_health_openapi_and_docs_are_routed_without_credentials() -> None:
    template = _template(StackConfig())
    parts = {
        k: v["Properties"]["PathPart"]
        for k, v in template.find_resources("AWS::ApiGateway::Resource").items()
    }
    public = [
        (parts[m["ResourceId"]["Ref"]], m) for m in _all_methods(StackConfig()) if m["HttpMethod"] == "GET"
    ]
    # The memory browser: /ui and /ui/{proxy+} (its static files).
    assert sorted(p for p, _ in public) == sorted(["health", "openapi.json", "docs", "ui", "{proxy+}"])
    assert all(m["AuthorizationType"] == "NONE" for _, m in public)
    # /v1/health sits beside /v1/{proxy+} under the one /v1 resource.
    assert sorted(parts.values()) == sorted(
        ["v1", "{proxy+}", "health", "openapi.json", "docs", "ui", "{proxy+}"]
    )


def test_a_usage_plan_only_when_callers_present_api_keys() -> None:
    assert not _template(StackConfig()).find_resources("AWS::ApiGateway::UsagePlan")
    [plan] = (
        _template(StackConfig(api_key_required=True)).find_resources("AWS::ApiGateway::UsagePlan").values()
    )
    assert plan["Properties"]["Quota"] == {"Limit": 100000, "Period": "MONTH"}


def test_the_account_wide_cloudwatch_role_is_opt_in() -> None:
    default = _template(StackConfig())
    assert not default.find_resources("AWS::ApiGateway::Account")
    [stage] = default.find_resources("AWS::ApiGateway::Stage").values()
    assert "AccessLogSetting" not in stage["Properties"]
    existing = _template(StackConfig(api_gateway_logging_role="existing"))
    assert not existing.find_resources("AWS::ApiGateway::Account")
    [stage] = existing.find_resources("AWS::ApiGateway::Stage").values()
    assert "DestinationArn" in stage["Properties"]["AccessLogSetting"]
    [account] = (
        _template(StackConfig(api_gateway_logging_role="create"))
        .find_resources("AWS::ApiGateway::Account")
        .values()
    )
    assert account["DeletionPolicy"] == "Retain"


def test_gateway_errors_use_the_api_error_shape() -> None:
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in _template(StackConfig()).find_resources("AWS::ApiGateway::GatewayResponse").values()
    }
    expected = {"ACCESS_DENIED": "forbidden", "THROTTLED": "rate_limited", "UNAUTHORIZED": "unauthorized"}
    for response_type, code in expected.items():
        body = responses[response_type]["ResponseTemplates"]["application/json"]
        assert body.startswith('{"error": {"code": "' + code + '"')
        assert "$context.error.messageString" in body
    assert "DEFAULT_5XX" in responses and "REQUEST_TOO_LARGE" in responses


def test_the_cognito_authorizer_checks_the_authorization_header_against_the_configured_pool() -> None:
    template = _template(StackConfig(cognito_user_pool_arn=POOL))
    [(authorizer_id, authorizer)] = template.find_resources("AWS::ApiGateway::Authorizer").items()
    props = authorizer["Properties"]
    assert props["Type"] == "COGNITO_USER_POOLS"
    assert props["ProviderARNs"] == [POOL]
    # The memory browser sends the pool's ID token as the raw Authorization header (docs/ui.md).
    assert props["IdentitySource"] == "method.request.header.Authorization"
    data = _methods(StackConfig(cognito_user_pool_arn=POOL))
    assert data and all(m["AuthorizerId"] == {"Ref": authorizer_id} for m in data)
    # The page itself stays public: it holds no data and signs in before calling /v1.
    ui = [m for m in _all_methods(StackConfig(cognito_user_pool_arn=POOL)) if m["HttpMethod"] == "GET"]
    assert ui and all(m["AuthorizationType"] == "NONE" for m in ui)


def test_the_memory_browser_sign_in_is_configured_on_the_api_function_only() -> None:
    config = StackConfig(
        cognito_user_pool_arn=POOL.replace("us-east-1", "eu-west-1"), cognito_ui_client_id="abc123"
    )
    settings = deployment_settings(config, {})
    api = function_environment(settings, function_reads(config, "api"))
    assert api["MEMSTACK_UI_COGNITO_CLIENT_ID"] == "abc123"
    assert api["MEMSTACK_UI_COGNITO_REGION"] == "eu-west-1"  # the pool's region, from its ARN
    worker = function_environment(settings, function_reads(config, "extraction_worker"))
    assert not any(name.startswith("MEMSTACK_UI_") for name in worker)
    assert not any(
        n.startswith("MEMSTACK_UI_")
        for n in function_environment(
            deployment_settings(StackConfig(), {}), function_reads(StackConfig(), "api")
        )
    )


def test_a_ui_client_without_its_pool_or_a_malformed_pool_stops_the_synth() -> None:
    with pytest.raises(ConfigError, match="cognito_ui_client_id needs cognito_user_pool_arn"):
        StackConfig(cognito_ui_client_id="abc123").validate()
    with pytest.raises(ConfigError, match="not a user pool ARN"):
        StackConfig(cognito_user_pool_arn="arn:aws:cognito-idp:us-east-1:1:userpool/x").validate()


def test_the_docs_deployed_api_urls_end_in_the_stages_name() -> None:
    """A deployed URL a reader copies from the README or docs has the stage the stack creates."""
    import re
    from pathlib import Path

    from stacks.constructs.api import STAGE_NAME

    root = Path(__file__).resolve().parents[2]
    texts = {p: p.read_text() for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))]}
    urls = {
        (p.name, m[1])
        for p, text in texts.items()
        for m in re.finditer(r"(?:execute-api\.[\w.-]*|…\.)amazonaws\.com/([\w-]+)", text)
    }
    assert urls, "no deployed API URL in the docs"
    assert {stage for _, stage in urls} == {STAGE_NAME}, sorted(urls)


@pytest.mark.parametrize("role", ["existing", "create"])
def test_gateway_logs_record_the_route_template_never_the_raw_path(role: str) -> None:
    """Issue 25 item 9 in AWS: paths and query strings hold key names and user ids an erase must not leave."""
    [stage] = (
        _template(StackConfig(api_gateway_logging_role=role))
        .find_resources("AWS::ApiGateway::Stage")
        .values()
    )
    props = stage["Properties"]
    # Execution logs at ERROR: at INFO API Gateway writes "HTTP Method: …, Resource Path: <the path>" and
    # "Method request query string: …" for every request. Request and response data never.
    assert [
        (m["HttpMethod"], m["ResourcePath"], m["LoggingLevel"], m["DataTraceEnabled"])
        for m in props["MethodSettings"]
    ] == [("*", "/*", "ERROR", False)]
    fields = json.loads(props["AccessLogSetting"]["Format"])
    assert fields["resourcePath"] == "$context.resourcePath" and fields["requestId"] == "$context.requestId"
    recorded = {value.removeprefix("$context.") for value in fields.values()}
    assert all(value.startswith("$context.") for value in fields.values())
    # Nothing holding what the caller wrote into the URL, the body or the headers.
    assert not recorded & {"path", "requestOverride.path", "domainName"}
    assert not any(v.startswith(("requestOverride", "authorizer", "error.")) for v in recorded)
    assert "$input" not in props["AccessLogSetting"]["Format"]
    assert "$method" not in props["AccessLogSetting"]["Format"]
