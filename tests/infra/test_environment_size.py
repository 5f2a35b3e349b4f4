"""Every function's environment fits Lambda's 4 KB limit with a margin, on every tier, variant and option.

Lambda measures the limit on the compact JSON of the ``Variables`` map.
The references in a synthesised environment (table names, queue URLs, the
topic, the search endpoint, the cluster and secret ARNs) become names
CloudFormation generates (``<stack>-<logical id>-<13 characters>``, within
each service's length limit) in a Region with one of the longest names, so
the figure is what a real deployment carries, not what the template shows.

The option matrix does not synthesise again: each function's environment is
recomputed by the stack's own functions (``deployment_settings``,
``function_environment``) from those same resolved resources, and the
recomputation is first checked to give exactly the synthesised environment.
Each documented option that changes an environment is then set, all at
once, to the longest value it documents.
"""

from __future__ import annotations

from typing import Any

import pytest
from memstack.startup import LIBRARY_ENVIRONMENT

from stacks.constructs.environment import (
    deployment_settings,
    environment_bytes,
    function_environment,
    function_reads,
)
from tests.infra.conftest import Synth

pytestmark = pytest.mark.slow

MARGIN_LIMIT = 3072  # bytes: 1 KB below Lambda's 4,096
REGION = "ap-southeast-4"  # 14 characters, as long as a commercial Region's name gets
ACCOUNT = "123456789012"
SUFFIX = "ABCDEFGHIJKLM"  # CloudFormation's random part of a generated name (13 characters)
#: every documented option that changes a function's environment, at its longest documented value
OPTIONS: dict[str, Any] = {
    "bedrock_rerank_model_arn": f"arn:aws:bedrock:{REGION}::foundation-model/cohere.rerank-v3-5:0",
    "bedrock_extraction_model": "global.anthropic.claude-haiku-4-5-20251001-v1:0",
    "bedrock_synthesis_model": "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "bedrock_embedding_model": "cohere.embed-v4:0",
    "embedding_dim": 1536,
    "coarse_dim": 256,
    "consolidation_rate_minutes": 30,
    "cost_report_threshold": 25,
    "settings": {"rrf_k": 7},  # docs/deploy.md's example override
    # the memory browser's Cognito sign-in (docs/ui.md): a pool ARN and a 26-character app client id
    "cognito_user_pool_arn": f"arn:aws:cognito-idp:{REGION}:{ACCOUNT}:userpool/{REGION}_AbCdEfGhI",
    "cognito_ui_client_id": "1example23456789abcdefghij",
}
FIXTURES = ["small", "medium", "large", "serverless", "postgres_small"]


def _generated(stack: str, lid: str, limit: int) -> str:
    """A name as CloudFormation generates it, truncated to the service's limit as it does."""
    room = limit - len(SUFFIX) - 2
    head = f"{stack}-{lid}"[:room]
    return f"{head}-{SUFFIX}"


class Namer:
    """What ``Ref`` / ``Fn::GetAtt`` give in a real deployment of this template."""

    def __init__(self, synth: Synth) -> None:
        self.template = synth.raw
        self.stack = synth.stack.stack_name

    def type_of(self, lid: str) -> str:
        return str(self.template["Resources"][lid]["Type"])

    def ref(self, lid: str) -> str:
        type_ = self.type_of(lid)
        props = self.template["Resources"][lid].get("Properties", {})
        if type_ == "AWS::DynamoDB::Table":
            return props.get("TableName") or _generated(self.stack, lid, 255)
        if type_ == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{_generated(self.stack, lid, 80)}"
        if type_ == "AWS::SNS::Topic":
            return f"arn:aws:sns:{REGION}:{ACCOUNT}:{_generated(self.stack, lid, 256)}"
        if type_ == "AWS::RDS::DBCluster":
            return str(props["DBClusterIdentifier"]).lower()
        if type_ == "AWS::SecretsManager::Secret":
            name = _generated(self.stack, lid, 512)
            return f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-AbCdEf"
        if type_ == "AWS::SecretsManager::SecretTargetAttachment":
            return self.ref(props["SecretId"]["Ref"])  # the attached secret's ARN
        if type_ == "AWS::OpenSearchService::Domain":
            return props.get("DomainName") or _generated(self.stack, lid, 28).lower()
        if type_ == "AWS::OpenSearchServerless::Collection":
            return "a1b2c3d4e5f6g7h8i9j0"  # a collection id
        if type_ == "AWS::S3::Bucket":  # lower case, at most 63 characters
            return props.get("BucketName") or _generated(self.stack, lid, 63).lower()
        raise AssertionError(f"no generated name for {type_} {lid}")

    def attribute(self, lid: str, attribute: str) -> str:
        type_ = self.type_of(lid)
        if type_ == "AWS::OpenSearchService::Domain" and attribute == "DomainEndpoint":
            return f"search-{self.ref(lid)}-abcdefghijklmnopqrstuvwxyz.{REGION}.es.amazonaws.com"
        if type_ == "AWS::OpenSearchServerless::Collection" and attribute == "CollectionEndpoint":
            return f"https://{self.ref(lid)}.{REGION}.aoss.amazonaws.com"
        if type_ == "AWS::SNS::Topic" and attribute == "TopicArn":
            return self.ref(lid)
        if type_ == "AWS::DynamoDB::Table" and attribute == "Arn":
            return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{self.ref(lid)}"
        if type_ == "AWS::RDS::DBCluster" and attribute == "DBClusterArn":
            return f"arn:aws:rds:{REGION}:{ACCOUNT}:cluster:{self.ref(lid)}"
        raise AssertionError(f"no {attribute} for {type_} {lid}")

    def resolve(self, value: Any) -> str:
        if isinstance(value, str | int | float):
            return str(value)
        ((fn, arg),) = value.items()
        if fn == "Ref":
            pseudo = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws"}
            return pseudo.get(arg) or self.ref(arg)
        if fn == "Fn::GetAtt":
            return self.attribute(*arg)
        if fn == "Fn::Join":
            sep, parts = arg
            return sep.join(self.resolve(p) for p in parts)
        if fn == "Fn::Select":
            index, items = arg
            ((inner, (sep, text)),) = items.items()
            assert inner == "Fn::Split"
            return self.resolve(text).split(sep)[int(index)]
        raise AssertionError(f"cannot resolve {fn}")


def _functions(synth: Synth) -> dict[str, dict[str, Any]]:
    """handler dir -> the function's Variables, for every memstack function of the template."""
    out = {}
    for props in synth.props("AWS::Lambda::Function"):
        variables = props.get("Environment", {}).get("Variables", {})
        service = variables.get("POWERTOOLS_SERVICE_NAME", "")
        for handler_dir, suffix in _suffixes().items():
            if service == f"{synth.stack.config.service_name}-{suffix}":
                out[handler_dir] = variables
    return out


def _suffixes() -> dict[str, str]:
    from stacks.constructs.compute import SERVICE_SUFFIX

    return dict(SERVICE_SUFFIX)


def _resolved(synth: Synth) -> dict[str, dict[str, str]]:
    namer = Namer(synth)
    return {fn: {k: namer.resolve(v) for k, v in env.items()} for fn, env in _functions(synth).items()}


def _resources(synth: Synth, resolved: dict[str, dict[str, str]]) -> dict[str, str]:
    """The stack's own resources as settings (``stack_resources``), resolved to their deployed values."""
    from stacks.constructs.compute import stack_resources

    tokens = stack_resources(
        synth.stack,
        synth.stack.storage,
        synth.stack.queues,
        synth.stack.search,
        synth.stack.alerts.topic,
        synth.stack.database,
    )
    everything: dict[str, str] = {}
    for env in resolved.values():
        everything.update(env)
    # A resource nobody's environment carries (a default, or no function reads it) keeps its token.
    return {name: everything.get(f"MEMSTACK_{name.upper()}", str(v)) for name, v in tokens.items()}


def _recomputed(synth: Synth, config: Any, resources: dict[str, str], fn: str, base: dict[str, str]) -> dict:
    settings = deployment_settings(config, resources)
    env = function_environment(settings, function_reads(config, fn))
    powertools = {k: v for k, v in base.items() if k.startswith("POWERTOOLS_")}
    return {**env, **powertools, **LIBRARY_ENVIRONMENT}


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_environment_keeps_a_kilobyte_below_lambdas_limit(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """Issue 23, item 2: medium's API function carried ~4,030 B (every default written out)."""
    synth: Synth = request.getfixturevalue(fixture)
    resolved = _resolved(synth)
    assert {
        "api",
        "extraction_worker",
        "consolidation_scheduler",
        "consolidation_worker",
        "cost_report",
    } <= set(resolved)
    resources = _resources(synth, resolved)
    config = synth.stack.config
    with_options = config.replace(
        **{k: v for k, v in OPTIONS.items() if k != "settings"}, settings=OPTIONS["settings"]
    )
    sizes = {}
    for fn, env in resolved.items():
        # The recomputation is exactly what the template holds ...
        assert _recomputed(synth, config, resources, fn, env) == env, fn
        sizes[fn] = environment_bytes(env)
        # ... so it can price every documented option without another synth.
        sizes[f"{fn}+options"] = environment_bytes(_recomputed(synth, with_options, resources, fn, env))
    over = {fn: size for fn, size in sizes.items() if size > MARGIN_LIMIT}
    assert not over, f"{fixture}: environments over {MARGIN_LIMIT} B: {over}"


def test_the_size_is_lambdas_measure_compact_json() -> None:
    assert environment_bytes({"A": "1", "B": "é"}) == len('{"A":"1","B":"é"}'.encode())
