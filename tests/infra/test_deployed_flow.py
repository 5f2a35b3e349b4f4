"""The small tier as deployed: its tables and queues in moto, its handlers with their exact environments.

One message goes in through an API Gateway proxy event and comes out the
other end: API -> extraction worker (fed by the queue the template maps to
it) -> search -> consolidation scheduler (the rule's target) -> consolidation
worker -> cost report. Each handler is the file the template ships (its code
asset), imported cold with nothing but the template's environment, so a
variable the stack forgets, a table key or index the code does not expect,
or a queue wired to the wrong consumer fails here. Bedrock is answered at
the wire (``fake_bedrock``), Cost Explorer through ``Stubber``.

Every ``MEMSTACK_*`` setting each handler reads on the way (recorded by
``settings_reads``) must be in that function's environment.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from stacks.constructs.compute import service_name
from stacks.constructs.observability import EMITTED_METRICS
from tests.api.conftest import EVENT_TEMPLATE
from tests.infra.conftest import Synth
from tests.infra.deployed import REGION, DeployedStack
from tests.infra.fake_bedrock import FakeBedrock, install
from tests.infra.settings_reads import recording

pytestmark = pytest.mark.slow

CALLER = "arn:aws:sts::123456789012:assumed-role/Agent/session-1"


class Context:
    """The parts of a Lambda context Powertools reads."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.memory_limit_in_mb = 1024
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:{name}"
        self.aws_request_id = f"req-{name}"
        self.log_group_name = f"/aws/lambda/{name}"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass
class Deployment:
    stack: DeployedStack
    bedrock: FakeBedrock
    monkeypatch: pytest.MonkeyPatch
    reads: dict[str, set[str]] = field(default_factory=dict)  # function logical id -> MEMSTACK_* read

    def invoke(self, handler_dir: str, event: dict[str, Any], **kwargs: Any) -> Any:
        """A cold start: the shipped handler.py imported afresh with exactly the function's environment."""
        lid = self.stack.function_id(handler_dir)
        read: set[str] = set()
        try:
            with self.monkeypatch.context() as patch, recording(patch) as read:
                for name in [n for n in os.environ if n.startswith(("MEMSTACK_", "POWERTOOLS_"))]:
                    patch.delenv(name)
                for name, value in self.stack.environment(lid).items():
                    patch.setenv(name, value)
                patch.setenv("AWS_REGION", REGION)  # the Lambda runtime sets this
                patch.setenv("POWERTOOLS_TRACE_DISABLED", "true")  # no X-Ray daemon here
                return _cold_start(self.stack, lid, handler_dir, event, **kwargs)
        finally:
            self.reads.setdefault(lid, set()).update(read)

    def deliver(self, handler_dir: str) -> dict[str, Any]:
        """What Lambda's event source mapping does: receive from the mapped queue, invoke, delete the rest."""
        lid = self.stack.function_id(handler_dir)
        mapping = self.stack.event_source(lid)
        url = self.stack.queue_feeding(lid)
        sqs = self.stack.clients["sqs"]
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=min(10, mapping.get("BatchSize", 10)), AttributeNames=["All"]
        ).get("Messages", [])
        assert messages, f"nothing on the queue that feeds {handler_dir}"
        arn = self.stack.arns[next(k for k, v in self.stack.refs.items() if v == url)]
        event = {"Records": [_sqs_record(m, arn) for m in messages]}
        response = self.invoke(handler_dir, event)
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return {"received": len(messages), "failed": sorted(failed)}


def _cold_start(
    stack: DeployedStack, lid: str, handler_dir: str, event: dict[str, Any], **kwargs: Any
) -> Any:
    from memstack.workers import lambda_entry

    importlib.reload(lambda_entry)  # its module-level Powertools objects read the environment
    module = _load(stack, lid, handler_dir)
    try:
        return module.handler(event, Context(lid), **kwargs)
    finally:
        resolver = getattr(module, "_resolver", None)
        if resolver is not None:
            resolver.deps.service.close()
        lambda_entry.service_from_environment.cache_clear()
        lambda_entry.worker_for.cache_clear()


def _load(stack: DeployedStack, lid: str, handler_dir: str) -> ModuleType:
    asset = stack.asset_dir(lid)
    assert asset is not None
    spec = importlib.util.spec_from_file_location(f"deployed_{handler_dir}_handler", asset / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sqs_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }


def api_event(stage: str, method: str, path: str, body: Any) -> dict[str, Any]:
    """The REST proxy event API Gateway sends for ``/v1/{proxy+}`` after IAM authorization."""
    event = copy.deepcopy(EVENT_TEMPLATE)
    proxy = path.removeprefix("/v1/")
    event.update(
        httpMethod=method,
        path=path,
        resource="/v1/{proxy+}",
        pathParameters={"proxy": proxy},
        queryStringParameters=None,
        multiValueQueryStringParameters=None,
        body=json.dumps(body),
    )
    headers = {"Content-Type": "application/json", "Host": "abc123.execute-api.us-east-1.amazonaws.com"}
    event["headers"], event["multiValueHeaders"] = headers, {k: [v] for k, v in headers.items()}
    context = event["requestContext"]
    context.update(httpMethod=method, path=f"/{stage}{path}", resourcePath="/v1/{proxy+}", stage=stage)
    context["identity"]["userArn"] = CALLER
    context["identity"].pop("apiKey", None)
    return event


@pytest.fixture
def deployment(small: Synth, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    # moto would answer Bedrock too (badly): let those calls through to the fake at the wire.
    with mock_aws(config={"core": {"passthrough": {"services": ["bedrockruntime"]}}}):
        session = boto3.setup_default_session(region_name=REGION) or boto3.DEFAULT_SESSION
        bedrock = FakeBedrock()
        install(session, bedrock)
        clients = {name: boto3.client(name, region_name=REGION) for name in ("dynamodb", "sqs", "sns")}
        stack = DeployedStack(small.raw, small.outdir, clients).create()
        try:
            yield Deployment(stack, bedrock, monkeypatch)
        finally:
            boto3.DEFAULT_SESSION = None


def _stage(small: Synth) -> str:
    [stage] = small.props("AWS::ApiGateway::Stage")
    return str(stage["StageName"])


def _post(deployment: Deployment, stage: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    answer = deployment.invoke("api", api_event(stage, "POST", path, body))
    return answer["statusCode"], json.loads(answer["body"])


def _cost_explorer(day: datetime) -> tuple[Any, Stubber]:
    """A Cost Explorer client that expects exactly this tier's filter (Project AND Tier) for ``day``."""
    ce = boto3.client("ce", region_name="us-east-1")
    stub = Stubber(ce)
    period = {"Start": day.date().isoformat(), "End": (day + timedelta(days=1)).date().isoformat()}
    cost = {"UnblendedCost": {"Amount": "12.5", "Unit": "USD"}}
    stub.add_response(
        "get_cost_and_usage",
        {"ResultsByTime": [{"TimePeriod": period, "Groups": [{"Keys": ["AWS Lambda"], "Metrics": cost}]}]},
        {
            "TimePeriod": period,
            "Granularity": "DAILY",
            "Metrics": ["UnblendedCost"],
            "Filter": {
                "And": [
                    {"Tags": {"Key": "Project", "Values": ["memstack"], "MatchOptions": ["EQUALS"]}},
                    {"Tags": {"Key": "Tier", "Values": ["small"], "MatchOptions": ["EQUALS"]}},
                ]
            },
            "GroupBy": [{"Type": "DIMENSION", "Key": "SERVICE"}],
        },
    )
    return ce, stub


def emitted_series(stdout: str) -> set[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """(service, metric, other dimensions) of every EMF line the handlers printed."""
    series = set()
    for line in stdout.splitlines():
        if not (line.startswith("{") and '"_aws"' in line):
            continue
        blob = json.loads(line)
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            dims = tuple(sorted((d, str(blob[d])) for group in directive["Dimensions"] for d in group))
            extra = tuple((d, v) for d, v in dims if d != "service")
            for metric in directive["Metrics"]:
                series.add((str(blob["service"]), metric["Name"], extra))
    return series


def test_a_message_travels_the_deployed_small_tier(
    deployment: Deployment, small: Synth, capsys: pytest.CaptureFixture[str]
) -> None:
    stage = _stage(small)
    turn = {"id": "turn-1", "role": "user", "speaker": "Maya", "content": "I moved to Lisbon in March."}
    status, added = _post(deployment, stage, "/v1/memories", {"user_id": "maya", "messages": [turn]})
    assert (status, added["queued"]) == (202, 1), added

    # The extraction worker gets the job from the queue the template maps to it.
    assert deployment.deliver("extraction_worker") == {"received": 1, "failed": []}

    status, found = _post(
        deployment, stage, "/v1/memories/search", {"user_id": "maya", "query": "where does Maya live"}
    )
    assert status == 200, found
    [memory] = [r for r in found["results"] if r["tier"] == "ltm"]
    assert "Lisbon" in memory["content"] and memory["source_ids"] == ["turn-1"]

    # Enough short-term turns (the default threshold is 10) make Maya due for consolidation.
    more = [{"role": "user", "content": f"Note {i}: I walk by the Tagus every morning."} for i in range(9)]
    status, _ = _post(
        deployment, stage, "/v1/memories", {"user_id": "maya", "infer": False, "messages": more}
    )
    assert status in (200, 201, 202)

    scheduler = deployment.stack.function_id("consolidation_scheduler")
    assert deployment.stack.scheduled(scheduler) == ["rate(1 hour)"]
    scheduled = deployment.invoke(
        "consolidation_scheduler", {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    )
    assert scheduled["jobs"] == 1 and scheduled["users"][0]["user_id"] == "maya", scheduled

    assert deployment.deliver("consolidation_worker") == {"received": 1, "failed": []}
    status, found = _post(
        deployment, stage, "/v1/memories/search", {"user_id": "maya", "query": "Tagus morning walk"}
    )
    assert status == 200
    summaries = [r for r in found["results"] if r["tier"] == "ltm" and "Tagus" in r["content"]]
    assert summaries, found["results"]  # the consolidation summary is long-term memory now

    ce, stub = _cost_explorer(datetime.now(UTC) - timedelta(days=1))
    with stub:
        report = deployment.invoke("cost_report", {"source": "aws.events"}, ce_client=ce)
    stub.assert_no_pending_responses()
    assert report["total"] == 12.5 and report["over_threshold"] is True
    assert report["published"] is True  # to the template's alert topic

    calls = set(deployment.bedrock.operations())
    assert calls == {"InvokeModel", "Converse", "Rerank"}

    # Every metric series the handlers emitted is one the stack knows of (and bills, docs/deploy.md),
    # under the service name its alarms and dashboard read.
    declared = {
        (service_name(small.stack.config, fn), name, extra)
        for fn, metrics in EMITTED_METRICS.items()
        for name, extra in metrics
    }
    emitted = emitted_series(capsys.readouterr().out)
    assert emitted and emitted <= declared, emitted - declared
    assert ("memstack-api", "RetrievalLatency", ()) in emitted  # what the latency alarm watches

    # Item 4: every MEMSTACK_* setting a function read on the way is in its environment.
    assert len(deployment.reads) == 5
    for lid, read in deployment.reads.items():
        missing = read - set(deployment.stack.environment(lid))
        assert not missing, f"{lid} reads {sorted(missing)} but the stack does not set them"
