"""``SqlExecutor`` over the RDS Data API: SQL as HTTPS calls, authorised by IAM, no VPC or NAT.

Lambda functions reach Aurora this way without sitting in the VPC: the API
holds the connections, the database credentials stay in Secrets Manager
(``secret_arn``), and the function's role only needs ``rds-data`` on the
cluster and read access to that one secret (the stack grants both).

A cluster that scaled to zero answers ``DatabaseResumingException`` while it
wakes (about 15 s); the executor waits for it up to ``resume_wait_seconds``
before giving up with ``StoreUnavailable``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from memstack.adapters.postgres.executor import (
    DuplicateKey,
    Param,
    Params,
    Row,
    SqlExecutor,
    StoreUnavailable,
)

#: error codes of the Data API that mean "the database is not there right now"
_UNAVAILABLE = frozenset(
    {
        "DatabaseUnavailableException",
        "ServiceUnavailableError",
        "StatementTimeoutException",
        "InternalServerErrorException",
        "ThrottlingException",
        "TooManyRequestsException",
    }
)
_RESUMING = "DatabaseResumingException"
#: the Data API's limits are 4 MiB per request and 1 MiB of result data; keep a margin
REQUEST_BYTES = 3_000_000
RESULT_BYTES = 700_000


def encode_param(name: str, value: Param) -> dict[str, Any]:
    if value is None:
        field: dict[str, Any] = {"isNull": True}
    elif isinstance(value, bool):  # before int: bool is an int
        field = {"booleanValue": value}
    elif isinstance(value, int):
        field = {"longValue": value}
    elif isinstance(value, float):
        field = {"doubleValue": value}
    elif isinstance(value, bytes):
        field = {"blobValue": value}
    else:
        field = {"stringValue": value}
    return {"name": name, "value": field}


def decode_field(field: dict[str, Any]) -> Any:
    if field.get("isNull"):
        return None
    for key in ("stringValue", "longValue", "doubleValue", "booleanValue", "blobValue"):
        if key in field:
            return field[key]
    raise ValueError(f"unsupported Data API value {sorted(field)}")


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


class DataApiExecutor:
    """Statements through ``rds-data`` on ``cluster_arn`` as the user in ``secret_arn``."""

    max_request_bytes: int | None = REQUEST_BYTES
    max_result_bytes: int | None = RESULT_BYTES

    def __init__(
        self,
        cluster_arn: str,
        secret_arn: str,
        database: str,
        *,
        client: Any | None = None,
        region: str | None = None,
        resume_wait_seconds: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cluster_arn = cluster_arn
        self.secret_arn = secret_arn
        self.database = database
        self._client = client
        self._region = region
        self.resume_wait_seconds = resume_wait_seconds
        self._sleep = sleep

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("rds-data", region_name=self._region)
        return self._client

    def _call(self, operation: str, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        waited = 0.0
        delay = 1.0
        while True:
            try:
                return getattr(self.client, operation)(
                    resourceArn=self.cluster_arn, secretArn=self.secret_arn, **kwargs
                )
            except ClientError as exc:
                code = _error_code(exc)
                message = str(exc)
                if code == _RESUMING and waited < self.resume_wait_seconds:
                    self._sleep(delay)
                    waited += delay
                    delay = min(delay * 2, 5.0)
                    continue
                if "23505" in message or "duplicate key value" in message:
                    raise DuplicateKey(message) from exc
                if code == _RESUMING:
                    raise StoreUnavailable("the Aurora cluster is still resuming from zero capacity") from exc
                if code in _UNAVAILABLE or "Communications link failure" in message:
                    raise StoreUnavailable(code or "the Data API did not answer") from exc
                raise
            except BotoCoreError as exc:  # endpoint unreachable, timeouts
                raise StoreUnavailable(type(exc).__name__) from exc

    def _execute(self, sql: str, params: Params | None, transaction_id: str | None) -> list[Row]:
        kwargs: dict[str, Any] = {
            "database": self.database,
            "sql": sql,
            "includeResultMetadata": True,
            "parameters": [encode_param(k, v) for k, v in (params or {}).items()],
        }
        if transaction_id is not None:
            kwargs["transactionId"] = transaction_id
        response = self._call("execute_statement", **kwargs)
        columns = [c.get("label") or c.get("name") for c in response.get("columnMetadata", [])]
        return [
            {name: decode_field(field) for name, field in zip(columns, record, strict=True)}
            for record in response.get("records", [])
        ]

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        return self._execute(sql, params, None)

    @contextmanager
    def transaction(self) -> Iterator[SqlExecutor]:
        transaction_id = self._call("begin_transaction", database=self.database)["transactionId"]
        tx = _DataApiTransaction(self, transaction_id)
        try:
            yield tx
        except BaseException:
            # The database ends an abandoned transaction itself; the first error is the one to report.
            with contextlib.suppress(Exception):
                self._call("rollback_transaction", transactionId=transaction_id)
            raise
        self._call("commit_transaction", transactionId=transaction_id)

    def close(self) -> None:
        pass


class _DataApiTransaction:
    max_request_bytes: int | None = REQUEST_BYTES
    max_result_bytes: int | None = RESULT_BYTES

    def __init__(self, owner: DataApiExecutor, transaction_id: str) -> None:
        self.owner = owner
        self.transaction_id = transaction_id

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        return self.owner._execute(sql, params, self.transaction_id)

    @contextmanager
    def transaction(self) -> Iterator[SqlExecutor]:
        yield self  # the Data API has no savepoints; the outer transaction covers it

    def close(self) -> None:
        pass
