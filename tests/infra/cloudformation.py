"""The synthesised template stood up by moto's CloudFormation ``create_stack``, as ``cdk deploy`` would.

What ``cdk deploy`` does first is done here too: the code assets (each
``asset.<hash>`` folder of the cloud assembly, zipped) and the template go
into the bootstrap bucket, the bootstrap version into SSM, and the stack is
created from the template's S3 URL (the template is over CloudFormation's
51,200-byte inline limit, so the CLI uploads it too). Every table, queue,
topic, key, role, policy, function, layer, log group, rule, event source
mapping and the REST API are then moto's, created from the template's own
properties with CloudFormation's generated names.

moto cannot create every resource type, so the template handed to it is
adapted, and ``adaptations`` says exactly how:

- types moto's CloudFormation has no model for (``UNSUPPORTED``, checked
  against moto's own model map, so an upgrade that adds one is noticed) are
  left out, and each ``Ref``/``Fn::GetAtt`` of one becomes the value AWS
  would give (its ARN or name built from its properties). None of them is
  called by the handlers: alarms, the gateway stage, validators and
  responses, the budget and anomaly monitors, queue and topic policies
  (their statements are still evaluated from the original template, see
  ``resource_statements``), subscriptions, and for postgres the Aurora
  cluster (moto's CloudFormation has no ``AWS::RDS::DBCluster``) with its
  writer instance, and its secret (no ``AWS::SecretsManager::Secret``):
  the Data API is answered by ``data_api_wire``;
- custom resources (``Custom::MemstackSchema``, the deploy-time migration;
  ``Custom::MemstackUserDirectory``, the dynamodb directory backfill)
  are left out too: moto would run their function in Docker. The test
  sends the function CloudFormation's Create request itself;
- ``AWS::KMS::Key`` loses its ``Tags``: moto's key model reads
  ``TagKey``/``TagValue`` where CloudFormation passes ``Key``/``Value``.
"""

from __future__ import annotations

import copy
import io
import json
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"
BOOTSTRAP_BUCKET = f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}"


#: every type the adapted template leaves out, and why (a type not listed here fails the flow test)
LEFT_OUT = {
    "AWS::CloudWatch::Alarm": "no moto CloudFormation model; nothing calls an alarm",
    "AWS::ApiGateway::Stage": "no model; the handlers get the stage name from the template",
    "AWS::ApiGateway::GatewayResponse": "no model; gateway-side error shapes",
    "AWS::ApiGateway::RequestValidator": "no model; gateway-side validation",
    "AWS::SQS::QueuePolicy": "no model; its Deny statements are evaluated from the template",
    "AWS::SNS::TopicPolicy": "no model; its Deny statements are evaluated from the template",
    "AWS::S3::BucketPolicy": "no model; its Deny statements are evaluated from the template",
    "AWS::SNS::Subscription": "no model; the alert e-mail",
    "AWS::Budgets::Budget": "no model; billing alerts",
    "AWS::CE::AnomalyMonitor": "no model; billing alerts",
    "AWS::CE::AnomalySubscription": "no model; billing alerts",
    "AWS::RDS::DBCluster": "no model; the Data API is answered from the test PostgreSQL",
    "AWS::RDS::DBInstance": "the writer of the cluster moto cannot create",
    "AWS::SecretsManager::Secret": "no model; its ARN is a stand-in the policies and environments share",
    "AWS::SecretsManager::SecretTargetAttachment": "no model; its Ref is the secret's ARN",
    "Custom::MemstackSchema": "a custom resource: the test sends its Create request itself",
    "Custom::MemstackUserDirectory": "a custom resource: the test sends its Create request itself",
}


def _custom(type_: str) -> bool:
    """A custom resource: moto would invoke its function in Docker; the test plays CloudFormation's part."""
    return type_.startswith("Custom::") or type_ == "AWS::CloudFormation::CustomResource"


def _moto_types() -> set[str]:
    from moto.cloudformation.parsing import get_model_map

    return set(get_model_map())


@dataclass
class StandIn:
    """What ``Ref`` and ``Fn::GetAtt`` give for a resource moto leaves out."""

    ref: str
    attributes: dict[str, str] = field(default_factory=dict)


def _stand_in(lid: str, type_: str, props: dict[str, Any], stack: str) -> StandIn:
    """The values AWS would give, from the resource's properties (names generated like CloudFormation's)."""
    generated = f"{stack}-{lid}-STANDIN"
    region, account = REGION, ACCOUNT
    if type_ == "AWS::RDS::DBCluster":
        name = props.get("DBClusterIdentifier", generated).lower()
        arn = f"arn:aws:rds:{region}:{account}:cluster:{name}"
        return StandIn(name, {"DBClusterArn": arn, "Endpoint.Address": f"{name}.cluster.{region}.rds"})
    if type_ == "AWS::SecretsManager::Secret":
        return StandIn(f"arn:aws:secretsmanager:{region}:{account}:secret:{generated}-AbCdEf")
    if type_ == "AWS::OpenSearchService::Domain":
        # A generated domain name: lower case, at most 28 characters; the endpoint AWS gives it.
        name = props.get("DomainName") or f"{stack}-{lid}"[:22].lower().rstrip("-") + "-abc12"
        arn = f"arn:aws:es:{region}:{account}:domain/{name}"
        endpoint = f"search-{name}-a1b2c3d4e5f6g7h8i9j0k1l2m3.{region}.es.amazonaws.com"
        return StandIn(name, {"Arn": arn, "DomainArn": arn, "DomainEndpoint": endpoint})
    if type_ == "AWS::OpenSearchServerless::Collection":
        cid = "a1b2c3d4e5f6g7h8i9j0"  # a collection's id: 20 lower-case letters and digits
        return StandIn(
            cid,
            {
                "Id": cid,
                "Arn": f"arn:aws:aoss:{region}:{account}:collection/{cid}",
                "CollectionEndpoint": f"https://{cid}.{region}.aoss.amazonaws.com",
                "DashboardEndpoint": f"https://{cid}.{region}.aoss.amazonaws.com/_dashboards",
            },
        )
    if type_ == "AWS::CloudWatch::Alarm":
        name = props.get("AlarmName", generated)
        return StandIn(name, {"Arn": f"arn:aws:cloudwatch:{region}:{account}:alarm:{name}"})
    return StandIn(
        generated, {"Arn": f"arn:aws:{type_.split('::')[1].lower()}:{region}:{account}:{generated}"}
    )


@dataclass
class Adapted:
    template: dict[str, Any]
    left_out: dict[str, str]  # logical id -> type
    stand_ins: dict[str, StandIn]


def adapt(template: dict[str, Any], stack: str) -> Adapted:
    """The template moto can create (see the module docstring), and what was changed."""
    out = copy.deepcopy(template)
    supported = _moto_types()
    resources = out["Resources"]
    left_out = {
        lid: r["Type"] for lid, r in resources.items() if r["Type"] not in supported or _custom(r["Type"])
    }
    # An Aurora cluster's instances go with it (moto would create them in a cluster it does not have).
    for lid, r in resources.items():
        cluster = r.get("Properties", {}).get("DBClusterIdentifier")
        in_left_out = isinstance(cluster, dict) and cluster.get("Ref") in left_out
        if r["Type"] == "AWS::RDS::DBInstance" and in_left_out:
            left_out[lid] = r["Type"]
    # Secrets' stand-ins first: an attachment's Ref is its secret's ARN.
    stand_ins: dict[str, StandIn] = {}
    for lid, type_ in sorted(left_out.items(), key=lambda kv: kv[1] != "AWS::SecretsManager::Secret"):
        props = resources[lid].get("Properties", {})
        if type_ == "AWS::SecretsManager::SecretTargetAttachment":
            stand_ins[lid] = StandIn(stand_ins[props["SecretId"]["Ref"]].ref)
        else:
            stand_ins[lid] = _stand_in(lid, type_, props, stack)
    for lid in left_out:
        del resources[lid]

    def replace(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"Ref"} and value["Ref"] in stand_ins:
                return stand_ins[value["Ref"]].ref
            if set(value) == {"Fn::GetAtt"}:
                lid, attribute = (
                    value["Fn::GetAtt"].split(".", 1)
                    if isinstance(value["Fn::GetAtt"], str)
                    else value["Fn::GetAtt"]
                )
                if lid in stand_ins:
                    return stand_ins[lid].attributes[attribute]
            return {k: replace(v) for k, v in value.items()}
        if isinstance(value, list):
            return [replace(v) for v in value]
        return value

    for res in resources.values():
        for key in ("Properties", "Metadata"):
            if key in res:
                res[key] = replace(res[key])
        depends = res.get("DependsOn")
        if depends:
            res["DependsOn"] = [
                d for d in ([depends] if isinstance(depends, str) else depends) if d in resources
            ]
        if res["Type"] == "AWS::KMS::Key":
            res["Properties"].pop("Tags", None)
    out["Outputs"] = replace(out.get("Outputs", {}))
    return Adapted(out, left_out, stand_ins)


def _zip(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def upload_assets(s3: Any, template: dict[str, Any], outdir: Path) -> int:
    """Each function's and layer's code asset, zipped into the bootstrap bucket; returns how many."""
    keys = set()
    for res in template["Resources"].values():
        props = res.get("Properties", {})
        for code in (props.get("Code"), props.get("Content")):
            if isinstance(code, dict) and isinstance(code.get("S3Key"), str):
                keys.add(code["S3Key"])
    for key in sorted(keys):
        folder = outdir / f"asset.{key.removesuffix('.zip')}"
        assert folder.is_dir(), f"asset {key} is not in the cloud assembly"
        s3.put_object(Bucket=BOOTSTRAP_BUCKET, Key=key, Body=_zip(folder))
    return len(keys)


@dataclass
class CreatedStack:
    name: str
    template: dict[str, Any]  # the synthesised one, unchanged
    adapted: Adapted
    physical: dict[str, str]  # logical id -> physical id (CloudFormation's, or the stand-in's Ref)
    status: str


def create_stack(session: Any, name: str, template: dict[str, Any], outdir: Path) -> CreatedStack:
    """``cdk deploy`` on moto: assets and template uploaded, ``create_stack`` from the template's URL."""
    s3 = session.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BOOTSTRAP_BUCKET)
    upload_assets(s3, template, outdir)
    version = template.get("Parameters", {}).get("BootstrapVersion", {}).get("Default")
    if version:
        session.client("ssm", region_name=REGION).put_parameter(Name=version, Value="27", Type="String")
    adapted = adapt(template, name)
    s3.put_object(Bucket=BOOTSTRAP_BUCKET, Key=f"{name}.template.json", Body=json.dumps(adapted.template))
    cfn = session.client("cloudformation", region_name=REGION)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # moto warns of nothing left in the adapted template
        cfn.create_stack(
            StackName=name,
            TemplateURL=f"https://{BOOTSTRAP_BUCKET}.s3.amazonaws.com/{name}.template.json",
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
        )
    [stack] = cfn.describe_stacks(StackName=name)["Stacks"]
    physical = {lid: s.ref for lid, s in adapted.stand_ins.items()}
    paginator = cfn.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=name):
        for summary in page["StackResourceSummaries"]:
            physical[summary["LogicalResourceId"]] = summary["PhysicalResourceId"]
    return CreatedStack(name, template, adapted, physical, stack["StackStatus"])
