"""Deploy-time store upgrades: the CloudFormation custom resource of the postgres and dynamodb stores.

CloudFormation sends Create and Update (the migration level or the coarse
dimension changed) while it deploys the stack; the function applies the
pending migrations over the Data API, as ``memstack migrate`` does, and
answers on the request's pre-signed ``ResponseURL``.

On ``store_backend=dynamodb`` the same function writes the user directory
entries a table written before ``GET /v1/users`` lacks (the directory
backfill, ``adapters/dynamodb/directory_backfill.py``; also ``memstack
migrate``). It stops before its deadline rather than leave CloudFormation
without an answer: ``Complete`` is then "false" and a rerun (the CLI, or the
next deploy that changes the resource's ``Backfill`` level) finishes. Delete changes nothing
(the data outlives the stack's functions). The functions that serve
traffic never migrate (``MEMSTACK_POSTGRES_MIGRATE_ON_START=false``), so a
cold start, and the hourly scheduler above all, does not resume a paused
Aurora cluster for nothing.

A failure answers FAILED with the reason (no user data: the schema is
empty or holds only what earlier migrations made), which makes
CloudFormation roll the deploy back instead of waiting an hour for an
answer that never comes.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from memstack.settings import Settings

Respond = Callable[[str, dict[str, Any]], None]


def put_response(url: str, body: dict[str, Any]) -> None:
    """The answer CloudFormation waits for: a PUT of the JSON body on the pre-signed URL (no content type)."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(data))}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


def migrate_schema(settings: Settings) -> dict[str, Any]:
    from memstack.adapters.postgres.connect import build_executor
    from memstack.adapters.postgres.schema import LATEST, applied_versions, migrate

    executor = build_executor(settings)
    try:
        applied = migrate(executor, settings.postgres.schema_name, settings.embedding.coarse_dim)
        versions = applied_versions(executor, settings.postgres.schema_name)
    finally:
        executor.close()
    return {"AppliedNow": len(applied), "Version": max(versions, default=0), "Latest": LATEST}


def backfill_directory(settings: Settings, seconds: float | None) -> dict[str, Any]:
    import boto3

    from memstack.adapters.dynamodb.directory_backfill import backfill_directory as backfill

    client = boto3.client("dynamodb", region_name=settings.aws.aws_region)
    deadline = None if seconds is None else time.monotonic() + seconds
    report = backfill(client, settings.aws.memories_table or "", deadline=deadline)
    # CloudFormation's Data values are strings to its templates; numbers read back as they are.
    return {
        **{k: v for k, v in report.as_dict().items() if k != "complete"},
        "Complete": str(report.complete).lower(),
    }


def upgrade(settings: Settings, seconds: float | None) -> dict[str, Any]:
    """The store's deploy-time upgrade: postgres migrations, or the dynamodb directory backfill."""
    if settings.store_backend == "dynamodb":
        return backfill_directory(settings, seconds)
    return migrate_schema(settings)


def physical_id(settings: Settings) -> str:
    if settings.store_backend == "dynamodb":
        return f"{settings.aws.memories_table}-directory"
    return f"{settings.postgres.schema_name}-schema"


#: kept back from the function's remaining time for the answer to CloudFormation
ANSWER_MARGIN_SECONDS = 20.0


def on_event(
    event: dict[str, Any],
    settings: Settings,
    respond: Respond = put_response,
    seconds_left: float | None = None,
) -> dict[str, Any]:
    """Handle one custom-resource request and answer it; returns the answer sent.

    ``seconds_left``: the invocation's remaining time; the dynamodb backfill stops in time to answer.
    """
    physical = event.get("PhysicalResourceId") or physical_id(settings)
    answer: dict[str, Any] = {
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "PhysicalResourceId": physical,
    }
    try:
        budget = None if seconds_left is None else max(seconds_left - ANSWER_MARGIN_SECONDS, 0.0)
        data = {} if event["RequestType"] == "Delete" else upgrade(settings, budget)
        answer.update(Status="SUCCESS", Data=data)
    except Exception as exc:  # every failure must reach CloudFormation, or it waits for an hour
        answer.update(Status="FAILED", Reason=f"{type(exc).__name__}: {exc}"[:1000])
    respond(event["ResponseURL"], answer)
    return answer
