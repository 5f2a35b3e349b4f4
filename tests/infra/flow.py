"""Running the shipped handlers on a deployed stack, as Lambda would, and checking each AWS call against IAM.

``Deployment.invoke`` is a cold start: the function's ``handler.py`` from its
code asset, imported afresh with exactly the environment CloudFormation gave
the function, and every AWS call made meanwhile recorded as that function's
(``CallRecorder``). ``deliver`` is the event source mapping: it receives from
the queue the template maps to the function and deletes what succeeded,
calls Lambda makes with the function's own role, so they are recorded as
its calls too. ``refused`` evaluates every recorded call against the role's
policies in the synthesised template (``tests/infra/iam.py``), plus the
explicit denies of the queue and topic policies on the resource called.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

from stacks.constructs.api import PUBLIC_ROUTES
from tests.api.conftest import EVENT_TEMPLATE
from tests.infra.aws_calls import Call, CallRecorder
from tests.infra.cloudformation import REGION
from tests.infra.deployed import DeployedStack
from tests.infra.iam import Request, decide, function_role, role_statements
from tests.infra.settings_reads import recording

CALLER = "arn:aws:sts::123456789012:assumed-role/Agent/session-1"
#: what every call made over HTTPS carries (the queue and topic policies deny anything else)
TRANSPORT = {"aws:SecureTransport": "true"}


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
    recorder: CallRecorder
    monkeypatch: pytest.MonkeyPatch
    reads: dict[str, set[str]] = field(default_factory=dict)  # function logical id -> MEMSTACK_* read

    def invoke(self, handler_dir: str, event: dict[str, Any], **kwargs: Any) -> Any:
        """A cold start: the shipped handler.py imported afresh with exactly the function's environment."""
        lid = self.stack.function_id(handler_dir)
        environment = self.stack.environment(lid)
        read: set[str] = set()
        try:
            with self.monkeypatch.context() as patch, recording(patch) as read, self.as_function(lid):
                for name in [n for n in os.environ if n.startswith(("MEMSTACK_", "POWERTOOLS_"))]:
                    patch.delenv(name)
                for name, value in environment.items():
                    patch.setenv(name, value)
                patch.setenv("AWS_REGION", REGION)  # the Lambda runtime sets this
                patch.setenv("POWERTOOLS_TRACE_DISABLED", "true")  # no X-Ray daemon here
                return _cold_start(self.stack, handler_dir, event, **kwargs)
        finally:
            self.reads.setdefault(lid, set()).update(read)

    def as_function(self, lid: str) -> Any:
        """Calls made inside are made with this function's role; the caller before is the caller after.

        Nested when one function runs between two calls of another (``run_between``): the
        worker's calls are the worker's, and the API's calls after it are the API's again.
        """
        recorder = self.recorder

        class _As:
            def __enter__(self) -> None:
                self.before = recorder.caller
                recorder.caller = lid

            def __exit__(self, *_: Any) -> None:
                recorder.caller = self.before

        return _As()

    @contextmanager
    def run_between(
        self, caller: str, event: str, when: Callable[[dict[str, Any]], bool], then: Callable[[], Any]
    ) -> Iterator[list[Any]]:
        """Once, when ``caller`` gets an answer to ``event`` (botocore's ``after-call.<service>.<op>``)
        that ``when`` holds for, run ``then`` before the caller goes on: another function running
        meanwhile, as it does in AWS, in an order fixed here rather than left to two threads."""
        lid = self.stack.function_id(caller)
        done: list[Any] = []

        def after(parsed: dict[str, Any], **_: Any) -> None:
            if not done and self.recorder.caller == lid and when(parsed):
                self.recorder.caller = None  # the test's own calls (reading the template back) are no one's
                try:
                    done.append(then())
                finally:
                    self.recorder.caller = lid

        events = self.stack.session._session.get_component("event_emitter")
        events.register(event, after)
        try:
            yield done
        finally:
            events.unregister(event, after)

    def deliver(self, handler_dir: str) -> dict[str, Any]:
        """What Lambda's event source mapping does: receive from the mapped queue, invoke, delete the rest."""
        lid = self.stack.function_id(handler_dir)
        mapping = self.stack.event_source(lid)
        url = self.stack.queue_feeding(lid)
        sqs = self.stack.clients["sqs"]
        with self.as_function(lid):  # the mapping polls with the function's execution role
            messages = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=min(10, mapping.get("BatchSize", 10)),
                AttributeNames=["All"],
            ).get("Messages", [])
        assert messages, f"nothing on the queue that feeds {handler_dir}"
        event = {"Records": [_sqs_record(m, self.stack.arn_of_url(url)) for m in messages]}
        response = self.invoke(handler_dir, event)
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        with self.as_function(lid):
            for m in messages:
                if m["MessageId"] not in failed:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return {"received": len(messages), "failed": sorted(failed)}

    # ------------------------------------------------------------------- IAM
    def statements(self, lid: str) -> list[dict[str, Any]]:
        template = self.stack.template
        return role_statements(template, function_role(template, lid), self.stack.resolve)

    def resource_denies(self) -> list[tuple[str, dict[str, Any]]]:
        """(resource ARN, statement) of every Deny in the template's queue, topic and bucket policies.

        A bucket policy's statement names its own resources (the bucket and its objects): it
        is listed under each ARN a request may name, the bucket's and ``<bucket>/*`` (matched
        by the statement's Resource when evaluated).
        """
        out = []
        for res in self.stack.resources("AWS::S3::BucketPolicy").values():
            props = res["Properties"]
            for statement in props["PolicyDocument"]["Statement"]:
                if statement["Effect"] == "Deny":
                    out.append(
                        (self.stack.attribute(props["Bucket"]["Ref"], "Arn"), self.stack.resolve(statement))
                    )
        for kind, targets in (("AWS::SQS::QueuePolicy", "Queues"), ("AWS::SNS::TopicPolicy", "Topics")):
            for res in self.stack.resources(kind).values():
                props = res["Properties"]
                for statement in props["PolicyDocument"]["Statement"]:
                    if statement["Effect"] != "Deny":
                        continue
                    for target in props[targets]:
                        lid = target["Ref"]
                        arn = self.stack.attribute(lid, "Arn")
                        out.append((arn, self.stack.resolve(statement)))
        return out

    def refused(
        self, statements_of: Callable[[str], list[dict[str, Any]]] | None = None
    ) -> list[tuple[str, Call, Request, str]]:
        """Every recorded call IAM would refuse: (function, call, request, decision)."""
        statements_of = statements_of or self.statements
        cache: dict[str, list[dict[str, Any]]] = {}
        denies = self.resource_denies()
        out = []
        for call in self.recorder.calls:
            if call.caller not in cache:
                cache[call.caller] = statements_of(call.caller)
            for request in self.recorder.requests(call):
                request = Request(request.action, request.resource, {**TRANSPORT, **request.context})
                decision = decide(cache[call.caller], request)
                on_resource = [
                    s
                    for arn, s in denies
                    if request.resource == arn or request.resource.startswith(f"{arn}/")
                ]
                if decision == "Allow" and decide(on_resource, request) == "Deny":
                    decision = "Deny"
                if decision != "Allow":
                    out.append((call.caller, call, request, decision))
        return out


def _cold_start(stack: DeployedStack, handler_dir: str, event: dict[str, Any], **kwargs: Any) -> Any:
    from memstack.workers import lambda_entry

    importlib.reload(lambda_entry)  # its module-level Powertools objects read the environment
    lid = stack.function_id(handler_dir)
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


def api_event(
    stage: str, method: str, path: str, body: Any = None, query: dict[str, str] | None = None
) -> dict[str, Any]:
    """The REST proxy event API Gateway sends after authorization, for the resource the path routes to.

    A public route (``PUBLIC_ROUTES``: health, the docs, ``/ui`` and its files) is its own
    resource and carries no caller (the gateway does not authenticate it); any other path is
    ``/v1/{proxy+}``, authorised with SigV4 as ``CALLER``.
    """
    event = copy.deepcopy(EVENT_TEMPLATE)
    parts = tuple(path.strip("/").split("/"))
    public = parts in PUBLIC_ROUTES or (parts[0], "{proxy+}") in PUBLIC_ROUTES
    top, _, proxy = path.strip("/").partition("/")
    resource = path if parts in PUBLIC_ROUTES else f"/{top}/{{proxy+}}"
    proxy = "" if parts in PUBLIC_ROUTES else proxy
    event.update(
        httpMethod=method,
        path=path,
        resource=resource,
        pathParameters={"proxy": proxy} if proxy else None,
        queryStringParameters=query,
        multiValueQueryStringParameters={k: [v] for k, v in query.items()} if query else None,
        body=None if body is None else json.dumps(body),
    )
    headers = {"Content-Type": "application/json", "Host": "abc123.execute-api.us-east-1.amazonaws.com"}
    event["headers"], event["multiValueHeaders"] = headers, {k: [v] for k, v in headers.items()}
    context = event["requestContext"]
    context.update(httpMethod=method, path=f"/{stage}{path}", resourcePath=resource, stage=stage)
    context["identity"]["userArn"] = None if public else CALLER
    context["identity"].pop("apiKey", None)
    return event


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
