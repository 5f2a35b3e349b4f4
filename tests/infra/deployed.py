"""A synthesised template stood up through moto's CloudFormation, and what the handlers need from it.

``DeployedStack.create`` runs ``create_stack`` on the template
(``tests/infra/cloudformation.py``): the tables, queues, topic, roles,
policies and functions are CloudFormation's, with its generated names, and
each function's environment is the one CloudFormation resolved into the
function. ``resolve`` turns a template value (``Ref``, ``Fn::GetAtt``,
``Fn::Join``, ``Fn::Sub``, ``Fn::Select``) into what it is in this
deployment, so a role's policy statements can be evaluated against the ARNs
the code really calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.infra.cloudformation import ACCOUNT, REGION, CreatedStack, create_stack

PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NoValue": None,
}


def _arn(type_: str, physical: str) -> str | None:
    """The ARN of a resource CloudFormation created, from its physical id (what ``Fn::GetAtt Arn`` gives)."""
    r, a = REGION, ACCOUNT
    arns = {
        "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{r}:{a}:table/{physical}",
        "AWS::SQS::Queue": f"arn:aws:sqs:{r}:{a}:{physical.rsplit('/', 1)[-1]}",
        "AWS::SNS::Topic": physical,
        "AWS::IAM::Role": f"arn:aws:iam::{a}:role/{physical}",
        "AWS::Lambda::Function": f"arn:aws:lambda:{r}:{a}:function:{physical}",
        "AWS::KMS::Key": f"arn:aws:kms:{r}:{a}:key/{physical}",
        "AWS::Logs::LogGroup": f"arn:aws:logs:{r}:{a}:log-group:{physical}:*",
        "AWS::Events::Rule": f"arn:aws:events:{r}:{a}:rule/{physical}",
        "AWS::S3::Bucket": f"arn:aws:s3:::{physical}",
    }
    return arns.get(type_)


@dataclass
class DeployedStack:
    template: dict[str, Any]
    outdir: Path
    session: Any  # the boto3 session moto answers
    name: str = "memstack-test"
    created: CreatedStack | None = None
    clients: dict[str, Any] = field(default_factory=dict)

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_}

    def create(self) -> DeployedStack:
        self.created = create_stack(self.session, self.name, self.template, self.outdir)
        assert self.created.status == "CREATE_COMPLETE", self.created.status
        for service in ("dynamodb", "sqs", "sns", "lambda", "iam"):
            self.clients[service] = self.session.client(service, region_name=REGION)
        return self

    # ------------------------------------------------------------- resolving
    @property
    def physical(self) -> dict[str, str]:
        assert self.created is not None
        return self.created.physical

    def ref(self, lid: str) -> str:
        return self.physical[lid]

    def attribute(self, lid: str, attribute: str) -> str:
        assert self.created is not None
        stand_in = self.created.adapted.stand_ins.get(lid)
        if stand_in is not None:
            return stand_in.attributes[attribute]
        type_ = self.template["Resources"][lid]["Type"]
        if attribute == "Arn":
            arn = _arn(type_, self.ref(lid))
            if arn is not None:
                return arn
        if type_ == "AWS::DynamoDB::Table" and attribute == "StreamArn":
            table = self.clients["dynamodb"].describe_table(TableName=self.ref(lid))["Table"]
            return str(table["LatestStreamArn"])
        if type_ == "AWS::SQS::Queue" and attribute == "QueueName":
            return self.ref(lid).rsplit("/", 1)[-1]
        if type_ == "AWS::SNS::Topic" and attribute == "TopicName":
            return self.ref(lid).rsplit(":", 1)[-1]
        raise AssertionError(f"cannot resolve {lid}.{attribute} ({type_})")

    def resolve(self, value: Any) -> Any:
        """A template value with its intrinsic functions evaluated against this deployment."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return PSEUDO[arg] if arg in PSEUDO else self.ref(arg)
            if fn == "Fn::GetAtt":
                lid, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
                return self.attribute(lid, attribute)
            if fn == "Fn::Join":
                sep, parts = arg
                return sep.join(str(self.resolve(p)) for p in parts)
            if fn == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(index)]
            if fn == "Fn::Split":
                sep, text = arg
                return str(self.resolve(text)).split(sep)
            if fn == "Fn::Sub":
                text, names = (arg, {}) if isinstance(arg, str) else arg
                return re.sub(r"\$\{([^}]+)\}", lambda m: self._sub(m[1], names), text)
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub(self, name: str, names: dict[str, Any]) -> str:
        if name in names:
            return str(self.resolve(names[name]))
        if name in PSEUDO:
            return str(PSEUDO[name])
        if "." in name:
            lid, attribute = name.split(".", 1)
            return self.attribute(lid, attribute)
        return self.ref(name)

    def arn_of_url(self, url: str) -> str:
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{url.rsplit('/', 1)[-1]}"

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
        """The function's environment as CloudFormation created it (every reference resolved)."""
        config = self.clients["lambda"].get_function_configuration(FunctionName=self.ref(lid))
        return dict(config.get("Environment", {}).get("Variables", {}))

    def queue_feeding(self, function_lid: str) -> str:
        """The URL of the queue an event source mapping delivers to this function."""
        props = self.event_source(function_lid)
        arn = self.resolve(props["EventSourceArn"])
        for lid in self.resources("AWS::SQS::Queue"):
            if self.attribute(lid, "Arn") == arn:
                return self.ref(lid)
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
