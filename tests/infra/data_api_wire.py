"""The RDS Data API at the wire, answered from the test PostgreSQL (moto has no Data API).

A botocore ``before-call`` hook on a boto3 session: a handler's own
``rds-data`` client serialises its request as the real one would, and the
hook hands the request's parameters to ``tests/data_api_emulator.py``
(which validates them against botocore's model and runs the SQL on the
test server), returning its answer as the parsed response. A
``ClientError`` the emulator raises (a unique violation) reaches the caller
as the real API's would. The cluster and secret ARNs are checked: a call
naming another cluster or secret than the template's fails here.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSResponse
from moto.core.botocore_stubber import MockRawResponse

from tests.data_api_emulator import DataApiEmulator

_METHODS = {
    "ExecuteStatement": "execute_statement",
    "BeginTransaction": "begin_transaction",
    "CommitTransaction": "commit_transaction",
    "RollbackTransaction": "rollback_transaction",
}


def _blobs_decoded(params: dict[str, Any]) -> dict[str, Any]:
    """rest-json sends a blob as base64 text; the emulator validates against the model (bytes)."""
    for parameter in params.get("parameters", []):
        value = parameter.get("value", {})
        if "blobValue" in value:
            value["blobValue"] = base64.b64decode(value["blobValue"])
    return params


@dataclass
class DataApiWire:
    emulator: DataApiEmulator
    cluster_arn: str
    secret_arn: str

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        method = _METHODS.get(model.name)
        if method is None:
            raise AssertionError(f"the Data API emulator has no {model.name}")
        body = params.get("body") or b"{}"
        api = _blobs_decoded(json.loads(body))
        if (api.get("resourceArn"), api.get("secretArn")) != (self.cluster_arn, self.secret_arn):
            raise AssertionError(f"a Data API call for {api.get('resourceArn')} / {api.get('secretArn')}")
        answer = getattr(self.emulator, method)(**api)
        raw = AWSResponse(params.get("url", ""), 200, {}, MockRawResponse(b"{}"))
        return raw, {**answer, "ResponseMetadata": {"HTTPStatusCode": 200}}


def install(session: Any, wire: DataApiWire) -> None:
    """Answer ``rds-data`` on this boto3 session ahead of any other hook (moto's)."""
    session._session.get_component("event_emitter").register_first("before-call.rds-data", wire)
