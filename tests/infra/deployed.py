"""A synthesised template stood up in moto: its tables, queues and topic, and each function's environment.

Everything is read from the template's own resource properties (key schemas,
GSIs, TTL attribute, visibility timeouts, redrive policies), so a test that
runs the handlers against these resources fails when the template and the
code drift apart. Only the physical names are ours (CloudFormation would
generate them); ``Ref``/``Fn::GetAtt`` in environments resolve to them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"


@dataclass
class DeployedStack:
    template: dict[str, Any]
    outdir: Path
    clients: dict[str, Any]  # boto3 clients (moto): dynamodb, sqs, sns
    refs: dict[str, str] = field(default_factory=dict)  # logical id -> what Ref gives
    arns: dict[str, str] = field(default_factory=dict)  # logical id -> Fn::GetAtt Arn

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_}

    # -------------------------------------------------------------- creation
    def create(self) -> DeployedStack:
        for lid, res in self.resources("AWS::DynamoDB::Table").items():
            self._table(lid, res["Properties"])
        queues = self.resources("AWS::SQS::Queue")
        # Dead-letter queues first: a source queue's redrive policy names its DLQ's ARN.
        for lid in sorted(queues, key=lambda k: "RedrivePolicy" in queues[k]["Properties"]):
            self._queue(lid, queues[lid]["Properties"])
        for lid in self.resources("AWS::SNS::Topic"):
            arn = self.clients["sns"].create_topic(Name=lid)["TopicArn"]
            self.refs[lid] = self.arns[lid] = arn
        return self

    def _table(self, lid: str, props: dict[str, Any]) -> None:
        kwargs: dict[str, Any] = {
            "TableName": lid,
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "BillingMode": props["BillingMode"],
        }
        if props.get("GlobalSecondaryIndexes"):
            kwargs["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
        client = self.clients["dynamodb"]
        arn = client.create_table(**kwargs)["TableDescription"]["TableArn"]
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            client.update_time_to_live(TableName=lid, TimeToLiveSpecification=ttl)
        self.refs[lid], self.arns[lid] = lid, arn

    def _queue(self, lid: str, props: dict[str, Any]) -> None:
        attributes = {
            name: str(props[name])
            for name in ("VisibilityTimeout", "MessageRetentionPeriod")
            if name in props
        }
        if "RedrivePolicy" in props:
            policy = dict(props["RedrivePolicy"])
            policy["deadLetterTargetArn"] = self.resolve(policy["deadLetterTargetArn"])
            attributes["RedrivePolicy"] = json.dumps(policy)
        url = self.clients["sqs"].create_queue(QueueName=lid, Attributes=attributes)["QueueUrl"]
        arn = self.clients["sqs"].get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        self.refs[lid], self.arns[lid] = url, arn["Attributes"]["QueueArn"]

    # ------------------------------------------------------------- resolving
    def resolve(self, value: Any) -> Any:
        """A template value with ``Ref`` / ``Fn::GetAtt`` / ``Fn::Join`` replaced by what they give here."""
        if isinstance(value, dict) and len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                pseudo = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws"}
                return pseudo[arg] if arg in pseudo else self.refs[arg]
            if fn == "Fn::GetAtt":
                lid, attribute = arg
                if attribute != "Arn":
                    raise AssertionError(f"cannot resolve {lid}.{attribute}")
                return self.arns[lid]
            if fn == "Fn::Join":
                sep, parts = arg
                return sep.join(str(self.resolve(p)) for p in parts)
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    # -------------------------------------------------------------- functions
    def function_id(self, handler_dir: str) -> str:
        """The function whose code asset is ``lambdas/<handler_dir>``: the asset's handler.py is that file."""
        root = Path(__file__).resolve().parents[2] / "lambdas" / handler_dir / "handler.py"
        for lid in self.resources("AWS::Lambda::Function"):
            shipped = (self.asset_dir(lid) or Path("/nonexistent")) / "handler.py"
            if shipped.is_file() and shipped.read_bytes() == root.read_bytes():
                return lid
        raise AssertionError(f"no function in the template ships lambdas/{handler_dir}")

    def asset_dir(self, lid: str) -> Path | None:
        """The folder the function's code zip is made from: ``asset.<hash>`` for S3 key ``<hash>.zip``."""
        key = self.template["Resources"][lid]["Properties"].get("Code", {}).get("S3Key")
        if not isinstance(key, str) or not key.endswith(".zip"):
            return None
        path = self.outdir / f"asset.{key.removesuffix('.zip')}"
        return path if path.is_dir() else None

    def environment(self, lid: str) -> dict[str, str]:
        props = self.template["Resources"][lid]["Properties"]
        variables = props.get("Environment", {}).get("Variables", {})
        return {k: str(self.resolve(v)) for k, v in variables.items()}

    def queue_feeding(self, function_lid: str) -> str:
        """The URL of the queue an event source mapping delivers to this function."""
        for res in self.resources("AWS::Lambda::EventSourceMapping").values():
            props = res["Properties"]
            if props["FunctionName"] == {"Ref": function_lid}:
                arn = self.resolve(props["EventSourceArn"])
                return next(self.refs[lid] for lid, a in self.arns.items() if a == arn)
        raise AssertionError(f"no queue feeds {function_lid}")

    def event_source(self, function_lid: str) -> dict[str, Any]:
        for res in self.resources("AWS::Lambda::EventSourceMapping").values():
            if res["Properties"]["FunctionName"] == {"Ref": function_lid}:
                return dict(res["Properties"])
        raise AssertionError(f"no event source for {function_lid}")

    def scheduled(self, function_lid: str) -> list[str]:
        """The schedule expressions of the rules that target this function."""
        return [
            res["Properties"]["ScheduleExpression"]
            for res in self.resources("AWS::Events::Rule").values()
            if any(t["Arn"] == {"Fn::GetAtt": [function_lid, "Arn"]} for t in res["Properties"]["Targets"])
        ]
