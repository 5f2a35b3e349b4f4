"""moto SQS queues with DLQs, the Powertools idempotency table, and the SQS events Lambda receives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from memstack.settings import Settings, load_settings
from moto import mock_aws

REGION = "us-east-1"
IDEMPOTENCY_TABLE = "memstack-idempotency"
MAX_RECEIVES = 2


@dataclass
class Aws:
    sqs: Any
    ddb: Any
    urls: dict[str, str]
    dlqs: dict[str, str]
    arns: dict[str, str]


@pytest.fixture
def aws() -> Iterator[Aws]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        ddb = boto3.client("dynamodb", region_name=REGION)
        urls, dlqs, arns = {}, {}, {}
        for job_type, name in (("extract", "extraction"), ("consolidate", "consolidation")):
            dlq = sqs.create_queue(QueueName=f"memstack-{name}-dlq")["QueueUrl"]
            dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVES)})
            url = sqs.create_queue(
                QueueName=f"memstack-{name}", Attributes={"RedrivePolicy": policy, "VisibilityTimeout": "30"}
            )["QueueUrl"]
            urls[job_type], dlqs[job_type] = url, dlq
            arns[job_type] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
        # The Powertools default schema, as E provisions it.
        ddb.create_table(
            TableName=IDEMPOTENCY_TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        yield Aws(sqs, ddb, urls, dlqs, arns)


def sqs_settings(data_dir: Any, aws: Aws, **overrides: Any) -> Settings:
    """Settings of a service on these queues (hashing embedder), with ``overrides``."""
    return load_settings(
        data_dir=data_dir,
        embedder="hashing",
        queue_backend="sqs",
        extraction_queue_url=aws.urls["extract"],
        consolidation_queue_url=aws.urls["consolidate"],
        **overrides,
    )


def receive_all(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every visible message, hidden for the visibility timeout (as Lambda's poller does)."""
    out: list[dict[str, Any]] = []
    while msgs := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    ).get("Messages", []):
        out.extend(msgs)
    return out


def sqs_event(messages: list[dict[str, Any]], arn: str) -> dict[str, Any]:
    """The event the Lambda SQS event source mapping delivers."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {
                    name: {"stringValue": v["StringValue"], "dataType": v["DataType"]}
                    for name, v in m.get("MessageAttributes", {}).items()
                },
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


@dataclass
class FakeLambdaContext:
    function_name: str = "memstack-worker"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:memstack-worker"
    aws_request_id: str = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000
