"""The Data API executor's requests and error handling, on a stubbed ``rds-data`` client."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber
from memstack.adapters.postgres.data_api_executor import DataApiExecutor
from memstack.adapters.postgres.executor import DuplicateKey, StoreUnavailable
from memstack.api.errors import http_status

from tests.conformance.conftest import SECRET_ARN

from .test_executors import CLUSTER_ARN

BASE = {"resourceArn": CLUSTER_ARN, "secretArn": SECRET_ARN}


@pytest.fixture
def stubbed() -> Any:
    client = boto3.client("rds-data", region_name="us-east-1")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def _executor(client: Any, sleeps: list[float] | None = None) -> DataApiExecutor:
    return DataApiExecutor(
        CLUSTER_ARN,
        SECRET_ARN,
        "memstack",
        client=client,
        resume_wait_seconds=10,
        sleep=(sleeps.append if sleeps is not None else lambda _s: None),
    )


def test_a_query_sends_typed_parameters_and_decodes_typed_fields(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_response(
        "execute_statement",
        {
            "columnMetadata": [{"name": c, "label": c} for c in ("id", "n", "score", "ok", "blob", "gone")],
            "records": [
                [
                    {"stringValue": "m1"},
                    {"longValue": 7},
                    {"doubleValue": 0.5},
                    {"booleanValue": True},
                    {"blobValue": b"\x00\x01"},
                    {"isNull": True},
                ]
            ],
        },
        {
            **BASE,
            "database": "memstack",
            "sql": "SELECT ... WHERE a = :a",
            "includeResultMetadata": True,
            "parameters": [
                {"name": "s", "value": {"stringValue": "x"}},
                {"name": "i", "value": {"longValue": 3}},
                {"name": "f", "value": {"doubleValue": 1.5}},
                {"name": "b", "value": {"booleanValue": False}},
                {"name": "raw", "value": {"blobValue": b"\xff"}},
                {"name": "none", "value": {"isNull": True}},
            ],
        },
    )
    rows = _executor(client).query(
        "SELECT ... WHERE a = :a", {"s": "x", "i": 3, "f": 1.5, "b": False, "raw": b"\xff", "none": None}
    )
    assert rows == [{"id": "m1", "n": 7, "score": 0.5, "ok": True, "blob": b"\x00\x01", "gone": None}]


def test_a_transaction_threads_its_id_and_commits(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_response("begin_transaction", {"transactionId": "tx-1"}, {**BASE, "database": "memstack"})
    stub.add_response(
        "execute_statement",
        {"records": []},
        {
            **BASE,
            "database": "memstack",
            "sql": "UPDATE x",
            "includeResultMetadata": True,
            "parameters": [],
            "transactionId": "tx-1",
        },
    )
    stub.add_response(
        "commit_transaction",
        {"transactionStatus": "Transaction Committed"},
        {**BASE, "transactionId": "tx-1"},
    )
    with _executor(client).transaction() as tx:
        assert tx.query("UPDATE x") == []


def test_a_failed_transaction_rolls_back(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_response("begin_transaction", {"transactionId": "tx-2"}, {**BASE, "database": "memstack"})
    stub.add_response(
        "rollback_transaction", {"transactionStatus": "Rollback Complete"}, {**BASE, "transactionId": "tx-2"}
    )
    with pytest.raises(ValueError), _executor(client).transaction():
        raise ValueError("boom")


def test_a_resuming_cluster_is_waited_for(stubbed: Any) -> None:
    client, stub = stubbed
    for _ in range(3):
        stub.add_client_error("execute_statement", "DatabaseResumingException", "resuming", 400)
    stub.add_response(
        "execute_statement", {"records": [[{"longValue": 1}]], "columnMetadata": [{"name": "one"}]}
    )
    sleeps: list[float] = []
    assert _executor(client, sleeps).query("SELECT 1 AS one") == [{"one": 1}]
    assert sleeps == [1.0, 2.0, 4.0]


def test_a_cluster_that_does_not_resume_in_time_is_unavailable(stubbed: Any) -> None:
    client, stub = stubbed
    for _ in range(5):
        stub.add_client_error("execute_statement", "DatabaseResumingException", "resuming", 400)
    with pytest.raises(StoreUnavailable, match="still resuming") as caught:
        _executor(client).query("SELECT 1")
    assert http_status(caught.value) == 503


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        (
            "DatabaseErrorException",
            'ERROR: duplicate key value violates unique constraint "memories_pkey"; SQLState: 23505',
            DuplicateKey,
        ),
        ("DatabaseUnavailableException", "The database is unavailable", StoreUnavailable),
        ("StatementTimeoutException", "timed out", StoreUnavailable),
        ("BadRequestException", "Communications link failure", StoreUnavailable),
    ],
)
def test_errors_are_translated(stubbed: Any, code: str, message: str, expected: type[Exception]) -> None:
    client, stub = stubbed
    stub.add_client_error("execute_statement", code, message, 400)
    with pytest.raises(expected):
        _executor(client).query("INSERT ...")


def test_a_mistake_in_sql_is_not_hidden_as_unavailable(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_client_error(
        "execute_statement", "BadRequestException", 'ERROR: syntax error at or near "SELEC"', 400
    )
    with pytest.raises(Exception, match="syntax error") as caught:
        _executor(client).query("SELEC 1")
    assert not isinstance(caught.value, StoreUnavailable)


def test_an_unreachable_endpoint_is_unavailable() -> None:
    class Unreachable:
        def execute_statement(self, **_kwargs: Any) -> Any:
            raise EndpointConnectionError(endpoint_url="https://rds-data.us-east-1.amazonaws.com")

    with pytest.raises(StoreUnavailable, match="EndpointConnectionError"):
        _executor(Unreachable()).query("SELECT 1")
