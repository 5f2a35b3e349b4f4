"""Deploy-time schema migrations: the CloudFormation custom resource behind ``store_backend=postgres``.

CloudFormation sends Create and Update (the migration level or the coarse
dimension changed) while it deploys the stack; the function applies the
pending migrations over the Data API, as ``memstack migrate`` does, and
answers on the request's pre-signed ``ResponseURL``. Delete changes nothing
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


def on_event(event: dict[str, Any], settings: Settings, respond: Respond = put_response) -> dict[str, Any]:
    """Handle one custom-resource request and answer it; returns the answer sent."""
    physical = event.get("PhysicalResourceId") or f"{settings.postgres.schema_name}-schema"
    answer: dict[str, Any] = {
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "PhysicalResourceId": physical,
    }
    try:
        data = {} if event["RequestType"] == "Delete" else migrate_schema(settings)
        answer.update(Status="SUCCESS", Data=data)
    except Exception as exc:  # every failure must reach CloudFormation, or it waits for an hour
        answer.update(Status="FAILED", Reason=f"{type(exc).__name__}: {exc}"[:1000])
    respond(event["ResponseURL"], answer)
    return answer
