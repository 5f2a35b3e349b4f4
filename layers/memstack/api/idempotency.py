"""``Idempotency-Key`` on ``POST /v1/memories``: Powertools idempotency, persisted by configuration.

In AWS the records live in the idempotency DynamoDB table (Powertools'
``DynamoDBPersistenceLayer``, table layout is its default). On a laptop they
live in the embedded SQLite file, in its ``kv`` table, through
``SqlitePersistenceLayer`` below, which gives the same guarantees as the
DynamoDB conditional put: a key can be claimed only when it is absent, expired,
or stuck in progress past its in-progress expiry.

A recorded answer lists the user's message ids, so erasing a user removes
their records: each record carries its owner (``erasure_key``, a hash of
tenant and user, never the ids themselves) and ``erase_user`` deletes the
records of that owner. In DynamoDB that is a filtered scan of the table
(erase is rare and the table holds only unexpired records, so no index is
kept for it).

The idempotency key is (tenant, header value); the request body is the
payload hash, so reusing a key with a different body is an error instead of
a silent replay of the first answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.idempotency import (
    BasePersistenceLayer,
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from memstack.domain.erasure import erasure_key
from memstack.settings import Settings

if TYPE_CHECKING:
    from memstack.adapters.embedded.database import Database

NAMESPACE = "idempotency"


class _OwnedRecords(BasePersistenceLayer):
    """Remembers, per thread, whose request is being recorded (a hash of tenant and user)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._owner = threading.local()

    def _remember_owner(self, data: dict[str, Any]) -> None:
        self._owner.key = _owner_key(data)

    def _current_owner(self) -> str | None:
        return getattr(self._owner, "key", None)

    def save_inprogress(self, data: dict[str, Any], remaining_time_in_millis: int | None = None) -> None:
        self._remember_owner(data)
        super().save_inprogress(data, remaining_time_in_millis)

    def save_success(self, data: dict[str, Any], result: dict) -> None:
        self._remember_owner(data)
        super().save_success(data, result)


class OwnedDynamoDBPersistenceLayer(_OwnedRecords, DynamoDBPersistenceLayer):
    """Powertools' DynamoDB records, each answer tagged with its owner so an erase can find it."""

    owner_attr = "owner"

    def _update_record(self, data_record: DataRecord) -> None:
        super()._update_record(data_record)  # the answer (it lists message ids) is stored here
        owner = self._current_owner()
        if owner is not None:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._get_key(data_record.idempotency_key),
                UpdateExpression="SET #owner = :owner",
                ExpressionAttributeNames={"#owner": self.owner_attr},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )

    def erase_user(self, tenant: str, user_id: str) -> int:
        """Delete every record of the user; returns how many."""
        keys: list[dict[str, Any]] = []
        scan: dict[str, Any] = {
            "TableName": self.table_name,
            "FilterExpression": "#owner = :owner",
            "ProjectionExpression": "#id",
            "ExpressionAttributeNames": {"#owner": self.owner_attr, "#id": self.key_attr},
            "ExpressionAttributeValues": {":owner": {"S": erasure_key(tenant, user_id)}},
        }
        while True:
            page = self.client.scan(**scan)
            keys += [{self.key_attr: item[self.key_attr]} for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        for key in keys:
            self.client.delete_item(TableName=self.table_name, Key=key)
        return len(keys)


class SqlitePersistenceLayer(_OwnedRecords):
    """Powertools idempotency records in the embedded SQLite file (``kv`` table)."""

    def __init__(self, db: Database) -> None:
        super().__init__()
        self.db = db

    def erase_user(self, tenant: str, user_id: str) -> int:
        """Forget every recorded request of the user (their answers list the user's message ids)."""
        with self.db.write() as conn:
            return int(
                conn.execute(
                    "DELETE FROM kv WHERE namespace = ? AND json_extract(value, '$.owner') = ?",
                    (NAMESPACE, erasure_key(tenant, user_id)),
                ).rowcount
            )

    @staticmethod
    def _to_record(key: str, value: str) -> DataRecord:
        data = json.loads(value)
        return DataRecord(
            idempotency_key=key,
            status=data["status"],
            expiry_timestamp=data.get("expiry"),
            in_progress_expiry_timestamp=data.get("in_progress_expiry"),
            response_data=data.get("response_data", ""),
            payload_hash=data.get("payload_hash", ""),
        )

    def _to_value(self, record: DataRecord) -> str:
        return json.dumps(
            {
                "owner": self._current_owner(),
                "status": record.status,
                "expiry": record.expiry_timestamp,
                "in_progress_expiry": record.in_progress_expiry_timestamp,
                "response_data": record.response_data,
                "payload_hash": record.payload_hash,
            }
        )

    def _get_record(self, idempotency_key: str) -> DataRecord:
        row = (
            self.db.read()
            .execute("SELECT value FROM kv WHERE namespace = ? AND key = ?", (NAMESPACE, idempotency_key))
            .fetchone()
        )
        if row is None:
            raise IdempotencyItemNotFoundError
        return self._to_record(idempotency_key, row["value"])

    def _put_record(self, data_record: DataRecord) -> None:
        now = time.time()
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT value FROM kv WHERE namespace = ? AND key = ?",
                (NAMESPACE, data_record.idempotency_key),
            ).fetchone()
            if row is not None:
                old = self._to_record(data_record.idempotency_key, row["value"])
                expired = old.expiry_timestamp is not None and old.expiry_timestamp < now
                stuck = (
                    old.status == "INPROGRESS"
                    and old.in_progress_expiry_timestamp is not None
                    and old.in_progress_expiry_timestamp < now * 1000
                )
                if not (expired or stuck):
                    # Same checks as the DynamoDB layer: a different body under this key is an error.
                    self._validate_payload(data_payload=data_record, stored_data_record=old)
                    raise IdempotencyItemAlreadyExistsError(old_data_record=old)
            conn.execute(
                "INSERT OR REPLACE INTO kv (namespace, key, value, expires_at) VALUES (?, ?, ?, ?)",
                (
                    NAMESPACE,
                    data_record.idempotency_key,
                    self._to_value(data_record),
                    data_record.expiry_timestamp,
                ),
            )
            # Expired records are garbage: drop them while holding the write lock anyway.
            conn.execute("DELETE FROM kv WHERE namespace = ? AND expires_at < ?", (NAMESPACE, now))

    def _update_record(self, data_record: DataRecord) -> None:
        with self.db.write() as conn:
            conn.execute(
                "UPDATE kv SET value = ?, expires_at = ? WHERE namespace = ? AND key = ?",
                (
                    self._to_value(data_record),
                    data_record.expiry_timestamp,
                    NAMESPACE,
                    data_record.idempotency_key,
                ),
            )

    def _delete_record(self, data_record: DataRecord) -> None:
        with self.db.write() as conn:
            conn.execute(
                "DELETE FROM kv WHERE namespace = ? AND key = ?", (NAMESPACE, data_record.idempotency_key)
            )


def _owner_key(data: dict[str, Any]) -> str | None:
    """``erasure_key`` of the add request ``data`` ({"tenant", "key", "body": {"user_id", ...}})."""
    body = data.get("body") if isinstance(data, dict) else None
    if not isinstance(body, dict) or "tenant" not in data or "user_id" not in body:
        return None
    return erasure_key(str(data["tenant"]), str(body["user_id"]))


def build_persistence(
    settings: Settings, *, dynamodb_client: Any = None
) -> tuple[BasePersistenceLayer, Callable[[], None]]:
    """The persistence layer the settings choose, and a function that releases it."""
    if settings.aws.idempotency_table:
        layer = OwnedDynamoDBPersistenceLayer(
            table_name=settings.aws.idempotency_table, boto3_client=dynamodb_client
        )
        return layer, lambda: None
    # Imported here: the Lambda function (DynamoDB) never loads the embedded store.
    from memstack.adapters.embedded.database import Database

    db = Database(settings.db_path)
    return SqlitePersistenceLayer(db), db.close


class LocalRequestBudget:
    """Stands in for the Lambda context off Lambda: how long one request may hold its key.

    Powertools marks a key "in progress" until the time the invocation has
    left; if a request dies mid-way, a retry may claim the key after that
    instead of waiting for the record's full expiry. In Lambda the real
    context replaces this on every request.
    """

    def __init__(self, millis: int = 60_000) -> None:
        self.millis = millis

    def get_remaining_time_in_millis(self) -> int:
        return self.millis


def idempotency_config(settings: Settings) -> IdempotencyConfig:
    config = IdempotencyConfig(
        event_key_jmespath="[tenant, key]",
        payload_validation_jmespath="body",
        expires_after_seconds=settings.api.idempotency_expires_seconds,
        raise_on_no_idempotency_key=True,
    )
    config.register_lambda_context(LocalRequestBudget())  # type: ignore[arg-type]
    return config


def make_idempotent(
    func: Callable[..., dict[str, Any]], persistence: BasePersistenceLayer, config: IdempotencyConfig
) -> Callable[..., dict[str, Any]]:
    """Wrap ``func(*, request)``: ``request`` is {"tenant", "key", "body"}; the result must be JSON."""
    wrapped: Callable[..., dict[str, Any]] = idempotent_function(
        func,
        data_keyword_argument="request",
        persistence_store=persistence,
        config=config,
        key_prefix="memstack-add",
    )
    return wrapped
