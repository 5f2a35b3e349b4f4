"""Cost report fixtures under moto: Cost Explorer (results injected), SNS (delivered to SQS), CloudWatch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import requests
from moto import mock_aws

CE_RESULTS_URL = "http://motoapi.amazonaws.com/moto-api/static/ce/cost-and-usage-results"


def ce_page(
    day: str, next_day: str, costs: dict[str, str], token: str | None = None, estimated: bool = False
) -> dict[str, Any]:
    """One get_cost_and_usage response page, grouped by SERVICE, as Cost Explorer shapes it."""
    page: dict[str, Any] = {
        "ResultsByTime": [
            {
                "TimePeriod": {"Start": day, "End": next_day},
                "Total": {},
                "Groups": [
                    {"Keys": [svc], "Metrics": {"UnblendedCost": {"Amount": amount, "Unit": "USD"}}}
                    for svc, amount in costs.items()
                ],
                "Estimated": estimated,
            }
        ],
        "DimensionValueAttributes": [],
        "GroupDefinitions": [{"Type": "DIMENSION", "Key": "SERVICE"}],
    }
    if token:
        page["NextPageToken"] = token
    return page


def inject_ce_results(*pages: dict[str, Any]) -> None:
    """Queue responses in moto's Cost Explorer: each distinct request takes the next one."""
    resp = requests.post(CE_RESULTS_URL, data=json.dumps({"results": list(pages)}), timeout=5)
    resp.raise_for_status()


class Aws:
    def __init__(self) -> None:
        self.ce = boto3.client("ce", region_name="us-east-1")
        self.sns = boto3.client("sns", region_name="us-east-1")
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        self.cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        self.topic_arn = self.sns.create_topic(Name="memstack-alerts")["TopicArn"]
        self.inbox_url = self.sqs.create_queue(QueueName="alert-inbox")["QueueUrl"]
        inbox_arn = self.sqs.get_queue_attributes(QueueUrl=self.inbox_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.sns.subscribe(
            TopicArn=self.topic_arn,
            Protocol="sqs",
            Endpoint=inbox_arn,
            Attributes={"RawMessageDelivery": "false"},
        )

    def alerts(self) -> list[dict[str, Any]]:
        """The notifications SNS delivered to the topic's subscriber."""
        msgs = self.sqs.receive_message(QueueUrl=self.inbox_url, MaxNumberOfMessages=10).get("Messages", [])
        return [json.loads(m["Body"]) for m in msgs]


@pytest.fixture
def aws() -> Iterator[Aws]:
    with mock_aws():
        yield Aws()
