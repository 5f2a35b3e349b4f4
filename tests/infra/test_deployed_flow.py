"""The tier as deployed: stood up by CloudFormation (moto), every handler driven, every AWS call IAM-checked.

Each handler is the file the template ships (its code asset), imported cold
with the environment CloudFormation gave the function. The drive covers
every route (add async, add sync=true with and without extraction, search,
list, get, patch, history, delete, keyed memories, users, consolidation sync
and async, erase, the memory browser's /ui files) and every job type
(extraction, consolidation via the scheduler's fan-out, the outbox sweep,
the cost report), plus the operator's dead-letter list and redrive, and the
deploy-time custom resource (postgres migrations; on dynamodb the user
directory backfill, run on a table whose directory was removed).
Bedrock is answered at the wire (``fake_bedrock``), the RDS Data API from
the test PostgreSQL (``data_api_wire``), Cost Explorer through ``Stubber``.

moto does not enforce IAM, so every call the functions made is recorded on
botocore's events (``aws_calls``) and evaluated against the function's own
role in the synthesised template (``iam``): a call the role does not allow
fails the test, as it would fail in an account. The same recording,
evaluated against the API role as it was before issue 23 (no access to the
dead-letter queues), refuses exactly the erase's dead-letter calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import httpx
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from stacks.constructs.compute import service_name
from stacks.constructs.environment import function_reads
from stacks.constructs.observability import EMITTED_METRICS
from tests.infra.aws_calls import CallRecorder
from tests.infra.cloudformation import ACCOUNT, LEFT_OUT, REGION
from tests.infra.conftest import Synth
from tests.infra.deployed import DeployedStack
from tests.infra.fake_bedrock import FakeBedrock, install
from tests.infra.flow import CALLER, Deployment, api_event, emitted_series

pytestmark = pytest.mark.slow

HANDLERS = {
    "api": "api",
    "extraction_worker": "extraction_worker",
    "consolidation_scheduler": "consolidation_scheduler",
    "consolidation_worker": "consolidation_worker",
    "webhook_worker": "webhook_worker",
    "cost_report": "cost_report",
}
#: the tenant's webhook receiver: a public name (the outbound policy refuses private addresses)
RECEIVER = "https://hooks.example.com/memstack"
PUBLIC_ADDRESS = "93.184.215.14"


@pytest.fixture(params=["small", "postgres_small"])
def variant(request: pytest.FixtureRequest) -> tuple[str, Synth]:
    return request.param, request.getfixturevalue(request.param)


@pytest.fixture
def deployment(
    variant: tuple[str, Synth], monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Deployment]:
    name, synth = variant
    # moto would answer Bedrock and the Data API too (badly): those are answered at the wire.
    passthrough = {"services": ["bedrockruntime", "bedrock-agent-runtime", "rds-data"]}
    with mock_aws(config={"core": {"passthrough": passthrough}}):
        session = boto3.setup_default_session(region_name=REGION) or boto3.DEFAULT_SESSION
        bedrock = FakeBedrock()
        install(session, bedrock)
        recorder = CallRecorder(REGION, ACCOUNT)
        recorder.install(session)
        stack = DeployedStack(synth.raw, synth.outdir, session, name=f"memstack-{name.replace('_', '-')}")
        stack.create()
        closers = []
        if synth.stack.config.uses_postgres:
            closers.append(_data_api(stack, session, request))
        deployment = Deployment(stack, recorder, monkeypatch)
        deployment.bedrock = bedrock  # type: ignore[attr-defined]
        try:
            yield deployment
        finally:
            for close in closers:
                close()
            boto3.DEFAULT_SESSION = None


def _data_api(stack: DeployedStack, session: Any, request: pytest.FixtureRequest) -> Any:
    """The Data API answered from the test PostgreSQL, on the schema the functions are configured with."""
    import psycopg

    from tests.data_api_emulator import DataApiEmulator
    from tests.infra.data_api_wire import DataApiWire
    from tests.infra.data_api_wire import install as install_wire

    server = request.getfixturevalue("postgres_server")
    env = stack.environment(stack.function_id("api"))
    schema = env.get("MEMSTACK_POSTGRES_SCHEMA", "memstack")
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    emulator = DataApiEmulator(server.dsn)
    wire = DataApiWire(emulator, env["MEMSTACK_POSTGRES_CLUSTER_ARN"], env["MEMSTACK_POSTGRES_SECRET_ARN"])
    install_wire(session, wire)

    def close() -> None:
        emulator.close()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    return close


def _stage(synth: Synth) -> str:
    [stage] = synth.props("AWS::ApiGateway::Stage")
    return str(stage["StageName"])


class Api:
    def __init__(self, deployment: Deployment, stage: str) -> None:
        self.deployment, self.stage = deployment, stage

    def __call__(
        self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        answer = self.raw(method, path, body, query)
        return answer["statusCode"], json.loads(answer["body"] or "null")

    def raw(
        self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """What the function answers API Gateway: status, headers, body as text."""
        answer: dict[str, Any] = self.deployment.invoke(
            "api", api_event(self.stage, method, path, body, query)
        )
        return answer


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


def _create_as_cloudformation_does(deployment: Deployment, resource_type: str) -> dict[str, Any]:
    """CloudFormation's Create request to the stack's one ``resource_type``, answered on its ResponseURL."""
    [(lid, resource)] = [
        (lid, r) for lid, r in deployment.stack.template["Resources"].items() if r["Type"] == resource_type
    ]
    event = {
        "RequestType": "Create",
        "ResponseURL": "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
        "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{deployment.stack.name}/1",
        "RequestId": "request-1",
        "ResourceType": resource_type,
        "LogicalResourceId": lid,
        "ResourceProperties": deployment.stack.resolve(resource["Properties"]),
    }
    answers: list[tuple[str, dict[str, Any]]] = []
    deployment.invoke("schema_migration", event, respond=lambda url, body: answers.append((url, body)))
    [(url, body)] = answers
    assert url == event["ResponseURL"] and body["Status"] == "SUCCESS", body
    return {**body, "ResourceProperties": event["ResourceProperties"]}


def _migrate_as_cloudformation_does(deployment: Deployment) -> None:
    body = _create_as_cloudformation_does(deployment, "Custom::MemstackSchema")
    assert body["Data"]["Version"] == body["Data"]["Latest"] == int(body["ResourceProperties"]["Migrations"])


def _backfill_as_cloudformation_does(deployment: Deployment, api: Api) -> None:
    """The user directory of a table from before it: gone, then written back by the deploy-time backfill."""
    status, before = api("GET", "/v1/users")
    assert status == 200 and before["users"], before
    table = deployment.stack.environment(deployment.stack.function_id("api"))["MEMSTACK_MEMORIES_TABLE"]
    client = boto3.client("dynamodb", region_name=REGION)
    for row in client.scan(TableName=table)["Items"]:
        if row["sk"]["S"].startswith("USER#"):
            client.delete_item(TableName=table, Key={"pk": row["pk"], "sk": row["sk"]})
    assert api("GET", "/v1/users")[1]["users"] == []
    body = _create_as_cloudformation_does(deployment, "Custom::MemstackUserDirectory")
    assert body["Data"]["Complete"] == "true" and body["Data"]["created"] == len(before["users"]), body
    assert api("GET", "/v1/users")[1] == before


def _tenant_config(deployment: Deployment, api: Api) -> None:
    """The tenant's configuration: stored beside the memories (the API role's own table or schema),
    read by the extraction worker (its own role) to file a memory under the tenant's category."""
    assert api("GET", "/v1/config")[1]["version"] == 0
    pets = {"name": "pets", "description": "the user's pets and their care", "keywords": ["dog", "vet"]}
    status, put = api("PUT", "/v1/config", {"categories": {"custom": [pets]}})
    assert (status, put["version"]) == (200, 1), put
    status, patched = api("PATCH", "/v1/config", {"extraction": {"ignore": {"categories": ["health"]}}})
    assert (status, patched["version"]) == (200, 2), patched
    status, got = api("GET", "/v1/config")
    assert got["config"]["categories"]["custom"] == [pets] and got["version"] == 2, got
    turn = {"id": "pet-1", "role": "user", "speaker": "Pat", "content": "I took my dog Biscuit to the vet."}
    assert api("POST", "/v1/memories", {"user_id": "pat", "messages": [turn]})[0] == 202
    assert deployment.deliver("extraction_worker") == {"received": 1, "failed": []}
    status, listed = api("GET", "/v1/memories", query={"user_id": "pat", "category": "pets"})
    assert status == 200 and [m["source_ids"] for m in listed["memories"]] == [["pet-1"]], listed
    status, error = api("GET", "/v1/memories", query={"user_id": "pat", "category": "cars"})
    assert status == 422, error


def _receiver(deployment: Deployment) -> list[httpx.Request]:
    """The tenant's receiver, answered at the wire: the name resolves to a public address, and the
    delivery's request (to that address, with the name as Host and SNI) is recorded and answered 200."""
    from memstack.adapters.webhooks.http_sender import PinnedHttpSender

    received: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        request.read()
        received.append(request)
        return httpx.Response(200)

    wire = httpx.MockTransport(answer)
    original = PinnedHttpSender.__init__

    def wired(self: PinnedHttpSender, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)  # (each service closes its own sender's client)
        self.resolver, self._client = (lambda host, port: [PUBLIC_ADDRESS]), httpx.Client(transport=wire)

    deployment.monkeypatch.setattr(PinnedHttpSender, "__init__", wired)
    return received


def _webhooks(deployment: Deployment, api: Api) -> tuple[str, list[httpx.Request]]:
    """The tenant asks for memory events at its receiver (a section of its configuration)."""
    from memstack.domain.webhooks.signature import new_secret

    secret = new_secret()
    hooks = {"url": RECEIVER, "secret": secret, "events": ["memory.created", "memory.deleted"]}
    status, config = api("PATCH", "/v1/config", {"webhooks": hooks})
    assert status == 200 and config["config"]["webhooks"]["url"] == RECEIVER, config
    return secret, _receiver(deployment)


def _delivered(deployment: Deployment, secret: str, received: list[httpx.Request]) -> list[dict[str, Any]]:
    """The webhook worker's deliveries of what is queued: each to the checked address, signed."""
    from memstack.domain.webhooks.signature import verify

    before = len(received)
    delivered = deployment.deliver("webhook_worker")
    assert delivered["received"] >= 1 and delivered["failed"] == [], delivered
    assert len(received) - before == delivered["received"]
    events = []
    for request in received[before:]:
        assert str(request.url) == f"https://{PUBLIC_ADDRESS}/memstack"
        assert request.headers["host"] == "hooks.example.com"
        assert request.extensions["sni_hostname"] == "hooks.example.com"
        verify(secret, dict(request.headers), request.content)
        events.append(json.loads(request.content))
    return events


def _drive(deployment: Deployment, api: Api) -> None:
    """Every route and job type, on two users: Maya (kept) and Ann (erased at the end)."""
    _tenant_config(deployment, api)
    secret, received = _webhooks(deployment, api)
    turn = {"id": "turn-1", "role": "user", "speaker": "Maya", "content": "I moved to Lisbon in March."}
    status, added = api("POST", "/v1/memories", {"user_id": "maya", "messages": [turn]})
    assert (status, added["queued"]) == (202, 1), added
    [job_id] = added["job_ids"]
    assert api("GET", f"/v1/jobs/{job_id}")[1]["status"] == "queued"
    # The extraction worker gets the job from the queue the template maps to it, and reports it done.
    assert deployment.deliver("extraction_worker") == {"received": 1, "failed": []}
    status, job = api("GET", f"/v1/jobs/{job_id}")
    # (moto's own event source mapping receives the message first, so attempts may read 2 here)
    assert (status, job["status"], job["error"]) == (200, "done", None), job
    # The memories it wrote are events the webhook worker signs and delivers.
    events = _delivered(deployment, secret, received)
    assert {(e["type"], e["user_id"]) for e in events} == {("memory.created", "maya")}, events

    status, found = api("POST", "/v1/memories/search", {"user_id": "maya", "query": "where does Maya live"})
    assert status == 200, found
    [memory] = [r for r in found["results"] if r["tier"] == "ltm"]
    assert "Lisbon" in memory["content"] and memory["source_ids"] == ["turn-1"]
    mid = memory["id"]

    _sync_adds(deployment, api)
    status, listed = api("GET", "/v1/memories", query={"user_id": "maya"})
    assert status == 200 and listed["memories"], listed
    assert api("GET", f"/v1/memories/{mid}", query={"user_id": "maya"})[0] == 200
    patch = {"user_id": "maya", "content": "I moved to Lisbon in March 2024."}
    status, patched = api("PATCH", f"/v1/memories/{mid}", patch)
    assert status == 200, patched
    status, history = api("GET", f"/v1/memories/{patched['id']}/history", query={"user_id": "maya"})
    assert status == 200 and len(history["memories"]) >= 2, history
    keyed = {"user_id": "maya", "content": "Maya prefers tea."}
    assert api("PUT", "/v1/memories/keys/drink", keyed)[0] in (200, 201)
    status, got = api("GET", "/v1/memories/keys/drink", query={"user_id": "maya"})
    assert status == 200 and got["content"] == "Maya prefers tea.", got
    assert api("DELETE", "/v1/memories/keys/drink", query={"user_id": "maya"})[0] in (200, 204)
    assert api("DELETE", f"/v1/memories/{patched['id']}", query={"user_id": "maya"})[0] in (200, 204)
    # Edits through the API are events too (the update was not asked for; the deletes were).
    deleted = [
        e["data"]["memory_id"]
        for e in _delivered(deployment, secret, received)
        if e["type"] == "memory.deleted"
    ]
    assert patched["id"] in deleted, deleted
    assert api("GET", "/v1/health")[0] == 200
    status, users = api("GET", "/v1/users")
    assert status == 200 and "maya" in [u["user_id"] for u in users["users"]], users
    # Maya's export, a page of it, imported as another user: the store calls both routes make.
    page = api.raw("GET", "/v1/users/maya/export", query={"limit": "50"})
    assert page["statusCode"] == 200, page
    assert page["multiValueHeaders"]["Content-Type"] == ["application/x-ndjson"], page
    lines = page["body"].splitlines()
    event = api_event(api.stage, "POST", "/v1/users/maya-copy/import")
    event["body"] = "\n".join(lines)
    imported = deployment.invoke("api", event)
    assert imported["statusCode"] == 200 and json.loads(imported["body"])["imported"] == len(lines) - 1
    assert api("DELETE", "/v1/users/maya-copy")[0] == 200  # the rest of the flow is Maya's alone

    # Enough short-term turns (the default threshold is 10) make Maya due for consolidation.
    more = [{"role": "user", "content": f"Note {i}: I walk by the Tagus every morning."} for i in range(9)]
    assert api("POST", "/v1/memories", {"user_id": "maya", "infer": False, "messages": more})[0] in (200, 202)
    scheduler = deployment.stack.function_id("consolidation_scheduler")
    assert deployment.stack.scheduled(scheduler) == ["rate(1 hour)"]
    scheduled = deployment.invoke(
        "consolidation_scheduler", {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    )
    assert scheduled["jobs"] == 1 and scheduled["users"][0]["user_id"] == "maya", scheduled
    assert deployment.deliver("consolidation_worker") == {"received": 1, "failed": []}
    # On the dynamodb store the workers have stored Maya's snapshot; this search (a cold start, as
    # every invocation here) loads it from S3 and reads only the log after it.
    loads = _snapshot_calls(deployment, "api", "GetObject")
    status, found = api("POST", "/v1/memories/search", {"user_id": "maya", "query": "Tagus morning walk"})
    assert status == 200
    assert [r for r in found["results"] if r["tier"] == "ltm" and "Tagus" in r["content"]], found["results"]
    if _bucket(deployment) is not None:
        assert _snapshots(deployment), "the workers stored no snapshot of Maya"
        assert _snapshot_calls(deployment, "api", "GetObject") > loads

    # Consolidation on request: now, and queued for the worker.
    assert api("POST", "/v1/consolidations", {"user_id": "maya", "sync": True})[0] == 200
    assert api("POST", "/v1/consolidations", {"user_id": "maya", "sync": False})[0] == 202
    assert deployment.deliver("consolidation_worker") == {"received": 1, "failed": []}

    ce, stub = _cost_explorer(datetime.now(UTC) - timedelta(days=1))
    with stub:
        report = deployment.invoke("cost_report", {"source": "aws.events"}, ce_client=ce)
    stub.assert_no_pending_responses()
    assert report["total"] == 12.5 and report["over_threshold"] is True
    assert report["published"] is True  # to the template's alert topic

    _memory_browser(api)
    _erase_with_a_dead_letter(deployment, api)


def _snapshots(deployment: Deployment, user: str = "maya") -> list[str]:
    """The user's stored snapshots in the stack's bucket (none on a store without one)."""
    from memstack.adapters.dynamodb.snapshot_objects import user_prefix
    from memstack.api.auth import principal_tenant

    bucket = _bucket(deployment)
    if bucket is None:
        return []
    s3 = boto3.client("s3", region_name=REGION)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=user_prefix(principal_tenant(CALLER), user))
    return [o["Key"] for o in listed.get("Contents", [])]


def _bucket(deployment: Deployment) -> str | None:
    return deployment.stack.environment(deployment.stack.function_id("api")).get("MEMSTACK_SNAPSHOT_BUCKET")


def _snapshot_calls(deployment: Deployment, handler_dir: str, operation: str) -> int:
    lid = deployment.stack.function_id(handler_dir)
    return sum(1 for c in deployment.recorder.calls if c.caller == lid and c.operation == operation)


def _extraction_pending(parsed: dict[str, Any]) -> bool:
    """A read of outbox guards (``BatchGetItem`` on the STM table) that found one still pending."""
    items = [item for found in parsed.get("Responses", {}).values() for item in found]
    return any(item.get("extraction") == {"S": "pending"} for item in items)


def _sync_adds(deployment: Deployment, api: Api) -> None:
    """``sync=true``: with extraction the API answers once the worker has run the job; without, at once."""
    # The API waits, watching its message's outbox guard, while the extraction worker (its own
    # function, its own role) takes the job from the queue: here the worker runs right after the
    # API first reads the guard still pending, so the API has waited and then sees it extracted.
    turn = {"id": "turn-sync", "role": "user", "content": "I started learning the cello in May."}
    worker = lambda: deployment.deliver("extraction_worker")  # noqa: E731
    read_guards = "after-call.dynamodb.BatchGetItem"
    with deployment.run_between("api", read_guards, _extraction_pending, worker) as ran:
        status, answer = api("POST", "/v1/memories", {"user_id": "maya", "sync": True, "messages": [turn]})
    assert ran == [{"received": 1, "failed": []}], ran
    assert (status, answer["status"], answer["queued"]) == (200, "processed", 1), answer
    status, found = api("POST", "/v1/memories/search", {"user_id": "maya", "query": "cello lessons"})
    assert status == 200, found
    assert [r for r in found["results"] if r["tier"] == "ltm" and r["source_ids"] == ["turn-sync"]], found

    # Without extraction there is nothing to wait for: stored, answered now.
    sync = {"id": "turn-2", "role": "user", "content": "My sister Ines lives in Porto."}
    body = {"user_id": "maya", "sync": True, "infer": False, "messages": [sync]}
    status, answer = api("POST", "/v1/memories", body)
    assert (status, answer["status"], answer["queued"]) == (202, "stored", 0), answer


def _header(answer: dict[str, Any], name: str) -> str:
    """A response header, from either map a proxy integration answer may carry."""
    single = answer.get("headers") or {}
    return str(single.get(name) or (answer.get("multiValueHeaders") or {})[name][0])


def _memory_browser(api: Api) -> None:
    """``/ui`` and its files, public routes of the API function: the page knows the stage it is under."""
    answer = api.raw("GET", "/ui")
    assert answer["statusCode"] == 200, answer
    assert _header(answer, "Content-Type").startswith("text/html")
    # Behind API Gateway the page's own files and its /v1 calls are under the stage's path.
    assert f'<meta name="memstack-base" content="/{api.stage}">' in answer["body"]
    assert f'src="/{api.stage}/ui/app.js"' in answer["body"]
    for name, kind in {
        "app.js": "text/javascript",
        "app.css": "text/css",
        "icon.svg": "image/svg+xml",
    }.items():
        answer = api.raw("GET", f"/ui/{name}")
        assert answer["statusCode"] == 200 and _header(answer, "Content-Type").startswith(kind), answer
        assert answer["body"]
    assert api.raw("GET", "/ui/handler.py")["statusCode"] == 404  # only the page's own files


def _erase_with_a_dead_letter(deployment: Deployment, api: Api) -> None:
    """Ann has memories and a dead-lettered job; the operator lists and redrives, then Ann is erased."""
    from memstack.adapters.queue.sqs import SqsJobQueue
    from memstack.api.auth import principal_tenant
    from memstack.ports.queue import Job

    words = {"id": "ann-1", "role": "user", "content": "I keep a quetzalbyte in my garden."}
    assert api("POST", "/v1/memories", {"user_id": "ann", "messages": [words]})[0] == 202
    assert deployment.deliver("extraction_worker") == {"received": 1, "failed": []}
    env = deployment.stack.environment(deployment.stack.function_id("api"))
    urls = {
        "extract": env["MEMSTACK_EXTRACTION_QUEUE_URL"],
        "consolidate": env["MEMSTACK_CONSOLIDATION_QUEUE_URL"],
    }
    dlqs = {
        "extract": env["MEMSTACK_EXTRACTION_DLQ_URL"],
        "consolidate": env["MEMSTACK_CONSOLIDATION_DLQ_URL"],
    }
    sqs = deployment.stack.clients["sqs"]
    # The operator's `memstack dlq list` / `redrive` (their own credentials: no function role).
    operator = SqsJobQueue(urls, dlq_urls=dlqs, client=sqs)
    dead = Job(type="extract", tenant=principal_tenant(CALLER), user_id="ann", payload={"message_id": "gone"})
    sqs.send_message(QueueUrl=dlqs["extract"], MessageBody=dead.model_dump_json())
    assert [d["id"] for d in operator.dead_letters()] == [dead.id]
    assert operator.redrive() == 1
    sqs.purge_queue(QueueUrl=urls["extract"])
    sqs.send_message(QueueUrl=dlqs["extract"], MessageBody=dead.model_dump_json())

    stored = _snapshots(deployment, "ann")
    status, erased = api("DELETE", "/v1/users/ann")
    assert status == 200, erased
    assert erased["erased"]["jobs"] == 1 and erased["erased"]["stm"] >= 1, erased
    assert erased["erased"].get("snapshots", 0) == len(stored) and _snapshots(deployment, "ann") == []
    search = {"user_id": "ann", "query": "what does Ann keep in the garden"}
    assert api("POST", "/v1/memories/search", search)[1]["results"] == []
    assert operator.dead_letters() == []


def test_every_call_of_every_handler_on_the_deployed_stack_is_allowed_by_its_role(
    deployment: Deployment, variant: tuple[str, Synth], capsys: pytest.CaptureFixture[str]
) -> None:
    _, synth = variant
    assert len(deployment.stack.resources("AWS::Lambda::Function")) >= 5
    assert deployment.stack.created is not None
    left_out = set(deployment.stack.created.adapted.left_out.values())
    print("left out of moto's CloudFormation:", sorted(left_out))
    assert left_out <= set(LEFT_OUT), f"undocumented: {sorted(left_out - set(LEFT_OUT))}"
    postgres = synth.stack.config.uses_postgres
    if postgres:
        _migrate_as_cloudformation_does(deployment)
    api = Api(deployment, _stage(synth))
    _drive(deployment, api)
    if not postgres:
        _backfill_as_cloudformation_does(deployment, api)

    refused = deployment.refused()
    assert not refused, "calls IAM would refuse:\n" + "\n".join(
        f"{fn}: {r.action} on {r.resource} ({why})" for fn, _, r, why in refused
    )
    services = {c.service for c in deployment.recorder.calls}
    assert {"dynamodb", "sqs", "sns", "bedrock-runtime", "ce"} <= services, services
    if not postgres:
        # The snapshot bucket: workers store (and replace), a cold search loads, an erase lists
        # and deletes; every one of those calls was evaluated above.
        s3 = {(c.caller, c.operation) for c in deployment.recorder.calls if c.service == "s3"}
        fn = deployment.stack.function_id
        assert {
            (fn("consolidation_worker"), "PutObject"),
            (fn("api"), "GetObject"),
            (fn("api"), "ListObjectsV2"),
            (fn("api"), "DeleteObjects"),
        } <= s3, s3
    if synth.stack.config.uses_postgres:
        assert "rds-data" in services
    assert set(deployment.bedrock.operations()) >= {"InvokeModel", "Converse"}  # type: ignore[attr-defined]

    # Before issue 23 the API role had nothing on the dead-letter queues: the same calls, evaluated
    # against that policy, are refused exactly where the erase reads and cleans them.
    dlqs = {deployment.stack.attribute(lid, "Arn") for lid in _dlqs(deployment.stack)}
    api_fn = deployment.stack.function_id("api")

    def before_issue_23(lid: str) -> list[dict[str, Any]]:
        statements = deployment.statements(lid)
        if lid != api_fn:
            return statements
        return [s for s in statements if not dlqs & set(_as_list(s.get("Resource", [])))]

    old = {(fn, r.action) for fn, _, r, _ in deployment.refused(before_issue_23)}
    assert old == {
        (api_fn, "sqs:ReceiveMessage"),
        (api_fn, "sqs:DeleteMessage"),
    } or old == {
        (api_fn, "sqs:ReceiveMessage"),
        (api_fn, "sqs:DeleteMessage"),
        (api_fn, "sqs:ChangeMessageVisibility"),
    }, old

    # Every metric series the handlers emitted is one the stack declares, under its service name.
    declared = {
        (service_name(synth.stack.config, fn), metric, extra)
        for fn, metrics in EMITTED_METRICS.items()
        for metric, extra in metrics
    }
    emitted = emitted_series(capsys.readouterr().out)
    assert emitted and emitted <= declared, emitted - declared

    # Issue 23, item 6: the scheduler (hourly, nobody due or not) never touches the database, so it
    # never resumes a paused Aurora cluster; no function migrates when it starts.
    scheduler = deployment.stack.function_id("consolidation_scheduler")
    assert not [c for c in deployment.recorder.calls if c.caller == scheduler and c.service == "rds-data"]
    if postgres:
        migration = deployment.stack.function_id("schema_migration")
        migrating = {
            c.caller for c in deployment.recorder.calls if "CREATE TABLE" in str(c.params.get("sql"))
        }
        assert migrating == {migration}, migrating

    # Every MEMSTACK_* setting a handler read is one the stack declares for that function, so a
    # value given at synth (context, -c settings) reaches it; the rest are their defaults.
    handlers = [*HANDLERS, "schema_migration"]
    unread = [h for h in handlers if deployment.stack.function_id(h) not in deployment.reads]
    assert not unread and len(deployment.reads) == len(handlers), unread
    for handler_dir in handlers:
        lid = deployment.stack.function_id(handler_dir)
        declared_reads = {f"MEMSTACK_{n.upper()}" for n in function_reads(synth.stack.config, handler_dir)}
        undeclared = deployment.reads[lid] - declared_reads
        assert not undeclared, f"{handler_dir} reads {sorted(undeclared)}, which the stack never sets"


def _dlqs(stack: DeployedStack) -> list[str]:
    sources = [r["Properties"] for r in stack.resources("AWS::SQS::Queue").values()]
    targets = {
        p["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0] for p in sources if "RedrivePolicy" in p
    }
    return sorted(targets)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
