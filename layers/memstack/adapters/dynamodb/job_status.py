"""Job status on DynamoDB, in the short-term table (every AWS tier has it; no table of its own to grant).

Two items per job, both with the table's TTL attribute ``expires_at``:

* the **status**, ``pk = "JOB#" + hash(tenant, job id)``, ``sk = "JOB"``: one
  keyed read answers ``GET /v1/jobs/{id}`` for that tenant alone (another
  tenant's id hashes elsewhere). A worker's report is an ``UpdateItem``
  conditioned on the item existing, so a job that runs on after its user was
  erased never writes it back.
* a **pointer** in the user's partition, ``pk = "<tenant>#<user>"``,
  ``sk = "job#<job id>"``: how an erase finds the user's statuses with one
  consistent query (the STM erase then deletes the partition whole). It lives
  as long as its status can: a status changes within the SQS retention of its
  message (4 days) after being queued, and lives ``ttl`` after its last change.

A job sent again is written again (a put, not a condition): the two items of
many jobs go in ``BatchWriteItem`` calls of 25.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from memstack.adapters.aws_errors import aws_dependency
from memstack.adapters.dynamodb.calls import batch_write
from memstack.adapters.dynamodb.stm import JOB_PREFIX, partition_key
from memstack.errors import SettingsError
from memstack.ports.job_status import JobChange, JobError, JobStatus

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.adapters.embedded.database import Database
    from memstack.settings import Settings

JOBS = "DynamoDB (job status)"
STATUS_PREFIX = "JOB#"
STATUS_SORT = "JOB"
#: how long after it was queued a status may still change (SQS keeps a message 4 days)
_CHANGES_WITHIN = timedelta(days=4, hours=1)


def status_key(tenant: str, job_id: str) -> dict[str, Any]:
    digest = hashlib.blake2b(f"{tenant}\x1f{job_id}".encode(), digest_size=16).hexdigest()
    return {"pk": {"S": STATUS_PREFIX + digest}, "sk": {"S": STATUS_SORT}}


def _epoch(value: datetime) -> dict[str, str]:
    return {"N": repr(value.timestamp())}


def _ttl(value: datetime) -> dict[str, str]:
    return {"N": str(math.ceil(value.timestamp()))}


def _error(error: JobError | None) -> dict[str, Any]:
    return {"S": error.model_dump_json()} if error else {"NULL": True}


class DynamoDbJobStatuses:
    def __init__(self, table_name: str, client: Any = None, region: str | None = None) -> None:
        if not table_name:
            raise SettingsError("job status on DynamoDB needs MEMSTACK_STM_TABLE")
        self.table = table_name
        self._client = client
        self._region = region

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("dynamodb", region_name=self._region)
        return self._client

    @aws_dependency(JOBS)
    def put(self, statuses: list[JobStatus]) -> None:
        requests = []
        for s in statuses:
            pointer = {
                "pk": {"S": partition_key(s.tenant, s.user_id)},
                "sk": {"S": JOB_PREFIX + s.id},
                "expires_at": _ttl(s.expires_at + _CHANGES_WITHIN),
            }
            status = {
                **status_key(s.tenant, s.id),
                "tenant": {"S": s.tenant},
                "user_id": {"S": s.user_id},
                "job_id": {"S": s.id},
                "job_type": {"S": s.type},
                "state": {"S": s.state},
                "attempts": {"N": str(s.attempts)},
                "job_error": _error(s.error),
                "queued_at": _epoch(s.queued_at),
                "updated_at": _epoch(s.updated_at),
                "expires_at": _ttl(s.expires_at),
            }
            # The pointer first: a status is never written that an erase could not find.
            requests += [{"PutRequest": {"Item": pointer}}, {"PutRequest": {"Item": status}}]
        for start in range(0, len(requests), 24):
            batch_write(self.client, self.table, requests[start : start + 24])

    @aws_dependency(JOBS)
    def change(self, tenant: str, user_id: str, job_id: str, change: JobChange) -> bool:
        try:
            self.client.update_item(
                TableName=self.table,
                Key=status_key(tenant, job_id),
                UpdateExpression="SET #s = :s, attempts = :a, job_error = :e, updated_at = :u, "
                "expires_at = :x",
                ConditionExpression="attribute_exists(pk) AND user_id = :user",
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={
                    ":s": {"S": change.state},
                    ":a": {"N": str(change.attempts)},
                    ":e": _error(change.error),
                    ":u": _epoch(change.updated_at),
                    ":x": _ttl(change.expires_at),
                    ":user": {"S": user_id},
                },
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    @aws_dependency(JOBS)
    def get(self, tenant: str, job_id: str) -> JobStatus | None:
        item = self.client.get_item(
            TableName=self.table, Key=status_key(tenant, job_id), ConsistentRead=True
        ).get("Item")
        if not item or item["tenant"]["S"] != tenant:
            return None
        error = item.get("job_error", {}).get("S")
        return JobStatus(
            id=item["job_id"]["S"],
            tenant=tenant,
            user_id=item["user_id"]["S"],
            type=item["job_type"]["S"],
            state=item["state"]["S"],
            attempts=int(item["attempts"]["N"]),
            error=JobError.model_validate(json.loads(error)) if error else None,
            queued_at=datetime.fromtimestamp(float(item["queued_at"]["N"]), UTC),
            updated_at=datetime.fromtimestamp(float(item["updated_at"]["N"]), UTC),
            expires_at=datetime.fromtimestamp(float(item["expires_at"]["N"]), UTC),
        )

    @aws_dependency(JOBS)
    def erase_user(self, tenant: str, user_id: str) -> int:
        keys: list[dict[str, Any]] = []
        query: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :job)",
            "ExpressionAttributeValues": {
                ":pk": {"S": partition_key(tenant, user_id)},
                ":job": {"S": JOB_PREFIX},
            },
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
        }
        while True:
            page = self.client.query(**query)
            for pointer in page.get("Items", []):
                keys += [status_key(tenant, pointer["sk"]["S"][len(JOB_PREFIX) :]), pointer]
            if "LastEvaluatedKey" not in page:
                break
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        for start in range(0, len(keys), 24):
            batch_write(
                self.client, self.table, [{"DeleteRequest": {"Key": k}} for k in keys[start : start + 24]]
            )
        return len(keys) // 2


def build(settings: Settings, clients: Mapping[str, Any], db: Database | None) -> DynamoDbJobStatuses:
    """Job status beside the DynamoDB STM, in its table (``factory.JOB_STATUSES``)."""
    return DynamoDbJobStatuses(
        settings.aws.stm_table or "", client=clients.get("dynamodb"), region=settings.aws.aws_region
    )
