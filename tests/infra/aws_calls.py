"""Every AWS call the code makes, as the IAM authorisations it needs: a recorder on botocore's events.

``CallRecorder.install(session)`` registers one ``provide-client-params``
handler on a boto3 session's event system, so every client the code creates
from that session (lazily, as the adapters do) reports each call with the
parameters it was given, before anything is sent; nothing in the code is
patched. ``calls_for`` turns one call into the requests IAM evaluates, as
AWS's Service Authorization Reference defines them:

- SQS batch operations are authorised as their single actions
  (``DeleteMessageBatch`` needs ``sqs:DeleteMessage``); the queue ARN comes
  from the queue URL.
- DynamoDB ``TransactWriteItems``/``TransactGetItems`` need the item action
  of each part on that part's table; ``Batch*`` name each table; a
  ``Query``/``Scan`` on an index is on ``table/<t>/index/<i>``.
- Bedrock ``Converse`` is ``bedrock:InvokeModel``; a call through an
  inference profile is authorised on the profile and, with the
  ``bedrock:InferenceProfileArn`` condition key, on the foundation model it
  routes to; ``Rerank`` is ``bedrock:Rerank`` on ``*`` plus ``InvokeModel``
  on the reranker model.
- The RDS Data API reads the cluster's secret as the caller: every
  ``rds-data`` call also needs ``secretsmanager:GetSecretValue`` on it.
- S3 object calls are on the object's ARN (``DeleteObjects`` is
  ``s3:DeleteObject`` on each key); ``ListObjectsV2`` is ``s3:ListBucket``
  on the bucket, with the ``s3:prefix`` condition key.

A call this module has no rule for fails the test (``NotImplementedError``),
so new code cannot slip past the check unevaluated.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from tests.infra.iam import Request

PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca.")
#: operations IAM does not authorise (STS identity) and the recorder can skip
UNAUTHORISED = {"sts:GetCallerIdentity"}


@dataclass(frozen=True)
class Call:
    caller: str  # the function (logical id) whose role makes the call
    service: str  # botocore service name: "sqs", "bedrock-runtime"
    operation: str  # "DeleteMessageBatch"
    params: dict[str, Any] = field(hash=False, compare=False)


@dataclass
class CallRecorder:
    """Calls made while ``caller`` is set (threads too: a heartbeat renews on its own thread)."""

    region: str
    account: str
    calls: list[Call] = field(default_factory=list)
    caller: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self, session: Any) -> None:
        events = session._session.get_component("event_emitter")
        events.register_first("provide-client-params", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        caller = self.caller
        if caller is None:
            return
        with self._lock:
            self.calls.append(Call(caller, model.service_model.service_name, model.name, dict(params)))

    def requests(self, call: Call) -> list[Request]:
        return calls_for(call, self.region, self.account)


def _queue_arn(url: str) -> str:
    parsed = urlparse(url)
    account, name = parsed.path.strip("/").split("/", 1)
    host = parsed.hostname or ""
    region = host.split(".")[1] if host.startswith("sqs.") else host.split(".")[0]
    return f"arn:aws:sqs:{region}:{account}:{name}"


_SQS_SINGLE = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
_TRANSACT_PART = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def _table_arn(name: str, region: str, account: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{name}"


def _dynamodb(op: str, p: dict[str, Any], region: str, account: str) -> list[Request]:
    if op in ("TransactWriteItems", "TransactGetItems"):
        out = []
        for item in p["TransactItems"]:
            ((part, body),) = item.items()
            out.append(
                Request(f"dynamodb:{_TRANSACT_PART[part]}", _table_arn(body["TableName"], region, account))
            )
        return out
    if op in ("BatchWriteItem", "BatchGetItem"):
        return [Request(f"dynamodb:{op}", _table_arn(t, region, account)) for t in p["RequestItems"]]
    arn = _table_arn(p["TableName"], region, account)
    if p.get("IndexName"):
        arn = f"{arn}/index/{p['IndexName']}"
    return [Request(f"dynamodb:{op}", arn)]


def _sqs(op: str, p: dict[str, Any], region: str, account: str) -> list[Request]:
    action = f"sqs:{_SQS_SINGLE.get(op, op)}"
    if op == "GetQueueUrl":
        owner = p.get("QueueOwnerAWSAccountId", account)
        return [Request(action, f"arn:aws:sqs:{region}:{owner}:{p['QueueName']}")]
    if op == "ListQueues":
        return [Request(action, "*")]
    return [Request(action, _queue_arn(p["QueueUrl"]))]


def _model_requests(action: str, model_id: str, region: str, account: str) -> list[Request]:
    if model_id.startswith("arn:"):
        return [Request(action, model_id)]
    if model_id.startswith(PROFILE_PREFIXES):
        profile = f"arn:aws:bedrock:{region}:{account}:inference-profile/{model_id}"
        base = model_id.split(".", 1)[1]
        routed = Request(
            action,
            f"arn:aws:bedrock:{region}::foundation-model/{base}",
            {"bedrock:InferenceProfileArn": profile},
        )
        return [Request(action, profile), routed]
    return [Request(action, f"arn:aws:bedrock:{region}::foundation-model/{model_id}")]


def _bedrock(op: str, p: dict[str, Any], region: str, account: str) -> list[Request]:
    if op == "Rerank":
        config = p["rerankingConfiguration"]["bedrockRerankingConfiguration"]["modelConfiguration"]
        return [
            Request("bedrock:Rerank", "*"),
            *_model_requests("bedrock:InvokeModel", config["modelArn"], region, account),
        ]
    action = {
        "Converse": "bedrock:InvokeModel",
        "ConverseStream": "bedrock:InvokeModelWithResponseStream",
    }.get(op, f"bedrock:{op}")
    return _model_requests(action, p["modelId"], region, account)


def _s3(op: str, p: dict[str, Any]) -> list[Request]:
    bucket = f"arn:aws:s3:::{p['Bucket']}"
    if op in ("GetObject", "PutObject", "DeleteObject"):
        return [Request(f"s3:{op}", f"{bucket}/{p['Key']}")]
    if op == "DeleteObjects":
        return [Request("s3:DeleteObject", f"{bucket}/{o['Key']}") for o in p["Delete"]["Objects"]]
    if op in ("ListObjectsV2", "ListObjects"):
        return [Request("s3:ListBucket", bucket, {"s3:prefix": p.get("Prefix", "")})]
    raise NotImplementedError(f"no IAM rule for s3:{op}")


def calls_for(call: Call, region: str, account: str) -> list[Request]:
    """The IAM requests one recorded call needs (see the module docstring)."""
    op, p = call.operation, call.params
    if f"{call.service}:{op}" in UNAUTHORISED:
        return []
    if call.service == "dynamodb":
        return _dynamodb(op, p, region, account)
    if call.service == "sqs":
        return _sqs(op, p, region, account)
    if call.service == "sns":
        return [Request(f"sns:{op}", p.get("TopicArn") or p["TargetArn"])]
    if call.service in ("bedrock-runtime", "bedrock-agent-runtime"):
        return _bedrock(op, p, region, account)
    if call.service == "ce":  # Cost Explorer has no resource-level permissions
        return [Request(f"ce:{op}", "*")]
    if call.service == "rds-data":
        return [
            Request(f"rds-data:{op}", p["resourceArn"]),
            Request("secretsmanager:GetSecretValue", p["secretArn"]),
        ]
    if call.service == "s3":
        return _s3(op, p)
    if call.service == "secretsmanager":
        return [Request(f"secretsmanager:{op}", p["SecretId"])]
    raise NotImplementedError(f"no IAM rule for {call.service}:{op}")
