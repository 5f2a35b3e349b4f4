"""cdk-nag findings this design accepts, each acknowledged on the narrowest construct with its reason.

Everything else cdk-nag's AwsSolutions pack finds fails the synth (and the
infra tests). Rule ids with a bracket name the exact permission or policy
acknowledged, so a new wildcard elsewhere still fails.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_lambda as lambda_
from constructs import IConstruct
from memstack.adapters.dynamodb.snapshot_objects import PREFIX as SNAPSHOT_PREFIX

from stacks.constructs import bedrock
from stacks.constructs.search import SearchDomain

if TYPE_CHECKING:
    from stacks.memstack_stack import MemstackStack

PACK = "AwsSolutions::AwsSolutions-"
BASIC_EXECUTION = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
APIGW_LOGS = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"


def ack(scope: IConstruct, rule: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=PACK + rule, reason=reason))


def _arn_token(stack: Stack, resource: IConstruct) -> str:
    """How cdk-nag prints ``Fn::GetAtt [X, Arn]`` in a finding id."""
    return f"<{stack.get_logical_id(resource.node.default_child)}.Arn>"  # type: ignore[arg-type]


def acknowledge_findings(stack: MemstackStack) -> None:
    config = stack.config
    for fn in stack.compute.all().values():
        _function(stack, fn)
    if stack.compute.schema_migration is not None:
        _function(stack, stack.compute.schema_migration)
    # The STM table's sparse `pending` index is read by name; CDK's grant covers the table's indexes.
    stm_index = f"Resource::{_arn_token(stack, stack.storage.stm_table)}/index/*"
    for fn in (
        *stack.compute.data_plane(),
        stack.compute.consolidation_scheduler,
        stack.compute.webhook_worker,
    ):
        ack(
            _role(fn),
            f"IAM5[{stm_index}]",
            "grants on the STM table include its indexes (the sparse 'pending' GSI the consolidation "
            "scheduler and workers query); the wildcard is limited to that one table's indexes",
        )
    bucket = stack.storage.snapshot_bucket
    if bucket is not None:
        objects = f"Resource::{_arn_token(stack, bucket)}/{SNAPSHOT_PREFIX}*"
        for fn in stack.compute.data_plane():
            ack(
                _role(fn),
                f"IAM5[{objects}]",
                "the small tier's per-user snapshots are objects under one prefix of the stack's own "
                "bucket (one key per user and version, hashed); GetObject/PutObject/DeleteObject only",
            )
        ack(
            bucket,
            "S1",
            "the bucket holds derived copies of the memory table, read and written only by the stack's "
            "functions (their roles, IAM-checked in tests/infra); an access-log bucket would keep every "
            "user's object keys after an erase. CloudTrail data events can audit it if wanted",
        )
    _inference_profiles(stack)
    ack(
        _role(stack.compute.cost_report),
        "IAM5[Action::kms:GenerateDataKey*]",
        "publishing to the KMS-encrypted alert topic needs GenerateDataKey* on that one key (CDK's "
        "topic.grant_publish); the resource is the key's ARN, not a wildcard",
    )
    ack(
        stack.storage.cursor_secret,
        "SMG4",
        "the cursor key signs list cursors only: rotating it invalidates the cursors handed out so far "
        "(a client lists again from the start) and needs no rotation function; rotate it by hand if wanted",
    )
    _api(stack)
    if isinstance(stack.search, SearchDomain):
        _search_domain(stack, stack.search, dedicated_masters=config.opensearch_master_nodes > 0)


def _inference_profiles(stack: MemstackStack) -> None:
    """The Region wildcard in a profile's foundation-model ARNs: the Regions the profile routes to."""
    config = stack.config
    models = {config.bedrock_extraction_model, config.bedrock_synthesis_model, config.bedrock_embedding_model}
    for model in sorted(m for m in models if bedrock.is_inference_profile(m)):
        for arn in bedrock.foundation_model_arns(stack, model):
            token = arn.replace(f"arn:{stack.partition}:", "arn:<AWS::Partition>:")
            for fn in stack.compute.all().values():
                ack(
                    _role(fn),
                    f"IAM5[Resource::{token}]",
                    f"{model} is a cross-Region inference profile: Bedrock serves it in any Region the "
                    "profile routes to, so the model ARN's Region is '*'; the statement only allows calls "
                    "made through that profile (condition bedrock:InferenceProfileArn)",
                )


def _role(fn: lambda_.Function) -> IConstruct:
    role = fn.role
    assert role is not None, f"{fn.node.path} has no execution role"
    return role


def _function(stack: MemstackStack, fn: lambda_.Function) -> None:
    role = _role(fn)
    ack(
        role,
        f"IAM4[{BASIC_EXECUTION}]",
        "AWSLambdaBasicExecutionRole only lets the function write its own CloudWatch logs; it is the "
        "AWS-maintained minimum for a Lambda function and carries no data access",
    )
    ack(
        role,
        "IAM5[Resource::*]",
        "X-Ray active tracing needs xray:PutTraceSegments/PutTelemetryRecords, which have no resource-level "
        "permissions; for the cost report also ce:GetCostAndUsage and for a configured reranker "
        "bedrock:Rerank, "
        "which likewise only accept '*'",
    )
    ack(
        fn,
        "L1",
        "pinned to Python 3.12 on purpose: the layer's compiled wheels (numpy, pydantic-core) are built for "
        "cp312/arm64 by scripts/build_layer.py, so runtime and layer must move together",
    )


def _api(stack: MemstackStack) -> None:
    api = stack.api.rest_api
    if stack.config.api_gateway_logging_role == "create":
        ack(
            api,
            f"IAM4[{APIGW_LOGS}]",
            "the account-level role API Gateway uses to write execution and access logs; the AWS-managed "
            "policy is the documented one for that service role",
        )
    if not stack.api.logging:
        for rule in ("APIG1", "APIG6"):
            ack(
                api,
                rule,
                "gateway execution/access logs need the account-wide API Gateway CloudWatch role, which this "
                "stack does not change unless asked (-c api_gateway_logging_role=existing|create); every "
                "request is still logged by the API function (Powertools, with its request id) and traced",
            )
    for method in stack.api.public_methods:
        for rule in ("APIG4", "COG4"):
            ack(
                method,
                rule,
                "public on purpose: /v1/health (liveness for probes), /openapi.json and /docs (the API "
                "description), /ui (the memory browser's static files, whose calls to /v1 are authorised) "
                "read no user data and need no tenant; every /v1 data route is IAM-authorised",
            )
    ack(
        api,
        "COG4",
        "every method uses AWS_IAM (SigV4) authorization: callers are agents with IAM credentials and the "
        "tenant is derived from the IAM principal; a Cognito authorizer is available via "
        "cognito_user_pool_arn",
    )
    ack(
        api,
        "APIG3",
        "no WAF by default: every call is SigV4-authenticated and the stage and usage plan throttle callers; "
        "a web ACL (~$5+/month plus per-request fees) can be associated per deployment",
    )


def _search_domain(stack: MemstackStack, search: SearchDomain, *, dedicated_masters: bool) -> None:
    domain_paths = f"IAM5[Resource::{_arn_token(stack, search.domain)}/*]"
    for role in [search.admin_role, *search.mapped_roles]:
        ack(
            role,
            domain_paths,
            "es:ESHttp* on the paths of this one domain (CDK's domain.grant_read_write); what a role may do "
            "inside the domain is narrowed by fine-grained access control to the memstack-* indices",
        )
    ack(
        search.admin_role,
        "IAM5[Resource::*]",
        "X-Ray tracing of the role-mapping function: xray:PutTraceSegments has no resource-level permissions",
    )
    ack(
        search.role_mapping_function,
        "L1",
        "Python 3.12 like every other memstack function; the handler uses only the standard library and "
        "botocore, and moves with them",
    )
    ack(
        search.domain,
        "IAM5[Resource::*]",
        "CDK's log-publishing custom resource calls logs:PutResourcePolicy, which only accepts '*'",
    )
    ack(
        search.domain,
        "OS1",
        "public endpoint on purpose: a VPC would put every Lambda in the VPC with NAT or interface endpoints "
        "(Bedrock, SQS, DynamoDB) for ~$30-70/month per AZ; access is HTTPS-only, SigV4-signed, and gated by "
        "fine-grained access control",
    )
    ack(
        search.domain,
        "OS3",
        "callers are Lambda functions without fixed IPs: access is restricted by IAM identity and "
        "fine-grained "
        "access control instead of an IP allowlist",
    )
    ack(
        search.domain,
        "OS5",
        "no resource policy grants anonymous access: only IAM identities of this account with es:ESHttp* "
        "permissions can sign requests, and fine-grained access control maps only the memstack roles",
    )
    if not dedicated_masters:
        ack(
            search.domain,
            "OS4",
            "the medium tier trades dedicated master nodes (3 extra instances) for cost on a 2-node cluster; "
            "the large tier enables them (opensearch_master_nodes)",
        )
    provider = stack.node.try_find_child("AWS679f53fac002430cb0da5b7982bd2287")
    if provider is not None:
        ack(
            provider,
            f"IAM4[{BASIC_EXECUTION}]",
            "CDK's AwsCustomResource provider (log-group resource policy for OpenSearch log publishing) uses "
            "the AWS-maintained basic execution policy only for its own logs",
        )
