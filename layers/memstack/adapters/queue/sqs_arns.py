"""What the worker-side SQS helpers share: a lazily created client and queue URLs by ARN.

Lambda's SQS records name their queue by ARN; the API calls take its URL,
asked once per container.
"""

from __future__ import annotations

import json
import math
from typing import Any


class SqsByArn:
    def __init__(self, client: Any = None, region: str | None = None) -> None:
        self._client = client
        self._region = region
        self._urls: dict[str, str] = {}

    @property
    def client(self) -> Any:
        if self._client is None:  # created on first use: importing a handler costs no AWS call
            import boto3

            self._client = boto3.client("sqs", region_name=self._region)
        return self._client

    def queue_url(self, arn: str) -> str:
        """The URL of the queue ``arn:aws:sqs:<region>:<account>:<name>`` (asked once per container)."""
        if arn not in self._urls:
            _, _, _, _, account, name = arn.split(":", 5)
            answer = self.client.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)
            self._urls[arn] = answer["QueueUrl"]
        return self._urls[arn]


class SqsReceiveLimit(SqsByArn):
    """How many receives a queue allows before it dead-letters a message (its ``RedrivePolicy``)."""

    def __init__(self, client: Any = None, region: str | None = None) -> None:
        super().__init__(client, region)
        self._limits: dict[str, float] = {}

    def max_receives(self, arn: str) -> float:
        """``maxReceiveCount`` of the queue ``arn`` (asked once per container); no policy: never."""
        if arn not in self._limits:
            attrs = self.client.get_queue_attributes(
                QueueUrl=self.queue_url(arn), AttributeNames=["RedrivePolicy"]
            ).get("Attributes", {})
            policy = attrs.get("RedrivePolicy")
            self._limits[arn] = int(json.loads(policy)["maxReceiveCount"]) if policy else math.inf
        return self._limits[arn]
