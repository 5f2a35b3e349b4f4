"""An ``rds-data`` client that answers from the test PostgreSQL, in the Data API's wire shapes.

It lets the whole conformance suite run through ``DataApiExecutor`` against a
real database (moto has no RDS Data API). Every request is first validated
against botocore's own model of the service, so a parameter the real API
would reject fails here too; results come back as the API sends them
(``records`` of typed fields, ``columnMetadata``), and a value of a type the
adapter promises never to select (timestamps, numerics, JSON) is an error,
which keeps the adapter's SQL portable. Unique violations come back as the
API reports them: a ``DatabaseErrorException`` carrying the SQLSTATE.
"""

from __future__ import annotations

import uuid
from typing import Any

import botocore.session
import psycopg
from botocore.exceptions import ClientError
from botocore.validate import validate_parameters
from memstack.adapters.postgres.psycopg_executor import pyformat

_MODEL = botocore.session.get_session().get_service_model("rds-data")


def _value(field: dict[str, Any]) -> Any:
    if field.get("isNull"):
        return None
    return next(iter(field.values()))


def _field(value: Any) -> dict[str, Any]:
    if value is None:
        return {"isNull": True}
    if isinstance(value, bool):
        return {"booleanValue": value}
    if isinstance(value, int):
        return {"longValue": value}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, bytes | memoryview):
        return {"blobValue": bytes(value)}
    if isinstance(value, str):
        return {"stringValue": value}
    raise TypeError(f"the adapter selected a {type(value).__name__}, which it promises not to")


class DataApiEmulator:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._autocommit = psycopg.connect(dsn, autocommit=True)
        self._transactions: dict[str, psycopg.Connection[Any]] = {}
        self.calls: list[str] = []

    def _check(self, operation: str, kwargs: dict[str, Any]) -> None:
        self.calls.append(operation)
        validate_parameters(kwargs, _MODEL.operation_model(operation).input_shape)

    def execute_statement(self, **kwargs: Any) -> dict[str, Any]:
        self._check("ExecuteStatement", kwargs)
        tid = kwargs.get("transactionId")
        conn = self._transactions[tid] if tid else self._autocommit
        params = {p["name"]: _value(p["value"]) for p in kwargs.get("parameters", [])}
        try:
            with conn.cursor() as cur:
                cur.execute(pyformat(kwargs["sql"]) if params else kwargs["sql"], params or None)
                if cur.description is None:
                    return {"numberOfRecordsUpdated": max(cur.rowcount, 0), "records": []}
                rows = cur.fetchall()
                names = [d.name for d in cur.description]
        except psycopg.errors.UniqueViolation as exc:
            raise ClientError(
                {"Error": {"Code": "DatabaseErrorException", "Message": f"ERROR: {exc}; SQLState: 23505"}},
                "ExecuteStatement",
            ) from exc
        out: dict[str, Any] = {"records": [[_field(v) for v in row] for row in rows]}
        if kwargs.get("includeResultMetadata"):
            out["columnMetadata"] = [{"name": n, "label": n} for n in names]
        return out

    def begin_transaction(self, **kwargs: Any) -> dict[str, Any]:
        self._check("BeginTransaction", kwargs)
        tid = uuid.uuid4().hex
        conn = psycopg.connect(self.dsn, autocommit=True)
        conn.execute("BEGIN")
        self._transactions[tid] = conn
        return {"transactionId": tid}

    def _finish(self, operation: str, kwargs: dict[str, Any], sql: str) -> dict[str, Any]:
        self._check(operation, kwargs)
        conn = self._transactions.pop(kwargs["transactionId"])
        conn.execute(sql)
        conn.close()
        return {"transactionStatus": "Transaction Committed" if sql == "COMMIT" else "Rollback Complete"}

    def commit_transaction(self, **kwargs: Any) -> dict[str, Any]:
        return self._finish("CommitTransaction", kwargs, "COMMIT")

    def rollback_transaction(self, **kwargs: Any) -> dict[str, Any]:
        return self._finish("RollbackTransaction", kwargs, "ROLLBACK")

    def close(self) -> None:
        for conn in self._transactions.values():
            conn.close()
        self._autocommit.close()
