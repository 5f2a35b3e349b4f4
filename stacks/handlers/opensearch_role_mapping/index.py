"""CloudFormation custom resource: map the memstack Lambda roles into OpenSearch fine-grained access control.

With fine-grained access control on, IAM alone does not let a role touch
an index: the security plugin must map the role to an OpenSearch role.
This function runs as the domain's master user and, for each role in its
``Roles`` property, (1) creates the OpenSearch role with exactly the
permissions listed there and (2) maps the listed IAM role ARNs to it. The
stack derives those permissions from the store's own list of calls
(memstack.adapters.opensearch.permissions): ``memstack_app`` for the Lambda
functions, ``memstack_maintenance`` for operators who reindex. Standard
library + botocore (present in every Lambda Python runtime) so it needs no
layer.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

logger = logging.getLogger()
logger.setLevel(logging.INFO)

# (method, url, body) -> (status, response body)
Sender = Callable[[str, str, dict[str, Any] | None], tuple[int, str]]


def role_body(role: dict[str, Any]) -> dict[str, Any]:
    """The security plugin role: the permissions exactly as the stack listed them."""
    return {
        "cluster_permissions": list(role["ClusterPermissions"]),
        "index_permissions": [
            {"index_patterns": list(role["IndexPatterns"]), "allowed_actions": list(role["IndexPermissions"])}
        ],
    }


def mapping_body(role_arns: list[str]) -> dict[str, Any]:
    return {"backend_roles": sorted(set(role_arns)), "hosts": [], "users": []}


def apply(endpoint: str, roles: list[dict[str, Any]], send: Sender) -> None:
    base = endpoint.rstrip("/") + "/_plugins/_security/api"
    for role in roles:
        name = role["Name"]
        for url, body in (
            (f"{base}/roles/{name}", role_body(role)),
            (f"{base}/rolesmapping/{name}", mapping_body(list(role["BackendRoles"]))),
        ):
            status, text = send("PUT", url, body)
            if status >= 300:
                raise RuntimeError(f"PUT {url} answered {status}: {text[:500]}")


def remove(endpoint: str, roles: list[dict[str, Any]], send: Sender) -> None:
    base = endpoint.rstrip("/") + "/_plugins/_security/api"
    for role in roles:
        for url in (f"{base}/rolesmapping/{role['Name']}", f"{base}/roles/{role['Name']}"):
            status, text = send("DELETE", url, None)
            if status >= 300 and status != 404:
                logger.warning("DELETE %s answered %s: %s", url, status, text[:500])


def signed_sender(region: str, attempts: int = 8) -> Sender:
    """SigV4-signed requests as this function's role (the master user), retrying while the domain settles."""
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    credentials = boto3.Session().get_credentials()

    def send(method: str, url: str, body: dict[str, Any] | None) -> tuple[int, str]:
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(attempts):
            request = AWSRequest(
                method=method, url=url, data=data, headers={"Content-Type": "application/json"}
            )
            SigV4Auth(credentials, "es", region).add_auth(request)
            prepared = urllib.request.Request(url, data=data, method=method, headers=dict(request.headers))
            try:
                with urllib.request.urlopen(prepared, timeout=30) as resp:
                    return resp.status, resp.read().decode()
            except urllib.error.HTTPError as exc:
                text = exc.read().decode(errors="replace")
                if exc.code < 500 or attempt == attempts - 1:
                    return exc.code, text
            except urllib.error.URLError:
                if attempt == attempts - 1:
                    raise
            time.sleep(min(60, 2**attempt * 5))
        raise RuntimeError("unreachable")

    return send


def respond(event: dict[str, Any], status: str, reason: str, physical_id: str) -> None:
    """Report to CloudFormation through the pre-signed URL it gave us."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:1000],
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
        }
    ).encode()
    req = urllib.request.Request(
        event["ResponseURL"],
        data=body,
        method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(req, timeout=30):
        pass


def handle(event: dict[str, Any], send: Sender) -> str:
    props = event["ResourceProperties"]
    endpoint, roles = props["Endpoint"], list(props["Roles"])
    if event["RequestType"] == "Delete":
        remove(endpoint, roles, send)
    else:
        apply(endpoint, roles, send)
    return f"{endpoint}#" + ",".join(r["Name"] for r in roles)


def handler(event: dict[str, Any], context: Any) -> None:
    physical_id = event.get("PhysicalResourceId") or "opensearch-role-mapping"
    try:
        send = signed_sender(os.environ["AWS_REGION"])
        physical_id = handle(event, send)
        respond(event, "SUCCESS", "role mapping applied", physical_id)
    except Exception as exc:
        logger.exception("role mapping failed")
        # A failed delete must not wedge the stack: the domain is retained anyway.
        status = "SUCCESS" if event["RequestType"] == "Delete" else "FAILED"
        respond(event, status, f"{type(exc).__name__}: {exc}", physical_id)
